//! Backends by name ([`BackendKind`]), for command lines and evaluation workers. A backend is
//! in a build when its cargo feature (`opencl`, `cuda`, `sycl`) is on; naming one that is not
//! is a [`BackendError::NotBuilt`].
//!
//! | name | backend | without its hardware |
//! |---|---|---|
//! | `opencl` | [`OpenClBackend`] | the Intel CPU runtime `scripts/setup.sh` installs is a device |
//! | `cuda` | `CudaBackend` | compile-only (needs NVRTC: `scripts/setup.sh --cuda`), see `open_cuda` |
//! | `sycl` | `SyclBackend` | the Intel CPU device, after `scripts/setup.sh --sycl`, see `open_sycl` |

#[cfg(feature = "cuda")]
use kf_backend_cuda::{CudaBackend, DeviceSelector as CudaDeviceSelector};
#[cfg(feature = "opencl")]
use kf_backend_opencl::{DeviceSelector, OpenClBackend};
#[cfg(feature = "sycl")]
use kf_backend_sycl::{DeviceSelector as SyclDeviceSelector, SyclBackend};
use kf_eval::worker::{serve_if_requested, WORKER_ENV};
use kf_eval::{BackendSpec, TaskRegistry};

pub use crate::backend_kind::{BackendError, BackendKind};

/// The names of the backends this build has.
pub fn built() -> Vec<&'static str> {
    BackendKind::ALL
        .into_iter()
        .filter(|k| k.is_built())
        .map(BackendKind::name)
        .collect()
}

/// Opens the OpenCL backend on the device `spec` selects.
#[cfg(feature = "opencl")]
pub fn open_opencl(spec: &BackendSpec) -> Result<OpenClBackend, BackendError> {
    let mut builder = OpenClBackend::builder();
    if let Some(device) = &spec.device {
        builder = builder.device(DeviceSelector::parse(device));
    }
    if let Some(dir) = &spec.cache_dir {
        builder = builder.cache_dir(dir);
    }
    builder
        .build()
        .map_err(|e| BackendError::Open(e.to_string()))
}

/// Opens the CUDA backend on the device `spec` selects (an ordinal or a name substring; default
/// `KF_CUDA_DEVICE` or device 0).
///
/// Without a GPU this is a compile-only backend whose buffers live in host memory
/// ([`kf_backend_cuda::CudaBackendBuilder::host_buffers_without_device`]): an evaluation then
/// compiles the kernel with NVRTC (a bad kernel is `compile_error` with NVRTC's log), and a
/// kernel that compiled reaches the launch, which fails with "no CUDA device present to run
/// it" naming its registers, shared memory and spills; the evaluator reports that as
/// `runtime_error` with the compiler facts filled in. Nothing is timed or verified, and the
/// diagnostics say so. NVRTC itself is required: without it this fails, saying how to
/// install it.
#[cfg(feature = "cuda")]
pub fn open_cuda(spec: &BackendSpec) -> Result<CudaBackend, BackendError> {
    let mut builder = CudaBackend::builder().host_buffers_without_device(true);
    if let Some(device) = &spec.device {
        builder = builder.device(CudaDeviceSelector::parse(device));
    }
    if let Some(dir) = &spec.cache_dir {
        builder = builder.cache_dir(dir);
    }
    builder
        .build()
        .map_err(|e| BackendError::Open(e.to_string()))
}

/// Opens the SYCL backend on the device `spec` selects (`cpu`, `gpu`, `P:D`, or a name
/// substring; default `KF_SYCL_DEVICE` or the best device that can build SYCL source).
///
/// Kernels are SYCL free functions compiled at run time by the SYCL runtime; without the
/// runtime (or when this build found none: the shim is compiled only then) this fails saying
/// how to install it (`scripts/setup.sh --sycl`).
#[cfg(feature = "sycl")]
pub fn open_sycl(spec: &BackendSpec) -> Result<SyclBackend, BackendError> {
    let mut builder = SyclBackend::builder();
    if let Some(device) = &spec.device {
        builder = builder.device(SyclDeviceSelector::parse(device));
    }
    if let Some(dir) = &spec.cache_dir {
        builder = builder.cache_dir(dir);
    }
    builder
        .build()
        .map_err(|e| BackendError::Open(e.to_string()))
}

/// The kernel language a backend compiles: `sycl` → SYCL, `cuda` → CUDA, anything else
/// OpenCL C.
pub fn language_of(backend: &str) -> kf_core::Language {
    backend
        .parse::<BackendKind>()
        .map_or(kf_core::Language::OpenCl, BackendKind::language)
}

