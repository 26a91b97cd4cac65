//! What the OpenCL integration tests share: opening the runtime or skipping, the backend of
//! their re-executed evaluation workers, the shipped kernels, and the short timing they use.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

use kf_backend_opencl::{DeviceSelector, OpenClBackend, OpenClError};
use kf_core::{BackendErrorKind, Evaluation, KernelSource, ParamValues, Status};
use kf_eval::task::parse_sizes;
use kf_eval::{
    BackendSpec, EvalConfig, IsolatedEvaluator, IsolatedEvaluatorBuilder, WorkerCommand,
};
use kf_manifest::Manifest;

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

/// The backend an evaluation worker of a test binary opens
/// (`kf_eval::worker_test_entry!(common::open_worker_backend)`): OpenCL, on the device the
/// spec names.
pub(crate) fn open_worker_backend(spec: &BackendSpec) -> Result<OpenClBackend, String> {
    let mut b = OpenClBackend::builder();
    if let Some(d) = &spec.device {
        b = b.device(DeviceSelector::parse(d));
    }
    b.build().map_err(|e| e.to_string())
}

/// The shipped OpenCL kernel `name` with its manifest's default parameters.
pub(crate) fn shipped_opencl(name: &str) -> (KernelSource, ParamValues) {
    let kernel = kf_eval::kernels::shipped(name, kf_core::Language::OpenCl)
        .unwrap()
        .kernel_source()
        .unwrap();
    let params = Manifest::from_kernel(&kernel).unwrap().default_params();
    (kernel, params)
}

/// The default protocol with a short timing: `min_trials` trials and 10 ms at least.
pub(crate) fn short_timing(min_trials: u32) -> EvalConfig {
    let mut config = EvalConfig::default();
    config.timing.min_trials = min_trials;
    config.timing.min_seconds = 0.01;
    config
}

/// The default protocol with 4 to 8 trials and no minimum of seconds, its input data drawn
/// from `seed`.
pub(crate) fn seeded_config(seed: u64) -> EvalConfig {
    let mut c = EvalConfig::default();
    c.timing.min_trials = 4;
    c.timing.min_seconds = 0.0;
    c.timing.max_trials = 8;
    c.data_seed = Some(seed);
    c
}

/// An isolated evaluator of the built-in `task` at `sizes` under `config`, its workers this
/// test binary re-executed ([`WorkerCommand::test_harness`]).
pub(crate) fn harness_evaluator(
    task: &str,
    sizes: &str,
    config: EvalConfig,
) -> IsolatedEvaluatorBuilder {
    IsolatedEvaluator::builder(
        BackendSpec::new("opencl"),
        task,
        parse_sizes(sizes).unwrap(),
    )
    .command(WorkerCommand::test_harness().unwrap())
    .config(config)
}

/// Asserts that `e` has `status` and diagnostics that say each of `says`.
#[track_caller]
pub(crate) fn assert_judged(e: &Evaluation, status: Status, says: &[&str]) {
    assert_eq!(e.status, status, "{}", e.diagnostics);
    for said in says {
        assert!(e.diagnostics.contains(said), "{said}: {}", e.diagnostics);
    }
}
