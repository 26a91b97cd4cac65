//! Type-erased forms of the capability traits: [`BoxMutator`], [`BoxEvaluator`],
//! [`BoxClassifier`], and their error [`DynError`].

use std::fmt;

use async_trait::async_trait;

use crate::candidate::Candidate;
use crate::descriptor::{Descriptor, DescriptorSpace};
use crate::error::BoxError;
use crate::evaluation::Evaluation;
use crate::traits::archive::{Elite, InsertOutcome};
use crate::traits::classifier::BehaviorClassifier;
use crate::traits::evaluator::Evaluator;
use crate::traits::mutator::{Mutation, MutationContext, Mutator, Needs};

/// The error of a boxed mutator, evaluator or classifier: the original error, boxed. Its
/// display and source are the original's; [`DynError::into_inner`] gives the box back.
///
/// ```
/// use kf_core::compose::DynError;
///
/// let e = DynError::new(std::io::Error::other("disk full"));
/// assert_eq!(e.to_string(), "disk full");
/// assert!(e.into_inner().downcast::<std::io::Error>().is_ok());
/// ```
pub struct DynError(BoxError);

impl DynError {
    /// Boxes an error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        DynError(Box::new(error))
    }

    /// Wraps an already boxed error.
    pub fn from_box(error: BoxError) -> Self {
        DynError(error)
    }

    /// The original error.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }

    /// The boxed original error.
    pub fn into_inner(self) -> BoxError {
        self.0
    }
}

impl fmt::Debug for DynError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for DynError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for DynError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Object-safe view of a [`Mutator`] with its error boxed.
#[async_trait]
trait DynMutator: Send + Sync {
    fn dyn_name(&self) -> &str;
    fn dyn_needs(&self) -> Needs;
    async fn dyn_mutate(&self, parent: &Elite, ctx: &MutationContext)
        -> Result<Mutation, DynError>;
    fn dyn_credit(&self, child: &Elite, outcome: &InsertOutcome);
}

#[async_trait]
impl<M: Mutator> DynMutator for M {
    fn dyn_name(&self) -> &str {
        self.name()
    }

    fn dyn_needs(&self) -> Needs {
        self.needs()
    }

    async fn dyn_mutate(
        &self,
        parent: &Elite,
        ctx: &MutationContext,
    ) -> Result<Mutation, DynError> {
        self.mutate(parent, ctx).await.map_err(DynError::new)
    }

    fn dyn_credit(&self, child: &Elite, outcome: &InsertOutcome) {
        self.credit(child, outcome);
    }
}

/// A [`Mutator`] of any type, boxed: name, needs, mutations and credit are those of the
/// mutator inside; its error is a [`DynError`] holding the inner mutator's error.
///
/// ```
/// use kf_core::compose::{BoxMutator, MutatorExt};
/// use kf_core::prelude::*;
/// use kf_core::testing::{SyntheticMutator, UniformMutator};
///
/// let mutators: Vec<BoxMutator> =
///     vec![SyntheticMutator::new(0.1).boxed_mutator(), BoxMutator::new(UniformMutator::new(3))];
/// let names: Vec<&str> = mutators.iter().map(|m| m.name()).collect();
/// assert_eq!(names, ["synthetic-gaussian", "uniform-random"]);
/// ```
pub struct BoxMutator(Box<dyn DynMutator>);

impl BoxMutator {
    /// Boxes a mutator.
    pub fn new<M: Mutator + 'static>(mutator: M) -> Self {
        BoxMutator(Box::new(mutator))
    }
}

impl fmt::Debug for BoxMutator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BoxMutator")
            .field(&self.0.dyn_name())
            .finish()
    }
}

#[async_trait]
impl Mutator for BoxMutator {
    type Error = DynError;

    fn name(&self) -> &str {
        self.0.dyn_name()
    }

    fn needs(&self) -> Needs {
        self.0.dyn_needs()
    }

    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, DynError> {
        self.0.dyn_mutate(parent, ctx).await
    }

    fn credit(&self, child: &Elite, outcome: &InsertOutcome) {
        self.0.dyn_credit(child, outcome);
    }
}

/// Object-safe view of an [`Evaluator`] with its error boxed.
#[async_trait]
trait DynEvaluator: Send + Sync {
    async fn dyn_evaluate(&self, candidate: &Candidate) -> Result<Evaluation, DynError>;
    async fn dyn_evaluate_batch(
        &self,
        candidates: &[Candidate],
    ) -> Vec<Result<Evaluation, DynError>>;
}

#[async_trait]
impl<E: Evaluator> DynEvaluator for E {
    async fn dyn_evaluate(&self, candidate: &Candidate) -> Result<Evaluation, DynError> {
        self.evaluate(candidate).await.map_err(DynError::new)
    }

    async fn dyn_evaluate_batch(
        &self,
        candidates: &[Candidate],
    ) -> Vec<Result<Evaluation, DynError>> {
        self.evaluate_batch(candidates)
            .await
            .into_iter()
            .map(|r| r.map_err(DynError::new))
            .collect()
    }
}

