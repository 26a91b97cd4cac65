//! Crash-safe run directories: an append-only step log, atomic archive snapshots and the run's
//! metadata, implementing [`kf_core::Checkpoint`].
//!
//! Layout of a run directory:
//!
//! | file | content |
//! |---|---|
//! | `run.lock` | the advisory lock of the process that has the directory open, and its id |
//! | `run.json` | [`RunMeta`]: format, run id, seed, the embedder's configuration and budget |
//! | `steps.jsonl` | one [`StepRecord`] per line, appended as steps complete |
//! | `snapshot.json` | the archive after the first `records` log lines, replaced atomically |
//!
//! **One writer.** [`RunDir::open`] takes an exclusive advisory lock on `run.lock` before it
//! reads or writes anything, and holds it until the `RunDir` is dropped; a second opener, in
//! this process or another, gets [`ArchiveError::Locked`] naming the holder's process id. The
//! operating system releases the lock when its process dies, so a killed run never leaves a
//! stale lock behind.
//!
//! **A log that proves itself.** Each line carries the run's id, its step number and a
//! checksum of the record, and is one `write` of a whole line followed by a flush (and an
//! `fsync` in [`SyncMode::Fsync`]), so a crash can only tear the last line; opening the
//! directory drops a torn last line and truncates the file before anything is appended.
//! Anything else — a line that does not parse, a checksum that does not match, a line of
//! another run, a repeated, missing or out-of-order step — is reported as
//! [`ArchiveError::CorruptLog`] with the number of intact records before it, which
//! [`RunDir::keep_valid_prefix`] keeps. Snapshots are written to a temporary file, synced and
//! renamed over the old one, so a snapshot is always whole.
//!
//! **Resume and extend.** To resume a killed run, build the engine again with the same seed,
//! configuration and a fresh archive, and hand it the reopened run directory: the engine
//! replays the recorded steps and computes the rest. The configuration must match; the budget
//! ([`RunMeta::with_budget`]) may change, which is how a finished run is continued with more
//! evaluations ([`RunDir::extended_from`] tells that it happened). [`RunDir::restore`]
//! rebuilds the archive without running anything.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use kf_core::{Archive, BoxError, Checkpoint, ChildRecord, StepRecord};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::ArchiveError;

const META_FILE: &str = "run.json";
const LOG_FILE: &str = "steps.jsonl";
const SNAPSHOT_FILE: &str = "snapshot.json";
const LOCK_FILE: &str = "run.lock";
/// Format 2: locked directories, run ids and checksummed log lines.
const FORMAT: u32 = 2;

/// The metadata of a run, kept in `run.json`. Reopening a run directory with another format,
/// seed or configuration is refused, so a resumed run cannot silently mix two configurations;
/// the budget may differ (the run is then extended or, if it is smaller, stops earlier).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// Format version of the run directory.
    pub format: u32,
    /// The run's id, drawn when the directory is created; every log line carries it, so a
    /// line copied from another run is recognised. Empty in a `RunMeta` not yet opened.
    #[serde(default)]
    pub run_id: String,
    /// The engine seed.
    pub seed: u64,
    /// The embedder's configuration (anything serializable): what may not change on resume.
    pub config: serde_json::Value,
    /// The budget (anything serializable): what may change on resume.
    #[serde(default)]
    pub budget: serde_json::Value,
}

impl RunMeta {
    /// Metadata for a run with `seed` and a serializable `config`, with no budget recorded.
    pub fn new(seed: u64, config: &impl Serialize) -> Result<Self, ArchiveError> {
        let config = serde_json::to_value(config)
            .map_err(|e| ArchiveError::InvalidConfig(format!("unserializable config: {e}")))?;
        Ok(RunMeta {
            format: FORMAT,
            run_id: String::new(),
            seed,
            config,
            budget: serde_json::Value::Null,
        })
    }

    /// Records the run's budget (evaluations, time, …). Unlike the configuration, it may differ
    /// when the directory is reopened: that is how a finished run is extended.
    pub fn with_budget(mut self, budget: &impl Serialize) -> Result<Self, ArchiveError> {
        self.budget = serde_json::to_value(budget)
            .map_err(|e| ArchiveError::InvalidConfig(format!("unserializable budget: {e}")))?;
        Ok(self)
    }

