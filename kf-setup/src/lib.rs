//! Installs the runtimes KernelFoundry-rs's backends use, without a checkout: the Intel CPU
//! OpenCL runtime, NVRTC with the CUDA headers, the DPC++ SYCL runtime (all from their PyPI
//! wheels), and NumPy in a Python virtual environment, into the per-user folder every backend
//! looks in (`$XDG_DATA_HOME/kernelfoundry`, see
//! [`kf_backend_common::runtime::user_runtime_dir`]). This is `kf setup`.
//!
//! What to install comes from one description, [`description::EMBEDDED`] (`runtimes.toml` of
//! this crate), which `scripts/setup.sh` reads too, so that a checkout's `.runtime/` and the
//! per-user folder hold the same packages at the same versions. Each wheel is chosen from the
//! package index's JSON API for this platform, downloaded with its sha256 checked
//! ([`SetupError::HashMismatch`] otherwise), unpacked as pip would, and the backend's
//! configuration file (`opencl.json`, `cuda.json`, `sycl.json`, the same fields the script
//! writes) is written last, so an interrupted installation leaves nothing a backend picks up
//! (see [`install`]). A second run finds the runtimes installed and downloads nothing.
//!
//! Main types: [`Description`] (the parsed `runtimes.toml`), [`Installer`] (installs into a
//! folder), [`PackageIndex`] (finds and downloads wheels), [`SetupError`].
//!
//! ```no_run
//! use kf_setup::{Description, Installer};
//! let description = Description::embedded()?;
//! let mut installer = Installer::for_user()?;
//! installer.install_with_requirements(&description, "opencl")?;
//! // Every backend now finds ROOT/opencl.json by itself.
//! # Ok::<(), kf_setup::SetupError>(())
//! ```

mod configure;
pub mod description;
mod error;
pub mod index;
pub mod install;
pub mod wheel;

pub use description::Description;
pub use error::{DescriptionError, SetupError};
pub use index::PackageIndex;
pub use install::{Installer, Outcome};
