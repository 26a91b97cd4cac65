//! The search's evaluator: tuned evaluation in local worker processes, or the same through
//! distributed workers. One type ([`kf_core::Either`] of the two), so that the engine and
//! everything around it stay the same.

use kf_core::Either;
#[cfg(feature = "dist")]
use kf_dist::{DistError, DistEvaluator};
use kf_eval::{EvalError, IsolatedEvaluator};

use super::TunedEvaluator;

/// The distributed side of [`SearchEvaluator`]: tuned evaluation on distributed workers
/// (tuning stays here, one job per configuration).
#[cfg(feature = "dist")]
pub type RemoteEvaluator = TunedEvaluator<DistEvaluator>;

/// The distributed side of [`SearchEvaluator`]: uninhabited in a build without the `dist`
/// feature.
#[cfg(not(feature = "dist"))]
pub type RemoteEvaluator = std::convert::Infallible;

/// Why the distributed side could not evaluate.
#[cfg(feature = "dist")]
pub type RemoteError = DistError;

/// Why the distributed side could not evaluate: nothing, in a build without `dist`.
#[cfg(not(feature = "dist"))]
pub type RemoteError = std::convert::Infallible;

/// Where a search's evaluations run: in worker processes of this machine (`Left`) or on
/// distributed workers (`Right`). This is the shipped evaluator, which
/// [`EvaluatorLayer`](crate::EvaluatorLayer)s wrap.
pub type SearchEvaluator = Either<TunedEvaluator<IsolatedEvaluator>, RemoteEvaluator>;

/// Why an evaluation could not be done (a bad kernel is an `Ok` evaluation, not this): the
/// local evaluator's error (`Left`) or the distributed one's (`Right`).
pub type SearchEvalError = Either<EvalError, RemoteError>;

/// What remains to be shut down once the engine has consumed the evaluator.
pub(crate) enum EvaluatorHandle {
    Local(IsolatedEvaluator),
    #[cfg(feature = "dist")]
    Distributed(DistEvaluator),
}

/// The part of `evaluator` that must be shut down after the run.
pub(crate) fn handle(evaluator: &SearchEvaluator) -> EvaluatorHandle {
    match evaluator {
        Either::Left(local) => EvaluatorHandle::Local(local.inner().clone()),
        #[cfg(feature = "dist")]
        Either::Right(remote) => EvaluatorHandle::Distributed(remote.inner().clone()),
        #[cfg(not(feature = "dist"))]
        Either::Right(never) => match *never {},
    }
}

/// The distributed evaluator of a run, or nothing in a build without `dist`.
#[cfg(not(feature = "dist"))]
pub(crate) type DistEvaluator = std::convert::Infallible;

impl EvaluatorHandle {
    /// Splits the handle after the run: the local evaluator, still running (its caller re-times
    /// the best kernel with it and then shuts it down), or the distributed evaluator, for the
    /// caller to record the run's end and shut it down.
    pub(crate) fn into_parts(self) -> (Option<IsolatedEvaluator>, Option<DistEvaluator>) {
        match self {
            EvaluatorHandle::Local(e) => (Some(e), None),
            #[cfg(feature = "dist")]
            EvaluatorHandle::Distributed(d) => (None, Some(d)),
        }
    }
}

/// What the search tells an [`EvaluatorFactory`] when it makes the run's evaluator.
#[non_exhaustive]
pub struct EvaluatorInput<'a> {
    /// The search's configuration (task, backend, tuning budget, protocol, workers).
    pub config: &'a crate::SearchConfig,
    /// The task's sizes, the task's defaults filled in.
    pub sizes: &'a kf_eval::tasks::Sizes,
    /// The run's device evaluations: count each configuration sent to the device into it, and
    /// stop tuning at its limit.
    pub device_evaluations: &'a crate::DeviceEvaluations,
    /// Where the classifier would place a kernel before it is evaluated.
    pub cells: &'a kf_mutate::CellPredictor,
    /// The backend's factory.
    pub backend: &'a dyn kf_eval::DynBackendFactory,
    /// The tuning strategy's factory.
    pub strategy: &'a std::sync::Arc<dyn kf_tune::strategy::StrategyFactory>,
}

impl EvaluatorInput<'_> {
    /// The facts of the device the configuration's backend spec selects, from the backend
    /// opened in this process.
    pub fn device(&self) -> Result<kf_core::DeviceFacts, crate::SearchError> {
        Ok(crate::backends::device_facts_with(
            self.backend,
            &self.config.backend,
        )?)
    }
}

/// Makes the evaluator at the bottom of the search's stack (its
/// [layers](crate::EvaluatorLayer) wrap it): the shipped one ([`ShippedEvaluator`]: tuning
/// around isolated or distributed workers), or one's own, replacing it
/// ([`crate::SearchBuilder::evaluator`]). With one's own, the search has no evaluator of its
/// own to re-time kernels with after the run: there is no final selection, and the report's
/// reference comparison has no re-timed kernel beside it.
///
/// # Example
///
/// ```
/// use kf_core::{DeviceFacts, Evaluator};
/// use kf_search::{EvaluatorFactory, EvaluatorInput, SearchError};
///
/// /// One's own evaluator, made when the search starts.
/// struct Mine<E>(E);
///
/// impl<E: Evaluator + 'static> EvaluatorFactory for Mine<E> {
///     type Evaluator = E;
///     fn name(&self) -> String {
///         "mine".into()
///     }
///     fn make(self, input: &EvaluatorInput<'_>) -> Result<(E, DeviceFacts), SearchError> {
///         Ok((self.0, input.device()?))
///     }
/// }
/// ```
pub trait EvaluatorFactory {
    /// The evaluator it makes.
    type Evaluator: kf_core::Evaluator + 'static;

    /// The stable name, recorded in the report.
    fn name(&self) -> String;

    /// The evaluator, and the facts of the device it evaluates on.
    fn make(
        self,
        input: &EvaluatorInput<'_>,
    ) -> Result<(Self::Evaluator, kf_core::DeviceFacts), crate::SearchError>;
}

/// The shipped evaluator: each new kernel tuned (the search's strategy and budget), evaluated
/// in isolated worker processes of this program, or on distributed workers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShippedEvaluator;

impl EvaluatorFactory for ShippedEvaluator {
    type Evaluator = SearchEvaluator;

    fn name(&self) -> String {
        "shipped".into()
    }

    fn make(
        self,
        input: &EvaluatorInput<'_>,
    ) -> Result<(SearchEvaluator, kf_core::DeviceFacts), crate::SearchError> {
        crate::local_or_distributed(
            input.config,
            input.sizes,
            input.device_evaluations,
            input.cells,
            input.backend,
            input.strategy,
        )
    }
}
