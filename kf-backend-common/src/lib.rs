//! Backend plumbing shared by `kf-backend-opencl`, `kf-backend-cuda` and `kf-backend-sycl`:
//! everything a backend does that does not depend on its runtime.
//!
//! Data flow of a backend's `build()`:
//!
//! 1. its `runtime::prepare` finds the runtime's `.runtime/<x>.json` through its
//!    [`runtime::RuntimeSpec`] (the path its variable names, else
//!    [`runtime::discover_config`]), reads it into its `RuntimeInfo`
//!    ([`runtime::RuntimeSpec::open`]), preloads libraries ([`runtime::preload`]) and
//!    describes what it did ([`runtime::describe`]);
//! 2. its `list_devices` lists devices implementing [`SelectableDevice`], and the builder's
//!    [`DeviceSelector`] (one type for all backends, re-exported by each) picks one;
//! 3. the device facts get peak estimates ([`peaks::estimate_peaks`]; the roofline
//!    anti-cheat check relies on them) or the embedder's ([`BackendOptions::apply_peaks`]);
//! 4. a compile checks the kernel's source against the backend's
//!    [`compile_input::SourceRules`] and turns its parameters into definitions
//!    ([`compile_input::checked_definitions`], [`compile_input::define_lines`]); compiled
//!    kernels go to a [`CompileCache`] (an [`ArtifactCache`] of entries in the
//!    backend's [`CacheFormat`]) in the directory [`CacheChoice`] names
//!    ([`cache::default_cache_dir`] by default), keyed by a [`KeyHasher`]; a compile records
//!    its hit or write through a [`CacheSlot`];
//! 5. launches check geometry and arguments with [`launch`]'s helpers, and `flush_caches`
//!    overwrites a scratch buffer of [`launch::flush_size`] bytes through a [`Flusher`].
//!
//! What fails says why in a typed error, each with the message a backend puts in its own:
//! [`RuntimeConfigError`] (reading a runtime config, preloading), [`CompileInputError`] (a
//! parameter or flag a compiler cannot carry), [`LaunchCheckError`] (geometry, offsets,
//! copies), [`CacheWriteError`].
//!
//! The backends' test suites share [`testing`]: the skip rule for a runtime that is not
//! installed and the run of kf-core's conformance suite.
//!
//! ```
//! use kf_backend_common::{BackendOptions, DeviceSelector};
//! let options = BackendOptions {
//!     selector: DeviceSelector::parse("gpu"),
//!     ..BackendOptions::default()
//! };
//! assert_eq!(options.flush_bytes(1 << 20, u64::MAX), 64 << 20);
//! ```

pub mod cache;
pub mod cache_outbox;
pub mod compile_cache;
pub mod compile_input;
mod flush;
pub mod launch;
mod options;
pub mod peaks;
pub mod runtime;
mod selector;
pub mod testing;

pub use cache::{ArtifactCache, CacheChoice, CacheWriteError, KeyHasher};
pub use compile_cache::{CacheFormat, CacheSlot, CompileCache};
pub use compile_input::CompileInputError;
pub use flush::Flusher;
pub use launch::LaunchCheckError;
pub use options::{BackendBuilder, BackendOptions};
pub use runtime::RuntimeConfigError;
pub use selector::{kind_name, DeviceSelector, NoMatch, SelectableDevice};
