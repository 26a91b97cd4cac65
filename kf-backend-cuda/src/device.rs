//! Architectures, device discovery and [`DeviceFacts`] from the CUDA driver (or, without a
//! device, from what is fixed for an architecture).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute as A;
use cudarc::driver::CudaContext;
use kf_backend_common::SelectableDevice;
use kf_core::{DeviceFacts, DeviceKind};

use crate::error::{ArchParseError, CudaError};
use crate::guarded;

/// The variable that picks the device: an ordinal (`1`) or a name substring (`H100`).
pub const KF_CUDA_DEVICE: &str = "KF_CUDA_DEVICE";

/// The variable that sets the target architecture when there is no device (`sm_90`), and
/// overrides the device's own when there is one.
pub const KF_CUDA_ARCH: &str = "KF_CUDA_ARCH";

/// The architecture compiled for when there is no device and none is configured: Hopper
/// (H100/H200), the GPUs these tools are most often pointed at.
pub const DEFAULT_ARCH: &str = "sm_90";

/// An NVIDIA GPU architecture: `sm_90` (real: SASS for that GPU), `sm_90a` (with
/// architecture-specific features), or `compute_90` (virtual: PTX the driver compiles).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Arch {
    /// Compute capability major (9).
    pub major: u32,
    /// Compute capability minor (0).
    pub minor: u32,
    /// `a` or `f` for architecture- or family-specific targets, else empty.
    pub suffix: String,
    /// A virtual architecture (`compute_XX`, PTX only).
    pub is_virtual: bool,
}

impl Arch {
    /// The real architecture of a compute capability.
    pub fn sm(major: u32, minor: u32) -> Self {
        Arch {
            major,
            minor,
            suffix: String::new(),
            is_virtual: false,
        }
    }

    /// `major * 10 + minor` (`90`).
    pub fn number(&self) -> u32 {
        self.major * 10 + self.minor
    }

    /// The same architecture as a virtual one (`compute_90`).
    pub fn to_virtual(&self) -> Self {
        Arch {
            is_virtual: true,
            ..self.clone()
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = if self.is_virtual { "compute" } else { "sm" };
        write!(f, "{prefix}_{}{}{}", self.major, self.minor, self.suffix)
    }
}

impl FromStr for Arch {
    type Err = ArchParseError;

    /// Parses `sm_90`, `sm_90a`, `compute_80`, `90`, `9.0`.
    fn from_str(text: &str) -> Result<Self, ArchParseError> {
        let t = text.trim().to_ascii_lowercase();
        let bad = || ArchParseError {
            text: text.to_owned(),
        };
        if let Some((major, minor)) = t.split_once('.') {
            let major = major.parse().map_err(|_| bad())?;
            let minor = minor.parse().map_err(|_| bad())?;
            return Ok(Arch::sm(major, minor));
        }
        let (is_virtual, rest) = if let Some(r) = t.strip_prefix("sm_") {
            (false, r)
        } else if let Some(r) = t.strip_prefix("compute_") {
            (true, r)
        } else {
            (false, t.as_str())
        };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let suffix = rest[digits.len()..].to_owned();
        if digits.len() < 2 || !matches!(suffix.as_str(), "" | "a" | "f") {
            return Err(bad());
        }
        let number: u32 = digits.parse().map_err(|_| bad())?;
        Ok(Arch {
            major: number / 10,
            minor: number % 10,
            suffix,
            is_virtual,
        })
    }
}

/// Facts fixed by the architecture (from NVIDIA's CUDA programming guide tables), used for
/// peak estimates and for the facts of a device that is not present.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ArchFacts {
    /// FP32 lanes per SM.
    pub(crate) fp32_lanes: u32,
    /// Dense TF32 tensor-core flop per cycle per SM (0 without TF32 tensor cores).
    pub(crate) tf32_flop_per_cycle: u32,
    /// Largest shared memory per block with opt-in, bytes.
    pub(crate) max_shared_optin: u64,
    /// Shared memory per SM, bytes.
    pub(crate) shared_per_sm: u64,
    /// Threads per SM.
    pub(crate) max_threads_per_sm: u32,
}

