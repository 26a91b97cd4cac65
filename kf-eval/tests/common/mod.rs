//! What the OpenCL integration tests share: opening the runtime or skipping.

use kf_backend_opencl::{OpenClBackend, OpenClError};
use kf_core::BackendErrorKind;

/// The backend `opened`, or `None` after printing `SKIPPED: …` when the runtime is missing and
/// `KF_REQUIRE_OPENCL` is not `1`; any other failure fails the test.
#[track_caller]
pub(crate) fn opencl_or_skip(opened: Result<OpenClBackend, OpenClError>) -> Option<OpenClBackend> {
    match opened {
        Ok(b) => Some(b),
        Err(e) if kf_core::BackendError::kind(&e) == BackendErrorKind::Unavailable => {
            // Kind `OPENCL`: KF_REQUIRE_OPENCL=1 makes this a failure.
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::OpenCl,
                format_args!("no OpenCL runtime ({e})"),
            );
            None
        }
        Err(e) => panic!("opening OpenCL: {e}"),
    }
}
