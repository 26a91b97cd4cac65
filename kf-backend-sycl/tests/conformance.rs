//! Runs the kf-core backend conformance suite against the SYCL backend (the Intel CPU device
//! after `scripts/setup.sh --sycl`). Skips, with a message, when no SYCL runtime is found,
//! unless `KF_REQUIRE_SYCL=1`.

mod common;

use common::backend_with_cache;
use kf_backend_common::testing::{run_conformance_suite, unavailable_text};
use kf_backend_sycl::SyclError;

#[test]
fn conformance_suite() {
    let cache = tempfile::tempdir().expect("temp dir");
    let Some(backend) = backend_with_cache(Some(cache.path())) else {
        return;
    };
    run_conformance_suite(&backend, backend.runtime().describe())
        .unwrap_or_else(|failure| panic!("{failure}"));
}

#[test]
fn no_runtime_error_is_unavailable_and_helpful() {
    let text = unavailable_text(&SyclError::Unavailable {
        message: kf_backend_sycl::runtime::HOW_TO_GET_A_RUNTIME.to_owned(),
    });
    assert!(
        text.contains("SYCL runtime not available") && text.contains("scripts/setup.sh --sycl"),
        "{text}"
    );
    if !kf_backend_sycl::shim_built() {
        // This build has no shim: creating a backend must say so, typed, without panicking.
        let err = kf_backend_sycl::SyclBackend::new().expect_err("no shim, no backend");
        let text = unavailable_text(&err);
        assert!(text.contains("scripts/setup.sh --sycl"), "{err}");
    }
}
