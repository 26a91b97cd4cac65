//! Crash and resume: a child process runs the engine with a run directory and is killed with
//! SIGKILL at random points (several times); resuming from the directory with the same seed
//! and configuration then ends with exactly the archive of an uninterrupted run.
//!
//! The child is this test binary itself, re-executed with an environment variable that makes
//! the `crash_child` test run the engine (the procspawn pattern); without the variable that
//! test does nothing.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kf_archive::{EliteArchive, RunDir, RunDirOptions, RunMeta};
use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator};
use kf_core::{
    async_trait, BehaviorClassifier, Budget, Candidate, Engine, Evaluation, Evaluator, RunResult,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const CHILD_ENV: &str = "KF_CRASH_RESUME_CHILD_DIR";
const SEED: u64 = 2024;
const EVALUATIONS: u64 = 1200;
const IN_FLIGHT: usize = 3;

/// The synthetic evaluator, slowed down in the child so that the kill lands mid-run.
struct Paced {
    inner: SyntheticEvaluator,
    pause: Duration,
}

#[async_trait]
impl Evaluator for Paced {
    type Error = std::convert::Infallible;
    async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
        if !self.pause.is_zero() {
            std::thread::sleep(self.pause);
        }
        self.inner.evaluate(c).await
    }
}

fn meta() -> RunMeta {
    RunMeta::new(
        SEED,
        &serde_json::json!({"evaluations": EVALUATIONS, "in_flight": IN_FLIGHT, "sigma": 0.1}),
    )
    .unwrap()
}

fn options() -> RunDirOptions {
    RunDirOptions {
        snapshot_every: 64,
        ..RunDirOptions::default()
    }
}

fn run(dir: Option<RunDir>, pause: Duration) -> RunResult<EliteArchive> {
    let classifier = SyntheticClassifier::new(4);
    let archive = EliteArchive::new(classifier.space().clone()).unwrap();
    let evaluator = Paced {
        inner: SyntheticEvaluator::new(),
        pause,
    };
    let mut engine = Engine::new(SyntheticMutator::new(0.1), evaluator, classifier, archive)
        .seeds(vec![synthetic_seed(6)])
        .seed(SEED)
        .budget(Budget::evaluations(EVALUATIONS))
        .max_in_flight(IN_FLIGHT);
    if let Some(dir) = dir {
        engine = engine.checkpoint(dir);
    }
    engine.run_blocking().unwrap()
}

/// Child mode: run with the run directory named by the environment until killed.
#[test]
#[ignore = "a child process of another test: runs only with --ignored"]
fn crash_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = RunDir::open_with(&dir, meta(), options()).unwrap();
    run(Some(dir), Duration::from_micros(300));
}

fn lines(path: &Path) -> usize {
    std::fs::read(path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0)
}

/// Starts a child on `dir`, kills it with SIGKILL once the log holds `at` lines; returns
/// whether it was killed before finishing on its own.
fn crash_at(dir: &Path, at: usize) -> bool {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let log = dir.join("steps.jsonl");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the child failed: {status}");
            return false;
        }
        if lines(&log) >= at || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // `Child::kill` sends SIGKILL on Unix: no destructor, no flush, no finish.
    child.kill().unwrap();
    let status = child.wait().unwrap();
    !status.success()
}

#[test]
fn killed_runs_resume_to_the_uninterrupted_archive() {
    let reference = run(None, Duration::ZERO).archive;

    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("steps.jsonl");
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    let total = EVALUATIONS as usize;
    let mut killed = 0;
    for round in 0..3 {
        let logged = lines(&log);
        let at = rng.random_range(logged + 20..logged + total / 4);
        let was_killed = crash_at(tmp.path(), at);
        killed += usize::from(was_killed);
        println!(
            "round {round}: kill requested at {at} lines, {} lines logged, killed: {was_killed}",
            lines(&log)
        );
        if round == 1 {
            // A crash in the middle of a write leaves a torn last line; make sure of one.
            let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            f.write_all(b"{\"step\":999999,\"parent\":{\"0\":").unwrap();
        }
    }
    assert!(
        killed >= 2,
        "only {killed} of 3 children were killed mid-run"
    );
    let recorded = lines(&log);
    assert!(
        recorded > 0 && recorded < total,
        "{recorded} steps recorded"
    );

    // Resume in this process: the recorded steps are replayed, the rest computed.
    let dir = RunDir::open_with(tmp.path(), meta(), options()).unwrap();
    let resumed = run(Some(dir), Duration::ZERO);
    assert!(resumed.summary.replayed_steps > 0);
    assert_eq!(resumed.summary.evaluations, EVALUATIONS);
    assert_eq!(resumed.archive, reference);
    assert_eq!(
        serde_json::to_string(&resumed.archive).unwrap(),
        serde_json::to_string(&reference).unwrap()
    );

    // The directory alone restores the same archive.
    let dir = RunDir::open_with(tmp.path(), meta(), options()).unwrap();
    let empty = EliteArchive::new(SyntheticClassifier::new(4).space().clone()).unwrap();
    assert_eq!(dir.restore(empty).unwrap(), reference);
}
