//! Composing the capability traits, in the manner of `tower`'s utilities: type-erased boxed
//! forms, a two-way [`Either`], and adapters that turn plain functions into implementations.
//!
//! * Boxed forms erase the concrete type and its error, so that mutators, evaluators or
//!   classifiers of different types can share a collection or a field:
//!   [`BoxMutator`], [`BoxEvaluator`], [`BoxClassifier`] (made with `new` or the extension
//!   methods [`MutatorExt::boxed_mutator`], [`EvaluatorExt::boxed_evaluator`],
//!   [`ClassifierExt::boxed_classifier`]). Their error is [`DynError`], which keeps the
//!   original error whole.
//! * [`Either`] holds one of two implementations and implements [`Mutator`](crate::Mutator),
//!   [`Evaluator`](crate::Evaluator) and [`BehaviorClassifier`](crate::BehaviorClassifier)
//!   when both sides do, without boxing; its error is `Either` of the two errors.
//! * [`mutator_fn`], [`evaluator_fn`] and [`classifier_fn`] make an implementation out of a
//!   synchronous function or closure.
//!
//! ```
//! use kf_core::compose::{mutator_fn, Either, MutatorExt};
//! use kf_core::prelude::*;
//! use kf_core::testing::SyntheticMutator;
//!
//! let keep = mutator_fn("keep", |parent: &Elite, _ctx: &MutationContext| {
//!     let child = Offspring::new(
//!         parent.candidate.source.clone(),
//!         parent.effective_params(),
//!         Origin::mutator("keep"),
//!     );
//!     Ok::<_, std::convert::Infallible>(Mutation::free(vec![child]))
//! });
//! // Chosen at run time, one type either way:
//! let gaussian = true;
//! let chosen = if gaussian { Either::Left(SyntheticMutator::new(0.1)) } else { Either::Right(keep) };
//! assert_eq!(chosen.name(), "synthetic-gaussian");
//! // Or erased, to keep several in one collection:
//! let all = vec![SyntheticMutator::new(0.1).boxed_mutator(), chosen.boxed_mutator()];
//! assert_eq!(all.len(), 2);
//! ```

mod boxed;
mod either;
mod func;

pub use boxed::{
    BoxClassifier, BoxEvaluator, BoxMutator, ClassifierExt, DynError, EvaluatorExt, MutatorExt,
};
pub use either::Either;
pub use func::{classifier_fn, evaluator_fn, mutator_fn, ClassifierFn, EvaluatorFn, MutatorFn};

#[cfg(test)]
mod tests;
