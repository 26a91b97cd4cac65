//! The timing configuration and the baseline's budget: how many trials, how long the baseline
//! is measured at first, how often it is measured again. The timing itself is `timing`.

use kf_core::TimingStats;
use serde::{Deserialize, Serialize};

use crate::early_stop::EarlyStop;

/// How candidates are timed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingConfig {
    /// Untimed launches before the first trial.
    pub warmup: u32,
    /// Trials at least.
    pub min_trials: u32,
    /// Seconds of measured kernel time at least (trials continue until both minimums hold).
    pub min_seconds: f64,
    /// Trials at most.
    pub max_trials: u32,
    /// Wall-clock seconds of timing at most (after `min(3, min_trials)` trials).
    pub max_seconds: f64,
    /// Baseline launches per evaluation, interleaved with the candidate's trials (at least
    /// [`FIRST_BASELINE_TRIALS`] in a worker's first evaluation).
    ///
    /// The baseline timed beside a candidate gives [`kf_core::Evaluation::baseline`] and the
    /// speedup `kf eval` reports. In a search the engine scores every evaluation against one
    /// figure instead ([`kf_core::RunBaseline`]: the baseline median of the run's first judged
    /// evaluation), because on a loaded machine this timing varies (1.8x at a 2048³ GEMM) and
    /// would rank candidates by how the baseline happened to run.
    pub baseline_trials: u32,
    /// Baseline samples kept per worker for the baseline median (a rolling window).
    pub baseline_window: usize,
    /// Copies of the inputs rotated across trials, so caches do not flatter small problems.
    pub rotation: usize,
    /// Also evict caches between trials where the backend can.
    pub flush_caches: bool,
    /// Once the baseline's window holds `baseline_trials` samples, time the baseline only in
    /// every `baseline_every`-th evaluation (per worker; see [`crate::measures_baseline`]).
    /// 1 (the default) times it in every evaluation.
    #[serde(default = "every_evaluation")]
    pub baseline_every: u32,
    /// Stop timing early when the candidate is clearly slower than this incumbent (tuning);
    /// `None` (the default) times every candidate in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_stop: Option<EarlyStop>,
    /// Seconds of baseline launches after which a worker's first evaluation stops adding
    /// them, once it has [`FIRST_BASELINE_MIN_TRIALS`] ([`FIRST_BASELINE_SECONDS`] by default;
    /// [`TUNING_FIRST_BASELINE_SECONDS`] in [`EvalConfig::for_tuning`](crate::EvalConfig::for_tuning)).
    #[serde(default = "first_baseline_seconds")]
    pub first_baseline_seconds: f64,
}

fn every_evaluation() -> u32 {
    1
}

fn first_baseline_seconds() -> f64 {
    FIRST_BASELINE_SECONDS
}

/// Baseline launches at least in a worker's first evaluation, whatever
/// [`TimingConfig::baseline_trials`] says (up to [`TimingConfig::baseline_window`], so the
/// default fills the window): in a search that evaluation's baseline median becomes the run's
/// reference ([`kf_core::RunBaseline`]) that every speedup is over. Three launches were too
/// few: a worker's first launches of the baseline run slow (a LayerNorm's first three after
/// the warm-up took 52, 79 and 85 µs where the full window's median was 52), and a median of
/// three took the slow ones, overstating every speedup of the run by 1.5x. It costs the
/// window's launches of the baseline once per worker (about 1.5 s for the naive GEMM at 1024³ on this project's 2-core machine).
pub const FIRST_BASELINE_TRIALS: u32 = 15;

/// Baseline launches at least in a worker's first evaluation, however slow the baseline.
/// Past these the first evaluation stops adding launches once the baseline's launches (its
/// warm-up included) have taken [`FIRST_BASELINE_SECONDS`]: a naive 2048³ GEMM takes 4 s a
/// launch on one core of this project's machine, and fifteen of them passed the evaluation's
/// 60 s limit, so no evaluation of such a run could finish. A baseline that slow varies far
/// less between launches than one of microseconds, which is what the fifteen are for.
pub const FIRST_BASELINE_MIN_TRIALS: u32 = 3;

/// Seconds of baseline launches after which a worker's first evaluation stops adding them
/// (once it has [`FIRST_BASELINE_MIN_TRIALS`]). Fifteen launches of the naive GEMM at 1024³
/// take about 1.5 s on this project's 2-core machine, so that run's reference is unchanged.
pub const FIRST_BASELINE_SECONDS: f64 = 4.0;

/// The first evaluation's baseline budget in [`EvalConfig::for_tuning`](crate::EvalConfig::for_tuning), seconds. A tuning
/// run's baseline only feeds its reported speedups and the timeout (strategies compare the
/// candidates' times), and a baseline slow enough to reach this bound varies little between
/// launches; at 1024³ the naive GEMM's 13 first launches took 4.3 s of a 40-configuration
/// run's 28.5 s of tuning on this project's 2-core machine.
pub const TUNING_FIRST_BASELINE_SECONDS: f64 = 1.0;

