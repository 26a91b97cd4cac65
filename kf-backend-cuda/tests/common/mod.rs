//! Shared by the integration tests: the backend, or a printed reason to skip.

#![allow(dead_code, unreachable_pub)]

use kf_backend_common::testing::built_or_skip;
use kf_backend_cuda::{CudaBackend, CudaBackendBuilder};
use kf_core::testing::skip::SkipKind;
use kf_core::{BackendError, KernelSource};

/// Set to `1` to make a missing NVRTC fail the tests instead of skipping them (CI after
/// `scripts/setup.sh --cuda`).
pub const KF_REQUIRE_NVRTC: &str = "KF_REQUIRE_NVRTC";

/// Set to `1` to make a missing CUDA device fail the GPU tests instead of skipping them
/// (`scripts/gpu-check.sh` on a GPU machine).
pub const KF_REQUIRE_CUDA_DEVICE: &str = "KF_REQUIRE_CUDA_DEVICE";

/// Builds the backend; `None` (after printing why and recording the skip, kind `NVRTC`) when
/// NVRTC is not installed, unless `KF_REQUIRE_NVRTC=1`.
#[track_caller]
pub fn backend_or_skip(builder: CudaBackendBuilder) -> Option<CudaBackend> {
    built_or_skip(builder.build(), "CUDA", SkipKind::Nvrtc, |e| {
        format!("NVRTC is not installed ({e}; scripts/setup.sh --cuda)")
    })
}

/// The compile-only or GPU backend with no disk cache.
#[track_caller]
pub fn uncached() -> Option<CudaBackend> {
    backend_or_skip(CudaBackend::builder().no_cache())
}

/// The backend with no disk cache that, without a device, stages buffers on the host: the
/// evaluator's whole protocol then runs up to the launch, which names the kernel's resources.
#[track_caller]
pub fn staging_or_skip() -> Option<CudaBackend> {
    backend_or_skip(
        CudaBackend::builder()
            .no_cache()
            .host_buffers_without_device(true),
    )
}

/// The backend on a GPU; `None` (after printing why and recording the skip, kind
/// `CUDA_DEVICE`) without NVRTC or without a device.
#[track_caller]
pub fn gpu_or_skip(builder: CudaBackendBuilder) -> Option<CudaBackend> {
    let backend = backend_or_skip(builder)?;
    if !backend.has_device() {
        let reason = backend.no_device_reason().unwrap_or("unknown reason");
        kf_core::testing::skip::skip(
            SkipKind::CudaDevice,
            format_args!(
                "no CUDA device present ({reason}); this test needs a GPU \
                 (scripts/gpu-check.sh runs it where there is one)"
            ),
        );
        return None;
    }
    Some(backend)
}

/// A seed kernel shipped by kf-eval (compiled into it: no file is read, so the test binaries
/// `scripts/gpu-check.sh --bundle` copies to another machine need no checkout), with its
/// manifest.
pub fn seed(name: &str) -> (kf_manifest::Manifest, KernelSource) {
    let shipped = kf_eval::kernels::shipped(name, kf_core::Language::Cuda)
        .unwrap_or_else(|| panic!("kf-eval ships no CUDA kernel {name}"));
    let manifest = shipped
        .manifest()
        .unwrap_or_else(|e| panic!("{}: {e}", shipped.manifest_path));
    let source = manifest.kernel_source(shipped.source);
    (manifest, source)
}

/// The error's text with its build log.
pub fn describe<E: BackendError>(e: &E) -> String {
    format!("{e} (kind {:?})", e.kind())
}

/// Asserts that an evaluation's diagnostics mention `text`, showing them all when they do not.
#[track_caller]
pub fn assert_mentions(diagnostics: &str, text: &str) {
    assert!(diagnostics.contains(text), "{diagnostics}");
}