    /// What makes this run another run than `found` (format, seed or configuration), if
    /// anything.
    fn conflict_with(&self, found: &RunMeta) -> Option<String> {
        if found.format != self.format {
            Some(format!(
                "it was written in run-directory format {} and this version writes format {}; \
                 start the run in a new directory",
                found.format, self.format
            ))
        } else if found.seed != self.seed {
            Some(format!("seed {} here, {} asked", found.seed, self.seed))
        } else if found.config != self.config {
            Some(format!(
                "configuration {} here, {} asked",
                found.config, self.config
            ))
        } else {
            None
        }
    }
}

/// A fresh run id: unique enough that two runs, even of the same configuration on the same
/// machine, never share one.
fn new_run_id(meta: &RunMeta) -> String {
    let mut h = blake3::Hasher::new();
    h.update(&meta.seed.to_le_bytes());
    h.update(meta.config.to_string().as_bytes());
    h.update(&std::process::id().to_le_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    h.update(&now.to_le_bytes());
    h.finalize().to_hex()[..16].to_owned()
}

/// When the step log reaches the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    /// Each record is handed to the operating system before `record` returns: it survives the
    /// process being killed, not a power cut.
    #[default]
    Flush,
    /// Each record is also `fsync`ed: it survives a power cut, at the price of a disk flush per
    /// step.
    Fsync,
}

/// Options of a [`RunDir`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunDirOptions {
    /// Write a snapshot of the archive every this many records (0: only when the run
    /// finishes).
    pub snapshot_every: u64,
    /// Durability of the step log.
    pub sync: SyncMode,
}

impl Default for RunDirOptions {
    fn default() -> Self {
        RunDirOptions {
            snapshot_every: 100,
            sync: SyncMode::Flush,
        }
    }
}

#[derive(Serialize)]
struct SnapshotOut<'a, A> {
    records: u64,
    archive: &'a A,
}

#[derive(Deserialize)]
struct SnapshotIn<A> {
    records: u64,
    archive: A,
}

/// The descriptor space a snapshot's archive names, if it names one (grid archives do).
#[derive(Deserialize)]
struct SnapshotSpace {
    archive: ArchiveSpace,
}

#[derive(Deserialize)]
struct ArchiveSpace {
    #[serde(default)]
    space: Option<kf_core::DescriptorSpace>,
}

#[derive(Deserialize)]
struct SnapshotHeader {
    records: u64,
}

/// A run directory: the crash-safe [`Checkpoint`] of the engine.
///
/// # Example
///
/// ```
/// use kf_archive::{EliteArchive, RunDir, RunMeta};
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator};
///
/// let dir = tempfile::tempdir()?;
/// let run = |dir: &std::path::Path| -> Result<EliteArchive, Box<dyn std::error::Error>> {
///     let classifier = SyntheticClassifier::new(4);
///     let archive = EliteArchive::new(classifier.space().clone())?;
///     let checkpoint = RunDir::open(dir, RunMeta::new(9, &"sigma=0.1")?)?;
///     let result = Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
///         .seeds(vec![synthetic_seed(6)])
///         .seed(9)
///         .budget(Budget::evaluations(150))
///         .checkpoint(checkpoint)
///         .run_blocking()?;
///     Ok(result.archive)
/// };
/// let first = run(dir.path())?;
/// // Running again replays the recorded steps instead of recomputing them.
/// let again = run(dir.path())?;
/// assert_eq!(first, again);
/// // The archive can also be rebuilt from the directory alone.
/// let reopened = RunDir::open(dir.path(), RunMeta::new(9, &"sigma=0.1")?)?;
/// let restored = reopened.restore(EliteArchive::new(first.space().clone())?)?;
/// assert_eq!(restored, first);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RunDir {
    root: PathBuf,
    meta: RunMeta,
    /// The budget `run.json` held before this open changed it.
    extended_from: Option<serde_json::Value>,
    options: RunDirOptions,
    /// Whether the new budget is still to be applied (see `apply_extension`).
    extension_pending: bool,
    /// Byte offset just past each record's line.
    line_ends: Vec<u64>,
    /// Holds the directory's exclusive lock for as long as the `RunDir` lives.
    _lock: File,
    log: File,
    /// Records in the log.
    count: u64,
    /// Records covered by the snapshot on disk.
    snapshot_at: Option<u64>,
    buf: Vec<u8>,
}

