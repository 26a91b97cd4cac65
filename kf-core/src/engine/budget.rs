//! Budgets and why a run stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Limits on a run. The engine stops launching steps when any is reached. The evaluation limit
/// is exact: no more candidates are evaluated than it allows.
///
/// The cost is opaque to the engine: it sums the [`Usage::cost`](crate::Usage::cost) each
/// mutation reports, in whatever unit the mutators agree on (kf-prompt's LLM mutator reports
/// US dollars by default, or tokens or requests: `kf_prompt::CostUnit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Candidates evaluated (seeds included).
    pub max_evaluations: Option<u64>,
    /// Wall-clock time; steps in flight when it is reached still finish.
    pub max_wall: Option<Duration>,
    /// The mutators' summed cost ([`Usage::cost`](crate::Usage::cost)), in their unit.
    #[serde(default)]
    pub max_cost: Option<f64>,
    /// Device evaluations: every configuration compiled and timed, the ones an evaluator tuned
    /// for a candidate included
    /// ([`Evaluation::device_evaluations`](crate::Evaluation::device_evaluations); a child
    /// whose evaluation failed counts one). Counted from the steps as they complete, replayed
    /// ones included, so a resumed run spends only what is left.
    #[serde(default)]
    pub max_device_evaluations: Option<u64>,
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

    /// Adds a limit on the mutators' summed cost ([`Usage::cost`](crate::Usage::cost)).
    pub fn with_cost(mut self, cost: f64) -> Self {
        self.max_cost = Some(cost);
        self
    }

    /// Adds a limit on device evaluations ([`Budget::max_device_evaluations`]): the run stops
    /// after the step that spent it, as with the other limits.
    pub fn with_device_evaluations(mut self, n: u64) -> Self {
        self.max_device_evaluations = Some(n);
        self
    }

    /// Adds a cost limit in US dollars: the opaque cost limit, for mutators that report
    /// dollars as their cost (kf-prompt's LLM mutator does by default).
    #[deprecated(
        since = "0.1.0",
        note = "use `Budget::with_cost`: the engine's cost is opaque, and kf-prompt's LLM \
                mutator reports dollars in it unless told otherwise (`kf_prompt::CostUnit`)"
    )]
    pub fn with_cost_usd(self, usd: f64) -> Self {
        self.with_cost(usd)
    }

    /// True when no limit is set (the engine refuses to run forever).
    pub fn is_unbounded(&self) -> bool {
        self.max_evaluations.is_none()
            && self.max_wall.is_none()
            && self.max_cost.is_none()
            && self.max_device_evaluations.is_none()
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
    /// The cost budget ([`Budget::max_cost`]) was spent.
    Cost,
    /// The device-evaluation budget ([`Budget::max_device_evaluations`]) was spent.
    DeviceEvaluations,
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
