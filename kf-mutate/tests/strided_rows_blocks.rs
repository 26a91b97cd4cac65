//! The strided row templates' blocks of `CPW` vectors per work-item (`row_norm_strided`,
//! `row_reduce_strided`): every path of the kernels computes KernelBench's RMSNorm over the
//! channels (tasks/kernelbench/36_RMSNorm_), sum over a dimension (47_…) and argmax over a
//! dimension (51_…) correctly through the real evaluator on the OpenCL backend, against the
//! tasks' NumPy references, bound to the tasks' kernel interfaces as a search binds them. The
//! sizes make the positions per block (`INNER`) odd: whole blocks and a last block shifted
//! back to end at `INNER` (145 positions), fewer positions than a block but more than a vector
//! (21: one vector at a time, the last shifted back), and fewer than a vector (3: row by row).
//! Skips without the OpenCL runtime or NumPy unless `KF_REQUIRE_OPENCL=1` /
//! `KF_REQUIRE_PYTHON=1`.

use std::path::Path;

use kf_core::prelude::*;
use kf_eval::task::file::{python::numpy_or_skip, FileTask, TaskFile};
use kf_eval::task::parse_sizes;
use kf_eval::KernelEvaluator;
use kf_mutate::{TaskBinding, TemplateLibrary};

mod common;
use common::{check_case, quick_config};

/// The RMSNorm task's kernel interface with the strided normalisation template bound to it,
/// as kf-search binds a `[family] kind = "row_norm"` task with an `inner` size.
fn rms_norm_binding() -> TaskBinding {
    let mut binding = TaskBinding::new("kb_36_RMSNorm_", "")
        .param("__global const float*", "x")
        .param("__global float*", "out")
        .param("const int", "batch_size")
        .param("const int", "features")
        .param("const int", "dim1")
        .param("const int", "dim2")
        .bind("OUTER", "(batch_size * dim1 * dim2) / (dim1 * dim2)")
        .bind("INNER", "dim1 * dim2")
        .bind("LEN", "features")
        .bind("EPS", "1e-5f")
        .bind("X", "x")
        .bind("Y", "out")
        .bind("W", "0")
        .bind("B", "0")
        .fix("NORM_OP", 2)
        .fix("HAS_W", 0)
        .fix("HAS_B", 0);
    binding.entry = "kb_36_RMSNorm__rms_norm".into();
    binding
}

/// A reduction over dim 1 task's kernel interface (`x`, `out`, then the sizes) with the
/// strided reduction template bound to it, as kf-search binds a `[family] kind =
/// "row_reduce"` task.
fn reduce_binding(
    task: &str,
    op: &str,
    out_type: &str,
    reduce_op: i64,
    extra: &[&str],
) -> TaskBinding {
    let mut binding = TaskBinding::new(task, "")
        .param("__global const float*", "x")
        .param(out_type, "out")
        .param("const int", "batch_size")
        .param("const int", "dim1")
        .param("const int", "dim2");
    for size in extra {
        binding = binding.param("const int", *size);
    }
    let mut binding = binding
        .bind("OUTER", "(batch_size * dim2) / (dim2)")
        .bind("LEN", "dim1")
        .bind("INNER", "dim2")
        .bind("X", "x")
        .bind("Y", "out")
        .fix("REDUCE_OP", reduce_op);
    binding.entry = format!("{task}_{op}");
    binding
}

/// Structure and parameters, `name=value` comma-separated: the start (4 float16 vectors), a
/// wider block, narrow vectors and scalars.
const CASES: &[&str] = &[
    "VW=16,CPW=4,WG=4",
    "VW=16,CPW=8,WG=1",
    "VW=4,CPW=2,WG=4",
    "VW=1,CPW=4,WG=8",
];

/// Evaluates every case of [`CASES`] on the task at every size, returning the failures.
fn failures(task_dir: &str, sizes: &[&str], template: &str, binding: &TaskBinding) -> Vec<String> {
    let Some(backend) = kf_backend_opencl::testing::backend_or_skip() else {
        return Vec::new();
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tasks/kernelbench")
        .join(task_dir)
        .join("task.toml");
    let library = match template {
        "row_norm_strided" => TemplateLibrary::row_norm_strided(),
        _ => TemplateLibrary::row_reduce_strided(),
    }
    .unwrap()
    .bound_to(binding)
    .unwrap();
    let template = library.get(template).unwrap();
    let mut evaluator = KernelEvaluator::new(backend, quick_config(Some(7)));
    let mut failures = Vec::new();
    for size in sizes {
        let file = TaskFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let task = FileTask::new(file, &parse_sizes(size).unwrap())
            .unwrap()
            .with_cache_dir(None);
        for case in CASES {
            if let Some(failure) =
                check_case(&mut evaluator, &task, template, ParamValues::new(), case)
            {
                failures.push(format!("{task_dir} {size} {case}: {failure}"));
            }
        }
    }
    failures
}

#[test]
fn blocks_compute_rms_norm_over_channels_on_opencl() {
    if !numpy_or_skip() {
        return;
    }
    let failures = failures(
        "36_RMSNorm_",
        &[
            "batch_size=2,features=5,dim1=5,dim2=29",
            "batch_size=2,features=3,dim1=3,dim2=7",
            "batch_size=2,features=3,dim1=1,dim2=3",
        ],
        "row_norm_strided",
        &rms_norm_binding(),
    );
    common::assert_no_failures(&failures);
}

#[test]
fn blocks_compute_sum_and_argmax_over_a_dimension_on_opencl() {
    if !numpy_or_skip() {
        return;
    }
    let sizes = [
        "batch_size=2,dim1=5,dim2=145",
        "batch_size=2,dim1=3,dim2=21",
        "batch_size=2,dim1=4,dim2=3",
    ];
    let mut all = failures(
        "47_Sum_reduction_over_a_dimension",
        &sizes,
        "row_reduce_strided",
        &reduce_binding(
            "kb_47_Sum_reduction_over_a_dimension",
            "sum",
            "__global float*",
            1,
            &["reduce_dim"],
        ),
    );
    all.extend(failures(
        "51_Argmax_over_a_dimension",
        &sizes,
        "row_reduce_strided",
        &reduce_binding(
            "kb_51_Argmax_over_a_dimension",
            "argmax",
            "__global int*",
            5,
            &[],
        ),
    ));
    assert!(all.is_empty(), "{}", all.join("\n"));
}
