//! Errors of `kf-eval`. A bad kernel is never an error: it is an [`kf_core::Evaluation`] low on
//! the ladder. These are failures of the evaluator itself or of its inputs.

/// Why the evaluator could not do its job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// A task name that is not built in (or registered).
    #[error("unknown task `{name}` (known: {known})")]
    UnknownTask {
        /// The name asked for.
        name: String,
        /// The names known.
        known: String,
    },
    /// A malformed or out-of-range problem size.
    #[error("bad problem size: {0}")]
    BadSize(String),
    /// The task's baseline kernel failed, so speedups cannot be measured.
    #[error("the baseline kernel of task `{task}` failed: {message}")]
    Baseline {
        /// The task.
        task: String,
        /// What happened.
        message: String,
    },
    /// The backend failed outside any candidate's fault (allocation, copy, device lost).
    #[error("backend: {0}")]
    Backend(String),
    /// An untrusted process would have run without complete confinement
    /// ([`crate::confine`]).
    #[error(transparent)]
    Unconfined(#[from] crate::confine::IncompleteConfinement),
    /// A worker process could not be started or spoke nonsense.
    #[error("evaluation worker: {0}")]
    Worker(String),
    /// This process was started as an evaluation worker (its parent set
    /// [`crate::worker::WORKER_ENV`]) and tried to start workers of its own: its `main` did not
    /// hand control to the worker loop first. Refused, so that re-execution cannot recurse.
    #[error(
        "this process was started as an evaluation worker ({env} is set) but is about to start \
         workers of its own: call `kernelfoundry::init()` (or \
         `kf_eval::worker::serve_if_requested`) first thing in `main`"
    )]
    InsideWorker {
        /// The variable that marks a worker process.
        env: &'static str,
    },
    /// A worker process was started but never entered worker mode: it exited, went silent, or
    /// reported that it ran the embedder's `main` instead of serving. Almost always a `main`
    /// that does not call `kernelfoundry::init()` first.
    #[error(
        "the evaluation worker `{program}` did not enter worker mode: {detail}. Its `main` must \
         call `kernelfoundry::init()` (or `kf_eval::worker::serve_if_requested`) before anything \
         else{stderr}"
    )]
    WorkerNotServing {
        /// The program started as the worker.
        program: String,
        /// What the parent saw instead of the worker's hello.
        detail: String,
        /// The tail of the worker's standard error, prefixed with `; stderr: `, or empty.
        stderr: String,
    },
    /// A task file is invalid, or its reference failed (a fault of the task, not of the
    /// kernel under evaluation).
    #[error(transparent)]
    TaskFile(#[from] crate::task::file::error::TaskFileError),
    /// A file could not be read or written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
