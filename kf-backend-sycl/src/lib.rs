//! # kf-backend-sycl
//!
//! A [`kf_core::Backend`] for SYCL kernels, compiled at run time by the DPC++ SYCL runtime's
//! own kernel compiler (`libsycl-jit`, the `sycl_ext_oneapi_kernel_compiler` extension) and run
//! on any device that runtime offers: Intel's CPU OpenCL device (installed into the project by
//! `scripts/setup.sh --sycl`), Intel GPUs through Level Zero.
//!
//! * No SYCL compiler is needed: a small C++ shim (`shim/kf_sycl_shim.cpp`, plain
//!   `g++ -std=c++17` against the `intel-sycl-rt` wheel's headers, linked with `-lsycl`) is
//!   compiled by the build script **only when a runtime is found at build time**, and loaded
//!   with `dlopen` at run time. Without one the crate still builds, and every use returns
//!   [`SyclError::Unavailable`] saying how to install it ([`runtime`] explains the discovery).
//! * Kernels are SYCL free functions (`SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((nd_range_kernel<N>))`,
//!   preferably `extern "C"`); parameters arrive as definitions (`#define` lines after
//!   `sycl.hpp`, see [`SyclBackend::prepare_source`]); compile errors are
//!   [`SyclError::Compile`] carrying clang's diagnostics, for a mutator to read. See
//!   [`SyclBackend`] for the conventions.
//! * A build takes seconds (the runtime compiler parses `sycl.hpp`; its precompiled form, kept
//!   in the cache's `pch/` folder, saves most of that after the first build), so built kernel
//!   bundles are serialised (SYCLBIN) into a persistent cache ([`BundleCache`]) keyed by source,
//!   options, entry, device, driver and runtime version, and kept in memory per backend.
//! * Buffers are USM device allocations (offsets by pointer arithmetic); launches are timed with
//!   profiling events; local-memory arguments are `sycl::local_accessor<char, 1>`;
//!   [`kf_core::Backend::flush_caches`] overwrites a scratch buffer.
//!
//! ```no_run
//! use kf_backend_sycl::{list_devices, DeviceSelector, SyclBackend};
//! use kf_core::{Backend, DeviceKind};
//!
//! # fn main() -> Result<(), kf_backend_sycl::SyclError> {
//! for d in list_devices()? {
//!     println!("{d}");
//! }
//! let cpu = SyclBackend::builder()
//!     .device(DeviceSelector::Kind(DeviceKind::Cpu))
//!     .build()?;
//! println!("{} ({:?} GFLOP/s peak estimate)", cpu.device().name, cpu.device().peak_gflops);
//! # Ok(())
//! # }
//! ```

mod backend;
mod cache;
mod device;
mod error;
mod ffi;
pub mod runtime;

pub use backend::{
    PreparedSource, SyclBackend, SyclBackendBuilder, SyclBuffer, SyclKernel, NO_PCH_ENV,
    PARAMS_HEADER, PREAMBLE,
};
pub use cache::{BundleCache, EntryMeta, KernelBundle};
pub use device::{list_devices, DeviceInfo, KF_SYCL_DEVICE};
pub use error::SyclError;
/// The device selector shared by every backend (`kf_backend_common::DeviceSelector`).
pub use kf_backend_common::{CompileInputError, DeviceSelector, RuntimeConfigError};

/// Whether this build of the crate has its SYCL shim (a runtime was found at build time).
/// When `false`, [`SyclBackend::new`] returns [`SyclError::Unavailable`] with the reason.
pub fn shim_built() -> bool {
    option_env!("KF_SYCL_SHIM_BUILT").is_some_and(|s| !s.is_empty())
}
