//! Budgets and why a run stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Limits on a run. The engine stops launching steps when any is reached. The evaluation limit
/// is exact: no more candidates are evaluated than it allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Candidates evaluated (seeds included).
    pub max_evaluations: Option<u64>,
    /// Wall-clock time; steps in flight when it is reached still finish.
    pub max_wall: Option<Duration>,
    /// Mutator spend in US dollars.
    pub max_cost_usd: Option<f64>,
    /// Mutator tokens.
    pub max_tokens: Option<u64>,
}

impl Budget {
    /// At most `n` evaluations.
    pub fn evaluations(n: u64) -> Self {
        Budget {
            max_evaluations: Some(n),
            ..Budget::default()
        }
    }

    /// Adds a wall-clock limit.
    pub fn with_wall(mut self, wall: Duration) -> Self {
        self.max_wall = Some(wall);
        self
    }

    /// Adds a cost limit.
    pub fn with_cost_usd(mut self, usd: f64) -> Self {
        self.max_cost_usd = Some(usd);
        self
    }

    /// Adds a token limit.
    pub fn with_tokens(mut self, tokens: u64) -> Self {
        self.max_tokens = Some(tokens);
        self
    }

    /// True when no limit is set (the engine refuses to run forever).
    pub fn is_unbounded(&self) -> bool {
        self.max_evaluations.is_none()
            && self.max_wall.is_none()
            && self.max_cost_usd.is_none()
            && self.max_tokens.is_none()
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The evaluation budget was spent.
    Evaluations,
    /// The wall-clock budget was spent.
    WallTime,
    /// The cost budget was spent.
    Cost,
    /// The token budget was spent.
    Tokens,
    /// A [`StopHandle`] asked the run to stop; steps in flight were abandoned.
    Stopped,
    /// The mutators proposed no child for
    /// [`EngineConfig::max_idle_steps`](crate::EngineConfig::max_idle_steps) steps in a row.
    Stalled,
}

/// Asks a running engine to stop from elsewhere (a Ctrl-C handler, a UI). Steps in flight are
/// dropped, which cancels their futures; every completed step is already recorded, so the run
/// can be resumed.
#[derive(Debug, Clone, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// A handle that has not been triggered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests the stop.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was requested.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}
