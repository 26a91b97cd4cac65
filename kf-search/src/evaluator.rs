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
