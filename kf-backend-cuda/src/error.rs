//! [`CudaError`], the one error type of this crate.

use std::path::PathBuf;

use kf_core::{BackendError, BackendErrorKind};

/// What can go wrong in the CUDA backend. Every variant maps to a
/// [`BackendErrorKind`](kf_core::BackendErrorKind) through [`BackendError::kind`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// NVRTC or the CUDA driver could not be loaded or used. The message says what was tried
    /// and how to get it.
    #[error("{message}")]
    Unavailable {
        /// What was tried and how to fix it.
        message: String,
    },
    /// The operation needs a GPU and this machine has none (or the driver sees none). Compiling
    /// and resource reporting still work; the message names the operation and, for launches,
    /// what the compiler reported for the kernel.
    #[error("no CUDA device present to {operation}: {detail}")]
    NoDevice {
        /// What could not be done (`run it`, `allocate device memory`, …).
        operation: &'static str,
        /// Why there is no device, and what is known without one.
        detail: String,
    },
    /// NVRTC rejected the kernel, or the entry point is not in it.
    #[error("CUDA compilation of `{entry}` failed ({reason}); NVRTC log:\n{log}")]
    Compile {
        /// The kernel's entry point.
        entry: String,
        /// Short reason (`NVRTC_ERROR_COMPILATION`, `no kernel named …`, …).
        reason: String,
        /// NVRTC's log (never empty: the reason is put there when NVRTC gives no log).
        log: String,
    },
    /// The launch was rejected or the kernel failed while running.
    #[error("CUDA launch failed: {message}")]
    Launch {
        /// What went wrong, with the CUDA error name where there is one.
        message: String,
    },
    /// Out of device memory, or a kernel asking for more shared memory than there is.
    #[error("CUDA out of resources in {operation}: {message}")]
    Resources {
        /// The API call or operation.
        operation: &'static str,
        /// Details.
        message: String,
    },
    /// A capability this backend does not offer.
    #[error("the CUDA backend does not support {0}")]
    Unsupported(&'static str),
    /// A bad argument from the caller (a buffer too small, a misaligned offset, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A CUDA driver call failed in a way not covered above.
    #[error("{operation} failed: {name} ({code}){}", if detail.is_empty() { String::new() } else { format!(": {detail}") })]
    Driver {
        /// The API call.
        operation: &'static str,
        /// The `CUresult` code.
        code: u32,
        /// Its symbolic name (`CUDA_ERROR_INVALID_VALUE`).
        name: String,
        /// Context, possibly empty.
        detail: String,
    },
    /// An NVRTC call other than the compilation itself failed.
    #[error("{operation} failed: {message}")]
    Nvrtc {
        /// The API call.
        operation: &'static str,
        /// The NVRTC result name.
        message: String,
    },
    /// Reading or writing the compile cache failed.
    #[error("compile cache {}: {source}", path.display())]
    Cache {
        /// The file or directory involved.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Text that is not a CUDA architecture ([`Arch`](crate::Arch)'s `FromStr`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a CUDA architecture (expected sm_90, sm_90a, compute_80, 9.0)")]
pub struct ArchParseError {
    /// The text as given.
    pub text: String,
}

impl CudaError {
    /// A compile error with a non-empty log.
    pub(crate) fn compile(entry: &str, reason: impl Into<String>, log: impl Into<String>) -> Self {
        let reason = reason.into();
        let log = log.into();
        let log = if log.trim().is_empty() {
            reason.clone()
        } else {
            log
        };
        CudaError::Compile {
            entry: entry.to_owned(),
            reason,
            log,
        }
    }

    /// An error from a driver call, classified by its code.
    pub(crate) fn driver(
        operation: &'static str,
        err: cudarc::driver::DriverError,
        detail: impl Into<String>,
    ) -> Self {
        use cudarc::driver::sys::cudaError_enum as E;
        let code = err.0 as u32;
        let name = driver_error_name(err);
        let detail = detail.into();
        match err.0 {
            E::CUDA_ERROR_OUT_OF_MEMORY => CudaError::Resources {
                operation,
                message: format_detail(&name, code, &detail),
            },
            E::CUDA_ERROR_NO_DEVICE
            | E::CUDA_ERROR_NOT_INITIALIZED
            | E::CUDA_ERROR_DEINITIALIZED => CudaError::NoDevice {
                operation: "use the CUDA driver",
                detail: format!("{operation}: {}", format_detail(&name, code, &detail)),
            },
            E::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
            | E::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
            | E::CUDA_ERROR_UNSUPPORTED_PTX_VERSION => CudaError::Unavailable {
                message: format!(
                    "{operation}: {} (the GPU driver is older than the CUDA {} this backend's \
                     NVRTC targets: update the driver, or compile for an older architecture)",
                    format_detail(&name, code, &detail),
                    crate::CUDA_VERSION
                ),
            },
            _ => CudaError::Driver {
                operation,
                code,
                name,
                detail,
            },
        }
    }

    /// A launch error from a driver call (resource codes stay [`CudaError::Resources`]).
    pub(crate) fn launch(
        operation: &'static str,
        err: cudarc::driver::DriverError,
        detail: &str,
    ) -> Self {
        match CudaError::driver(operation, err, detail) {
            CudaError::Driver {
                operation,
                code,
                name,
                detail,
            } => CudaError::Launch {
                message: format!("{operation}: {}", format_detail(&name, code, &detail)),
            },
            other => other,
        }
    }
}

fn format_detail(name: &str, code: u32, detail: &str) -> String {
    if detail.is_empty() {
        format!("{name} ({code})")
    } else {
        format!("{name} ({code}): {detail}")
    }
}

/// The symbolic name of a driver error (`CUDA_ERROR_ILLEGAL_ADDRESS`).
pub fn driver_error_name(err: cudarc::driver::DriverError) -> String {
    format!("{:?}", err.0)
}

impl BackendError for CudaError {
    fn kind(&self) -> BackendErrorKind {
        match self {
            CudaError::Unavailable { .. } | CudaError::NoDevice { .. } => {
                BackendErrorKind::Unavailable
            }
            CudaError::Compile { .. } => BackendErrorKind::Compile,
            CudaError::Launch { .. } => BackendErrorKind::Launch,
            CudaError::Resources { .. } => BackendErrorKind::Resources,
            CudaError::Unsupported(_) => BackendErrorKind::Unsupported,
            CudaError::InvalidArgument(_)
            | CudaError::Driver { .. }
            | CudaError::Nvrtc { .. }
            | CudaError::Cache { .. } => BackendErrorKind::Other,
        }
    }

    fn unsupported(capability: &'static str) -> Self {
        CudaError::Unsupported(capability)
    }

    fn build_log(&self) -> Option<&str> {
        match self {
            CudaError::Compile { log, .. } => Some(log),
            _ => None,
        }
    }
}

/// A compile cache write that failed.
impl From<kf_backend_common::CacheWriteError> for CudaError {
    fn from(e: kf_backend_common::CacheWriteError) -> Self {
        CudaError::Cache {
            path: e.path,
            source: e.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::cudaError_enum as E;
    use cudarc::driver::DriverError;

    #[test]
    fn driver_errors_are_classified() {
        let oom = CudaError::driver("cuMemAlloc", DriverError(E::CUDA_ERROR_OUT_OF_MEMORY), "");
        assert_eq!(oom.kind(), BackendErrorKind::Resources);
        let none = CudaError::driver("cuInit", DriverError(E::CUDA_ERROR_NO_DEVICE), "");
        assert_eq!(none.kind(), BackendErrorKind::Unavailable);
        assert!(none.to_string().contains("no CUDA device present"));
        let fault = CudaError::launch(
            "cuEventSynchronize",
            DriverError(E::CUDA_ERROR_ILLEGAL_ADDRESS),
            "the kernel failed",
        );
        assert_eq!(fault.kind(), BackendErrorKind::Launch);
        assert!(fault.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
    }

    #[test]
    fn compile_errors_carry_a_log() {
        let e = CudaError::compile("k", "no kernel named `k`", "");
        assert_eq!(e.kind(), BackendErrorKind::Compile);
        assert_eq!(e.build_log(), Some("no kernel named `k`"));
    }
}
