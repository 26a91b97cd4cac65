//! Backends by name, for command lines and evaluation workers.

use kf_backend_opencl::{DeviceSelector, OpenClBackend};
use kf_eval::{BackendSpec, TaskRegistry};

/// The backends this build knows.
pub const BACKENDS: [&str; 1] = ["opencl"];

/// Opens the OpenCL backend on the device `spec` selects.
pub fn open_opencl(spec: &BackendSpec) -> Result<OpenClBackend, String> {
    let mut builder = OpenClBackend::builder();
    if let Some(device) = &spec.device {
        builder = builder.device(DeviceSelector::parse(device));
    }
    builder.build().map_err(|e| e.to_string())
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
pub fn init() {
    kf_eval::worker::serve_if_requested(
        |spec: &BackendSpec| {
            check(spec)?;
            open_opencl(spec)
        },
        &TaskRegistry::builtin(),
    );
}
