//! `kf task import-kernelbench` on KernelBench problems the importer has never seen (the files
//! under tests/data/kernelbench_unseen/vendor are not among the shipped tasks), with real Python.
//!
//! Needs Python with NumPy (`scripts/setup.sh`); skips without it unless KF_REQUIRE_PYTHON=1.
//! The PyTorch path runs where torch imports (`scripts/setup.sh --torch`), and is required
//! with KF_REQUIRE_TORCH=1.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use kernelfoundry::eval::task::file::{BufferRole, Dtype, FamilySpec, TaskFile};
use kernelfoundry::kernelbench::{
    default_python, import_kernelbench, numpy_available, torch_available, ImportOptions,
    KernelBenchError, ReferenceKind, ReferencePreference, SizeBudget,
};

fn unseen(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/kernelbench_unseen")
        .join(name)
}

/// An unseen problem file: the unchanged third-party file, kept in `vendor/`.
fn unseen_problem(stem: &str) -> PathBuf {
    unseen(&format!("vendor/{stem}.py"))
}

#[track_caller]
fn python_or_skip() -> Option<PathBuf> {
    let python = default_python();
    if numpy_available(&python) {
        return Some(python);
    }
    // Kind `PYTHON`: KF_REQUIRE_PYTHON=1 makes this a failure.
    kernelfoundry::core::testing::skip::skip(
        kf_core::testing::skip::SkipKind::Python,
        format_args!(
            "no Python with NumPy at {} (run scripts/setup.sh)",
            python.display()
        ),
    );
    None
}

fn sizes(pairs: &[(&str, i64)]) -> IndexMap<String, i64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// The import of `problem` into `out_dir` at `sizes` (the problem's own where not given),
/// run by `python` with the `reference` asked for; no size limit, rule or tolerance of its own.
fn options(
    python: &Path,
    problem: PathBuf,
    out_dir: PathBuf,
    sizes: IndexMap<String, i64>,
    reference: ReferencePreference,
) -> ImportOptions {
    ImportOptions {
        problem,
        out_dir,
        sizes,
        max_size: None,
        fit: None,
        python: Some(python.to_path_buf()),
        reference,
        tolerance: Default::default(),
    }
}

/// Copies a problem (and its NumPy reference, when `with_ref`) into a fresh folder, as a user
/// would have them, and imports it into `<dir>/task`.
fn import(
    python: &Path,
    stem: &str,
    with_ref: bool,
    size: &[(&str, i64)],
    reference: ReferencePreference,
) -> (
    tempfile::TempDir,
    Result<kernelfoundry::kernelbench::ImportReport, KernelBenchError>,
) {
    let dir = tempfile::tempdir().unwrap();
    let problem = dir.path().join(format!("{stem}.py"));
    std::fs::copy(unseen_problem(stem), &problem).unwrap();
    if with_ref {
        std::fs::copy(
            unseen(&format!("{stem}_ref.py")),
            dir.path().join(format!("{stem}_ref.py")),
        )
        .unwrap();
    }
    let options = options(
        python,
        problem,
        dir.path().join("task"),
        sizes(size),
        reference,
    );
    let report = import_kernelbench(&options);
    (dir, report)
}

fn shape_of(task: &TaskFile, name: &str) -> Vec<usize> {
    let i = task
        .spec
        .buffers
        .iter()
        .position(|b| b.name == name)
        .unwrap_or_else(|| panic!("no buffer {name}"));
    task.buffer_shapes(&task.spec.sizes).unwrap()[i].clone()
}