/// Checks that `spec` names a backend this build has; returns it.
pub fn check(spec: &BackendSpec) -> Result<BackendKind, BackendError> {
    let kind = BackendKind::of(spec)?;
    if kind.is_built() {
        Ok(kind)
    } else {
        Err(BackendError::NotBuilt {
            kind,
            built: built().join(", "),
        })
    }
}

/// Serves as an evaluation worker when this process was started as one, and returns at once
/// otherwise. Call it first thing in `main` of every program that uses
/// [`kf_eval::IsolatedEvaluator`] (the `kf` binary and the examples do).
///
/// The worker's backend type is chosen from the spec's `kind` before serving (each backend
/// has its own kernel and buffer types); an unreadable spec falls through to the first backend
/// of this build, which reports it.
pub fn init() {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return;
    };
    let kind = serde_json::from_str::<BackendSpec>(&spec)
        .ok()
        .and_then(|spec| BackendKind::of(&spec).ok())
        .filter(|k| k.is_built())
        .or_else(|| BackendKind::ALL.into_iter().find(|k| k.is_built()));
    let tasks = TaskRegistry::builtin();
    match kind {
        #[cfg(feature = "cuda")]
        Some(BackendKind::Cuda) => serve_if_requested(
            |spec: &BackendSpec| {
                check(spec).map_err(|e| e.to_string())?;
                open_cuda(spec).map_err(|e| e.to_string())
            },
            &tasks,
        ),
        #[cfg(feature = "sycl")]
        Some(BackendKind::Sycl) => serve_if_requested(
            |spec: &BackendSpec| {
                check(spec).map_err(|e| e.to_string())?;
                open_sycl(spec).map_err(|e| e.to_string())
            },
            &tasks,
        ),
        #[cfg(feature = "opencl")]
        Some(BackendKind::OpenCl) => serve_if_requested(
            |spec: &BackendSpec| {
                check(spec).map_err(|e| e.to_string())?;
                open_opencl(spec).map_err(|e| e.to_string())
            },
            &tasks,
        ),
        _ => {
            // A worker of a build with no backend: nothing can be served.
            eprintln!("kf-eval worker: this build has no backend (enable opencl, cuda or sycl)");
            std::process::exit(2);
        }
    }
}

/// Evaluates `$body` with `$backend` bound to the backend `spec` selects, opened in this
/// process; a backend this build lacks is [`BackendError::NotBuilt`]. One dispatch for every
/// in-process use of a backend (each backend is its own type).
macro_rules! with_opened_backend {
    ($spec:expr, |$backend:ident| $body:expr) => {
        match check($spec)? {
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => {
                let $backend = open_cuda($spec)?;
                $body
            }
            #[cfg(feature = "sycl")]
            BackendKind::Sycl => {
                let $backend = open_sycl($spec)?;
                $body
            }
            #[cfg(feature = "opencl")]
            BackendKind::OpenCl => {
                let $backend = open_opencl($spec)?;
                $body
            }
            #[allow(unreachable_patterns)]
            kind => Err(BackendError::NotBuilt {
                kind,
                built: built().join(", "),
            }),
        }
    };
}

/// The measured roofline of the device `spec` selects: the cached characterisation
/// ([`kf_eval::characterise`]), or a fresh one measured in this process and cached (an FMA and
/// two STREAM micro-kernels, about ten seconds once per device and driver). The flag says
/// whether the figures came from the cache. Evaluation workers started afterwards read the
/// cache, so their roofline fractions and the anti-cheat bound use measured peaks instead of
/// the backend's estimates.
pub fn characterise_device(
    spec: &BackendSpec,
) -> Result<(kf_eval::characterise::Characterisation, bool), BackendError> {
    #[allow(unused_imports)]
    use kf_eval::characterise::{characterise, CharacteriseOptions};
    with_opened_backend!(spec, |backend| characterise(
        &backend,
        &CharacteriseOptions::default(),
        false
    )
    .map_err(|e| BackendError::Characterise(e.to_string())))
}

/// The facts of the device `spec` selects, from a backend opened in this process (the device a
/// distributed worker registers, and what a search tells its mutators and tuner).
pub fn device_facts(spec: &BackendSpec) -> Result<kf_core::DeviceFacts, BackendError> {
    #[allow(unused_imports)]
    use kf_core::Backend;
    with_opened_backend!(spec, |backend| Ok(backend.device().clone()))
}
