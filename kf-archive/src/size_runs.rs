//! Runs at several problem sizes under one folder: `<out>/sizes.json` lists each size's run
//! directory (a folder under `<out>`, named by its sizes), so that tools reading a search
//! (`kf export`) find every size's best kernel from the one folder.
//!
//! ```json
//! {"format": 1, "runs": [{"dir": "M=64,N=64,K=64", "sizes": {"M": 64, "N": 64, "K": 64}}]}
//! ```
//!
//! [`SizeRuns::record`] updates the file under a lock (`sizes.json.lock`) and replaces it
//! atomically, so that concurrent writers lose no entry and a reader never sees half a file.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::error::ArchiveError;
use crate::rundir::write_atomic;

/// The index file's name in the parent folder.
pub const SIZE_RUNS_FILE: &str = "sizes.json";

/// One size's run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeRun {
    /// Its run directory, relative to the parent folder.
    pub dir: PathBuf,
    /// The sizes it ran at, in the task's order.
    pub sizes: IndexMap<String, i64>,
}

/// The runs of one folder, one per size, in the order they were first recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeRuns {
    format: u32,
    runs: Vec<SizeRun>,
}

impl SizeRuns {
    /// The runs recorded in `parent/sizes.json`; `None` when there is no such file.
    ///
    /// # Errors
    ///
    /// [`ArchiveError::Io`] when the file cannot be read, [`ArchiveError::BadSizeIndex`] when it is
    /// not a size index, or an entry's folder leaves `parent`.
    pub fn read(parent: &Path) -> Result<Option<SizeRuns>, ArchiveError> {
        let path = parent.join(SIZE_RUNS_FILE);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ArchiveError::io("reading", &path, e)),
        };
        let runs: SizeRuns =
            serde_json::from_str(&text).map_err(|e| ArchiveError::BadSizeIndex {
                path: path.clone(),
                reason: format!("not a size index: {e}"),
            })?;
        for run in &runs.runs {
            let plain = run
                .dir
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !plain || run.dir.as_os_str().is_empty() {
                return Err(ArchiveError::BadSizeIndex {
                    path,
                    reason: format!(
                        "run folder `{}` is not a folder inside {}",
                        run.dir.display(),
                        parent.display()
                    ),
                });
            }
        }
        Ok(Some(runs))
    }

    /// The runs, in the order first recorded.
    pub fn runs(&self) -> &[SizeRun] {
        &self.runs
    }

    /// The last run recorded by this value: its folder (under the parent) and its sizes as
    /// `M=64,N=64,K=64`.
    pub fn last(&self) -> Option<(PathBuf, String)> {
        self.runs.last().map(|r| {
            let text = r
                .sizes
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            (r.dir.clone(), text)
        })
    }

    /// Records the run in `dir` (a folder directly or deeper under `parent`) at `sizes` in
    /// `parent/sizes.json`, replacing an entry with the same sizes; keeps the entries other
    /// writers recorded meanwhile.
    ///
    /// # Errors
    ///
    /// [`ArchiveError::InvalidConfig`] when `dir` is not under `parent`, and the errors of
    /// reading, locking and writing the index.
    pub fn record(
        &mut self,
        parent: &Path,
        dir: &Path,
        sizes: &IndexMap<String, i64>,
    ) -> Result<(), ArchiveError> {
        let rel = dir
            .strip_prefix(parent)
            .map_err(|_| {
                ArchiveError::InvalidConfig(format!(
                    "the run {} is not under {}",
                    dir.display(),
                    parent.display()
                ))
            })?
            .to_path_buf();
        fs::create_dir_all(parent).map_err(|e| ArchiveError::io("creating", parent, e))?;
        let lock_path = parent.join(format!("{SIZE_RUNS_FILE}.lock"));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| ArchiveError::io("opening", &lock_path, e))?;
        lock.lock()
            .map_err(|e| ArchiveError::io("locking", &lock_path, e))?;
        let mut merged = Self::read(parent)?.unwrap_or_default();
        let entry = SizeRun {
            dir: rel,
            sizes: sizes.clone(),
        };
        match merged.runs.iter_mut().find(|r| r.sizes == entry.sizes) {
            Some(existing) => *existing = entry.clone(),
            None => merged.runs.push(entry.clone()),
        }
        merged.format = 1;
        let bytes = serde_json::to_vec_pretty(&merged).map_err(|e| {
            ArchiveError::InvalidConfig(format!("the size index does not serialise: {e}"))
        })?;
        write_atomic(parent, &parent.join(SIZE_RUNS_FILE), &bytes)?;
        drop::<File>(lock);
        self.runs.retain(|r| r.sizes != entry.sizes);
        self.runs.push(entry);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(n: i64) -> IndexMap<String, i64> {
        [("M", n), ("N", n)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
    }

    #[test]
    fn records_merge_replace_and_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path();
        assert_eq!(SizeRuns::read(parent).unwrap(), None);
        let mut a = SizeRuns::default();
        a.record(parent, &parent.join("M=64,N=64"), &sizes(64))
            .unwrap();
        // Another writer, with its own view, adds a size: neither entry is lost.
        let mut b = SizeRuns::default();
        b.record(parent, &parent.join("M=256,N=256"), &sizes(256))
            .unwrap();
        // Recording a size again replaces its entry.
        a.record(parent, &parent.join("again"), &sizes(64)).unwrap();
        let read = SizeRuns::read(parent).unwrap().unwrap();
        let dirs: Vec<_> = read.runs().iter().map(|r| r.dir.clone()).collect();
        assert_eq!(dirs, [PathBuf::from("again"), PathBuf::from("M=256,N=256")]);
        assert_eq!(a.last().unwrap().1, "M=64,N=64");
        let err = a
            .record(parent, Path::new("/elsewhere"), &sizes(8))
            .unwrap_err();
        assert!(err.to_string().contains("not under"), "{err}");
    }

    #[test]
    fn an_index_that_leaves_its_folder_or_is_not_json_is_corrupt() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join(SIZE_RUNS_FILE),
            r#"{"format":1,"runs":[{"dir":"../x","sizes":{"M":1}}]}"#,
        )
        .unwrap();
        let err = SizeRuns::read(tmp.path()).unwrap_err();
        assert!(err.to_string().contains("not a folder inside"), "{err}");
        fs::write(tmp.path().join(SIZE_RUNS_FILE), "{").unwrap();
        assert!(SizeRuns::read(tmp.path()).is_err());
    }
}
