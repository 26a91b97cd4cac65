//! Backends by name, for command lines and evaluation workers.
//!
//! | name | backend | without its hardware |
//! |---|---|---|
//! | `opencl` | [`OpenClBackend`] | the Intel CPU runtime `scripts/setup.sh` installs is a device |
//! | `cuda` | [`CudaBackend`] | compile-only (needs NVRTC: `scripts/setup.sh --cuda`), see [`open_cuda`] |
//! | `sycl` | [`SyclBackend`] | the Intel CPU device, after `scripts/setup.sh --sycl`, see [`open_sycl`] |

use kf_backend_cuda::{CudaBackend, DeviceSelector as CudaDeviceSelector};
use kf_backend_opencl::{DeviceSelector, OpenClBackend};
use kf_backend_sycl::{DeviceSelector as SyclDeviceSelector, SyclBackend};
use kf_eval::worker::{serve_if_requested, WORKER_ENV};
use kf_eval::{BackendSpec, TaskRegistry};

/// The backends this build knows.
pub const BACKENDS: [&str; 3] = ["opencl", "cuda", "sycl"];

/// Opens the OpenCL backend on the device `spec` selects.
pub fn open_opencl(spec: &BackendSpec) -> Result<OpenClBackend, String> {
    let mut builder = OpenClBackend::builder();
    if let Some(device) = &spec.device {
        builder = builder.device(DeviceSelector::parse(device));
    }
    builder.build().map_err(|e| e.to_string())
}

/// Opens the CUDA backend on the device `spec` selects (an ordinal or a name substring; default
/// `KF_CUDA_DEVICE` or device 0).
///
/// Without a GPU this is a compile-only backend whose buffers live in host memory
/// ([`kf_backend_cuda::CudaBackendBuilder::host_buffers_without_device`]): an evaluation then
/// compiles the kernel with NVRTC (a bad kernel is `compile_error` with NVRTC's log), and a
/// kernel that compiled reaches the launch, which fails with "no CUDA device present to run
/// it" naming its registers, shared memory and spills; the evaluator reports that as
/// `runtime_error` with the compiler facts filled in. Nothing is timed or verified, and the
/// diagnostics say so. NVRTC itself is required: without it this fails, saying how to
/// install it.
pub fn open_cuda(spec: &BackendSpec) -> Result<CudaBackend, String> {
    let mut builder = CudaBackend::builder().host_buffers_without_device(true);
    if let Some(device) = &spec.device {
        builder = builder.device(CudaDeviceSelector::parse(device));
    }
    builder.build().map_err(|e| e.to_string())
}

/// Opens the SYCL backend on the device `spec` selects (`cpu`, `gpu`, `P:D`, or a name
/// substring; default `KF_SYCL_DEVICE` or the best device that can build SYCL source).
///
/// Kernels are SYCL free functions compiled at run time by the SYCL runtime; without the
/// runtime (or when this build found none: the shim is compiled only then) this fails saying
/// how to install it (`scripts/setup.sh --sycl`).
pub fn open_sycl(spec: &BackendSpec) -> Result<SyclBackend, String> {
    let mut builder = SyclBackend::builder();
    if let Some(device) = &spec.device {
        builder = builder.device(SyclDeviceSelector::parse(device));
    }
    builder.build().map_err(|e| e.to_string())
}

/// The kernel language a backend compiles: `sycl` → SYCL, `cuda` → CUDA, anything else
/// OpenCL C.
pub fn language_of(backend: &str) -> kf_core::Language {
    match backend {
        "sycl" => kf_core::Language::Sycl,
        "cuda" => kf_core::Language::Cuda,
        _ => kf_core::Language::OpenCl,
    }
}

/// Checks that `spec` names a backend this build has.
pub fn check(spec: &BackendSpec) -> Result<(), String> {
    if BACKENDS.contains(&spec.kind.as_str()) {
        Ok(())
    } else {
        Err(format!(
            "unknown backend `{}` (this build has: {})",
            spec.kind,
            BACKENDS.join(", ")
        ))
    }
}

/// Serves as an evaluation worker when this process was started as one, and returns at once
/// otherwise. Call it first thing in `main` of every program that uses
/// [`kf_eval::IsolatedEvaluator`] (the `kf` binary and the examples do).
///
/// The worker's backend type is chosen from the spec's `kind` before serving (each backend
/// has its own kernel and buffer types); an unreadable spec falls through to the OpenCL path,
/// which reports it.
pub fn init() {
    let kind = std::env::var(WORKER_ENV)
        .ok()
        .and_then(|spec| serde_json::from_str::<BackendSpec>(&spec).ok())
        .map(|spec| spec.kind);
    let tasks = TaskRegistry::builtin();
    match kind.as_deref() {
        Some("cuda") => serve_if_requested(
            |spec: &BackendSpec| {
                check(spec)?;
                open_cuda(spec)
            },
            &tasks,
        ),
        Some("sycl") => serve_if_requested(
            |spec: &BackendSpec| {
                check(spec)?;
                open_sycl(spec)
            },
            &tasks,
        ),
        _ => serve_if_requested(
            |spec: &BackendSpec| {
                check(spec)?;
                open_opencl(spec)
            },
            &tasks,
        ),
    }
}

/// The facts of the device `spec` selects, from a backend opened in this process (the device a
/// distributed worker registers, and what a search tells its mutators and tuner).
pub fn device_facts(spec: &BackendSpec) -> Result<kf_core::DeviceFacts, String> {
    use kf_core::Backend;
    check(spec)?;
    match spec.kind.as_str() {
        "cuda" => open_cuda(spec).map(|b| b.device().clone()),
        "sycl" => open_sycl(spec).map(|b| b.device().clone()),
        _ => open_opencl(spec).map(|b| b.device().clone()),
    }
}
