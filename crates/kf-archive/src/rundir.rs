//! Crash-safe run directories: an append-only step log, atomic archive snapshots and the run's
//! metadata, implementing [`kf_core::Checkpoint`].
//!
//! Layout of a run directory:
//!
//! | file | content |
//! |---|---|
//! | `run.json` | [`RunMeta`]: format, seed and the embedder's configuration |
//! | `steps.jsonl` | one [`StepRecord`] per line, appended as steps complete |
//! | `snapshot.json` | the archive after the first `records` log lines, replaced atomically |
//!
//! Each record is one `write` of a whole line followed by a flush (and an `fsync` in
//! [`SyncMode::Fsync`]), so a crash can only tear the last line; opening the directory drops a
//! torn last line and truncates the file before anything is appended. A damaged line anywhere
//! else is reported as [`ArchiveError::CorruptLog`]. Snapshots are written to a temporary file,
//! synced and renamed over the old one, so a snapshot is always whole.
//!
//! To resume a killed run, build the engine again with the same seed, configuration and a fresh
//! archive, and hand it the reopened run directory: the engine replays the recorded steps and
//! computes the rest. [`RunDir::restore`] rebuilds the archive without running anything.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kf_core::{Archive, BoxError, Checkpoint, ChildRecord, StepRecord};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ArchiveError;

const META_FILE: &str = "run.json";
const LOG_FILE: &str = "steps.jsonl";
const SNAPSHOT_FILE: &str = "snapshot.json";
const FORMAT: u32 = 1;

/// The metadata of a run, kept in `run.json`. Reopening a run directory with other metadata is
/// refused, so a resumed run cannot silently mix two configurations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    /// Format version of the run directory.
    pub format: u32,
    /// The engine seed.
    pub seed: u64,
    /// The embedder's configuration (anything serializable).
    pub config: serde_json::Value,
}

impl RunMeta {
    /// Metadata for a run with `seed` and a serializable `config`.
    pub fn new(seed: u64, config: &impl Serialize) -> Result<Self, ArchiveError> {
        let config = serde_json::to_value(config)
            .map_err(|e| ArchiveError::InvalidConfig(format!("unserializable config: {e}")))?;
        Ok(RunMeta {
            format: FORMAT,
            seed,
            config,
        })
    }
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
    options: RunDirOptions,
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

    /// Opens (or creates) a run directory: writes `run.json` (or checks that the one there has
    /// the same seed and configuration), drops a torn last line of the step log, and discards
    /// a snapshot that is ahead of the log.
    pub fn open_with(
        root: impl AsRef<Path>,
        meta: RunMeta,
        options: RunDirOptions,
    ) -> Result<Self, ArchiveError> {
        let root = root.as_ref().to_path_buf();
        fs::create_dir_all(&root).map_err(|e| ArchiveError::io("creating", &root, e))?;
        let meta_path = root.join(META_FILE);
        match read_optional(&meta_path)? {
            Some(bytes) => {
                let found: RunMeta = serde_json::from_slice(&bytes)
                    .map_err(|e| ArchiveError::json(&meta_path, e))?;
                let what = if found.format != meta.format {
                    Some(format!(
                        "format {} here, {} asked",
                        found.format, meta.format
                    ))
                } else if found.seed != meta.seed {
                    Some(format!("seed {} here, {} asked", found.seed, meta.seed))
                } else if found.config != meta.config {
                    Some(format!(
                        "configuration {} here, {} asked",
                        found.config, meta.config
                    ))
                } else {
                    None
                };
                if let Some(what) = what {
                    return Err(ArchiveError::MetaMismatch { path: root, what });
                }
            }
            None => {
                let bytes = serde_json::to_vec_pretty(&meta)
                    .map_err(|e| ArchiveError::json(&meta_path, e))?;
                write_atomic(&root, &meta_path, &bytes)?;
            }
        }

        let log_path = root.join(LOG_FILE);
        let scan = scan_log(&log_path)?;
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
            meta,
            options,
            log,
            count,
            snapshot_at,
            buf: Vec::new(),
        })
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
        Ok(scan_log(&self.root.join(LOG_FILE))?.records)
    }

    /// Appends one record to the log (one write of a whole line, then a flush or an fsync).
    pub fn append(&mut self, record: &StepRecord) -> Result<(), ArchiveError> {
        let path = || self.root.join(LOG_FILE);
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, record).map_err(|e| ArchiveError::json(path(), e))?;
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
        Ok(())
    }

    /// Writes a snapshot of `archive` as the state after the records logged so far, atomically
    /// (temporary file, fsync, rename, directory fsync).
    pub fn snapshot<A: Serialize>(&mut self, archive: &A) -> Result<(), ArchiveError> {
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

/// What a scan of the step log found.
struct LogScan {
    records: Vec<StepRecord>,
    /// Bytes up to the end of the last good line.
    good_len: u64,
    /// Whether bytes after it (a torn or corrupt last line) must be dropped.
    torn: bool,
}

fn scan_log(path: &Path) -> Result<LogScan, ArchiveError> {
    let bytes = read_optional(path)?.unwrap_or_default();
    let mut records = Vec::new();
    let mut start = 0;
    let mut line = 0u64;
    while start < bytes.len() {
        line += 1;
        let (end, complete) = match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(p) => (start + p, true),
            None => (bytes.len(), false),
        };
        let is_last = end + 1 >= bytes.len();
        let parsed = if complete {
            serde_json::from_slice::<StepRecord>(&bytes[start..end])
        } else {
            // No newline: the write of this line did not finish.
            serde_json::from_slice::<StepRecord>(b"")
        };
        match parsed {
            Ok(r) => records.push(r),
            Err(_) if is_last => {
                return Ok(LogScan {
                    records,
                    good_len: start as u64,
                    torn: true,
                })
            }
            Err(source) => {
                return Err(ArchiveError::CorruptLog {
                    path: path.to_path_buf(),
                    line,
                    source,
                })
            }
        }
        start = end + 1;
    }
    Ok(LogScan {
        records,
        good_len: bytes.len() as u64,
        torn: false,
    })
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, ArchiveError> {
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
fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), ArchiveError> {
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
