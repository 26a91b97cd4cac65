//! The row normalisation template's rows per work-group (`RPG`): several rows' sums gathered in
//! one sweep, the weight and bias read once for them, the last group taking the last row again
//! where the rows do not divide. Every configuration below computes KernelBench's LayerNorm
//! (tasks/kernelbench/40_LayerNorm, its NumPy reference) correctly through the real evaluator
//! on the OpenCL backend, at 3 rows of 288 floats (and the evaluator's other shapes), bound to
//! the task's kernel interface as a search binds it. Skips without the OpenCL runtime or
//! NumPy unless `KF_REQUIRE_OPENCL=1` / `KF_REQUIRE_PYTHON=1`.

use std::path::Path;

use kf_core::prelude::*;
use kf_eval::task::file::{python::numpy_or_skip, FileTask, TaskFile};
use kf_eval::task::parse_sizes;
use kf_eval::KernelEvaluator;
use kf_mutate::{TaskBinding, TemplateLibrary};

mod common;
use common::{check_case, quick_config};

/// The LayerNorm task's kernel interface with the template's parameters bound to it, as
/// kf-search binds a `[family] kind = "row_norm"` task (`norm_binding`).
fn layer_norm_binding() -> TaskBinding {
    let mut binding = TaskBinding::new("kb_40_LayerNorm", "")
        .param("__global const float*", "x")
        .param("__global const float*", "ln_weight")
        .param("__global const float*", "ln_bias")
        .param("__global float*", "out")
        .param("const int", "batch_size")
        .param("const int", "features")
        .param("const int", "dim1")
        .param("const int", "dim2")
        .bind("ROWS", "batch_size")
        .bind("LEN", "features * dim1 * dim2")
        .bind("EPS", "1e-5f")
        .bind("X", "x")
        .bind("Y", "out")
        .bind("W", "ln_weight")
        .bind("B", "ln_bias")
        .fix("NORM_OP", 1)
        .fix("HAS_W", 1)
        .fix("HAS_B", 1);
    binding.entry = "kb_40_LayerNorm_layer_norm".into();
    binding
}

/// Switches and parameters, `name=value` comma-separated: one row per group, and rows per
/// group that do not divide the 3 rows (the last group then takes the last row again; 4 and
/// 8 exceed them, as every value but 1 exceeds the single row of the evaluator's second shape), one
/// work-item per group and several combining their sums by either reduction, and vector
/// counts that leave the sums sweep's pairs an odd step (the third shape's rows of 144 floats:
/// 9 vectors of 16).
const CASES: &[&str] = &[
    "VW=16,WG=1,RPG=1",
    "VW=16,WG=1,RPG=2",
    "VW=16,WG=1,RPG=4",
    "VW=8,WG=1,RPG=8",
    "VW=4,WG=4,REDUCE=0,RPG=2",
    "VW=1,WG=8,REDUCE=1,RPG=2",
    "VW=8,WG=2,REDUCE=0,RPG=4",
    "VW=16,WG=16,REDUCE=1,RPG=1",
    "VW=16,WG=16,REDUCE=1,RPG=2",
];

#[test]
fn rows_per_group_compute_layer_norm_on_opencl() {
    let (Some(backend), true) = (
        kf_backend_opencl::testing::backend_or_skip(),
        numpy_or_skip(),
    ) else {
        return;
    };
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/kernelbench/40_LayerNorm/task.toml");
    let file = TaskFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let task = FileTask::new(
        file,
        &parse_sizes("batch_size=3,features=4,dim1=8,dim2=9").unwrap(),
    )
    .unwrap()
    .with_cache_dir(None);
    let library = TemplateLibrary::row_norm()
        .unwrap()
        .bound_to(&layer_norm_binding())
        .unwrap();
    let template = library.get("row_norm").unwrap();
    let mut evaluator = KernelEvaluator::new(backend, quick_config(Some(7)));
    let mut failures = Vec::new();
    for case in CASES {
        if let Some(failure) = check_case(&mut evaluator, &task, template, ParamValues::new(), case)
        {
            failures.push(format!("{case}: {failure}"));
        }
    }
    common::assert_no_failures(&failures);
}
