//! Noise-aware comparison of timings: the raw samples an [`Evaluation`] keeps, a
//! distribution-free interval for their median, and the rule that decides whether a challenger
//! is faster than an incumbent with a stated confidence.
//!
//! # The replacement rule
//!
//! Shared machines are noisy: a kernel that won its cell by one lucky measurement would block
//! better kernels for the rest of the run. [`ReplacementRule::decide`] therefore lets a
//! challenger replace an incumbent only when a **one-sided Mann–Whitney U test** on their
//! timing samples rejects "the challenger is not faster" at level [`ReplacementRule::alpha`]
//! (default [`DEFAULT_ALPHA`] = 0.05).
//!
//! * Samples are compared **relative to the baseline median each evaluation's speedup is
//!   over** ([`Evaluation::speedup_reference_s`]) when both have one, because the fitness is
//!   that speedup. In a search both are scored against the run's one reference
//!   ([`crate::RunBaseline`]), so this compares their seconds, as the fitness does; two
//!   evaluations scored each against the baseline timed beside it (outside a search) are
//!   compared relative to those. Otherwise the raw seconds are compared.
//! * The p-value uses the normal approximation with the tie correction and a continuity
//!   correction; it is a pure function of the samples, so the decision is deterministic and a
//!   replayed run makes the same decisions.
//! * The rule only applies when both evaluations are correct and each kept at least
//!   [`ReplacementRule::min_samples`] samples (default [`DEFAULT_MIN_SAMPLES`] = 5); it returns
//!   `None` otherwise, and the caller falls back to comparing fitness (old run directories
//!   without samples, synthetic problems, slow kernels cut short by the time limit).
//!
//! Why 0.05: a challenger drawn from the same distribution as the incumbent wins the fitness
//! comparison half the time; at α = 0.05 it then passes the test about one time in twenty, so
//! lucky replacements drop about tenfold, while with the protocol's usual 10–200 trials a real
//! improvement of a few percent on a machine with a few percent of noise is still detected.
//!
//! ```
//! use kf_core::noise::ReplacementRule;
//! use kf_core::{Evaluation, TimingStats};
//!
//! let timed = |samples: &[f64]| {
//!     let mut e = Evaluation::correct(TimingStats::from_samples(samples).unwrap(), None);
//!     e.samples = samples.to_vec();
//!     e
//! };
//! let incumbent = timed(&[1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.00]);
//! let lucky = timed(&[0.96, 1.02, 0.99, 1.01, 0.98, 1.03, 0.97, 1.00]);
//! let faster = timed(&[0.80, 0.81, 0.79, 0.80, 0.82, 0.78, 0.80, 0.81]);
//! let rule = ReplacementRule::default();
//! assert_eq!(rule.decide(&lucky, &incumbent), Some(false));
//! assert_eq!(rule.decide(&faster, &incumbent), Some(true));
//! ```

use serde::{Deserialize, Serialize};

use crate::evaluation::{median_of_sorted, Evaluation, Status};

/// Timing samples an evaluation keeps at most (a longer series is reduced to this many
/// evenly spaced order statistics, which keeps its distribution).
pub const MAX_KEPT_SAMPLES: usize = 64;

/// Default significance level of [`ReplacementRule`].
pub const DEFAULT_ALPHA: f64 = 0.05;

/// Default minimum number of samples on each side for [`ReplacementRule`] to apply.
pub const DEFAULT_MIN_SAMPLES: usize = 5;

/// The samples to keep from a series of trial times: the finite, non-negative ones in
/// ascending order, reduced to at most [`MAX_KEPT_SAMPLES`] evenly spaced order statistics
/// (the first and the last always kept).
pub fn keep_samples(samples: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = samples
        .iter()
        .copied()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n <= MAX_KEPT_SAMPLES {
        return sorted;
    }
    let last = (n - 1) as f64;
    let steps = (MAX_KEPT_SAMPLES - 1) as f64;
    (0..MAX_KEPT_SAMPLES)
        .map(|i| sorted[((i as f64) * last / steps).round() as usize])
        .collect()
}

/// A median with a confidence interval, in the samples' unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MedianInterval {
    /// The sample median.
    pub median: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
    /// Samples it was computed from.
    pub samples: usize,
}

