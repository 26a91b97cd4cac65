//! [`Either`]: one of two implementations, dispatching statically.

use std::fmt;

use async_trait::async_trait;

use crate::candidate::Candidate;
use crate::descriptor::{Descriptor, DescriptorSpace};
use crate::evaluation::Evaluation;
use crate::traits::archive::{Elite, InsertOutcome};
use crate::traits::classifier::BehaviorClassifier;
use crate::traits::evaluator::Evaluator;
use crate::traits::mutator::{Mutation, MutationContext, Mutator, Needs};

/// One of two values. It implements [`Mutator`], [`Evaluator`] and [`BehaviorClassifier`]
/// when both sides do, by handing each call to the side it holds; its error is then
/// `Either<A::Error, B::Error>`, which is a [`std::error::Error`] when both sides are (display
/// and source are those of the side it holds).
///
/// Use it where a run picks one of two implementations at run time (local or distributed
/// evaluation, an LLM or an offline mutator) and the engine wants one concrete type; for more
/// than two, nest `Either`s or use the boxed forms ([`crate::compose::BoxEvaluator`], …).
///
/// # Example
///
/// ```
/// use kf_core::compose::Either;
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticEvaluator};
///
/// # fn other() -> SyntheticEvaluator { SyntheticEvaluator::with_levels(4) }
/// let distributed = false;
/// let evaluator = if distributed {
///     Either::Right(other())
/// } else {
///     Either::Left(SyntheticEvaluator::new())
/// };
/// let eval = futures::executor::block_on(evaluator.evaluate(&synthetic_seed(3))).unwrap();
/// assert_eq!(eval.status, Status::Correct);
/// assert!(evaluator.is_left());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Either<A, B> {
    /// The first kind.
    Left(A),
    /// The second kind.
    Right(B),
}

impl<A, B> Either<A, B> {
    /// True when it holds the left side.
    pub fn is_left(&self) -> bool {
        matches!(self, Either::Left(_))
    }

    /// True when it holds the right side.
    pub fn is_right(&self) -> bool {
        matches!(self, Either::Right(_))
    }

    /// Borrows the side it holds.
    pub fn as_ref(&self) -> Either<&A, &B> {
        match self {
            Either::Left(a) => Either::Left(a),
            Either::Right(b) => Either::Right(b),
        }
    }

    /// The left side, if it holds it.
    pub fn left(self) -> Option<A> {
        match self {
            Either::Left(a) => Some(a),
            Either::Right(_) => None,
        }
    }

    /// The right side, if it holds it.
    pub fn right(self) -> Option<B> {
        match self {
            Either::Left(_) => None,
            Either::Right(b) => Some(b),
        }
    }
}

impl<A: fmt::Display, B: fmt::Display> fmt::Display for Either<A, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Either::Left(a) => a.fmt(f),
            Either::Right(b) => b.fmt(f),
        }
    }
}

impl<A: std::error::Error, B: std::error::Error> std::error::Error for Either<A, B> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Either::Left(a) => a.source(),
            Either::Right(b) => b.source(),
        }
    }
}

#[async_trait]
impl<A: Mutator, B: Mutator> Mutator for Either<A, B> {
    type Error = Either<A::Error, B::Error>;

    fn name(&self) -> &str {
        match self {
            Either::Left(a) => a.name(),
            Either::Right(b) => b.name(),
        }
    }

    fn needs(&self) -> Needs {
        match self {
            Either::Left(a) => a.needs(),
            Either::Right(b) => b.needs(),
        }
    }

    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Self::Error> {
        match self {
            Either::Left(a) => a.mutate(parent, ctx).await.map_err(Either::Left),
            Either::Right(b) => b.mutate(parent, ctx).await.map_err(Either::Right),
        }
    }

    fn credit(&self, child: &Elite, outcome: &InsertOutcome) {
        match self {
            Either::Left(a) => a.credit(child, outcome),
            Either::Right(b) => b.credit(child, outcome),
        }
    }
}

#[async_trait]
impl<A: Evaluator, B: Evaluator> Evaluator for Either<A, B> {
    type Error = Either<A::Error, B::Error>;

    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, Self::Error> {
        match self {
            Either::Left(a) => a.evaluate(candidate).await.map_err(Either::Left),
            Either::Right(b) => b.evaluate(candidate).await.map_err(Either::Right),
        }
    }

    /// Hands the whole batch to the side it holds (so that side's batching is kept).
    async fn evaluate_batch(
        &self,
        candidates: &[Candidate],
    ) -> Vec<Result<Evaluation, Self::Error>> {
        match self {
            Either::Left(a) => a
                .evaluate_batch(candidates)
                .await
                .into_iter()
                .map(|r| r.map_err(Either::Left))
                .collect(),
            Either::Right(b) => b
                .evaluate_batch(candidates)
                .await
                .into_iter()
                .map(|r| r.map_err(Either::Right))
                .collect(),
        }
    }
}

impl<A: BehaviorClassifier, B: BehaviorClassifier> BehaviorClassifier for Either<A, B> {
    type Error = Either<A::Error, B::Error>;

    fn space(&self) -> &DescriptorSpace {
        match self {
            Either::Left(a) => a.space(),
            Either::Right(b) => b.space(),
        }
    }

    fn name(&self) -> &str {
        match self {
            Either::Left(a) => a.name(),
            Either::Right(b) => b.name(),
        }
    }

    fn classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, Self::Error> {
        match self {
            Either::Left(a) => a.classify(candidate, evaluation).map_err(Either::Left),
            Either::Right(b) => b.classify(candidate, evaluation).map_err(Either::Right),
        }
    }
}

/// The evaluator that cannot exist: the side of an [`Either`] that a build leaves out (for
/// example the distributed evaluator of a build without distribution), so the `Either` keeps
/// one type whatever the build. No value of it can be made, so it is never called.
#[async_trait]
impl Evaluator for std::convert::Infallible {
    type Error = std::convert::Infallible;

    async fn evaluate(&self, _candidate: &Candidate) -> Result<Evaluation, Self::Error> {
        match *self {}
    }
}
