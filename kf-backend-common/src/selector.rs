//! [`DeviceSelector`]: how a backend chooses its device, shared by every backend.

use std::fmt;
use std::str::FromStr;

use kf_core::DeviceKind;

/// A device as a backend lists it, seen by [`DeviceSelector::select`].
///
/// ```
/// use kf_backend_common::{DeviceSelector, SelectableDevice};
/// use kf_core::DeviceKind;
///
/// struct Dev(&'static str, DeviceKind);
/// impl SelectableDevice for Dev {
///     const SELECTOR_VAR: &'static str = "MY_DEVICE";
///     fn platform_index(&self) -> usize { 0 }
///     fn device_index(&self) -> usize { 0 }
///     fn name(&self) -> &str { self.0 }
///     fn platform(&self) -> &str { "" }
///     fn kind(&self) -> DeviceKind { self.1 }
/// }
/// let devices = [Dev("cpu0", DeviceKind::Cpu), Dev("gpu0", DeviceKind::Gpu)];
/// assert_eq!(DeviceSelector::Kind(DeviceKind::Cpu).select(&devices).map(|d| d.0), Some("cpu0"));
/// ```
pub trait SelectableDevice {
    /// The environment variable [`DeviceSelector::Auto`] reads (`KF_OPENCL_DEVICE`, …).
    const SELECTOR_VAR: &'static str;
    /// Index of the platform in the runtime's order (0 where there are no platforms).
    fn platform_index(&self) -> usize;
    /// Index of the device within its platform.
    fn device_index(&self) -> usize;
    /// The device's name.
    fn name(&self) -> &str;
    /// The platform's name (empty where there are no platforms).
    fn platform(&self) -> &str;
    /// The kind of device.
    fn kind(&self) -> DeviceKind;
    /// The runtime's own number of the device (CUDA's ordinal), where it has one; a bare
    /// number selects it ([`DeviceSelector::Ordinal`]). `None`: a bare number is a name part.
    fn ordinal(&self) -> Option<usize> {
        None
    }
    /// Whether anything but an explicit index may pick it.
    fn usable(&self) -> bool {
        true
    }
    /// Ranks a device below others of its kind (PoCL's slow CPU fallback): higher is worse.
    fn demotion(&self) -> u8 {
        0
    }
    /// Whether a lower-cased name part matches beyond name and platform (SYCL's backend).
    fn matches_more(&self, _needle: &str) -> bool {
        false
    }
}

/// How to choose a device; one syntax (`KF_OPENCL_DEVICE`, `KF_SYCL_DEVICE`,
/// `KF_CUDA_DEVICE`) for every backend.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DeviceSelector {
    /// The backend's variable when set, else the best usable device: a GPU, then an
    /// accelerator, then a CPU, demoted devices (PoCL) last, listing order breaking ties.
    #[default]
    Auto,
    /// The best usable device of this kind.
    Kind(DeviceKind),
    /// A usable device whose name equals this text, else one whose name or platform name
    /// contains it (case-insensitive; the best such device, as for `Auto`).
    NameContains(String),
    /// The device at `platform:device` indices as the backend's `list_devices` numbers them.
    Index {
        /// Platform index.
        platform: usize,
        /// Device index within the platform.
        device: usize,
    },
    /// The device with this runtime ordinal (CUDA); for runtimes without ordinals, the
    /// number is a name part as in [`DeviceSelector::NameContains`].
    Ordinal(usize),
}

impl DeviceSelector {
    /// Parses `cpu`, `gpu`, `accelerator`, `auto`, `P:D` (indices), `N` (an ordinal) or any
    /// other text (a name part).
    pub fn parse(text: &str) -> Self {
        let t = text.trim();
        match t.to_ascii_lowercase().as_str() {
            "" | "auto" | "default" => return DeviceSelector::Auto,
            "cpu" => return DeviceSelector::Kind(DeviceKind::Cpu),
            "gpu" => return DeviceSelector::Kind(DeviceKind::Gpu),
            "accelerator" | "acc" => return DeviceSelector::Kind(DeviceKind::Accelerator),
            _ => {}
        }
        if let Ok(ordinal) = t.parse() {
            return DeviceSelector::Ordinal(ordinal);
        }
        if let Some((p, d)) = t.split_once(':') {
            if let (Ok(platform), Ok(device)) = (p.trim().parse(), d.trim().parse()) {
                return DeviceSelector::Index { platform, device };
            }
        }
        DeviceSelector::NameContains(t.to_owned())
    }