impl RunDir {
    /// Opens (or creates) a run directory with default options. See [`RunDir::open_with`].
    pub fn open(root: impl AsRef<Path>, meta: RunMeta) -> Result<Self, ArchiveError> {
        Self::open_with(root, meta, RunDirOptions::default())
    }

    /// Opens (or creates) a run directory: takes its lock, writes `run.json` (or checks that
    /// the one there has the same format, seed and configuration, and records a changed
    /// budget), validates the step log, drops a torn last line, and discards a snapshot that is
    /// ahead of the log.
    ///
    /// # Errors
    ///
    /// [`ArchiveError::Locked`] when another `RunDir` (in any process) has the directory open,
    /// [`ArchiveError::MetaMismatch`] for another run's directory, [`ArchiveError::CorruptLog`]
    /// for a damaged log, and I/O or JSON errors.
    pub fn open_with(
        root: impl AsRef<Path>,
        mut meta: RunMeta,
        options: RunDirOptions,
    ) -> Result<Self, ArchiveError> {
        let root = root.as_ref().to_path_buf();
        fs::create_dir_all(&root).map_err(|e| ArchiveError::io("creating", &root, e))?;
        let lock = lock_dir(&root)?;
        let meta_path = root.join(META_FILE);
        let mut extended_from = None;
        match read_optional(&meta_path)? {
            Some(bytes) => {
                let found: RunMeta = serde_json::from_slice(&bytes)
                    .map_err(|e| ArchiveError::json(&meta_path, e))?;
                if let Some(what) = meta.conflict_with(&found) {
                    return Err(ArchiveError::MetaMismatch { path: root, what });
                }
                meta.run_id = found.run_id.clone();
                if found.budget != meta.budget {
                    // Applied when the engine starts (`Checkpoint::recorded`), so that a caller
                    // who refuses the new budget after looking at the log changes nothing.
                    extended_from = Some(found.budget);
                }
            }
            None => {
                meta.run_id = new_run_id(&meta);
                let bytes = serde_json::to_vec_pretty(&meta)
                    .map_err(|e| ArchiveError::json(&meta_path, e))?;
                write_atomic(&root, &meta_path, &bytes)?;
            }
        }

        let log_path = root.join(LOG_FILE);
        let scan = scan_log(&log_path, &meta.run_id)?;
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| ArchiveError::io("opening", &log_path, e))?;
        if scan.torn {
            log.set_len(scan.good_len)
                .map_err(|e| ArchiveError::io("truncating", &log_path, e))?;
            log.sync_all()
                .map_err(|e| ArchiveError::io("syncing", &log_path, e))?;
        }
        let count = scan.records.len() as u64;