#[test]
fn unseen_problems_import_with_numpy_references() {
    let Some(python) = python_or_skip() else {
        return;
    };
    // Each problem copied with its NumPy reference beside it.
    let import_numpy = |stem: &str, size: &[(&str, i64)]| {
        import(&python, stem, true, size, ReferencePreference::Numpy)
    };

    // Max pooling: the output length is a pooling formula over four module constants, and the
    // window parameters (small constants) are sizes passed to the kernel.
    let (_d, report) = import_numpy(
        "41_Max_Pooling_1D",
        &[("batch_size", 2), ("features", 3), ("sequence_length", 100)],
    );
    let report = report.unwrap();
    assert_eq!(report.reference, ReferenceKind::Numpy);
    let task = TaskFile::load(&report.task_file).unwrap();
    assert_eq!(
        task.spec.args,
        [
            "x",
            "out",
            "batch_size",
            "features",
            "sequence_length",
            "kernel_size",
            "stride",
            "padding",
            "dilation"
        ]
    );
    // (100 + 2*4 - 3*(8-1) - 1) / 1 + 1 = 87
    assert_eq!(shape_of(&task, "out"), [2, 3, 87]);
    assert_eq!(shape_of(&task, "x"), [2, 3, 100]);
    // The NumPy stand-in for torch writes the naive kernel beside a user's reference too
    // (padded, dilated pooling; tests/kernelbench_level2.rs checks the kernel is correct).
    assert!(task.spec.baseline.is_some() && report.baseline_note.is_none());
    assert!(report.varied_sizes.contains(&"sequence_length".to_owned()));
    assert!(!report.varied_sizes.contains(&"kernel_size".to_owned()));
    // The problem file travels unchanged with the task.
    assert_eq!(
        std::fs::read(
            report
                .task_file
                .with_file_name("vendor/41_Max_Pooling_1D.py")
        )
        .unwrap(),
        std::fs::read(unseen_problem("41_Max_Pooling_1D")).unwrap()
    );

    // Diagonal matmul: inputs of different ranks, named after forward()'s arguments.
    let (_d, report) = import_numpy("12_Matmul_with_diagonal_matrices_", &[("M", 48), ("N", 40)]);
    let task = TaskFile::load(&report.unwrap().task_file).unwrap();
    assert_eq!(task.spec.args, ["A", "B", "out", "M", "N"]);
    assert_eq!(shape_of(&task, "A"), [40]);
    assert_eq!(shape_of(&task, "out"), [40, 48]);

    // Cross-entropy: a tuple constant (`input_shape = (num_classes,)`), integer class labels
    // bounded by a size, and a 0-d loss returned as shape [1].
    let (_d, report) = import_numpy(
        "95_CrossEntropyLoss",
        &[("batch_size", 64), ("num_classes", 10)],
    );
    let report = report.unwrap();
    let task = TaskFile::load(&report.task_file).unwrap();
    // The labels are an `int` buffer of the generated kernel, so the import writes one.
    assert!(task.spec.baseline.is_some() && report.baseline_note.is_none());
    let targets = task
        .spec
        .buffers
        .iter()
        .find(|b| b.name == "targets")
        .unwrap();
    assert_eq!(targets.dtype, Dtype::I32);
    assert_eq!(
        targets.init.as_ref().map(|i| i.to_vec()),
        // The bound is the size, so the input sets that halve num_classes keep the labels in range.
        Some(vec!["int(0, num_classes - 1)".to_owned()])
    );
    assert_eq!(shape_of(&task, "predictions"), [64, 10]);
    assert_eq!(shape_of(&task, "out"), [1]);

    // An asymmetric convolution kernel, `kernel_size = (5, 9)`: its two sizes are constants
    // the probes keep, but the evaluator's other input sets halve them, so the output's shape
    // must follow them (the trace's), not only the sizes the probes varied.
    let (_d, report) = import_numpy(
        "62_conv_standard_2D__square_input__asymmetric_kernel",
        &[
            ("batch_size", 2),
            ("in_channels", 3),
            ("out_channels", 4),
            ("height", 12),
            ("width", 16),
        ],
    );
    let report = report.unwrap();
    let task = TaskFile::load(&report.task_file).unwrap();
    assert!(!report.varied_sizes.contains(&"kernel_size_0".to_owned()));
    assert_eq!(shape_of(&task, "out"), [2, 4, 8, 8]);
    let out = task
        .spec
        .buffers
        .iter()
        .position(|b| b.name == "out")
        .unwrap();
    let mut halved = task.spec.sizes.clone();
    halved["kernel_size_0"] = 2;
    halved["kernel_size_1"] = 4;
    assert_eq!(task.buffer_shapes(&halved).unwrap()[out], [2, 4, 11, 13]);

    // A group norm over the product's columns: forward() needs out_features a multiple of
    // num_groups (the reference's reshape fails otherwise, as torch refuses the module), so
    // the probes, which vary both, keep it one.
    let (_d, report) = import_numpy(
        "37_Matmul_Swish_Sum_GroupNorm",
        &[
            ("batch_size", 8),
            ("in_features", 24),
            ("out_features", 40),
            ("num_groups", 20),
        ],
    );
    let report = report.unwrap();
    assert!(report.varied_sizes.contains(&"num_groups".to_owned()));
    let task = TaskFile::load(&report.task_file).unwrap();
    assert_eq!(shape_of(&task, "out"), [8, 40]);

    // The same need where the stand-in records the channels as an expression of one size
    // (a transposed convolution's output channels): the probes raise that size until the
    // expression is a multiple (before, a probe asked for 26 channels in 8 groups).
    let (_d, report) = import_numpy(
        "19_ConvTranspose2d_GELU_GroupNorm",
        &[
            ("batch_size", 2),
            ("in_channels", 6),
            ("out_channels", 16),
            ("height", 9),
            ("width", 10),
        ],
    );
    let report = report.unwrap();
    assert!(report.varied_sizes.contains(&"out_channels".to_owned()));
    let task = TaskFile::load(&report.task_file).unwrap();
    assert_eq!(shape_of(&task, "out"), [2, 16, 11, 12]);

    // Log-softmax: the evaluator draws inputs from several distributions, not only
    // get_inputs()'s torch.rand.
    let (_d, report) = import_numpy("24_LogSoftmax", &[("batch_size", 8), ("dim", 300)]);
    let report = report.unwrap();
    let task = TaskFile::load(&report.task_file).unwrap();
    // A reference of the user's, and still the naive kernel from the stand-in's trace.
    assert!(task.spec.baseline.is_some() && report.baseline_note.is_none());
    let x = &task.spec.buffers[0];
    assert_eq!(x.role, BufferRole::Input);
    assert!(x.init.as_ref().unwrap().to_vec().len() >= 2, "{:?}", x.init);
    assert_eq!(shape_of(&task, "out"), [8, 300]);
}

