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
use crate::error::CudaError;
use crate::guarded;
use crate::nvrtc::{self, nvrtc_info, NvrtcInfo};
use crate::resources::{parse_ptx_entries, parse_ptxas_log, resolve_entry};
use crate::runtime::{self, RuntimeInfo};

const LANGUAGES: [Language; 1] = [Language::Cuda];
/// Byte alignment of buffer offsets (`cuMemAlloc` returns 256-byte aligned memory).
const ALIGNMENT: usize = 256;
/// Dynamic shared memory every device allows without opting in.
const DEFAULT_DYNAMIC_SHARED: u64 = 48 * 1024;

/// Configures a [`CudaBackend`]: device, target architecture, what to do without a device,
/// compile cache, cache-flush size, peaks.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct CudaBackendBuilder {
    options: BackendOptions,
    arch: Option<String>,
    require_device: bool,
    host_buffers: bool,
}

impl CudaBackendBuilder {
    kf_backend_common::backend_builder_methods!("KF_CUDA_DEVICE");

    /// The architecture to compile for (`sm_90`, `sm_90a`, `compute_80`): default the device's
    /// own, or `KF_CUDA_ARCH`, or [`DEFAULT_ARCH`] without a device. A compilation's
    /// [`CompileOptions::arch`] overrides it.
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = Some(arch.into());
        self
    }

    /// Fails with [`CudaError::NoDevice`] when there is no GPU, instead of building a
    /// compile-only backend.
    pub fn require_device(mut self) -> Self {
        self.require_device = true;
        self
    }

    /// Without a device, keeps buffers in host memory so that a caller's whole protocol (the
    /// evaluator's: allocate, fill, launch) runs up to the launch, which then fails with
    /// [`CudaError::NoDevice`] naming the kernel's registers and shared memory. Off by default:
    /// without a device, [`Backend::alloc`] fails with [`CudaError::NoDevice`]. Has no effect
    /// when a device is present.
    pub fn host_buffers_without_device(mut self, enabled: bool) -> Self {
        self.host_buffers = enabled;
        self
    }

    /// Loads NVRTC (required: [`CudaError::Unavailable`] without it), then opens the device
    /// when the machine has one, or builds a compile-only backend when it has none.
    pub fn build(self) -> Result<CudaBackend, CudaError> {
        let runtime = runtime::prepare();
        let nvrtc = nvrtc_info()?;
        let configured = match self.arch.clone().or_else(|| {
            std::env::var(KF_CUDA_ARCH)
                .ok()
                .filter(|v| !v.trim().is_empty())
        }) {
            Some(text) => Some(text.parse::<Arch>().map_err(CudaError::InvalidArgument)?),
            None => None,
        };
        if let Some(arch) = &configured {
            check_arch(nvrtc, arch).map_err(CudaError::InvalidArgument)?;
        }
        // Any failure to enumerate devices (no driver, no device, a driver that does not
        // initialise) leaves a compile-only backend that says why; a device that is there but
        // cannot be selected or opened is an error.
        let (gpu, absent) = match list_devices() {
            Ok(devices) => (Some(open_gpu(&self.options.selector, &devices)?), None),
            Err(e) if self.require_device => return Err(e),
            Err(CudaError::NoDevice { detail, .. }) => (None, Some(detail)),
            Err(e) => (None, Some(e.to_string())),
        };
        CudaBackend::create(gpu, absent, configured, nvrtc, runtime, self)
    }
}

/// Whether NVRTC can target `arch`.
fn check_arch(nvrtc: &NvrtcInfo, arch: &Arch) -> Result<(), String> {
    if nvrtc.supports(arch) {
        return Ok(());
    }
    let list: Vec<String> = nvrtc.archs.iter().map(|a| format!("sm_{a}")).collect();
    Err(format!(
        "NVRTC {} cannot compile for {arch} (it supports {})",
        nvrtc.version(),
        list.join(", ")
    ))
}

