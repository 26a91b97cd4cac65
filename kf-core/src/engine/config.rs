//! The engine's configuration.

use super::budget::Budget;
use crate::observe::{Observe, ObserverMode};

/// An observer and when it is called.
pub(super) type BoxedObserver = (Box<dyn Observe>, ObserverMode);

/// Tunable knobs of the loop.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Seed of the run's random stream.
    pub seed: u64,
    /// Limits.
    pub budget: Budget,
    /// Steps (mutation + evaluation) in flight at once.
    pub max_in_flight: usize,
    /// Children evaluated per step at most; extra children are dropped.
    pub max_children_per_step: usize,
    /// Inspirations handed to the mutator.
    pub inspirations: usize,
    /// Steps that may fail in a row (mutator or evaluator errors) before the run aborts.
    pub max_consecutive_failures: u32,
    /// Steps in a row that may propose no child at all before the run ends with
    /// [`StopReason::Stalled`](super::budget::StopReason::Stalled): the mutators have nothing
    /// left to offer the archive's parents (a parameter move on a kernel without parameters,
    /// say), and going on would only write
    /// empty steps until the wall-clock budget runs out. Parents are drawn at random, so a
    /// few empty steps in a row are normal; this many are not.
    pub max_idle_steps: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            seed: 0,
            budget: Budget::default(),
            max_in_flight: 1,
            max_children_per_step: 8,
            inspirations: 3,
            max_consecutive_failures: 16,
            max_idle_steps: 64,
        }
    }
}
