//! Device discovery, selection and facts.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use kf_core::{DeviceFacts, DeviceKind};
use opencl3::context::Context;
use opencl3::device::{
    Device, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU,
};
use opencl3::platform::{get_platforms, Platform};
use opencl3::types::cl_device_id;

use crate::error::OpenClError;
use crate::runtime;

/// The variable that picks the device when the code does not (see [`DeviceSelector::parse`]
/// for its syntax).
pub const KF_OPENCL_DEVICE: &str = "KF_OPENCL_DEVICE";

/// `CL_DEVICE_SUB_GROUP_SIZES_INTEL` (`cl_intel_required_subgroup_size`).
const CL_DEVICE_SUB_GROUP_SIZES_INTEL: u32 = 0x4108;

/// One OpenCL device as listed by [`list_devices`].
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Index of the platform in `clGetPlatformIDs` order.
    pub platform_index: usize,
    /// Index of the device within its platform.
    pub device_index: usize,
    /// Platform name (`Intel(R) OpenCL`, `Portable Computing Language`).
    pub platform: String,
    /// Device name.
    pub name: String,
    /// Kind of device.
    pub kind: DeviceKind,
    pub(crate) id: cl_device_id,
}

// SAFETY: a cl_device_id is an opaque handle that OpenCL allows to be used from any thread.
unsafe impl Send for DeviceInfo {}
// SAFETY: as above; the handle is never dereferenced by this crate.
unsafe impl Sync for DeviceInfo {}

impl DeviceInfo {
    /// Whether this device looks like the slow PoCL CPU fallback.
    fn is_pocl(&self) -> bool {
        self.platform.contains("Portable Computing Language")
    }
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} {} [{}] on {}",
            self.platform_index,
            self.device_index,
            self.name,
            kind_name(self.kind),
            self.platform
        )
    }
}

fn kind_name(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Cpu => "cpu",
        DeviceKind::Gpu => "gpu",
        DeviceKind::Accelerator => "accelerator",
        _ => "other",
    }
}

/// Lists every device of every platform. Configures the runtime first ([`runtime::prepare`]).
///
/// Returns [`OpenClError::Unavailable`] when no OpenCL library or no platform is found.
pub fn list_devices() -> Result<Vec<DeviceInfo>, OpenClError> {
    let info = runtime::prepare();
    // Platforms whose devices are kept alive for the process (see below), by platform id.
    static KEPT_ALIVE: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    let mut kept_alive = KEPT_ALIVE.lock().unwrap_or_else(|p| p.into_inner());
    let platforms = get_platforms().map_err(|e| unavailable(e.0, info))?;
    let mut out = Vec::new();
    for (pi, platform) in platforms.iter().enumerate() {
        let pname = platform.name().unwrap_or_default().trim().to_owned();
        // A platform without devices answers CL_DEVICE_NOT_FOUND: skip it.
        let Ok(ids) = platform.get_devices(CL_DEVICE_TYPE_ALL) else {
            continue;
        };
        // PoCL frees its devices when the last context is released; a device id held by another
        // thread then dangles (observed: a crash in clGetDeviceInfo while tests created and
        // dropped backends in parallel). One context per PoCL platform that is never released
        // keeps the devices valid for the life of the process.
        let platform_key = platform.id() as usize;
        if pname.contains("Portable Computing Language") && !kept_alive.contains(&platform_key) {
            if let Ok(context) = Context::from_devices(&ids, &[], None, std::ptr::null_mut()) {
                std::mem::forget(context);
                kept_alive.push(platform_key);
            }
        }
        for (di, id) in ids.into_iter().enumerate() {
            let d = Device::new(id);
            out.push(DeviceInfo {
                platform_index: pi,
                device_index: di,
                platform: pname.clone(),
                name: d.name().unwrap_or_default().trim().to_owned(),
                kind: kind_of(d.dev_type().unwrap_or(0)),
                id,
            });
        }
    }
    if out.is_empty() {
        return Err(OpenClError::Unavailable {
            message: format!(
                "OpenCL loaded ({}) but no platform offers a device. {}",
                info.describe(),
                runtime::HOW_TO_GET_A_RUNTIME
            ),
        });
    }
    Ok(out)
}

fn unavailable(code: i32, info: &runtime::RuntimeInfo) -> OpenClError {
    OpenClError::Unavailable {
        message: format!(
            "no OpenCL runtime: clGetPlatformIDs failed with {} ({code}) using {}. {}",
            crate::error::cl_error_name(code),
            info.describe(),
            runtime::HOW_TO_GET_A_RUNTIME
        ),
    }
}

