//! The embedder's own evaluator layer: counts the evaluations the engine asks for (each one
//! is tuned and judged by the shipped evaluator below it).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kernelfoundry::core::{async_trait, Candidate, Evaluation, Evaluator};
use kernelfoundry::search::EvaluatorLayer;

/// Wraps the evaluator below in a [`Counted`] one.
#[derive(Default)]
pub struct CountingLayer {
    /// Evaluations asked for.
    pub evaluations: Arc<AtomicU64>,
}

impl<E: Evaluator + 'static> EvaluatorLayer<E> for CountingLayer {
    type Evaluator = Counted<E>;

    fn layer(self, inner: E) -> Counted<E> {
        Counted {
            inner,
            evaluations: self.evaluations,
        }
    }

    fn names(&self) -> Vec<String> {
        vec!["counting-evaluations".into()]
    }
}

/// An evaluator that counts what passes through it.
pub struct Counted<E> {
    inner: E,
    evaluations: Arc<AtomicU64>,
}

#[async_trait]
impl<E: Evaluator> Evaluator for Counted<E> {
    type Error = E::Error;

    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, E::Error> {
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        self.inner.evaluate(candidate).await
    }
}
