//! The shipped backends as [`BackendFactory`]s ([`OpenClFactory`], [`CudaFactory`],
//! [`SyclFactory`]; [`shipped`] registers those of this build), and their names
//! ([`BackendKind`]) for command lines. A backend is in a build when its cargo feature
//! (`opencl`, `cuda`, `sycl`) is on; naming one that is not is a [`BackendError::NotBuilt`].
//!
//! The search takes any [`BackendFactory`] ([`crate::SearchBuilder::backend_factory`]); a
//! program whose workers must open a backend of its own registers it with [`init_with`].
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
use std::sync::Arc;

// The trait is implemented only for the backends of this build's features.
#[cfg(any(feature = "opencl", feature = "cuda", feature = "sycl"))]
use kf_eval::BackendFactory;
use kf_eval::{BackendRegistry, BackendSpec, DynBackendFactory, TaskRegistry};

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

/// The kernel language a shipped backend compiles: `opencl` → OpenCL C, `sycl` → SYCL,
/// `cuda` → CUDA; any other name is [`BackendError::Unknown`], never a guess.
///
/// ```
/// use kf_search::backends::language_of;
/// assert_eq!(language_of("cuda").unwrap(), kf_core::Language::Cuda);
/// assert!(language_of("metal").is_err());
/// ```
pub fn language_of(backend: &str) -> Result<kf_core::Language, BackendError> {
    backend.parse::<BackendKind>().map(BackendKind::language)
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
/// [`kf_eval::IsolatedEvaluator`] (the `kf` binary and the examples do). The worker opens the
/// backend its spec names among the [`shipped`] ones; [`init_with`] adds one's own.
pub fn init() {
    init_with(&BackendRegistry::new());
}

/// [`init`] with the backend factories of `registry` besides the [`shipped`] ones (a factory of
/// a shipped name replaces it): the evaluation workers of a program that searches with a
/// backend of its own ([`crate::SearchBuilder::backend_factory`]) open it by its name.
pub fn init_with(registry: &BackendRegistry) {
    shipped()
        .merged(registry)
        .serve_if_requested(&TaskRegistry::builtin());
}

/// The factories of the backends this build has ([`BackendKind::is_built`]).
pub fn shipped() -> BackendRegistry {
    BackendKind::ALL
        .into_iter()
        .filter_map(|k| k.factory().ok())
        .fold(BackendRegistry::new(), BackendRegistry::with_shared)
}

/// Opens the OpenCL backend (`open_opencl`, feature `opencl`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenClFactory;

#[cfg(feature = "opencl")]
impl BackendFactory for OpenClFactory {
    type Backend = OpenClBackend;
    type Error = BackendError;

    fn name(&self) -> &str {
        BackendKind::OpenCl.name()
    }

    fn language(&self) -> kf_core::Language {
        BackendKind::OpenCl.language()
    }

    fn open(&self, spec: &BackendSpec) -> Result<OpenClBackend, BackendError> {
        open_opencl(spec)
    }
}

/// Opens the CUDA backend (`open_cuda`, feature `cuda`); it reports registers.
#[derive(Debug, Clone, Copy, Default)]
pub struct CudaFactory;

#[cfg(feature = "cuda")]
impl BackendFactory for CudaFactory {
    type Backend = CudaBackend;
    type Error = BackendError;

    fn name(&self) -> &str {
        BackendKind::Cuda.name()
    }

    fn language(&self) -> kf_core::Language {
        BackendKind::Cuda.language()
    }

    fn reports_registers(&self) -> bool {
        true
    }

    fn open(&self, spec: &BackendSpec) -> Result<CudaBackend, BackendError> {
        open_cuda(spec)
    }
}

/// Opens the SYCL backend (`open_sycl`, feature `sycl`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SyclFactory;

#[cfg(feature = "sycl")]
impl BackendFactory for SyclFactory {
    type Backend = SyclBackend;
    type Error = BackendError;

    fn name(&self) -> &str {
        BackendKind::Sycl.name()
    }

    fn language(&self) -> kf_core::Language {
        BackendKind::Sycl.language()
    }

    fn open(&self, spec: &BackendSpec) -> Result<SyclBackend, BackendError> {
        open_sycl(spec)
    }
}

impl BackendKind {
    /// The factory of this backend, when this build has it.
    pub fn factory(self) -> Result<Arc<dyn DynBackendFactory>, BackendError> {
        match self {
            #[cfg(feature = "opencl")]
            BackendKind::OpenCl => Ok(Arc::new(OpenClFactory)),
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => Ok(Arc::new(CudaFactory)),
            #[cfg(feature = "sycl")]
            BackendKind::Sycl => Ok(Arc::new(SyclFactory)),
            #[allow(unreachable_patterns)]
            kind => Err(BackendError::NotBuilt {
                kind,
                built: built().join(", "),
            }),
        }
    }
}

/// The shipped factory `spec` names, checked to be in this build.
pub fn factory_for(spec: &BackendSpec) -> Result<Arc<dyn DynBackendFactory>, BackendError> {
    check(spec)?.factory()
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
    characterise_with(factory_for(spec)?.as_ref(), spec)
}

/// [`characterise_device`] through any factory.
pub fn characterise_with(
    factory: &dyn DynBackendFactory,
    spec: &BackendSpec,
) -> Result<(kf_eval::characterise::Characterisation, bool), BackendError> {
    factory
        .characterise(spec, &kf_eval::characterise::CharacteriseOptions::default())
        .map_err(factory_error)
}

/// A factory's error as the search's: the backend's own message, as before factories.
fn factory_error(e: kf_eval::BackendFactoryError) -> BackendError {
    use kf_eval::BackendFactoryError;
    match e {
        BackendFactoryError::Characterise(e) => BackendError::Characterise(e.to_string()),
        BackendFactoryError::Open { source, .. } => BackendError::Open(source.to_string()),
        other => BackendError::Open(other.to_string()),
    }
}

/// The facts of the device `spec` selects, from a backend opened in this process (the device a
/// distributed worker registers, and what a search tells its mutators and tuner).
pub fn device_facts(spec: &BackendSpec) -> Result<kf_core::DeviceFacts, BackendError> {
    device_facts_with(factory_for(spec)?.as_ref(), spec)
}

/// [`device_facts`] through any factory.
pub fn device_facts_with(
    factory: &dyn DynBackendFactory,
    spec: &BackendSpec,
) -> Result<kf_core::DeviceFacts, BackendError> {
    factory.device_facts(spec).map_err(factory_error)
}
