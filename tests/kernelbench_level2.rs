//! KernelBench level 2 without PyTorch (issue 49): three problems (a GEMM with a reduction, a
//! GEMM with group norm, a convolution with a bias), vendored unchanged under
//! `tests/data/kernelbench_level2/vendor/`, imported by the documented command at small sizes
//! (`--max-size 8`). The importer writes a NumPy reference (the problem run on its stand-in for
//! torch), the model's weights as input buffers with the model's own initialisation, and a naive
//! kernel generated from forward(); the naive kernel is `correct` on every input set, and the
//! same kernel with one operation dropped (the bias) is not, so the reference is not the
//! kernel's echo.
//!
//! Skips (printing `SKIPPED: …`) without OpenCL or NumPy unless `KF_REQUIRE_OPENCL=1` /
//! `KF_REQUIRE_PYTHON=1`.

use std::path::{Path, PathBuf};

mod common;
use common::{eval_verdict, import_kernelbench, opencl_numpy_scratch};

fn import(dir: &Path, stem: &str) -> PathBuf {
    import_from(
        dir,
        "tests/data/kernelbench_level2/vendor",
        stem,
        &["--max-size", "8"],
    )
}

/// Imports `folder/stem.py` (relative to the checkout) into `dir/stem` with `sizing` (`--max-size
/// 8`, `--size …`).
fn import_from(dir: &Path, folder: &str, stem: &str, sizing: &[&str]) -> PathBuf {
    let out = dir.join(stem);
    import_kernelbench(folder, stem, dir, &out, sizing);
    out
}

/// `kf eval` of `kernel` on the task imported into `task`: its status and diagnostics.
fn eval(task: &Path, kernel: &Path) -> (String, String) {
    let task = task.join("task.toml");
    eval_verdict(["--task-file", task.to_str().unwrap()], kernel, &[])
}

/// Asserts that the generated seed `manifest` of the task imported into `task` is `correct`
/// at its first parameter values and at each of `params` (`NAME=VALUE` assignments).
#[track_caller]
fn correct_at_each(task: &Path, manifest: &str, params: &[&[&str]]) {
    let file = task.join("task.toml");
    let first: &[&str] = &[];
    for assignments in std::iter::once(first).chain(params.iter().copied()) {
        let args: Vec<&str> = assignments.iter().flat_map(|a| ["--param", *a]).collect();
        let (status, said) = eval_verdict(
            ["--task-file", file.to_str().unwrap()],
            &task.join(manifest),
            &args,
        );
        assert_eq!(
            status,
            "correct",
            "{}: {assignments:?}: {said}",
            task.display()
        );
    }
}

#[test]
fn level2_problems_import_and_their_naive_kernels_are_correct() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    // How many kernels the naive kernel is: the product that a sum or a group norm reads
    // many times, and a group norm's statistics, run first into scratch (one kernel each); a
    // convolution followed by element-wise steps stays one kernel.
    for (stem, weights, kernels) in [
        ("14_Gemm_Divide_Sum_Scaling", &["weight"][..], 2),
        (
            "30_Gemm_GroupNorm_Hardtanh",
            &["gemm_weight", "group_norm_weight"][..],
            3,
        ),
        (
            "1_Conv2D_ReLU_BiasAdd",
            &["conv_weight", "conv_bias", "bias"][..],
            1,
        ),
    ] {
        let task = import(tmp.path(), stem);
        let written = std::fs::read_to_string(task.join("task.toml")).unwrap();
        for w in weights {
            assert!(
                written.contains(&format!("name = \"{w}\"")),
                "{stem}: {w}: {written}"
            );
        }
        assert!(
            written.contains("[baseline]") && task.join("naive.cl").is_file(),
            "{stem}: the generated naive kernel is the baseline: {written}"
        );
        let manifest = kf_manifest::Manifest::load(&task.join("naive.toml"))
            .unwrap_or_else(|e| panic!("{e}"))
            .0;
        assert_eq!(
            manifest.sequence.len().max(1),
            kernels,
            "{stem}: {:?}",
            manifest.text
        );
        let (status, said) = eval(&task, &task.join("naive.toml"));
        assert_eq!(status, "correct", "{stem}: {said}");
    }
    // nn.Linear's weights are kaiming-uniform: uniform(-1/sqrt(in_features), ...) at the
    // task's in_features (8), the model's own distribution first.
    let gemm =
        std::fs::read_to_string(tmp.path().join("30_Gemm_GroupNorm_Hardtanh/task.toml")).unwrap();
    assert!(
        gemm.contains("uniform(-0.35355339059327373, 0.35355339059327373)"),
        "{gemm}"
    );
    // The convolution without its trailing bias add is wrong.
    let conv = tmp.path().join("1_Conv2D_ReLU_BiasAdd");
    let source = std::fs::read_to_string(conv.join("naive.cl")).unwrap();
    let add = source
        .lines()
        .find(|l| l.contains(" + bias[") && l.trim_start().starts_with("return"))
        .unwrap_or_else(|| panic!("no bias add in {source}"))
        .to_owned();
    // `return (a + bias[…]);` without `+ bias[…]` and its parentheses.
    let without = add.replacen("return (", "return ", 1);
    let without = without.split(" + ").next().unwrap().to_owned() + ";";
    std::fs::write(conv.join("naive.cl"), source.replace(&add, &without)).unwrap();
    let (status, said) = eval(&conv, &conv.join("naive.toml"));
    assert_eq!(status, "wrong_values", "without the bias: {said}");
}

