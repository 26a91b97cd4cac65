//! [`Mutator`]: proposes child kernels from a parent.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::candidate::Offspring;
use crate::device::DeviceFacts;
use crate::task::Task;
use crate::traits::archive::{ArchiveHints, Elite};

/// What a mutation cost (zero for offline mutators). The engine sums usages; its budget limits
/// only the opaque [`Usage::cost`] ([`Budget::max_cost`](crate::Budget::max_cost)). The request
/// and token counts and the dollars are records for reports (kf-prompt's LLM mutator fills
/// them, and converts what it spent into `cost`).
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
    /// The cost the engine's budget counts, in the mutators' own unit (see
    /// [`Budget::max_cost`](crate::Budget::max_cost)).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cost: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Usage {
    /// Total tokens (at most `u64::MAX`).
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// Adds another usage to this one. Counts saturate at `u64::MAX`: token counts are what a
    /// model server said.
    pub fn add(&mut self, other: &Usage) {
        self.requests = self.requests.saturating_add(other.requests);
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.cost_usd += other.cost_usd;
        self.cost += other.cost;
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

/// What a mutator needs from the engine besides the parent, so that the engine can refuse to
/// run ([`crate::CoreError::MissingContext`]) instead of letting the mutator return no children
/// for want of a task or device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// The task (its name and sizes), given with `Engine::task`.
    pub task: bool,
    /// Facts of the device, given with `Engine::device`.
    pub device: bool,
}

impl Needs {
    /// Nothing besides the parent (the default).
    pub const NOTHING: Needs = Needs {
        task: false,
        device: false,
    };
    /// The task.
    pub const TASK: Needs = Needs {
        task: true,
        device: false,
    };
    /// The task and the device facts.
    pub const TASK_AND_DEVICE: Needs = Needs {
        task: true,
        device: true,
    };

    /// What either of two mutators needs (for a mutator that combines others).
    pub fn union(self, other: Needs) -> Needs {
        Needs {
            task: self.task || other.task,
            device: self.device || other.device,
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
/// co-evolution does exactly this). A mutator that cannot work without the task or the device
/// facts says so with [`Mutator::needs`], and the engine refuses to run without them.
///
/// A mutator starts from the parameters its parent was measured with,
/// [`Elite::effective_params`]: a tuner may have moved them from the ones the parent was proposed
/// with.
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
///         let mut params = parent.effective_params();
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
///
/// /// Sets the tile size to the largest that divides the task's `M`: needs the task.
/// struct FitTile;
///
/// #[async_trait]
/// impl Mutator for FitTile {
///     type Error = std::convert::Infallible;
///
///     fn name(&self) -> &str {
///         "fit-tile"
///     }
///
///     fn needs(&self) -> Needs {
///         Needs::TASK
///     }
///
///     async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Self::Error> {
///         let m = ctx.task.sizes.get("M").copied().unwrap_or(1);
///         let ts = [64i64, 32, 16, 8].into_iter().find(|ts| m % ts == 0).unwrap_or(1);
///         let params = parent.effective_params().with("TS", ts);
///         let child = Offspring::new(parent.candidate.source.clone(), params, Origin::mutator("fit-tile"));
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

    /// What this mutator needs from the engine besides the parent. The default needs nothing;
    /// the engine refuses to run when a need is not met.
    fn needs(&self) -> Needs {
        Needs::NOTHING
    }

    /// Proposes children of `parent`.
    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Self::Error>;

    /// Told what became of one child: its evaluation and what it did for the archive. The
    /// default ignores it.
    fn credit(&self, _child: &Elite, _outcome: &crate::traits::archive::InsertOutcome) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token counts come from model servers: one that reports `u64::MAX` must not make the
    /// engine's sums overflow (found by the `chat_reply` fuzz target, in kf-prompt's usage).
    #[test]
    fn usage_saturates() {
        let mut total = Usage {
            requests: 1,
            prompt_tokens: u64::MAX,
            completion_tokens: 1,
            cost_usd: 0.5,
            cost: 0.25,
        };
        assert_eq!(total.tokens(), u64::MAX);
        total.add(&total.clone());
        assert_eq!(total.prompt_tokens, u64::MAX);
        assert_eq!(total.completion_tokens, 2);
        assert_eq!(total.requests, 2);
        assert_eq!(total.cost_usd, 1.0);
        assert_eq!(total.cost, 0.5);
    }
}
