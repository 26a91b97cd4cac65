//! The cheat corpus: kernels that try to game the evaluator must each be rejected with the
//! right status, and honest kernels must be accepted. Runs through the isolated evaluator (a
//! worker process per evaluation stream) on the OpenCL backend; skips with a message when no
//! OpenCL runtime is installed (run `scripts/setup.sh`), unless `KF_REQUIRE_OPENCL=1`.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kf_core::{ParamValues, Status};
use kf_eval::task::parse_sizes;
use kf_eval::{
    BackendSpec, EarlyStop, EvalConfig, IsolatedEvaluator, TimeoutPolicy, WorkerCommand,
};
use kf_manifest::Manifest;

kf_eval::worker_test_entry!(common::open_worker_backend);

const NAIVE_MANIFEST: &str = r#"
entry = "gemm"
language = "opencl"
[params]
WG = [8, 16]
[launch]
global = ["((N + WG - 1) / WG) * WG", "((M + WG - 1) / WG) * WG"]
local = ["WG", "WG"]
"#;

/// Whether the tests can run: they skip only when no OpenCL runtime is installed and
/// `KF_REQUIRE_OPENCL` is not `1` (see `kf_backend_opencl::testing`).
fn runtime_available() -> bool {
    kf_backend_opencl::testing::backend_or_skip().is_some()
}

fn kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels")
}

fn evaluator(timeout: TimeoutPolicy) -> IsolatedEvaluator {
    common::harness_evaluator("gemm", "M=256,N=192,K=128", common::short_timing(5))
        .timeout(timeout)
        .build()
}

fn cheat(name: &str) -> kf_core::KernelSource {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cheats")
        .join(format!("{name}.cl"));
    let text = std::fs::read_to_string(&path).unwrap();
    Manifest::parse(NAIVE_MANIFEST, "cheat.toml", None)
        .unwrap()
        .kernel_source(text)
}

/// Every cheat of the corpus with the status it must get.
const CHEATS: [(&str, Status); 13] = [
    ("zero_output", Status::WrongValues),
    ("half_rows", Status::WrongShape),
    ("half_reduction", Status::WrongValues),
    ("stale_output", Status::WrongShape),
    ("one_nan", Status::WrongValues),
    ("mutate_input", Status::RuntimeError),
    ("out_of_bounds", Status::RuntimeError),
    ("wrong_indexing", Status::WrongValues),
    ("sampled", Status::WrongValues),
    ("hardcoded_sizes", Status::WrongValues),
    ("device_enqueue", Status::CompileError),
    ("syntax_error", Status::CompileError),
    ("crash", Status::RuntimeError),
];

/// The cheats `eval` misjudges under `protocol` (`None`: the evaluator's own).
fn misjudged(eval: &IsolatedEvaluator, protocol: Option<&EvalConfig>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, expected) in CHEATS {
        let (e, _) = eval
            .evaluate_blocking_profiled(&cheat(name), &ParamValues::new(), protocol)
            .unwrap();
        eprintln!(
            "{name:16} -> {:14} {}",
            e.status.as_str(),
            e.diagnostics.lines().next().unwrap_or("")
        );
        if e.status != expected {
            wrong.push(format!(
                "{name}: expected {expected}, got {} ({})",
                e.status, e.diagnostics
            ));
        }
        assert!(!e.diagnostics.is_empty(), "{name} gives no diagnostics");
    }
    wrong
}

#[test]
fn every_cheat_is_rejected_with_the_right_status() {
    if !runtime_available() {
        return;
    }
    let wrong = misjudged(&evaluator(TimeoutPolicy::default()), None);
    assert!(wrong.is_empty(), "misjudged cheats:\n{}", wrong.join("\n"));
}

/// `kf tune`'s protocol shares input sets and the baseline across evaluations and stops
/// timing slow configurations early: no cheat may get through any of that. Every cheat runs
/// in one warm worker after an honest kernel, so the reused input sets are the honest
/// kernel's, and against an incumbent so fast that every timing stops at its look.
#[test]
fn every_cheat_is_rejected_under_the_tuning_protocol() {
    if !runtime_available() {
        return;
    }
    let eval = evaluator(TimeoutPolicy::default());
    let mut protocol = EvalConfig::for_tuning();
    protocol.timing.min_trials = 5;
    protocol.timing.min_seconds = 0.01;
    let (_, naive) = Manifest::load(&kernels_dir().join("gemm_naive.toml")).unwrap();
    let (honest, _) = eval
        .evaluate_blocking_profiled(&naive, &ParamValues::new(), Some(&protocol))
        .unwrap();
    assert_eq!(honest.status, Status::Correct, "{}", honest.diagnostics);
    protocol.timing.early_stop = Some(EarlyStop::against(&[1e-9; 10]));
    let wrong = misjudged(&eval, Some(&protocol));
    assert!(wrong.is_empty(), "misjudged cheats:\n{}", wrong.join("\n"));
    // The input sets are reused, not drawn again (twice: the crash cheat cost a worker,
    // and the new one draws its own first).
    let mut last = None;
    for _ in 0..2 {
        last = Some(
            eval.evaluate_blocking_profiled(&naive, &ParamValues::new(), Some(&protocol))
                .unwrap(),
        );
    }
    let (e, profile) = last.unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    assert!(profile.inputs_reused >= 1, "{profile:?}");
    assert!(profile.stopped_early, "{profile:?}");
}