/// Operations the stand-in and the generator learnt for level 1 (`torch.norm`, `pow`, `sqrt`,
/// `rsqrt`, `cumsum`/`cumprod` with `flip`: KernelBench's 36_RMSNorm_, 37/39 norms, 88_MinGPTNewGelu,
/// 89–91 scans), padded and dilated pooling (max and average, with and without the padding
/// counted; 41_Max_Pooling_1D; a window whose sizes the other input sets halve), `torch.tensor` constants, `torch.multiply` and a transposed
/// convolution's arguments by position, losses with a 0-dimensional output and a size as a
/// divisor (`Losses`), and a batched product (its triangles kept by `triu`/`tril`, and again by `einsum` into another order) whose sizes are named `m`, `k`, `n` (3_Batched: its
/// naive kernel's loop variable once took the size `k`'s name and summed nothing), and a group
/// norm with fewer groups than channels (its alternative input sets halve the group count, which
/// the generated kernel once kept as traced): each imports without PyTorch and its naive kernel
/// is correct on every input set.
#[test]
fn scans_norms_powers_and_sizes_named_like_loop_variables_get_correct_naive_kernels() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let small: &[&str] = &["--max-size", "8"];
    let as_written: &[&str] = &[];
    let pooled: &[&str] = &["--size", "batch_size=2,features=3,sequence_length=100"];
    // Fewer groups than channels: the alternative input sets halve the group count, which the
    // generated kernel must read as the size it is (it once kept the traced count).
    let groups: &[&str] = &[
        "--size",
        "batch_size=4,in_features=16,out_features=16,num_groups=4",
    ];
    for (folder, stem, sizing) in [
        ("tests/data/standin_ops", "Bmm_mkn", small),
        ("tests/data/standin_ops", "Norm_Pow_Cumsum", small),
        ("tests/data/standin_ops", "Pool_Padded", as_written),
        ("tests/data/standin_ops", "Pool_Window", as_written),
        ("tests/data/standin_ops", "Constants_Positional", as_written),
        ("tests/data/standin_ops", "Losses", as_written),
        (
            "tests/data/kernelbench_unseen/vendor",
            "41_Max_Pooling_1D",
            pooled,
        ),
        (
            "tests/data/kernelbench_unseen/vendor",
            "91_cumsum_reverse",
            small,
        ),
        (
            "tests/data/kernelbench_level2/vendor",
            "30_Gemm_GroupNorm_Hardtanh",
            groups,
        ),
    ] {
        let task = import_from(tmp.path(), folder, stem, sizing);
        let (status, said) = eval(&task, &task.join("naive.toml"));
        assert_eq!(status, "correct", "{stem}: {said}");
    }
}

