//! Errors of task files: every variant names the file, and validation errors the field.

use std::path::PathBuf;

/// Why a task file cannot be used, or why its reference failed. A reference failure is a
/// fault of the task, never of the kernel under evaluation: the evaluation stops with it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskFileError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, or fields of the wrong shape (unknown dtype, misspelt key).
    #[error("{file}: invalid task file: {message}")]
    Toml {
        /// The task file.
        file: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field has a value the schema does not allow.
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// The task file.
        file: String,
        /// The field, such as `buffer[2].shape[0]`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// An expression (shape, work) does not parse or evaluate; the message names the file,
    /// the field and the expression.
    #[error(transparent)]
    Expression(#[from] kf_manifest::ManifestError),
    /// The reference failed: it raised, timed out, returned a wrong shape, dtype, a missing
    /// output or a non-finite value. This is a task error, not a kernel failure.
    #[error("{file}: reference `{reference}` failed: {message}")]
    Reference {
        /// The task file.
        file: String,
        /// The reference (script, kernel or closure name).
        reference: String,
        /// What happened.
        message: String,
    },
    /// No usable Python (or no NumPy in it) for a Python reference.
    #[error("python reference: {0}")]
    Python(String),
}

impl TaskFileError {
    /// An `Invalid` error.
    pub(crate) fn invalid(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        TaskFileError::Invalid {
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}
