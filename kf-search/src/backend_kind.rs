//! [`BackendKind`]: a backend by name, and [`BackendError`].

use std::fmt;
use std::str::FromStr;

use kf_eval::BackendSpec;

/// A backend by name: `opencl`, `cuda` or `sycl` (parsed with [`FromStr`], printed with
/// [`fmt::Display`]; the name is what travels in a [`BackendSpec`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum BackendKind {
    /// OpenCL C kernels on an OpenCL device.
    #[default]
    OpenCl,
    /// CUDA kernels compiled with NVRTC.
    Cuda,
    /// SYCL free-function kernels compiled by the SYCL runtime.
    Sycl,
}

impl BackendKind {
    /// Every backend, built or not.
    pub const ALL: [BackendKind; 3] = [BackendKind::OpenCl, BackendKind::Cuda, BackendKind::Sycl];

    /// The name (`opencl`, `cuda`, `sycl`).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::OpenCl => "opencl",
            BackendKind::Cuda => "cuda",
            BackendKind::Sycl => "sycl",
        }
    }

    /// The kernel language the backend compiles.
    pub fn language(self) -> kf_core::Language {
        match self {
            BackendKind::OpenCl => kf_core::Language::OpenCl,
            BackendKind::Cuda => kf_core::Language::Cuda,
            BackendKind::Sycl => kf_core::Language::Sycl,
        }
    }

    /// Whether this build has the backend (its cargo feature is on).
    pub fn is_built(self) -> bool {
        match self {
            BackendKind::OpenCl => cfg!(feature = "opencl"),
            BackendKind::Cuda => cfg!(feature = "cuda"),
            BackendKind::Sycl => cfg!(feature = "sycl"),
        }
    }

    /// The backend a spec names.
    pub fn of(spec: &BackendSpec) -> Result<BackendKind, BackendError> {
        spec.kind.parse()
    }

    /// A spec for this backend on `device` (default device when `None`).
    pub fn spec(self, device: Option<String>) -> BackendSpec {
        BackendSpec {
            kind: self.name().to_owned(),
            device,
            cache_dir: None,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = BackendError;

    fn from_str(s: &str) -> Result<Self, BackendError> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| BackendError::Unknown(s.to_owned()))
    }
}

impl serde::Serialize for BackendKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for BackendKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a backend could not be named or opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Not a backend's name.
    #[error("unknown backend `{0}` (valid: opencl, cuda, sycl)")]
    Unknown(String),
    /// A backend this build was compiled without.
    #[error("the {kind} backend is not in this build (enable the `{kind}` feature; this build has: {built})")]
    NotBuilt {
        /// The backend.
        kind: BackendKind,
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
