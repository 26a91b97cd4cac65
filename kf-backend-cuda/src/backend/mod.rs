//! [`CudaBackend`]: the [`Backend`] implementation.

use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUfunction_attribute_enum as FA};
use cudarc::driver::CudaContext;
use kf_backend_common::launch::describe_arg;
use kf_backend_common::BackendOptions;
use kf_core::{
    Backend, CompileOptions, Compiled, CompilerFacts, DeviceFacts, KernelArg, KernelSource,
    Language, LaunchTiming, NdRange, ParamValues,
};

use crate::cache::{BinaryCache, CachedBuild};
use crate::device::{
    facts_from_driver, facts_without_device, list_devices, no_driver_reason, Arch, CudaDeviceInfo,
    Limits, DEFAULT_ARCH, KF_CUDA_ARCH,
};
use crate::error::{ArchParseError, CudaError};
use crate::guarded;
use crate::nvrtc::{self, nvrtc_info, NvrtcInfo};
use crate::resources::{parse_ptx_entries, parse_ptxas_log, resolve_entry};
use crate::runtime::{self, RuntimeInfo};

mod builder;
mod compile;
mod driver;
mod launch;

use builder::check_arch;
pub use builder::CudaBackendBuilder;
#[cfg(test)]
use compile::summary;
use driver::{open_gpu, DeviceMemory, Gpu, Loaded};
#[cfg(test)]
use launch::default_block;

const LANGUAGES: [Language; 1] = [Language::Cuda];
/// Byte alignment of buffer offsets (`cuMemAlloc` returns 256-byte aligned memory).
const ALIGNMENT: usize = 256;
/// Dynamic shared memory every device allows without opting in.
const DEFAULT_DYNAMIC_SHARED: u64 = 48 * 1024;

/// A [`Backend`] for CUDA C++: NVRTC compiles, the CUDA driver runs. Both libraries are loaded
/// at run time, so this builds everywhere; NVRTC is required, a GPU is not.
///
/// * **With a GPU**: device facts from the driver, kernels loaded as cubins for the device's
///   architecture, launches timed with CUDA events, [`Backend::flush_caches`] overwrites a
///   buffer twice the size of the L2 cache.
/// * **Without a GPU** (no `libcuda.so.1`, or no device): a compile-only backend for
///   [`DEFAULT_ARCH`] (or the configured architecture). Compiling and resource reporting
///   (registers, shared memory, spills, in [`Compiled::facts`]) work; [`Backend::alloc`] and
///   [`Backend::launch`] return [`CudaError::NoDevice`] (kind `Unavailable`), unless
///   [`CudaBackendBuilder::host_buffers_without_device`] keeps buffers in host memory, so that
///   only the launch fails.
///
/// ```
/// use kf_backend_cuda::CudaBackend;
/// use kf_core::prelude::*;
///
/// # fn main() -> Result<(), kf_backend_cuda::CudaError> {
/// let backend = match CudaBackend::builder().no_cache().build() {
///     Ok(backend) => backend,
///     Err(e) if e.kind() == BackendErrorKind::Unavailable => {
///         eprintln!("skipped: {e}"); // no NVRTC: run scripts/setup.sh --cuda
///         return Ok(());
///     }
///     Err(e) => return Err(e),
/// };
/// let src = KernelSource::new(
///     Language::Cuda,
///     "scale",
///     r#"extern "C" __global__ void scale(float* x, int n) {
///         int i = blockIdx.x * blockDim.x + threadIdx.x;
///         if (i < n) x[i] *= FACTOR;
///     }"#,
/// );
/// let compiled = backend.compile(
///     &src,
///     &ParamValues::new().with("FACTOR", 2.0),
///     &CompileOptions::default(),
/// )?;
/// println!("{} registers for {}", compiled.facts.registers.unwrap_or(0), backend.arch());
/// if !backend.has_device() {
///     return Ok(()); // compile-only: no GPU to run it on
/// }
/// let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
/// let mut buf = backend.alloc(data.len())?;
/// backend.write(&mut buf, &data)?;
/// let timing = backend.launch(
///     &compiled.kernel,
///     &[KernelArg::Buffer { buffer: &buf, offset: 0 }, KernelArg::I32(4)],
///     &NdRange::new([4], [4]),
/// )?;
/// let mut out = vec![0u8; data.len()];
/// backend.read(&buf, &mut out)?;
/// assert_eq!(&out[4..8], &4.0f32.to_ne_bytes());
/// println!("took {:.3} us", timing.device_seconds * 1e6);
/// # Ok(())
/// # }
/// ```
pub struct CudaBackend {
    // Field order is drop order: the GPU (stream, events, scratch) goes first.
    gpu: Option<Gpu>,
    facts: DeviceFacts,
    limits: Limits,
    arch: Arch,
    nvrtc: &'static NvrtcInfo,
    runtime: &'static RuntimeInfo,
    cache: Option<BinaryCache>,
    host_buffers: bool,
    no_device_reason: Option<String>,
    flush_bytes: usize,
    flush_counter: AtomicU32,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.facts.name)
            .field("arch", &self.arch.to_string())
            .field("nvrtc", &self.nvrtc.version())
            .field("cache", &self.cache.as_ref().map(|c| c.dir()))
            .finish_non_exhaustive()
    }
}

