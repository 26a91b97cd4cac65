//! Observers: hooks that see every judged candidate, in the spirit of argmin's `Observe`.

use serde::{Deserialize, Serialize};

use crate::candidate::Candidate;
use crate::descriptor::Descriptor;
use crate::error::BoxError;
use crate::evaluation::Evaluation;
use crate::fitness::Fitness;
use crate::traits::archive::{ArchiveMetrics, InsertOutcome};
use crate::traits::mutator::Usage;

/// When an observer is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObserverMode {
    /// After every evaluation.
    Always,
    /// After every `n`-th evaluation (and always at the start and end).
    Every(u64),
    /// When the best fitness improves.
    NewBest,
    /// When a cell is filled or improved.
    Added,
}

/// One judged candidate, as observers see it.
#[derive(Debug, Clone, Copy)]
pub struct EvaluationReport<'a> {
    /// Engine step the candidate belongs to.
    pub step: u64,
    /// Evaluations done so far, this one included.
    pub evaluations: u64,
    /// The candidate.
    pub candidate: &'a Candidate,
    /// Its evaluation, unless the evaluator failed.
    pub evaluation: Option<&'a Evaluation>,
    /// Its cell, unless it could not be classified.
    pub descriptor: Option<&'a Descriptor>,
    /// Its fitness, when it was evaluated.
    pub fitness: Option<Fitness>,
    /// What the archive did with it, when it was offered.
    pub outcome: Option<InsertOutcome>,
    /// Why it could not be judged, when it could not.
    pub error: Option<&'a str>,
    /// Archive metrics after it.
    pub metrics: ArchiveMetrics,
    /// Whether the best fitness improved with it.
    pub new_best: bool,
    /// Whether it was replayed from a run directory instead of computed.
    pub replayed: bool,
    /// Seconds since the run started.
    pub elapsed_s: f64,
    /// Usage of the mutators so far.
    pub usage: Usage,
}

/// Facts about a run that is starting.
#[derive(Debug, Clone, Copy)]
pub struct RunInfo<'a> {
    /// Run seed.
    pub seed: u64,
    /// The evaluation budget, if any.
    pub max_evaluations: Option<u64>,
    /// Steps recorded by an earlier run that will be replayed.
    pub replaying_steps: usize,
    /// Name of the mutator.
    pub mutator: &'a str,
}

/// Sees the run as it goes: progress bars, logs, live plots.
///
/// Each judged child is reported on its own, in order, with the archive as it was right after
/// that child: with several children per step, `new_best` and `metrics` belong to the child
/// that made them.
///
/// # Example
///
/// ```
/// use kf_core::prelude::*;
///
/// /// Counts correct kernels.
/// #[derive(Default)]
/// struct CountCorrect(u64);
///
/// impl Observe for CountCorrect {
///     fn observe_evaluation(&mut self, r: &EvaluationReport<'_>) -> Result<(), BoxError> {
///         if r.evaluation.is_some_and(|e| e.status.is_correct()) {
///             self.0 += 1;
///         }
///         Ok(())
///     }
/// }
/// ```
///
/// A closure is an observer too. Annotate its argument and its return type: the blanket
/// implementation cannot infer them (error E0282 otherwise). It must own what it captures
/// (`'static`), so share results through an `Arc`:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive};
///
/// let bests = Arc::new(Mutex::new(Vec::new()));
/// let seen = Arc::clone(&bests);
/// let classifier = SyntheticClassifier::new(3);
/// let archive = VecArchive::new(classifier.space().clone());
/// Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
///     .seeds(vec![synthetic_seed(4)])
///     .budget(Budget::evaluations(30))
///     .add_observer(
///         move |r: &EvaluationReport<'_>| -> Result<(), BoxError> {
///             if let Some(f) = r.fitness {
///                 seen.lock().map_err(|_| "poisoned")?.push((r.candidate.id, f.value()));
///             }
///             Ok(())
///         },
///         ObserverMode::NewBest,
///     )
///     .run_blocking()?;
/// let bests = bests.lock().unwrap();
/// assert!(!bests.is_empty());
/// assert!(bests.windows(2).all(|w| w[0].1 < w[1].1), "each new best beats the one before");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Observe: Send {
    /// Called once before the first step.
    fn observe_start(&mut self, _info: &RunInfo<'_>) -> Result<(), BoxError> {
        Ok(())
    }

    /// Called after a candidate is judged, as the observer's mode allows.
    fn observe_evaluation(&mut self, report: &EvaluationReport<'_>) -> Result<(), BoxError>;

    /// Called once at the end.
    fn observe_end(
        &mut self,
        _summary: &crate::engine::summary::RunSummary,
    ) -> Result<(), BoxError> {
        Ok(())
    }
}

impl<F> Observe for F
where
    F: FnMut(&EvaluationReport<'_>) -> Result<(), BoxError> + Send,
{
    fn observe_evaluation(&mut self, report: &EvaluationReport<'_>) -> Result<(), BoxError> {
        self(report)
    }
}
