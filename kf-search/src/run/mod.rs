//! [`SearchRun`]: a started shipped search, driven step by step or to its end. How it starts
//! is `start` (the evaluator, run directory, archive and engine, each made once); how it ends
//! is `end` (the [`RunContext`] the start keeps, consumed by the report).

mod end;
mod start;

use end::RunContext;
// The documentation links to the engine's stepper, which `SearchRun` wraps.
#[cfg(doc)]
use kf_core::Stepper;
pub use start::SearchStepper;

use kf_core::{
    Ask, BehaviorClassifier, BoxError, Candidate, Evaluation, Evaluator, Mutator, Proposal, StepId,
    StopHandle,
};

use crate::archive::ArchiveFactory;
use crate::evaluator::EvaluatorFactory;
use crate::layer::EvaluatorLayer;
use crate::{Search, SearchConfig, SearchError, SearchOutcome};

/// A shipped search, started ([`Search::start`](crate::Search::start)) and driven by its
/// caller: [`ask`](SearchRun::ask) for the next step's children,
/// [`evaluate`](SearchRun::evaluate) them with the search's evaluator (or one's own),
/// [`tell`](SearchRun::tell) their evaluations; or [`step`](SearchRun::step) for all three.
/// Every told step is recorded in the run directory, so dropping the run after any step stops
/// it, and the same search built again over the same output folder replays the recorded steps
/// and goes on. [`run`](SearchRun::run) runs the rest as [`Search::run`](crate::Search::run)
/// does; [`finish`](SearchRun::finish) ends the run where it is. Both end it as `Search::run`
/// does: final selection, reference measurement, `report.json`, the pictures and the explorer.
///
/// # Example
///
/// ```no_run
/// use kf_core::Ask;
/// use kf_search::Search;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// kf_search::init();
/// let out = std::env::temp_dir().join("kf-search-steps");
/// let search = || {
///     Search::builder()
///         .task("softmax")
///         .evaluations(12)
///         .seed(3)
///         .progress(false)
///         .out(&out)
///         .build()
/// };
/// // Five steps, one at a time, then stop (dropping the run keeps what was told).
/// let mut run = search()?.start()?;
/// for _ in 0..5 {
///     let Ask::Evaluate(proposal) = run.ask()? else { break };
///     let evaluations = run.evaluate(&proposal);
///     run.tell(proposal.id(), evaluations)?;
/// }
/// drop(run);
/// // The same search over the same folder replays those steps and runs to the end.
/// let outcome = search()?.start()?.run()?;
/// assert_eq!(outcome.summary.replayed_steps, 5);
/// # Ok(())
/// # }
/// ```
pub struct SearchRun<C, L, A, B>
where
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    stepper: SearchStepper<C, L, A, B>,
    context: RunContext,
}

impl<C, L, A, B> SearchRun<C, L, A, B>
where
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    pub(crate) fn new(stepper: SearchStepper<C, L, A, B>, context: RunContext) -> Self {
        SearchRun { stepper, context }
    }

    /// The next step's children ([`Stepper::ask`], on this thread); recorded steps of a
    /// resumed run are replayed on the way.
    pub fn ask(&mut self) -> Result<Ask, SearchError> {
        Ok(self.stepper.ask_blocking()?)
    }

    /// The evaluations of a proposal's children by the search's evaluator (tuned, in the
    /// isolated workers or the cluster, through the layers), one per child in order.
    pub fn evaluate(&self, proposal: &Proposal) -> Vec<Result<Evaluation, BoxError>> {
        let evaluator = self.stepper.evaluator();
        futures::executor::block_on(evaluator.evaluate_batch(proposal.candidates()))
            .into_iter()
            .map(|r| r.map_err(|e| Box::new(e) as BoxError))
            .collect()
    }

    /// The evaluations of an asked step's children ([`Stepper::tell`]): inserted, recorded in
    /// the run directory, reported to the observers.
    pub fn tell<Err: Into<BoxError>>(
        &mut self,
        id: StepId,
        evaluations: Vec<Result<Evaluation, Err>>,
    ) -> Result<(), SearchError> {
        Ok(self.stepper.tell(id, evaluations)?)
    }

    /// One whole step with the search's evaluator ([`Stepper::step`]): the number of the step
    /// told, or `None` when none can be asked (the run is over when
    /// [`Stepper::stop_reason`] says so).
    pub fn step(&mut self) -> Result<Option<u64>, SearchError> {
        Ok(self.stepper.step_blocking()?)
    }

    /// The engine's stepper, for what the methods above leave out (its `async` `ask` and
    /// `step`, the archive so far, counts, the stop handle).
    pub fn stepper(&self) -> &SearchStepper<C, L, A, B> {
        &self.stepper
    }

    /// The engine's stepper, to drive it with its `async` methods.
    pub fn stepper_mut(&mut self) -> &mut SearchStepper<C, L, A, B> {
        &mut self.stepper
    }

    /// Runs the rest of the search ([`Stepper::run`], up to the configured steps in flight)
    /// and ends it as [`Search::run`](crate::Search::run) does. Refuses to start while asked
    /// steps wait for their evaluations.
    pub fn run(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        let result = self.stepper.run_blocking();
        self.context.conclude(result)
    }

    /// Ends the search where it is ([`Stepper::finish`]: steps asked and not told are dropped),
    /// with the report of what was found, as [`Search::run`](crate::Search::run) ends it.
    pub fn finish(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        let result = self.stepper.finish();
        self.context.conclude(result)
    }
}

