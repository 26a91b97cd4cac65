//! Where the time of one evaluation goes: [`EvalProfile`], filled in by
//! [`crate::KernelEvaluator::evaluate`] (phases inside the worker) and completed by
//! [`crate::IsolatedEvaluator`] (the process hop), for `kf tune --profile-time`.

use std::cell::Cell;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Seconds spent per phase of one evaluation, with the counts that explain them. The phases
/// `compile_s`, `inputs_s`, `verify_s`, `baseline_s` and `timing_s` do not overlap;
/// `transfer_s` is the part of them spent writing and reading device buffers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EvalProfile {
    /// The whole evaluation inside the worker.
    pub total_s: f64,
    /// Compiling the candidate.
    pub compile_s: f64,
    /// Drawing input data and computing references (zero for input sets reused from an
    /// earlier evaluation).
    pub inputs_s: f64,
    /// Verification launches on every input set: inputs and poison in, launch, read back,
    /// guards, inputs and outputs checked.
    pub verify_s: f64,
    /// The task baseline: compiling and verifying it (once per worker) and its launches
    /// interleaved with the candidate's trials.
    pub baseline_s: f64,
    /// The candidate's warm-up and timed trials, the rotated input copies and the check of
    /// every timed output (baseline launches excluded).
    pub timing_s: f64,
    /// Device time of the candidate's timed trials (the part of `timing_s` the device
    /// reports as kernel time).
    pub kernel_s: f64,
    /// Writing and reading device buffers, within the phases above.
    pub transfer_s: f64,
    /// Timed trials of the candidate.
    pub trials: u32,
    /// Baseline launches in this evaluation.
    pub baseline_launches: u32,
    /// Input sets drawn fresh (data and reference).
    pub inputs_generated: u32,
    /// Input sets reused from an earlier evaluation of the same worker.
    pub inputs_reused: u32,
    /// Timing stopped before the usual trial count because the candidate was clearly slower
    /// than the incumbent ([`crate::EarlyStop`]).
    pub stopped_early: bool,
    /// Parent side: the round trip to the worker minus `total_s` (job and reply encoding,
    /// pipes, rebuilding the task in the worker); zero for an in-process evaluation.
    pub hop_s: f64,
}

impl EvalProfile {
    /// Adds `other`'s seconds and counts to these (for totals over a tuning run; a total is
    /// `stopped_early` when any evaluation was).
    pub fn add(&mut self, other: &EvalProfile) {
        self.total_s += other.total_s;
        self.compile_s += other.compile_s;
        self.inputs_s += other.inputs_s;
        self.verify_s += other.verify_s;
        self.baseline_s += other.baseline_s;
        self.timing_s += other.timing_s;
        self.kernel_s += other.kernel_s;
        self.transfer_s += other.transfer_s;
        self.trials += other.trials;
        self.baseline_launches += other.baseline_launches;
        self.inputs_generated += other.inputs_generated;
        self.inputs_reused += other.inputs_reused;
        self.stopped_early |= other.stopped_early;
        self.hop_s += other.hop_s;
    }
}

thread_local! {
    /// Seconds of buffer transfers on this thread since the last [`take_transfer_seconds`]. A
    /// thread-local because the transfers happen in free helper functions of the protocol,
    /// and a worker evaluates on one thread at a time.
    static TRANSFER_SECONDS: Cell<f64> = const { Cell::new(0.0) };
}

/// Charges the time since `started` to buffer transfers.
pub(crate) fn charge_transfer(started: Instant) {
    let s = started.elapsed().as_secs_f64();
    TRANSFER_SECONDS.with(|c| c.set(c.get() + s));
}

/// The transfer seconds charged since the last call, and resets them.
pub(crate) fn take_transfer_seconds() -> f64 {
    TRANSFER_SECONDS.with(|c| c.replace(0.0))
}

/// Seconds since `started`.
pub(crate) fn since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_every_phase_and_count() {
        let one = EvalProfile {
            total_s: 1.0,
            compile_s: 0.5,
            trials: 10,
            inputs_generated: 3,
            ..EvalProfile::default()
        };
        let two = EvalProfile {
            total_s: 2.0,
            verify_s: 0.25,
            trials: 5,
            inputs_reused: 3,
            stopped_early: true,
            hop_s: 0.01,
            ..EvalProfile::default()
        };
        let mut total = EvalProfile::default();
        total.add(&one);
        total.add(&two);
        assert_eq!(total.total_s, 3.0);
        assert_eq!(total.compile_s, 0.5);
        assert_eq!(total.verify_s, 0.25);
        assert_eq!(total.trials, 15);
        assert_eq!((total.inputs_generated, total.inputs_reused), (3, 3));
        assert!(total.stopped_early);
        assert_eq!(total.hop_s, 0.01);
    }

    #[test]
    fn transfer_seconds_are_taken_once() {
        let _ = take_transfer_seconds();
        charge_transfer(Instant::now() - std::time::Duration::from_millis(5));
        let first = take_transfer_seconds();
        assert!(first >= 0.005, "{first}");
        assert_eq!(take_transfer_seconds(), 0.0);
    }
}
