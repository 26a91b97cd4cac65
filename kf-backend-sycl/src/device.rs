//! Device discovery, selection and facts.

use std::fmt;
use std::str::FromStr;

use kf_core::{DeviceFacts, DeviceKind};
use serde::Deserialize;

use crate::error::SyclError;
use crate::ffi;

/// The variable that picks the device when the code does not (see [`DeviceSelector::parse`]
/// for its syntax).
pub const KF_SYCL_DEVICE: &str = "KF_SYCL_DEVICE";

/// One SYCL device as listed by [`list_devices`].
#[derive(Debug, Clone, Deserialize)]
pub struct DeviceInfo {
    /// Index of the platform in `sycl::platform::get_platforms()` order.
    pub platform_index: usize,
    /// Index of the device within its platform.
    pub device_index: usize,
    /// Platform name (`Intel(R) OpenCL`, `Intel(R) Level-Zero`).
    pub platform: String,
    /// The SYCL backend: `opencl`, `level_zero`, `cuda`, `hip`, …
    pub backend: String,
    /// Device name.
    pub name: String,
    /// `cpu`, `gpu`, `accelerator` or `other`.
    #[serde(rename = "type", default)]
    pub type_name: String,
    /// Whether the runtime can compile SYCL source for this device
    /// (`device::ext_oneapi_can_build(source_language::sycl)`).
    #[serde(default)]
    pub can_build_sycl: bool,
    /// Whether the device offers USM device allocations (needed for buffers).
    #[serde(default)]
    pub usm_device_allocations: bool,
    #[serde(flatten)]
    pub(crate) raw: RawFacts,
    #[serde(skip)]
    pub(crate) flat_index: usize,
}

/// The rest of the shim's device description.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct RawFacts {
    #[serde(default)]
    platform_version: Option<String>,
    #[serde(default)]
    vendor: Option<String>,
    #[serde(default)]
    driver_version: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    compute_units: Option<u32>,
    #[serde(default)]
    max_work_group_size: Option<u64>,
    #[serde(default)]
    max_work_item_sizes: Option<Vec<u64>>,
    #[serde(default)]
    local_mem_bytes: Option<u64>,
    #[serde(default)]
    global_mem_bytes: Option<u64>,
    #[serde(default)]
    max_clock_mhz: Option<u32>,
    #[serde(default)]
    preferred_vector_width_float: Option<u32>,
    #[serde(default)]
    native_vector_width_float: Option<u32>,
    #[serde(default)]
    mem_base_addr_align_bits: Option<u64>,
    #[serde(default)]
    max_mem_alloc_bytes: Option<u64>,
    #[serde(default)]
    global_mem_cache_bytes: Option<u64>,
    #[serde(default)]
    global_mem_cacheline_bytes: Option<u64>,
    #[serde(default)]
    sub_group_sizes: Option<Vec<u32>>,
    #[serde(default)]
    fp16: Option<bool>,
    #[serde(default)]
    fp64: Option<bool>,
}

impl DeviceInfo {
    /// The kind of device.
    pub fn kind(&self) -> DeviceKind {
        match self.type_name.as_str() {
            "gpu" => DeviceKind::Gpu,
            "cpu" => DeviceKind::Cpu,
            "accelerator" => DeviceKind::Accelerator,
            _ => DeviceKind::Other,
        }
    }

    /// Whether kernels can be compiled and run on it (SYCL source builds, USM buffers).
    pub fn usable(&self) -> bool {
        self.can_build_sycl && self.usm_device_allocations && !self.is_pocl()
    }

    /// Whether this looks like PoCL (the SYCL runtime does not work with it).
    fn is_pocl(&self) -> bool {
        self.platform.contains("Portable Computing Language")
    }
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} {} [{}] on {} ({}){}",
            self.platform_index,
            self.device_index,
            self.name,
            self.type_name,
            self.platform,
            self.backend,
            if self.usable() {
                ""
            } else if !self.can_build_sycl {
                ", cannot build SYCL source"
            } else {
                ", unusable"
            }
        )
    }
}

