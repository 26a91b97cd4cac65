//! Runs the kf-core backend conformance suite against the SYCL backend (the Intel CPU device
//! after `scripts/setup.sh --sycl`). Skips, with a message, when no SYCL runtime is found,
//! unless `KF_REQUIRE_SYCL=1`.

mod common;

use common::backend_with_cache;
use kf_backend_sycl::SyclError;
use kf_core::testing::conformance;
use kf_core::{BackendError, BackendErrorKind};

#[test]
fn conformance_suite() {
    let cache = tempfile::tempdir().expect("temp dir");
    let Some(backend) = backend_with_cache(Some(cache.path())) else {
        return;
    };
    eprintln!("runtime: {}", backend.runtime().describe());
    let report = conformance::run(&backend);
    eprintln!("{report}");
    assert!(report.passed(), "{report}");
}

#[test]
fn no_runtime_error_is_unavailable_and_helpful() {
    let e = SyclError::Unavailable {
        message: kf_backend_sycl::runtime::HOW_TO_GET_A_RUNTIME.to_owned(),
    };
    assert_eq!(e.kind(), BackendErrorKind::Unavailable);
    let text = e.to_string();
    assert!(
        text.contains("SYCL runtime not available") && text.contains("scripts/setup.sh --sycl"),
        "{text}"
    );
    if !kf_backend_sycl::shim_built() {
        // This build has no shim: creating a backend must say so, typed, without panicking.
        let err = kf_backend_sycl::SyclBackend::new().expect_err("no shim, no backend");
        assert_eq!(err.kind(), BackendErrorKind::Unavailable, "{err}");
        assert!(err.to_string().contains("scripts/setup.sh --sycl"), "{err}");
    }
}
