//! Errors of the KernelBench importer and benchmark.

use std::path::PathBuf;

/// What can go wrong importing or benchmarking KernelBench problems.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelBenchError {
    /// A problem file would have run without complete confinement ([`kf_eval::confine`]).
    #[error(transparent)]
    Unconfined(#[from] kf_eval::confine::IncompleteConfinement),
    /// The problem file is missing or not a `.py` file.
    #[error("{path}: {reason}")]
    BadProblemPath {
        /// The path given.
        path: PathBuf,
        /// Why it was refused.
        reason: String,
    },
    /// A `--size NAME=VALUE` names no module-level constant of the problem, or is not positive.
    #[error("--size {name}: {reason}")]
    BadSize {
        /// The size name.
        name: String,
        /// Why it was refused.
        reason: String,
    },
    /// `--atol` / `--rtol` is negative or not a number.
    #[error("--{name} {value} is not a non-negative number")]
    BadTolerance {
        /// `atol` or `rtol`.
        name: &'static str,
        /// The value given.
        value: f64,
    },
    /// No NumPy reference exists, PyTorch is not used (not installed, or `--numpy`), and the
    /// NumPy stand-in for torch cannot run the problem: a template was written.
    #[error(
        "{torch}, and the problem's forward() could not be run by the NumPy stand-in for torch \
         ({why}), so the reference must be a NumPy script: wrote a template to {template}; fill \
         in reference() (and PARAMETERS if the model has weights) and run the import again"
    )]
    ReferenceTemplateWritten {
        /// Why PyTorch is not the reference: `PyTorch is not installed in <python>`, or that
        /// the NumPy reference was asked for.
        torch: String,
        /// Why no reference could be generated.
        why: String,
        /// Where the template was written.
        template: PathBuf,
    },
    /// The Python helper reported a problem with the problem file or its reference.
    #[error("{problem}: {message}")]
    Problem {
        /// The problem file.
        problem: PathBuf,
        /// The helper's message.
        message: String,
    },
    /// The Python interpreter could not be run, timed out, or printed something unreadable.
    #[error("python ({python}): {message}")]
    Python {
        /// The interpreter.
        python: String,
        /// What happened.
        message: String,
    },
    /// The task file that was produced does not load (a bug of the importer, or a problem
    /// that the importer's rules cannot express).
    #[error("the imported task file does not validate: {0}")]
    Invalid(#[from] kf_eval::task::file::TaskFileError),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A task's search could not be assembled or run.
    #[error("search: {0}")]
    Search(#[from] kf_search::SearchError),
    /// A task file could not become a job for the search's workers.
    #[error("task job: {0}")]
    Job(#[from] kf_eval::EvalError),
    /// Rendering the task file as TOML failed.
    #[error("rendering the task file: {0}")]
    RenderToml(#[from] toml::ser::Error),
    /// Rendering the benchmark summary as JSON failed.
    #[error("rendering the summary: {0}")]
    RenderJson(#[from] serde_json::Error),
    /// A task file loaded from text has no folder (its problem file is looked up beside it).
    #[error("task `{task}` has no folder to find its problem file in")]
    NoTaskFolder {
        /// The task's name.
        task: String,
    },
}

impl KernelBenchError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        KernelBenchError::Io {
            path: path.into(),
            source,
        }
    }
}