/// Lists every device of every SYCL platform (loading the shim and the runtime first).
///
/// Returns [`SyclError::Unavailable`] when there is no shim, no runtime, or no platform.
pub fn list_devices() -> Result<Vec<DeviceInfo>, SyclError> {
    let shim = ffi::shim()?;
    let json = shim
        .list_devices()
        .map_err(|f| f.into_error("listing SYCL devices"))?;
    let mut devices: Vec<DeviceInfo> =
        serde_json::from_str(&json).map_err(|e| SyclError::Runtime {
            operation: "parsing the shim's device list",
            message: e.to_string(),
        })?;
    for (i, d) in devices.iter_mut().enumerate() {
        d.flat_index = i;
    }
    Ok(devices)
}

/// How to choose a device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DeviceSelector {
    /// `KF_SYCL_DEVICE` when set, else the best usable device: a GPU, then an accelerator,
    /// then a CPU, platform order breaking ties.
    #[default]
    Auto,
    /// The best usable device of this kind.
    Kind(DeviceKind),
    /// A usable device whose name equals this text, else one whose name, platform or backend
    /// contains it (case-insensitive).
    NameContains(String),
    /// The device at `platform:device` indices as [`list_devices`] numbers them.
    Index {
        /// Platform index.
        platform: usize,
        /// Device index within the platform.
        device: usize,
    },
}

impl DeviceSelector {
    /// Parses `cpu`, `gpu`, `accelerator`, `auto`, `P:D` (indices) or any other text (a name
    /// substring) — the syntax of `KF_SYCL_DEVICE`, as for `KF_OPENCL_DEVICE`.
    pub fn parse(text: &str) -> Self {
        let t = text.trim();
        match t.to_ascii_lowercase().as_str() {
            "" | "auto" | "default" => return DeviceSelector::Auto,
            "cpu" => return DeviceSelector::Kind(DeviceKind::Cpu),
            "gpu" => return DeviceSelector::Kind(DeviceKind::Gpu),
            "accelerator" | "acc" => return DeviceSelector::Kind(DeviceKind::Accelerator),
            _ => {}
        }
        if let Some((p, d)) = t.split_once(':') {
            if let (Ok(platform), Ok(device)) = (p.trim().parse(), d.trim().parse()) {
                return DeviceSelector::Index { platform, device };
            }
        }
        DeviceSelector::NameContains(t.to_owned())
    }

    /// Picks a device from `devices`; `None` when nothing matches. Only an explicit index
    /// may pick a device that cannot build SYCL source.
    pub fn select<'a>(&self, devices: &'a [DeviceInfo]) -> Option<&'a DeviceInfo> {
        let usable = || devices.iter().filter(|d| d.usable());
        match self {
            DeviceSelector::Auto => match std::env::var(KF_SYCL_DEVICE) {
                Ok(v) if DeviceSelector::parse(&v) != DeviceSelector::Auto => {
                    DeviceSelector::parse(&v).select(devices)
                }
                _ => best(usable()),
            },
            DeviceSelector::Kind(kind) => best(usable().filter(|d| d.kind() == *kind)),
            DeviceSelector::NameContains(text) => {
                let needle = text.to_lowercase();
                best(usable().filter(|d| d.name.to_lowercase() == needle)).or_else(|| {
                    best(usable().filter(|d| {
                        d.name.to_lowercase().contains(&needle)
                            || d.platform.to_lowercase().contains(&needle)
                            || d.backend.to_lowercase() == needle
                    }))
                })
            }
            DeviceSelector::Index { platform, device } => devices
                .iter()
                .find(|d| d.platform_index == *platform && d.device_index == *device),
        }
    }
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
            DeviceSelector::Kind(DeviceKind::Cpu) => f.write_str("cpu"),
            DeviceSelector::Kind(DeviceKind::Gpu) => f.write_str("gpu"),
            DeviceSelector::Kind(DeviceKind::Accelerator) => f.write_str("accelerator"),
            DeviceSelector::Kind(_) => f.write_str("other"),
            DeviceSelector::NameContains(t) => write!(f, "name contains {t:?}"),
            DeviceSelector::Index { platform, device } => write!(f, "{platform}:{device}"),
        }
    }
}

