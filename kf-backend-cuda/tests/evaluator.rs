//! The kf-eval evaluator over the CUDA backend. On a GPU the seed kernels are verified and
//! timed for real; without one, the compile-only backend (with host buffers) takes a kernel
//! through the protocol up to the launch, and the evaluation reports the compiler's resource
//! usage and that no device is present.

mod common;

use common::{assert_mentions, gpu_or_skip, seed, staging_or_skip};
use kf_backend_common::testing::with_undeclared_name;
use kf_backend_cuda::CudaBackend;
use kf_core::{Backend, ParamValues, Status};
use kf_eval::task::{Gemm, KernelTask, Softmax};
use kf_eval::{EvalConfig, KernelEvaluator};

#[test]
fn compile_only_evaluation_reports_resources_or_runs_on_a_gpu() {
    let Some(backend) = staging_or_skip() else {
        return;
    };
    let on_gpu = backend.has_device();
    let mut evaluator = KernelEvaluator::new(backend, EvalConfig::default());
    let task = Gemm::new(128, 128, 128).expect("gemm");
    let (_, tiled) = seed("gemm_tiled");
    let e = evaluator
        .evaluate(&task, &tiled, &ParamValues::new())
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}: {}", e.status, e.diagnostics);
    assert!(
        e.compiler.registers.is_some_and(|r| r > 0),
        "{:?}",
        e.compiler
    );
    assert_eq!(e.compiler.local_mem_bytes, Some(8448));
    if on_gpu {
        assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    } else {
        assert_eq!(e.status, Status::RuntimeError);
        assert_mentions(&e.diagnostics, "no CUDA device present to run it");
        assert_mentions(&e.diagnostics, "8448 bytes shared memory");
    }

    // A kernel that does not compile is a compile error carrying NVRTC's log, GPU or not.
    let broken = with_undeclared_name(&tiled);
    let e = evaluator
        .evaluate(&task, &broken, &ParamValues::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.status, Status::CompileError, "{}", e.diagnostics);
    assert_mentions(&e.diagnostics, "undeclared_name");
}

#[test]
fn seed_kernels_are_correct_and_timed_on_a_gpu() {
    let cache = tempfile::tempdir().expect("temp dir");
    let Some(backend) = gpu_or_skip(CudaBackend::builder().cache_dir(cache.path())) else {
        return;
    };
    eprintln!(
        "{} ({}), peaks {:?} GFLOP/s {:?} GB/s",
        backend.device().name,
        backend.arch(),
        backend.device().peak_gflops.map(f64::round),
        backend.device().peak_bandwidth_gbs.map(f64::round)
    );
    let config = EvalConfig {
        timing: kf_eval::TimingConfig {
            flush_caches: true,
            ..kf_eval::TimingConfig::default()
        },
        ..EvalConfig::default()
    };
    let mut evaluator = KernelEvaluator::new(backend, config);
    let gemm = Gemm::new(512, 512, 512).expect("gemm");
    let softmax = Softmax::from_sizes(&Default::default()).expect("softmax");
    let cases: [(&dyn KernelTask, &str); 3] = [
        (&gemm, "gemm_naive"),
        (&gemm, "gemm_tiled"),
        (&softmax, "softmax_naive"),
    ];
    for (task, name) in cases {
        let (_, source) = seed(name);
        let e = evaluator
            .evaluate(task, &source, &ParamValues::new())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!(
            "{name}: {} {:?} GFLOP/s, speedup {:?}, {:?} registers; {}",
            e.status, e.gflops, e.speedup, e.compiler.registers, e.diagnostics
        );
        assert_eq!(e.status, Status::Correct, "{name}: {}", e.diagnostics);
        assert!(e.timing.is_some_and(|t| t.median_s > 0.0));
    }
}

/// A row softmax in two kernels with a scratch buffer (kf-manifest's `[[kernels]]`): kf-eval's
/// OpenCL test sequence, in CUDA.
fn two_kernel_manifest() -> String {
    include_str!("../../kf-eval/tests/sequences/softmax_two_kernels.toml")
        .replace("language = \"opencl\"", "language = \"cuda\"")
        .replace("softmax_two_kernels.cl", "softmax_two_kernels.cu")
}

#[test]
fn a_two_kernel_candidate_compiles_every_kernel_and_runs_on_a_gpu() {
    let Some(backend) = staging_or_skip() else {
        return;
    };
    let on_gpu = backend.has_device();
    let source = kf_manifest::Manifest::parse(&two_kernel_manifest(), "two.toml", None)
        .expect("manifest")
        .kernel_source(include_str!("data/softmax_two_kernels.cu"));
    let task = Softmax::from_sizes(&kf_eval::task::parse_sizes("ROWS=256,COLS=384").unwrap())
        .expect("softmax");
    let mut evaluator = KernelEvaluator::new(backend, EvalConfig::default());
    match evaluator.compile_only(&task, &source, &ParamValues::new()) {
        Ok(kf_eval::CompileCheck::Compiled(facts)) => {
            // The facts are those of the kernel the manifest's `entry` names.
            assert!(facts.registers.is_some_and(|r| r > 0), "{facts:?}");
        }
        other => panic!("both kernels should compile: {other:?}"),
    }
    // A sequence naming a kernel the source lacks is a compile error naming it.
    let missing = kf_manifest::Manifest::parse(
        &two_kernel_manifest().replace("entry = \"row_stats\"", "entry = \"row_statz\""),
        "two.toml",
        None,
    )
    .expect("manifest")
    .kernel_source(include_str!("data/softmax_two_kernels.cu"));
    let e = evaluator
        .evaluate(&task, &missing, &ParamValues::new())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.status, Status::CompileError, "{}", e.diagnostics);
    assert_mentions(&e.diagnostics, "row_statz");
    if on_gpu {
        let e = evaluator
            .evaluate(&task, &source, &ParamValues::new())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    }
}
