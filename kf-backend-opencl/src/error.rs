//! [`OpenClError`], the one error type of this crate.

use std::path::PathBuf;

use kf_core::{BackendError, BackendErrorKind};

/// What can go wrong in the OpenCL backend. Every variant maps to a
/// [`BackendErrorKind`](kf_core::BackendErrorKind) through [`BackendError::kind`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenClError {
    /// No OpenCL runtime could be loaded, or it offers no (matching) device. The message says
    /// what was tried and how to get a runtime.
    #[error("{message}")]
    Unavailable {
        /// What was tried and how to get a runtime.
        message: String,
    },
    /// The program did not build, or the entry point is not in it.
    #[error("OpenCL build of `{entry}` failed ({reason}); build log:\n{log}")]
    Compile {
        /// The kernel's entry point.
        entry: String,
        /// Short reason (`CL_BUILD_PROGRAM_FAILURE`, `invalid definition`, …).
        reason: String,
        /// The compiler's build log (never empty: a reason is put there when the driver gives
        /// no log).
        log: String,
    },
    /// The launch was rejected or the kernel failed while running.
    #[error("OpenCL launch failed: {message}")]
    Launch {
        /// What went wrong, with the OpenCL error name where there is one.
        message: String,
    },
    /// Out of device or host memory, or another resource.
    #[error("OpenCL out of resources in {operation}: {message}")]
    Resources {
        /// The API call or operation.
        operation: &'static str,
        /// Details.
        message: String,
    },
    /// A capability this backend does not offer.
    #[error("the OpenCL backend does not support {0}")]
    Unsupported(&'static str),
    /// A bad argument from the caller (a buffer too small, a misaligned offset, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An OpenCL call failed in a way not covered above.
    #[error("{operation} failed: {name} ({code})")]
    Cl {
        /// The API call.
        operation: &'static str,
        /// The OpenCL error code.
        code: i32,
        /// Its symbolic name.
        name: &'static str,
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

impl OpenClError {
    /// An error from an OpenCL call, classified by its code.
    pub(crate) fn cl(operation: &'static str, code: i32) -> Self {
        let name = cl_error_name(code);
        match code {
            // CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY,
            // CL_INVALID_BUFFER_SIZE (beyond CL_DEVICE_MAX_MEM_ALLOC_SIZE)
            -4 | -5 | -6 | -61 => OpenClError::Resources {
                operation,
                message: format!("{name} ({code})"),
            },
            // The loader could not be opened, or found no platform.
            -1001 | -2000 | -2001 => OpenClError::Unavailable {
                message: format!(
                    "{operation} failed: {name} ({code}). {}",
                    crate::runtime::HOW_TO_GET_A_RUNTIME
                ),
            },
            _ => OpenClError::Cl {
                operation,
                code,
                name,
            },
        }
    }

    /// A launch error from an OpenCL call (resource codes stay [`OpenClError::Resources`]).
    pub(crate) fn launch(operation: &'static str, code: i32, detail: &str) -> Self {
        match OpenClError::cl(operation, code) {
            OpenClError::Cl { name, .. } => OpenClError::Launch {
                message: if detail.is_empty() {
                    format!("{operation}: {name} ({code})")
                } else {
                    format!("{operation}: {name} ({code}): {detail}")
                },
            },
            other => other,
        }
    }
}

impl BackendError for OpenClError {
    fn kind(&self) -> BackendErrorKind {
        match self {
            OpenClError::Unavailable { .. } => BackendErrorKind::Unavailable,
            OpenClError::Compile { .. } => BackendErrorKind::Compile,
            OpenClError::Launch { .. } => BackendErrorKind::Launch,
            OpenClError::Resources { .. } => BackendErrorKind::Resources,
            OpenClError::Unsupported(_) => BackendErrorKind::Unsupported,
            OpenClError::InvalidArgument(_)
            | OpenClError::Cl { .. }
            | OpenClError::Cache { .. } => BackendErrorKind::Other,
        }
    }

    fn unsupported(capability: &'static str) -> Self {
        OpenClError::Unsupported(capability)
    }

    fn build_log(&self) -> Option<&str> {
        match self {
            OpenClError::Compile { log, .. } => Some(log),
            _ => None,
        }
    }
}

/// The symbolic name of an OpenCL error code (`CL_INVALID_WORK_GROUP_SIZE`), or `CL_UNKNOWN`.
pub fn cl_error_name(code: i32) -> &'static str {
    match code {
        -1001 => "CL_PLATFORM_NOT_FOUND_KHR",
        -2000 => "DLOPEN_RUNTIME_LOAD_FAILED",
        -2001 => "DLOPEN_FUNCTION_NOT_AVAILABLE",
        // The symbolic names opencl3 knows cover the standard codes.
        _ => opencl3::error_codes::error_text(code),
    }
}
/// A compile cache write that failed.
impl From<kf_backend_common::CacheWriteError> for OpenClError {
    fn from(e: kf_backend_common::CacheWriteError) -> Self {
        OpenClError::Cache {
            path: e.path,
            source: e.source,
        }
    }
}