    /// Picks a device from `devices`; `None` when nothing matches. Only an explicit index or
    /// ordinal may pick a device that is not [`SelectableDevice::usable`].
    pub fn select<'a, D: SelectableDevice>(&self, devices: &'a [D]) -> Option<&'a D> {
        let usable = || devices.iter().filter(|d| d.usable());
        match self {
            DeviceSelector::Auto => match std::env::var(D::SELECTOR_VAR) {
                Ok(v) if DeviceSelector::parse(&v) != DeviceSelector::Auto => {
                    DeviceSelector::parse(&v).select(devices)
                }
                _ => best(usable()),
            },
            DeviceSelector::Kind(kind) => best(usable().filter(|d| d.kind() == *kind)),
            DeviceSelector::NameContains(text) => {
                let needle = text.to_lowercase();
                best(usable().filter(|d| d.name().to_lowercase() == needle)).or_else(|| {
                    best(usable().filter(|d| {
                        d.name().to_lowercase().contains(&needle)
                            || d.platform().to_lowercase().contains(&needle)
                            || d.matches_more(&needle)
                    }))
                })
            }
            DeviceSelector::Index { platform, device } => devices
                .iter()
                .find(|d| d.platform_index() == *platform && d.device_index() == *device),
            DeviceSelector::Ordinal(i) => {
                if devices.iter().any(|d| d.ordinal().is_some()) {
                    devices.iter().find(|d| d.ordinal() == Some(*i))
                } else {
                    DeviceSelector::NameContains(i.to_string()).select(devices)
                }
            }
        }
    }

    /// Whether this is [`DeviceSelector::Auto`].
    pub fn is_auto(&self) -> bool {
        matches!(self, DeviceSelector::Auto)
    }

    /// The error text when nothing matches: what was asked (with the backend's variable when
    /// set) and the devices there are, one `Display` each.
    pub fn no_match<D: SelectableDevice + fmt::Display>(&self, devices: &[D]) -> NoMatch {
        NoMatch {
            wanted: format!(
                "{self}{}",
                std::env::var(D::SELECTOR_VAR)
                    .map(|v| format!(" ({}={v})", D::SELECTOR_VAR))
                    .unwrap_or_default()
            ),
            listed: devices.iter().map(ToString::to_string).collect(),
        }
    }
}

/// What [`DeviceSelector::no_match`] reports, for a backend's error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoMatch {
    /// The selector, and the variable's value when set (`auto (KF_OPENCL_DEVICE=gpu)`).
    pub wanted: String,
    /// Every listed device.
    pub listed: Vec<String>,
}

impl FromStr for DeviceSelector {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(DeviceSelector::parse(s))
    }
}

impl fmt::Display for DeviceSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSelector::Auto => f.write_str("auto"),
            DeviceSelector::Kind(k) => f.write_str(kind_name(*k)),
            DeviceSelector::NameContains(t) => write!(f, "name contains {t:?}"),
            DeviceSelector::Index { platform, device } => write!(f, "{platform}:{device}"),
            DeviceSelector::Ordinal(i) => write!(f, "device {i}"),
        }
    }
}

/// `cpu`, `gpu`, `accelerator` or `other`: the selector syntax's names of device kinds.
pub fn kind_name(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Cpu => "cpu",
        DeviceKind::Gpu => "gpu",
        DeviceKind::Accelerator => "accelerator",
        _ => "other",
    }
}

