//! [`Refine`] and [`ClassifierExt`]: adjust any classifier's descriptor with a closure.

use kf_core::{BehaviorClassifier, Candidate, Descriptor, DescriptorSpace, Evaluation};

use crate::error::ClassifyError;

/// A classifier whose descriptors are adjusted by a function after the inner classifier has
/// made them; built with [`ClassifierExt::refine`]. The function sees the candidate and its
/// evaluation; the result is checked against the space.
///
/// ```
/// use kf_classify::{ClassifierExt, StaticClassifier};
/// use kf_core::prelude::*;
///
/// // Anything that ran slower than the baseline goes to the independent column.
/// let classifier = StaticClassifier::new().refine(|d: &mut Descriptor, _c: &Candidate, e: &Evaluation| {
///     if e.speedup.is_some_and(|s| s < 1.0) {
///         d.coords[2] = 0;
///         d.evidence.push("refined: slower than baseline".into());
///     }
/// });
/// let src = "__kernel void k(__global float* x) { barrier(CLK_LOCAL_MEM_FENCE); }";
/// let cand = Candidate::seed(KernelSource::new(Language::OpenCl, "k", src), ParamValues::new());
/// let mut eval = Evaluation::failed(Status::Correct, "");
/// assert_eq!(classifier.classify(&cand, &eval).unwrap().coords, vec![0, 1, 1]);
/// eval.speedup = Some(0.5);
/// assert_eq!(classifier.classify(&cand, &eval).unwrap().coords, vec![0, 1, 0]);
/// ```
#[derive(Debug, Clone)]
pub struct Refine<C, F> {
    inner: C,
    refine: F,
}

impl<C, F> Refine<C, F> {
    /// Wraps `inner`, adjusting its descriptors with `refine`.
    pub fn new(inner: C, refine: F) -> Self {
        Refine { inner, refine }
    }

    /// The wrapped classifier.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

/// What every refining wrapper does: classifies with `inner` (its error wrapped in
/// [`ClassifyError::Inner`]), lets `refine` adjust the descriptor, and checks the result
/// against `inner`'s space.
pub(crate) fn classify_refined<C: BehaviorClassifier>(
    inner: &C,
    candidate: &Candidate,
    evaluation: &Evaluation,
    refine: impl FnOnce(&mut Descriptor),
) -> Result<Descriptor, ClassifyError> {
    let mut d = inner
        .classify(candidate, evaluation)
        .map_err(|e| ClassifyError::Inner(Box::new(e)))?;
    refine(&mut d);
    inner.space().check(&d.coords)?;
    Ok(d)
}

impl<C, F> BehaviorClassifier for Refine<C, F>
where
    C: BehaviorClassifier,
    F: Fn(&mut Descriptor, &Candidate, &Evaluation) + Send + Sync,
{
    type Error = ClassifyError;

    fn space(&self) -> &DescriptorSpace {
        self.inner.space()
    }

    fn classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, Self::Error> {
        classify_refined(&self.inner, candidate, evaluation, |d| {
            (self.refine)(d, candidate, evaluation)
        })
    }
}

/// Combinators on every [`BehaviorClassifier`], in the manner of tower's `ServiceExt`.
pub trait ClassifierExt: BehaviorClassifier + Sized {
    /// Adjusts this classifier's descriptors with `refine` (see [`Refine`]).
    fn refine<F>(self, refine: F) -> Refine<Self, F>
    where
        F: Fn(&mut Descriptor, &Candidate, &Evaluation) + Send + Sync,
    {
        Refine::new(self, refine)
    }

    /// Refines this classifier's descriptors with compiler facts (see
    /// [`CompilerFactsClassifier`](crate::CompilerFactsClassifier)).
    fn with_compiler_facts(self) -> crate::CompilerFactsClassifier<Self> {
        crate::CompilerFactsClassifier::wrap(self)
    }
}

impl<C: BehaviorClassifier> ClassifierExt for C {}
