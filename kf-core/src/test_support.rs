//! What several test modules of the crate share.

use std::sync::{Arc, Mutex};

use crate::checkpoint::{Checkpoint, StepRecord};
use crate::error::BoxError;
use crate::traits::archive::Elite;
use crate::traits::mutator::{Mutation, MutationContext, Mutator};

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
