//! Errors of `kf-core`: vocabulary validation and the engine.

/// A boxed error from a user-implemented trait (mutator, evaluator, classifier, …), kept whole so
/// its source chain survives.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of `kf-core`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoreError {
    /// A language name that is not `opencl`, `sycl` or `cuda`.
    #[error("unknown kernel language `{0}` (expected opencl, sycl or cuda)")]
    UnknownLanguage(String),
    /// A descriptor space with no dimensions, a dimension with no levels, or too many cells.
    #[error("invalid descriptor space: {0}")]
    InvalidDescriptorSpace(String),
    /// Coordinates that do not name a cell of the space.
    #[error("descriptor {coords:?} is outside the space: {reason}")]
    DescriptorOutOfSpace {
        /// The offending coordinates.
        coords: Vec<usize>,
        /// Why they are outside.
        reason: String,
    },
    /// An engine configuration that cannot run.
    #[error("invalid engine configuration: {0}")]
    InvalidConfig(String),
    /// The mutator needs something the engine was not given ([`crate::Mutator::needs`]): without
    /// it, it would propose no children and the run would degrade silently.
    #[error("mutator `{mutator}` needs {what}, which the engine was not given: call `Engine::{call}` before running")]
    MissingContext {
        /// The mutator's name.
        mutator: String,
        /// What it needs.
        what: &'static str,
        /// The builder call that gives it.
        call: &'static str,
    },
    /// The archive was empty and no seed candidate was given.
    #[error("the archive is empty and no seed kernels were given: add seeds with `EngineBuilder::seeds`")]
    NoSeeds,
    /// Every seed failed to enter the archive, so there is no parent to mutate.
    #[error("no seed kernel entered the archive ({0}); nothing to mutate")]
    NoParent(String),
    /// Too many steps in a row failed with infrastructure errors.
    #[error("{count} consecutive steps failed; last error: {last}")]
    TooManyFailures {
        /// How many failed in a row.
        count: u32,
        /// The last failure, with the failing part's own error as its source.
        #[source]
        last: StepFailure,
    },
    /// [`Stepper::tell`](crate::engine::Stepper::tell) named a step that is not waiting for
    /// its evaluations: never asked, or already told.
    #[error("step {step} is not waiting for evaluations (never asked, or already told)")]
    UnknownStep {
        /// The step named.
        step: u64,
    },
    /// [`Stepper::tell`](crate::engine::Stepper::tell) was given the id of a step another
    /// stepper asked.
    #[error("step {step} was asked by another run")]
    ForeignStep {
        /// The step named.
        step: u64,
    },
    /// [`Stepper::tell`](crate::engine::Stepper::tell) was given a number of evaluations other
    /// than the step's number of candidates.
    #[error("step {step} has {expected} candidates, but {got} evaluations were told")]
    EvaluationCount {
        /// The step.
        step: u64,
        /// Its candidates.
        expected: usize,
        /// The evaluations told.
        got: usize,
    },
    /// [`Stepper::run`](crate::engine::Stepper::run) was called while steps asked with
    /// [`Stepper::ask`](crate::engine::Stepper::ask) still wait for their evaluations.
    #[error("steps {steps:?} were asked but not told; tell them before running to the end")]
    StepsOutstanding {
        /// The steps waiting.
        steps: Vec<u64>,
    },
    /// A run directory's records do not match what this configuration does at the same step
    /// (a different seed, mutator or archive configuration).
    #[error("cannot resume: recorded step {step} {what}")]
    ResumeMismatch {
        /// The step that differs.
        step: u64,
        /// What differs.
        what: String,
    },
    /// The archive refused an operation.
    #[error("archive: {0}")]
    Archive(#[source] BoxError),
    /// The checkpoint hook failed; the run stops so that nothing unrecorded is reported.
    #[error("checkpoint: {0}")]
    Checkpoint(#[source] BoxError),
    /// An observer failed.
    #[error("observer: {0}")]
    Observer(#[source] BoxError),
}

/// Why one engine step failed: the part that failed, with its own error kept whole as the
/// source (so a caller can downcast it), or the message a run directory recorded for a replayed
/// step. Its display is what the step's record says.
///
/// ```
/// use kf_core::StepFailure;
///
/// let failure = StepFailure::Mutator {
///     mutator: "llm".into(),
///     source: Box::new(std::io::Error::other("server unreachable")),
/// };
/// assert_eq!(failure.to_string(), "mutator `llm`: server unreachable");
/// let source = std::error::Error::source(&failure).unwrap();
/// assert!(source.downcast_ref::<std::io::Error>().is_some());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepFailure {
    /// The mutator failed before proposing children.
    #[error("mutator `{mutator}`: {source}")]
    Mutator {
        /// The failing mutator's name.
        mutator: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// The evaluator failed on a child.
    #[error("evaluator: {0}")]
    Evaluator(#[source] BoxError),
    /// The classifier failed on a child.
    #[error("classifier: {0}")]
    Classifier(#[source] BoxError),
    /// The archive refused a child.
    #[error("archive: {0}")]
    Archive(#[source] BoxError),
    /// A failure replayed from a run directory, which keeps only its message.
    #[error("{0}")]
    Recorded(String),
}
