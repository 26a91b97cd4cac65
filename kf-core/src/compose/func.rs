//! Implementations made from functions: [`mutator_fn`], [`evaluator_fn`], [`classifier_fn`].

use std::fmt;

use async_trait::async_trait;

use crate::candidate::Candidate;
use crate::descriptor::{Descriptor, DescriptorSpace};
use crate::evaluation::Evaluation;
use crate::traits::archive::Elite;
use crate::traits::classifier::BehaviorClassifier;
use crate::traits::evaluator::Evaluator;
use crate::traits::mutator::{Mutation, MutationContext, Mutator, Needs};

/// A [`Mutator`] made from a function, with [`mutator_fn`].
#[derive(Clone)]
pub struct MutatorFn<F> {
    name: String,
    needs: Needs,
    f: F,
}

/// A mutator named `name` whose mutations are `f(parent, ctx)`. It needs nothing besides the
/// parent unless told otherwise with [`MutatorFn::with_needs`], and ignores credit. The
/// function is synchronous; a mutator that awaits implements [`Mutator`] itself.
///
/// ```
/// use kf_core::compose::mutator_fn;
/// use kf_core::prelude::*;
///
/// let none = mutator_fn("none", |_parent: &Elite, _ctx: &MutationContext| {
///     Ok::<_, std::convert::Infallible>(Mutation::default())
/// })
/// .with_needs(Needs::TASK);
/// assert_eq!(none.name(), "none");
/// assert_eq!(none.needs(), Needs::TASK);
/// ```
pub fn mutator_fn<F, E>(name: impl Into<String>, f: F) -> MutatorFn<F>
where
    F: Fn(&Elite, &MutationContext) -> Result<Mutation, E> + Send + Sync,
    E: std::error::Error + Send + Sync + 'static,
{
    MutatorFn {
        name: name.into(),
        needs: Needs::NOTHING,
        f,
    }
}

impl<F> MutatorFn<F> {
    /// Declares what the mutator needs from the engine ([`Mutator::needs`]).
    pub fn with_needs(mut self, needs: Needs) -> Self {
        self.needs = needs;
        self
    }
}

impl<F> fmt::Debug for MutatorFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MutatorFn")
            .field("name", &self.name)
            .field("needs", &self.needs)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl<F, E> Mutator for MutatorFn<F>
where
    F: Fn(&Elite, &MutationContext) -> Result<Mutation, E> + Send + Sync,
    E: std::error::Error + Send + Sync + 'static,
{
    type Error = E;

    fn name(&self) -> &str {
        &self.name
    }

    fn needs(&self) -> Needs {
        self.needs
    }

    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, E> {
        (self.f)(parent, ctx)
    }
}

/// An [`Evaluator`] made from a function, with [`evaluator_fn`].
#[derive(Clone)]
pub struct EvaluatorFn<F> {
    f: F,
}

/// An evaluator whose evaluation of a candidate is `f(candidate)` (batches are evaluated one
/// after another). The function is synchronous; an evaluator that awaits implements
/// [`Evaluator`] itself.
///
/// ```
/// use kf_core::compose::evaluator_fn;
/// use kf_core::prelude::*;
/// use kf_core::testing::synthetic_seed;
///
/// let refuse = evaluator_fn(|_c: &Candidate| {
///     Ok::<_, std::convert::Infallible>(Evaluation::failed(Status::CompileError, "no compiler"))
/// });
/// let eval = futures::executor::block_on(refuse.evaluate(&synthetic_seed(3))).unwrap();
/// assert_eq!(eval.status, Status::CompileError);
/// ```
pub fn evaluator_fn<F, E>(f: F) -> EvaluatorFn<F>
where
    F: Fn(&Candidate) -> Result<Evaluation, E> + Send + Sync,
    E: std::error::Error + Send + Sync + 'static,
{
    EvaluatorFn { f }
}

impl<F> fmt::Debug for EvaluatorFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvaluatorFn").finish_non_exhaustive()
    }
}

#[async_trait]
impl<F, E> Evaluator for EvaluatorFn<F>
where
    F: Fn(&Candidate) -> Result<Evaluation, E> + Send + Sync,
    E: std::error::Error + Send + Sync + 'static,
{
    type Error = E;

    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, E> {
        (self.f)(candidate)
    }
}

/// A [`BehaviorClassifier`] made from a space and a function, with [`classifier_fn`].
#[derive(Clone)]
pub struct ClassifierFn<F> {
    space: DescriptorSpace,
    f: F,
}

/// A classifier over `space` whose cell of a candidate is `f(candidate, evaluation)`.
///
/// ```
/// use kf_core::compose::classifier_fn;
/// use kf_core::prelude::*;
///
/// let space = DescriptorSpace::new(vec![Dimension::new("local", ["no", "yes"])]).unwrap();
/// let uses_local = classifier_fn(space, |c: &Candidate, _e: &Evaluation| {
///     let level = usize::from(c.source.text.contains("__local"));
///     Ok::<_, std::convert::Infallible>(Descriptor::new([level], "uses-local"))
/// });
/// let kernel = KernelSource::new(Language::OpenCl, "k", "__kernel void k(__local float* t) {}");
/// let d = uses_local
///     .classify(&Candidate::seed(kernel, ParamValues::new()), &Evaluation::failed(Status::Correct, ""))
///     .unwrap();
/// assert_eq!(d.coords, vec![1]);
/// ```
pub fn classifier_fn<F, E>(space: DescriptorSpace, f: F) -> ClassifierFn<F>
where
    F: Fn(&Candidate, &Evaluation) -> Result<Descriptor, E> + Send + Sync,
    E: std::error::Error + Send + Sync + 'static,
{
    ClassifierFn { space, f }
}

impl<F> fmt::Debug for ClassifierFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassifierFn")
            .field("space", &self.space)
            .finish_non_exhaustive()
    }
}

impl<F, E> BehaviorClassifier for ClassifierFn<F>
where
    F: Fn(&Candidate, &Evaluation) -> Result<Descriptor, E> + Send + Sync,
    E: std::error::Error + Send + Sync + 'static,
{
    type Error = E;

    fn space(&self) -> &DescriptorSpace {
        &self.space
    }

    fn classify(&self, candidate: &Candidate, evaluation: &Evaluation) -> Result<Descriptor, E> {
        (self.f)(candidate, evaluation)
    }
}