fn best<'a>(devices: impl Iterator<Item = &'a DeviceInfo>) -> Option<&'a DeviceInfo> {
    // min_by_key keeps the first of equal keys, so platform order breaks ties.
    devices.min_by_key(|d| match d.kind() {
        DeviceKind::Gpu => 0,
        DeviceKind::Accelerator => 1,
        DeviceKind::Cpu => 2,
        _ => 3,
    })
}

/// Extra device numbers the backend needs beyond [`DeviceFacts`].
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// `mem_base_addr_align` in bytes: the alignment required of buffer offsets.
    pub(crate) base_align: usize,
    /// `max_mem_alloc_size`.
    pub(crate) max_alloc: u64,
    /// `max_work_item_sizes<3>` in SYCL order (dimension 2 moves fastest).
    pub(crate) item_sizes_sycl: [u64; 3],
    /// Size of the largest cache in front of global memory, bytes (for flushing).
    pub(crate) cache_bytes: u64,
}

impl Limits {
    /// The largest work-group extent of dimension `dim` in an `dims`-dimensional range (SYCL
    /// maps the last dimension of any range to the fastest-moving hardware dimension).
    pub(crate) fn item_size(&self, dims: usize, dim: usize) -> u64 {
        self.item_sizes_sycl[(3 - dims.clamp(1, 3)) + dim.min(dims.saturating_sub(1))]
    }
}