/// Device memory, freed on drop.
struct DeviceMemory {
    ptr: sys::CUdeviceptr,
    ctx: Arc<CudaContext>,
}

// SAFETY: a device pointer is a plain address in the context's address space; the driver API
// may be called on it from any thread once the context is bound (every use binds it).
unsafe impl Send for DeviceMemory {}
// SAFETY: as above; shared use only reads the address.
unsafe impl Sync for DeviceMemory {}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        let _ = guarded("cuMemFree", || {
            if self.ctx.bind_to_thread().is_ok() {
                // SAFETY: allocated by cuMemAlloc in this context and freed only here.
                let _ = unsafe { result::free_sync(self.ptr) };
            }
        });
    }
}

/// The GPU side of a backend: context, stream, timing events, flush buffer.
struct Gpu {
    info: CudaDeviceInfo,
    ctx: Arc<CudaContext>,
    stream: sys::CUstream,
    /// Start and end events; locked for the whole of a timed launch.
    events: Mutex<(sys::CUevent, sys::CUevent)>,
    scratch: Mutex<Option<DeviceMemory>>,
}

// SAFETY: stream and event handles belong to the context, which every call binds first; the
// events are only used under their mutex.
unsafe impl Send for Gpu {}
// SAFETY: as above.
unsafe impl Sync for Gpu {}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = guarded("releasing the CUDA stream", || {
            if self.ctx.bind_to_thread().is_err() {
                return;
            }
            let events = *self.events.lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: created by this backend and destroyed only here, after all its work.
            unsafe {
                let _ = result::stream::synchronize(self.stream);
                let _ = result::event::destroy(events.0);
                let _ = result::event::destroy(events.1);
                let _ = result::stream::destroy(self.stream);
            }
        });
    }
}

