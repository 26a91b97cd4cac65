//! The kf-eval evaluator over the SYCL backend: the shipped SYCL kernels (kf-eval's
//! `kernels/sycl/`) are verified and timed for real on the Intel CPU device, and a kernel that
//! does not compile is a `compile_error` carrying clang's diagnostics. Skips without a SYCL
//! runtime unless `KF_REQUIRE_SYCL=1`.

mod common;

use common::{backend_with_cache, seed};
use kf_backend_common::testing::with_undeclared_name;
use kf_core::{Backend, Language, ParamValues, Status};
use kf_eval::task::{Gemm, KernelTask, Softmax};
use kf_eval::{EvalConfig, KernelEvaluator};

#[test]
fn shipped_sycl_kernels_are_correct_and_timed() {
    let cache = tempfile::tempdir().expect("temp dir");
    let Some(backend) = backend_with_cache(Some(cache.path())) else {
        return;
    };
    eprintln!(
        "{}, peaks {:?} GFLOP/s {:?} GB/s",
        backend.device().name,
        backend.device().peak_gflops.map(f64::round),
        backend.device().peak_bandwidth_gbs.map(f64::round)
    );
    let mut evaluator = KernelEvaluator::new(backend, EvalConfig::default());
    let gemm = Gemm::new(256, 192, 128).expect("gemm");
    let softmax = Softmax::from_sizes(&Default::default()).expect("softmax");
    // The task baselines in SYCL are the shipped naive kernels.
    for task in [&gemm as &dyn KernelTask, &softmax] {
        let base = task.baseline(Language::Sycl).expect("a SYCL baseline");
        assert_eq!(base.language, Language::Sycl);
    }
    let cases: [(&dyn KernelTask, &str, ParamValues); 4] = [
        (&gemm, "gemm_naive", ParamValues::new()),
        (&gemm, "gemm_tiled", ParamValues::new()),
        (
            &gemm,
            "gemm_tiled",
            ParamValues::new().with("TS", 16i64).with("WPT", 2i64),
        ),
        (&softmax, "softmax_naive", ParamValues::new()),
    ];
    for (task, name, params) in cases {
        let (manifest, source) = seed(name);
        let params = manifest.resolve_params(&params).expect("params");
        let e = evaluator
            .evaluate(task, &source, &params)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!(
            "{name} {params}: {} {:?} GFLOP/s, speedup {:?}; {}",
            e.status, e.gflops, e.speedup, e.diagnostics
        );
        assert_eq!(e.status, Status::Correct, "{name}: {}", e.diagnostics);
        assert!(e.timing.is_some_and(|t| t.median_s > 0.0));
    }

    // A kernel that does not compile is a compile error carrying clang's diagnostics.
    let (_, tiled) = seed("gemm_tiled");
    let broken = with_undeclared_name(&tiled);
    let e = evaluator
        .evaluate(&gemm, &broken, &ParamValues::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.status, Status::CompileError, "{}", e.diagnostics);
    assert!(
        e.diagnostics.contains("undeclared_name") && e.diagnostics.contains("error:"),
        "{}",
        e.diagnostics
    );
}

/// A row softmax in two kernels with a scratch buffer (kf-manifest's `[[kernels]]`): kf-eval's
/// OpenCL test sequence, in SYCL.
fn two_kernel_manifest() -> String {
    include_str!("../../kf-eval/tests/sequences/softmax_two_kernels.toml")
        .replace("language = \"opencl\"", "language = \"sycl\"")
        .replace("softmax_two_kernels.cl", "softmax_two_kernels.cpp")
}

#[test]
fn a_two_kernel_candidate_is_correct_and_unwritten_scratch_is_rejected() {
    let cache = tempfile::tempdir().expect("temp dir");
    let Some(backend) = backend_with_cache(Some(cache.path())) else {
        return;
    };
    let text = include_str!("data/softmax_two_kernels.cpp");
    let candidate = |manifest: &str, text: &str| {
        kf_manifest::Manifest::parse(manifest, "two.toml", None)
            .expect("manifest")
            .kernel_source(text.to_owned())
    };
    let task = Softmax::from_sizes(&kf_eval::task::parse_sizes("ROWS=256,COLS=384").unwrap())
        .expect("softmax");
    let mut evaluator = KernelEvaluator::new(backend, EvalConfig::default());
    let e = evaluator
        .evaluate(
            &task,
            &candidate(&two_kernel_manifest(), text),
            &ParamValues::new(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    assert!(e.timing.is_some_and(|t| t.median_s > 0.0));
    // The first kernel leaves the sums out of the scratch buffer.
    let unwritten = text.replace("    STATS[2 * r + 1] = s;\n", "");
    let e = evaluator
        .evaluate(
            &task,
            &candidate(&two_kernel_manifest(), &unwritten),
            &ParamValues::new(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.status, Status::WrongShape, "{}", e.diagnostics);
    assert!(
        e.diagnostics.contains("scratch buffer STATS unwritten"),
        "{}",
        e.diagnostics
    );
}
