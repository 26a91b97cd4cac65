//! The shipped backends as [`BackendFactory`]s ([`OpenClFactory`], [`CudaFactory`],
//! [`SyclFactory`]), and [`shipped`], the registry of those this build has: where a name read
//! as text (a command line, a run's files, a worker's spec) becomes a factory
//! ([`factory_for`]). A backend is in a build when its cargo feature (`opencl`, `cuda`,
//! `sycl`) is on; naming one that is not is [`BackendError::NotBuilt`], and a name of no
//! shipped backend is [`BackendError::Unknown`], never a guess.
//!
//! The search takes any [`BackendFactory`] ([`crate::SearchBuilder::backend`]); a program
//! whose workers must open a backend of its own registers it with [`init_with`].
//!
//! | factory | name | backend | without its hardware |
//! |---|---|---|---|
//! | [`OpenClFactory`] | `opencl` | `OpenClBackend` | the Intel CPU runtime `scripts/setup.sh` installs is a device |
//! | [`CudaFactory`] | `cuda` | `CudaBackend` | compile-only (needs NVRTC: `scripts/setup.sh --cuda`) |
//! | [`SyclFactory`] | `sycl` | `SyclBackend` | the Intel CPU device, after `scripts/setup.sh --sycl` |
//!
//! The three open through one generic path: each backend's builder is a
//! [`kf_backend_common::BackendBuilder`], given the spec's device and compile-cache folder.

use std::sync::Arc;

#[cfg(any(feature = "opencl", feature = "cuda", feature = "sycl"))]
use kf_backend_common::BackendBuilder;
// The trait is implemented only for the backends of this build's features.
#[cfg(any(feature = "opencl", feature = "cuda", feature = "sycl"))]
use kf_eval::BackendFactory;
use kf_eval::{BackendRegistry, BackendSpec, DynBackendFactory, TaskRegistry};

/// The backend a search uses when none is given: OpenCL, whose CPU runtime runs everywhere.
pub const DEFAULT_BACKEND: &str = "opencl";

/// The shipped backends' names, and whether this build has each (its cargo feature).
const SHIPPED: [(&str, bool); 3] = [
    ("opencl", cfg!(feature = "opencl")),
    ("cuda", cfg!(feature = "cuda")),
    ("sycl", cfg!(feature = "sycl")),
];

/// Why a backend could not be named or opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Not a shipped backend's name.
    #[error("unknown backend `{0}` (valid: opencl, cuda, sycl)")]
    Unknown(String),
    /// A shipped backend this build was compiled without.
    #[error("the {kind} backend is not in this build (enable the `{kind}` feature; this build has: {built})")]
    NotBuilt {
        /// The backend's name.
        kind: String,
        /// The backends this build has, comma-separated.
        built: String,
    },
    /// The backend could not be opened on the device.
    #[error("{0}")]
    Open(String),
    /// The device was opened but its roofline could not be measured (a compile-only CUDA
    /// backend without a GPU, say).
    #[error("measuring the device's roofline: {0}")]
    Characterise(String),
}

/// The names of the shipped backends this build has.
pub fn built() -> Vec<&'static str> {
    SHIPPED
        .into_iter()
        .filter(|(_, is_built)| *is_built)
        .map(|(name, _)| name)
        .collect()
}

/// `name` when it names a shipped backend, built or not (a command line's check: a backend
/// this build lacks is refused later, by [`factory_for`], saying which feature it needs).
///
/// ```
/// use kf_search::backends::shipped_name;
/// assert_eq!(shipped_name("cuda").unwrap(), "cuda");
/// assert!(shipped_name("metal").is_err());
/// ```
pub fn shipped_name(name: &str) -> Result<String, BackendError> {
    SHIPPED
        .iter()
        .any(|(n, _)| *n == name)
        .then(|| name.to_owned())
        .ok_or_else(|| BackendError::Unknown(name.to_owned()))
}

/// The factories of the shipped backends this build has, by their names.
pub fn shipped() -> BackendRegistry {
    #[allow(unused_mut)]
    let mut registry = BackendRegistry::new();
    #[cfg(feature = "opencl")]
    {
        registry = registry.with(OpenClFactory);
    }
    #[cfg(feature = "cuda")]
    {
        registry = registry.with(CudaFactory);
    }
    #[cfg(feature = "sycl")]
    {
        registry = registry.with(SyclFactory);
    }
    registry
}

