//! The tuning protocol ([`EvalConfig::for_tuning`] with [`EarlyStop`]) on the real OpenCL
//! runtime: a configuration clearly slower than the incumbent stops timing at the rule's look
//! and is still verified and checked; one that is not is timed in full; the baseline is
//! re-measured every `TUNING_BASELINE_EVERY`-th evaluation and input sets are reused, while
//! every evaluation still reports a speedup; a worker's first evaluation times the baseline
//! at least `FIRST_BASELINE_TRIALS` times. The cheats under this protocol are in
//! `cheat_corpus.rs`.
//!
//! Skips (printing `SKIPPED: …`) only when the runtime is missing and `KF_REQUIRE_OPENCL` is
//! not `1`.

use std::path::Path;

use kf_backend_opencl::testing::backend_or_skip;
use kf_backend_opencl::OpenClBackend;
use kf_core::{ParamValues, Status};
use kf_eval::task::file::FileTask;
use kf_eval::task::Gemm;
use kf_eval::{
    EarlyStop, EvalConfig, KernelEvaluator, EARLY_STOP_TRIALS, FIRST_BASELINE_TRIALS,
    TUNING_BASELINE_EVERY, TUNING_REUSE_INPUTS,
};
use kf_manifest::Manifest;

fn naive() -> kf_core::KernelSource {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/gemm_naive.toml");
    Manifest::load(&path).unwrap().1
}

fn tuning_config() -> EvalConfig {
    let mut c = EvalConfig::for_tuning();
    c.timing.min_trials = 10;
    c.timing.min_seconds = 0.0;
    c.data_seed = Some(3);
    c
}

/// The baseline window of [`tuning_config`], as launches.
fn config_window() -> u32 {
    u32::try_from(tuning_config().timing.baseline_window).unwrap_or(u32::MAX)
}

fn evaluator() -> Option<KernelEvaluator<OpenClBackend>> {
    backend_or_skip().map(|b| KernelEvaluator::new(b, tuning_config()))
}

/// The tuning evaluator, a GEMM at 128 × 96 × 64 and the naive kernel tuned on it.
fn gemm_case() -> Option<(
    KernelEvaluator<OpenClBackend>,
    FileTask,
    kf_core::KernelSource,
)> {
    Some((evaluator()?, Gemm::new(128, 96, 64).unwrap(), naive()))
}

#[test]
fn a_clearly_slower_configuration_stops_timing_early_and_is_still_checked() {
    let Some((mut ev, task, kernel)) = gemm_case() else {
        return;
    };
    // An incumbent a thousand times faster than any real launch: clearly slower.
    let mut config = tuning_config();
    config.timing.early_stop = Some(EarlyStop::against(&[1e-9; 10]));
    ev.set_config(config);
    let e = ev.evaluate(&task, &kernel, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    assert_eq!(
        e.timing.unwrap().trials,
        EARLY_STOP_TRIALS,
        "{}",
        e.diagnostics
    );
    assert!(ev.last_profile().stopped_early);
    assert!(e.diagnostics.contains("stopped early"), "{}", e.diagnostics);
    assert!(e.correctness.unwrap().input_sets >= 3);

    // An incumbent slower than the candidate: timed in full.
    let mut config = tuning_config();
    config.timing.early_stop = Some(EarlyStop::against(&[10.0; 10]));
    ev.set_config(config);
    let e = ev.evaluate(&task, &kernel, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    assert!(e.timing.unwrap().trials >= 10, "{}", e.diagnostics);
    assert!(!ev.last_profile().stopped_early);
}

#[test]
fn the_baseline_is_re_measured_periodically_and_input_sets_are_reused() {
    let Some((mut ev, task, kernel)) = gemm_case() else {
        return;
    };
    let mut launches = Vec::new();
    let mut generated = Vec::new();
    let mut reused = Vec::new();
    for _ in 0..=TUNING_BASELINE_EVERY {
        let e = ev.evaluate(&task, &kernel, &ParamValues::new()).unwrap();
        assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
        // Every evaluation has a speedup against a measured baseline window.
        assert!(e.speedup.is_some(), "{}", e.diagnostics);
        launches.push(ev.last_profile().baseline_launches);
        generated.push(ev.last_profile().inputs_generated);
        reused.push(ev.last_profile().inputs_reused);
    }
    let config = tuning_config();
    // The first evaluation fills the window (FIRST_BASELINE_TRIALS), after a warm-up launch.
    let first = config
        .timing
        .baseline_trials
        .max(FIRST_BASELINE_TRIALS.min(config_window()))
        + 1;
    let mut expected = vec![0; TUNING_BASELINE_EVERY as usize + 1];
    expected[0] = first;
    expected[TUNING_BASELINE_EVERY as usize] = config.timing.baseline_trials;
    assert_eq!(launches, expected);
    // Every evaluation checks three sets. Each set is drawn once and then reused (with fresh
    // poison before every launch) for TUNING_REUSE_INPUTS evaluations in all before it is
    // drawn afresh.
    assert_eq!(generated[0], 3);
    for (i, (g, r)) in generated.iter().zip(&reused).enumerate() {
        assert_eq!(
            g + r,
            3,
            "evaluation {i}: drawn {generated:?}, reused {reused:?}"
        );
    }
    let evaluations = generated.len() as u32;
    assert_eq!(
        generated.iter().sum::<u32>(),
        3 * evaluations.div_ceil(TUNING_REUSE_INPUTS),
        "drawn {generated:?}"
    );
}

/// With one baseline launch per evaluation (the search's protocol), a worker's first
/// evaluation still times the baseline `FIRST_BASELINE_TRIALS` times (the window): in a
/// search its median becomes the run's reference for every speedup (`kf_core::RunBaseline`).
#[test]
fn a_worker_s_first_evaluation_fills_the_baseline_window() {
    let Some(mut ev) = evaluator() else {
        return;
    };
    let mut config = tuning_config();
    config.timing.baseline_trials = 1;
    config.timing.baseline_every = 1;
    ev.set_config(config);
    let task = Gemm::new(128, 96, 64).unwrap();
    let kernel = naive();
    let mut launches = Vec::new();
    let mut window = Vec::new();
    for _ in 0..3 {
        let e = ev.evaluate(&task, &kernel, &ParamValues::new()).unwrap();
        assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
        launches.push(ev.last_profile().baseline_launches);
        window.push(e.baseline.unwrap().trials);
    }
    // A warm-up launch before the first timed one; then one per evaluation, the window
    // keeping the last `baseline_window` samples.
    let first = FIRST_BASELINE_TRIALS.min(config_window());
    assert!(first >= 3, "a reference from {first} launches");
    assert_eq!(launches, [first + 1, 1, 1]);
    let kept = |n: u32| n.min(config_window());
    assert_eq!(window, [first, kept(first + 1), kept(first + 2)]);
}