impl<M, C, L, A, B> Search<M, C, L, A, B>
where
    M: Mutator + 'static,
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    /// The configuration the search runs with.
    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    /// The seeds the search starts from.
    pub fn seeds(&self) -> &[Candidate] {
        &self.seeds
    }

    /// Runs the search (call [`crate::init`] first in `main`; [`crate::init_with`] with a
    /// backend of one's own).
    pub fn run(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        self.start()?.run()
    }

    /// [`run`](Self::run), named for what it is: it blocks until the search is over.
    pub fn run_blocking(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        self.start()?.run()
    }

    /// Starts the search and hands it over to be driven step by step ([`SearchRun`]): the
    /// evaluator (and its workers), the run directory (resumed when it holds steps), the archive
    /// and the observers are set up as [`run`](Self::run) sets them up; `run` is `start` and
    /// then [`SearchRun::run`]. Call [`crate::init`] first in `main`.
    pub fn start(self) -> Result<SearchRun<C, L, A, B>, SearchError> {
        let started = start::start(self)?;
        Ok(SearchRun::new(started.stepper, started.context))
    }
}

/// Runs the shipped search with `mutator` from `seeds` (the first seed should be the task
/// baseline: its throughput is the report's baseline): [`Search::builder`] with `config`,
/// `mutator` and `seeds`, and every other part the default. Call [`crate::init`] first in
/// `main`.
pub fn run_search<M: Mutator + 'static>(
    config: &SearchConfig,
    mutator: M,
    seeds: Vec<Candidate>,
    stop: Option<StopHandle>,
) -> Result<SearchOutcome, SearchError> {
    let mut builder = Search::builder()
        .config(config.clone())
        .mutator(mutator)
        .seeds(seeds);
    if let Some(stop) = stop {
        builder = builder.stop_on(stop);
    }
    builder.build()?.run()
}

#[cfg(test)]
mod tests {
    use kf_core::Archive;

    use super::*;
    use crate::test_evaluator::SourceLengthEvaluator;
    use crate::Search;

    /// The elites' ids and fitness, in the archive's order.
    fn elites(archive: &impl Archive) -> Vec<(String, Option<f64>)> {
        archive
            .elites()
            .iter()
            .map(|e| (e.candidate.id.to_string(), e.evaluation.gflops))
            .collect()
    }

    #[test]
    fn stopped_after_three_steps_and_resumed_it_ends_as_an_uninterrupted_run() {
        if !crate::doctest_backend_available() {
            return;
        }
        let search = |out: &std::path::Path, evaluator: SourceLengthEvaluator| {
            Search::builder()
                .task("softmax")
                .size("ROWS=8,COLS=32")
                .expect("sizes")
                .evaluator(evaluator)
                .evaluations(8)
                .seed(46)
                .reference(false)
                .out(out)
                .progress(false)
                .build()
                .expect("builds")
        };
        let whole = tempfile::tempdir().expect("a temporary folder");
        let uninterrupted = search(whole.path(), SourceLengthEvaluator::deterministic())
            .run()
            .expect("runs");

        let out = tempfile::tempdir().expect("a temporary folder");
        let first = SourceLengthEvaluator::deterministic();
        let mut run = search(out.path(), first.clone()).start().expect("starts");
        for _ in 0..3 {
            let Ask::Evaluate(proposal) = run.ask().expect("asks") else {
                panic!("the run ended early");
            };
            let evaluations = run.evaluate(&proposal);
            run.tell(proposal.id(), evaluations).expect("told");
        }
        assert_eq!(run.stepper().steps(), 3);
        let told = run.stepper().evaluations();
        assert_eq!(first.count(), told);
        drop(run);

        let second = SourceLengthEvaluator::deterministic();
        let mut run = search(out.path(), second.clone()).start().expect("resumes");
        assert!(run.step().expect("a step").is_some());
        let resumed = run.run().expect("runs to the end");
        assert_eq!(resumed.summary.replayed_steps, 3);
        assert_eq!(resumed.summary.evaluations, 8);
        assert_eq!(second.count(), 8 - told, "replayed, not evaluated");
        assert_eq!(elites(&resumed.archive), elites(&uninterrupted.archive));
        assert!(out.path().join("report.json").exists());
    }

    #[test]
    fn finish_ends_the_run_where_it_is_with_a_report() {
        if !crate::doctest_backend_available() {
            return;
        }
        let out = tempfile::tempdir().expect("a temporary folder");
        let mut run = Search::builder()
            .task("softmax")
            .size("ROWS=8,COLS=32")
            .expect("sizes")
            .evaluator(SourceLengthEvaluator::deterministic())
            .evaluations(8)
            .reference(false)
            .out(out.path())
            .progress(false)
            .build()
            .expect("builds")
            .start()
            .expect("starts");
        assert_eq!(run.step().expect("a step"), Some(0));
        let outcome = run.finish().expect("finishes");
        assert_eq!(outcome.summary.steps, 1);
        assert_eq!(outcome.summary.stop_reason, kf_core::StopReason::Stopped);
        assert!(out.path().join("report.json").exists());
    }
}
