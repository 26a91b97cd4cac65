//! Resource limits of evaluation workers, besides the wall-clock timeout: a kernel that burns
//! CPU time past its per-evaluation limit, or a task that needs more memory than the workers
//! may map, costs one evaluation with a clear diagnosis, and the next evaluation runs in a new
//! worker. Real OpenCL workers (this test binary, re-executed); skips only when the runtime is
//! not installed, unless `KF_REQUIRE_OPENCL=1`.

mod common;

use std::time::Duration;

use kf_core::{ParamValues, Status};
use kf_eval::{IsolatedEvaluator, ResourceLimits, TimeoutPolicy};
use kf_manifest::Manifest;

kf_eval::worker_test_entry!(common::open_worker_backend);

fn evaluator(task: &str, sizes: &str, limits: ResourceLimits) -> IsolatedEvaluator {
    common::harness_evaluator(task, sizes, common::short_timing(3))
        // A wall-clock limit far above the CPU limit, so that the CPU limit is what stops it.
        .timeout(TimeoutPolicy {
            max: Duration::from_secs(600),
            min: Duration::from_secs(600),
            allowance: Duration::from_secs(600),
            per_launch_factor: 1000.0,
        })
        .limits(limits)
        .build()
}

const GEMM_MANIFEST: &str = r#"
entry = "gemm"
language = "opencl"
[launch]
global = ["N", "M"]
local = ["1", "1"]
"#;

/// Never finishes, and not through an empty loop a compiler may delete: it keeps writing.
const SPINNING_GEMM: &str = r#"
__kernel void gemm(const int M, const int N, const int K, __global const float* A,
                   __global const float* B, __global float* C) {
    const int r = get_global_id(1), c = get_global_id(0);
    float acc = 0.0f;
    for (int i = 0; ; i = (i + 1) % K) {
        acc += A[r * K + i] * B[i * N + c];
        C[r * N + c] = acc;
    }
}
"#;

#[test]
fn a_kernel_past_its_cpu_time_limit_costs_one_evaluation() {
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }
    let eval = evaluator(
        "gemm",
        "M=64,N=64,K=64",
        ResourceLimits {
            cpu_seconds: Some(8.0),
            ..ResourceLimits::default()
        },
    );
    let manifest = Manifest::parse(GEMM_MANIFEST, "spin.toml", None).unwrap();
    let spin = manifest.kernel_source(SPINNING_GEMM);
    let e = eval.evaluate_blocking(&spin, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::RuntimeError, "{}", e.diagnostics);
    let said = &e.diagnostics;
    eprintln!("spinning kernel: {said}");
    assert!(said.contains("CPU-time limit"), "{said}");
    // The next evaluation gets a fresh worker and is judged normally.
    let (naive, params) = common::shipped_opencl("gemm_naive");
    let ok = eval.evaluate_blocking(&naive, &params).unwrap();
    assert_eq!(ok.status, Status::Correct, "{}", ok.diagnostics);
}

#[test]
fn a_task_larger_than_the_memory_limit_costs_one_evaluation() {
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }
    // 8192 x 8192 floats are 256 MiB per buffer: past a 96 MiB growth limit at once.
    let eval = evaluator(
        "softmax",
        "ROWS=8192,COLS=8192",
        ResourceLimits {
            memory_growth_bytes: Some(96 << 20),
            ..ResourceLimits::default()
        },
    );
    let (naive, params) = common::shipped_opencl("softmax_naive");
    let e = eval.evaluate_blocking(&naive, &params).unwrap();
    assert_ne!(e.status, Status::Correct);
    let said = &e.diagnostics;
    eprintln!("softmax 8192x8192 under a 96 MiB growth limit: {said}");
    assert!(
        said.contains("memory") || said.contains("alloc"),
        "the diagnosis names memory: {said}"
    );
}