pub(crate) fn arch_facts(major: u32, minor: u32) -> ArchFacts {
    const K: u64 = 1024;
    let (fp32_lanes, tf32, optin, per_sm, threads) = match (major, minor) {
        (0..=5, _) => (128, 0, 48 * K, 96 * K, 2048),
        (6, 0) => (64, 0, 48 * K, 64 * K, 2048),
        (6, _) => (128, 0, 48 * K, 96 * K, 2048),
        (7, 5) => (64, 0, 64 * K, 64 * K, 1024),
        (7, _) => (64, 0, 96 * K, 96 * K, 2048),
        (8, 0) => (64, 1024, 163 * K, 164 * K, 2048),
        (8, 7) => (128, 512, 163 * K, 164 * K, 2048),
        (8, 9) => (128, 256, 99 * K, 100 * K, 1536),
        (8, _) => (128, 256, 99 * K, 100 * K, 1536),
        (9, _) => (128, 2048, 227 * K, 228 * K, 2048),
        (10, _) | (11, _) => (128, 4096, 227 * K, 228 * K, 2048),
        (12, _) => (128, 512, 99 * K, 100 * K, 1536),
        _ => (128, 4096, 227 * K, 228 * K, 2048),
    };
    ArchFacts {
        fp32_lanes,
        tf32_flop_per_cycle: tf32,
        max_shared_optin: optin,
        shared_per_sm: per_sm,
        max_threads_per_sm: threads,
    }
}

/// A CUDA device as the driver lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Name (`NVIDIA H200`).
    pub name: String,
    /// Its architecture (`sm_90`).
    pub arch: Arch,
    /// Global memory, bytes.
    pub memory_bytes: u64,
    /// Streaming multiprocessors.
    pub sms: u32,
}

impl SelectableDevice for CudaDeviceInfo {
    const SELECTOR_VAR: &'static str = KF_CUDA_DEVICE;
    /// CUDA has no platforms: every device is on platform 0.
    fn platform_index(&self) -> usize {
        0
    }
    fn device_index(&self) -> usize {
        self.ordinal
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn platform(&self) -> &str {
        ""
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::Gpu
    }
    /// A bare number selects by ordinal.
    fn ordinal(&self) -> Option<usize> {
        Some(self.ordinal)
    }
}

impl fmt::Display for CudaDeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {} ({}, {} SMs, {:.1} GiB)",
            self.ordinal,
            self.name,
            self.arch,
            self.sms,
            self.memory_bytes as f64 / f64::from(1u32 << 30)
        )
    }
}

/// Whether the CUDA driver library (`libcuda.so.1`) can be loaded. Never panics.
pub fn driver_present() -> bool {
    // SAFETY: only opens (and closes again) candidate libraries by name.
    guarded("looking for the CUDA driver", || unsafe {
        cudarc::driver::sys::is_culib_present()
    })
    .unwrap_or(false)
}

/// Why there is no device, for messages: no driver library, or the driver's answer.
pub(crate) fn no_driver_reason() -> String {
    "the CUDA driver library (libcuda.so.1) is not installed on this machine".to_owned()
}

/// The CUDA devices the driver sees; [`CudaError::NoDevice`] without a driver or device.
pub fn list_devices() -> Result<Vec<CudaDeviceInfo>, CudaError> {
    if !driver_present() {
        return Err(CudaError::NoDevice {
            operation: "list devices",
            detail: no_driver_reason(),
        });
    }
    guarded("listing CUDA devices", || -> Result<_, CudaError> {
        use cudarc::driver::result;
        result::init().map_err(|e| CudaError::driver("cuInit", e, ""))?;
        let count = result::device::get_count()
            .map_err(|e| CudaError::driver("cuDeviceGetCount", e, ""))?;
        let mut out = Vec::new();
        for ordinal in 0..count.max(0) {
            let dev = result::device::get(ordinal)
                .map_err(|e| CudaError::driver("cuDeviceGet", e, ""))?;
            let attr = |a: A| {
                // SAFETY: a valid device handle from cuDeviceGet.
                unsafe { result::device::get_attribute(dev, a) }
                    .map(|v| u32::try_from(v).unwrap_or(0))
                    .map_err(|e| CudaError::driver("cuDeviceGetAttribute", e, ""))
            };
            out.push(CudaDeviceInfo {
                ordinal: usize::try_from(ordinal).unwrap_or(0),
                name: result::device::get_name(dev)
                    .map_err(|e| CudaError::driver("cuDeviceGetName", e, ""))?,
                arch: Arch::sm(
                    attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                    attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
                ),
                // SAFETY: as above.
                memory_bytes: unsafe { result::device::total_mem(dev) }
                    .map(|b| b as u64)
                    .map_err(|e| CudaError::driver("cuDeviceTotalMem", e, ""))?,
                sms: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            });
        }
        if out.is_empty() {
            return Err(CudaError::NoDevice {
                operation: "list devices",
                detail: "the CUDA driver reports no device".into(),
            });
        }
        Ok(out)
    })?
}

