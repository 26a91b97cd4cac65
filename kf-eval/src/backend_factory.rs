//! [`BackendFactory`]: how a program opens a backend from the [`BackendSpec`] that names it,
//! and [`BackendRegistry`], the factories a program knows by name.
//!
//! A backend is a type with its own kernels and buffers ([`kf_core::Backend`]), opened in
//! every process that evaluates: the search's own process (device facts, the roofline) and
//! each isolated evaluation worker, which is the program re-executed and knows from the
//! [`BackendSpec`] it is handed only the backend's *name*. A factory is what turns the name
//! back into the type; a program registers its factories once, with the worker entry point
//! ([`BackendRegistry::serve_if_requested`], which `kernelfoundry::init_with` calls), so the
//! workers of an embedder's own program open the embedder's own backend.
//!
//! The trait lives here, beside [`BackendSpec`] and the worker entry point it serves, so that
//! the search (`kf-search`), its distributed workers and the facade all reach it; `kf-core`
//! knows nothing of specs and processes, and `kf-dist` only carries jobs.

use std::sync::Arc;

use kf_core::{Backend, BoxError, DeviceFacts, Language};

use crate::characterise::{characterise, Characterisation, CharacteriseError, CharacteriseOptions};
use crate::worker::{serve_if_requested, TaskRegistry, WORKER_ENV};
use crate::BackendSpec;

/// Why a factory could not give a backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendFactoryError {
    /// No factory of that name is registered.
    #[error("no backend named `{name}` in this program (registered: {registered})")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names registered, comma-separated.
        registered: String,
    },
    /// The factory could not open the backend on the device the spec selects.
    #[error("opening the {backend} backend: {source}")]
    Open {
        /// The factory's name.
        backend: String,
        /// Why.
        source: BoxError,
    },
    /// The backend opened, but its roofline could not be measured.
    #[error("measuring the device's roofline: {0}")]
    Characterise(#[from] CharacteriseError),
}

/// Opens one kind of backend from a [`BackendSpec`] (its device and compile-cache folder).
///
/// [`name`](Self::name) is what travels in [`BackendSpec::kind`] to the evaluation workers and
/// what a run directory records: keep it stable. Implement this; the search uses it through
/// [`DynBackendFactory`], which every `BackendFactory` is.
///
/// # Example
///
/// A factory for a backend type of one's own (here the OpenCL backend under another name):
///
/// ```
/// use kf_eval::{BackendFactory, BackendRegistry, BackendSpec};
/// use kf_backend_opencl::OpenClBackend;
///
/// struct MyOpenCl;
///
/// impl BackendFactory for MyOpenCl {
///     type Backend = OpenClBackend;
///     type Error = kf_backend_opencl::OpenClError;
///     fn name(&self) -> &str {
///         "my-opencl"
///     }
///     fn language(&self) -> kf_core::Language {
///         kf_core::Language::OpenCl
///     }
///     fn open(&self, _spec: &BackendSpec) -> Result<OpenClBackend, Self::Error> {
///         OpenClBackend::builder().build()
///     }
/// }
///
/// let registry = BackendRegistry::new().with(MyOpenCl);
/// assert_eq!(registry.names(), ["my-opencl"]);
/// assert!(registry.get("my-opencl").is_some());
/// // First thing in `main`: serves when this process is an evaluation worker.
/// registry.serve_if_requested(&kf_eval::TaskRegistry::builtin());
/// ```
pub trait BackendFactory: Send + Sync + 'static {
    /// The backend it opens.
    type Backend: Backend;
    /// Why it could not.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The stable name (`opencl`, `cuda`, `sycl`, or one's own).
    fn name(&self) -> &str;

    /// The kernel language the backend compiles (the seeds and mutators are chosen by it).
    fn language(&self) -> Language;

    /// Whether the backend reports registers per thread (the shipped CVT search then places
    /// kernels by them too). Default: no.
    fn reports_registers(&self) -> bool {
        false
    }

    /// Opens the backend on the device `spec` selects.
    fn open(&self, spec: &BackendSpec) -> Result<Self::Backend, Self::Error>;
}

/// A [`BackendFactory`] with its backend type erased: what a [`BackendRegistry`] and the
/// search hold. Every `BackendFactory` is one; there is nothing to implement.
pub trait DynBackendFactory: Send + Sync {
    /// [`BackendFactory::name`].
    fn name(&self) -> &str;

