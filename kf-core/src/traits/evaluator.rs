//! [`Evaluator`]: judges a candidate.

use async_trait::async_trait;

use crate::candidate::Candidate;
use crate::evaluation::Evaluation;

/// Judges a candidate: compile, verify, time. A bad kernel is an `Ok` evaluation low on the
/// ladder; `Err` is for failures of the evaluator itself (a lost worker, a full disk).
///
/// # Example
///
/// ```
/// use kf_core::prelude::*;
/// use kf_core::async_trait;
///
/// /// Scores a kernel by its source length: shorter is "faster".
/// struct Brevity;
///
/// #[async_trait]
/// impl Evaluator for Brevity {
///     type Error = std::convert::Infallible;
///
///     async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, Self::Error> {
///         let seconds = candidate.source.text.len() as f64 * 1e-6;
///         let timing = TimingStats::from_samples(&[seconds]).expect("positive and finite");
///         Ok(Evaluation::correct(timing, None))
///     }
/// }
///
/// let kernel = KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}");
/// let eval = futures::executor::block_on(Brevity.evaluate(&Candidate::seed(kernel, ParamValues::new())));
/// assert_eq!(eval.unwrap().status, Status::Correct);
/// ```
#[async_trait]
pub trait Evaluator: Send + Sync {
    /// Failure of the evaluator itself.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Evaluates one candidate.
    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, Self::Error>;

    /// Evaluates several candidates; the default does them one after another. Evaluators that
    /// can batch (a worker pool, a remote queue) override it.
    async fn evaluate_batch(
        &self,
        candidates: &[Candidate],
    ) -> Vec<Result<Evaluation, Self::Error>> {
        let mut out = Vec::with_capacity(candidates.len());
        for c in candidates {
            out.push(self.evaluate(c).await);
        }
        out
    }
}
