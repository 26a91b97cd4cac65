//! The error type of `kf-archive`.

use std::path::PathBuf;

use kf_core::BoxError;

/// Errors of `kf-archive`: cells outside the space, invalid configurations, unreadable or
/// inconsistent run directories.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// Coordinates with the wrong number of dimensions.
    #[error("coordinates {coords:?} have {} dimensions, the space has {expected}", coords.len())]
    DimensionMismatch {
        /// The offending coordinates.
        coords: Vec<usize>,
        /// Dimensions of the space.
        expected: usize,
    },
    /// A coordinate beyond the levels of its dimension.
    #[error("coordinates {coords:?}: level {level} of dimension {dimension} is beyond its {levels} levels")]
    OutOfRange {
        /// The offending coordinates.
        coords: Vec<usize>,
        /// Which dimension.
        dimension: usize,
        /// The level asked for.
        level: usize,
        /// Levels of that dimension.
        levels: usize,
    },
    /// A flat cell index beyond the number of cells.
    #[error("cell index {index} is beyond the {cells} cells of the space")]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// Cells in the space.
        cells: usize,
    },
    /// A descriptor space that `kf_core::DescriptorSpace::new` refuses.
    #[error("invalid descriptor space: {0}")]
    InvalidSpace(#[source] kf_core::CoreError),
    /// A space with more cells than a grid archive stores.
    #[error("the space has {cells} cells; a grid archive holds at most {max}")]
    TooManyCells {
        /// Cells in the space.
        cells: usize,
        /// The limit.
        max: usize,
    },
    /// A configuration that cannot work (negative ratios, a non-finite offset, …).
    #[error("invalid archive configuration: {0}")]
    InvalidConfig(String),
    /// A descriptor whose continuous coordinates do not fit a CVT archive's feature space
    /// (another number of features, or a NaN).
    #[error("descriptor features {features:?}: {reason}")]
    BadFeatures {
        /// The offending features.
        features: Vec<f64>,
        /// What is wrong with them.
        reason: String,
    },
    /// Centroids stored with a run that do not match the archive asked for.
    #[error("the centroids in {} do not match this archive: {what}", path.display())]
    CentroidMismatch {
        /// The centroid file.
        path: PathBuf,
        /// What differs.
        what: String,
    },
    /// A serialized archive whose contents are inconsistent.
    #[error("invalid archive snapshot: {0}")]
    InvalidSnapshot(String),
    /// A file-system operation on a run directory failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A run-directory file that is not the JSON it should be.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A size index (`sizes.json`, [`crate::SizeRuns`]) is not one, or names a folder
    /// outside its own.
    #[error("{}: {reason}", path.display())]
    BadSizeIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A line of the step log that is not the next record of this run (it does not parse, its
    /// checksum does not match, it belongs to another run, or its step is repeated, missing or
    /// out of order): the log was damaged by something other than a crash mid-write.
    #[error(
        "{}: line {line} is corrupt: {what}. The {intact} records before it are intact; to keep \
         them and resume from there, run `kf run repair {}` (kf_archive::RunDir::keep_valid_prefix)",
        path.display(), path.parent().unwrap_or(path).display()
    )]
    CorruptLog {
        /// The log file.
        path: PathBuf,
        /// Line number, from 1.
        line: u64,
        /// What is wrong with it.
        what: String,
        /// Intact records before it.
        intact: u64,
        /// Bytes of the log up to the end of the last intact record.
        intact_len: u64,
    },
    /// Another `RunDir` (in this process or another) has the directory open.
    #[error(
        "the run directory {} is in use by {}: two runs on one directory would mix their \
         histories; wait for that run to finish or use another directory",
        path.display(),
        holder.map_or_else(|| "another process".to_owned(), |p| format!("process {p}"))
    )]
    Locked {
        /// The run directory.
        path: PathBuf,
        /// The process id the lock file names, when it could be read.
        holder: Option<u32>,
    },
    /// A run directory created for a different seed or configuration.
    #[error("the run directory {} belongs to another run: {what}", path.display())]
    MetaMismatch {
        /// The run directory.
        path: PathBuf,
        /// What differs.
        what: String,
    },
    /// Replaying the log gave another outcome than the one recorded.
    #[error("replaying step {step}: {what}")]
    ReplayMismatch {
        /// The step.
        step: u64,
        /// What differs.
        what: String,
    },
    /// The archive refused an elite while replaying the log.
    #[error("replaying step {step}: {source}")]
    Replay {
        /// The step.
        step: u64,
        /// The archive's error.
        #[source]
        source: BoxError,
    },
}

impl ArchiveError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ArchiveError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn json(path: impl Into<PathBuf>, source: serde_json::Error) -> Self {
        ArchiveError::Json {
            path: path.into(),
            source,
        }
    }
}
