//! Task files end to end on the real OpenCL runtime (and real Python for Python references):
//! the shipped example's honest kernel is correct and its half-work kernel rejected, a
//! trusted-kernel reference works, f16 and i32 tasks evaluate correctly, a failing reference
//! stops the evaluation with a task error, and isolated workers rebuild a task file.
//!
//! Skips (printing `SKIPPED: …`) only when the runtime is missing and `KF_REQUIRE_OPENCL` is
//! not `1`; likewise Python/NumPy with `KF_REQUIRE_PYTHON`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use indexmap::IndexMap;
use kf_backend_opencl::testing::backend_or_skip;
use kf_backend_opencl::OpenClBackend;
use kf_core::{ParamValue, ParamValues, Status};
use kf_eval::task::file::{
    python::numpy_or_skip, ArrayOut, FileTask, ReferenceRegistry, TaskFile, TaskFileError,
};
use kf_eval::task::parse_sizes;
use kf_eval::{EvalConfig, EvalError, KernelEvaluator, TaskFileJob};
use kf_manifest::Manifest;

kf_eval::worker_test_entry!(common::open_worker_backend);

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/examples/scaled_swish")
}

fn taskfiles_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/taskfiles")
}

fn config() -> EvalConfig {
    common::seeded_config(7)
}

fn kernel(path: &Path) -> kf_core::KernelSource {
    Manifest::load(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .1
}

fn params(pairs: &[(&str, i64)]) -> ParamValues {
    let mut p = ParamValues::new();
    for (k, v) in pairs {
        p.set(*k, ParamValue::Int(*v));
    }
    p
}

/// A task at small sizes with its reference cache in a fresh folder (so Python really runs).
fn file_task(path: &Path, sizes: &str, refs: ReferenceRegistry) -> (FileTask, tempfile::TempDir) {
    let file = TaskFile::load(path).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let task =
        FileTask::with_references(Arc::new(file), &parse_sizes(sizes).unwrap(), Arc::new(refs))
            .unwrap()
            .with_cache_dir(Some(cache.path().to_path_buf()));
    (task, cache)
}

#[test]
fn the_example_accepts_its_honest_kernels_and_rejects_half_the_work() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let dir = example_dir();
    let (task, cache) = file_task(
        &dir.join("scaled_swish.toml"),
        "ROWS=128,COLS=96",
        ReferenceRegistry::new(),
    );
    let mut ev = KernelEvaluator::new(backend, config());
    let fast = kernel(&dir.join("scaled_swish_fast.toml"));
    for p in [
        params(&[("TILE", 1), ("WG", 16)]),
        params(&[("TILE", 4), ("WG", 64)]),
    ] {
        let e = ev.evaluate(&task, &fast, &p).unwrap();
        assert_eq!(e.status, Status::Correct, "{p}: {}", e.diagnostics);
        assert!(
            e.speedup.is_some(),
            "timed against the baseline: {}",
            e.diagnostics
        );
        assert_eq!(e.correctness.unwrap().input_sets, 3);
    }
    let naive = kernel(&dir.join("scaled_swish_naive.toml"));
    let e = ev.evaluate(&task, &naive, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    let cheat = kernel(&dir.join("scaled_swish_halfwork.toml"));
    let e = ev.evaluate(&task, &cheat, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::WrongShape, "{}", e.diagnostics);
    assert!(e.diagnostics.contains("unwritten"), "{}", e.diagnostics);
    // The Python reference's outputs were cached, one file per input set.
    let cached = std::fs::read_dir(cache.path()).unwrap().count();
    assert!(cached >= 3, "{cached} cached reference outputs");
}

#[test]
fn a_trusted_kernel_can_be_the_reference() {
    let Some(backend) = backend_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(example_dir()).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    let text = std::fs::read_to_string(tmp.path().join("scaled_swish.toml"))
        .unwrap()
        .replace(
            "python = \"scaled_swish_ref.py\"",
            "kernel = \"scaled_swish_naive.toml\"",
        );
    std::fs::write(tmp.path().join("scaled_swish.toml"), text).unwrap();
    let (task, _cache) = file_task(
        &tmp.path().join("scaled_swish.toml"),
        "ROWS=64,COLS=80",
        ReferenceRegistry::new(),
    );
    let mut ev = KernelEvaluator::new(backend, config());
    let e = ev
        .evaluate(
            &task,
            &kernel(&tmp.path().join("scaled_swish_fast.toml")),
            &params(&[("TILE", 2), ("WG", 32)]),
        )
        .unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    let e = ev
        .evaluate(
            &task,
            &kernel(&tmp.path().join("scaled_swish_halfwork.toml")),
            &ParamValues::new(),
        )
        .unwrap();
    assert_eq!(e.status, Status::WrongShape, "{}", e.diagnostics);
}

#[test]
fn an_i32_inout_task_is_compared_exactly() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let dir = taskfiles_dir();
    let (task, _cache) = file_task(&dir.join("affine_i32.toml"), "", ReferenceRegistry::new());
    correct_and_wrong(
        KernelEvaluator::new(backend, config()),
        &task,
        &dir.join("affine_i32_kernel.toml"),
        &dir.join("affine_i32_off_by_one.cl"),
    );
}