        let snapshot_path = root.join(SNAPSHOT_FILE);
        let _ = fs::remove_file(tmp_path(&snapshot_path));
        let snapshot_at = match read_optional(&snapshot_path)? {
            Some(bytes) => {
                let header: SnapshotHeader = serde_json::from_slice(&bytes)
                    .map_err(|e| ArchiveError::json(&snapshot_path, e))?;
                if header.records > count {
                    // Ahead of the log (the log lost records it had not synced): the run will
                    // record those steps again, and the next snapshot replaces this one.
                    fs::remove_file(&snapshot_path)
                        .map_err(|e| ArchiveError::io("removing", &snapshot_path, e))?;
                    None
                } else {
                    Some(header.records)
                }
            }
            None => None,
        };
        Ok(RunDir {
            root,
            extension_pending: extended_from.is_some(),
            line_ends: scan.line_ends,
            meta,
            extended_from,
            options,
            _lock: lock,
            log,
            count,
            snapshot_at,
            buf: Vec::new(),
        })
    }

    /// Repairs a run directory whose log [`RunDir::open`] reported as corrupt: keeps the intact
    /// records before the first damaged line, drops everything after it and the snapshot
    /// (which may cover dropped records), and returns how many records were kept. The run can
    /// then be resumed from those records. Takes the directory's lock like `open`.
    pub fn keep_valid_prefix(root: impl AsRef<Path>) -> Result<u64, ArchiveError> {
        let root = root.as_ref();
        let _lock = lock_dir(root)?;
        let meta = read_meta(root)?;
        let log_path = root.join(LOG_FILE);
        let (good_len, kept) = match scan_log(&log_path, &meta.run_id) {
            Ok(scan) => (scan.good_len, scan.records.len() as u64),
            Err(ArchiveError::CorruptLog {
                intact, intact_len, ..
            }) => (intact_len, intact),
            Err(e) => return Err(e),
        };
        let log = OpenOptions::new()
            .write(true)
            .open(&log_path)
            .map_err(|e| ArchiveError::io("opening", &log_path, e))?;
        log.set_len(good_len)
            .and_then(|()| log.sync_all())
            .map_err(|e| ArchiveError::io("truncating", &log_path, e))?;
        let snapshot_path = root.join(SNAPSHOT_FILE);
        match fs::remove_file(&snapshot_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(ArchiveError::io("removing", &snapshot_path, e)),
        }
        Ok(kept)
    }

    /// The budget the directory recorded before this open changed it: `Some` when the run was
    /// reopened with another budget (extended, usually), `None` for a new run or a resume with
    /// the same budget.
    ///
    /// The new budget takes effect when the engine starts from this directory: then `run.json`
    /// records it, and the steps the old budget shaped ([`StepRecord::budget_bound`]) are
    /// dropped from the log so that the run recomputes them as a run with the new budget from
    /// the start would have. Until then nothing on disk has changed, so a caller may look at
    /// the log ([`RunDir::read_records`]) and refuse the new budget.
    pub fn extended_from(&self) -> Option<&serde_json::Value> {
        self.extended_from.as_ref()
    }

    /// Records the new budget and drops the records the old budget shaped (see
    /// [`RunDir::extended_from`]).
    fn apply_extension(&mut self) -> Result<(), ArchiveError> {
        if !self.extension_pending {
            return Ok(());
        }
        let log_path = self.root.join(LOG_FILE);
        let records = self.read_records()?;
        if let Some(first) = records.iter().position(|r| r.budget_bound) {
            let keep_len = first
                .checked_sub(1)
                .and_then(|last_kept| self.line_ends.get(last_kept))
                .copied()
                .unwrap_or(0);
            self.log
                .set_len(keep_len)
                .and_then(|()| self.log.sync_all())
                .map_err(|e| ArchiveError::io("truncating", &log_path, e))?;
            self.count = first as u64;
            self.line_ends.truncate(first);
            if self.snapshot_at.is_some_and(|at| at > self.count) {
                let snapshot_path = self.root.join(SNAPSHOT_FILE);
                fs::remove_file(&snapshot_path)
                    .map_err(|e| ArchiveError::io("removing", &snapshot_path, e))?;
                self.snapshot_at = None;
            }
        }
        let meta_path = self.root.join(META_FILE);
        let bytes =
            serde_json::to_vec_pretty(&self.meta).map_err(|e| ArchiveError::json(&meta_path, e))?;
        write_atomic(&self.root, &meta_path, &bytes)?;
        self.extension_pending = false;
        Ok(())
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The run's metadata.
    pub fn meta(&self) -> &RunMeta {
        &self.meta
    }

    /// Records in the step log.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// True when the step log is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records covered by the snapshot on disk, if there is one.
    pub fn snapshot_records(&self) -> Option<u64> {
        self.snapshot_at
    }

    /// Reads every record of the step log, in order.
    pub fn read_records(&self) -> Result<Vec<StepRecord>, ArchiveError> {
        Ok(scan_log(&self.root.join(LOG_FILE), &self.meta.run_id)?.records)
    }

    /// Appends one record to the log (one write of a whole line, then a flush or an fsync).
    /// Records must come in step order from 0, as the engine writes them.
    pub fn append(&mut self, record: &StepRecord) -> Result<(), ArchiveError> {
        self.apply_extension()?;
        let path = || self.root.join(LOG_FILE);
        if record.step != self.count {
            return Err(ArchiveError::InvalidConfig(format!(
                "{}: step {} appended where step {} comes next",
                path().display(),
                record.step,
                self.count
            )));
        }
        let body = serde_json::to_string(record).map_err(|e| ArchiveError::json(path(), e))?;
        let line = LineOut {
            run: &self.meta.run_id,
            step: record.step,
            sum: &checksum(body.as_bytes()),
            record: &RawValue::from_string(body).map_err(|e| ArchiveError::json(path(), e))?,
        };
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, &line).map_err(|e| ArchiveError::json(path(), e))?;
        self.buf.push(b'\n');
        self.log
            .write_all(&self.buf)
            .and_then(|()| self.log.flush())
            .map_err(|e| ArchiveError::io("appending to", path(), e))?;
        if self.options.sync == SyncMode::Fsync {
            self.log
                .sync_data()
                .map_err(|e| ArchiveError::io("syncing", path(), e))?;
        }
        self.count += 1;
        let end = self.line_ends.last().copied().unwrap_or(0) + self.buf.len() as u64;
        self.line_ends.push(end);
        Ok(())
    }

    /// Writes a snapshot of `archive` as the state after the records logged so far, atomically
    /// (temporary file, fsync, rename, directory fsync).
    pub fn snapshot<A: Serialize>(&mut self, archive: &A) -> Result<(), ArchiveError> {
        self.apply_extension()?;
        let path = self.root.join(SNAPSHOT_FILE);
        let bytes = serde_json::to_vec(&SnapshotOut {
            records: self.count,
            archive,
        })
        .map_err(|e| ArchiveError::json(&path, e))?;
        write_atomic(&self.root, &path, &bytes)?;
        self.snapshot_at = Some(self.count);
        Ok(())
    }

    /// Rebuilds the archive of the run: the latest snapshot (or `empty` when there is none),
    /// then the log records after it, each insertion checked against its recorded outcome.
    /// `empty` must be a fresh archive configured as the run's; the result equals the archive
    /// of the run after its last recorded step.
    pub fn restore<A>(&self, empty: A) -> Result<A, ArchiveError>
    where
        A: Archive + DeserializeOwned,
    {
        let records = self.read_records()?;
        let snapshot_path = self.root.join(SNAPSHOT_FILE);
        let snapshot = match read_optional(&snapshot_path)? {
            Some(bytes) => {
                // A snapshot names its descriptor space; one of another space is refused
                // before the archive is built, so a hostile snapshot cannot make it allocate
                // the cells of a huge space.
                let header: SnapshotSpace = serde_json::from_slice(&bytes)
                    .map_err(|e| ArchiveError::json(&snapshot_path, e))?;
                if let Some(space) = header.archive.space {
                    if &space != empty.space() {
                        return Err(ArchiveError::InvalidSnapshot(format!(
                            "{}: the snapshot's descriptor space is not the run's",
                            snapshot_path.display()
                        )));
                    }
                }
                let s: SnapshotIn<A> = serde_json::from_slice(&bytes)
                    .map_err(|e| ArchiveError::json(&snapshot_path, e))?;
                (s.records <= records.len() as u64).then_some(s)
            }
            None => None,
        };
        let (skip, mut archive) = match snapshot {
            Some(s) => (s.records as usize, s.archive),
            None => (0, empty),
        };
        for record in &records[skip..] {
            replay(&mut archive, record)?;
        }
        Ok(archive)
    }
}

