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

/// Reopens the run directory at `root`: it must hold `records` records and no snapshot, and
/// resuming the run to `evaluations` must end at `live`.
fn assert_resumes(root: &Path, records: u64, evaluations: u64, live: &EliteArchive) {
    let dir = RunDir::open(root, meta()).unwrap();
    assert_eq!(dir.len(), records);
    assert_eq!(dir.snapshot_records(), None);
    assert_eq!(&run(Some(dir), evaluations), live);
}

fn fresh() -> EliteArchive {
    EliteArchive::new(SyntheticClassifier::new(4).space().clone()).unwrap()
}

/// The engine every test runs: the synthetic parts, seed [`SEED`], three in flight.
fn engine(evaluations: u64) -> Engine<SyntheticEvaluator, SyntheticClassifier, EliteArchive> {
    Engine::new(
        SyntheticMutator::new(0.1),
        SyntheticEvaluator::new(),
        SyntheticClassifier::new(4),
        fresh(),
    )
    .seeds(vec![synthetic_seed(6)])
    .seed(SEED)
    .budget(Budget::evaluations(evaluations))
    .max_in_flight(3)
}

fn run(dir: Option<RunDir>, evaluations: u64) -> EliteArchive {
    let mut engine = engine(evaluations);
    if let Some(dir) = dir {
        engine = engine.checkpoint(dir);
    }
    engine.run_blocking().unwrap().archive
}

/// Runs `evaluations` evaluations checkpointed into a run directory opened in `dir` with
/// [`options`]`(every)`.
fn checkpointed_run(dir: &Path, every: u64, evaluations: u64) -> EliteArchive {
    let run_dir = RunDir::open_with(dir, meta(), options(every)).unwrap();
    run(Some(run_dir), evaluations)
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
    let live = checkpointed_run(tmp.path(), 25, 120);
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
    drop(dir);
    fs::remove_file(tmp.path().join("snapshot.json")).unwrap();
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    assert_eq!(dir.snapshot_records(), None);
    assert_eq!(dir.restore(fresh()).unwrap(), live);
    drop(dir);

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
    let full = engine(120)
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
    let live = checkpointed_run(tmp.path(), 0, 60);
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
    assert_resumes(tmp.path(), 20, 50, &live);
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

fn budget_meta(evaluations: u64) -> RunMeta {
    meta()
        .with_budget(&serde_json::json!({ "evaluations": evaluations }))
        .unwrap()
}

#[test]
fn a_finished_run_extended_equals_a_run_with_the_larger_budget_from_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let short = run(Some(RunDir::open(tmp.path(), budget_meta(8)).unwrap()), 8);
    assert_eq!(short, run(None, 8));
    let dir = RunDir::open(tmp.path(), budget_meta(12)).unwrap();
    assert_eq!(
        dir.extended_from(),
        Some(&serde_json::json!({ "evaluations": 8 })),
        "the reopened directory says it was extended, and from what"
    );
    let extended = run(Some(dir), 12);
    assert_eq!(extended, run(None, 12));
    assert_ne!(extended, short, "the extension computed new steps");
    let reopened = RunDir::open(tmp.path(), budget_meta(12)).unwrap();
    assert_eq!(
        reopened.extended_from(),
        None,
        "same budget: a plain resume"
    );
    assert_eq!(reopened.meta().budget["evaluations"], 12);
    drop(reopened);
    // Extending a longer run in several steps ends at the same archive too.
    let tmp = tempfile::tempdir().unwrap();
    for evaluations in [10, 40, 90] {
        run(
            Some(RunDir::open(tmp.path(), budget_meta(evaluations)).unwrap()),
            evaluations,
        );
    }
    assert_eq!(
        RunDir::open(tmp.path(), budget_meta(90))
            .unwrap()
            .restore(fresh())
            .unwrap(),
        run(None, 90)
    );
}

#[test]
fn a_second_opener_is_refused_while_the_first_holds_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let first = RunDir::open(tmp.path(), meta()).unwrap();
    match RunDir::open(tmp.path(), meta()) {
        Err(e @ ArchiveError::Locked { holder, .. }) => {
            assert_eq!(holder, Some(std::process::id()));
            let text = e.to_string();
            assert!(
                text.contains(&format!("process {}", std::process::id())),
                "{text}"
            );
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    drop(first);
    assert!(RunDir::open(tmp.path(), meta()).is_ok(), "released on drop");
}

/// Run by `a_killed_holder_leaves_no_stale_lock` in a child process: holds the directory named
/// by `KF_TEST_HOLD_DIR` until killed.
#[test]
#[ignore = "a child process of another test: runs only with --ignored"]
fn hold_directory_in_child() {
    let Ok(dir) = std::env::var("KF_TEST_HOLD_DIR") else {
        return; // only meaningful as the child of the test below
    };
    let _held = RunDir::open(&dir, meta()).unwrap();
    println!("holding");
    std::thread::sleep(std::time::Duration::from_secs(600));
}

#[test]
fn a_killed_holder_leaves_no_stale_lock() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "hold_directory_in_child",
            "--nocapture",
        ])
        .env("KF_TEST_HOLD_DIR", tmp.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("holding") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the holder exited");
    }
    match RunDir::open(tmp.path(), meta()) {
        Err(ArchiveError::Locked { holder, .. }) => assert_eq!(holder, Some(child.id())),
        other => panic!("expected Locked by the child, got {other:?}"),
    }
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    assert!(RunDir::open(tmp.path(), meta()).is_ok());
}