#[test]
fn a_hung_kernel_is_stopped_by_its_timeout() {
    if !runtime_available() {
        return;
    }
    let limit = Duration::from_secs(4);
    let eval = evaluator(TimeoutPolicy::fixed(limit));
    // Start the worker first so that its start-up does not count.
    eval.device().unwrap();
    let started = Instant::now();
    let e = eval
        .evaluate_blocking(&cheat("infinite_loop"), &ParamValues::new())
        .unwrap();
    let took = started.elapsed();
    assert_eq!(e.status, Status::Timeout, "{}", e.diagnostics);
    // It waited for the limit, and was stopped by it rather than by the default 60 s ceiling
    // (a wide margin above the 4 s limit: a loaded machine is slow to kill and restart).
    assert!(
        took >= limit,
        "took {took:?}, less than the {limit:?} limit"
    );
    assert!(took < limit * 5, "took {took:?} for a {limit:?} limit");
    // The evaluator keeps going with a fresh worker.
    let (_, naive) = Manifest::load(&kernels_dir().join("gemm_naive.toml")).unwrap();
    let e = eval.evaluate_blocking(&naive, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    assert!(eval.workers_started() >= 2);
}

#[test]
fn honest_kernels_are_accepted_with_timings() {
    if !runtime_available() {
        return;
    }
    let eval = evaluator(TimeoutPolicy::default());
    let (_, naive) = Manifest::load(&kernels_dir().join("gemm_naive.toml")).unwrap();
    let e = eval.evaluate_blocking(&naive, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    assert!(e.speedup.is_some() && e.gflops.unwrap() > 0.0);
    let c = e.correctness.unwrap();
    assert!(c.input_sets >= 3);
    assert!(
        e.diagnostics.contains("M=128"),
        "the third set runs at another shape: {}",
        e.diagnostics
    );

    let (_, tiled) = Manifest::load(&kernels_dir().join("gemm_tiled.toml")).unwrap();
    for (ts, wpt) in [(8, 1), (16, 1), (16, 4), (32, 8), (64, 8)] {
        let params = ParamValues::new().with("TS", ts).with("WPT", wpt);
        let e = eval.evaluate_blocking(&tiled, &params).unwrap();
        assert_eq!(
            e.status,
            Status::Correct,
            "TS={ts} WPT={wpt}: {}",
            e.diagnostics
        );
        assert!(e.timing.unwrap().median_s > 0.0);
    }
    // A configuration that breaks the manifest's constraints is a compile error naming the rule.
    let e = eval
        .evaluate_blocking(
            &tiled,
            &ParamValues::new().with("TS", 8i64).with("WPT", 16i64),
        )
        .unwrap();
    assert_eq!(e.status, Status::CompileError);
}

#[test]
fn secrets_never_reach_the_worker() {
    if !runtime_available() {
        return;
    }
    std::env::set_var("KF_TEST_API_KEY", "sk-should-not-leak");
    let eval = evaluator(TimeoutPolicy::default());
    eval.device().unwrap();
    // `device` starts a worker and leaves it idle: there is always one to look at.
    let pids = eval.idle_worker_pids();
    assert!(!pids.is_empty(), "no idle worker after device()");
    for pid in pids {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let text = String::from_utf8_lossy(&environ);
        assert!(!text.contains("sk-should-not-leak"));
        assert!(text.contains("KF_EVAL_WORKER"));
    }
}

#[test]
fn softmax_baseline_is_correct() {
    if !runtime_available() {
        return;
    }
    let sizes = parse_sizes("ROWS=512,COLS=256").unwrap();
    let eval = IsolatedEvaluator::builder(BackendSpec::new("opencl"), "softmax", sizes)
        .command(WorkerCommand::test_harness().unwrap())
        .build();
    let (_, naive) = Manifest::load(&kernels_dir().join("softmax_naive.toml")).unwrap();
    let e = eval.evaluate_blocking(&naive, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
}
