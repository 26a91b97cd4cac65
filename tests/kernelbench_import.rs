//! `kf task import-kernelbench` on KernelBench problems the importer has never seen (the files
//! under tests/data/kernelbench_unseen/vendor are not among the shipped tasks), with real Python.
//!
//! Needs Python with NumPy (`scripts/setup.sh`); skips without it unless KF_REQUIRE_PYTHON=1.
//! The PyTorch path runs where torch imports (`scripts/setup.sh --torch`), and is required
//! with KF_REQUIRE_TORCH=1.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use kernelfoundry::eval::taskfile::{BufferRole, Dtype, TaskFile};
use kernelfoundry::kernelbench::{
    default_python, import_kernelbench, numpy_available, torch_available, ImportOptions,
    KernelBenchError, ReferenceKind, ReferencePreference,
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
        "PYTHON",
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
    let options = ImportOptions {
        problem,
        out_dir: dir.path().join("task"),
        sizes: sizes(size),
        max_size: None,
        python: Some(python.to_path_buf()),
        reference,
        tolerance: Default::default(),
    };
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

    // Max pooling: the output length is a pooling formula over four module constants, and the
    // window parameters (small constants) are sizes passed to the kernel.
    let (_d, report) = import(
        &python,
        "41_Max_Pooling_1D",
        true,
        &[("batch_size", 2), ("features", 3), ("sequence_length", 100)],
        ReferencePreference::Numpy,
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
    assert!(task.spec.baseline.is_none());
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
    let (_d, report) = import(
        &python,
        "12_Matmul_with_diagonal_matrices_",
        true,
        &[("M", 48), ("N", 40)],
        ReferencePreference::Numpy,
    );
    let task = TaskFile::load(&report.unwrap().task_file).unwrap();
    assert_eq!(task.spec.args, ["A", "B", "out", "M", "N"]);
    assert_eq!(shape_of(&task, "A"), [40]);
    assert_eq!(shape_of(&task, "out"), [40, 48]);

    // Cross-entropy: a tuple constant (`input_shape = (num_classes,)`), integer class labels
    // bounded by a size, and a 0-d loss returned as shape [1].
    let (_d, report) = import(
        &python,
        "95_CrossEntropyLoss",
        true,
        &[("batch_size", 64), ("num_classes", 10)],
        ReferencePreference::Numpy,
    );
    let task = TaskFile::load(&report.unwrap().task_file).unwrap();
    let targets = task
        .spec
        .buffers
        .iter()
        .find(|b| b.name == "targets")
        .unwrap();
    assert_eq!(targets.dtype, Dtype::I32);
    assert_eq!(
        targets.init.as_ref().map(|i| i.to_vec()),
        Some(vec!["int(0, 9)".to_owned()])
    );
    assert_eq!(shape_of(&task, "predictions"), [64, 10]);
    assert_eq!(shape_of(&task, "out"), [1]);

    // Log-softmax: the evaluator draws inputs from several distributions, not only
    // get_inputs()'s torch.rand.
    let (_d, report) = import(
        &python,
        "24_LogSoftmax",
        true,
        &[("batch_size", 8), ("dim", 300)],
        ReferencePreference::Numpy,
    );
    let task = TaskFile::load(&report.unwrap().task_file).unwrap();
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
        Err(KernelBenchError::ReferenceTemplateWritten { template, .. }) => {
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
    let options = ImportOptions {
        problem: dir.path().join("24_LogSoftmax.py"),
        out_dir: dir.path().join("task"),
        sizes: IndexMap::new(),
        max_size: None,
        python: Some(python.clone()),
        reference: ReferencePreference::Numpy,
        tolerance: Default::default(),
    };
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
    let options = ImportOptions {
        problem: broken,
        out_dir: dir.path().join("out"),
        sizes: IndexMap::new(),
        max_size: None,
        python: Some(python),
        reference: ReferencePreference::Numpy,
        tolerance: Default::default(),
    };
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
            "TORCH",
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
    ] {
        let (_d, torch) = import(&python, stem, false, &size, ReferencePreference::Auto);
        let torch = torch.unwrap();
        assert_eq!(torch.reference, ReferenceKind::Torch);
        let (_e, numpy) = import(&python, stem, true, &size, ReferencePreference::Numpy);
        let numpy = numpy.unwrap();
        // Both ways of running the reference give the same task.
        assert_eq!(torch.spec.args, numpy.spec.args, "{stem}");
        assert_eq!(torch.spec.buffers, numpy.spec.buffers, "{stem}");
    }
    // The benchmark's PyTorch CPU timing of a shipped task's unchanged problem file.
    let shipped =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/kernelbench/87_conv_pointwise_2D");
    let task = TaskFile::load(&shipped.join("task.toml")).unwrap();
    let small = sizes(&[("batch_size", 2), ("width", 16), ("height", 8)]);
    let seconds = kernelfoundry::kernelbench::torch_cpu_seconds(&python, &task, &small).unwrap();
    assert!(seconds > 0.0 && seconds.is_finite(), "{seconds}");
}