/// Writes the log back with `edit` applied to its lines.
fn edit_log(dir: &Path, edit: impl FnOnce(&mut Vec<String>)) {
    let path = log_path(dir);
    let mut lines: Vec<String> = fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    edit(&mut lines);
    fs::write(&path, lines.join("\n") + "\n").unwrap();
}

fn corrupt_line(dir: &Path) -> (u64, u64, String) {
    match RunDir::open(dir, meta()) {
        Err(e @ ArchiveError::CorruptLog { line, intact, .. }) => (line, intact, e.to_string()),
        other => panic!("expected a corrupt log, got {other:?}"),
    }
}

#[test]
fn damaged_logs_are_detected_and_the_valid_prefix_can_be_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let live = run(Some(RunDir::open(tmp.path(), meta()).unwrap()), 30);
    let pristine = fs::read(log_path(tmp.path())).unwrap();
    let restore = || fs::write(log_path(tmp.path()), &pristine).unwrap();

    // A duplicated step (two writers interleaving).
    edit_log(tmp.path(), |l| {
        let dup = l[3].clone();
        l.insert(4, dup);
    });
    let (line, intact, text) = corrupt_line(tmp.path());
    assert_eq!((line, intact), (5, 4));
    assert!(text.contains("repeated or out of order"), "{text}");
    assert!(text.contains("kf run repair"), "{text}");

    // A line of another run (same configuration, another directory).
    restore();
    let other = tempfile::tempdir().unwrap();
    run(Some(RunDir::open(other.path(), meta()).unwrap()), 30);
    let foreign = fs::read_to_string(log_path(other.path())).unwrap();
    let foreign_line = foreign.lines().nth(6).unwrap().to_owned();
    edit_log(tmp.path(), |l| l[6] = foreign_line);
    let (line, _, text) = corrupt_line(tmp.path());
    assert_eq!(line, 7);
    assert!(text.contains("belongs to run"), "{text}");

    // A middle line cut short, and one whose record was edited but still parses.
    restore();
    edit_log(tmp.path(), |l| {
        let keep = l[9].len() / 2;
        l[9].truncate(keep);
    });
    assert_eq!(corrupt_line(tmp.path()).0, 10);
    restore();
    edit_log(tmp.path(), |l| {
        l[2] = l[2].replacen("\"children\":[", "\"children\":[ ", 1);
        // Whitespace is part of the checksummed text; so is any edited value.
        l[2] = l[2].replacen("\"usage\":{", "\"usage\":{ ", 1);
    });
    let (line, _, text) = corrupt_line(tmp.path());
    assert_eq!(line, 3);
    assert!(text.contains("checksum"), "{text}");

    // Missing records in the middle.
    restore();
    edit_log(tmp.path(), |l| {
        l.remove(12);
    });
    let (line, intact, text) = corrupt_line(tmp.path());
    assert_eq!((line, intact), (13, 12));
    assert!(text.contains("missing"), "{text}");

    // Keeping the valid prefix lets the run resume to the archive it would have had.
    assert_eq!(RunDir::keep_valid_prefix(tmp.path()).unwrap(), 12);
    assert_resumes(tmp.path(), 12, 30, &live);
}

/// Run by `a_full_disk_fails_the_run_cleanly_and_keeps_the_last_good_state` in a child process
/// whose file-size limit stands in for a full disk: runs the engine on the directory named by
/// `KF_TEST_FULL_DIR` and exits with 3 when the run fails with an error (a panic exits 101).
#[test]
#[ignore = "a child process of another test: runs only with --ignored"]
fn run_on_a_full_disk_in_child() {
    let Ok(dir) = std::env::var("KF_TEST_FULL_DIR") else {
        return; // only meaningful as the child of the test below
    };
    // Writes past 48 KiB fail with EFBIG, as they would with ENOSPC on a full disk; the signal
    // the kernel also sends is ignored so that the failure reaches the program as an error.
    // SAFETY: plain libc calls with valid arguments, made before any other thread writes.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: 48 * 1024,
            rlim_max: 48 * 1024,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let dir = RunDir::open_with(&dir, meta(), options(10)).unwrap();
    let result = engine(400).checkpoint(dir).run_blocking();
    match result {
        Ok(_) => println!("finished"),
        Err(e) => {
            println!("run failed: {e}");
            std::process::exit(3);
        }
    }
}

