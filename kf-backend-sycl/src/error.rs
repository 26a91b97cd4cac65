//! [`SyclError`], the one error type of this crate.

use std::path::PathBuf;

use kf_core::{BackendError, BackendErrorKind};

/// What can go wrong in the SYCL backend. Every variant maps to a
/// [`BackendErrorKind`](kf_core::BackendErrorKind) through [`BackendError::kind`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyclError {
    /// No SYCL runtime: the crate was built without one, the shim or the runtime cannot be
    /// loaded, or no (matching) device is present. The message says what was tried and how to
    /// install the runtime.
    #[error("SYCL runtime not available: {message}")]
    Unavailable {
        /// What was tried and how to get a runtime.
        message: String,
    },
    /// The source did not build, or the entry point is not in it.
    #[error("SYCL build of `{entry}` failed ({reason}); build log:\n{log}")]
    Compile {
        /// The kernel's entry point.
        entry: String,
        /// Short reason (`device compilation failed`, `no kernel named …`, …).
        reason: String,
        /// The compiler's diagnostics (clang's messages with file, line and caret), never
        /// empty: the reason is put there when the runtime gives no log.
        log: String,
    },
    /// The launch was rejected or the kernel failed while running.
    #[error("SYCL launch failed: {message}")]
    Launch {
        /// What went wrong.
        message: String,
    },
    /// Out of device or host memory, or another resource.
    #[error("SYCL out of resources in {operation}: {message}")]
    Resources {
        /// The operation.
        operation: &'static str,
        /// Details.
        message: String,
    },
    /// A capability this backend does not offer.
    #[error("the SYCL backend does not support {0}")]
    Unsupported(&'static str),
    /// A bad argument from the caller (a buffer too small, a misaligned offset, …).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A runtime call failed in a way not covered above.
    #[error("{operation} failed: {message}")]
    Runtime {
        /// The operation.
        operation: &'static str,
        /// The runtime's message.
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

impl BackendError for SyclError {
    fn kind(&self) -> BackendErrorKind {
        match self {
            SyclError::Unavailable { .. } => BackendErrorKind::Unavailable,
            SyclError::Compile { .. } => BackendErrorKind::Compile,
            SyclError::Launch { .. } => BackendErrorKind::Launch,
            SyclError::Resources { .. } => BackendErrorKind::Resources,
            SyclError::Unsupported(_) => BackendErrorKind::Unsupported,
            SyclError::InvalidArgument(_) | SyclError::Runtime { .. } | SyclError::Cache { .. } => {
                BackendErrorKind::Other
            }
        }
    }

    fn unsupported(capability: &'static str) -> Self {
        SyclError::Unsupported(capability)
    }

    fn build_log(&self) -> Option<&str> {
        match self {
            SyclError::Compile { log, .. } => Some(log),
            _ => None,
        }
    }
}

/// A compile cache write that failed.
impl From<kf_backend_common::CacheWriteError> for SyclError {
    fn from(e: kf_backend_common::CacheWriteError) -> Self {
        SyclError::Cache {
            path: e.path,
            source: e.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let e = SyclError::Compile {
            entry: "k".into(),
            reason: "r".into(),
            log: "rtc_0.cpp:2:5: error: x".into(),
        };
        assert_eq!(e.kind(), BackendErrorKind::Compile);
        assert_eq!(e.build_log(), Some("rtc_0.cpp:2:5: error: x"));
        assert_eq!(
            SyclError::unsupported("x").kind(),
            BackendErrorKind::Unsupported
        );
        let u = SyclError::Unavailable {
            message: "m".into(),
        };
        assert!(u.to_string().starts_with("SYCL runtime not available"));
        assert_eq!(u.kind(), BackendErrorKind::Unavailable);
    }
}
