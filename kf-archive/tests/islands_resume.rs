//! A run over islands of CVT archives (emitters + bandit choosing the steps), killed with
//! SIGKILL, resumes from its run directory to exactly the archive of an uninterrupted run:
//! the same centroids (kept in the run directory), islands, migrations and reseeds.

use std::path::Path;

mod common;

use common::{quiet, run_child_until_killed, sigkill_at};
use kf_archive::{
    CvtArchive, CvtConfig, FeatureSpace, IslandArchive, IslandConfig, RunDir, RunMeta,
};
use kf_core::emitter::Scheduler;
use kf_core::testing::{
    synthetic_emitters, synthetic_seed, SyntheticClassifier, SyntheticEvaluator,
};
use kf_core::{Archive, BoxError, Budget, Engine, EvaluationReport, ObserverMode, RunSummary};

const SEED: u64 = 33;
const EVALUATIONS: u64 = 240;
/// The child kills itself once this many evaluations are reported (and so recorded).
const KILL_AT: u64 = 110;

type Islands = IslandArchive<CvtArchive>;

fn meta() -> RunMeta {
    RunMeta::new(
        SEED,
        &serde_json::json!({"archive": "cvt", "islands": 3, "budget": EVALUATIONS}),
    )
    .unwrap()
}

fn config() -> IslandConfig {
    IslandConfig {
        islands: 3,
        migration_interval: 25,
        migrants: 2,
        stagnation: 5,
        reseed_elites: 3,
    }
}

/// The islands, their centroids kept in `dir` when given.
fn archive(dir: Option<&Path>) -> Islands {
    let features = FeatureSpace::unit(3).unwrap();
    let cvt = CvtConfig::default().with_centroids(32).with_seed(SEED);
    let empty = match dir {
        Some(dir) => CvtArchive::in_run_dir(dir, features, cvt).unwrap(),
        None => CvtArchive::new(features, cvt).unwrap(),
    };
    IslandArchive::new(empty, config()).unwrap()
}

fn run(
    dir: Option<(&Path, RunDir)>,
    observer: impl FnMut(&EvaluationReport<'_>) -> Result<(), BoxError> + Send + 'static,
) -> (Islands, RunSummary) {
    let classifier = SyntheticClassifier::new(4).with_features();
    let scheduler = Scheduler::bandit(synthetic_emitters()).unwrap();
    let mut engine = Engine::new(
        scheduler,
        SyntheticEvaluator::new(),
        classifier,
        archive(dir.as_ref().map(|(p, _)| *p)),
    )
    .seeds(vec![synthetic_seed(6)])
    .seed(SEED)
    .budget(Budget::evaluations(EVALUATIONS))
    .max_in_flight(3)
    .add_observer(observer, ObserverMode::Always);
    if let Some((_, dir)) = dir {
        engine = engine.checkpoint(dir);
    }
    let result = engine.run_blocking().unwrap();
    (result.archive, result.summary)
}

/// Run by the test below in a child process: the search in `KF_TEST_ISLANDS_DIR`, killed
/// with SIGKILL mid-run.
#[test]
#[ignore = "a child process of another test: runs only with --ignored"]
fn islands_run_killed_in_child() {
    let Ok(dir) = std::env::var("KF_TEST_ISLANDS_DIR") else {
        return; // only meaningful as the child of the test below
    };
    let path = Path::new(&dir);
    let run_dir = RunDir::open(path, meta()).unwrap();
    run(Some((path, run_dir)), sigkill_at(KILL_AT));
    unreachable!("the run was to be killed after {KILL_AT} evaluations");
}

#[test]
fn an_island_run_killed_with_sigkill_resumes_to_the_uninterrupted_result() {
    let tmp = tempfile::tempdir().unwrap();
    run_child_until_killed(
        "islands_run_killed_in_child",
        "KF_TEST_ISLANDS_DIR",
        tmp.path(),
    );
    assert!(tmp.path().join(kf_archive::CENTROIDS_FILE).exists());

    let killed_at = {
        let dir = RunDir::open(tmp.path(), meta()).unwrap();
        let killed = dir.restore(archive(Some(tmp.path()))).unwrap();
        assert!(killed.metrics().filled > 0);
        dir.len()
    };
    assert!(killed_at > 0, "the killed run recorded its steps");
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    let (resumed, summary) = run(Some((tmp.path(), dir)), quiet);
    let (uninterrupted, full) = run(None, quiet);
    assert_eq!(summary.replayed_steps, killed_at);
    assert_eq!(summary.evaluations, EVALUATIONS);
    assert_eq!(
        resumed, uninterrupted,
        "islands, union, migrations and reseeds"
    );
    assert!(
        uninterrupted.migrations() >= 5,
        "{}",
        uninterrupted.migrations()
    );
    assert!(
        uninterrupted.reseeds() > 0,
        "a stagnant island was reseeded"
    );
    let qd = |s: &RunSummary| s.history.iter().map(|h| h.qd_score).collect::<Vec<_>>();
    assert_eq!(qd(&summary), qd(&full));
    // The directory alone (its final snapshot, then any later records) gives the same archive.
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    let restored = dir.restore(archive(Some(tmp.path()))).unwrap();
    assert_eq!(restored, uninterrupted);
}
