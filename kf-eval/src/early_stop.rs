//! The decision rules that make one tuning evaluation cheaper without weakening a check:
//! [`EarlyStop`] (stop timing a candidate that is clearly slower than the incumbent) and
//! [`measures_baseline`] (re-measure the task baseline every few evaluations, not in every
//! one). Both are pure functions of their inputs, so a replayed run decides the same.

use kf_core::noise::mann_whitney_less;
use serde::{Deserialize, Serialize};

/// Default significance level of [`EarlyStop`].
pub const EARLY_STOP_ALPHA: f64 = 0.01;

/// Default number of timed trials at which [`EarlyStop`] looks (once).
pub const EARLY_STOP_TRIALS: u32 = 3;

/// Default ratio of medians below which [`EarlyStop`] never stops (near-ties are timed in
/// full, so that the ranking near the top stays as precise as without the rule).
pub const EARLY_STOP_MIN_RATIO: f64 = 1.05;

/// Stops timing a candidate once it is clearly slower than the incumbent (the best
/// configuration so far), for tuning: the rest of its trials could only refine the time of a
/// configuration that will not be chosen.
///
/// The rule looks **once**, after [`EarlyStop::trials`] timed trials: it stops when the
/// candidate's median is at least [`EarlyStop::min_ratio`] times the incumbent's and a
/// one-sided Mann–Whitney U test ([`kf_core::noise::mann_whitney_less`]) rejects "the
/// incumbent is not faster" at level [`EarlyStop::alpha`]. A candidate from the same timing
/// distribution as the incumbent is therefore stopped with probability at most `alpha` (one
/// look, no repeated testing). A stopped candidate is still verified on every input set, its
/// timed outputs are still checked, and its time is the median of the trials it had; only its
/// precision is lower. The samples are raw seconds: a machine that slows down between the
/// incumbent's evaluation and the candidate's makes stops more likely, never a wrong
/// verdict on correctness.
///
/// ```
/// use kf_eval::EarlyStop;
///
/// let rule = EarlyStop::against(&[1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99]);
/// assert!(rule.decide(&[1.30, 1.31, 1.29]).is_some()); // clearly slower
/// assert!(rule.decide(&[1.00, 1.02, 0.99]).is_none()); // a tie: timed in full
/// assert!(rule.decide(&[1.30, 1.31]).is_none()); // not yet at its look
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlyStop {
    /// The incumbent's trial times (seconds, as [`kf_core::Evaluation::samples`] keeps them).
    pub incumbent: Vec<f64>,
    /// Significance level of the one-sided test (default [`EARLY_STOP_ALPHA`]).
    pub alpha: f64,
    /// Timed trials after which the rule looks, once (default [`EARLY_STOP_TRIALS`]).
    pub trials: u32,
    /// Smallest ratio of the candidate's median to the incumbent's that may stop (default
    /// [`EARLY_STOP_MIN_RATIO`]).
    pub min_ratio: f64,
}

impl EarlyStop {
    /// The rule with its defaults against an incumbent's samples.
    pub fn against(incumbent: &[f64]) -> Self {
        EarlyStop {
            incumbent: incumbent.to_vec(),
            alpha: EARLY_STOP_ALPHA,
            trials: EARLY_STOP_TRIALS,
            min_ratio: EARLY_STOP_MIN_RATIO,
        }
    }

    /// After the candidate's timed trials `candidate` (seconds, in order): `Some(p)` with the
    /// test's p-value when timing stops now, `None` to go on. Only the look at exactly
    /// [`EarlyStop::trials`] samples can stop; an incumbent with fewer than
    /// [`kf_core::noise::DEFAULT_MIN_SAMPLES`] samples never stops anything.
    pub fn decide(&self, candidate: &[f64]) -> Option<f64> {
        if candidate.len() != self.trials as usize
            || self.incumbent.len() < kf_core::noise::DEFAULT_MIN_SAMPLES
        {
            return None;
        }
        let (Some(mine), Some(theirs)) = (median(candidate), median(&self.incumbent)) else {
            return None;
        };
        if mine < self.min_ratio * theirs {
            return None;
        }
        let p = mann_whitney_less(&self.incumbent, candidate);
        (p < self.alpha).then_some(p)
    }
}

/// The median of the finite values, `None` when there is none.
pub(crate) fn median(samples: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|s| s.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    })
}

/// Whether the evaluation numbered `evaluation` (0-based, counted per baseline in one worker)
/// times the task baseline interleaved with its candidate. It does while the baseline's
/// rolling window holds fewer than `needed` samples (so that a speedup is always against a
/// measured baseline) and then every `every`-th evaluation (`every` ≤ 1: every evaluation,
/// the search's default). Between re-measurements the speedup uses the window's median,
/// which then is at most `every − 1` evaluations old.
pub fn measures_baseline(evaluation: u64, window_samples: usize, needed: u32, every: u32) -> bool {
    window_samples < needed as usize || every <= 1 || evaluation.is_multiple_of(u64::from(every))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INCUMBENT: [f64; 10] = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.03];

    #[test]
    fn a_clearly_slower_candidate_stops_at_the_look_with_its_p_value() {
        let rule = EarlyStop::against(&INCUMBENT);
        let slower = [1.5, 1.52, 1.49];
        let p = rule.decide(&slower).expect("stops");
        assert!(p < EARLY_STOP_ALPHA, "{p}");
        // Every incumbent sample below every candidate sample: U = 30 of 30, z ≈ 2.47.
        assert!(p > 0.005 && p < 0.008, "{p}");
        // Before and after the look it never stops.
        assert_eq!(rule.decide(&slower[..2]), None);
        assert_eq!(rule.decide(&[1.5; 4]), None);
    }

    #[test]
    fn ties_faster_candidates_and_small_gaps_are_timed_in_full() {
        let rule = EarlyStop::against(&INCUMBENT);
        assert_eq!(rule.decide(&[1.0, 1.01, 0.99]), None);
        assert_eq!(rule.decide(&[0.5, 0.51, 0.49]), None);
        // 4% slower and perfectly separated: significant, but below the ratio.
        assert_eq!(rule.decide(&[1.04, 1.04, 1.04]), None);
        // Slower in the median, but overlapping too much to be significant at 1%.
        assert_eq!(rule.decide(&[1.2, 0.98, 1.25]), None);
    }

    #[test]
    fn an_incumbent_with_too_few_samples_or_no_finite_ones_stops_nothing() {
        let rule = EarlyStop::against(&[1.0, 1.0, 1.0]);
        assert_eq!(rule.decide(&[9.0; 3]), None);
        let rule = EarlyStop::against(&[f64::NAN; 8]);
        assert_eq!(rule.decide(&[9.0; 3]), None);
    }

    #[test]
    fn the_baseline_is_measured_until_its_window_is_full_then_every_nth_evaluation() {
        // Window not yet full: always measured.
        assert!(measures_baseline(3, 0, 3, 8));
        assert!(measures_baseline(5, 2, 3, 8));
        // Full: evaluations 0, 8, 16 … only.
        let measured: Vec<u64> = (0..20).filter(|e| measures_baseline(*e, 3, 3, 8)).collect();
        assert_eq!(measured, vec![0, 8, 16]);
        // every ≤ 1 is the search's rule: every evaluation.
        assert!((0..5).all(|e| measures_baseline(e, 15, 3, 1)));
        assert!((0..5).all(|e| measures_baseline(e, 15, 3, 0)));
    }
}