/// The facts of `info`'s device.
pub(crate) fn facts(info: &DeviceInfo, runtime_version: &str) -> (DeviceFacts, Limits) {
    let r = &info.raw;
    let mut f = DeviceFacts::unknown(info.name.clone());
    f.kind = info.kind();
    f.platform = info.platform.clone();
    f.vendor = r.vendor.clone().unwrap_or_default().trim().to_owned();
    f.driver_version = r
        .driver_version
        .clone()
        .unwrap_or_default()
        .trim()
        .to_owned();
    f.compute_units = r.compute_units.unwrap_or(1).max(1);
    f.max_work_group_size = r.max_work_group_size.unwrap_or(1).max(1);
    let sycl_sizes = match r.max_work_item_sizes.as_deref() {
        Some([a, b, c]) => [*a, *b, *c],
        _ => [1, 1, 1],
    };
    // Reported fastest dimension first, as OpenCL does (and as a 1-D range uses it).
    f.max_work_item_sizes = sycl_sizes.iter().rev().map(|v| (*v).max(1)).collect();
    f.local_mem_bytes = r.local_mem_bytes.unwrap_or(0);
    f.global_mem_bytes = r.global_mem_bytes.unwrap_or(0);
    f.max_clock_mhz = r.max_clock_mhz.unwrap_or(0);
    f.preferred_vector_width_float = r.preferred_vector_width_float.unwrap_or(1).max(1);
    let mut sub_groups = r.sub_group_sizes.clone().unwrap_or_default();
    sub_groups.sort_unstable();
    sub_groups.dedup();
    f.sub_group_sizes = sub_groups;

    let mut extra = |k: &str, v: String| {
        if !v.is_empty() {
            f.extra.insert(k.to_owned(), v);
        }
    };
    extra("sycl_backend", info.backend.clone());
    extra("sycl_runtime", runtime_version.to_owned());
    extra(
        "device_version",
        r.version.clone().unwrap_or_default().trim().to_owned(),
    );
    extra(
        "platform_version",
        r.platform_version
            .clone()
            .unwrap_or_default()
            .trim()
            .to_owned(),
    );
    let native_float = r.native_vector_width_float.unwrap_or(0);
    extra("native_vector_width_float", native_float.to_string());
    let base_align = (r.mem_base_addr_align_bits.unwrap_or(1024) / 8).max(1);
    extra("mem_base_addr_align_bytes", base_align.to_string());
    let max_alloc = r.max_mem_alloc_bytes.unwrap_or(f.global_mem_bytes / 4);
    extra("max_mem_alloc_bytes", max_alloc.to_string());
    let dev_cache = r.global_mem_cache_bytes.unwrap_or(0);
    extra("global_mem_cache_bytes", dev_cache.to_string());
    if let Some(line) = r.global_mem_cacheline_bytes {
        extra("global_mem_cacheline_bytes", line.to_string());
    }
    extra("fp64", r.fp64.unwrap_or(false).to_string());
    extra("fp16", r.fp16.unwrap_or(false).to_string());
    extra(
        "max_work_item_sizes_order",
        "fastest-moving dimension first (the SYCL order reversed, as OpenCL reports it)".into(),
    );

    let mut cache_bytes = dev_cache;
    if info.kind() == DeviceKind::Cpu {
        cache_bytes = cache_bytes.max(host::largest_cache_bytes().unwrap_or(0));
        if f.max_clock_mhz == 0 {
            if let Some(mhz) = host::max_mhz() {
                f.max_clock_mhz = mhz;
                f.extra
                    .insert("max_clock_source".into(), "/proc/cpuinfo".into());
            }
        }
    }
    let (gflops, gbs, how) = estimate_peaks(&f, native_float);
    f.peak_gflops = Some(gflops);
    f.peak_bandwidth_gbs = Some(gbs);
    f.extra.insert("peak_source".to_owned(), how);
    let limits = Limits {
        base_align: usize::try_from(base_align)
            .unwrap_or(128)
            .next_power_of_two(),
        max_alloc,
        item_sizes_sycl: sycl_sizes,
        cache_bytes,
    };
    (f, limits)
}

/// Generous upper bounds of fp32 throughput (GFLOP/s) and bandwidth (GB/s), derived as in
/// `kf-backend-opencl` (the SYCL runtime reports neither): the roofline check rejects a
/// speedup beyond them, so an estimate below the truth would reject honest kernels.
pub(crate) fn estimate_peaks(f: &DeviceFacts, native_float: u32) -> (f64, f64, String) {
    let mhz = if f.max_clock_mhz > 0 {
        f64::from(f.max_clock_mhz)
    } else {
        3000.0
    };
    let ghz = mhz * 1.3 / 1000.0;
    let cu = f64::from(f.compute_units.max(1));
    let (flop_per_cycle, bytes_per_cycle) = match f.kind {
        DeviceKind::Cpu => (2.0 * 2.0 * f64::from(native_float.max(16)), 64.0),
        _ => (256.0, 128.0),
    };
    let how = format!(
        "upper-bound estimate: {cu} compute units x {mhz:.0} MHz x 1.3 turbo x \
         {flop_per_cycle} flop/cycle, {bytes_per_cycle} B/cycle"
    );
    (cu * ghz * flop_per_cycle, cu * ghz * bytes_per_cycle, how)
}

/// Host CPU facts from Linux `/proc` and `/sys` (absent elsewhere).
mod host {
    use std::fs;

