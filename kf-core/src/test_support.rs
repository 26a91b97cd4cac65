//! What several test modules of the crate share.

use std::sync::{Arc, Mutex};

use crate::candidate::Candidate;
use crate::checkpoint::{Checkpoint, StepRecord};
use crate::emitter::Scheduler;
use crate::engine::Engine;
use crate::error::BoxError;
use crate::testing::{SyntheticClassifier, SyntheticEvaluator, VecArchive};
use crate::traits::archive::Elite;
use crate::traits::mutator::{Mutation, MutationContext, Mutator};
use crate::BehaviorClassifier;

/// A checkpoint in memory whose records a test can read after the engine consumed it.
#[derive(Clone, Default)]
pub(crate) struct Shared(pub(crate) Arc<Mutex<Vec<StepRecord>>>);

impl Shared {
    /// A checkpoint holding `records`, as a killed run would have left them.
    pub(crate) fn holding(records: Vec<StepRecord>) -> Self {
        Shared(Arc::new(Mutex::new(records)))
    }

    /// The records so far.
    pub(crate) fn records(&self) -> Vec<StepRecord> {
        self.0.lock().unwrap().clone()
    }
}

impl<A> Checkpoint<A> for Shared {
    fn recorded(&mut self) -> Result<Vec<StepRecord>, BoxError> {
        Ok(self.records())
    }
    fn record(&mut self, step: &StepRecord, _: &A) -> Result<(), BoxError> {
        self.0.lock().unwrap().push(step.clone());
        Ok(())
    }
}

/// An engine on the synthetic problem, as the engine's tests run it.
pub(crate) type SyntheticEngine = Engine<SyntheticEvaluator, SyntheticClassifier, VecArchive>;

/// An engine in which `proposer` searches the synthetic problem (its evaluator, its classifier
/// of 4 levels per dimension, an empty [`VecArchive`] of that space) from the one seed `seed`;
/// the caller sets the budget and the rest.
pub(crate) fn synthetic_engine(proposer: impl Into<Scheduler>, seed: Candidate) -> SyntheticEngine {
    let classifier = SyntheticClassifier::new(4);
    let archive = VecArchive::new(classifier.space().clone());
    Engine::new(proposer, SyntheticEvaluator::new(), classifier, archive).seeds(vec![seed])
}

/// A mutator with nothing to propose (a parameter move on a kernel without parameters).
pub(crate) struct Barren;

#[async_trait::async_trait]
impl Mutator for Barren {
    type Error = std::convert::Infallible;
    fn name(&self) -> &str {
        "barren"
    }
    async fn mutate(&self, _: &Elite, _: &MutationContext) -> Result<Mutation, Self::Error> {
        Ok(Mutation::default())
    }
}
