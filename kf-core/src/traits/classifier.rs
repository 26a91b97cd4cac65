//! [`BehaviorClassifier`]: places a candidate in a cell of the descriptor space.

use crate::candidate::Candidate;
use crate::descriptor::{Descriptor, DescriptorSpace};
use crate::evaluation::Evaluation;

/// Declares a descriptor space and places each evaluated candidate in one of its cells.
/// Classifiers may read the source (static patterns), the evaluation's compiler facts, or
/// anything else; the descriptor says which classifier produced it.
///
/// # Example
///
/// ```
/// use kf_core::prelude::*;
///
/// /// One dimension: does the kernel use local memory?
/// struct UsesLocal(DescriptorSpace);
///
/// impl BehaviorClassifier for UsesLocal {
///     type Error = std::convert::Infallible;
///     fn space(&self) -> &DescriptorSpace {
///         &self.0
///     }
///     fn classify(&self, c: &Candidate, _e: &Evaluation) -> Result<Descriptor, Self::Error> {
///         let level = usize::from(c.source.text.contains("__local"));
///         Ok(Descriptor::new([level], "uses-local"))
///     }
/// }
///
/// let space = DescriptorSpace::new(vec![Dimension::new("local", ["no", "yes"])]).unwrap();
/// let classifier = UsesLocal(space);
/// let kernel = KernelSource::new(Language::OpenCl, "k", "__kernel void k(__local float* t) {}");
/// let d = classifier
///     .classify(&Candidate::seed(kernel, ParamValues::new()), &Evaluation::failed(Status::Correct, ""))
///     .unwrap();
/// assert_eq!(d.coords, vec![1]);
/// ```
pub trait BehaviorClassifier: Send + Sync {
    /// Why a candidate could not be classified.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The space this classifier's descriptors live in.
    fn space(&self) -> &DescriptorSpace;

    /// A stable name, recorded in reports (default `classifier`).
    fn name(&self) -> &str {
        "classifier"
    }

    /// The cell of one evaluated candidate.
    fn classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, Self::Error>;
}

/// A shared classifier classifies like the one it shares: the engine can own one handle while
/// a mutator or an evaluator layer predicts cells with another.
impl<C: BehaviorClassifier + ?Sized> BehaviorClassifier for std::sync::Arc<C> {
    type Error = C::Error;

    fn space(&self) -> &DescriptorSpace {
        (**self).space()
    }

    fn name(&self) -> &str {
        (**self).name()
    }

    fn classify(
        &self,
        candidate: &Candidate,
        evaluation: &Evaluation,
    ) -> Result<Descriptor, Self::Error> {
        (**self).classify(candidate, evaluation)
    }
}
