//! Device discovery, selection and facts.

use std::fmt;

use kf_backend_common::{peaks, SelectableDevice};
use kf_core::{DeviceFacts, DeviceKind};
use serde::Deserialize;

use crate::error::SyclError;
use crate::ffi;

/// The variable that picks the device when the code does not (see
/// [`DeviceSelector::parse`](kf_backend_common::DeviceSelector::parse)
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

impl SelectableDevice for DeviceInfo {
    const SELECTOR_VAR: &'static str = KF_SYCL_DEVICE;
    fn platform_index(&self) -> usize {
        self.platform_index
    }
    fn device_index(&self) -> usize {
        self.device_index
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn platform(&self) -> &str {
        &self.platform
    }
    fn kind(&self) -> DeviceKind {
        DeviceInfo::kind(self)
    }
    /// Only devices that can build SYCL source and allocate USM buffers.
    fn usable(&self) -> bool {
        DeviceInfo::usable(self)
    }
    /// A name part equal to the SYCL backend (`opencl`, `level_zero`) selects by backend.
    fn matches_more(&self, needle: &str) -> bool {
        self.backend.to_lowercase() == needle
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

    let cache_bytes = peaks::cpu_host_facts(&mut f, dev_cache);
    peaks::set_estimated_peaks(&mut f, native_float);
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
        use kf_backend_common::DeviceSelector;
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
    }
}
