//! The direct convolution template's float16 form (`INTERLEAVE=2`): 16 consecutive output
//! positions per vector, inputs at stride 1, 2 and 3 picked out of contiguous loads by
//! `shuffle2`, larger strides gathered, vectors that reach the row's end bounds-checked. Every
//! configuration below computes KernelBench's dilated, strided Conv1d
//! (tasks/kernelbench/76_conv_standard_1D_dilated_strided__, its NumPy reference) correctly
//! through the real evaluator on the OpenCL backend, bound to the task's kernel interface as a
//! search binds it, at lengths whose outputs do not fill the last vector (and the evaluator's
//! other shapes). The interleaved forms are checked beside them. Skips without the OpenCL
//! runtime or NumPy unless `KF_REQUIRE_OPENCL=1` / `KF_REQUIRE_PYTHON=1`.

use std::path::Path;

use kf_core::prelude::*;
use kf_eval::task::file::{python::numpy_or_skip, FileTask, TaskFile};
use kf_eval::task::parse_sizes;
use kf_eval::KernelEvaluator;
use kf_mutate::{TaskBinding, TemplateLibrary};

mod common;
use common::{check_case, quick_config};

/// The task's kernel interface with the template's sizes bound to it, as kf-search binds a
/// `[family] kind = "conv1d"` task without padding or bias (`conv1d_binding`).
fn conv_binding() -> TaskBinding {
    let length_out = "((length) + 2 * (0) - (dilation) * ((kernel_size) - 1) - 1) / (stride) + 1";
    let mut binding = TaskBinding::new("kb_76_conv", "")
        .param("__global const float*", "x")
        .param("__global const float*", "conv1d_weight")
        .param("__global float*", "out")
        .param("const int", "batch_size")
        .param("const int", "in_channels")
        .param("const int", "out_channels")
        .param("const int", "kernel_size")
        .param("const int", "length")
        .param("const int", "stride")
        .param("const int", "dilation")
        .bind("B", "batch_size")
        .bind("CI", "in_channels")
        .bind("CO", "out_channels")
        .bind("L", "length")
        .bind("K", "kernel_size")
        .bind("S", "stride")
        .bind("D", "dilation")
        .bind("P", "0")
        .bind("LOUT", length_out)
        .bind("X", "x")
        .bind("W", "conv1d_weight")
        .bind("Y", "out")
        .bind("BIAS", "0")
        .fix("HAS_BIAS", 0)
        .fix("PADDED", 0);
    binding.entry = "kb_76_conv_conv1d".into();
    binding
}

/// Strides 1 to 5 (the three shuffle paths and the gather), dilations that do and do not
/// divide by the stride, lengths whose output count leaves a partial vector (and, at 515 with
/// stride 1 and `TT=32`, a work-item whose second vector is partial).
const SIZES: &[&str] = &[
    "stride=1,dilation=1,length=515",
    "stride=2,dilation=3,length=300",
    "stride=3,dilation=4,length=409",
    "stride=3,dilation=1,length=400",
    "stride=5,dilation=2,length=333",
];

/// Switches and parameters, `name=value` comma-separated.
const CASES: &[&str] = &[
    "INTERLEAVE=2,TT=16,OCT=16,WG=2",
    "INTERLEAVE=2,TT=32,OCT=8,WG=1",
    "INTERLEAVE=2,TT=16,OCT=4,WG=4",
    "INTERLEAVE=1,TT=2,OCT=16,WG=64",
    "INTERLEAVE=0,TT=8,OCT=4,WG=1",
];

#[test]
fn float16_positions_compute_the_strided_convolution_on_opencl() {
    let (Some(backend), true) = (
        kf_backend_opencl::testing::backend_or_skip(),
        numpy_or_skip(),
    ) else {
        return;
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tasks/kernelbench/76_conv_standard_1D_dilated_strided__/task.toml");
    let library = TemplateLibrary::conv1d()
        .unwrap()
        .bound_to(&conv_binding())
        .unwrap();
    let template = library.get("conv1d").unwrap();
    let mut evaluator = KernelEvaluator::new(backend, quick_config(Some(7)));
    let mut failures = Vec::new();
    for sizes in SIZES {
        let file = TaskFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let all = format!("batch_size=2,in_channels=3,out_channels=16,kernel_size=3,{sizes}");
        let task = FileTask::new(file, &parse_sizes(&all).unwrap())
            .unwrap()
            .with_cache_dir(None);
        for case in CASES {
            if let Some(failure) =
                check_case(&mut evaluator, &task, template, ParamValues::new(), case)
            {
                failures.push(format!("{sizes} {case}: {failure}"));
            }
        }
    }
    common::assert_no_failures(&failures);
}
