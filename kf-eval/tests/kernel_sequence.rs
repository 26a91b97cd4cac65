//! Candidates of several kernels on the real OpenCL runtime: an honest two-kernel softmax (row
//! statistics into a scratch buffer, then a normalisation) is correct and timed as one launch,
//! in process and in an isolated worker; a sequence that leaves its scratch buffer partly
//! unwritten, or writes the output from the wrong kernel, is rejected; manifests whose
//! `writes` name an input or leave an output to no kernel are refused before compiling.
//!
//! Skips (printing `SKIPPED: …`) only when the runtime is missing and `KF_REQUIRE_OPENCL` is
//! not `1`.

mod common;

use std::path::{Path, PathBuf};

use kf_backend_opencl::testing::backend_or_skip;
use kf_core::{KernelSource, ParamValues, Status};
use kf_eval::task::{builtin_task, parse_sizes};
use kf_eval::{EvalConfig, KernelEvaluator};
use kf_manifest::Manifest;

kf_eval::worker_test_entry!(common::open_worker_backend);

const SIZES: &str = "ROWS=256,COLS=384";

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sequences")
}

fn config() -> EvalConfig {
    common::seeded_config(11)
}

/// The honest manifest over the kernel text of `file` (a cheat or the honest one), with
/// `edit` applied to the manifest text.
/// An edit of the two-kernel softmax manifest.
type ManifestEdit = fn(&str) -> String;

fn candidate(file: &str, edit: impl Fn(&str) -> String) -> KernelSource {
    let manifest = std::fs::read_to_string(dir().join("softmax_two_kernels.toml")).unwrap();
    let text = std::fs::read_to_string(dir().join(file)).unwrap();
    Manifest::parse(&edit(&manifest), "softmax_two_kernels.toml", None)
        .unwrap()
        .kernel_source(text)
}

fn evaluate(source: &KernelSource) -> Option<kf_core::Evaluation> {
    let backend = backend_or_skip()?;
    let task = builtin_task("softmax", &parse_sizes(SIZES).unwrap()).unwrap();
    let mut evaluator = KernelEvaluator::new(backend, config());
    Some(
        evaluator
            .evaluate(task.as_ref(), source, &ParamValues::new())
            .unwrap(),
    )
}

#[test]
fn an_honest_two_kernel_softmax_is_correct_and_timed_as_one_launch() {
    let source = candidate("softmax_two_kernels.cl", str::to_owned);
    let Some(e) = evaluate(&source) else { return };
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    assert!(e.timing.is_some_and(|t| t.median_s > 0.0));
    assert!(
        e.speedup.is_some(),
        "timed beside the baseline: {}",
        e.diagnostics
    );
    // Three input sets: the task's sizes and two alternative shapes, each with its own
    // scratch size (2 * ROWS).
    assert_eq!(e.correctness.unwrap().input_sets, 3, "{}", e.diagnostics);
}

#[test]
fn a_scratch_buffer_left_partly_unwritten_is_rejected() {
    let source = candidate("cheat_unwritten_scratch.cl", str::to_owned);
    let Some(e) = evaluate(&source) else { return };
    let says =
        "kernel 1 of 2 (`row_stats`) left 256 of 512 elements of scratch buffer STATS unwritten";
    common::assert_judged(&e, Status::WrongShape, &[says]);
}

#[test]
fn an_output_written_by_the_wrong_kernel_is_rejected() {
    let source = candidate("cheat_wrong_stage.cl", str::to_owned);
    let Some(e) = evaluate(&source) else { return };
    let says = [
        "kernel 1 of 2 (`row_stats`) wrote Y",
        "does not list in `writes`",
    ];
    common::assert_judged(&e, Status::RuntimeError, &says);
    // Declaring the write does not make the second kernel's empty work acceptable when the
    // first kernel's output is wrong; here it is right, so the honest declaration passes:
    // what a kernel may write is what its manifest says, not which kernel it is.
    let declared = candidate("cheat_wrong_stage.cl", |m| {
        m.replace("writes = [\"STATS\"]", "writes = [\"STATS\", \"Y\"]")
    });
    let Some(e) = evaluate(&declared) else { return };
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
}

#[test]
fn writes_that_name_an_input_or_leave_an_output_unwritten_are_refused_before_compiling() {
    let refused: [(ManifestEdit, &str); 3] = [
        (
            |m| m.replace("writes = [\"STATS\"]", "writes = [\"STATS\", \"X\"]"),
            "`X` is one of the task's inputs",
        ),
        (
            |m| m.replace("writes = [\"Y\"]", "writes = [\"STATS\"]"),
            "no kernel lists the task's output `Y`",
        ),
        (
            |m| m.replace("STATS", "Y"),
            "has the name of one of the task's buffers",
        ),
    ];
    for (edit, says) in refused {
        let Some(e) = evaluate(&candidate("softmax_two_kernels.cl", edit)) else {
            return;
        };
        common::assert_judged(&e, Status::CompileError, &[says]);
    }
}

#[test]
fn a_sequence_crosses_the_worker_boundary_and_is_judged_alike() {
    if backend_or_skip().is_none() {
        return;
    }
    let evaluator = common::harness_evaluator("softmax", SIZES, config()).build();
    let honest = candidate("softmax_two_kernels.cl", str::to_owned);
    let e = evaluator
        .evaluate_blocking(&honest, &ParamValues::new())
        .unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    let cheat = candidate("cheat_unwritten_scratch.cl", str::to_owned);
    let e = evaluator
        .evaluate_blocking(&cheat, &ParamValues::new())
        .unwrap();
    assert_eq!(e.status, Status::WrongShape, "{}", e.diagnostics);
}

#[test]
fn a_baseline_of_two_kernels_is_verified_and_timed_beside_a_candidate() {
    let Some(backend) = backend_or_skip() else {
        return;
    };
    let file =
        kf_eval::task::file::TaskFile::load(&dir().join("softmax_sequence_baseline.toml")).unwrap();
    let task = kf_eval::task::file::FileTask::with_references(
        std::sync::Arc::new(file),
        &parse_sizes(SIZES).unwrap(),
        std::sync::Arc::new(kf_eval::task::builtin_references()),
    )
    .unwrap();
    let naive =
        Manifest::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/softmax_naive.toml"))
            .unwrap()
            .1;
    let mut evaluator = KernelEvaluator::new(backend, config());
    let e = evaluator
        .evaluate(&task, &naive, &ParamValues::new())
        .unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    let (speedup, baseline) = (e.speedup.unwrap(), e.baseline.unwrap().median_s);
    assert!(speedup > 0.0 && baseline > 0.0, "{}", e.diagnostics);
}