#[test]
fn a_full_disk_fails_the_run_cleanly_and_keeps_the_last_good_state() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "run_on_a_full_disk_in_child",
            "--nocapture",
        ])
        .env("KF_TEST_FULL_DIR", tmp.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(3),
        "a clean failure, not a panic: {said}"
    );
    assert!(said.contains("run failed"), "{said}");
    assert!(
        said.contains("File too large") || said.contains("No space"),
        "the cause is reported: {said}"
    );
    // The directory opens (a torn last line is dropped), the snapshot on disk is whole, and
    // what was recorded restores to the archive of an uninterrupted run after as many steps.
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    let kept = dir.len();
    assert!(
        kept > 10,
        "some steps were recorded before the disk filled: {kept}"
    );
    assert!(
        dir.snapshot_records().is_some_and(|s| s <= kept),
        "a whole snapshot survives"
    );
    let restored = dir.restore(fresh()).unwrap();
    let evaluations: u64 = dir
        .read_records()
        .unwrap()
        .iter()
        .map(|r| r.children.len() as u64)
        .sum();
    assert!(restored.metrics().filled > 0);
    // With room again, the same run resumes and ends where the uninterrupted run does.
    assert_eq!(run(Some(dir), 400), run(None, 400));
    assert!(evaluations < 400);
}

#[test]
fn read_run_reads_a_locked_directory_without_changing_it() {
    let tmp = tempfile::tempdir().unwrap();
    checkpointed_run(tmp.path(), 25, 40);
    // A writer holds the lock; the reader neither needs nor takes it.
    let held = RunDir::open(tmp.path(), meta()).unwrap();
    let read = kf_archive::read_run(tmp.path()).unwrap();
    assert_eq!(read.records, held.read_records().unwrap());
    assert_eq!(read.meta.run_id, held.meta().run_id);
    assert!(!read.partial_tail);
    // A line still being written is left out, and the file is not truncated.
    let mut f = OpenOptions::new()
        .append(true)
        .open(log_path(tmp.path()))
        .unwrap();
    f.write_all(b"{\"run\":\"").unwrap();
    let before = fs::metadata(log_path(tmp.path())).unwrap().len();
    let read = kf_archive::read_run(tmp.path()).unwrap();
    assert!(read.partial_tail);
    assert_eq!(read.records.len() as u64, held.len());
    assert_eq!(fs::metadata(log_path(tmp.path())).unwrap().len(), before);
    // A directory without run.json is an error, not a panic.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        kf_archive::read_run(empty.path()),
        Err(ArchiveError::Io { .. })
    ));
}

#[test]
fn a_snapshot_of_another_space_is_refused_before_it_is_built() {
    let tmp = tempfile::tempdir().unwrap();
    run(Some(RunDir::open(tmp.path(), meta()).unwrap()), 30);
    let path = tmp.path().join("snapshot.json");
    let mut snapshot: serde_json::Value =
        serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    // 26 two-level dimensions: 2^26 cells, gigabytes if the archive were built first.
    let dims = snapshot["archive"]["space"]["dimensions"]
        .as_array()
        .cloned()
        .unwrap();
    let mut first = dims[0].clone();
    first["levels"] = serde_json::json!(["a", "b"]);
    snapshot["archive"]["space"]["dimensions"] = serde_json::Value::Array(vec![first; 26]);
    fs::write(&path, serde_json::to_vec(&snapshot).unwrap()).unwrap();
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    match dir.restore(fresh()) {
        Err(ArchiveError::InvalidSnapshot(what)) => assert!(what.contains("space"), "{what}"),
        other => panic!("expected InvalidSnapshot, got {other:?}"),
    }
}

/// A search driven step by step and stopped after 30 steps resumes from its run directory to
/// the archive of an uninterrupted run (one step at a time is `max_in_flight(1)`).
#[test]
fn a_search_stopped_after_n_steps_resumes_from_its_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let uninterrupted = engine(120).max_in_flight(1).run_blocking().unwrap();
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    let mut stepper = engine(120)
        .max_in_flight(1)
        .checkpoint(dir)
        .start()
        .unwrap();
    for expected in 0..30 {
        assert_eq!(stepper.step_blocking().unwrap(), Some(expected));
    }
    drop(stepper); // as a program that stops here would
    let dir = RunDir::open(tmp.path(), meta()).unwrap();
    assert_eq!(dir.len(), 30, "one record per step told");
    let resumed = engine(120)
        .max_in_flight(1)
        .checkpoint(dir)
        .run_blocking()
        .unwrap();
    assert_eq!(resumed.summary.replayed_steps, 30);
    assert_eq!(resumed.archive, uninterrupted.archive);
}
