//! A search builds its task once in its own process (issue 63): `ChosenTask::resolve` builds
//! it (checking the task file and running its reference once), the builder is given it
//! (`chosen_task`), and nothing in the run (the evaluator's set-up, the final selection, the
//! report) builds it again. Evaluation workers are processes of their own and build it there.
//!
//! Real OpenCL and the real Python of `scripts/setup.sh`; skips without them unless
//! `KF_REQUIRE_OPENCL=1` / `KF_REQUIRE_PYTHON=1`. One test in this file: the count is the
//! process's.

use std::path::Path;
use std::time::Duration;

use kf_eval::task::file::python::numpy_or_skip;
use kf_eval::task::file::FileTask;
use kf_eval::WorkerCommand;
use kf_search::task::ChosenTask;
use kf_search::Search;

kf_eval::worker_test_entry!(|spec: &kf_eval::BackendSpec| {
    kf_eval::BackendFactory::open(&kf_search::backends::OpenClFactory, spec)
        .map_err(|e| e.to_string())
});

#[test]
fn a_search_of_a_task_file_builds_the_task_once_in_its_process() {
    if !kf_search::doctest_backend_available() || !numpy_or_skip() {
        return;
    }
    let out = tempfile::tempdir().expect("a temporary folder");
    let task_file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tasks/examples/scaled_swish/scaled_swish.toml");
    let before = FileTask::builds_in_this_process();
    let chosen = ChosenTask::resolve(None, Some(&task_file), "ROWS=64,COLS=256").expect("resolves");
    assert_eq!(FileTask::builds_in_this_process() - before, 1, "resolving");
    let job = chosen.file.clone();
    let outcome = Search::builder()
        .chosen_task(chosen)
        .evaluations(6)
        .tune_budget(2)
        .final_rounds(1)
        .wall(Some(Duration::from_secs(300)))
        .worker(WorkerCommand::test_harness().expect("the test harness"))
        .out(out.path())
        .progress(false)
        .build()
        .expect("builds")
        .run()
        .expect("runs");
    assert_eq!(outcome.summary.evaluations, 6);
    assert!(outcome.best_seconds.is_some(), "a correct kernel");
    assert_eq!(
        FileTask::builds_in_this_process() - before,
        1,
        "the builder, the run and the report use the task resolved"
    );
    // The count sees a build: a builder given only the task file's job builds the task.
    let (_, job) = job.expect("a task file's job");
    Search::builder()
        .task_file("scaled_swish", job)
        .size("ROWS=64,COLS=256")
        .expect("sizes")
        .build()
        .expect("builds");
    assert_eq!(FileTask::builds_in_this_process() - before, 2);
}
