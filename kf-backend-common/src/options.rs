//! [`BackendOptions`]: the choices every backend builder offers (device, compile cache,
//! cache-flush size, peaks), and [`backend_builder_methods!`](crate::backend_builder_methods)
//! which gives a builder its methods for them.

use std::path::Path;

use kf_core::DeviceFacts;

use crate::cache::CacheChoice;
use crate::launch::flush_size;
use crate::peaks::apply_given_peaks;
use crate::selector::DeviceSelector;

/// The builder choices common to every backend.
#[derive(Debug, Clone, Default)]
pub struct BackendOptions {
    /// Which device.
    pub selector: DeviceSelector,
    /// Where compiled kernels are cached.
    pub cache: CacheChoice,
    /// The cache-flush scratch size, when the embedder chose it.
    pub flush_bytes: Option<usize>,
    /// Peak GFLOP/s and GB/s the embedder gave, overriding the estimate.
    pub peaks: Option<(f64, f64)>,
}

impl BackendOptions {
    /// Applies the embedder's peaks to `facts`, if any.
    pub fn apply_peaks(&self, facts: &mut DeviceFacts) {
        apply_given_peaks(facts, self.peaks);
    }

    /// The cache directory (see [`CacheChoice::dir`]).
    pub fn cache_dir(
        &self,
        runtime_dir: Option<&Path>,
        backend: &str,
    ) -> Option<std::path::PathBuf> {
        self.cache.dir(runtime_dir, backend)
    }

    /// The flush size: the embedder's, else [`flush_size`] of the device's numbers.
    pub fn flush_bytes(&self, cache_bytes: u64, max_alloc: u64) -> usize {
        self.flush_bytes
            .unwrap_or_else(|| flush_size(cache_bytes, max_alloc))
    }
}

/// Gives a backend builder holding `options: BackendOptions` its `device`, `cache_dir`,
/// `no_cache`, `flush_bytes` and `peaks` methods; `$var` is the backend's device variable.
///
/// ```
/// use kf_backend_common::{backend_builder_methods, BackendOptions, DeviceSelector};
///
/// #[derive(Default)]
/// pub struct MyBuilder {
///     options: BackendOptions,
/// }
/// impl MyBuilder {
///     backend_builder_methods!("MY_DEVICE");
/// }
/// let b = MyBuilder::default().device(DeviceSelector::parse("cpu")).no_cache();
/// assert!(b.options.flush_bytes.is_none());
/// ```
#[macro_export]
macro_rules! backend_builder_methods {
    ($var:literal) => {
        #[doc = concat!("Chooses the device (default: `DeviceSelector::Auto`, which honours `", $var, "`).")]
        pub fn device(mut self, selector: $crate::DeviceSelector) -> Self {
            self.options.selector = selector;
            self
        }

        /// Caches compiled kernels in `dir`.
        pub fn cache_dir(mut self, dir: impl Into<::std::path::PathBuf>) -> Self {
            self.options.cache = $crate::cache::CacheChoice::Dir(dir.into());
            self
        }

        /// Disables the persistent compile cache.
        pub fn no_cache(mut self) -> Self {
            self.options.cache = $crate::cache::CacheChoice::Disabled;
            self
        }

        /// Size of the scratch buffer `Backend::flush_caches` overwrites (default: twice the
        /// largest cache in front of global memory, at least 64 MiB).
        pub fn flush_bytes(mut self, bytes: usize) -> Self {
            self.options.flush_bytes = Some(bytes);
            self
        }

        /// Overrides the estimated peak fp32 GFLOP/s and bandwidth GB/s of the device facts
        /// (when they are known from a datasheet).
        pub fn peaks(mut self, gflops: f64, bandwidth_gbs: f64) -> Self {
            self.options.peaks = Some((gflops, bandwidth_gbs));
            self
        }
    };
}

/// A backend's builder as generic code opens any backend: its [`BackendOptions`] (device,
/// compile cache, …) and its build. Every shipped backend's builder is one
/// ([`impl_backend_builder!`](crate::impl_backend_builder)), so a program that opens backends
/// from a device name and a cache folder (the search's backend factories) has one code path
/// for all of them.
///
/// ```
/// use kf_backend_common::{BackendBuilder, BackendOptions, DeviceSelector};
///
/// #[derive(Default)]
/// pub struct MyBuilder {
///     options: BackendOptions,
/// }
/// pub struct MyBackend(BackendOptions);
///
/// impl BackendBuilder for MyBuilder {
///     type Backend = MyBackend;
///     type Error = std::io::Error;
///     fn options_mut(&mut self) -> &mut BackendOptions {
///         &mut self.options
///     }
///     fn build_backend(self) -> Result<MyBackend, std::io::Error> {
///         Ok(MyBackend(self.options))
///     }
/// }
///
/// let MyBackend(options) = MyBuilder::default()
///     .select(Some("gpu"), Some("/tmp/kernels".as_ref()))
///     .build_backend()
///     .unwrap();
/// assert_eq!(options.selector, DeviceSelector::parse("gpu"));
/// ```
pub trait BackendBuilder: Sized {
    /// What it builds.
    type Backend;
    /// Why it could not.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The choices the build reads.
    fn options_mut(&mut self) -> &mut BackendOptions;

    /// Builds the backend (the builder's own `build`).
    fn build_backend(self) -> Result<Self::Backend, Self::Error>;

    /// The builder with the device a selector text names (`cpu`, `gpu`, an index, a name
    /// substring; [`DeviceSelector::parse`]) and the compile-cache folder, each when given.
    fn select(mut self, device: Option<&str>, cache_dir: Option<&Path>) -> Self {
        let options = self.options_mut();
        if let Some(device) = device {
            options.selector = DeviceSelector::parse(device);
        }
        if let Some(dir) = cache_dir {
            options.cache = CacheChoice::Dir(dir.to_path_buf());
        }
        self
    }
}

/// Implements [`BackendBuilder`] for a builder that holds `options: BackendOptions` and has
/// an inherent `build(self) -> Result<Backend, Error>`.
#[macro_export]
macro_rules! impl_backend_builder {
    ($builder:ty => $backend:ty, $error:ty) => {
        impl $crate::BackendBuilder for $builder {
            type Backend = $backend;
            type Error = $error;

            fn options_mut(&mut self) -> &mut $crate::BackendOptions {
                &mut self.options
            }

            fn build_backend(self) -> Result<$backend, $error> {
                <$builder>::build(self)
            }
        }
    };
}
