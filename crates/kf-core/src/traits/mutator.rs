//! [`Mutator`]: proposes child kernels from a parent.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::candidate::Offspring;
use crate::device::DeviceFacts;
use crate::task::Task;
use crate::traits::archive::{ArchiveHints, Elite};

/// Tokens, requests and money spent by a mutation (zero for offline mutators); the engine sums
/// them against its cost budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Requests made.
    pub requests: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Cost in US dollars.
    pub cost_usd: f64,
}

impl Usage {
    /// Total tokens.
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }

    /// Adds another usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.requests += other.requests;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cost_usd += other.cost_usd;
    }
}

/// What a mutation produced: children and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mutation {
    /// Proposed children (may be empty).
    pub children: Vec<Offspring>,
    /// What producing them cost.
    pub usage: Usage,
}

impl Mutation {
    /// Children at no cost.
    pub fn free(children: Vec<Offspring>) -> Self {
        Mutation {
            children,
            usage: Usage::default(),
        }
    }
}

/// Everything a mutator may look at besides the parent. It owns its data (the engine keeps
/// mutating the archive while mutations are in flight).
#[derive(Debug, Clone)]
pub struct MutationContext {
    /// Engine step this mutation belongs to.
    pub step: u64,
    /// A seed for the mutator's own random choices, derived from the run seed and the step, so
    /// a mutator that uses only this is deterministic.
    pub seed: u64,
    /// The task being optimised.
    pub task: Arc<Task>,
    /// Facts of the device kernels are evaluated on, when the embedder gave them.
    pub device: Option<Arc<DeviceFacts>>,
    /// Elites of other cells to draw ideas from.
    pub inspirations: Vec<Elite>,
    /// Where the archive is empty or improving.
    pub hints: ArchiveHints,
}

/// Proposes child kernels from a parent: an LLM rewrite, a structural transformation, a
/// parameter move, a crossover with the inspirations.
///
/// Errors are for infrastructure failures (an unreachable server); a child that is merely bad
/// should be returned and left to the evaluator to rank. After each child is judged the engine
/// calls [`Mutator::credit`], so that a mutator can learn which of its moves pay (prompt
/// co-evolution does exactly this).
///
/// # Example
///
/// ```
/// use kf_core::prelude::*;
/// use kf_core::async_trait;
///
/// /// Doubles the tile size `TS` of the parent, if it has one.
/// struct DoubleTile;
///
/// #[async_trait]
/// impl Mutator for DoubleTile {
///     type Error = std::convert::Infallible;
///
///     fn name(&self) -> &str {
///         "double-tile"
///     }
///
///     async fn mutate(&self, parent: &Elite, _ctx: &MutationContext) -> Result<Mutation, Self::Error> {
///         let mut params = parent.candidate.params.clone();
///         let Some(ts) = params.get("TS").and_then(ParamValue::as_i64) else {
///             return Ok(Mutation::default());
///         };
///         params.set("TS", ts * 2);
///         let child = Offspring::new(
///             parent.candidate.source.clone(),
///             params,
///             Origin::mutator(self.name()).with_note(format!("TS {ts} -> {}", ts * 2)),
///         );
///         Ok(Mutation::free(vec![child]))
///     }
/// }
/// ```
#[async_trait]
pub trait Mutator: Send + Sync {
    /// Infrastructure failure.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Short name, recorded in each child's origin.
    fn name(&self) -> &str;

    /// Proposes children of `parent`.
    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Self::Error>;

    /// Told what became of one child: its evaluation and what it did for the archive. The
    /// default ignores it.
    fn credit(&self, _child: &Elite, _outcome: &crate::traits::archive::InsertOutcome) {}
}