/// Whether an evaluation that has launched the baseline `done` times, taking `seconds`,
/// launches it again: up to `most` times, and past `least` only while the launches have taken
/// less than `budget_s` ([`TimingConfig::first_baseline_seconds`]).
pub(crate) fn more_baseline(done: u32, seconds: f64, least: u32, most: u32, budget_s: f64) -> bool {
    done < most && (done < least || seconds < budget_s)
}

/// How often a slow baseline is re-measured, in evaluations, at least: one whose median
/// launch takes more than half of [`TimingConfig::max_seconds`] (the candidate's whole timing
/// budget). In a search the speedups are over the run's reference ([`kf_core::RunBaseline`]),
/// so the baseline timed beside a candidate only feeds its reported speedup and the timeout,
/// and at 2048³ the naive GEMM's launch (2 s on two cores) cost more than the candidate's
/// timing. Between re-measurements the window's median stands in.
pub const SLOW_BASELINE_EVERY: u32 = 8;

/// [`TimingConfig::baseline_every`], or [`SLOW_BASELINE_EVERY`] when the baseline's median
/// launch (`median_s`) is slow against the candidate's timing budget.
pub(crate) fn baseline_every(t: &TimingConfig, median_s: Option<f64>) -> u32 {
    match median_s {
        Some(m) if m > 0.5 * t.max_seconds => t.baseline_every.max(SLOW_BASELINE_EVERY),
        _ => t.baseline_every,
    }
}

/// Baseline launches in a worker's first evaluation ([`FIRST_BASELINE_TRIALS`]; none when
/// the configuration times no baseline).
pub(crate) fn first_baseline_trials(t: &TimingConfig) -> u32 {
    if t.baseline_trials == 0 {
        return 0;
    }
    let window = u32::try_from(t.baseline_window.max(1)).unwrap_or(u32::MAX);
    t.baseline_trials.max(FIRST_BASELINE_TRIALS.min(window))
}

/// How often [`EvalConfig::for_tuning`](crate::EvalConfig::for_tuning) re-measures the baseline, in evaluations. In a tuning
/// run the baseline only feeds the reported speedups and the timeout (strategies compare
/// times), so a window median at most 63 evaluations old is enough; at 1024³ the naive GEMM
/// baseline's three launches cost as much as a quarter of a configuration's evaluation.
pub const TUNING_BASELINE_EVERY: u32 = 64;

impl Default for TimingConfig {
    fn default() -> Self {
        TimingConfig {
            warmup: 2,
            min_trials: 10,
            min_seconds: 0.05,
            max_trials: 200,
            max_seconds: 3.0,
            baseline_trials: 3,
            baseline_window: 15,
            rotation: crate::rotation::DEFAULT_ROTATION,
            flush_caches: false,
            baseline_every: 1,
            early_stop: None,
            first_baseline_seconds: FIRST_BASELINE_SECONDS,
        }
    }
}

/// What a timing measured: the candidate's device seconds, one per trial, and the baseline's
/// statistics over its window (`None`: no baseline).
pub(crate) type Timed = (Vec<f64>, Option<TimingStats>);

#[cfg(test)]
mod baseline_budget_tests {
    use super::*;

    #[test]
    fn a_slow_first_baseline_stops_at_its_least_launches_once_its_seconds_are_spent() {
        let (least, most) = (FIRST_BASELINE_MIN_TRIALS, FIRST_BASELINE_TRIALS);
        // A 4 s baseline (a naive 2048³ GEMM on one core): the warm-up and one launch pass
        // the budget, and it still gets its least.
        let launches = |launch_s: f64| {
            let (mut done, mut seconds) = (0, launch_s);
            while more_baseline(done, seconds, least, most, FIRST_BASELINE_SECONDS) {
                done += 1;
                seconds += launch_s;
            }
            done
        };
        assert_eq!(launches(4.0), least);
        // A 0.1 s one (the naive GEMM at 1024³ on two cores) still fills the window.
        assert_eq!(launches(0.1), most);
        // Between: as many as fit the budget, warm-up included.
        assert_eq!(launches(0.5), 7);
    }

    #[test]
    fn a_baseline_slower_than_half_the_timing_budget_is_measured_every_eighth_evaluation() {
        let mut t = TimingConfig {
            max_seconds: 1.0,
            baseline_every: 1,
            ..TimingConfig::default()
        };
        assert_eq!(baseline_every(&t, None), 1);
        assert_eq!(baseline_every(&t, Some(0.4)), 1);
        assert_eq!(baseline_every(&t, Some(2.0)), SLOW_BASELINE_EVERY);
        // A configuration that already measures it more rarely keeps its own rule.
        t.baseline_every = 64;
        assert_eq!(baseline_every(&t, Some(2.0)), 64);
    }
}