/// The shipped factory of the backend `spec` names ([`shipped`]).
///
/// # Errors
///
/// [`BackendError::NotBuilt`] for a shipped backend this build lacks,
/// [`BackendError::Unknown`] for any other name.
pub fn factory_for(spec: &BackendSpec) -> Result<Arc<dyn DynBackendFactory>, BackendError> {
    if let Some(factory) = shipped().get(&spec.kind) {
        return Ok(Arc::clone(factory));
    }
    shipped_name(&spec.kind)?;
    Err(BackendError::NotBuilt {
        kind: spec.kind.clone(),
        built: built().join(", "),
    })
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
/// backend of its own ([`crate::SearchBuilder::backend`]) open it by its name.
pub fn init_with(registry: &BackendRegistry) {
    shipped()
        .merged(registry)
        .serve_if_requested(&TaskRegistry::builtin());
}

/// Opens a backend through its builder with the device and compile-cache folder of `spec`:
/// the one open path of every shipped factory.
#[cfg(any(feature = "opencl", feature = "cuda", feature = "sycl"))]
fn open<B: BackendBuilder>(builder: B, spec: &BackendSpec) -> Result<B::Backend, BackendError> {
    builder
        .select(spec.device.as_deref(), spec.cache_dir.as_deref())
        .build_backend()
        .map_err(|e| BackendError::Open(e.to_string()))
}

/// Opens the OpenCL backend (feature `opencl`) on the device the spec selects.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenClFactory;

#[cfg(feature = "opencl")]
impl BackendFactory for OpenClFactory {
    type Backend = kf_backend_opencl::OpenClBackend;
    type Error = BackendError;

    fn name(&self) -> &str {
        "opencl"
    }

    fn language(&self) -> kf_core::Language {
        kf_core::Language::OpenCl
    }

    fn open(&self, spec: &BackendSpec) -> Result<Self::Backend, BackendError> {
        open(kf_backend_opencl::OpenClBackend::builder(), spec)
    }
}

/// Opens the CUDA backend (feature `cuda`) on the device the spec selects (an ordinal or a
/// name substring; default `KF_CUDA_DEVICE` or device 0); it reports registers.
///
/// Without a GPU this is a compile-only backend whose buffers live in host memory
/// (`CudaBackendBuilder::host_buffers_without_device`): an evaluation then compiles the kernel
/// with NVRTC (a bad kernel is `compile_error` with NVRTC's log), and a kernel that compiled
/// reaches the launch, which fails with "no CUDA device present to run it" naming its
/// registers, shared memory and spills; the evaluator reports that as `runtime_error` with the
/// compiler facts filled in. Nothing is timed or verified, and the diagnostics say so. NVRTC
/// itself is required: without it opening fails, saying how to install it.
#[derive(Debug, Clone, Copy, Default)]
pub struct CudaFactory;

#[cfg(feature = "cuda")]
impl BackendFactory for CudaFactory {
    type Backend = kf_backend_cuda::CudaBackend;
    type Error = BackendError;

    fn name(&self) -> &str {
        "cuda"
    }

    fn language(&self) -> kf_core::Language {
        kf_core::Language::Cuda
    }

    fn reports_registers(&self) -> bool {
        true
    }

    fn open(&self, spec: &BackendSpec) -> Result<Self::Backend, BackendError> {
        let builder = kf_backend_cuda::CudaBackend::builder().host_buffers_without_device(true);
        open(builder, spec)
    }
}

/// Opens the SYCL backend (feature `sycl`) on the device the spec selects (`cpu`, `gpu`,
/// `P:D`, or a name substring; default `KF_SYCL_DEVICE` or the best device that can build
/// SYCL source).
///
/// Kernels are SYCL free functions compiled at run time by the SYCL runtime; without the
/// runtime (or when this build found none: the shim is compiled only then) opening fails
/// saying how to install it (`scripts/setup.sh --sycl`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SyclFactory;

#[cfg(feature = "sycl")]
impl BackendFactory for SyclFactory {
    type Backend = kf_backend_sycl::SyclBackend;
    type Error = BackendError;

    fn name(&self) -> &str {
        "sycl"
    }

    fn language(&self) -> kf_core::Language {
        kf_core::Language::Sycl
    }

    fn open(&self, spec: &BackendSpec) -> Result<Self::Backend, BackendError> {
        open(kf_backend_sycl::SyclBackend::builder(), spec)
    }
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
    characterise_with(factory_for(spec)?.as_ref(), spec, false)
}

/// [`characterise_device`] through any factory; measured now whatever the cache holds when
/// `refresh` is set.
pub fn characterise_with(
    factory: &dyn DynBackendFactory,
    spec: &BackendSpec,
    refresh: bool,
) -> Result<(kf_eval::characterise::Characterisation, bool), BackendError> {
    let options = kf_eval::characterise::CharacteriseOptions::default();
    factory
        .characterise(spec, &options, refresh)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_becomes_a_factory_only_through_the_registry_of_this_build() {
        for (name, is_built) in SHIPPED {
            let found = factory_for(&BackendSpec::new(name));
            match found {
                Ok(factory) => {
                    assert!(is_built, "{name}");
                    assert_eq!(factory.name(), name);
                }
                Err(e) => {
                    assert!(!is_built, "{name}: {e}");
                    assert!(matches!(e, BackendError::NotBuilt { .. }), "{e}");
                    assert!(e.to_string().contains(&format!("`{name}` feature")), "{e}");
                }
            }
        }
        let unknown = factory_for(&BackendSpec::new("metal")).err();
        assert_eq!(unknown, Some(BackendError::Unknown("metal".into())));
        assert_eq!(shipped().names().len(), built().len());
    }
}