/// The median of `samples` with a distribution-free 95% confidence interval: the order
/// statistics `k` and `n + 1 - k` (1-based) with `k = ⌊(n − 1.96 √n) / 2⌋`, the normal
/// approximation to the binomial interval for a median (the whole range below 6 samples).
/// `None` when no sample is finite and non-negative.
pub fn median_interval(samples: &[f64]) -> Option<MedianInterval> {
    let mut sorted: Vec<f64> = samples
        .iter()
        .copied()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = median_of_sorted(&sorted);
    let nf = n as f64;
    let k = ((nf - 1.96 * nf.sqrt()) / 2.0).floor().max(1.0) as usize;
    let k = k.min(n.div_ceil(2));
    Some(MedianInterval {
        median,
        lo: sorted[k - 1],
        hi: sorted[n - k],
        samples: n,
    })
}

/// One-sided Mann–Whitney U test: the p-value of "`x` is not stochastically smaller than `y`"
/// (small when the values of `x` tend to be below those of `y`). Normal approximation with the
/// tie and continuity corrections; 1 when either side is empty or all values tie.
pub fn mann_whitney_less(x: &[f64], y: &[f64]) -> f64 {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // U counts the pairs where x is below y, ties counting one half.
    let mut u = 0.0;
    for &a in x {
        for &b in y {
            if a < b {
                u += 1.0;
            } else if a == b {
                u += 0.5;
            }
        }
    }
    let mut all: Vec<f64> = x.iter().chain(y).copied().collect();
    all.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i + 1;
        while j < all.len() && all[j] == all[i] {
            j += 1;
        }
        let t = (j - i) as f64;
        ties += t * t * t - t;
        i = j;
    }
    let (n1, n2) = (n1 as f64, n2 as f64);
    let n = n1 + n2;
    let mean = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var.is_nan() || var <= 0.0 {
        return 1.0;
    }
    let z = (u - mean - 0.5) / var.sqrt();
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7);
/// also the normal distribution function of `kf-tune`'s Gaussian-process strategy.
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// When a challenger may replace an incumbent elite: see the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReplacementRule {
    /// Significance level of the one-sided test.
    pub alpha: f64,
    /// Samples needed on each side for the test to apply.
    pub min_samples: usize,
}

impl Default for ReplacementRule {
    fn default() -> Self {
        ReplacementRule {
            alpha: DEFAULT_ALPHA,
            min_samples: DEFAULT_MIN_SAMPLES,
        }
    }
}

impl ReplacementRule {
    /// The samples of `e` the test compares: relative to the baseline median its speedup is
    /// over when `relative`, else in seconds; `None` when it is not correct or kept too few
    /// samples.
    fn comparable(&self, e: &Evaluation, relative: bool) -> Option<Vec<f64>> {
        if e.status != Status::Correct || e.samples.len() < self.min_samples.max(1) {
            return None;
        }
        let scale = if relative {
            e.speedup_reference_s()?
        } else {
            1.0
        };
        Some(e.samples.iter().map(|s| s / scale).collect())
    }

    /// The one-sided p-value of "the challenger is not faster than the incumbent", or `None`
    /// when the rule does not apply (see [`ReplacementRule::decide`]).
    pub fn p_value(&self, challenger: &Evaluation, incumbent: &Evaluation) -> Option<f64> {
        let relative = [challenger, incumbent]
            .iter()
            .all(|e| e.speedup_reference_s().is_some());
        let c = self.comparable(challenger, relative)?;
        let i = self.comparable(incumbent, relative)?;
        Some(mann_whitney_less(&c, &i))
    }