fn best<'a, D: SelectableDevice>(devices: impl Iterator<Item = &'a D>) -> Option<&'a D> {
    // min_by_key keeps the first of equal keys, so listing order breaks ties.
    devices.min_by_key(|d| {
        let kind_rank = match d.kind() {
            DeviceKind::Gpu => 0,
            DeviceKind::Accelerator => 1,
            DeviceKind::Cpu => 2,
            _ => 3,
        };
        (d.demotion(), kind_rank)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Dev {
        pi: usize,
        name: &'static str,
        platform: &'static str,
        kind: DeviceKind,
        ordinal: Option<usize>,
        usable: bool,
    }

    impl SelectableDevice for Dev {
        const SELECTOR_VAR: &'static str = "KF_BACKEND_COMMON_TEST_DEVICE";
        fn platform_index(&self) -> usize {
            self.pi
        }
        fn device_index(&self) -> usize {
            0
        }
        fn name(&self) -> &str {
            self.name
        }
        fn platform(&self) -> &str {
            self.platform
        }
        fn kind(&self) -> DeviceKind {
            self.kind
        }
        fn ordinal(&self) -> Option<usize> {
            self.ordinal
        }
        fn usable(&self) -> bool {
            self.usable
        }
        fn demotion(&self) -> u8 {
            u8::from(self.platform.contains("Portable"))
        }
    }

    fn dev(pi: usize, name: &'static str, platform: &'static str, kind: DeviceKind) -> Dev {
        Dev {
            pi,
            name,
            platform,
            kind,
            ordinal: None,
            usable: true,
        }
    }

    #[test]
    fn parses_the_syntax() {
        assert_eq!(DeviceSelector::parse(" auto "), DeviceSelector::Auto);
        assert_eq!(
            DeviceSelector::parse("GPU"),
            DeviceSelector::Kind(DeviceKind::Gpu)
        );
        assert_eq!(
            DeviceSelector::parse("1:2"),
            DeviceSelector::Index {
                platform: 1,
                device: 2
            }
        );
        assert_eq!(DeviceSelector::parse("3"), DeviceSelector::Ordinal(3));
        assert_eq!(
            DeviceSelector::parse("Xeon"),
            DeviceSelector::NameContains("Xeon".into())
        );
        assert_eq!(DeviceSelector::parse("1:0").to_string(), "1:0");
    }

    #[test]
    fn auto_prefers_gpus_and_demotes_pocl() {
        let devices = [
            dev(
                0,
                "pthread-cpu",
                "Portable Computing Language",
                DeviceKind::Cpu,
            ),
            dev(1, "Xeon", "Intel(R) OpenCL", DeviceKind::Cpu),
            dev(2, "A770", "Intel(R) OpenCL Graphics", DeviceKind::Gpu),
        ];
        let pick = |s: &str| DeviceSelector::parse(s).select(&devices).map(|d| d.pi);
        assert_eq!(pick("auto"), Some(2));
        assert_eq!(pick("cpu"), Some(1));
        assert_eq!(pick("portable"), Some(0));
        assert_eq!(pick("0:0"), Some(0));
        // Without ordinals a bare number is a name part.
        assert_eq!(pick("770"), Some(2));
        assert_eq!(pick("7"), Some(2));
    }

    #[test]
    fn ordinals_and_unusable_devices() {
        let mut devices = vec![
            dev(0, "NVIDIA A100", "", DeviceKind::Gpu),
            dev(0, "NVIDIA H200", "", DeviceKind::Gpu),
        ];
        devices[0].ordinal = Some(0);
        devices[1].ordinal = Some(1);
        devices[0].usable = false;
        assert_eq!(
            DeviceSelector::parse("h200")
                .select(&devices)
                .map(|d| d.name),
            Some("NVIDIA H200")
        );
        assert_eq!(
            DeviceSelector::parse("0").select(&devices).map(|d| d.name),
            Some("NVIDIA A100")
        );
        assert_eq!(
            DeviceSelector::Auto.select(&devices).map(|d| d.name),
            Some("NVIDIA H200")
        );
        assert!(DeviceSelector::Ordinal(2).select(&devices).is_none());
    }
}