    /// [`BackendFactory::language`].
    fn language(&self) -> Language;

    /// [`BackendFactory::reports_registers`].
    fn reports_registers(&self) -> bool;

    /// The facts of the device `spec` selects, from a backend opened in this process.
    fn device_facts(&self, spec: &BackendSpec) -> Result<DeviceFacts, BackendFactoryError>;

    /// The measured roofline of the device `spec` selects ([`characterise`]: cached, or
    /// measured now and cached; measured now whatever the cache holds when `refresh` is set);
    /// the flag says whether it came from the cache.
    fn characterise(
        &self,
        spec: &BackendSpec,
        options: &CharacteriseOptions,
        refresh: bool,
    ) -> Result<(Characterisation, bool), BackendFactoryError>;

    /// Serves as an evaluation worker on this factory's backend when this process was started
    /// as one (then exits), and returns at once otherwise ([`serve_if_requested`]).
    fn serve_if_requested(&self, tasks: &TaskRegistry);
}

impl<F: BackendFactory> DynBackendFactory for F {
    fn name(&self) -> &str {
        BackendFactory::name(self)
    }

    fn language(&self) -> Language {
        BackendFactory::language(self)
    }

    fn reports_registers(&self) -> bool {
        BackendFactory::reports_registers(self)
    }

    fn device_facts(&self, spec: &BackendSpec) -> Result<DeviceFacts, BackendFactoryError> {
        Ok(open_with(self, spec)?.device().clone())
    }

    fn characterise(
        &self,
        spec: &BackendSpec,
        options: &CharacteriseOptions,
        refresh: bool,
    ) -> Result<(Characterisation, bool), BackendFactoryError> {
        let backend = open_with(self, spec)?;
        Ok(characterise(&backend, options, refresh)?)
    }

    fn serve_if_requested(&self, tasks: &TaskRegistry) {
        serve_if_requested(|spec: &BackendSpec| self.open(spec), tasks);
    }
}

fn open_with<F: BackendFactory>(
    factory: &F,
    spec: &BackendSpec,
) -> Result<F::Backend, BackendFactoryError> {
    factory.open(spec).map_err(|e| BackendFactoryError::Open {
        backend: factory.name().to_owned(),
        source: Box::new(e),
    })
}

/// The backend factories a program knows, by name. Cheap to clone (the factories are shared).
#[derive(Clone, Default)]
pub struct BackendRegistry {
    factories: Vec<Arc<dyn DynBackendFactory>>,
}

impl std::fmt::Debug for BackendRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl BackendRegistry {
    /// No factories.
    pub fn new() -> Self {
        BackendRegistry::default()
    }

    /// Adds `factory`, replacing one of the same name.
    pub fn with(self, factory: impl BackendFactory) -> Self {
        self.with_shared(Arc::new(factory))
    }

    /// Adds a shared factory, replacing one of the same name.
    pub fn with_shared(mut self, factory: Arc<dyn DynBackendFactory>) -> Self {
        self.factories.retain(|f| f.name() != factory.name());
        self.factories.push(factory);
        self
    }

    /// Every factory of `other` added to these (replacing those of the same names).
    pub fn merged(mut self, other: &BackendRegistry) -> Self {
        for f in &other.factories {
            self = self.with_shared(Arc::clone(f));
        }
        self
    }

    /// The factory named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynBackendFactory>> {
        self.factories.iter().find(|f| f.name() == name)
    }

    /// The factory named `name`, or why there is none.
    pub fn require(&self, name: &str) -> Result<&Arc<dyn DynBackendFactory>, BackendFactoryError> {
        self.get(name).ok_or_else(|| BackendFactoryError::Unknown {
            name: name.to_owned(),
            registered: self.names().join(", "),
        })
    }

    /// The names registered, in the order added.
    pub fn names(&self) -> Vec<&str> {
        self.factories.iter().map(|f| f.name()).collect()
    }

    /// Whether no factory is registered.
    pub fn is_empty(&self) -> bool {
        self.factories.is_empty()
    }

    /// Serves as an evaluation worker when this process was started as one, on the backend
    /// its spec names, and returns at once otherwise. Call it first thing in `main`.
    ///
    /// A spec naming no registered backend is reported to the parent by the worker (as a
    /// backend that could not be opened, naming the backends this program registered).
    pub fn serve_if_requested(&self, tasks: &TaskRegistry) {
        let Ok(spec) = std::env::var(WORKER_ENV) else {
            return;
        };
        let kind = serde_json::from_str::<BackendSpec>(&spec)
            .map(|s| s.kind)
            .unwrap_or_default();
        if let Some(factory) = self.get(&kind) {
            factory.serve_if_requested(tasks);
        }
        // No factory of that name: the worker loop, over a backend type never made, sends the
        // parent the "unavailable" reply naming the backends this program registered.
        let registered = self.names().join(", ");
        serve_if_requested(
            |spec: &BackendSpec| -> Result<NeverBackend, BackendFactoryError> {
                Err(BackendFactoryError::Unknown {
                    name: spec.kind.clone(),
                    registered: registered.clone(),
                })
            },
            tasks,
        );
    }
}

