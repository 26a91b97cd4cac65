//! Checkpointing: a record of every completed step, so a killed run can resume exactly.

use serde::{Deserialize, Serialize};

use crate::candidate::{Candidate, CandidateId};
use crate::error::BoxError;
use crate::novelty::NoveltyCounts;
use crate::traits::archive::{Elite, InsertOutcome};
use crate::traits::mutator::Usage;

/// What happened to one child of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ChildRecord {
    /// It was judged and offered to the archive.
    Judged {
        /// The judged candidate.
        elite: Box<Elite>,
        /// What the archive did with it.
        outcome: InsertOutcome,
    },
    /// It could not be judged (the evaluator or classifier failed).
    Failed {
        /// The candidate.
        candidate: Box<Candidate>,
        /// Why.
        error: String,
    },
}

impl ChildRecord {
    /// The child's candidate.
    pub fn candidate(&self) -> &Candidate {
        match self {
            ChildRecord::Judged { elite, .. } => &elite.candidate,
            ChildRecord::Failed { candidate, .. } => candidate,
        }
    }
}

/// One completed engine step: the parent it mutated, what the mutator cost, and each child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Step number, from 0.
    pub step: u64,
    /// The selected parent (`None` for seed steps).
    pub parent: Option<CandidateId>,
    /// What the mutation cost.
    #[serde(default)]
    pub usage: Usage,
    /// Children in order.
    pub children: Vec<ChildRecord>,
    /// The mutator's error, when the step failed before producing children.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the evaluation budget shaped this step: it was launched with fewer evaluations
    /// than a step may use, or after the run had once used up its budget and waited for steps
    /// in flight. Such a step would go differently under a larger budget, so a checkpoint that
    /// extends a run drops it and everything after it, and the extended run recomputes them
    /// exactly as a run with the larger budget from the start would have.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_bound: bool,
    /// The emitter a scheduler chose for this step (see [`crate::emitter`]); a resumed run
    /// that would choose another is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emitter: Option<String>,
    /// Children the novelty filter found before evaluation (see [`crate::novelty`]).
    #[serde(default, skip_serializing_if = "NoveltyCounts::is_zero")]
    pub novelty: NoveltyCounts,
}

/// Persists step records as they complete and hands them back on resume. The engine calls
/// [`Checkpoint::record`] after it inserted a step's children and before any observer hears of
/// them, so nothing reported is ever lost to a crash.
///
/// # Example
///
/// An in-memory checkpoint (useful in tests; `kf-archive` ships the crash-safe run directory):
///
/// ```
/// use kf_core::prelude::*;
///
/// #[derive(Default)]
/// struct InMemory(Vec<StepRecord>);
///
/// impl<A> Checkpoint<A> for InMemory {
///     fn recorded(&mut self) -> Result<Vec<StepRecord>, BoxError> {
///         Ok(self.0.clone())
///     }
///     fn record(&mut self, step: &StepRecord, _archive: &A) -> Result<(), BoxError> {
///         self.0.push(step.clone());
///         Ok(())
///     }
/// }
/// ```
pub trait Checkpoint<A>: Send {
    /// Steps recorded by an earlier run, in step order; the engine replays them instead of
    /// mutating and evaluating again.
    fn recorded(&mut self) -> Result<Vec<StepRecord>, BoxError>;

    /// Persists one completed step. `archive` is the archive after its insertions, for
    /// implementations that snapshot it.
    fn record(&mut self, step: &StepRecord, archive: &A) -> Result<(), BoxError>;

    /// Called once when the run ends normally.
    fn finish(&mut self, _archive: &A) -> Result<(), BoxError> {
        Ok(())
    }
}