/// Re-inserts the judged children of one record, checking each outcome.
/// What [`read_run`] found in a run directory.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLog {
    /// The run's metadata (`run.json`).
    pub meta: RunMeta,
    /// The intact records of the step log, in step order.
    pub records: Vec<StepRecord>,
    /// Whether the log ended in a line still being written (or torn by a crash), which was
    /// left out.
    pub partial_tail: bool,
}

/// Reads a run directory without taking its lock and without changing anything in it: the
/// metadata and every intact record of the step log. For readers such as the run explorer,
/// which look at a directory while a search holds it: a last line still being written is left
/// out (see [`RunLog::partial_tail`]) rather than reported.
///
/// # Errors
///
/// I/O and JSON errors for `run.json`, and [`ArchiveError::CorruptLog`] for a damaged log
/// (anything but an unfinished last line).
pub fn read_run(root: impl AsRef<Path>) -> Result<RunLog, ArchiveError> {
    let root = root.as_ref();
    let meta = read_meta(root)?;
    let scan = scan_log(&root.join(LOG_FILE), &meta.run_id)?;
    Ok(RunLog {
        meta,
        records: scan.records,
        partial_tail: scan.torn,
    })
}

fn replay<A: Archive>(archive: &mut A, record: &StepRecord) -> Result<(), ArchiveError> {
    for child in &record.children {
        if let ChildRecord::Judged { elite, outcome } = child {
            let now =
                archive
                    .insert(kf_core::Elite::clone(elite))
                    .map_err(|e| ArchiveError::Replay {
                        step: record.step,
                        source: Box::new(e),
                    })?;
            if now != *outcome {
                return Err(ArchiveError::ReplayMismatch {
                    step: record.step,
                    what: format!(
                        "candidate {} was recorded as {outcome:?} but is now {now:?}",
                        elite.candidate.id
                    ),
                });
            }
        }
    }
    Ok(())
}