/// Level-1 forms that once did not import (issue 60): an integer output (`torch.argmin`),
/// scaled dot-product attention (its default scale read from the size the other input sets
/// halve), cross entropy against i32 labels (their bound `num_classes - 1` an expression, so
/// halving `num_classes` keeps them in range), an exclusive masked scan by `narrow`/`select`/
/// `zeros_like`/`cat` with a bool mask (0/1 floats), and inputs drawn symmetric and lower
/// triangular (the task says so: `structure`), and a Python number among get_inputs()'s values
/// (the task's scalar). Each imports without PyTorch and its naive
/// kernel is correct on every input set; the task files declare what the problems draw.
#[test]
fn integer_outputs_attention_labels_concatenation_and_structured_inputs_import() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let folder = "tests/data/standin_ops";
    for stem in [
        "Argmin_Rows",
        "Attention",
        "Cross_Entropy",
        "Masked_Exclusive_Scan",
        "Structured_Matmul",
        "Scalar_Argument",
    ] {
        let task = import_from(tmp.path(), folder, stem, &[]);
        let (status, said) = eval(&task, &task.join("naive.toml"));
        assert_eq!(status, "correct", "{stem}: {said}");
    }
    let toml =
        |stem: &str| std::fs::read_to_string(tmp.path().join(stem).join("task.toml")).unwrap();
    let argmin = toml("Argmin_Rows");
    assert!(
        argmin.contains("name = \"out\"\ndtype = \"i32\""),
        "{argmin}"
    );
    let labels = toml("Cross_Entropy");
    assert!(
        labels.contains("init = \"int(0, num_classes - 1)\""),
        "{labels}"
    );
    let structured = toml("Structured_Matmul");
    assert!(
        structured.contains("structure = \"symmetric\""),
        "{structured}"
    );
    assert!(structured.contains("structure = \"lower\""), "{structured}");
    let scalar = toml("Scalar_Argument");
    assert!(
        scalar.contains("[[scalar]]\nname = \"s\"\ndtype = \"f32\"\nvalue = 3.14"),
        "{scalar}"
    );
    let masked = toml("Masked_Exclusive_Scan");
    assert!(
        !masked.contains("dtype = \"i32\""),
        "the mask is 0/1 floats: {masked}"
    );
    // Not a reduction to one value (no two-stage reduction); its scan is computed line by
    // line in the generated seed.
    assert!(
        masked.contains("seeds = [\"scan_lines.toml\"]"),
        "a scan, not a reduction to one value: {masked}"
    );
}

/// What a problem needs of its inputs and sizes reaches the task file: a depthwise
/// convolution's and a broadcast's sizes change together in the other input sets (explicit
/// `[[alternative_sizes]]`), probability rows keep `structure = "softmax"`, and a distribution
/// under which the reference overflows (a long cumulative product from uniform(-3, 3)) is left
/// out. Each naive kernel is then correct on every input set (before, each failed: the
/// reference failed or was not finite there).
#[test]
fn size_needs_probability_rows_and_overflowing_distributions_reach_the_task() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let folder = "tests/data/standin_ops";
    for stem in [
        "Depthwise_Conv",
        "Grouped_ConvTranspose",
        "Hinge_Broadcast",
        "Kl_Probabilities",
        "Cumprod_Long",
    ] {
        let task = import_from(tmp.path(), folder, stem, &[]);
        let (status, said) = eval(&task, &task.join("naive.toml"));
        assert_eq!(status, "correct", "{stem}: {said}");
    }
    let toml = |stem: &str| {
        kf_eval::task::file::TaskFile::load(&tmp.path().join(stem).join("task.toml"))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let depthwise = toml("Depthwise_Conv");
    assert!(!depthwise.spec.alternative_sizes.is_empty());
    for alternative in &depthwise.spec.alternative_sizes {
        assert!(
            !alternative.contains_key("out_channels") || alternative.contains_key("in_channels"),
            "out_channels halved alone: {alternative:?}"
        );
    }
    let hinge = toml("Hinge_Broadcast");
    assert!(!hinge.spec.alternative_sizes.is_empty());
    for alternative in &hinge.spec.alternative_sizes {
        assert_eq!(
            alternative.contains_key("batch_size"),
            alternative.contains_key("input_shape_0"),
            "{alternative:?}"
        );
    }
    let kl = toml("Kl_Probabilities");
    assert!(kl
        .spec
        .buffers
        .iter()
        .filter(|b| b.name == "predictions" || b.name == "targets")
        .all(|b| b.structure.as_deref() == Some("softmax")));
    let cumprod = toml("Cumprod_Long");
    let inits = cumprod.spec.buffers[0].init.as_ref().map(|i| i.to_vec());
    assert_eq!(
        inits,
        Some(vec!["uniform(0, 1)".to_owned(), "normal".to_owned()])
    );
}

