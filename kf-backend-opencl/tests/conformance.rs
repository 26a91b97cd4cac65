//! Runs the kf-core backend conformance suite against the OpenCL backend (the Intel CPU runtime
//! after `scripts/setup.sh`). Skips, with a message, when no OpenCL runtime is found.

use kf_backend_common::testing::{run_conformance_suite, unavailable_text};
use kf_backend_opencl::{OpenClBackend, OpenClError};

/// The backend, or `None` (after printing why) when this machine has no OpenCL runtime.
fn backend_or_skip(cache: &std::path::Path) -> Option<OpenClBackend> {
    kf_backend_opencl::testing::skip_unless_installed(
        OpenClBackend::builder().cache_dir(cache).build(),
    )
}

#[test]
fn conformance_suite() {
    let cache = tempfile::tempdir().expect("temp dir");
    let Some(backend) = backend_or_skip(cache.path()) else {
        return;
    };
    run_conformance_suite(&backend, backend.runtime().describe())
        .unwrap_or_else(|failure| panic!("{failure}"));
}

#[test]
fn no_runtime_error_is_unavailable_and_helpful() {
    let text = unavailable_text(&OpenClError::Unavailable {
        message: kf_backend_opencl::runtime::HOW_TO_GET_A_RUNTIME.to_owned(),
    });
    assert!(text.contains("scripts/setup.sh") && text.contains("pocl-opencl-icd"));
}
