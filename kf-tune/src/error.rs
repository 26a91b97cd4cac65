//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while building spaces, tuning, or reading and writing caches.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuneError {
    /// A parameter was declared twice, has no values, or has too many values.
    #[error("parameter `{name}`: {message}")]
    Param {
        /// The parameter.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// A constraint or rule expression could not be parsed or evaluated.
    #[error("expression `{expr}`: {message}")]
    Expression {
        /// The expression text.
        expr: String,
        /// Why it failed.
        message: String,
    },
    /// An expression refers to a name that is neither a parameter nor a known symbol.
    #[error("expression `{expr}` refers to unknown symbol `{symbol}`")]
    UnknownSymbol {
        /// The expression text.
        expr: String,
        /// The unknown name.
        symbol: String,
    },
    /// A configuration does not belong to the space.
    #[error("invalid configuration {config}: {reason}")]
    InvalidConfig {
        /// The configuration, as `NAME=value …`.
        config: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The space has no valid configuration.
    #[error("the parameter space has no valid configuration")]
    EmptySpace,
    /// Unknown strategy name.
    #[error(transparent)]
    UnknownStrategy(#[from] crate::strategy::name::UnknownStrategyName),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file's content is not in the expected format.
    #[error("{path}: {message}")]
    Format {
        /// The file (or another name for the text).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Another writer holds the lock of a Kernel Tuner cache (another `kf tune` run is
    /// appending to it); returned by [`KtWriter::try_open`](crate::KtWriter::try_open), which
    /// does not wait.
    #[error("{path} is being written by another process (it holds the lock {lock})")]
    CacheLocked {
        /// The cache file.
        path: PathBuf,
        /// Its lock file.
        lock: PathBuf,
    },
    /// The objective itself failed (not the configuration: a lost device, a full disk).
    #[error("objective failed: {0}")]
    Objective(String),
}

impl TuneError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TuneError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        TuneError::Format {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = TuneError> = std::result::Result<T, E>;
