//! One baseline figure per run: the reference every candidate's speedup, and so its fitness,
//! is computed against.
//!
//! The evaluator times the task's baseline beside each candidate (interleaved launches, a
//! rolling window per worker). On a loaded machine that timing varies (1.8x at a 2048³ GEMM),
//! so a speedup over the baseline timed beside each candidate ranks candidates partly by how
//! the baseline happened to run: a kernel measured at 412.7 GFLOP/s lost its cell to one at
//! 264.4. The engine therefore scores every evaluation against one [`RunBaseline`]: the
//! baseline median of the first judged evaluation that measured one, fixed for the rest of the
//! run. Within a run, fitness then orders candidates by their own times, and the speedup stays
//! a speedup over the task baseline as measured at the start of the run.
//!
//! * **Several workers** (isolated worker processes, `kf worker`s of a distributed run): each
//!   times the baseline itself, but the engine that judges their results holds the one
//!   reference, so every worker's candidates are scored against it. A run's jobs go to one
//!   device kind, so kernel times are comparable across its workers; a worker's own baseline
//!   stays in [`Evaluation::baseline`] (and its timeouts).
//! * **Resume**: every scored evaluation records its reference
//!   ([`Evaluation::reference_baseline_s`]), and replaying the recorded steps fixes the same
//!   reference again ([`RunBaseline::adopt`]), so evaluations after a resume are scored
//!   against the figure of the run's start. A run directory written before the reference was
//!   recorded fixes it from the first replayed baseline, as a new run would.

use serde::{Deserialize, Serialize};

use crate::evaluation::{Evaluation, Status};

/// The run's reference baseline median: unset until the first judged evaluation that measured
/// a baseline, then fixed (see the [module documentation](self)).
///
/// ```
/// use kf_core::{Evaluation, Fitness, RunBaseline, TimingStats};
///
/// let timed = |s: f64| TimingStats::from_samples(&[s]).unwrap();
/// let mut run = RunBaseline::new();
/// // The first evaluation: 1 ms beside a baseline of 4 ms; its baseline becomes the reference.
/// let mut first = Evaluation::correct(timed(1e-3), Some(timed(4e-3)));
/// run.score(&mut first);
/// run.adopt(&first);
/// assert_eq!(run.reference_s(), Some(4e-3));
/// // The same kernel time beside a baseline that ran at 7 ms: the same speedup and fitness.
/// let mut again = Evaluation::correct(timed(1e-3), Some(timed(7e-3)));
/// run.score(&mut again);
/// assert_eq!(again.speedup, Some(4.0));
/// assert_eq!(Fitness::of(&again), Fitness::of(&first));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunBaseline {
    reference_s: Option<f64>,
}

impl RunBaseline {
    /// No reference yet.
    pub fn new() -> Self {
        RunBaseline::default()
    }

    /// The reference baseline median, seconds, once fixed.
    pub fn reference_s(&self) -> Option<f64> {
        self.reference_s
    }

    /// Scores `evaluation` against the run's reference ([`Evaluation::score_against`]);
    /// before the reference is fixed, against the baseline timed beside it (which
    /// [`RunBaseline::adopt`] then fixes). Returns the reference used, `None` when there was
    /// none or the evaluation is not a correct, timed one.
    pub fn score(&self, evaluation: &mut Evaluation) -> Option<f64> {
        let reference = self.reference_s.or_else(|| {
            evaluation
                .baseline
                .map(|b| b.median_s)
                .filter(|s| s.is_finite() && *s > 0.0)
        })?;
        evaluation.score_against(reference);
        (evaluation.reference_baseline_s == Some(reference)).then_some(reference)
    }

    /// Fixes the reference from a judged evaluation (one the archive took in, live or
    /// replayed) when none is fixed yet: its [`Evaluation::speedup_reference_s`], for a correct
    /// evaluation. Later calls change nothing. Returns whether the reference was fixed now.
    pub fn adopt(&mut self, evaluation: &Evaluation) -> bool {
        if self.reference_s.is_some() || evaluation.status != Status::Correct {
            return false;
        }
        self.reference_s = evaluation.speedup_reference_s();
        self.reference_s.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fitness, TimingStats};

    fn timed(kernel_s: f64, baseline_s: Option<f64>) -> Evaluation {
        let stats = |s: f64| TimingStats::from_samples(&[s]);
        Evaluation::correct(stats(kernel_s).unwrap(), baseline_s.and_then(stats))
    }

    #[test]
    fn identical_kernel_times_get_the_same_fitness_while_the_baseline_drifts() {
        let mut run = RunBaseline::new();
        let mut judged = Vec::new();
        // The baseline's measured time drifts 1.8x over the run; the kernel's does not.
        for baseline_s in [4.0e-3, 7.2e-3, 5.1e-3, 4.4e-3] {
            let mut e = timed(1.0e-3, Some(baseline_s));
            run.score(&mut e);
            run.adopt(&e);
            judged.push(e);
        }
        assert_eq!(run.reference_s(), Some(4.0e-3));
        for e in &judged {
            assert_eq!(e.speedup, Some(4.0));
            assert_eq!(Fitness::of(e), Fitness::of(&judged[0]));
        }
        // Scored beside its own baseline (the old rule), the same kernel time ranked 1.8x apart.
        let (old_first, old_second) = (timed(1.0e-3, Some(4.0e-3)), timed(1.0e-3, Some(7.2e-3)));
        assert!(Fitness::of(&old_second) > Fitness::of(&old_first));
    }

    #[test]
    fn the_faster_kernel_is_fitter_whatever_its_baseline_measured() {
        let mut run = RunBaseline::new();
        let mut start = timed(1.56e-3, Some(20.0e-3));
        run.score(&mut start);
        run.adopt(&start);
        // 412.7 against 264.4 GFLOP/s, the baseline beside it running 1.8x faster.
        let mut faster = timed(1.0e-3, Some(20.0e-3 / 1.8));
        assert!(Fitness::of(&faster) < Fitness::of(&start), "the old rule");
        run.score(&mut faster);
        assert!(Fitness::of(&faster) > Fitness::of(&start));
        assert_eq!(faster.baseline.map(|b| b.median_s), Some(20.0e-3 / 1.8));
    }

    #[test]
    fn nothing_is_fixed_without_a_measured_baseline_and_failures_are_left_alone() {
        let mut run = RunBaseline::new();
        let mut no_baseline = timed(1.0e-3, None);
        assert_eq!(run.score(&mut no_baseline), None);
        assert!(!run.adopt(&no_baseline));
        assert_eq!(no_baseline.speedup, None);
        let mut failed = Evaluation::failed(Status::WrongValues, "");
        assert_eq!(run.score(&mut failed), None);
        assert!(!run.adopt(&failed));
        assert_eq!(run.reference_s(), None);
        let mut first = timed(2.0e-3, Some(6.0e-3));
        assert_eq!(run.score(&mut first), Some(6.0e-3));
        assert!(run.adopt(&first));
        assert!(!run.adopt(&timed(1.0e-3, Some(9.0e-3))), "fixed once");
        // A correct evaluation without a baseline of its own is scored against the run's.
        let mut later = timed(3.0e-3, None);
        assert_eq!(run.score(&mut later), Some(6.0e-3));
        assert_eq!(later.speedup, Some(2.0));
    }
}
