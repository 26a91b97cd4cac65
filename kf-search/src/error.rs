//! Why a search could not run: [`SearchError`].

use std::path::PathBuf;

use kf_core::Language;

use crate::BackendError;

/// Why a search could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// Bad task, sizes or backend.
    #[error(transparent)]
    Eval(#[from] kf_eval::EvalError),
    /// The backend is unknown, not in this build, or could not be opened.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The archive or run directory refused.
    #[error(transparent)]
    Archive(#[from] kf_archive::ArchiveError),
    /// The engine stopped with an error.
    #[error(transparent)]
    Engine(#[from] kf_core::CoreError),
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// A post-run hook failed ([`SearchBuilder::post_run`](crate::SearchBuilder::post_run); the report files' own failure is
    /// [`SearchError::Report`]).
    #[error(transparent)]
    PostRun(kf_report::Error),
    /// Distributed evaluation failed to start.
    #[cfg(feature = "dist")]
    #[error(transparent)]
    Distributed(#[from] kf_dist::DistError),
    /// A kernel template or structural mutator could not be built.
    #[error(transparent)]
    Template(#[from] kf_mutate::MutateError),
    /// A shipped kernel's manifest could not be read.
    #[error(transparent)]
    Manifest(#[from] kf_manifest::ManifestError),
    /// Mutators were added beside the shipped ones ([`SearchBuilder::also_mutator`](crate::SearchBuilder::also_mutator)) to a search
    /// whose mutator replaces them ([`SearchBuilder::mutator`](crate::SearchBuilder::mutator)).
    #[error(
        "{added} mutator(s) were added beside the shipped ones (also_mutator), but the search's \
         mutator replaces them (mutator): mix them into the mutator given instead"
    )]
    MutatorsBesideReplaced {
        /// Mutators added.
        added: usize,
    },
    /// The shipped archive's settings were given ([`SearchBuilder::archive`](crate::SearchBuilder::archive),
    /// [`SearchBuilder::cvt`](crate::SearchBuilder::cvt), …) to a search whose archive is another
    /// ([`SearchBuilder::archive_factory`](crate::SearchBuilder::archive_factory)).
    #[error(
        "the shipped archive's settings were given, but the search's archive is one of its \
         own (archive_factory): set them on that archive instead"
    )]
    ArchiveSettingsUnused,
    /// No task was named ([`SearchBuilder::task`](crate::SearchBuilder::task)).
    #[error("no task: name a built-in task or give a task file")]
    NoTask,
    /// Nothing to start from: the task has no baseline kernel in the backend's language and
    /// no seeds were given ([`SearchBuilder::extra_seeds`](crate::SearchBuilder::extra_seeds)).
    #[error(
        "task `{task}` has no baseline kernel for this backend: give one in the task file's \
         [baseline] or seed the search with a kernel of your own (kf search --kernel K.toml)"
    )]
    NoSeeds {
        /// The task.
        task: String,
    },
    /// An evaluation budget of zero.
    #[error("the evaluation budget must be at least 1")]
    NoEvaluations,
    /// No longer returned: task files travel with distributed jobs (`distributed::TaskBundle`,
    /// feature `dist`). Kept so that code matching it still compiles.
    #[error(
        "task files are evaluated on this machine: distributed workers do not receive task files yet"
    )]
    TaskFileDistributed,
    /// A task file could not be shipped with distributed jobs (a file outside its folder, too
    /// large, unreadable).
    #[cfg(feature = "dist")]
    #[error(transparent)]
    TaskBundle(#[from] crate::distributed::bundle::TaskBundleError),
    /// The run directory already holds more evaluations than the budget.
    #[error(
        "the run directory {} already holds {recorded} evaluations; ask for at least that many to \
         resume or extend it, or use another output folder",
        path.display()
    )]
    RunDirAhead {
        /// The run directory.
        path: PathBuf,
        /// Evaluations it holds.
        recorded: u64,
    },
    /// The task has no kernel in the backend's language to start from.
    #[error("the {task} task has no {language:?} kernel to start from")]
    NoSeed {
        /// The task.
        task: String,
        /// The backend's kernel language.
        language: Language,
    },
    /// No shipped kernel of that name in that language.
    #[error("no shipped {kernel} kernel in {language}")]
    NoShippedKernel {
        /// The kernel's name.
        kernel: &'static str,
        /// The language asked for.
        language: Language,
    },
    /// No device here to name the workers' device kind after.
    #[error("no {backend} device here to name the workers' device kind ({source}); give the device kind")]
    NoLocalDevice {
        /// The backend.
        backend: String,
        /// Why its device could not be opened.
        source: BackendError,
    },
    /// No distributed worker of the device kind registered in time.
    #[error("no worker of device kind `{0}` registered within two minutes (start `kf worker`)")]
    NoWorker(String),
    /// A document (a profile, an archive snapshot, a worker's device facts) could not be
    /// (de)serialised.
    #[error("{what}: {source}")]
    Json {
        /// Which document.
        what: &'static str,
        /// What serde_json said.
        source: serde_json::Error,
    },
}

impl From<kf_report::Error> for SearchError {
    fn from(e: kf_report::Error) -> Self {
        match e {
            kf_report::Error::Report(e) => SearchError::Report(e),
            other => SearchError::PostRun(other),
        }
    }
}
