//! Run directories: logging, snapshots, restore, and tolerance of a torn last line.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use kf_archive::{ArchiveError, EliteArchive, RunDir, RunDirOptions, RunMeta, SyncMode};
use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator};
use kf_core::{Archive, BehaviorClassifier, Budget, Checkpoint, Engine, StepRecord};

const SEED: u64 = 11;

fn meta() -> RunMeta {
    RunMeta::new(SEED, &serde_json::json!({"sigma": 0.1, "budget": 120})).unwrap()
}

fn fresh() -> EliteArchive {
    EliteArchive::new(SyntheticClassifier::new(4).space().clone()).unwrap()
}

fn run(dir: Option<RunDir>, evaluations: u64) -> EliteArchive {
    let classifier = SyntheticClassifier::new(4);
    let mut engine = Engine::new(
        SyntheticMutator::new(0.1),
        SyntheticEvaluator::new(),
        classifier,
        fresh(),
    )
    .seeds(vec![synthetic_seed(6)])
    .seed(SEED)
    .budget(Budget::evaluations(evaluations))
    .max_in_flight(3);
    if let Some(dir) = dir {
        engine = engine.checkpoint(dir);
    }
    engine.run_blocking().unwrap().archive
}

fn options(every: u64) -> RunDirOptions {
    RunDirOptions {
        snapshot_every: every,
        sync: SyncMode::Flush,
    }
}

fn log_path(dir: &Path) -> std::path::PathBuf {
    dir.join("steps.jsonl")
}

#[test]
fn logs_snapshots_and_restores() {
    let tmp = tempfile::tempdir().unwrap();
    let live = run(
        Some(RunDir::open_with(tmp.path(), meta(), options(25)).unwrap()),
        120,
    );
    assert_eq!(live, run(None, 120), "checkpointing changes nothing");
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    assert_eq!(dir.len(), 120);
    assert_eq!(
        dir.snapshot_records(),
        Some(120),
        "finish writes a final snapshot"
    );
    assert_eq!(dir.restore(fresh()).unwrap(), live);
    assert!(tmp.path().join("run.json").exists());

    // Without the snapshot, the whole log is replayed.
    fs::remove_file(tmp.path().join("snapshot.json")).unwrap();
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    assert_eq!(dir.snapshot_records(), None);
    assert_eq!(dir.restore(fresh()).unwrap(), live);

    // Running again replays everything and changes nothing.
    let again = run(Some(RunDir::open(tmp.path(), meta()).unwrap()), 120);
    assert_eq!(again, live);
    assert_eq!(RunDir::open(tmp.path(), meta()).unwrap().len(), 120);
}

#[test]
fn restore_from_a_periodic_snapshot_plus_log() {
    let tmp = tempfile::tempdir().unwrap();
    // A run killed after 90 of its 120 steps: snapshots at 40 and 80 records, then 10 more
    // lines. The records come from an uninterrupted run (a killed run's are a prefix of them).
    let mut dir = RunDir::open_with(tmp.path(), meta(), options(40)).unwrap();
    let records = Arc::new(Mutex::new(Vec::new()));
    let full = Engine::new(
        SyntheticMutator::new(0.1),
        SyntheticEvaluator::new(),
        SyntheticClassifier::new(4),
        fresh(),
    )
    .seeds(vec![synthetic_seed(6)])
    .seed(SEED)
    .budget(Budget::evaluations(120))
    .max_in_flight(3)
    .checkpoint(Recorder(Arc::clone(&records)))
    .run_blocking()
    .unwrap()
    .archive;
    assert_eq!(full, run(None, 120));
    let mut partial = fresh();
    for r in records.lock().unwrap().iter().take(90) {
        for c in &r.children {
            if let kf_core::ChildRecord::Judged { elite, .. } = c {
                partial.insert(kf_core::Elite::clone(elite)).unwrap();
            }
        }
        Checkpoint::<EliteArchive>::record(&mut dir, r, &partial).unwrap();
    }
    drop(dir);
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    assert_eq!(dir.snapshot_records(), Some(80));
    assert_eq!(dir.restore(fresh()).unwrap(), partial);
    // Resuming to the full budget equals an uninterrupted run.
    assert_eq!(run(Some(dir), 120), full);
}

/// An in-memory checkpoint sharing its records with the test.
struct Recorder(Arc<Mutex<Vec<StepRecord>>>);

