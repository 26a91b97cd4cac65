//! Device evaluations: every configuration compiled and timed on the device, the candidate's own
//! and each one tuned for it inside the search. The engine's budget counts candidates; this
//! counts what the device really ran, so that a budget can be given in device evaluations.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kf_core::{BoxError, EvaluationReport, Observe};

/// The device evaluations of a run, shared by the [`TunedEvaluator`](crate::TunedEvaluator)
/// (which counts what it sends to the device and tunes no further than the limit allows), the
/// [`DeviceEvaluationCounter`] (which counts replayed evaluations) and the report. The limit
/// stops the run through the engine's budget
/// ([`Budget::max_device_evaluations`](kf_core::Budget::max_device_evaluations)), the one stop
/// mechanism; this count keeps tuning inside it.
///
/// ```
/// use kf_search::DeviceEvaluations;
///
/// let spent = DeviceEvaluations::with_limit(Some(10));
/// spent.add(4);
/// assert_eq!(spent.remaining(), Some(6));
/// assert!(!spent.is_spent());
/// spent.add(6);
/// assert!(spent.is_spent());
/// ```
#[derive(Debug, Clone, Default)]
pub struct DeviceEvaluations {
    spent: Arc<AtomicU64>,
    limit: Option<u64>,
}

impl DeviceEvaluations {
    /// A count at zero, with at most `limit` device evaluations (`None`: no limit).
    pub fn with_limit(limit: Option<u64>) -> Self {
        DeviceEvaluations {
            spent: Arc::default(),
            limit,
        }
    }

    /// Device evaluations counted so far.
    pub fn spent(&self) -> u64 {
        self.spent.load(Ordering::SeqCst)
    }

    /// The limit, when there is one.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Device evaluations left under the limit (`None`: no limit).
    pub fn remaining(&self) -> Option<u64> {
        self.limit.map(|l| l.saturating_sub(self.spent()))
    }

    /// Whether the limit is reached.
    pub fn is_spent(&self) -> bool {
        self.remaining() == Some(0)
    }

    /// Counts `n` more.
    pub fn add(&self, n: u64) {
        self.spent.fetch_add(n, Ordering::SeqCst);
    }
}

/// Counts the device evaluations of the evaluations replayed from the run directory into the
/// run's [`DeviceEvaluations`] (the [`TunedEvaluator`](crate::TunedEvaluator) counts the live
/// ones as it spends them:
/// [`Evaluation::device_evaluations`](kf_core::Evaluation::device_evaluations) is what each one
/// recorded), so that a resumed run tunes only within what is left. Add it with
/// `ObserverMode::Always`. It stops nothing: the engine's budget does
/// ([`Budget::with_device_evaluations`](kf_core::Budget::with_device_evaluations)), after the
/// step that spent the limit; tuning is cut short so as not to pass it, but the other children
/// of that step (and steps already in flight, with several in flight) are still evaluated,
/// untuned, one device evaluation each.
#[derive(Debug, Clone)]
pub struct DeviceEvaluationCounter {
    count: DeviceEvaluations,
}

impl DeviceEvaluationCounter {
    /// Counts replayed evaluations into `count`.
    pub fn new(count: DeviceEvaluations) -> Self {
        DeviceEvaluationCounter { count }
    }
}

impl Observe for DeviceEvaluationCounter {
    fn observe_evaluation(&mut self, r: &EvaluationReport<'_>) -> Result<(), BoxError> {
        if r.replayed {
            if let Some(e) = r.evaluation {
                self.count.add(e.device_evaluations());
            }
        }
        Ok(())
    }
}