impl CudaBackend {
    /// The default backend: NVRTC from [`crate::runtime`], the device `KF_CUDA_DEVICE` names
    /// (or device 0) when there is one, compile-only otherwise; kernels cached in the default
    /// place.
    pub fn new() -> Result<Self, CudaError> {
        Self::builder().build()
    }

    /// A builder for the non-default choices.
    pub fn builder() -> CudaBackendBuilder {
        CudaBackendBuilder::default()
    }

    fn create(
        gpu: Option<Gpu>,
        absent: Option<String>,
        configured: Option<Arch>,
        nvrtc: &'static NvrtcInfo,
        runtime: &'static RuntimeInfo,
        options: CudaBackendBuilder,
    ) -> Result<Self, CudaError> {
        let (mut facts, limits, arch, no_device_reason) = match &gpu {
            Some(gpu) => {
                let (mut facts, limits, device_arch) = guarded("reading device facts", || {
                    gpu.ctx
                        .bind_to_thread()
                        .map_err(|e| CudaError::driver("cuCtxSetCurrent", e, ""))?;
                    facts_from_driver(&gpu.ctx)
                })??;
                let arch = match configured {
                    Some(arch) => arch,
                    None if nvrtc.supports(&device_arch) => device_arch,
                    None => {
                        // A GPU newer than this NVRTC: PTX for the newest architecture it
                        // knows, compiled for the device by the driver.
                        let newest = nvrtc.newest().unwrap_or(52);
                        let arch = Arch::sm(newest / 10, newest % 10).to_virtual();
                        facts.extra.insert(
                            "arch_note".into(),
                            format!(
                                "NVRTC {} cannot target {device_arch}; compiling PTX for \
                                 {arch}, which the driver compiles for the device",
                                nvrtc.version()
                            ),
                        );
                        arch
                    }
                };
                (facts, limits, arch, None)
            }
            None => {
                let arch = match configured {
                    Some(arch) => arch,
                    None => DEFAULT_ARCH
                        .parse()
                        .map_err(|e: ArchParseError| CudaError::InvalidArgument(e.to_string()))?,
                };
                let reason = absent.unwrap_or_else(no_driver_reason);
                let (facts, limits) = facts_without_device(&arch, &reason);
                (facts, limits, arch, Some(reason))
            }
        };
        facts.extra.insert("nvrtc_version".into(), nvrtc.version());
        facts.extra.insert("compile_arch".into(), arch.to_string());
        options.options.apply_peaks(&mut facts);
        let cache = options
            .options
            .cache_dir(runtime.runtime_dir.as_deref(), "cuda")
            .map(BinaryCache::new);
        let flush_bytes = options.options.flush_bytes(limits.l2_bytes, u64::MAX);
        Ok(CudaBackend {
            gpu,
            facts,
            limits,
            arch,
            nvrtc,
            runtime,
            cache,
            host_buffers: options.host_buffers,
            no_device_reason,
            flush_bytes,
            flush_counter: AtomicU32::new(0),
        })
    }