/// A loss (the mean of an element-wise expression of two inputs, one value): besides the naive
/// kernel (one work-item summing everything), the importer writes a parallel two-stage
/// reduction generated from the trace, names it in `seeds`, and it is correct at its first
/// parameter values and at others (two work-groups of 16; one partial per work-group of 256).
/// Also where one input broadcasts (the hinge loss's `(batch,)` targets against `(batch, n)`
/// predictions: the element's flat index mapped to the targets' own).
#[test]
fn a_reduction_to_one_value_gets_a_generated_two_stage_kernel() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    for (stem, element) in [
        ("Mse_Loss", "predictions[i] - targets[i]"),
        (
            "Hinge_Broadcast",
            "predictions[i] * targets[((i) % (long)(input_shape_0))]",
        ),
    ] {
        let task = import_from(tmp.path(), "tests/data/standin_ops", stem, &[]);
        let spec = std::fs::read_to_string(task.join("task.toml")).unwrap();
        assert!(spec.contains("seeds = [\"reduce_scalar.toml\"]"), "{spec}");
        let source = std::fs::read_to_string(task.join("reduce_scalar.cl")).unwrap();
        assert!(source.contains("void reduce_partial(") && source.contains("void reduce_final("));
        assert!(source.contains(element), "{source}");
        correct_at_each(
            &task,
            "reduce_scalar.toml",
            &[
                &["WG=16", "GROUPS=2", "UNROLL=8"],
                &["WG=256", "GROUPS=1024", "UNROLL=1"],
            ],
        );
    }
}

/// A convolution gets a generated blocked convolution beside its naive kernel (issue 60): OCT
/// output channels x TW positions per work-item, with the element-wise steps after it fused
/// into its stores, or, where a pooling reads it, written into the naive sequence's scratch.
/// Correct for 1-D (strided, padded, dilated, its value read twice, a residual input), 2-D
/// (KernelBench's level-2 problem 1), 3-D (padded, no bias) and transposed (strided, output
/// padding, pooled) convolutions, at its first parameter values and at others where the
/// channel blocks do not divide the channels; a grouped (depthwise) convolution gets none
/// (not generated yet).
#[test]
fn a_convolution_with_steps_after_it_gets_a_generated_blocked_kernel() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let tasks = [
        import_from(
            tmp.path(),
            "tests/data/standin_ops",
            "Conv1d_Swish_Residual",
            &[],
        ),
        import(tmp.path(), "1_Conv2D_ReLU_BiasAdd"),
        import_from(tmp.path(), "tests/data/standin_ops", "Conv3d_Clamp", &[]),
        import_from(
            tmp.path(),
            "tests/data/standin_ops",
            "ConvTranspose_Pool",
            &[],
        ),
    ];
    // What each seed must hold: the steps fused into the stores, or (the pooling) the
    // convolution blocked into scratch before the naive kernel pools it.
    let fused = ["residual[", "fmax(v, 0.0f)", "fmin(", "void conv_blocked_m"];
    for (task, fused) in tasks.iter().zip(fused) {
        let spec = std::fs::read_to_string(task.join("task.toml")).unwrap();
        assert!(spec.contains("seeds = [\"conv_blocked.toml\"]"), "{spec}");
        let source = std::fs::read_to_string(task.join("conv_blocked.cl")).unwrap();
        assert!(source.contains(fused), "{source}");
        correct_at_each(
            task,
            "conv_blocked.toml",
            &[&["OCT=16", "TW=8", "WG=4"], &["OCT=1", "TW=1", "WG=1"]],
        );
    }
    let depthwise = import_from(tmp.path(), "tests/data/standin_ops", "Depthwise_Conv", &[]);
    assert!(!depthwise.join("conv_blocked.toml").exists());
}

