//! [`EvaluatorLayer`]: what wraps the search's evaluator, tower style ([`NoLayer`], closures,
//! [`Stack`], [`Named`]), given to
//! [`SearchBuilder::evaluator_layer`](crate::SearchBuilder::evaluator_layer).

use kf_core::Evaluator;

/// A layer around an evaluator (tower style): it receives the evaluator below it (at the
/// bottom, the shipped [`SearchEvaluator`](crate::SearchEvaluator): tuning, then isolated or
/// distributed evaluation; or one's own,
/// [`SearchBuilder::evaluator`](crate::SearchBuilder::evaluator)) and returns the one above.
/// Layers stack in the order given to
/// [`SearchBuilder::evaluator_layer`](crate::SearchBuilder::evaluator_layer) (the first is
/// innermost). Closures `FnOnce(E) -> E2` are layers; [`Named`] gives one a name; [`NoLayer`]
/// is none.
///
/// # Example
///
/// A layer of one's own that counts evaluations:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use kf_core::{async_trait, Candidate, Evaluation, Evaluator};
/// use kf_search::EvaluatorLayer;
///
/// struct Counted<E>(E, Arc<AtomicU64>);
///
/// #[async_trait]
/// impl<E: Evaluator> Evaluator for Counted<E> {
///     type Error = E::Error;
///     async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, E::Error> {
///         self.1.fetch_add(1, Ordering::Relaxed);
///         self.0.evaluate(c).await
///     }
/// }
///
/// struct Counting(Arc<AtomicU64>);
///
/// impl<E: Evaluator + 'static> EvaluatorLayer<E> for Counting {
///     type Evaluator = Counted<E>;
///     fn layer(self, inner: E) -> Counted<E> {
///         Counted(inner, self.0)
///     }
///     fn names(&self) -> Vec<String> {
///         vec!["counting".into()]
///     }
/// }
/// # let _ = Counting(Arc::default());
/// ```
pub trait EvaluatorLayer<E> {
    /// The evaluator above the layer.
    type Evaluator: Evaluator + 'static;

    /// Wraps `inner`.
    fn layer(self, inner: E) -> Self::Evaluator;

    /// The layers' stable names, innermost first, as the report records them (default: one
    /// layer named `layer`).
    fn names(&self) -> Vec<String> {
        vec!["layer".to_owned()]
    }
}

/// No layer: the evaluator below, unwrapped.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLayer;

impl<E: Evaluator + 'static> EvaluatorLayer<E> for NoLayer {
    type Evaluator = E;

    fn layer(self, inner: E) -> E {
        inner
    }

    fn names(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<F, E, E2> EvaluatorLayer<E> for F
where
    F: FnOnce(E) -> E2,
    E2: Evaluator + 'static,
{
    type Evaluator = E2;

    fn layer(self, inner: E) -> E2 {
        self(inner)
    }
}

/// Two layers: `inner` wraps the evaluator below, `outer` wraps that.
#[derive(Debug, Clone, Copy)]
pub struct Stack<Inner, Outer> {
    pub(crate) inner: Inner,
    pub(crate) outer: Outer,
}

impl<E, I, O> EvaluatorLayer<E> for Stack<I, O>
where
    I: EvaluatorLayer<E>,
    O: EvaluatorLayer<I::Evaluator>,
{
    type Evaluator = O::Evaluator;

    fn layer(self, inner: E) -> O::Evaluator {
        self.outer.layer(self.inner.layer(inner))
    }

    fn names(&self) -> Vec<String> {
        let mut names = self.inner.names();
        names.extend(self.outer.names());
        names
    }
}

/// A layer (a closure, say) under a name of one's own.
#[derive(Debug, Clone)]
pub struct Named<L> {
    name: String,
    layer: L,
}

impl<L> Named<L> {
    /// `layer`, recorded as `name`.
    pub fn new(name: impl Into<String>, layer: L) -> Self {
        Named {
            name: name.into(),
            layer,
        }
    }
}

impl<E, L: EvaluatorLayer<E>> EvaluatorLayer<E> for Named<L> {
    type Evaluator = L::Evaluator;

    fn layer(self, inner: E) -> L::Evaluator {
        self.layer.layer(inner)
    }

    fn names(&self) -> Vec<String> {
        vec![self.name.clone()]
    }
}