    /// The highest `cpu MHz` in `/proc/cpuinfo` (or the cpufreq maximum when present).
    pub(super) fn max_mhz() -> Option<u32> {
        let cpufreq = fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(|khz| (khz / 1000) as u32);
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").ok().and_then(|text| {
            text.lines()
                .filter(|l| l.starts_with("cpu MHz"))
                .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
                .map(|v| v.round() as u32)
        });
        match (cpufreq, cpuinfo) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b).filter(|v| *v > 0),
        }
    }

    /// The largest cache of CPU 0, bytes.
    pub(super) fn largest_cache_bytes() -> Option<u64> {
        let dir = fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
        dir.filter_map(Result::ok)
            .filter_map(|e| fs::read_to_string(e.path().join("size")).ok())
            .filter_map(|s| parse_size(s.trim()))
            .max()
    }

    pub(super) fn parse_size(s: &str) -> Option<u64> {
        let (num, mult) = match s.chars().last()? {
            'K' => (&s[..s.len() - 1], 1 << 10),
            'M' => (&s[..s.len() - 1], 1 << 20),
            'G' => (&s[..s.len() - 1], 1 << 30),
            _ => (s, 1),
        };
        num.parse::<u64>().ok().map(|n| n * mult)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(pi: usize, name: &str, platform: &str, kind: &str, can_build: bool) -> DeviceInfo {
        DeviceInfo {
            platform_index: pi,
            device_index: 0,
            platform: platform.into(),
            backend: "opencl".into(),
            name: name.into(),
            type_name: kind.into(),
            can_build_sycl: can_build,
            usm_device_allocations: true,
            raw: RawFacts::default(),
            flat_index: pi,
        }
    }

    #[test]
    fn parses_the_shim_device_json() {
        let json = r#"[{"platform_index":0,"device_index":0,"platform":"Intel(R) OpenCL",
            "backend":"opencl","name":"AMD EPYC","type":"cpu","compute_units":2,
            "max_work_group_size":8192,"max_work_item_sizes":[8192,8192,8192],
            "local_mem_bytes":262144,"global_mem_bytes":1000000,"mem_base_addr_align_bits":1024,
            "sub_group_sizes":[4,8,16,32,64],"fp16":true,"fp64":true,
            "usm_device_allocations":true,"can_build_sycl":true}]"#;
        let d: Vec<DeviceInfo> = serde_json::from_str(json).unwrap();
        assert!(d[0].usable());
        let (facts, limits) = super::facts(&d[0], "libsycl 9");
        assert_eq!(facts.kind, DeviceKind::Cpu);
        assert_eq!(facts.max_work_group_size, 8192);
        assert_eq!(limits.base_align, 128);
        assert!(facts.peak_gflops.unwrap() > 100.0);
        assert_eq!(facts.sub_group_sizes, vec![4, 8, 16, 32, 64]);
    }

    #[test]
    fn item_sizes_follow_the_range_rank() {
        let limits = Limits {
            base_align: 128,
            max_alloc: 1,
            item_sizes_sycl: [64, 512, 1024],
            cache_bytes: 0,
        };
        assert_eq!(limits.item_size(1, 0), 1024);
        assert_eq!(limits.item_size(2, 0), 512);
        assert_eq!(limits.item_size(2, 1), 1024);
        assert_eq!(limits.item_size(3, 0), 64);
    }

    #[test]
    fn selection_skips_devices_that_cannot_build() {
        let devices = vec![
            dev(0, "pthread-cpu", "Portable Computing Language", "cpu", true),
            dev(1, "A770", "Intel(R) Level-Zero", "gpu", false),
            dev(2, "Xeon", "Intel(R) OpenCL", "cpu", true),
        ];
        assert_eq!(
            DeviceSelector::Auto
                .select(&devices)
                .map(|d| d.platform_index),
            Some(2)
        );
        assert_eq!(
            DeviceSelector::parse("1:0")
                .select(&devices)
                .map(|d| d.platform_index),
            Some(1)
        );
        assert!(DeviceSelector::parse("gpu").select(&devices).is_none());
        assert_eq!(
            DeviceSelector::parse("cpu"),
            DeviceSelector::Kind(DeviceKind::Cpu)
        );
        assert_eq!(host::parse_size("2M"), Some(2 << 20));
    }
}