fn kind_of(t: u64) -> DeviceKind {
    if t & CL_DEVICE_TYPE_GPU != 0 {
        DeviceKind::Gpu
    } else if t & CL_DEVICE_TYPE_ACCELERATOR != 0 {
        DeviceKind::Accelerator
    } else if t & CL_DEVICE_TYPE_CPU != 0 {
        DeviceKind::Cpu
    } else {
        DeviceKind::Other
    }
}

/// How to choose a device.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DeviceSelector {
    /// `KF_OPENCL_DEVICE` when set, else the best device: a GPU, then an accelerator, then a
    /// CPU, PoCL last (it does not reward GPU-style optimisation), platform order breaking
    /// ties.
    #[default]
    Auto,
    /// The best device of this kind.
    Kind(DeviceKind),
    /// A device whose name equals this text, else one whose name or platform name contains it
    /// (case-insensitive; the best such device, as for `Auto`).
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
    /// substring) — the syntax of `KF_OPENCL_DEVICE`.
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

    /// Picks a device from `devices`; `None` when nothing matches.
    pub fn select<'a>(&self, devices: &'a [DeviceInfo]) -> Option<&'a DeviceInfo> {
        match self {
            DeviceSelector::Auto => match std::env::var(KF_OPENCL_DEVICE) {
                Ok(v) if !DeviceSelector::parse(&v).is_auto() => {
                    DeviceSelector::parse(&v).select(devices)
                }
                _ => best(devices.iter()),
            },
            DeviceSelector::Kind(kind) => best(devices.iter().filter(|d| d.kind == *kind)),
            DeviceSelector::NameContains(text) => {
                let needle = text.to_lowercase();
                let exact = devices.iter().filter(|d| d.name.to_lowercase() == needle);
                best(exact).or_else(|| {
                    best(devices.iter().filter(|d| {
                        d.name.to_lowercase().contains(&needle)
                            || d.platform.to_lowercase().contains(&needle)
                    }))
                })
            }
            DeviceSelector::Index { platform, device } => devices
                .iter()
                .find(|d| d.platform_index == *platform && d.device_index == *device),
        }
    }

    fn is_auto(&self) -> bool {
        matches!(self, DeviceSelector::Auto)
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
            DeviceSelector::Kind(k) => f.write_str(kind_name(*k)),
            DeviceSelector::NameContains(t) => write!(f, "name contains {t:?}"),
            DeviceSelector::Index { platform, device } => write!(f, "{platform}:{device}"),
        }
    }
}

fn best<'a>(devices: impl Iterator<Item = &'a DeviceInfo>) -> Option<&'a DeviceInfo> {
    // min_by_key keeps the first of equal keys, so platform order breaks ties.
    devices.min_by_key(|d| {
        let kind_rank = match d.kind {
            DeviceKind::Gpu => 0,
            DeviceKind::Accelerator => 1,
            DeviceKind::Cpu => 2,
            _ => 3,
        };
        (u8::from(d.is_pocl()), kind_rank)
    })
}

/// Extra device numbers the backend needs beyond [`DeviceFacts`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN` in bytes.
    pub(crate) base_align: usize,
    /// `CL_DEVICE_MAX_MEM_ALLOC_SIZE`.
    pub(crate) max_alloc: u64,
    /// `CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS`.
    pub(crate) max_dims: usize,
    /// Size of the largest cache in front of global memory, bytes (for flushing).
    pub(crate) cache_bytes: u64,
}