fn open_gpu(
    selector: &kf_backend_common::DeviceSelector,
    devices: &[CudaDeviceInfo],
) -> Result<Gpu, CudaError> {
    let Some(info) = selector.select(devices) else {
        let none = selector.no_match(devices);
        return Err(CudaError::InvalidArgument(format!(
            "no CUDA device matches {}; available: {}",
            none.wanted,
            none.listed.join("; ")
        )));
    };
    let info = info.clone();
    guarded("opening the CUDA device", || -> Result<Gpu, CudaError> {
        let ctx = CudaContext::new(info.ordinal)
            .map_err(|e| CudaError::driver("cuDevicePrimaryCtxRetain", e, ""))?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| CudaError::driver("cuStreamCreate", e, ""))?;
        let event = || {
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| CudaError::driver("cuEventCreate", e, ""))
        };
        let events = (event()?, event()?);
        Ok(Gpu {
            info,
            ctx,
            stream,
            events: Mutex::new(events),
            scratch: Mutex::new(None),
        })
    })?
}

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
            .field("cache", &self.cache.as_ref().map(BinaryCache::dir))
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
                    None => DEFAULT_ARCH.parse().map_err(CudaError::InvalidArgument)?,
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

    /// The NVRTC options for `options` at `arch`: the architecture, `--ptxas-options=-v` (for
    /// real architectures, so that resource usage is reported), the runtime's include
    /// directories, then the flags verbatim. Fails on a flag with a NUL byte.
    pub fn nvrtc_options(
        &self,
        arch: &Arch,
        options: &CompileOptions,
    ) -> Result<Vec<String>, String> {
        let mut out = vec![format!("--gpu-architecture={arch}")];
        if !arch.is_virtual {
            out.push("--ptxas-options=-v".into());
        }
        for dir in &self.runtime.include_dirs {
            out.push(format!("--include-path={}", dir.display()));
        }
        for flag in &options.flags {
            if flag.contains('\0') {
                return Err(format!("compiler flag {flag:?} contains a NUL byte"));
            }
            out.push(flag.clone());
        }
        Ok(out)
    }

    /// The text NVRTC compiles: one `#define NAME value` per parameter, then
    /// `#line 1 "<file>"` so that diagnostics keep the kernel's own line numbers, then the
    /// source. Definitions go into the text rather than `-D` options because NVRTC applies
    /// `-D` to its implicitly included builtin header too, where a parameter named `T` or `N`
    /// breaks its templates; in the text they behave exactly as `nvcc -D` does for the kernel.
    /// Fails on a parameter name that is not a C identifier, or a value that is empty or holds
    /// a line break or NUL byte.
    pub fn with_definitions(
        file: &str,
        text: &str,
        params: &ParamValues,
    ) -> Result<String, String> {
        let mut out = String::with_capacity(text.len() + 32 * params.len() + 32);
        for (name, value) in params.iter() {
            let ident = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ident {
                return Err(format!("parameter name {name:?} is not a C identifier"));
            }
            let value = value.to_string();
            if value.trim().is_empty() || value.contains(['\n', '\r', '\0']) {
                return Err(format!(
                    "parameter {name} has value {value:?}; definitions cannot be empty or hold \
                     line breaks or NUL bytes"
                ));
            }
            out.push_str(&format!("#define {name} {value}\n"));
        }
        out.push_str(&format!("#line 1 \"{file}\"\n"));
        out.push_str(text);
        Ok(out)
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

    fn compile_inner(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<Compiled<CudaKernel>, CudaError> {
        let entry = source.entry.as_str();
        if source.language != Language::Cuda {
            return Err(CudaError::compile(
                entry,
                format!(
                    "the CUDA backend compiles CUDA C++, not {}",
                    source.language
                ),
                "",
            ));
        }
        let ident =
            !entry.is_empty() && entry.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident {
            return Err(CudaError::compile(
                entry,
                format!("entry point {entry:?} is not a C identifier"),
                "",
            ));
        }
        let arch = match &options.arch {
            Some(text) => text
                .parse::<Arch>()
                .map_err(|reason| CudaError::compile(entry, reason, ""))?,
            None => self.arch.clone(),
        };
        check_arch(self.nvrtc, &arch).map_err(|reason| CudaError::compile(entry, reason, ""))?;
        let file = format!("{entry}.cu");
        let text = Self::with_definitions(&file, &source.text, params)
            .map_err(|reason| CudaError::compile(entry, reason, ""))?;
        let nvrtc_options = self
            .nvrtc_options(&arch, options)
            .map_err(|reason| CudaError::compile(entry, reason, ""))?;
        let key = BinaryCache::key(&text, &nvrtc_options, &self.nvrtc.version());
        let started = Instant::now();
        let mut facts = CompilerFacts::default();
        let cached = self.cache.as_ref().and_then(|c| c.get(&key));
        let build = match cached {
            Some(build) => {
                facts.cache_hit = true;
                facts.compile_seconds = Some(0.0);
                build
            }
            None => {
                let out = nvrtc::compile(&text, &file, entry, &nvrtc_options)?;
                facts.compile_seconds = Some(out.seconds);
                let build = CachedBuild {
                    log: out.log,
                    ptx: out.ptx,
                    cubin: out.cubin.unwrap_or_default(),
                };
                if let Some(cache) = &self.cache {
                    if let Err(e) = cache.put(&key, &build) {
                        facts.extra.insert("cache_error".into(), e.to_string());
                    }
                }
                build
            }
        };
        let entries = parse_ptx_entries(&build.ptx);
        let Some(found) = resolve_entry(&entries, entry) else {
            let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
            let reason = format!(
                "no kernel named `{entry}`; the program defines {} (declare the kernel \
                 `extern \"C\" __global__ void {entry}(…)`)",
                if names.is_empty() {
                    "no __global__ function".to_owned()
                } else {
                    names.join(", ")
                }
            );
            let log = if build.log.is_empty() {
                reason.clone()
            } else {
                format!("{reason}\n{}", build.log)
            };
            return Err(CudaError::compile(entry, reason, log));
        };
        let symbol = found.name.clone();
        let params_bytes = found.param_bytes.clone();
        let resources = parse_ptxas_log(&build.log)
            .into_iter()
            .find(|r| r.name == symbol);
        if let Some(r) = &resources {
            facts.registers = r.registers;
            facts.local_mem_bytes = Some(r.shared_bytes);
            facts.private_mem_bytes = Some(r.stack_frame_bytes + r.local_bytes);
            facts.spill_bytes = Some(r.spill_store_bytes);
            let mut extra = vec![
                ("spill_load_bytes", r.spill_load_bytes.to_string()),
                ("stack_frame_bytes", r.stack_frame_bytes.to_string()),
            ];
            if let Some(b) = r.barriers {
                extra.push(("barriers", b.to_string()));
            }
            if let Some(c) = r.constant_bytes {
                extra.push(("constant_bytes", c.to_string()));
            }
            for (k, v) in extra {
                facts.extra.insert(k.into(), v);
            }
        }
        facts.extra.insert("arch".into(), arch.to_string());
        facts
            .extra
            .insert("nvrtc_version".into(), self.nvrtc.version());
        facts.extra.insert(
            "image".into(),
            if build.cubin.is_empty() {
                "ptx".into()
            } else {
                "cubin".into()
            },
        );
        if symbol != entry {
            facts.extra.insert("lowered_name".into(), symbol.clone());
        }
        facts.extra.insert("cache_key".into(), key);
        facts
            .extra
            .insert("nvrtc_options".into(), nvrtc_options.join(" "));
        if !params.is_empty() {
            facts
                .extra
                .insert("definitions".into(), params.definitions().join(" "));
        }

        let loaded = match &self.gpu {
            Some(gpu) => {
                let loaded = self.load(gpu, &build, entry, &symbol, &arch)?;
                facts.max_work_group_size = Some(loaded.max_threads);
                if facts.registers.is_none() {
                    facts.registers = Some(loaded.registers);
                }
                if facts.local_mem_bytes.is_none() {
                    facts.local_mem_bytes = Some(loaded.static_shared);
                }
                if facts.private_mem_bytes.is_none() {
                    facts.private_mem_bytes = Some(loaded.local_bytes);
                }
                facts.extra.insert(
                    "load_seconds".into(),
                    format!("{:.6}", started.elapsed().as_secs_f64()),
                );
                Some(loaded)
            }
            None => None,
        };
        Ok(Compiled {
            kernel: CudaKernel {
                entry: entry.to_owned(),
                symbol,
                params: params_bytes,
                arch,
                summary: summary(&facts),
                loaded,
                dynamic_shared: AtomicU64::new(DEFAULT_DYNAMIC_SHARED),
            },
            log: build.log,
            facts,
        })
    }

    /// Loads the cubin (or PTX) into the device's context and finds the function.
    fn load(
        &self,
        gpu: &Gpu,
        build: &CachedBuild,
        entry: &str,
        symbol: &str,
        arch: &Arch,
    ) -> Result<Loaded, CudaError> {
        Self::bind(gpu)?;
        let image: Vec<u8> = if build.cubin.is_empty() {
            let mut ptx = build.ptx.clone().into_bytes();
            ptx.push(0);
            ptx
        } else {
            build.cubin.clone()
        };
        // SAFETY: a cubin or a NUL-terminated PTX text produced by NVRTC, alive for the call.
        let module = unsafe { result::module::load_data(image.as_ptr().cast::<c_void>()) }
            .map_err(|e| {
                use cudarc::driver::sys::cudaError_enum as E;
                match e.0 {
                    E::CUDA_ERROR_NO_BINARY_FOR_GPU | E::CUDA_ERROR_INVALID_IMAGE => {
                        CudaError::compile(
                            entry,
                            format!(
                                "the driver cannot load code compiled for {arch} on {} ({}): \
                                 {:?}",
                                gpu.info.name, gpu.info.arch, e.0
                            ),
                            build.log.clone(),
                        )
                    }
                    _ => CudaError::driver("cuModuleLoadData", e, format!("`{entry}`")),
                }
            })?;
        // Owned from here on, so that an error below unloads the module.
        let mut loaded = Loaded {
            module,
            function: std::ptr::null_mut(),
            ctx: gpu.ctx.clone(),
            max_threads: 0,
            registers: 0,
            static_shared: 0,
            local_bytes: 0,
        };
        let name = CString::new(symbol)
            .map_err(|_| CudaError::compile(entry, "entry name has a NUL byte", ""))?;
        // SAFETY: a module loaded above and not unloaded (it is owned by `loaded`).
        let function = unsafe { result::module::get_function(module, name) }.map_err(|e| {
            CudaError::compile(
                entry,
                format!("the module has no function `{symbol}`: {:?}", e.0),
                build.log.clone(),
            )
        })?;
        let attr = |a: FA| -> u64 {
            // SAFETY: a function of a live module.
            unsafe { result::function::get_function_attribute(function, a) }
                .map(|v| u64::try_from(v).unwrap_or(0))
                .unwrap_or(0)
        };
        loaded.function = function;
        loaded.max_threads = attr(FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
        loaded.registers = u32::try_from(attr(FA::CU_FUNC_ATTRIBUTE_NUM_REGS)).unwrap_or(0);
        loaded.static_shared = attr(FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
        loaded.local_bytes = attr(FA::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
        Ok(loaded)
    }

    fn alloc_inner(&self, bytes: usize) -> Result<CudaBuffer, CudaError> {
        if bytes == 0 {
            return Err(CudaError::InvalidArgument(
                "CUDA buffers cannot have zero size".into(),
            ));
        }
        let Some(gpu) = &self.gpu else {
            if self.host_buffers {
                return Ok(CudaBuffer {
                    memory: Memory::Host(Mutex::new(vec![0u8; bytes])),
                    len: bytes,
                });
            }
            return Err(self.no_device("allocate device memory"));
        };
        Self::bind(gpu)?;
        // SAFETY: a plain allocation in the bound context.
        let ptr = unsafe { result::malloc_sync(bytes) }
            .map_err(|e| CudaError::driver("cuMemAlloc", e, format!("{bytes} bytes")))?;
        Ok(CudaBuffer {
            memory: Memory::Device(DeviceMemory {
                ptr,
                ctx: gpu.ctx.clone(),
            }),
            len: bytes,
        })
    }

    fn write_inner(&self, buffer: &mut CudaBuffer, data: &[u8]) -> Result<(), CudaError> {
        if data.len() > buffer.len {
            return Err(CudaError::InvalidArgument(format!(
                "writing {} bytes into a buffer of {}",
                data.len(),
                buffer.len
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        match (&buffer.memory, &self.gpu) {
            (Memory::Host(host), _) => {
                let mut host = host.lock().unwrap_or_else(|p| p.into_inner());
                host[..data.len()].copy_from_slice(data);
                Ok(())
            }
            (Memory::Device(mem), Some(gpu)) => {
                Self::bind(gpu)?;
                // SAFETY: `data` outlives the copy (the stream is synchronised before return);
                // the buffer holds at least `data.len()` bytes.
                unsafe {
                    result::memcpy_htod_async(mem.ptr, data, gpu.stream)
                        .map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e, ""))?;
                    result::stream::synchronize(gpu.stream)
                        .map_err(|e| CudaError::driver("cuStreamSynchronize", e, "after a write"))
                }
            }
            (Memory::Device(_), None) => Err(self.no_device("write device memory")),
        }
    }

    fn read_inner(&self, buffer: &CudaBuffer, out: &mut [u8]) -> Result<(), CudaError> {
        if out.len() > buffer.len {
            return Err(CudaError::InvalidArgument(format!(
                "reading {} bytes from a buffer of {}",
                out.len(),
                buffer.len
            )));
        }
        if out.is_empty() {
            return Ok(());
        }
        match (&buffer.memory, &self.gpu) {
            (Memory::Host(host), _) => {
                let host = host.lock().unwrap_or_else(|p| p.into_inner());
                let n = out.len();
                out.copy_from_slice(&host[..n]);
                Ok(())
            }
            (Memory::Device(mem), Some(gpu)) => {
                Self::bind(gpu)?;
                // SAFETY: `out` outlives the copy (synchronised before return) and the buffer
                // holds at least `out.len()` bytes.
                unsafe {
                    result::memcpy_dtoh_async(out, mem.ptr, gpu.stream)
                        .map_err(|e| CudaError::driver("cuMemcpyDtoHAsync", e, ""))?;
                    result::stream::synchronize(gpu.stream)
                        .map_err(|e| CudaError::driver("cuStreamSynchronize", e, "after a read"))
                }
            }
            (Memory::Device(_), None) => Err(self.no_device("read device memory")),
        }
    }

    fn launch_inner(
        &self,
        kernel: &CudaKernel,
        args: &[KernelArg<'_, CudaBuffer>],
        range: &NdRange,
    ) -> Result<LaunchTiming, CudaError> {
        let bad = |message: String| CudaError::Launch {
            message: format!("bad launch geometry {range}: {message}"),
        };
        range.check().map_err(bad)?;
        let (Some(gpu), Some(loaded)) = (&self.gpu, &kernel.loaded) else {
            return Err(CudaError::NoDevice {
                operation: "run it",
                detail: format!(
                    "`{}` compiled for {} with NVRTC {}: {} ({})",
                    kernel.entry,
                    kernel.arch,
                    self.nvrtc.version(),
                    kernel.summary,
                    self.no_device_reason
                        .as_deref()
                        .unwrap_or("the kernel was compiled without a device")
                ),
            });
        };
        let dims = range.global.len();
        let block: Vec<u64> = match &range.local {
            Some(local) => local.iter().map(|l| *l as u64).collect(),
            None => default_block(&range.global, &self.limits, loaded.max_threads),
        };
        let threads: u64 = block.iter().product();
        let max_threads = self
            .limits
            .max_threads_per_block
            .min(if loaded.max_threads > 0 {
                loaded.max_threads
            } else {
                u64::MAX
            });
        if threads > max_threads {
            return Err(bad(format!(
                "a block of {threads} threads exceeds the {max_threads} this kernel allows on {} \
                 ({} registers per thread)",
                self.facts.name, loaded.registers
            )));
        }
        let mut grid = [1u64; 3];
        let mut blk = [1u64; 3];
        for d in 0..dims {
            blk[d] = block[d];
            grid[d] = range.global[d] as u64 / block[d];
            if block[d] > self.limits.max_block[d] {
                return Err(bad(format!(
                    "block extent {} in dimension {d} exceeds the device maximum {}",
                    block[d], self.limits.max_block[d]
                )));
            }
            if grid[d] > self.limits.max_grid[d] {
                return Err(bad(format!(
                    "grid extent {} in dimension {d} exceeds the device maximum {}",
                    grid[d], self.limits.max_grid[d]
                )));
            }
        }
        let values: Vec<&KernelArg<'_, CudaBuffer>> = args
            .iter()
            .filter(|a| !matches!(a, KernelArg::Local(_)))
            .collect();
        if values.len() != kernel.params.len() {
            return Err(CudaError::Launch {
                message: format!(
                    "`{}` takes {} arguments, {} given (plus {} dynamic shared memory argument(s))",
                    kernel.entry,
                    kernel.params.len(),
                    values.len(),
                    args.len() - values.len()
                ),
            });
        }
        let dynamic_shared: u64 = args
            .iter()
            .map(|a| match a {
                KernelArg::Local(b) => *b as u64,
                _ => 0,
            })
            .sum();
        // Each argument in an 8-byte slot; the driver copies the parameter's size from it.
        let mut slots: Vec<u64> = Vec::with_capacity(values.len());
        for (i, (arg, want)) in values.iter().zip(&kernel.params).enumerate() {
            let (bytes, size): ([u8; 8], usize) = match arg {
                KernelArg::Buffer { buffer, offset } => {
                    let Memory::Device(mem) = &buffer.memory else {
                        return Err(CudaError::InvalidArgument(format!(
                            "argument {i}: a host buffer cannot be passed to a device kernel"
                        )));
                    };
                    if *offset % ALIGNMENT != 0 {
                        return Err(CudaError::InvalidArgument(format!(
                            "argument {i}: buffer offset {offset} is not a multiple of {ALIGNMENT} \
                             bytes"
                        )));
                    }
                    if *offset >= buffer.len {
                        return Err(CudaError::InvalidArgument(format!(
                            "argument {i}: offset {offset} is beyond the buffer's {} bytes",
                            buffer.len
                        )));
                    }
                    ((mem.ptr + *offset as u64).to_ne_bytes(), 8)
                }
                KernelArg::I32(v) => (pad(&v.to_ne_bytes()), 4),
                KernelArg::U32(v) => (pad(&v.to_ne_bytes()), 4),
                KernelArg::F32(v) => (pad(&v.to_ne_bytes()), 4),
                KernelArg::I64(v) => (v.to_ne_bytes(), 8),
                KernelArg::Local(_) => continue,
            };
            if size != *want {
                return Err(CudaError::Launch {
                    message: format!(
                        "argument {i} of `{}` ({}) is {size} bytes, the kernel's parameter is \
                         {want} bytes",
                        kernel.entry,
                        describe_arg(arg, "dynamic shared memory")
                    ),
                });
            }
            slots.push(u64::from_ne_bytes(bytes));
        }
        let mut pointers: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| (s as *mut u64).cast::<c_void>())
            .collect();

        Self::bind(gpu)?;
        if dynamic_shared > kernel.dynamic_shared.load(Ordering::Relaxed) {
            let limit = self
                .limits
                .shared_optin
                .saturating_sub(loaded.static_shared);
            if dynamic_shared > limit {
                return Err(CudaError::Resources {
                    operation: "cuLaunchKernel",
                    message: format!(
                        "{dynamic_shared} bytes of dynamic shared memory requested; {} allows at \
                         most {limit} beside the kernel's {} static bytes",
                        self.facts.name, loaded.static_shared
                    ),
                });
            }
            // SAFETY: a function of a live module; the value is within the device's opt-in
            // limit.
            unsafe {
                result::function::set_function_attribute(
                    loaded.function,
                    FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    i32::try_from(dynamic_shared).unwrap_or(i32::MAX),
                )
            }
            .map_err(|e| {
                CudaError::launch("cuFuncSetAttribute", e, "dynamic shared memory size")
            })?;
            kernel
                .dynamic_shared
                .store(dynamic_shared, Ordering::Relaxed);
        }
        let events = gpu.events.lock().unwrap_or_else(|p| p.into_inner());
        let to_u32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        // SAFETY: the function belongs to a live module of the bound context; `pointers` has
        // one pointer per kernel parameter, each to an 8-byte slot holding a value of the
        // parameter's size (checked above against the PTX signature); every buffer address
        // stays allocated until the launch has completed (synchronised below).
        unsafe {
            result::event::record(events.0, gpu.stream)
                .map_err(|e| CudaError::driver("cuEventRecord", e, "start"))?;
            result::launch_kernel(
                loaded.function,
                (to_u32(grid[0]), to_u32(grid[1]), to_u32(grid[2])),
                (to_u32(blk[0]), to_u32(blk[1]), to_u32(blk[2])),
                to_u32(dynamic_shared),
                gpu.stream,
                &mut pointers,
            )
            .map_err(|e| {
                CudaError::launch(
                    "cuLaunchKernel",
                    e,
                    &format!("grid {grid:?} block {blk:?}, {dynamic_shared} bytes dynamic shared"),
                )
            })?;
            result::event::record(events.1, gpu.stream)
                .map_err(|e| CudaError::driver("cuEventRecord", e, "end"))?;
            result::event::synchronize(events.1).map_err(|e| {
                CudaError::launch(
                    "cuEventSynchronize",
                    e,
                    &format!("`{}` failed", kernel.entry),
                )
            })?;
            let ms = result::event::elapsed(events.0, events.1)
                .map_err(|e| CudaError::driver("cuEventElapsedTime", e, ""))?;
            Ok(LaunchTiming {
                device_seconds: f64::from(ms) * 1e-3,
            })
        }
    }

    fn flush_inner(&self) -> Result<(), CudaError> {
        let Some(gpu) = &self.gpu else {
            return Err(self.no_device("flush its caches"));
        };
        Self::bind(gpu)?;
        let mut scratch = Self::scratch(gpu);
        if scratch.is_none() {
            // SAFETY: a plain allocation in the bound context.
            let ptr = unsafe { result::malloc_sync(self.flush_bytes.max(1)) }.map_err(|e| {
                CudaError::driver(
                    "cuMemAlloc",
                    e,
                    format!("{} bytes to flush the L2 cache", self.flush_bytes),
                )
            })?;
            *scratch = Some(DeviceMemory {
                ptr,
                ctx: gpu.ctx.clone(),
            });
        }
        let Some(mem) = scratch.as_ref() else {
            return Err(CudaError::Unsupported("flush_caches"));
        };
        let stamp = self.flush_counter.fetch_add(1, Ordering::Relaxed) as u8;
        // SAFETY: the scratch buffer holds `flush_bytes` bytes; the stream is synchronised.
        unsafe {
            result::memset_d8_async(mem.ptr, stamp, self.flush_bytes.max(1), gpu.stream)
                .map_err(|e| CudaError::driver("cuMemsetD8Async", e, "L2 flush"))?;
            result::stream::synchronize(gpu.stream)
                .map_err(|e| CudaError::driver("cuStreamSynchronize", e, "L2 flush"))
        }
    }
}

fn pad(bytes: &[u8; 4]) -> [u8; 8] {
    [bytes[0], bytes[1], bytes[2], bytes[3], 0, 0, 0, 0]
}

/// A block shape for a launch without one: along dimension 0, the largest divisor of the
/// global size up to 256 threads (and the kernel's limit); 1 elsewhere.
fn default_block(global: &[usize], limits: &Limits, kernel_max: u64) -> Vec<u64> {
    let cap = 256u64
        .min(limits.max_block[0])
        .min(if kernel_max > 0 { kernel_max } else { 256 })
        .max(1);
    let g0 = global.first().copied().unwrap_or(1) as u64;
    let b0 = (1..=cap).rev().find(|b| g0.is_multiple_of(*b)).unwrap_or(1);
    let mut block = vec![1u64; global.len()];
    if let Some(first) = block.first_mut() {
        *first = b0;
    }
    block
}

/// `40 registers, 8448 bytes shared memory, 0 bytes spilled`.
fn summary(facts: &CompilerFacts) -> String {
    let or_unknown = |v: Option<u64>, unit: &str| match v {
        Some(v) => format!("{v} {unit}"),
        None => format!("unknown {unit}"),
    };
    format!(
        "{}, {}, {}",
        or_unknown(facts.registers.map(u64::from), "registers"),
        or_unknown(facts.local_mem_bytes, "bytes shared memory"),
        or_unknown(facts.spill_bytes, "bytes spilled"),
    )
}

/// A module loaded into the device's context, with the kernel's function and attributes.
struct Loaded {
    module: sys::CUmodule,
    function: sys::CUfunction,
    ctx: Arc<CudaContext>,
    max_threads: u64,
    registers: u32,
    static_shared: u64,
    local_bytes: u64,
}

// SAFETY: module and function handles belong to the context, which every use binds first.
unsafe impl Send for Loaded {}
// SAFETY: as above; launches only read the handles.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _ = guarded("cuModuleUnload", || {
            if self.ctx.bind_to_thread().is_ok() {
                // SAFETY: loaded by cuModuleLoadData and unloaded only here.
                let _ = unsafe { result::module::unload(self.module) };
            }
        });
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
