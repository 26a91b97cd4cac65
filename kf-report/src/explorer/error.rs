//! [`ExplorerError`].

use std::path::PathBuf;

/// Why the explorer could not read a run or write its page.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExplorerError {
    /// The folder holds no run directory.
    #[error("{0} is not a run directory (no run.json in it or in its `run` folder)")]
    NotARun(PathBuf),
    /// The run directory could not be read.
    #[error(transparent)]
    Archive(#[from] kf_archive::ArchiveError),
    /// A file could not be read or written.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// A JSON file did not parse.
    #[error("{0}: {1}")]
    Json(PathBuf, serde_json::Error),
    /// The page could not be written.
    #[error(transparent)]
    Write(#[from] crate::report::ReportError),
    /// The server could not start.
    #[error("cannot serve on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// What the system said.
        source: std::io::Error,
    },
}