/// Reads the facts of `info`'s device.
pub(crate) fn facts(info: &DeviceInfo) -> (DeviceFacts, Limits) {
    let d = Device::new(info.id);
    let mut f = DeviceFacts::unknown(info.name.clone());
    f.kind = info.kind;
    f.platform = info.platform.clone();
    f.vendor = d.vendor().unwrap_or_default().trim().to_owned();
    f.driver_version = d.driver_version().unwrap_or_default().trim().to_owned();
    f.compute_units = d.max_compute_units().unwrap_or(1).max(1);
    f.max_work_group_size = d.max_work_group_size().unwrap_or(1).max(1) as u64;
    f.max_work_item_sizes = d
        .max_work_item_sizes()
        .map(|v| v.into_iter().map(|s| s as u64).collect())
        .unwrap_or_else(|_| vec![1, 1, 1]);
    f.local_mem_bytes = d.local_mem_size().unwrap_or(0);
    f.global_mem_bytes = d.global_mem_size().unwrap_or(0);
    f.max_clock_mhz = d.max_clock_frequency().unwrap_or(0);
    f.preferred_vector_width_float = d.max_preferred_vector_width_float().unwrap_or(1).max(1);
    f.sub_group_sizes = sub_group_sizes(&d);

    let platform = d.platform().ok().map(Platform::new);
    let mut extra = |k: &str, v: String| {
        if !v.is_empty() {
            f.extra.insert(k.to_owned(), v);
        }
    };
    extra(
        "device_version",
        d.version().unwrap_or_default().trim().to_owned(),
    );
    extra(
        "opencl_c_version",
        d.opencl_c_version().unwrap_or_default().trim().to_owned(),
    );
    if let Some(p) = &platform {
        extra(
            "platform_version",
            p.version().unwrap_or_default().trim().to_owned(),
        );
    }
    let native_float = d.native_vector_width_float().unwrap_or(0);
    extra("native_vector_width_float", native_float.to_string());
    extra(
        "preferred_vector_width_half",
        d.preferred_vector_width_half().unwrap_or(0).to_string(),
    );
    let base_align_bits = d.mem_base_addr_align().unwrap_or(1024).max(8);
    extra(
        "mem_base_addr_align_bytes",
        (base_align_bits / 8).to_string(),
    );
    let max_alloc = d.max_mem_alloc_size().unwrap_or(f.global_mem_bytes / 4);
    extra("max_mem_alloc_bytes", max_alloc.to_string());
    let cl_cache = d.global_mem_cache_size().unwrap_or(0);
    extra("global_mem_cache_bytes", cl_cache.to_string());
    extra(
        "global_mem_cacheline_bytes",
        d.global_mem_cacheline_size().unwrap_or(0).to_string(),
    );
    extra(
        "max_work_item_dimensions",
        d.max_work_item_dimensions().unwrap_or(3).to_string(),
    );
    if let Ok(m) = d.preferred_work_group_size_multiple() {
        extra("preferred_work_group_size_multiple", m.to_string());
    }
    let extensions = d.extensions().unwrap_or_default();
    let has = |e: &str| extensions.split_whitespace().any(|x| x == e);
    extra("fp64", has("cl_khr_fp64").to_string());
    extra("fp16", has("cl_khr_fp16").to_string());
    extra(
        "subgroups",
        (has("cl_khr_subgroups") || has("cl_intel_subgroups")).to_string(),
    );
    extra("extensions", extensions.trim().to_owned());

    let mut cache_bytes = cl_cache;
    if info.kind == DeviceKind::Cpu {
        cache_bytes = cache_bytes.max(host::largest_cache_bytes().unwrap_or(0));
        if f.max_clock_mhz == 0 {
            if let Some(mhz) = host::max_mhz() {
                f.max_clock_mhz = mhz;
                extra("max_clock_source", "/proc/cpuinfo".to_owned());
            }
        }
    }
    let (gflops, gbs, how) = estimate_peaks(&f, native_float);
    f.peak_gflops = Some(gflops);
    f.peak_bandwidth_gbs = Some(gbs);
    f.extra.insert("peak_source".to_owned(), how);

    let limits = Limits {
        base_align: (base_align_bits / 8) as usize,
        max_alloc,
        max_dims: d.max_work_item_dimensions().unwrap_or(3) as usize,
        cache_bytes,
    };
    (f, limits)
}

