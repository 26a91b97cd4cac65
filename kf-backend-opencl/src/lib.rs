//! # kf-backend-opencl
//!
//! A [`kf_core::Backend`] for OpenCL C kernels through any OpenCL driver: Intel's CPU runtime
//! (installed into the project by `scripts/setup.sh`), PoCL, or a GPU vendor's driver.
//!
//! * The OpenCL library is loaded at run time (`opencl3`'s `dynamic` feature), so this crate
//!   builds and lints with no OpenCL installed; a missing runtime is an
//!   [`OpenClError::Unavailable`] that says how to get one.
//! * [`runtime`] finds the runtime `scripts/setup.sh` installed (`.runtime/opencl.json`) with no
//!   environment variable set by hand; `KF_OPENCL_ICD` points it at any other runtime, and
//!   `OPENCL_DYLIB_PATH` (opencl3's own variable) is always honoured.
//! * [`DeviceSelector`] (shared with the other backends, from `kf-backend-common`) picks the
//!   device (by kind, name, index, or `KF_OPENCL_DEVICE`);
//!   [`kf_core::DeviceFacts`] include sub-group sizes and generous peak estimates for the
//!   roofline check.
//! * Compiles with `-D NAME=value` per parameter, reports the build log on failure and
//!   `CL_KERNEL_*` facts on success, and caches program binaries on disk ([`BinaryCache`]) so
//!   that the same kernel is never built twice, across runs and processes.
//! * Launches are timed with profiling events; buffer offsets use sub-buffers; local-memory
//!   arguments are supported; [`kf_core::Backend::flush_caches`] overwrites a scratch buffer.
//! * [`testing`]: the one rule for when a test that needs OpenCL may skip
//!   (`KF_REQUIRE_OPENCL`).
//!
//! ```no_run
//! use kf_backend_opencl::{list_devices, DeviceSelector, OpenClBackend};
//! use kf_core::{Backend, DeviceKind};
//!
//! # fn main() -> Result<(), kf_backend_opencl::OpenClError> {
//! for d in list_devices()? {
//!     println!("{d}");
//! }
//! let cpu = OpenClBackend::builder()
//!     .device(DeviceSelector::Kind(DeviceKind::Cpu))
//!     .build()?;
//! println!("{:?} GFLOP/s peak (estimate)", cpu.device().peak_gflops);
//! # Ok(())
//! # }
//! ```

mod backend;
mod cache;
mod device;
mod error;
pub mod runtime;
pub mod testing;

pub use backend::{OpenClBackend, OpenClBackendBuilder, OpenClBuffer, OpenClKernel};
pub use cache::{BinaryCache, ProgramBinary};
pub use device::{list_devices, DeviceInfo, KF_OPENCL_DEVICE};
pub use error::{cl_error_name, OpenClError};
/// The device selector shared by every backend (`kf_backend_common::DeviceSelector`).
pub use kf_backend_common::{CompileInputError, DeviceSelector, RuntimeConfigError};