/// The kernel of manifest `good` computes `task`; the same kernel with the source `wrong`
/// gives wrong values.
fn correct_and_wrong(
    mut ev: KernelEvaluator<OpenClBackend>,
    task: &FileTask,
    good: &Path,
    wrong: &Path,
) {
    let good = kernel(good);
    let e = ev.evaluate(task, &good, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    let text = std::fs::read_to_string(wrong).unwrap();
    let bad = Manifest::from_kernel(&good).unwrap().kernel_source(text);
    let e = ev.evaluate(task, &bad, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::WrongValues, "{}", e.diagnostics);
}

fn scale_f16_reference() -> ReferenceRegistry {
    ReferenceRegistry::new().with("scale_f16", |inputs| {
        let x = inputs.array("x")?.to_f64();
        let s = inputs.scalars["s"];
        // Computed in f32 as the kernel does, rounded to f16 by ArrayOut::from_f64.
        let y = x.mapv(|v| f64::from((v as f32) * (s as f32) + 0.25));
        let mut out = IndexMap::new();
        out.insert(
            "y".to_owned(),
            ArrayOut::from_f64(kf_eval::task::file::Dtype::F16, &y),
        );
        Ok(out)
    })
}

#[test]
fn an_f16_task_with_a_rust_reference_evaluates() {
    let Some(backend) = backend_or_skip() else {
        return;
    };
    let dir = taskfiles_dir();
    let (task, _cache) = file_task(&dir.join("scale_f16.toml"), "", scale_f16_reference());
    correct_and_wrong(
        KernelEvaluator::new(backend, config()),
        &task,
        &dir.join("scale_f16_kernel.toml"),
        &dir.join("scale_f16_wrong.cl"),
    );
}

#[test]
fn a_failing_reference_stops_the_evaluation_with_a_task_error() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(taskfiles_dir()).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    let mut ev = KernelEvaluator::new(backend, config());
    let good = kernel(&tmp.path().join("affine_i32_kernel.toml"));
    let cases = [
        ("raise ValueError('boom')", "boom"),
        ("return {'a': inputs['a'][:10]}", "shape"),
        ("return {'a': inputs['a'].astype(np.float64)}", "float64"),
        ("return {}", "returned no output `a`"),
        (
            "return {'a': np.full(inputs['a'].shape, np.nan, dtype=np.float32)}",
            "float32",
        ),
        ("return {'a' inputs}", "SyntaxError"),
        ("import time; time.sleep(120)", "did not finish"),
    ];
    for (body, expect) in cases {
        std::fs::write(
            tmp.path().join("affine_i32_ref.py"),
            format!("import numpy as np\n\ndef reference(inputs, sizes, scalars):\n    {body}\n"),
        )
        .unwrap();
        let text = std::fs::read_to_string(taskfiles_dir().join("affine_i32.toml"))
            .unwrap()
            .replace("[reference]\n", "[reference]\ntimeout_s = 8\n");
        std::fs::write(tmp.path().join("affine_i32.toml"), text).unwrap();
        let (task, _cache) = file_task(
            &tmp.path().join("affine_i32.toml"),
            "N=64",
            ReferenceRegistry::new(),
        );
        match ev.evaluate(&task, &good, &ParamValues::new()) {
            Err(EvalError::TaskFile(e @ TaskFileError::Reference { .. })) => {
                let m = e.to_string();
                assert!(
                    m.contains(expect) && m.contains("affine_i32"),
                    "{body}: {m}"
                );
            }
            other => panic!("{body}: expected a reference error, got {other:?}"),
        }
    }
}

#[test]
fn an_f32_nan_from_the_reference_is_a_task_error() {
    if !numpy_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(example_dir()).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    std::fs::write(
        tmp.path().join("scaled_swish_ref.py"),
        "import numpy as np\n\ndef reference(inputs, sizes, scalars):\n    y = inputs['x'].copy()\n    y[3, 4] = np.nan\n    return {'y': y}\n",
    )
    .unwrap();
    let (task, _cache) = file_task(
        &tmp.path().join("scaled_swish.toml"),
        "ROWS=8,COLS=8",
        ReferenceRegistry::new(),
    );
    let data = task.inputs(1, 0);
    let e = task.run_reference(&data).unwrap_err();
    assert!(e.to_string().contains("NaN"), "{e}");
}

#[test]
fn isolated_workers_rebuild_the_task_file() {
    let (Some(_), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let dir = example_dir();
    let file = TaskFile::load(&dir.join("scaled_swish.toml")).unwrap();
    let eval = common::harness_evaluator("ignored", "ROWS=64,COLS=64", config())
        .task_file(TaskFileJob::from_task_file(&file).unwrap())
        .build();
    assert_eq!(eval.task().unwrap().name(), "scaled_swish");
    for (manifest, status) in [
        ("scaled_swish_fast.toml", Status::Correct),
        ("scaled_swish_halfwork.toml", Status::WrongShape),
    ] {
        let e = eval
            .evaluate_blocking(&kernel(&dir.join(manifest)), &ParamValues::new())
            .unwrap();
        assert_eq!(e.status, status, "{manifest}: {}", e.diagnostics);
    }
    eval.shutdown();
}