    /// Whether a GPU is present (else this backend compiles only).
    pub fn has_device(&self) -> bool {
        self.gpu.is_some()
    }

    /// Why there is no device, when there is none.
    pub fn no_device_reason(&self) -> Option<&str> {
        self.no_device_reason.as_deref()
    }

    /// The device as the driver lists it, when there is one.
    pub fn device_info(&self) -> Option<&CudaDeviceInfo> {
        self.gpu.as_ref().map(|g| &g.info)
    }

    /// The architecture kernels are compiled for unless [`CompileOptions::arch`] says
    /// otherwise.
    pub fn arch(&self) -> &Arch {
        &self.arch
    }

    /// The NVRTC in use.
    pub fn nvrtc(&self) -> &NvrtcInfo {
        self.nvrtc
    }

    /// Where NVRTC came from (see [`crate::runtime`]).
    pub fn runtime(&self) -> &RuntimeInfo {
        self.runtime
    }

    /// The compile cache, if enabled.
    pub fn cache(&self) -> Option<&BinaryCache> {
        self.cache.as_ref()
    }

    fn scratch(gpu: &Gpu) -> MutexGuard<'_, Option<DeviceMemory>> {
        gpu.scratch.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bind(gpu: &Gpu) -> Result<(), CudaError> {
        gpu.ctx
            .bind_to_thread()
            .map_err(|e| CudaError::driver("cuCtxSetCurrent", e, ""))
    }

    fn no_device(&self, operation: &'static str) -> CudaError {
        CudaError::NoDevice {
            operation,
            detail: format!(
                "{}; compiling and resource reporting work without one (for {})",
                self.no_device_reason
                    .as_deref()
                    .unwrap_or("no CUDA device is open"),
                self.arch
            ),
        }
    }
}

/// A compiled CUDA kernel: on a GPU machine, its module loaded on the device; without one, what
/// NVRTC reported (launching it fails with [`CudaError::NoDevice`]).
pub struct CudaKernel {
    entry: String,
    symbol: String,
    params: Vec<usize>,
    arch: Arch,
    summary: String,
    loaded: Option<Loaded>,
    /// The dynamic shared memory limit currently set on the function.
    dynamic_shared: AtomicU64,
}

impl std::fmt::Debug for CudaKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaKernel")
            .field("entry", &self.entry)
            .field("symbol", &self.symbol)
            .field("params", &self.params)
            .field("arch", &self.arch.to_string())
            .field("loaded", &self.loaded.is_some())
            .finish()
    }
}

impl CudaKernel {
    /// The entry point's name as asked for.
    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// The symbol in the module (the mangled name of a kernel not declared `extern "C"`).
    pub fn symbol(&self) -> &str {
        &self.symbol
    }

    /// The byte size of each kernel parameter (8 for pointers), from the PTX signature.
    pub fn param_bytes(&self) -> &[usize] {
        &self.params
    }

    /// The architecture it was compiled for.
    pub fn arch(&self) -> &Arch {
        &self.arch
    }

    /// Whether it is loaded on a device (and so can be launched).
    pub fn is_loaded(&self) -> bool {
        self.loaded.is_some()
    }
}

enum Memory {
    Device(DeviceMemory),
    Host(Mutex<Vec<u8>>),
}

