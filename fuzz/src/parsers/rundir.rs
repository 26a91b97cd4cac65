//! Run directories (`kf_archive::RunDir`): a directory whose `run.json`, `steps.jsonl` and
//! `snapshot.json` are the fuzz input, opened (lock, metadata check, log validation with its
//! checksums, torn-line repair, snapshot header), read back (every step record) and restored
//! into an archive (snapshot plus replayed records). A log reported corrupt is repaired with
//! `RunDir::keep_valid_prefix`, after which it must open.
//!
//! Input: `run.json NUL steps.jsonl NUL snapshot.json`; a missing part is a missing file. The
//! directory is reopened with the seed and configuration its `run.json` names, so inputs get
//! past the metadata check. Files live under `$TMPDIR` (the script points it at /dev/shm).
//! Bounded to 64 KiB.

use std::path::PathBuf;
use std::sync::OnceLock;

use crate::{split_parts, MAX_INPUT};
use kf_archive::{ArchiveError, EliteArchive, RunDir, RunMeta};
use kf_core::DescriptorSpace;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("kf-fuzz-rundir-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("creating the fuzz run directory");
        d
    })
}

/// The metadata to open with: the one `run.json` holds when it parses, so that the open gets
/// past the metadata check; a fixed one otherwise.
fn meta_for(run_json: Option<&[u8]>) -> (RunMeta, bool) {
    match run_json.and_then(|b| serde_json::from_slice::<RunMeta>(b).ok()) {
        Some(found) => {
            let mut meta = RunMeta::new(found.seed, &found.config).expect("json config");
            meta.budget = found.budget;
            (meta, true)
        }
        None => (RunMeta::new(7, &"fuzz").expect("string config"), false),
    }
}

fn open_and_read(meta: &RunMeta) -> Result<(), ArchiveError> {
    let run = RunDir::open(dir(), meta.clone())?;
    let records = run.read_records()?;
    assert_eq!(records.len() as u64, run.len());
    if let Some(at) = run.snapshot_records() {
        assert!(at <= run.len());
    }
    let empty = EliteArchive::new(DescriptorSpace::kernel_default()).expect("default space");
    let _ = run.restore(empty);
    Ok(())
}

/// The target: one input.
pub fn run(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let parts = split_parts(data, 3);
    let root = dir();
    for (name, part) in ["run.json", "steps.jsonl", "snapshot.json"]
        .iter()
        .zip(&parts)
    {
        let path = root.join(name);
        match part {
            Some(bytes) => std::fs::write(&path, bytes).expect("writing a fuzz file"),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let (meta, meta_parsed) = meta_for(parts[0]);
    match open_and_read(&meta) {
        Err(ArchiveError::CorruptLog { intact, .. }) if meta_parsed => {
            // The recovery the error message offers must work.
            let kept = RunDir::keep_valid_prefix(root).expect("keep_valid_prefix failed");
            assert_eq!(kept, intact);
            let run = RunDir::open(root, meta).expect("the repaired directory does not open");
            assert_eq!(run.len(), kept);
        }
        Err(ArchiveError::Locked { .. }) => panic!("the lock outlived its RunDir"),
        _ => {}
    }
}
