//! The one error type of `kf-export`: what can go wrong reading runs and writing the crate, and
//! what a generated call refuses at run time.

use std::path::PathBuf;

/// Why an export could not be written, or why a generated call could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// A file of a run directory could not be read, or an output file written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A run directory's `report.json` or `run/run.json` is not what a search writes.
    #[error("{path}: {message}")]
    BadRun {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The run has no correct best kernel to export.
    #[error("{run}: the run has no best kernel (no correct kernel was found)")]
    NoBestKernel {
        /// The run directory.
        run: PathBuf,
    },
    /// The run's kernel is for a backend or language this export does not generate yet.
    #[error("{run}: {what} cannot be exported yet: {why}")]
    Unsupported {
        /// The run directory (or the generated crate's configuration name).
        run: String,
        /// What was asked for (`a sycl kernel`, `task X`).
        what: String,
        /// Why not, and what to do instead.
        why: String,
    },
    /// No run was given.
    #[error("no run to export: give at least one run directory")]
    NoRuns,
    /// The generated crate's name is not a package name Cargo accepts.
    #[error("`{name}` is not a crate name: use ASCII letters, digits, `-` and `_`, starting with a letter")]
    BadCrateName {
        /// The name given.
        name: String,
    },
    /// The generated Python module's name is not a Python identifier.
    #[error("`{name}` is not a Python module name: use ASCII letters, digits and `_`, not starting with a digit, and no keyword")]
    BadModuleName {
        /// The name given.
        name: String,
    },
    /// A manifest of a run is invalid or does not evaluate.
    #[error(transparent)]
    Manifest(#[from] kf_manifest::ManifestError),
    /// A task-file run's task file is invalid, or its reference failed at export time.
    #[error(transparent)]
    TaskFile(Box<kf_eval::task::file::TaskFileError>),
    /// The evaluator's task code failed (the accumulation rule's reference run).
    #[error(transparent)]
    Eval(Box<kf_eval::EvalError>),
    /// The run time of the generated crate ([`crate::runtime`]) failed, where the export
    /// itself calls it (its tests).
    #[error(transparent)]
    Runtime(#[from] crate::runtime::Error),
}

impl ExportError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ExportError::Io {
            path: path.into(),
            source,
        }
    }
}