/// A matrix product that a group norm reads is computed into scratch by the naive sequence's
/// first kernel; the generated seed is that sequence with the product's kernel blocked (TM x
/// TN outputs per work-item, float16 vectors along the contracted dimension), correct where
/// the contracted size is not a multiple of 16 (37: two vectors and a scalar tail; the other
/// input set's 18: one and a tail) and where the blocks overhang the rows and columns.
#[test]
fn a_matrix_product_read_by_a_norm_gets_a_generated_blocked_kernel() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let task = import_from(
        tmp.path(),
        "tests/data/kernelbench_level2/vendor",
        "30_Gemm_GroupNorm_Hardtanh",
        &[
            "--size",
            "batch_size=19,in_features=37,out_features=24,num_groups=8",
        ],
    );
    let spec = std::fs::read_to_string(task.join("task.toml")).unwrap();
    assert!(spec.contains("seeds = [\"matmul_blocked.toml\"]"), "{spec}");
    let source = std::fs::read_to_string(task.join("matmul_blocked.cl")).unwrap();
    assert!(source.contains("void matmul_blocked_m") && source.contains("vload16"));
    correct_at_each(
        &task,
        "matmul_blocked.toml",
        &[&["TM=8", "TN=4", "WG=16"], &["TM=1", "TN=1", "WG=1"]],
    );
}

/// A problem whose output is a pooling or a depthwise convolution of its input gets a generated
/// vector kernel (VW neighbouring outputs per work-item): a padded, dilated 1-D max pool
/// (KernelBench's level-1 problem 41), a padded 2-D average pool over the positions inside the
/// input, and a padded depthwise convolution with a bias, a channel multiplier, stride 2 and
/// dilation, correct at every vector width (the strides 2 and 1 of the input sets, edges and a
/// ragged last vector).
#[test]
fn a_pooling_gets_a_generated_vector_kernel() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let tasks = [
        import_from(
            tmp.path(),
            "tests/data/kernelbench_unseen/vendor",
            "41_Max_Pooling_1D",
            &["--size", "batch_size=2,features=3,sequence_length=100"],
        ),
        import_from(
            tmp.path(),
            "tests/data/standin_ops",
            "Avg_Pool_Uncounted",
            &[],
        ),
        import_from(
            tmp.path(),
            "tests/data/standin_ops",
            "Depthwise_Conv_Strided",
            &[],
        ),
    ];
    let expected = [
        ("pool_vector", "fmax(acc, kf_v)"),
        ("pool_vector", "acc / kf_n"),
        ("depthwise_vector", "acc + conv_bias[i1]"),
    ];
    for (task, (seed, step)) in tasks.iter().zip(expected) {
        let spec = std::fs::read_to_string(task.join("task.toml")).unwrap();
        assert!(
            spec.contains(&format!("seeds = [\"{seed}.toml\"]")),
            "{spec}"
        );
        let source = std::fs::read_to_string(task.join(format!("{seed}.cl"))).unwrap();
        assert!(source.contains(step), "{source}");
        correct_at_each(
            task,
            &format!("{seed}.toml"),
            &[&["VW=8", "WG=4"], &["VW=4", "WG=1"]],
        );
    }
}

/// A problem that scans gets the naive sequence with every scan computed line by line (one
/// work-item walks a line once, where the naive kernel sums each element's prefix again):
/// the output itself (a long cumulative product), an exclusive scan through a slice and a
/// concatenation, a reversed scan of a normalised input, and a scan along the middle dimension
/// read by a residual add; correct at every work-group size.
#[test]
fn a_scan_gets_a_generated_line_scan() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    for stem in [
        "Cumprod_Long",
        "Masked_Exclusive_Scan",
        "Norm_Pow_Cumsum",
        "Scan_Middle_Dim",
    ] {
        let task = import_from(tmp.path(), "tests/data/standin_ops", stem, &[]);
        let spec = std::fs::read_to_string(task.join("task.toml")).unwrap();
        assert!(spec.contains("\"scan_lines.toml\""), "{spec}");
        let source = std::fs::read_to_string(task.join("scan_lines.cl")).unwrap();
        assert!(source.contains("kf_line"), "{source}");
        correct_at_each(&task, "scan_lines.toml", &[&["WG=16"], &["WG=4"]]);
    }
}