/// Limits of the device that launches are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) max_block: [u64; 3],
    pub(crate) max_grid: [u64; 3],
    pub(crate) max_threads_per_block: u64,
    pub(crate) shared_per_block: u64,
    pub(crate) shared_optin: u64,
    pub(crate) l2_bytes: u64,
}

impl Limits {
    /// The limits every CUDA GPU since Maxwell has (used without a device).
    pub(crate) fn of_arch(arch: &Arch) -> Self {
        let f = arch_facts(arch.major, arch.minor);
        Limits {
            max_block: [1024, 1024, 64],
            max_grid: [(1 << 31) - 1, 65535, 65535],
            max_threads_per_block: 1024,
            shared_per_block: 48 * 1024,
            shared_optin: f.max_shared_optin,
            l2_bytes: 0,
        }
    }
}

/// Device facts from the driver for the device of `ctx`.
pub(crate) fn facts_from_driver(
    ctx: &Arc<CudaContext>,
) -> Result<(DeviceFacts, Limits, Arch), CudaError> {
    let attr = |a: A| -> Result<u64, CudaError> {
        ctx.attribute(a)
            .map(|v| u64::try_from(v).unwrap_or(0))
            .map_err(|e| CudaError::driver("cuDeviceGetAttribute", e, format!("{a:?}")))
    };
    let (major, minor) = ctx
        .compute_capability()
        .map_err(|e| CudaError::driver("cuDeviceGetAttribute", e, "compute capability"))?;
    let arch = Arch::sm(
        u32::try_from(major).unwrap_or(0),
        u32::try_from(minor).unwrap_or(0),
    );
    let name = ctx
        .name()
        .map_err(|e| CudaError::driver("cuDeviceGetName", e, ""))?;
    let total = ctx
        .total_mem()
        .map_err(|e| CudaError::driver("cuDeviceTotalMem", e, ""))?;
    let driver_version = driver_version()?;
    let sms = attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let clock_khz = attr(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).unwrap_or(0);
    let mem_clock_khz = attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).unwrap_or(0);
    let bus_bits = attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).unwrap_or(0);
    let warp = attr(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?;
    let limits = driver_limits(&attr)?;
    let mut f = DeviceFacts::unknown(name);
    f.l2_cache_bytes = limits.l2_bytes;
    f.global_mem_cache_bytes = f.l2_cache_bytes;
    f.vendor = "NVIDIA Corporation".into();
    f.driver_version = driver_version;
    f.platform = "CUDA".into();
    f.kind = DeviceKind::Gpu;
    f.compute_units = u32::try_from(sms).unwrap_or(u32::MAX);
    f.max_work_group_size = limits.max_threads_per_block;
    f.max_work_item_sizes = limits.max_block.to_vec();
    f.local_mem_bytes = limits.shared_per_block;
    f.global_mem_bytes = total as u64;
    f.max_clock_mhz = u32::try_from(clock_khz / 1000).unwrap_or(0);
    f.preferred_vector_width_float = 1;
    f.sub_group_sizes = vec![u32::try_from(warp).unwrap_or(32)];
    let dram_gbs = 2.0 * mem_clock_khz as f64 * 1e3 * bus_bits as f64 / 8.0 / 1e9;
    let (gflops, gbs, how) = estimate_peaks(&arch, sms, clock_khz, dram_gbs);
    f.peak_gflops = Some(gflops);
    f.peak_bandwidth_gbs = Some(gbs);
    let extra = [
        ("arch", arch.to_string()),
        ("compute_capability", format!("{major}.{minor}")),
        (
            "shared_mem_per_block_optin",
            limits.shared_optin.to_string(),
        ),
    ]
    .into_iter()
    .chain(per_sm_extras(&attr))
    .chain([
        ("l2_cache_bytes", limits.l2_bytes.to_string()),
        ("max_grid_size", format!("{:?}", limits.max_grid)),
        ("dram_bandwidth_gbs", format!("{dram_gbs:.0}")),
        ("peak_source", how),
        ("device_present", "true".into()),
    ]);
    for (k, v) in extra {
        f.extra.insert(k.to_owned(), v);
    }
    Ok((f, limits, arch))
}

