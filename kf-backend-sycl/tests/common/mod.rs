//! Shared helpers of the SYCL backend's integration tests.

#![allow(dead_code)]

use kf_backend_common::testing::built_or_skip;
use kf_backend_sycl::{SyclBackend, SyclBackendBuilder};
use kf_core::testing::skip::SkipKind;
use kf_core::KernelSource;
use kf_manifest::Manifest;

/// Set to `1` to make a missing SYCL runtime a test failure instead of a skip (CI jobs that
/// ran `scripts/setup.sh --sycl`).
pub(crate) const KF_REQUIRE_SYCL: &str = "KF_REQUIRE_SYCL";

/// The backend, or `None` (after printing why and recording the skip, kind `SYCL`) when this
/// machine has no SYCL runtime and `KF_REQUIRE_SYCL` is not set.
#[track_caller]
pub(crate) fn backend_or_skip(builder: SyclBackendBuilder) -> Option<SyclBackend> {
    built_or_skip(builder.build(), "SYCL", SkipKind::Sycl, |e| {
        format!("{e} (scripts/setup.sh --sycl)")
    })
}

/// A fresh backend caching into `dir` (or not at all).
#[track_caller]
pub(crate) fn backend_with_cache(dir: Option<&std::path::Path>) -> Option<SyclBackend> {
    let builder = SyclBackend::builder();
    backend_or_skip(match dir {
        Some(dir) => builder.cache_dir(dir),
        None => builder.no_cache(),
    })
}

/// A SYCL kernel shipped by kf-eval (`gemm_tiled`, …) with its manifest.
pub(crate) fn seed(name: &str) -> (Manifest, KernelSource) {
    let shipped = kf_eval::kernels::shipped(name, kf_core::Language::Sycl)
        .unwrap_or_else(|| panic!("kf-eval ships no SYCL kernel {name}"));
    let manifest = shipped
        .manifest()
        .unwrap_or_else(|e| panic!("loading the SYCL kernel {name}: {e}"));
    let source = manifest.kernel_source(shipped.source);
    (manifest, source)
}