/// An [`Evaluator`] of any type, boxed: single and batch evaluations go to the evaluator
/// inside (so its batching is kept); its error is a [`DynError`].
///
/// ```
/// use kf_core::compose::{BoxEvaluator, EvaluatorExt};
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticEvaluator};
///
/// let evaluator: BoxEvaluator = SyntheticEvaluator::new().boxed_evaluator();
/// let eval = futures::executor::block_on(evaluator.evaluate(&synthetic_seed(3))).unwrap();
/// assert_eq!(eval.status, Status::Correct);
/// ```
pub struct BoxEvaluator(Box<dyn DynEvaluator>);

impl BoxEvaluator {
    /// Boxes an evaluator.
    pub fn new<E: Evaluator + 'static>(evaluator: E) -> Self {
        BoxEvaluator(Box::new(evaluator))
    }
}

impl fmt::Debug for BoxEvaluator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BoxEvaluator")
    }
}

#[async_trait]
impl Evaluator for BoxEvaluator {
    type Error = DynError;

    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, DynError> {
        self.0.dyn_evaluate(candidate).await
    }

    async fn evaluate_batch(&self, candidates: &[Candidate]) -> Vec<Result<Evaluation, DynError>> {
        self.0.dyn_evaluate_batch(candidates).await
    }
}

/// Object-safe view of a [`BehaviorClassifier`] with its error boxed.
trait DynClassifier: Send + Sync {
    fn dyn_space(&self) -> &DescriptorSpace;
    fn dyn_name(&self) -> &str;
    fn dyn_classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, DynError>;
}

impl<C: BehaviorClassifier> DynClassifier for C {
    fn dyn_space(&self) -> &DescriptorSpace {
        self.space()
    }

    fn dyn_name(&self) -> &str {
        self.name()
    }

    fn dyn_classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, DynError> {
        self.classify(candidate, evaluation).map_err(DynError::new)
    }
}

/// A [`BehaviorClassifier`] of any type, boxed: space and cells are those of the classifier
/// inside; its error is a [`DynError`].
///
/// ```
/// use kf_core::compose::{BoxClassifier, ClassifierExt};
/// use kf_core::prelude::*;
/// use kf_core::testing::SyntheticClassifier;
///
/// let classifier: BoxClassifier = SyntheticClassifier::new(4).boxed_classifier();
/// assert_eq!(classifier.space().cells(), 64);
/// ```
pub struct BoxClassifier(Box<dyn DynClassifier>);

impl BoxClassifier {
    /// Boxes a classifier.
    pub fn new<C: BehaviorClassifier + 'static>(classifier: C) -> Self {
        BoxClassifier(Box::new(classifier))
    }
}

impl fmt::Debug for BoxClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BoxClassifier")
            .field(self.0.dyn_space())
            .finish()
    }
}

impl BehaviorClassifier for BoxClassifier {
    type Error = DynError;

    fn space(&self) -> &DescriptorSpace {
        self.0.dyn_space()
    }

    fn name(&self) -> &str {
        self.0.dyn_name()
    }

    fn classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, DynError> {
        self.0.dyn_classify(candidate, evaluation)
    }
}

/// Combinators for every [`Mutator`].
pub trait MutatorExt: Mutator + Sized + 'static {
    /// This mutator as a [`BoxMutator`].
    ///
    /// ```
    /// use kf_core::compose::MutatorExt;
    /// use kf_core::prelude::*;
    ///
    /// let m = kf_core::testing::UniformMutator::new(3).boxed_mutator();
    /// assert_eq!(m.name(), "uniform-random");
    /// ```
    fn boxed_mutator(self) -> BoxMutator {
        BoxMutator::new(self)
    }
}

impl<M: Mutator + 'static> MutatorExt for M {}

/// Combinators for every [`Evaluator`].
pub trait EvaluatorExt: Evaluator + Sized + 'static {
    /// This evaluator as a [`BoxEvaluator`].
    ///
    /// ```
    /// use kf_core::compose::{BoxEvaluator, EvaluatorExt};
    ///
    /// let e: BoxEvaluator = kf_core::testing::SyntheticEvaluator::new().boxed_evaluator();
    /// # let _ = e;
    /// ```
    fn boxed_evaluator(self) -> BoxEvaluator {
        BoxEvaluator::new(self)
    }
}

impl<E: Evaluator + 'static> EvaluatorExt for E {}

/// Combinators for every [`BehaviorClassifier`].
pub trait ClassifierExt: BehaviorClassifier + Sized + 'static {
    /// This classifier as a [`BoxClassifier`].
    ///
    /// ```
    /// use kf_core::compose::ClassifierExt;
    /// use kf_core::prelude::*;
    ///
    /// let c = kf_core::testing::SyntheticClassifier::new(2).boxed_classifier();
    /// assert_eq!(c.space().ndim(), 3);
    /// ```
    fn boxed_classifier(self) -> BoxClassifier {
        BoxClassifier::new(self)
    }
}

impl<C: BehaviorClassifier + 'static> ClassifierExt for C {}