/// A failed import into a new folder leaves no folder (before, the naive kernel, the reference
/// and the copy of the problem stayed there without a task file): literal input sizes that
/// the size rule cannot scale make `--fit` fail after the folder was made.
#[test]
fn a_failed_import_leaves_no_folder_behind() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let out = tmp.path().join("Literal_Sizes_Too_Large");
    let problem = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/standin_ops/Literal_Sizes_Too_Large.py");
    let run = common::kf(&[
        "task",
        "import-kernelbench",
        problem.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--fit",
    ]);
    assert!(!run.status.success(), "{}", common::text(&run));
    assert!(
        common::text(&run).contains("no common scale fits"),
        "{}",
        common::text(&run)
    );
    assert!(!out.exists(), "the failed import left {}", out.display());
}

/// Imports that failed before, each naive kernel now correct against the NumPy stand-in's
/// reference (PyTorch's names the parameters alike: `torch_adapter.py`):
/// - model parameters named like the problem's numbers (a size `scale`, a scalar `shift`;
///   level 2's problems 48 and 50) become buffers `scale_param` and `shift_param`, the 0-d one
///   of one element (the task file declared the names twice; a 0-d parameter was refused);
/// - the element-wise `torch.min`/`torch.maximum` of two tensors (one a 0-d parameter), with a
///   scalar named `constant`, an OpenCL C address space, renamed in the generated kernel's
///   parameters, which bind by position (level 2's problem 68's naive kernel did not compile).
#[test]
fn parameters_named_like_numbers_0_d_parameters_and_min_max_import() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let folder = "tests/data/standin_ops";
    let named = import_from(tmp.path(), folder, "Parameter_Named_Like_Size", &[]);
    let spec = kf_eval::task::file::TaskFile::load(&named.join("task.toml"))
        .unwrap_or_else(|e| panic!("{e}"))
        .spec;
    let shapes: Vec<(String, Vec<String>)> = spec
        .buffers
        .iter()
        .filter(|b| b.name.ends_with("_param"))
        .map(|b| (b.name.clone(), b.shape.iter().map(|d| d.text()).collect()))
        .collect();
    assert_eq!(
        shapes,
        [
            ("scale_param".to_owned(), vec!["features".to_owned()]),
            ("shift_param".to_owned(), vec!["1".to_owned()]),
        ]
    );
    let min_max = import_from(tmp.path(), folder, "Min_Max_Reserved_Name", &[]);
    let source = std::fs::read_to_string(min_max.join("naive.cl")).unwrap();
    assert!(
        source.contains("fmin(") && source.contains("fmax(") && source.contains("kf_arg_constant"),
        "{source}"
    );
    for task in [named, min_max] {
        let (status, said) = eval(&task, &task.join("naive.toml"));
        assert_eq!(status, "correct", "{}: {said}", task.display());
    }
}

/// A log-softmax over rows of 16384 (the held-out size of issue 60): the naive kernel keeps
/// one work-item per output element, but the rows' maximum and sum of exponentials are
/// computed once per row by a kernel of their own into scratch (one kernel per element
/// recomputed them for every element, 16384 times the work), and the sequence is correct.
#[test]
fn a_softmax_naive_kernel_computes_its_row_statistics_once() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let task = import_from(
        tmp.path(),
        "tests/data/kernelbench_unseen/vendor",
        "24_LogSoftmax",
        &["--size", "batch_size=4,dim=16384"],
    );
    let manifest = kf_manifest::Manifest::load(&task.join("naive.toml"))
        .unwrap_or_else(|e| panic!("{e}"))
        .0;
    let entries: Vec<&str> = manifest.sequence.iter().map(|k| k.entry.as_str()).collect();
    assert_eq!(entries.len(), 2, "{}", manifest.text);
    assert_eq!(entries[1], "naive");
    assert_eq!(manifest.scratch.len(), 2, "{}", manifest.text);
    let (status, said) = eval(&task, &task.join("naive.toml"));
    assert_eq!(status, "correct", "{said}");
}
