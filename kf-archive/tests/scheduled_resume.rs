//! A scheduled run (emitters + bandit) killed with SIGKILL resumes from its run directory to
//! exactly the archive and scheduler state of an uninterrupted run.

use std::path::Path;

mod common;

use common::{quiet, run_child_until_killed, sigkill_at};
use kf_archive::{EliteArchive, RunDir, RunMeta};
use kf_core::emitter::{EmitterStats, Scheduler};
use kf_core::testing::{
    synthetic_emitters, synthetic_seed, SyntheticClassifier, SyntheticEvaluator,
};
use kf_core::{
    Archive, BehaviorClassifier, BoxError, Budget, Engine, EvaluationReport, ObserverMode,
    RunSummary,
};

const SEED: u64 = 21;
const EVALUATIONS: u64 = 200;
/// The child kills itself once this many evaluations are reported (and so recorded).
const KILL_AT: u64 = 90;

fn meta() -> RunMeta {
    RunMeta::new(
        SEED,
        &serde_json::json!({"scheduler": "bandit", "budget": EVALUATIONS}),
    )
    .unwrap()
}

fn scheduler() -> Scheduler {
    Scheduler::bandit(synthetic_emitters()).unwrap()
}

/// Runs the scheduled search, with `dir` as its checkpoint when given and an observer called
/// after every evaluation.
fn run(
    dir: Option<RunDir>,
    observer: impl FnMut(&EvaluationReport<'_>) -> Result<(), BoxError> + Send + 'static,
) -> (EliteArchive, RunSummary, Vec<EmitterStats>) {
    let classifier = SyntheticClassifier::new(4);
    let archive = EliteArchive::new(classifier.space().clone()).unwrap();
    let mut engine = Engine::new(scheduler(), SyntheticEvaluator::new(), classifier, archive)
        .seeds(vec![synthetic_seed(6)])
        .seed(SEED)
        .budget(Budget::evaluations(EVALUATIONS))
        .max_in_flight(3)
        .add_observer(observer, ObserverMode::Always);
    if let Some(dir) = dir {
        engine = engine.checkpoint(dir);
    }
    let handle = engine.scheduler();
    let result = engine.run_blocking().unwrap();
    (result.archive, result.summary, handle.stats())
}

/// Run by the test below in a child process: the search in `KF_TEST_SCHEDULED_DIR`, killed
/// with SIGKILL mid-run.
#[test]
#[ignore = "a child process of another test: runs only with --ignored"]
fn scheduled_run_killed_in_child() {
    let Ok(dir) = std::env::var("KF_TEST_SCHEDULED_DIR") else {
        return; // only meaningful as the child of the test below
    };
    let dir = RunDir::open(Path::new(&dir), meta()).unwrap();
    run(Some(dir), sigkill_at(KILL_AT));
    unreachable!("the run was to be killed after {KILL_AT} evaluations");
}

#[test]
fn a_scheduled_run_killed_with_sigkill_resumes_to_the_uninterrupted_result() {
    let tmp = tempfile::tempdir().unwrap();
    run_child_until_killed(
        "scheduled_run_killed_in_child",
        "KF_TEST_SCHEDULED_DIR",
        tmp.path(),
    );

    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    let recorded = dir.len();
    assert!(recorded > 0, "the killed run recorded its steps");
    let (resumed, summary, stats) = run(Some(dir), quiet);
    let (uninterrupted, full, full_stats) = run(None, quiet);
    assert_eq!(summary.replayed_steps, recorded);
    assert_eq!(summary.evaluations, EVALUATIONS);
    assert_eq!(resumed, uninterrupted);
    assert_eq!(
        stats, full_stats,
        "the scheduler's state is rebuilt exactly"
    );
    assert!(stats.iter().all(|s| s.steps > 0), "{stats:?}");
    let qd = |s: &RunSummary| s.history.iter().map(|h| h.qd_score).collect::<Vec<_>>();
    assert_eq!(qd(&summary), qd(&full));
    assert_eq!(
        Archive::metrics(&resumed).filled,
        Archive::metrics(&uninterrupted).filled
    );
}