/// The driver's version as `CUDA 12.9`.
fn driver_version() -> Result<String, CudaError> {
    let mut version = 0;
    // SAFETY: an out-pointer to a live integer.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| CudaError::driver("cuDriverGetVersion", e, ""))?;
    Ok(format!("CUDA {}.{}", version / 1000, version % 1000 / 10))
}

/// The device's launch and memory limits, from its attributes (`attr`).
fn driver_limits(attr: &dyn Fn(A) -> Result<u64, CudaError>) -> Result<Limits, CudaError> {
    Ok(Limits {
        max_block: [
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid: [
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_threads_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        shared_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        shared_optin: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN).unwrap_or(0),
        l2_bytes: attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).unwrap_or(0),
    })
}

/// The per-multiprocessor and per-block resources the device facts report (0 when the
/// driver does not say), as named facts.
fn per_sm_extras(attr: &dyn Fn(A) -> Result<u64, CudaError>) -> [(&'static str, String); 4] {
    let text = |a: A| attr(a).unwrap_or(0).to_string();
    [
        (
            "shared_mem_per_sm",
            text(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        ),
        (
            "registers_per_block",
            text(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
        ),
        (
            "registers_per_sm",
            text(A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
        ),
        (
            "max_threads_per_sm",
            text(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
        ),
    ]
}

/// Facts of a device that is not here: what the architecture fixes, and zero for the rest.
pub(crate) fn facts_without_device(arch: &Arch, reason: &str) -> (DeviceFacts, Limits) {
    let limits = Limits::of_arch(arch);
    let a = arch_facts(arch.major, arch.minor);
    let mut f = DeviceFacts::unknown(format!("no CUDA device (compile-only for {arch})"));
    f.vendor = "NVIDIA Corporation".into();
    f.platform = "CUDA (NVRTC only)".into();
    f.kind = DeviceKind::Gpu;
    f.compute_units = 1;
    f.max_work_group_size = limits.max_threads_per_block;
    f.max_work_item_sizes = limits.max_block.to_vec();
    f.local_mem_bytes = limits.shared_per_block;
    f.preferred_vector_width_float = 1;
    f.sub_group_sizes = vec![32];
    let extra = [
        ("arch", arch.to_string()),
        (
            "compute_capability",
            format!("{}.{}", arch.major, arch.minor),
        ),
        ("shared_mem_per_block_optin", a.max_shared_optin.to_string()),
        ("shared_mem_per_sm", a.shared_per_sm.to_string()),
        ("registers_per_block", "65536".into()),
        ("max_threads_per_sm", a.max_threads_per_sm.to_string()),
        ("device_present", "false".into()),
        ("no_device_reason", reason.to_owned()),
    ];
    for (k, v) in extra {
        f.extra.insert(k.to_owned(), v);
    }
    (f, limits)
}

/// Generous upper bounds of throughput (GFLOP/s) and bandwidth (GB/s), with how they were
/// derived. The roofline check rejects timings faster than these, so they must never be below
/// the truth:
///
/// * compute: the larger of the FP32 peak (SMs × FP32 lanes × 2 × clock) and the dense TF32
///   tensor-core peak (an FP32 task may legitimately use TF32 tensor cores), × 1.2 headroom;
/// * bandwidth: the larger of DRAM (2 × memory clock × bus width) × 1.2 and 128 B per cycle per
///   SM (data resident in L2/L1 is not DRAM-bound; the OpenCL backend's GPU rule).
pub(crate) fn estimate_peaks(
    arch: &Arch,
    sms: u64,
    clock_khz: u64,
    dram_gbs: f64,
) -> (f64, f64, String) {
    let a = arch_facts(arch.major, arch.minor);
    let ghz = if clock_khz > 0 {
        clock_khz as f64 / 1e6
    } else {
        2.0
    };
    let sms = sms.max(1) as f64;
    let per_cycle = f64::from((2 * a.fp32_lanes).max(a.tf32_flop_per_cycle));
    let gflops = sms * ghz * per_cycle * 1.2;
    let gbs = (dram_gbs * 1.2).max(sms * ghz * 128.0);
    let how = format!(
        "upper-bound estimate: {sms} SMs x {ghz:.2} GHz x {per_cycle} flop/cycle (max of FP32 \
         and dense TF32) x 1.2; bandwidth max(DRAM {dram_gbs:.0} GB/s x 1.2, 128 B/cycle/SM)"
    );
    (gflops, gbs, how)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_architectures() {
        let a: Arch = "sm_90".parse().unwrap();
        assert_eq!((a.major, a.minor, a.is_virtual), (9, 0, false));
        assert_eq!(a.to_string(), "sm_90");
        assert_eq!("sm_90a".parse::<Arch>().unwrap().to_string(), "sm_90a");
        assert_eq!(
            "compute_80".parse::<Arch>().unwrap().to_string(),
            "compute_80"
        );
        assert_eq!("8.6".parse::<Arch>().unwrap().to_string(), "sm_86");
        assert_eq!("120".parse::<Arch>().unwrap().to_string(), "sm_120");
        assert_eq!("sm_100".parse::<Arch>().unwrap().number(), 100);
        assert!("sm_9".parse::<Arch>().is_err());
        assert!("gfx90a".parse::<Arch>().is_err());
        assert!("sm_90x".parse::<Arch>().is_err());
    }

    #[test]
    fn h100_peaks_are_above_the_datasheet() {
        // H100 SXM: 132 SMs, 1980 MHz boost, 3.35 TB/s; datasheet 67 TFLOP/s FP32,
        // 495 TFLOP/s dense TF32.
        let (gflops, gbs, _) = estimate_peaks(&Arch::sm(9, 0), 132, 1_980_000, 3350.0);
        assert!(gflops > 495_000.0, "{gflops}");
        assert!(gbs > 3350.0, "{gbs}");
    }

    #[test]
    fn facts_without_a_device_are_plausible() {
        let (f, limits) = facts_without_device(&Arch::sm(9, 0), "no driver");
        assert_eq!(f.max_work_group_size, 1024);
        assert_eq!(f.local_mem_bytes, 48 * 1024);
        assert_eq!(f.sub_group_sizes, vec![32]);
        assert_eq!(limits.shared_optin, 227 * 1024);
        assert_eq!(f.extra["device_present"], "false");
        assert!(f.peak_gflops.is_none());
    }

    #[test]
    fn selectors() {
        use kf_backend_common::DeviceSelector;
        let devices = vec![
            CudaDeviceInfo {
                ordinal: 0,
                name: "NVIDIA A100".into(),
                arch: Arch::sm(8, 0),
                memory_bytes: 1,
                sms: 108,
            },
            CudaDeviceInfo {
                ordinal: 1,
                name: "NVIDIA H200".into(),
                arch: Arch::sm(9, 0),
                memory_bytes: 1,
                sms: 132,
            },
        ];
        assert_eq!(
            DeviceSelector::parse("h200")
                .select(&devices)
                .unwrap()
                .ordinal,
            1
        );
        assert_eq!(
            DeviceSelector::parse("0").select(&devices).unwrap().ordinal,
            0
        );
        assert!(DeviceSelector::Ordinal(2).select(&devices).is_none());
    }
}