impl Checkpoint<EliteArchive> for Recorder {
    fn recorded(&mut self) -> Result<Vec<StepRecord>, kf_core::BoxError> {
        Ok(Vec::new())
    }
    fn record(
        &mut self,
        step: &StepRecord,
        _archive: &EliteArchive,
    ) -> Result<(), kf_core::BoxError> {
        self.0.lock().map_err(|e| e.to_string())?.push(step.clone());
        Ok(())
    }
}

#[test]
fn a_torn_last_line_is_dropped_and_truncated() {
    let tmp = tempfile::tempdir().unwrap();
    let live = run(
        Some(RunDir::open_with(tmp.path(), meta(), options(0)).unwrap()),
        60,
    );
    let path = log_path(tmp.path());
    let good = fs::read(&path).unwrap();
    let lines = good.iter().filter(|&&b| b == b'\n').count();
    // Cut the last line in half, as a crash mid-write would.
    let last_start = good[..good.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    let cut = last_start + (good.len() - last_start) / 2;
    fs::write(&path, &good[..cut]).unwrap();
    fs::remove_file(tmp.path().join("snapshot.json")).unwrap();

    let mut dir = RunDir::open(tmp.path(), meta()).unwrap();
    assert_eq!(dir.len() as usize, lines - 1);
    assert_eq!(
        fs::read(&path).unwrap(),
        &good[..last_start],
        "truncated to the good prefix"
    );
    let recorded = Checkpoint::<EliteArchive>::recorded(&mut dir).unwrap();
    assert_eq!(recorded.len(), lines - 1);
    // Resuming recomputes the lost step and ends where the uninterrupted run did.
    assert_eq!(run(Some(dir), 60), live);
    assert_eq!(fs::read(&path).unwrap(), good);

    // A complete but corrupt last line is dropped too.
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(b"{\"step\": 60, garbage}\n").unwrap();
    drop(f);
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    assert_eq!(dir.len() as usize, lines);
    assert_eq!(fs::read(&path).unwrap(), good);
}

#[test]
fn a_corrupt_middle_line_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    run(Some(RunDir::open(tmp.path(), meta()).unwrap()), 30);
    let path = log_path(tmp.path());
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[4] = "{not json";
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    match RunDir::open(tmp.path(), meta()) {
        Err(ArchiveError::CorruptLog { line: 5, .. }) => {}
        other => panic!("expected a corrupt line 5, got {other:?}"),
    }
}

#[test]
fn another_runs_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    drop(RunDir::open(tmp.path(), meta()).unwrap());
    let other_seed = RunMeta::new(SEED + 1, &serde_json::json!({"sigma": 0.1, "budget": 120}));
    assert!(matches!(
        RunDir::open(tmp.path(), other_seed.unwrap()),
        Err(ArchiveError::MetaMismatch { .. })
    ));
    let other_config = RunMeta::new(SEED, &serde_json::json!({"sigma": 0.2}));
    assert!(matches!(
        RunDir::open(tmp.path(), other_config.unwrap()),
        Err(ArchiveError::MetaMismatch { .. })
    ));
    assert!(RunDir::open(tmp.path(), meta()).is_ok());
}

#[test]
fn a_snapshot_ahead_of_the_log_is_discarded() {
    let tmp = tempfile::tempdir().unwrap();
    let live = run(
        Some(
            RunDir::open_with(
                tmp.path(),
                meta(),
                RunDirOptions {
                    snapshot_every: 10,
                    sync: SyncMode::Fsync,
                },
            )
            .unwrap(),
        ),
        50,
    );
    // Lose the tail of the log (as an unsynced log could on a power cut).
    let path = log_path(tmp.path());
    let text = fs::read_to_string(&path).unwrap();
    let kept: String = text.lines().take(20).map(|l| format!("{l}\n")).collect();
    fs::write(&path, kept).unwrap();
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    assert_eq!(dir.len(), 20);
    assert_eq!(dir.snapshot_records(), None);
    assert_eq!(run(Some(dir), 50), live);
}

#[test]
fn restore_detects_a_log_from_another_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let live = run(Some(RunDir::open(tmp.path(), meta()).unwrap()), 40);
    fs::remove_file(tmp.path().join("snapshot.json")).unwrap();
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    // Starting from a non-empty archive, the recorded outcomes no longer hold.
    let mut wrong = fresh();
    for e in live.elites() {
        wrong.insert(e.clone()).unwrap();
    }
    assert!(matches!(
        dir.restore(wrong),
        Err(ArchiveError::ReplayMismatch { .. })
    ));
}
