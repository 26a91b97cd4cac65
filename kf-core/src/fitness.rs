//! Fitness: one scalar that ranks the result ladder first, then speed.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::evaluation::{Evaluation, Status};

/// A scalar that orders evaluations: every correct kernel beats every incorrect one, incorrect
/// kernels are ordered by their rung on the ladder (with partial credit inside the
/// `wrong_values` rung for the fraction of elements that were right), and correct kernels are
/// ordered by speed.
///
/// Layout: an incorrect evaluation scores `rank + partial` with `rank` in `0..=4` and `partial`
/// in `[0, 1)`, so it lies in `[0, 5)`; a correct one scores `5 + speed`, where `speed` is the
/// speedup over the task baseline when known ([`Evaluation::speedup`]: in a search, over the
/// run's one reference baseline, [`crate::RunBaseline`], so that it ranks the run's candidates
/// by their own times), otherwise throughput in GFLOP/s when known,
/// otherwise launches per millisecond. Fitness is never NaN and never negative, so a QD-score
/// with offset 0 is monotone.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fitness(f64);

impl Fitness {
    /// Fitness of the lowest rung.
    pub const MIN: Fitness = Fitness(0.0);
    /// Where correct kernels start.
    pub const CORRECT_BASE: f64 = 5.0;

    /// Wraps a raw value; `None` if it is NaN, infinite or negative.
    pub fn new(value: f64) -> Option<Self> {
        (value.is_finite() && value >= 0.0).then_some(Fitness(value))
    }

    /// The scalar value.
    pub fn value(self) -> f64 {
        self.0
    }

    /// The fitness of an evaluation (see the type's documentation for the layout).
    pub fn of(evaluation: &Evaluation) -> Self {
        Self::with_speedup(evaluation, evaluation.speedup)
    }

    /// The fitness `evaluation` would have if it were scored against the baseline median
    /// `reference_s` ([`Evaluation::score_against`]), without changing it: ranks evaluations
    /// of one problem that measured their baselines at different moments by the same figure,
    /// that is by their own times (a tuner choosing among the configurations of one kernel).
    ///
    /// ```
    /// use kf_core::{Evaluation, Fitness, TimingStats};
    ///
    /// let timed = |s: f64| TimingStats::from_samples(&[s]).unwrap();
    /// // The faster kernel measured beside a baseline that ran fast: the lower speedup.
    /// let fast = Evaluation::correct(timed(1.0e-3), Some(timed(2.0e-3)));
    /// let slow = Evaluation::correct(timed(1.5e-3), Some(timed(4.0e-3)));
    /// assert!(Fitness::of(&fast) < Fitness::of(&slow));
    /// assert!(Fitness::against(&fast, 4.0e-3) > Fitness::against(&slow, 4.0e-3));
    /// ```
    pub fn against(evaluation: &Evaluation, reference_s: f64) -> Self {
        let mut scored = evaluation.speedup;
        if reference_s.is_finite() && reference_s > 0.0 {
            if let Some(t) = evaluation.timing.filter(|t| t.median_s > 0.0) {
                scored = Some(reference_s / t.median_s);
            }
        }
        Self::with_speedup(evaluation, scored)
    }

    /// [`Fitness::of`] with `speedup` in place of the evaluation's.
    fn with_speedup(evaluation: &Evaluation, speedup: Option<f64>) -> Self {
        let rank = f64::from(evaluation.status.rank());
        if evaluation.status == Status::Correct {
            let speed = speedup
                .or(evaluation.gflops)
                .or_else(|| {
                    evaluation
                        .timing
                        .filter(|t| t.median_s > 0.0)
                        .map(|t| 1e-3 / t.median_s)
                })
                .filter(|s| s.is_finite() && *s >= 0.0)
                .unwrap_or(0.0);
            return Fitness(Self::CORRECT_BASE + speed);
        }
        let partial = match (evaluation.status, evaluation.correctness) {
            (Status::WrongValues, Some(c)) if c.fraction_within.is_finite() => {
                // Strictly below 1 so that no incorrect kernel reaches the correct rung.
                c.fraction_within.clamp(0.0, 0.999)
            }
            _ => 0.0,
        };
        Fitness(rank + partial)
    }

    /// True when this fitness belongs to a correct kernel.
    pub fn is_correct(self) -> bool {
        self.0 >= Self::CORRECT_BASE
    }
}

impl Eq for Fitness {}

impl PartialOrd for Fitness {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Fitness {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl fmt::Display for Fitness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.4}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::{CorrectnessReport, TimingStats};

    #[test]
    fn ladder_orders_before_speed() {
        let mut order = Vec::new();
        for status in Status::ALL {
            order.push(Fitness::of(&Evaluation::failed(status, "")));
        }
        for w in order.windows(2) {
            assert!(w[0] <= w[1], "{:?} then {:?}", w[0], w[1]);
        }
        let mut wrong = Evaluation::failed(Status::WrongValues, "");
        wrong.correctness = Some(CorrectnessReport {
            fraction_within: 1.0,
            ..CorrectnessReport::default()
        });
        let slow = TimingStats::from_samples(&[10.0]).unwrap();
        let base = TimingStats::from_samples(&[0.001]).unwrap();
        let very_slow_correct = Evaluation::correct(slow, Some(base));
        assert!(Fitness::of(&wrong) < Fitness::of(&very_slow_correct));
        assert!(Fitness::of(&wrong) > Fitness::of(&Evaluation::failed(Status::WrongShape, "")));
    }

    #[test]
    fn faster_is_fitter() {
        let base = TimingStats::from_samples(&[2.0]).unwrap();
        let a = Evaluation::correct(TimingStats::from_samples(&[1.0]).unwrap(), Some(base));
        let b = Evaluation::correct(TimingStats::from_samples(&[0.5]).unwrap(), Some(base));
        assert_eq!(a.speedup, Some(2.0));
        assert!(Fitness::of(&b) > Fitness::of(&a));
    }

    #[test]
    fn rejects_non_finite() {
        assert!(Fitness::new(f64::NAN).is_none());
        assert!(Fitness::new(-1.0).is_none());
        assert!(Fitness::new(f64::INFINITY).is_none());
        let mut e = Evaluation::correct(TimingStats::from_samples(&[1.0]).unwrap(), None);
        e.speedup = Some(f64::NAN);
        assert!(Fitness::of(&e).value().is_finite());
    }
}