#[test]
fn missing_numpy_reference_writes_a_template_and_no_task_file() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (dir, report) = import(
        &python,
        "24_LogSoftmax",
        false,
        &[],
        ReferencePreference::Numpy,
    );
    match report {
        Err(e @ KernelBenchError::ReferenceTemplateWritten { .. }) => {
            // It says truly why PyTorch is not the reference.
            let said = e.to_string();
            if torch_available(&python) {
                assert!(said.contains("the NumPy reference was asked for"), "{said}");
            } else {
                assert!(said.contains("PyTorch is not installed in"), "{said}");
            }
            let KernelBenchError::ReferenceTemplateWritten { template, .. } = e else {
                unreachable!()
            };
            let text = std::fs::read_to_string(&template).unwrap();
            assert!(
                text.contains("def reference(inputs, sizes, scalars)"),
                "{text}"
            );
            assert!(text.contains("inputs[\"x\"]"), "{text}");
        }
        other => panic!("expected a template, got {other:?}"),
    }
    assert!(!dir.path().join("task/task.toml").exists());

    // The template raises, so importing again names the reference's failure.
    let options = options(
        &python,
        dir.path().join("24_LogSoftmax.py"),
        dir.path().join("task"),
        IndexMap::new(),
        ReferencePreference::Numpy,
    );
    let err = import_kernelbench(&options).unwrap_err().to_string();
    assert!(err.contains("NotImplementedError"), "{err}");
    assert!(!dir.path().join("task/task.toml").exists());
}