impl<A: Serialize> Checkpoint<A> for RunDir {
    fn recorded(&mut self) -> Result<Vec<StepRecord>, BoxError> {
        self.apply_extension()?;
        Ok(self.read_records()?)
    }

    fn record(&mut self, step: &StepRecord, archive: &A) -> Result<(), BoxError> {
        self.append(step)?;
        let every = self.options.snapshot_every;
        if every > 0 && self.count.is_multiple_of(every) {
            self.snapshot(archive)?;
        }
        Ok(())
    }

    fn finish(&mut self, archive: &A) -> Result<(), BoxError> {
        if self.snapshot_at != Some(self.count) {
            self.snapshot(archive)?;
        }
        Ok(())
    }
}

/// One line of the step log as written.
#[derive(Serialize)]
struct LineOut<'a> {
    run: &'a str,
    step: u64,
    sum: &'a str,
    record: &'a RawValue,
}

/// One line of the step log as read: the record stays raw until its checksum is verified.
#[derive(Deserialize)]
struct LineIn<'a> {
    run: String,
    step: u64,
    sum: String,
    #[serde(borrow)]
    record: &'a RawValue,
}

/// The checksum of a record's JSON text: 64 bits of BLAKE3, enough to catch any damage that
/// still parses (a truncated number, an edited field).
fn checksum(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex()[..16].to_owned()
}

/// What a scan of the step log found.
struct LogScan {
    records: Vec<StepRecord>,
    /// Byte offset just past each record's line.
    line_ends: Vec<u64>,
    /// Bytes up to the end of the last good line.
    good_len: u64,
    /// Whether bytes after it (a torn last line) must be dropped.
    torn: bool,
}

