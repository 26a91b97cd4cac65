//! # kf-backend-cuda
//!
//! A [`kf_core::Backend`] for CUDA C++: NVRTC compiles, the CUDA driver runs, both loaded at
//! run time through [`cudarc`], so this crate builds and lints with no CUDA installed.
//!
//! * **NVRTC is required, a GPU is not.** [`runtime`] finds the NVRTC that
//!   `scripts/setup.sh --cuda` installed (`.runtime/cuda.json`: NVRTC 12.9 and the CUDA headers
//!   from PyPI) with no environment variable set by hand, or a CUDA toolkit, or the library
//!   `KF_CUDA_NVRTC` names; without one, [`CudaBackend::new`] is an [`CudaError::Unavailable`]
//!   saying how to get it.
//! * **Without a GPU** the backend compiles for [`DEFAULT_ARCH`] (or `KF_CUDA_ARCH`, or
//!   [`CudaBackendBuilder::arch`]) and reports what ptxas says about each kernel — registers,
//!   static shared memory, stack, spills — in [`kf_core::CompilerFacts`], so classifiers and
//!   prompts can use them; allocating and launching fail with [`CudaError::NoDevice`] (kind
//!   `Unavailable`), never a panic. [`CudaBackendBuilder::host_buffers_without_device`] lets
//!   an evaluator run its protocol up to the launch, which then reports the kernel's resources
//!   and that no device is present.
//! * **With a GPU**: device facts from the driver (name, SMs, compute capability, shared memory
//!   per block, warp size, generous peak estimates for the roofline check), kernels compiled to
//!   cubins for the device's architecture and loaded as modules, launches checked against the
//!   PTX signature and the device limits and timed with CUDA events, and an L2 flush between
//!   trials ([`kf_core::Backend::flush_caches`]).
//! * Compiled kernels are cached on disk ([`BinaryCache`]), keyed by source, options and NVRTC
//!   version.
//!
//! `cudarc` panics when a library or symbol is missing (for example `CudaContext::new` without
//! `libcuda.so`): this crate checks for the libraries first and runs every cudarc call under
//! [`std::panic::catch_unwind`], turning a panic into [`CudaError::Unavailable`].
//!
//! ```
//! use kf_backend_cuda::{nvrtc_info, CudaBackend};
//! use kf_core::prelude::*;
//!
//! # fn main() -> Result<(), kf_backend_cuda::CudaError> {
//! match nvrtc_info() {
//!     Ok(nvrtc) => println!("NVRTC {}", nvrtc.version()),
//!     Err(e) => {
//!         eprintln!("skipped: {e}"); // says: run scripts/setup.sh --cuda
//!         return Ok(());
//!     }
//! }
//! let backend = CudaBackend::builder().no_cache().build()?;
//! let src = KernelSource::new(
//!     Language::Cuda,
//!     "tile",
//!     r#"extern "C" __global__ void tile(const float* x, float* y) {
//!         __shared__ float t[TS][TS + 1];
//!         t[threadIdx.y][threadIdx.x] = x[threadIdx.y * TS + threadIdx.x];
//!         __syncthreads();
//!         y[threadIdx.y * TS + threadIdx.x] = t[threadIdx.x][threadIdx.y];
//!     }"#,
//! );
//! let compiled = backend.compile(&src, &ParamValues::new().with("TS", 16i64), &CompileOptions::default())?;
//! assert_eq!(compiled.facts.local_mem_bytes, Some(16 * 17 * 4));
//! println!(
//!     "{}: {:?} registers, device present: {}",
//!     backend.arch(),
//!     compiled.facts.registers,
//!     backend.has_device()
//! );
//! # Ok(())
//! # }
//! ```

mod backend;
mod cache;
mod device;
mod error;
mod nvrtc;
pub mod resources;
pub mod runtime;

use std::panic::{catch_unwind, AssertUnwindSafe};

pub use backend::{CudaBackend, CudaBackendBuilder, CudaBuffer, CudaKernel};
pub use cache::{BinaryCache, CachedBuild, NvrtcOutput};
pub use device::{
    driver_present, list_devices, Arch, CudaDeviceInfo, DEFAULT_ARCH, KF_CUDA_ARCH, KF_CUDA_DEVICE,
};
pub use error::{driver_error_name, ArchParseError, CudaError};
/// The device selector shared by every backend (`kf_backend_common::DeviceSelector`).
pub use kf_backend_common::{CompileInputError, DeviceSelector, RuntimeConfigError};
pub use nvrtc::{nvrtc_info, NvrtcInfo};

/// The CUDA version the bindings target (cudarc's `cuda-12090` feature); NVRTC must be 12.x,
/// and `scripts/setup.sh --cuda` installs this minor version.
pub const CUDA_VERSION: &str = "12.9";

/// Runs `f`, turning a panic (cudarc panics on a missing library or symbol) into
/// [`CudaError::Unavailable`].
pub(crate) fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, CudaError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|panic| {
        let text = if let Some(s) = panic.downcast_ref::<&str>() {
            (*s).to_owned()
        } else if let Some(s) = panic.downcast_ref::<String>() {
            s.clone()
        } else {
            "(non-string panic payload)".to_owned()
        };
        CudaError::Unavailable {
            message: format!(
                "{what}: the CUDA bindings failed ({text}); is the installed NVRTC or driver \
                 older than CUDA {CUDA_VERSION}? {}",
                runtime::HOW_TO_GET_NVRTC
            ),
        }
    })
}