#[test]
fn bad_input_is_a_clear_error() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let (_d, report) = import(
        &python,
        "24_LogSoftmax",
        true,
        &[("rows", 8)],
        ReferencePreference::Numpy,
    );
    let err = report.unwrap_err().to_string();
    assert!(
        err.contains("--size rows") && err.contains("batch_size, dim"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.py");
    std::fs::write(&broken, "class Model(:\n").unwrap();
    let options = options(
        &python,
        broken,
        dir.path().join("out"),
        IndexMap::new(),
        ReferencePreference::Numpy,
    );
    let err = import_kernelbench(&options).unwrap_err().to_string();
    assert!(err.contains("syntax error at line 1"), "{err}");
    assert!(!dir.path().join("out").exists());
}

#[test]
fn torch_reference_runs_the_unchanged_problem() {
    let python = default_python();
    if !torch_available(&python) {
        // Kind `TORCH`: KF_REQUIRE_TORCH=1 makes this a failure.
        kernelfoundry::core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Torch,
            format_args!(
                "PyTorch does not import in {} (scripts/setup.sh --torch)",
                python.display()
            ),
        );
        return;
    }
    for (stem, size) in [
        (
            "41_Max_Pooling_1D",
            vec![("batch_size", 2), ("features", 3), ("sequence_length", 100)],
        ),
        (
            "95_CrossEntropyLoss",
            vec![("batch_size", 64), ("num_classes", 10)],
        ),
        ("24_LogSoftmax", vec![("batch_size", 8), ("dim", 300)]),
    ] {
        let (_d, torch) = import(&python, stem, false, &size, ReferencePreference::Auto);
        let torch = torch.unwrap();
        assert_eq!(torch.reference, ReferenceKind::Torch);
        let (_e, numpy) = import(&python, stem, true, &size, ReferencePreference::Numpy);
        let numpy = numpy.unwrap();
        // Both ways of running the reference give the same task.
        assert_eq!(torch.spec.args, numpy.spec.args, "{stem}");
        assert_eq!(torch.spec.buffers, numpy.spec.buffers, "{stem}");
        // With PyTorch the naive kernel is generated as without (issue 60).
        assert_eq!(
            torch.spec.baseline.is_some(),
            numpy.spec.baseline.is_some(),
            "{stem}: {:?}",
            torch.baseline_note
        );
        if stem == "24_LogSoftmax" {
            assert!(torch.spec.baseline.is_some(), "{:?}", torch.baseline_note);
        }
    }
    // The benchmark's PyTorch CPU timing of a shipped task's unchanged problem file.
    let shipped =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/kernelbench/87_conv_pointwise_2D");
    let task = TaskFile::load(&shipped.join("task.toml")).unwrap();
    let small = sizes(&[("batch_size", 2), ("width", 16), ("height", 8)]);
    let seconds = kernelfoundry::kernelbench::torch_cpu_seconds(&python, &task, &small).unwrap();
    assert!(seconds > 0.0 && seconds.is_finite(), "{seconds}");
}

/// Small sizes for the norms over (batch, features, dim1, dim2).
const NORM_SIZES: [(&str, i64); 4] = [("batch_size", 2), ("features", 3), ("dim1", 4), ("dim2", 5)];

/// A shipped task's folder.
fn shipped(stem: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tasks/kernelbench")
        .join(stem)
}

/// The unchanged problem file a shipped task carries (`vendor/<stem>.py`).
fn shipped_problem(stem: &str) -> String {
    std::fs::read_to_string(shipped(stem).join(format!("vendor/{stem}.py"))).unwrap()
}

/// Imports the problem `text` saved as `<stem>.py` in a fresh folder, with the NumPy reference
/// `reference` beside it, or, without one, run on the NumPy stand-in for torch.
fn import_text(
    python: &Path,
    stem: &str,
    text: &str,
    reference: Option<&Path>,
    size: &[(&str, i64)],
    preference: ReferencePreference,
) -> (tempfile::TempDir, TaskFile) {
    let dir = tempfile::tempdir().unwrap();
    let problem = dir.path().join(format!("{stem}.py"));
    std::fs::write(&problem, text).unwrap();
    if let Some(reference) = reference {
        std::fs::copy(reference, dir.path().join(format!("{stem}_ref.py"))).unwrap();
    }
    let options = options(
        python,
        problem,
        dir.path().join("task"),
        sizes(size),
        preference,
    );
    let report = import_kernelbench(&options).unwrap_or_else(|e| panic!("{stem}: {e}"));
    let task = TaskFile::load(&report.task_file).unwrap_or_else(|e| panic!("{stem}: {e}"));
    (dir, task)
}

