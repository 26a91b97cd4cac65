//! Runs the kf-core backend conformance suite against the CUDA backend on a GPU. Skips, with a
//! message, where there is no NVRTC or no CUDA device; the compile-only checks run everywhere
//! NVRTC is installed.

mod common;

use common::{gpu_or_skip, uncached};
use kf_backend_common::testing::run_conformance_suite;
use kf_backend_cuda::CudaBackend;
use kf_core::testing::conformance;

#[test]
fn conformance_suite_on_a_gpu() {
    let cache = tempfile::tempdir().expect("temp dir");
    let Some(backend) = gpu_or_skip(CudaBackend::builder().cache_dir(cache.path())) else {
        return;
    };
    run_conformance_suite(&backend, backend.runtime().describe())
        .unwrap_or_else(|failure| panic!("{failure}"));
}

#[test]
fn compile_checks_pass_without_a_device() {
    let Some(backend) = uncached() else {
        return;
    };
    let report = conformance::run_only(&backend, &["compile_error"]);
    eprintln!("{report}");
    assert!(report.passed(), "{report}");
    assert_eq!(report.checks.len(), 1);
}
