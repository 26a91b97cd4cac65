//! The search's evaluator: tuned evaluation in local worker processes, or the same through
//! distributed workers. One type, so that the engine and everything around it stay the same.

use kf_core::{async_trait, Candidate, Evaluation, Evaluator};
#[cfg(feature = "dist")]
use kf_dist::{DistError, DistEvaluator};
use kf_eval::{EvalError, IsolatedEvaluator};

use super::TunedEvaluator;

/// The distributed evaluator, or nothing in a build without the `dist` feature.
#[cfg(not(feature = "dist"))]
pub(crate) type DistEvaluator = std::convert::Infallible;

/// Where a search's evaluations run: the shipped evaluator, which
/// [`EvaluatorLayer`](crate::EvaluatorLayer)s wrap.
pub enum SearchEvaluator {
    /// In worker processes of this machine.
    Local(TunedEvaluator<IsolatedEvaluator>),
    /// On distributed workers; tuning stays here, one job per configuration.
    #[cfg(feature = "dist")]
    Distributed(TunedEvaluator<DistEvaluator>),
}

/// Why an evaluation could not be done (a bad kernel is an `Ok` evaluation, not this).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchEvalError {
    /// The local evaluator failed.
    #[error(transparent)]
    Local(#[from] EvalError),
    /// The distributed evaluator failed.
    #[cfg(feature = "dist")]
    #[error(transparent)]
    Distributed(#[from] DistError),
}

/// What remains to be shut down once the engine has consumed the evaluator.
pub(crate) enum EvaluatorHandle {
    Local(IsolatedEvaluator),
    #[cfg(feature = "dist")]
    Distributed(DistEvaluator),
}

impl SearchEvaluator {
    pub(crate) fn handle(&self) -> EvaluatorHandle {
        match self {
            SearchEvaluator::Local(t) => EvaluatorHandle::Local(t.inner().clone()),
            #[cfg(feature = "dist")]
            SearchEvaluator::Distributed(t) => EvaluatorHandle::Distributed(t.inner().clone()),
        }
    }
}

impl EvaluatorHandle {
    /// Stops local evaluation processes; a distributed evaluator is returned for the caller to
    /// record the run's end and shut it down.
    pub(crate) fn shutdown_handle(self) -> Option<DistEvaluator> {
        match self {
            EvaluatorHandle::Local(e) => {
                e.shutdown();
                None
            }
            #[cfg(feature = "dist")]
            EvaluatorHandle::Distributed(d) => Some(d),
        }
    }
}

#[async_trait]
impl Evaluator for SearchEvaluator {
    type Error = SearchEvalError;

    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, SearchEvalError> {
        match self {
            SearchEvaluator::Local(e) => Ok(e.evaluate(candidate).await?),
            #[cfg(feature = "dist")]
            SearchEvaluator::Distributed(e) => Ok(e.evaluate(candidate).await?),
        }
    }

    async fn evaluate_batch(
        &self,
        candidates: &[Candidate],
    ) -> Vec<Result<Evaluation, SearchEvalError>> {
        match self {
            SearchEvaluator::Local(e) => into_results(e.evaluate_batch(candidates).await),
            #[cfg(feature = "dist")]
            SearchEvaluator::Distributed(e) => into_results(e.evaluate_batch(candidates).await),
        }
    }
}

fn into_results<E: Into<SearchEvalError>>(
    results: Vec<Result<Evaluation, E>>,
) -> Vec<Result<Evaluation, SearchEvalError>> {
    results.into_iter().map(|r| r.map_err(Into::into)).collect()
}
