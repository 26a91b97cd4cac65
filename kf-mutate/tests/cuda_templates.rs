//! The CUDA templates (GEMM and softmax) compile with NVRTC in every structure, and their resource use
//! (registers, shared memory, spills) is reported; where a GPU is present each variant is also
//! run and verified through the real evaluator. Compilation needs only NVRTC (no GPU): skipped
//! with a message where NVRTC is not installed (`scripts/setup.sh --cuda`), unless
//! `KF_REQUIRE_NVRTC=1`; the run is skipped with a message without a GPU, unless
//! `KF_REQUIRE_CUDA_DEVICE=1` (`scripts/gpu-check.sh`). The same holds for every child the
//! structural mutators a CUDA search uses make from them, two moves deep.

mod common;

use kf_backend_cuda::CudaBackend;
use kf_core::prelude::*;
use kf_core::{Backend, CompileOptions};
use kf_eval::task::{builtin_task, parse_sizes, KernelTask};
use kf_eval::{EvalConfig, KernelEvaluator};
use kf_mutate::{Feasibility, StructuralMutator, TemplateLibrary};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The compile-only or GPU backend; `None` (after printing why and recording the skip, kind
/// `NVRTC`) without NVRTC, unless `KF_REQUIRE_NVRTC=1`.
#[track_caller]
fn backend_or_skip() -> Option<CudaBackend> {
    common::backend_or_skip(
        CudaBackend::builder().no_cache().build(),
        "CUDA",
        kf_core::testing::skip::SkipKind::Nvrtc,
        |e| format!("NVRTC is not installed ({e}; scripts/setup.sh --cuda)"),
    )
}

/// Every structure of every CUDA template at its first feasible configuration for its task at
/// the sizes `sizes(task name)`, with the task it was made for.
fn variants(device: &DeviceFacts, sizes: impl Fn(&str) -> &'static str) -> Vec<Case> {
    let library = TemplateLibrary::cuda().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut out = Vec::new();
    for template in library.templates() {
        let task_sizes = parse_sizes(sizes(template.task())).unwrap();
        for structure in template.all_structures() {
            let Ok(variant) = template.instantiate(&structure) else {
                continue;
            };
            let space = Feasibility::new(&variant.manifest, &task_sizes, Some(device));
            let params = space
                .repair(&variant.manifest.default_params(), &[], &mut rng, 5000)
                .unwrap_or_else(|| panic!("no feasible configuration for {structure}"));
            out.push((
                format!("{} {structure}", template.name()),
                builtin_task(template.task(), &task_sizes).unwrap(),
                variant.source,
                params,
            ));
        }
    }
    out
}

/// One variant to check: what it is, the task it computes, its source and parameters.
type Case = (String, Box<dyn KernelTask>, KernelSource, ParamValues);

/// Compiles every case with NVRTC and prints its resources; returns the failures: a compile
/// error, registers or spills not reported, shared memory reported by a kernel that declares
/// none or missing from one that does.
fn compile_reporting(backend: &CudaBackend, cases: &[Case]) -> Vec<String> {
    let mut failures = Vec::new();
    for (what, _, source, params) in cases {
        match backend.compile(source, params, &CompileOptions::default()) {
            Ok(compiled) => {
                let f = &compiled.facts;
                eprintln!(
                    "{what} [{params}]: {:?} registers, {:?} bytes shared, {:?} bytes spilled",
                    f.registers, f.local_mem_bytes, f.spill_bytes
                );
                if f.registers.is_none_or(|r| r == 0) || f.spill_bytes.is_none() {
                    failures.push(format!("{what}: resources not reported: {f:?}"));
                }
                let uses_shared = source.text.contains("__shared__");
                if uses_shared != f.local_mem_bytes.is_some_and(|b| b > 0) {
                    failures.push(format!("{what}: shared memory {:?}", f.local_mem_bytes));
                }
            }
            Err(e) => failures.push(format!("{what} [{params}]: {e}")),
        }
    }
    failures
}

/// Whether `backend` has a GPU to run on; without one, says so, records the skip (kind
/// `CUDA_DEVICE`) and returns false (a failure when `KF_REQUIRE_CUDA_DEVICE=1`).
#[track_caller]
fn gpu_or_skip(backend: &CudaBackend, what: &str) -> bool {
    if backend.has_device() {
        return true;
    }
    let reason = backend.no_device_reason().unwrap_or("unknown reason");
    kf_core::testing::skip::skip(
        kf_core::testing::skip::SkipKind::CudaDevice,
        format_args!(
            "no CUDA device present ({reason}); running {what} needs a GPU \
             (scripts/gpu-check.sh runs this test where there is one)"
        ),
    );
    false
}

/// Evaluates every case on the GPU through the real evaluator; returns the failures.
fn evaluate_all(backend: CudaBackend, cases: &[Case]) -> Vec<String> {
    let mut evaluator = KernelEvaluator::new(backend, EvalConfig::default());
    let mut failures = Vec::new();
    for (what, task, source, params) in cases {
        let evaluation = evaluator.evaluate(task.as_ref(), source, params).unwrap();
        eprintln!(
            "{what} [{params}]: {} {:.1} GFLOP/s",
            evaluation.status,
            evaluation.gflops.unwrap_or(0.0)
        );
        if evaluation.status != Status::Correct {
            failures.push(format!(
                "{what}: {} — {}",
                evaluation.status, evaluation.diagnostics
            ));
        }
    }
    failures
}

#[test]
fn cuda_templates_compile_with_their_resources() {
    let Some(backend) = backend_or_skip() else {
        return;
    };
    let device = backend.device().clone();
    let cases = variants(&device, |task| match task {
        "gemm" => "M=1024,N=1024,K=1024",
        _ => "ROWS=4096,COLS=1024",
    });
    let per_template = |name: &str| cases.iter().filter(|c| c.0.starts_with(name)).count();
    // 10 GEMM structures (VW × LOCAL_B × LOCAL_A, SUBGROUP only scalar without LOCAL_A), 24
    // softmax structures (VW × ALGO × REDUCE).
    assert!(
        per_template("gemm_blocked ") >= 10,
        "only {} GEMM variants",
        per_template("gemm_blocked ")
    );
    assert_eq!(per_template("softmax_group "), 24);
    assert!(cases.iter().any(|c| c.2.text.contains("__shared__")));
    eprintln!("NVRTC {} for {}", backend.nvrtc().version(), backend.arch());
    common::assert_no_failures(&compile_reporting(&backend, &cases));
}

#[test]
fn cuda_templates_are_correct_on_a_gpu() {
    let Some(backend) = backend_or_skip() else {
        return;
    };
    if !gpu_or_skip(&backend, "the CUDA templates") {
        return;
    }
    let device = backend.device().clone();
    let cases = variants(&device, |task| match task {
        "gemm" => "M=512,N=512,K=256",
        _ => "ROWS=1000,COLS=1024",
    });
    common::assert_no_failures(&evaluate_all(backend, &cases));
}

/// The structural mutators of a CUDA search move the GPU templates into kernels that compile
/// (resources reported) and, on a GPU, compute the right answer: every strategy applied to
/// each template's base, and every strategy again to those children.
#[test]
fn cuda_structural_children_compile_and_run() {
    let Some(backend) = backend_or_skip() else {
        return;
    };
    let device = backend.device().clone();
    let mut cases: Vec<Case> = Vec::new();
    for (task_name, sizes) in [
        ("gemm", "M=512,N=512,K=256"),
        ("softmax", "ROWS=1000,COLS=1024"),
    ] {
        let mutator = match task_name {
            "gemm" => StructuralMutator::builtin_for(Language::Cuda),
            _ => StructuralMutator::softmax_for(Language::Cuda),
        }
        .unwrap();
        let sizes = parse_sizes(sizes).unwrap();
        let task = builtin_task(task_name, &sizes).unwrap();
        let found = common::transformations(
            mutator.templates(),
            mutator.strategies(),
            mutator.strategies(),
            &task.describe(),
            &device,
        );
        eprintln!(
            "{task_name}: {} CUDA structures two moves deep",
            found.len()
        );
        for (name, structure, params) in found {
            let variant = mutator
                .templates()
                .get(&name)
                .unwrap()
                .instantiate(&structure)
                .unwrap();
            assert_eq!(variant.source.language, Language::Cuda);
            let task = builtin_task(task_name, &sizes).unwrap();
            cases.push((format!("{name} {structure}"), task, variant.source, params));
        }
    }
    let count = |task: &str| cases.iter().filter(|c| c.1.name() == task).count();
    // The bases alone are 1 per task; the moves reach shared tiles, register blocks, float4
    // loads and warp shuffles in GEMM, and the row algorithms and reductions in softmax.
    assert!(count("gemm") >= 8, "only {} GEMM structures", count("gemm"));
    assert!(
        count("softmax") >= 8,
        "only {} softmax structures",
        count("softmax")
    );
    for construct in ["__shared__", "__shfl", "float4"] {
        assert!(
            cases.iter().any(|c| c.2.text.contains(construct)),
            "no child uses {construct}"
        );
    }
    common::assert_no_failures(&compile_reporting(&backend, &cases));
    if gpu_or_skip(&backend, "the structural children") {
        common::assert_no_failures(&evaluate_all(backend, &cases));
    }
}