/// The importer recognises the modules a model holds (`self.ln = nn.LayerNorm(...)`, an
/// `nn.Conv1d`, a 1×1 `nn.Conv2d`) and a norm written as an expression (RMSNorm over the
/// channels), from __init__'s constructor arguments (with get_init_inputs()) and forward():
/// the imported task files declare the `[family]` tables the shipped ones declare, the model's
/// parameters named as the kernel's arguments (`ln_weight`, `conv1d_weight`), with the
/// shipped NumPy references and with the NumPy stand-in for torch.
#[test]
fn module_and_norm_problems_import_with_the_shipped_families() {
    let Some(python) = python_or_skip() else {
        return;
    };
    for (stem, size, stand_in) in [
        ("40_LayerNorm", NORM_SIZES.to_vec(), true),
        (
            "76_conv_standard_1D_dilated_strided__",
            vec![
                ("batch_size", 2),
                ("in_channels", 3),
                ("out_channels", 4),
                ("length", 64),
            ],
            true,
        ),
        (
            "87_conv_pointwise_2D",
            vec![
                ("batch_size", 2),
                ("in_channels", 3),
                ("out_channels", 4),
                ("width", 6),
                ("height", 5),
            ],
            false,
        ),
        ("36_RMSNorm_", NORM_SIZES.to_vec(), false),
    ] {
        let folder = shipped(stem);
        let declared = TaskFile::load(&folder.join("task.toml"))
            .unwrap()
            .spec
            .family;
        assert!(declared.is_some(), "{stem} declares no family");
        let text = shipped_problem(stem);
        let reference = folder.join(format!("{stem}_ref.py"));
        let (_d, task) = import_text(
            &python,
            stem,
            &text,
            Some(&reference),
            &size,
            ReferencePreference::Numpy,
        );
        assert_eq!(task.spec.family, declared, "{stem}");
        if torch_available(&python) {
            // The unchanged problem run with PyTorch: its parameters' names.
            let (_d, task) =
                import_text(&python, stem, &text, None, &size, ReferencePreference::Auto);
            assert_eq!(task.spec.family, declared, "{stem} with PyTorch");
        }
        if stand_in {
            // The stand-in names the model's parameters as PyTorch does.
            let (_d, task) = import_text(
                &python,
                stem,
                &text,
                None,
                &size,
                ReferencePreference::Numpy,
            );
            assert_eq!(task.spec.family, declared, "{stem} on the stand-in");
        }
    }
}