/// A buffer of a fixed size: device memory, or host memory on a compile-only backend built
/// with [`CudaBackendBuilder::host_buffers_without_device`].
pub struct CudaBuffer {
    memory: Memory,
    len: usize,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBuffer")
            .field("len", &self.len)
            .field("on_device", &self.is_on_device())
            .finish()
    }
}

impl CudaBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes (never true: zero-size buffers are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it lives in device memory (false for host staging without a device).
    pub fn is_on_device(&self) -> bool {
        matches!(self.memory, Memory::Device(_))
    }
}

impl Backend for CudaBackend {
    type Error = CudaError;
    type Kernel = CudaKernel;
    type Buffer = CudaBuffer;

    fn name(&self) -> &str {
        "cuda"
    }

    fn languages(&self) -> &[Language] {
        &LANGUAGES
    }

    fn device(&self) -> &DeviceFacts {
        &self.facts
    }

    /// Compiles with NVRTC for [`CudaBackend::arch`] (or [`CompileOptions::arch`]), each
    /// parameter as a definition (see [`CudaBackend::with_definitions`]), with `--ptxas-options=-v` so that the facts carry registers,
    /// static shared memory (`local_mem_bytes`), stack (`private_mem_bytes`) and spills; on a
    /// GPU machine the module is loaded and `max_work_group_size` is the driver's limit for the
    /// kernel. The entry point may be `extern "C"` or a unique C++ function name.
    fn compile(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<Compiled<CudaKernel>, CudaError> {
        guarded("compile", || self.compile_inner(source, params, options))?
    }

    fn alloc(&self, bytes: usize) -> Result<CudaBuffer, CudaError> {
        guarded("alloc", || self.alloc_inner(bytes))?
    }

    fn write(&self, buffer: &mut CudaBuffer, data: &[u8]) -> Result<(), CudaError> {
        guarded("write", || self.write_inner(buffer, data))?
    }

    fn read(&self, buffer: &CudaBuffer, out: &mut [u8]) -> Result<(), CudaError> {
        guarded("read", || self.read_inner(buffer, out))?
    }

    /// Launches on the backend's stream with a grid of `global / local` blocks (a block of up
    /// to 256 threads along dimension 0 when `local` is `None`), [`KernelArg::Local`] sizes
    /// summed into the launch's dynamic shared memory, and returns the time between CUDA events
    /// recorded around it. Argument count and sizes are checked against the kernel's PTX
    /// signature first.
    fn launch(
        &self,
        kernel: &CudaKernel,
        args: &[KernelArg<'_, CudaBuffer>],
        range: &NdRange,
    ) -> Result<LaunchTiming, CudaError> {
        guarded("launch", || self.launch_inner(kernel, args, range))?
    }

    fn buffer_alignment(&self) -> usize {
        ALIGNMENT
    }

    /// Overwrites a device buffer twice the size of the L2 cache (at least 64 MiB, allocated
    /// on first use) with `cuMemsetD8`, evicting earlier data from L2.
    fn flush_caches(&self) -> Result<(), CudaError> {
        guarded("flush_caches", || self.flush_inner())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_can_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<CudaBackend>();
        send_sync::<CudaKernel>();
        send_sync::<CudaBuffer>();
    }

    #[test]
    fn default_blocks_divide_the_range() {
        let limits = Limits::of_arch(&Arch::sm(9, 0));
        assert_eq!(default_block(&[1000], &limits, 1024), vec![250]);
        assert_eq!(default_block(&[1 << 20], &limits, 1024), vec![256]);
        assert_eq!(default_block(&[7, 3], &limits, 1024), vec![7, 1]);
        assert_eq!(default_block(&[1024], &limits, 128), vec![128]);
    }

    #[test]
    fn summary_says_what_is_unknown() {
        let facts = CompilerFacts {
            registers: Some(40),
            local_mem_bytes: Some(8448),
            ..CompilerFacts::default()
        };
        assert_eq!(
            summary(&facts),
            "40 registers, 8448 bytes shared memory, unknown bytes spilled"
        );
    }
}