/// A backend type that is never made: the worker loop's type for a spec naming no backend.
enum NeverBackend {}

impl Backend for NeverBackend {
    type Error = NeverError;
    type Kernel = ();
    type Buffer = ();

    fn name(&self) -> &str {
        match *self {}
    }
    fn languages(&self) -> &[Language] {
        match *self {}
    }
    fn device(&self) -> &DeviceFacts {
        match *self {}
    }
    fn compile(
        &self,
        _: &kf_core::KernelSource,
        _: &kf_core::ParamValues,
        _: &kf_core::CompileOptions,
    ) -> Result<kf_core::Compiled<()>, NeverError> {
        match *self {}
    }
    fn alloc(&self, _: usize) -> Result<(), NeverError> {
        match *self {}
    }
    fn write(&self, _: &mut (), _: &[u8]) -> Result<(), NeverError> {
        match *self {}
    }
    fn read(&self, _: &(), _: &mut [u8]) -> Result<(), NeverError> {
        match *self {}
    }
    fn launch(
        &self,
        _: &(),
        _: &[kf_core::KernelArg<'_, ()>],
        _: &kf_core::NdRange,
    ) -> Result<kf_core::LaunchTiming, NeverError> {
        match *self {}
    }
}

/// The error of [`NeverBackend`].
#[derive(Debug, thiserror::Error)]
#[error("no backend")]
struct NeverError;

impl kf_core::BackendError for NeverError {
    fn kind(&self) -> kf_core::BackendErrorKind {
        kf_core::BackendErrorKind::Unavailable
    }
    fn unsupported(_: &'static str) -> Self {
        NeverError
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A factory whose backend never opens, under a name and a language.
    struct Closed(&'static str, Language);

    #[derive(Debug, thiserror::Error)]
    #[error("no device here")]
    struct NoDevice;

    impl BackendFactory for Closed {
        type Backend = NeverBackend;
        type Error = NoDevice;
        fn name(&self) -> &str {
            self.0
        }
        fn language(&self) -> Language {
            self.1
        }
        fn open(&self, _: &BackendSpec) -> Result<NeverBackend, NoDevice> {
            Err(NoDevice)
        }
    }

    #[test]
    fn a_registry_finds_factories_by_name_and_a_later_one_replaces_its_namesake() {
        let registry = BackendRegistry::new()
            .with(Closed("a", Language::OpenCl))
            .with(Closed("b", Language::Cuda))
            .with(Closed("a", Language::Sycl));
        assert_eq!(registry.names(), ["b", "a"]);
        assert_eq!(
            registry.get("a").map(|f| f.language()),
            Some(Language::Sycl)
        );
        let merged = BackendRegistry::new()
            .with(Closed("c", Language::OpenCl))
            .merged(&registry);
        assert_eq!(merged.names(), ["c", "b", "a"]);
        let unknown = registry.require("z").err().expect("no such backend");
        assert_eq!(
            unknown.to_string(),
            "no backend named `z` in this program (registered: b, a)"
        );
    }

    #[test]
    fn a_backend_that_does_not_open_is_named_in_the_error() {
        let factory = Closed("mine", Language::OpenCl);
        let err = DynBackendFactory::device_facts(&factory, &BackendSpec::new("mine"))
            .expect_err("never opens");
        assert!(matches!(err, BackendFactoryError::Open { .. }), "{err}");
        assert_eq!(err.to_string(), "opening the mine backend: no device here");
        assert!(!DynBackendFactory::reports_registers(&factory));
    }
}