/// Modules and expressions outside a family's operator are not declared one: a grouped
/// Conv1d, a 3×3 Conv2d and a padded 1×1 Conv2d have no `[family]`; a Conv1d with a bias names
/// it, a LayerNorm without a bias names only its weight, and a mean of absolute values is not
/// an L1 norm.
#[test]
fn modules_outside_a_family_are_not_declared_one() {
    let Some(python) = python_or_skip() else {
        return;
    };
    // The family a problem's text declares, imported on the NumPy stand-in for torch.
    let family_of = |stem: &str, text: &str, size: &[(&str, i64)]| {
        import_text(&python, stem, text, None, size, ReferencePreference::Numpy)
            .1
            .spec
            .family
    };
    let conv1d = shipped_problem("76_conv_standard_1D_dilated_strided__");
    let conv1d_sizes = [
        ("batch_size", 2),
        ("in_channels", 4),
        ("out_channels", 6),
        ("length", 64),
    ];
    let call = "stride=stride, dilation=dilation, bias=bias)";
    assert!(conv1d.contains(call));
    let grouped = conv1d.replace(
        call,
        "stride=stride, dilation=dilation, groups=2, bias=bias)",
    );
    let family = family_of("grouped_conv1d", &grouped, &conv1d_sizes);
    assert_eq!(family, None);
    // A bias given by get_init_inputs(): the family names the model's `conv1d_bias`.
    let init = "return [in_channels, out_channels, kernel_size, stride, dilation]";
    assert!(conv1d.contains(init));
    let biased = conv1d.replace(
        init,
        "return [in_channels, out_channels, kernel_size, stride, dilation, True]",
    );
    let family = family_of("biased_conv1d", &biased, &conv1d_sizes);
    match &family {
        Some(FamilySpec::Conv1d(c)) => assert_eq!(c.bias.as_deref(), Some("conv1d_bias")),
        other => panic!("{other:?}"),
    }

    let pointwise = shipped_problem("87_conv_pointwise_2D");
    let pointwise_sizes = [
        ("batch_size", 2),
        ("in_channels", 3),
        ("out_channels", 4),
        ("width", 6),
        ("height", 5),
    ];
    let call = "kernel_size=1, stride=1, padding=0,";
    assert!(pointwise.contains(call));
    for (stem, replacement) in [
        ("conv2d_3x3", "kernel_size=3, stride=1, padding=1,"),
        ("conv2d_1x1_padded", "kernel_size=1, stride=1, padding=1,"),
    ] {
        let text = pointwise.replace(call, replacement);
        let family = family_of(stem, &text, &pointwise_sizes);
        assert_eq!(family, None, "{stem}");
    }

    let layer_norm = shipped_problem("40_LayerNorm");
    let call = "nn.LayerNorm(normalized_shape=normalized_shape)";
    assert!(layer_norm.contains(call));
    let unbiased = layer_norm.replace(
        call,
        "nn.LayerNorm(normalized_shape=normalized_shape, eps=1e-6, bias=False)",
    );
    let family = family_of("unbiased_layer_norm", &unbiased, &NORM_SIZES);
    match &family {
        Some(FamilySpec::RowNorm(r)) => {
            assert_eq!(
                (r.weight.as_deref(), r.bias.as_deref(), r.eps),
                (Some("ln_weight"), None, Some(1e-6))
            );
        }
        other => panic!("{other:?}"),
    }

    let rms = shipped_problem("36_RMSNorm_");
    let expr = "torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)";
    assert!(rms.contains(expr));
    let mean_abs = rms.replace(expr, "torch.mean(torch.abs(x), dim=1, keepdim=True)");
    let family = family_of("mean_abs_norm", &mean_abs, &NORM_SIZES);
    assert_eq!(family, None);
}