fn sub_group_sizes(d: &Device) -> Vec<u32> {
    let Ok(bytes) = d.get_data(CL_DEVICE_SUB_GROUP_SIZES_INTEL) else {
        return Vec::new();
    };
    let word = std::mem::size_of::<usize>();
    let mut sizes: Vec<u32> = bytes
        .chunks_exact(word)
        .filter_map(|c| {
            let mut b = [0u8; 8];
            b[..word].copy_from_slice(c);
            u32::try_from(u64::from_ne_bytes(b)).ok()
        })
        .filter(|s| *s > 0)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Upper bounds of fp32 throughput (GFLOP/s) and memory bandwidth (GB/s), with how they were
/// derived. OpenCL reports neither, so these are deliberately generous: the roofline check
/// rejects a speedup beyond them, and an estimate below the truth would reject honest kernels.
///
/// * clock: the reported maximum (for CPUs reporting 0, the highest `cpu MHz` in
///   `/proc/cpuinfo`), times 1.3 for turbo headroom; 3000 MHz when nothing is known.
/// * CPU: every compute unit (logical core) retires 2 FMA of 16 fp32 lanes per cycle
///   (64 flop/cycle, AVX-512 with two FMA pipes, more than any current x86 core sustains per
///   hardware thread), and moves 64 bytes per cycle (an L2-resident working set: data that
///   fit in cache are not DRAM-bound).
/// * GPU / accelerator: 256 flop/cycle per compute unit (128 fp32 lanes with FMA, the widest
///   NVIDIA SM / AMD dual-issue CU; Intel reports EUs or Xe cores, well below), and 128 bytes
///   per cycle per compute unit (the L1/shared-memory bandwidth, above any DRAM/HBM).
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
    let gflops = cu * ghz * flop_per_cycle;
    let gbs = cu * ghz * bytes_per_cycle;
    let how = format!(
        "upper-bound estimate: {cu} compute units x {mhz:.0} MHz x 1.3 turbo x \
         {flop_per_cycle} flop/cycle, {bytes_per_cycle} B/cycle"
    );
    (gflops, gbs, how)
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

    /// The largest cache of CPU 0, bytes (`/sys/devices/system/cpu/cpu0/cache/index*/size`).
    pub(super) fn largest_cache_bytes() -> Option<u64> {
        let dir = fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
        dir.filter_map(Result::ok)
            .filter_map(|e| fs::read_to_string(e.path().join("size")).ok())
            .filter_map(|s| parse_size(s.trim()))
            .max()
    }

    fn parse_size(s: &str) -> Option<u64> {
        let (num, mult) = match s.chars().last()? {
            'K' => (&s[..s.len() - 1], 1 << 10),
            'M' => (&s[..s.len() - 1], 1 << 20),
            'G' => (&s[..s.len() - 1], 1 << 30),
            _ => (s, 1),
        };
        num.parse::<u64>().ok().map(|n| n * mult)
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn sizes() {
            assert_eq!(super::parse_size("32768K"), Some(32 << 20));
            assert_eq!(super::parse_size("2M"), Some(2 << 20));
            assert_eq!(super::parse_size("x"), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(pi: usize, name: &str, platform: &str, kind: DeviceKind) -> DeviceInfo {
        DeviceInfo {
            platform_index: pi,
            device_index: 0,
            platform: platform.into(),
            name: name.into(),
            kind,
            id: std::ptr::null_mut(),
        }
    }

    #[test]
    fn parse_selectors() {
        assert_eq!(
            DeviceSelector::parse("GPU"),
            DeviceSelector::Kind(DeviceKind::Gpu)
        );
        assert_eq!(
            DeviceSelector::parse("1:0"),
            DeviceSelector::Index {
                platform: 1,
                device: 0
            }
        );
        assert_eq!(
            DeviceSelector::parse("epyc"),
            DeviceSelector::NameContains("epyc".into())
        );
        assert_eq!(DeviceSelector::parse(""), DeviceSelector::Auto);
    }

    #[test]
    fn best_prefers_gpu_and_avoids_pocl() {
        let devices = vec![
            dev(
                0,
                "pthread-cpu",
                "Portable Computing Language",
                DeviceKind::Cpu,
            ),
            dev(1, "Xeon", "Intel(R) OpenCL", DeviceKind::Cpu),
        ];
        assert_eq!(best(devices.iter()).map(|d| d.platform_index), Some(1));
        let mut with_gpu = devices.clone();
        with_gpu.push(dev(2, "A770", "Intel(R) OpenCL Graphics", DeviceKind::Gpu));
        assert_eq!(best(with_gpu.iter()).map(|d| d.platform_index), Some(2));
        let sel = DeviceSelector::NameContains("portable".into());
        assert_eq!(sel.select(&devices).map(|d| d.platform_index), Some(0));
    }

    #[test]
    fn peaks_are_generous() {
        let mut f = DeviceFacts::unknown("cpu");
        f.kind = DeviceKind::Cpu;
        f.compute_units = 2;
        f.max_clock_mhz = 2600;
        let (gflops, gbs, _) = estimate_peaks(&f, 8);
        // Above the measured 63 GFLOP/s tiled SGEMM on this 2-core machine, by a wide margin.
        assert!(gflops > 300.0, "{gflops}");
        assert!(gbs > 300.0, "{gbs}");
    }
}
