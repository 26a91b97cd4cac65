//! Noise-aware elite replacement: the archive's use of [`kf_core::noise::ReplacementRule`].
//!
//! A challenger replaces the elite of its cell only when its fitness is higher, its median time
//! in seconds is not above the incumbent's, **and**, where both kept their timing samples, a
//! one-sided Mann–Whitney U test at α = 0.05 says it is faster (relative to the baseline median
//! each one's speedup is over). In a search the engine scores every evaluation against the
//! run's one reference baseline ([`kf_core::RunBaseline`]), so fitness and test both compare
//! the kernels' own times; the seconds check still guards elites scored each against the
//! baseline timed beside it (run directories written before the reference, archives filled
//! outside the engine), where a slow baseline sample made a slower copy look faster. Where
//! either lacks samples (run directories written before samples were kept, synthetic
//! problems) or either is not correct, the fitness comparison alone decides, as before. The
//! rule is a pure function of the two evaluations, so replays and resumed runs make the same
//! decisions.

use kf_core::noise::ReplacementRule;
use kf_core::Elite;

/// Whether `challenger` may replace `incumbent` in its cell: higher fitness, and, when the
/// default [`ReplacementRule`] applies to the pair, faster with confidence.
///
/// ```
/// use kf_archive::noise::replaces;
/// use kf_core::prelude::*;
///
/// let elite = |samples: &[f64]| {
///     let mut evaluation = Evaluation::correct(TimingStats::from_samples(samples).unwrap(), None);
///     evaluation.samples = kf_core::noise::keep_samples(samples);
///     let source = KernelSource::new(Language::OpenCl, "k", "");
///     Elite {
///         candidate: Candidate::seed(source, ParamValues::new()),
///         fitness: evaluation.fitness(),
///         evaluation,
///         descriptor: Descriptor::new(vec![0], "doc"),
///     }
/// };
/// let incumbent = elite(&[1.0, 1.1, 0.9, 1.0, 1.05, 0.95]);
/// // A lower median by luck: not enough.
/// assert!(!replaces(&elite(&[0.98, 1.1, 0.9, 1.0, 1.05, 0.93]), &incumbent));
/// assert!(replaces(&elite(&[0.5, 0.55, 0.45, 0.5, 0.52, 0.48]), &incumbent));
/// ```
pub fn replaces(challenger: &Elite, incumbent: &Elite) -> bool {
    if challenger.fitness <= incumbent.fitness {
        return false;
    }
    if slower_in_seconds(challenger, incumbent) {
        return false;
    }
    ReplacementRule::default()
        .decide(&challenger.evaluation, &incumbent.evaluation)
        .unwrap_or(true)
}

/// Whether the challenger's median time is above the incumbent's, for two correct kernels
/// that are timed on the same problem. Scored each against the baseline measured beside it,
/// a baseline that happened to run slowly makes a slower kernel look faster; measured in
/// seconds it is not, and it must not displace the elite (a copy of an elite measured later
/// "improved" its cell at 146.7 GFLOP/s over 163.8 that way, before the engine scored a run's
/// evaluations against one reference).
fn slower_in_seconds(challenger: &Elite, incumbent: &Elite) -> bool {
    let (c, i) = (&challenger.evaluation, &incumbent.evaluation);
    if !(c.status.is_correct() && i.status.is_correct()) {
        return false;
    }
    match (c.timing, i.timing) {
        (Some(c), Some(i)) if c.median_s.is_finite() && i.median_s.is_finite() => {
            c.median_s > i.median_s
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kf_core::prelude::*;
    use kf_core::RunBaseline;

    /// An elite timed at `kernel_s` seconds beside a baseline timed at `baseline_s`.
    fn elite(kernel_s: f64, baseline_s: f64) -> Elite {
        let samples: Vec<f64> = (0..8)
            .map(|i| kernel_s * (1.0 + 0.001 * i as f64))
            .collect();
        let base: Vec<f64> = (0..8)
            .map(|i| baseline_s * (1.0 + 0.001 * i as f64))
            .collect();
        let mut evaluation = Evaluation::correct(
            TimingStats::from_samples(&samples).unwrap(),
            TimingStats::from_samples(&base),
        );
        evaluation.samples = kf_core::noise::keep_samples(&samples);
        Elite {
            candidate: Candidate::seed(
                KernelSource::new(Language::OpenCl, "k", ""),
                ParamValues::new(),
            ),
            fitness: evaluation.fitness(),
            evaluation,
            descriptor: Descriptor::new(vec![0], "test"),
        }
    }

    #[test]
    fn a_slower_copy_beside_a_slow_baseline_does_not_displace_the_elite() {
        // The elite: 1.00 ms against a 4 ms baseline (speedup 4). A copy measured later at
        // 1.12 ms against a baseline that ran at 5 ms: speedup 4.46, higher fitness, slower.
        let incumbent = elite(1.0e-3, 4.0e-3);
        let copy = elite(1.12e-3, 5.0e-3);
        assert!(copy.fitness > incumbent.fitness);
        assert!(!replaces(&copy, &incumbent));
        // Faster in seconds and in speedup: it replaces.
        assert!(replaces(&elite(0.7e-3, 4.0e-3), &incumbent));
    }

    #[test]
    fn scored_against_the_run_baseline_the_faster_kernel_displaces_the_elite() {
        // At 2048³: the start at 264.4 GFLOP/s (65 ms) beside a baseline of 1.2 s, its
        // neighbour at 412.7 (41.6 ms) beside the same baseline timed 1.8x faster.
        let mut start = elite(65.0e-3, 1.2);
        let mut neighbour = elite(41.6e-3, 1.2 / 1.8);
        assert!(
            !replaces(&neighbour, &start),
            "each beside its own baseline"
        );
        let mut run = RunBaseline::new();
        run.score(&mut start.evaluation);
        run.adopt(&start.evaluation);
        run.score(&mut neighbour.evaluation);
        start.fitness = start.evaluation.fitness();
        neighbour.fitness = neighbour.evaluation.fitness();
        assert!(replaces(&neighbour, &start));
        assert!(!replaces(&start, &neighbour));
    }
}