    /// Whether `challenger` is faster than `incumbent` with confidence `1 − alpha`:
    /// `Some(true)` or `Some(false)` when both are correct and kept enough samples, `None`
    /// when the rule does not apply and the caller should compare fitness instead.
    pub fn decide(&self, challenger: &Evaluation, incumbent: &Evaluation) -> Option<bool> {
        self.p_value(challenger, incumbent).map(|p| p < self.alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TimingStats;

    fn timed(samples: &[f64], baseline: Option<f64>) -> Evaluation {
        let b = baseline.and_then(|b| TimingStats::from_samples(&[b]));
        let mut e = Evaluation::correct(TimingStats::from_samples(samples).unwrap(), b);
        e.samples = keep_samples(samples);
        e
    }

    #[test]
    fn keeps_at_most_the_bound_and_the_extremes() {
        let s: Vec<f64> = (0..500).rev().map(f64::from).collect();
        let k = keep_samples(&s);
        assert_eq!(k.len(), MAX_KEPT_SAMPLES);
        assert_eq!(k[0], 0.0);
        assert_eq!(k[MAX_KEPT_SAMPLES - 1], 499.0);
        assert!(k.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(keep_samples(&[3.0, f64::NAN, 1.0]), vec![1.0, 3.0]);
    }

    #[test]
    fn interval_brackets_the_median() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        let m = median_interval(&s).unwrap();
        assert_eq!(m.median, 50.5);
        assert!(m.lo < m.median && m.median < m.hi);
        assert_eq!((m.lo, m.hi), (40.0, 61.0));
        let one = median_interval(&[2.0]).unwrap();
        assert_eq!((one.lo, one.median, one.hi), (2.0, 2.0, 2.0));
        assert!(median_interval(&[]).is_none());
    }

    #[test]
    fn mann_whitney_matches_known_values() {
        // Completely separated samples of 10 each: z ≈ 3.74, p ≈ 9e-5.
        let x: Vec<f64> = (0..10).map(f64::from).collect();
        let y: Vec<f64> = (10..20).map(f64::from).collect();
        let p = mann_whitney_less(&x, &y);
        assert!(p > 5e-5 && p < 1.5e-4, "{p}");
        assert!(mann_whitney_less(&y, &x) > 0.999);
        assert_eq!(mann_whitney_less(&[1.0; 5], &[1.0; 5]), 1.0);
        assert_eq!(mann_whitney_less(&[], &[1.0]), 1.0);
    }

    #[test]
    fn falls_back_without_samples_or_when_incorrect() {
        let rule = ReplacementRule::default();
        let a = timed(&[1.0, 1.1, 0.9, 1.0, 1.05], None);
        let mut bare = a.clone();
        bare.samples.clear();
        assert_eq!(rule.decide(&bare, &a), None);
        assert_eq!(rule.decide(&a, &bare), None);
        let few = timed(&[0.1, 0.1], None);
        assert_eq!(rule.decide(&few, &a), None);
        let failed = Evaluation::failed(Status::WrongValues, "");
        assert_eq!(rule.decide(&failed, &a), None);
    }

    #[test]
    fn compares_relative_to_the_baseline_when_both_have_one() {
        let rule = ReplacementRule::default();
        // The challenger ran on a machine twice as slow (its baseline took twice as long) and
        // is 20% faster relative to it: it wins though its seconds are higher.
        let inc: Vec<f64> = (0..20).map(|i| 1.0 + 0.01 * f64::from(i % 5)).collect();
        let ch: Vec<f64> = inc.iter().map(|s| s * 2.0 * 0.8).collect();
        assert_eq!(
            rule.decide(&timed(&ch, Some(2.0)), &timed(&inc, Some(1.0))),
            Some(true)
        );
        assert_eq!(
            rule.decide(&timed(&ch, None), &timed(&inc, None)),
            Some(false)
        );
    }

    #[test]
    fn scored_against_one_run_baseline_the_seconds_decide() {
        let rule = ReplacementRule::default();
        // The challenger is 20% faster in seconds, but the baseline beside it ran 1.8x faster.
        let inc: Vec<f64> = (0..20).map(|i| 1.0 + 0.01 * f64::from(i % 5)).collect();
        let ch: Vec<f64> = inc.iter().map(|s| s * 0.8).collect();
        let (mut challenger, mut incumbent) = (timed(&ch, Some(1.0 / 1.8)), timed(&inc, Some(1.0)));
        assert_eq!(
            rule.decide(&challenger, &incumbent),
            Some(false),
            "the old rule"
        );
        let mut run = crate::RunBaseline::new();
        run.score(&mut incumbent);
        run.adopt(&incumbent);
        run.score(&mut challenger);
        assert_eq!(rule.decide(&challenger, &incumbent), Some(true));
        assert_eq!(rule.decide(&incumbent, &challenger), Some(false));
    }
}