/// Why a line of the log is not the next record of this run (the `what` of
/// [`ArchiveError::CorruptLog`]).
#[derive(Debug, thiserror::Error)]
enum LineDamage {
    #[error("the write of this line did not finish")]
    Unfinished,
    #[error("it is not a log line: {0}")]
    NotALogLine(#[source] serde_json::Error),
    #[error("it belongs to run {found}, this directory is run {expected}")]
    OtherRun { found: String, expected: String },
    #[error("its checksum does not match its record")]
    Checksum,
    #[error("its record does not parse: {0}")]
    Record(#[source] serde_json::Error),
    #[error("it is labelled step {label} but records step {recorded}")]
    Mislabelled { label: u64, recorded: u64 },
    #[error("it records step {step} where step {expected} comes next ({})", if step < expected { "repeated or out of order" } else { "records are missing before it" })]
    OutOfOrder { step: u64, expected: u64 },
}

/// Why a complete line of the log is not the next record of this run.
fn check_line(bytes: &[u8], run_id: &str, expected: u64) -> Result<StepRecord, LineDamage> {
    let line: LineIn<'_> = serde_json::from_slice(bytes).map_err(LineDamage::NotALogLine)?;
    if line.run != run_id {
        return Err(LineDamage::OtherRun {
            found: line.run,
            expected: run_id.to_owned(),
        });
    }
    if checksum(line.record.get().as_bytes()) != line.sum {
        return Err(LineDamage::Checksum);
    }
    let record: StepRecord = serde_json::from_str(line.record.get()).map_err(LineDamage::Record)?;
    if record.step != line.step {
        return Err(LineDamage::Mislabelled {
            label: line.step,
            recorded: record.step,
        });
    }
    if line.step != expected {
        return Err(LineDamage::OutOfOrder {
            step: line.step,
            expected,
        });
    }
    Ok(record)
}

fn scan_log(path: &Path, run_id: &str) -> Result<LogScan, ArchiveError> {
    let bytes = read_optional(path)?.unwrap_or_default();
    let mut records = Vec::new();
    let mut line_ends = Vec::new();
    let mut start = 0;
    let mut line = 0u64;
    while start < bytes.len() {
        line += 1;
        let (end, complete) = match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(p) => (start + p, true),
            None => (bytes.len(), false),
        };
        let is_last = end + 1 >= bytes.len();
        line_ends.push(end as u64 + 1);
        let checked = if complete {
            check_line(&bytes[start..end], run_id, records.len() as u64)
        } else {
            Err(LineDamage::Unfinished)
        };
        match checked {
            Ok(r) => records.push(r),
            // Only a crash mid-write can damage the last line, and only so that it does not
            // parse (or has no newline): drop it. A last line that parses but is wrong is
            // damage of another kind.
            Err(_)
                if is_last
                    && (!complete
                        || serde_json::from_slice::<LineIn<'_>>(&bytes[start..end]).is_err()) =>
            {
                line_ends.truncate(records.len());
                return Ok(LogScan {
                    records,
                    line_ends,
                    good_len: start as u64,
                    torn: true,
                });
            }
            Err(what) => {
                return Err(ArchiveError::CorruptLog {
                    path: path.to_path_buf(),
                    line,
                    what: what.to_string(),
                    intact: records.len() as u64,
                    intact_len: start as u64,
                })
            }
        }
        start = end + 1;
    }
    Ok(LogScan {
        records,
        line_ends,
        good_len: bytes.len() as u64,
        torn: false,
    })
}

/// Takes the exclusive lock of a run directory and writes this process's id into the lock
/// file, or says which process holds it.
fn lock_dir(root: &Path) -> Result<File, ArchiveError> {
    let path = root.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| ArchiveError::io("opening", &path, e))?;
    // A lock that names this very process may be a copy of a closed descriptor that a child
    // process forked by another thread still holds until it executes its program; such a
    // copy goes away within moments, so wait for it briefly instead of failing.
    let own = std::process::id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.rewind();
                let _ = file.read_to_string(&mut text);
                let holder = text.trim().parse().ok();
                if holder == Some(own) && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
                return Err(ArchiveError::Locked {
                    path: root.to_path_buf(),
                    holder,
                });
            }
            Err(TryLockError::Error(e)) => return Err(ArchiveError::io("locking", &path, e)),
        }
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| write!(file, "{}", std::process::id()))
        .and_then(|()| file.flush())
        .map_err(|e| ArchiveError::io("writing", &path, e))?;
    Ok(file)
}

/// The `run.json` of an existing run directory; a missing one is an I/O error ("reading",
/// not found).
fn read_meta(root: &Path) -> Result<RunMeta, ArchiveError> {
    let meta_path = root.join(META_FILE);
    let bytes = read_optional(&meta_path)?.ok_or_else(|| ArchiveError::Io {
        op: "reading",
        path: meta_path.clone(),
        source: std::io::ErrorKind::NotFound.into(),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| ArchiveError::json(&meta_path, e))
}

pub(crate) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, ArchiveError> {
    match File::open(path) {
        Ok(mut f) => {
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)
                .map_err(|e| ArchiveError::io("reading", path, e))?;
            Ok(Some(bytes))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ArchiveError::io("opening", path, e)),
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Writes `bytes` to `path` so that readers see the old or the new content, never a mix.
pub(crate) fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), ArchiveError> {
    let tmp = tmp_path(path);
    let mut f = File::create(&tmp).map_err(|e| ArchiveError::io("creating", &tmp, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| ArchiveError::io("writing", &tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| ArchiveError::io("renaming", &tmp, e))?;
    // Persist the rename itself; directories cannot be opened for syncing everywhere.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
