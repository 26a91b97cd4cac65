//! The run's one baseline figure ([`crate::RunBaseline`]) in the engine: candidates measured
//! beside a baseline whose timing drifts are ranked by their own times, and a resumed run goes
//! on against the reference of its start.

use std::convert::Infallible;

use futures::executor::block_on;

use super::synthetic_engine;
use super::*;
use crate::test_support::Shared;
use crate::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, VecArchive};
use crate::{CandidateId, Elite, Evaluation, TimingStats};

type TestStepper = Stepper<SyntheticEvaluator, SyntheticClassifier, VecArchive>;

/// An engine whose children are copies of their parent (steps of 0): every evaluation lands in
/// the seed's cell, so each one told challenges the one before.
fn engine(records: &Shared) -> TestStepper {
    synthetic_engine(
        crate::testing::SyntheticMutator::new(0.0),
        synthetic_seed(6),
    )
    .seed(3)
    .budget(Budget::evaluations(10))
    .checkpoint(records.clone())
    .start()
    .unwrap()
}

/// A correct evaluation: the kernel at `kernel_s`, the baseline timed beside it at
/// `baseline_s` (both with a little spread, as measured).
fn measured(kernel_s: f64, baseline_s: f64) -> Evaluation {
    let spread =
        |s: f64| -> Vec<f64> { (0..8).map(|i| s * (1.0 + 0.001 * f64::from(i))).collect() };
    let mut e = Evaluation::correct(
        TimingStats::from_samples(&spread(kernel_s)).unwrap(),
        TimingStats::from_samples(&spread(baseline_s)),
    );
    e.samples = crate::noise::keep_samples(&spread(kernel_s));
    e
}

/// Asks the next step and tells it `evaluation` for its one child; returns the child's id.
fn tell(stepper: &mut TestStepper, evaluation: Evaluation) -> CandidateId {
    let Ask::Evaluate(proposal) = block_on(stepper.ask()).unwrap() else {
        panic!("a step to evaluate");
    };
    assert_eq!(proposal.candidates().len(), 1);
    let id = proposal.candidates()[0].id;
    stepper
        .tell(proposal.id(), vec![Ok::<_, Infallible>(evaluation)])
        .unwrap();
    id
}

/// The elite of the seed's cell.
fn elite(stepper: &TestStepper) -> Elite {
    let elites = stepper.archive().elites();
    assert_eq!(elites.len(), 1, "one cell");
    elites[0].clone()
}

#[test]
fn the_faster_kernel_wins_its_cell_whatever_the_baseline_beside_it_measured() {
    let records = Shared::default();
    let mut stepper = engine(&records);
    // The start: 264.4 GFLOP/s at 2048³ (65 ms) beside a naive baseline of 1.2 s.
    let start = measured(65.0e-3, 1.2);
    let reference = start.baseline.unwrap().median_s;
    tell(&mut stepper, start);
    // Its neighbour: 412.7 GFLOP/s (41.6 ms), the baseline beside it running 1.8x faster.
    // Scored beside that baseline it had the lower speedup (16.0 against 18.5) and lost.
    let faster = tell(&mut stepper, measured(41.6e-3, 1.2 / 1.8));
    let best = elite(&stepper);
    assert_eq!(
        best.candidate.id, faster,
        "the faster kernel keeps the cell"
    );
    let kernel_s = best.evaluation.timing.unwrap().median_s;
    assert_eq!(best.evaluation.speedup, Some(reference / kernel_s));
    assert_eq!(best.evaluation.reference_baseline_s, Some(reference));
    assert!(
        best.evaluation.baseline.unwrap().median_s < 0.7,
        "the baseline measured beside it is kept"
    );
    // The same kernel time beside a baseline twice as slow: the same fitness, no replacement.
    let copy = tell(&mut stepper, measured(41.6e-3, 2.4));
    assert_ne!(elite(&stepper).candidate.id, copy);
    drop(stepper);

    // Resumed: the replay fixes the reference of the run's start again.
    let mut resumed = engine(&records);
    let after = tell(&mut resumed, measured(41.6e-3 * 0.9, 0.5));
    let best = elite(&resumed);
    assert_eq!(best.candidate.id, after, "10% faster in seconds wins");
    assert_eq!(best.evaluation.reference_baseline_s, Some(reference));
    let kernel_s = best.evaluation.timing.unwrap().median_s;
    assert_eq!(best.evaluation.speedup, Some(reference / kernel_s));
}
