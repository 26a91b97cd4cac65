//! Device discovery, selection and facts.

use std::fmt;
use std::sync::Mutex;

use kf_backend_common::peaks;
use kf_backend_common::{kind_name, SelectableDevice};
use kf_core::{DeviceFacts, DeviceKind};
use opencl3::context::Context;
use opencl3::device::{
    Device, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU,
};
use opencl3::platform::{get_platforms, Platform};
use opencl3::types::cl_device_id;

use crate::error::OpenClError;
use crate::runtime;

/// The variable that picks the device when the code does not (see
/// [`DeviceSelector::parse`](kf_backend_common::DeviceSelector::parse)
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

impl SelectableDevice for DeviceInfo {
    const SELECTOR_VAR: &'static str = KF_OPENCL_DEVICE;
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
        self.kind
    }
    /// PoCL last: it does not reward GPU-style optimisation.
    fn demotion(&self) -> u8 {
        u8::from(self.is_pocl())
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

    let cache_bytes = peaks::cpu_host_facts(&mut f, cl_cache);
    peaks::set_estimated_peaks(&mut f, native_float);

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

#[cfg(test)]
mod tests {
    use super::*;
    use kf_backend_common::DeviceSelector;

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
    fn selection_prefers_gpu_and_avoids_pocl() {
        let devices = vec![
            dev(
                0,
                "pthread-cpu",
                "Portable Computing Language",
                DeviceKind::Cpu,
            ),
            dev(1, "Xeon", "Intel(R) OpenCL", DeviceKind::Cpu),
        ];
        let sel = DeviceSelector::Kind(DeviceKind::Cpu);
        assert_eq!(sel.select(&devices).map(|d| d.platform_index), Some(1));
        let mut with_gpu = devices.clone();
        with_gpu.push(dev(2, "A770", "Intel(R) OpenCL Graphics", DeviceKind::Gpu));
        let sel = DeviceSelector::parse("a770");
        assert_eq!(sel.select(&with_gpu).map(|d| d.platform_index), Some(2));
        let sel = DeviceSelector::NameContains("portable".into());
        assert_eq!(sel.select(&devices).map(|d| d.platform_index), Some(0));
    }
}