/// The size rule (`--fit`, issue 60): all of a problem's sizes scaled by one common factor
/// until its inputs, weights and outputs take at most 32 MiB and its products at most 2 GFLOP.
/// A GEMM of 1024 × 8192 → 8192 (256 MiB of weights) and a 3 × 3 convolution over 128 × 64 ×
/// 128 × 128 come out inside both limits; every scaled size keeps a divisor of 32, the kernel
/// size stays 3, and the rule cannot be combined with `--max-size`. A 3-D max pool whose batch
/// is 16 fits only by the rule's second pass (sizes above 16 may fall to 8); a group norm's
/// channels stay a multiple of its (scaled) groups.
#[test]
fn the_size_rule_fits_every_problem_alike() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let fit_from = |folder: &str, stem: &str, max_size: Option<i64>| {
        let dir = tempfile::tempdir().unwrap();
        let problem = dir.path().join(format!("{stem}.py"));
        let vendored = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(folder)
            .join(format!("{stem}.py"));
        std::fs::copy(vendored, &problem).unwrap();
        let options = ImportOptions {
            max_size,
            fit: Some(SizeBudget::SUITE),
            ..options(
                &python,
                problem,
                dir.path().join("task"),
                IndexMap::new(),
                ReferencePreference::Numpy,
            )
        };
        (dir, import_kernelbench(&options))
    };
    let fit =
        |stem: &str, max_size| fit_from("tests/data/kernelbench_level2/vendor", stem, max_size);
    let (_d, gemm) = fit("70_Gemm_Sigmoid_Scaling_ResidualAdd", None);
    let gemm = gemm.unwrap();
    let s = &gemm.spec.sizes;
    let (b, i, h) = (s["batch_size"], s["input_size"], s["hidden_size"]);
    let bytes = 4 * (b * i + h * i + h + b * h);
    assert!(bytes <= 32 << 20, "{s:?}: {bytes} bytes");
    assert!(2 * b * i * h <= 2_000_000_000, "{s:?}");
    // One factor for all: the equal sizes stay equal, and the factor is not needlessly small.
    assert_eq!(i, h, "{s:?}");
    assert!(bytes > 8 << 20, "{s:?}: only {bytes} bytes");
    assert!([b, i, h].iter().all(|v| v % 32 == 0), "{s:?}");
    let (fitted_bytes, fitted_flops) = gemm.fitted.unwrap();
    assert_eq!(fitted_bytes, bytes as u64);
    assert_eq!(fitted_flops, (2 * b * i * h) as f64);
    assert!(gemm.describe().contains("sizes fitted by the size rule"));
    let task = TaskFile::load(&gemm.task_file).unwrap();
    assert_eq!(&task.spec.sizes, s);

    let (_d, conv) = fit("1_Conv2D_ReLU_BiasAdd", None);
    let conv = conv.unwrap();
    let s = &conv.spec.sizes;
    assert_eq!(s["kernel_size"], 3, "{s:?}");
    let (n, ci, co, hh, w) = (
        s["batch_size"],
        s["in_channels"],
        s["out_channels"],
        s["height"],
        s["width"],
    );
    let (oh, ow) = (hh - 2, w - 2);
    let bytes = 4 * (n * ci * hh * w + co * ci * 9 + co + co + n * co * oh * ow);
    assert!(bytes <= 32 << 20, "{s:?}: {bytes} bytes");
    assert!(2 * n * co * oh * ow * ci * 9 <= 2_000_000_000, "{s:?}");

    // A batch of 16 (structural, so it stays) and 32 channels of 128³: above 16 the sizes
    // take 42 MiB, so the rule's second pass lets them fall towards 8, and no window is left
    // longer than its input.
    let (_d, pool) = fit_from(
        "tests/data/kernelbench_unseen/vendor",
        "43_Max_Pooling_3D",
        None,
    );
    let pool = pool.unwrap();
    let s = &pool.spec.sizes;
    assert_eq!(
        (s["batch_size"], s["kernel_size"], s["dilation"]),
        (16, 3, 3)
    );
    let (c, d1, d2, d3) = (s["channels"], s["dim1"], s["dim2"], s["dim3"]);
    assert!([d1, d2, d3].iter().all(|&d| d == d1), "{s:?}");
    assert!((8..17).contains(&c), "{s:?}");
    // (d + 2·1 − 3·2 − 1) / 2 + 1 output positions along each dimension.
    let o = (d1 + 2 - 6 - 1) / 2 + 1;
    assert!(o >= 1, "{s:?}");
    let bytes = 4 * (16 * c * d1 * d2 * d3 + 16 * c * o * o * o);
    assert!(bytes <= 32 << 20, "{s:?}: {bytes} bytes");
    assert!(bytes > 8 << 20, "{s:?}: only {bytes} bytes");

    // A group norm of 4096 channels in 64 groups: both are sizes the rule scales, and the
    // channels stay a multiple of the groups (the stand-in's group norm asks for it).
    let (_d, grouped) = fit_from(
        "tests/data/kernelbench_unseen/vendor",
        "37_Matmul_Swish_Sum_GroupNorm",
        None,
    );
    let grouped = grouped.unwrap();
    let s = &grouped.spec.sizes;
    let (features, groups) = (s["out_features"], s["num_groups"]);
    assert!(groups > 16 && features % groups == 0, "{s:?}");
    let task = TaskFile::load(&grouped.task_file).unwrap();
    assert!(task.spec.baseline.is_some(), "{s:?}");

    let (_d, both) = fit("70_Gemm_Sigmoid_Scaling_ResidualAdd", Some(8));
    let err = both.unwrap_err().to_string();
    assert!(err.contains("--fit") && err.contains("--max-size"), "{err}");
}
