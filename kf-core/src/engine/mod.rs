//! The search engine: a consuming builder that composes what proposes children (a
//! [`Scheduler`] of emitters, or one mutator), an evaluator, a classifier and an archive, and
//! runs the MAP-Elites loop with a bounded number of steps in flight.
//!
//! There is one path through a run. [`Engine::start`] gives a [`Stepper`]: its
//! [`ask`](Stepper::ask) launches the next step (parent, mutation) and hands out its children,
//! its [`tell`](Stepper::tell) takes their evaluations and inserts, credits, records and
//! reports them. [`Engine::run`] is that loop with several steps in flight and the engine's
//! evaluator; an embedder drives it by hand to evaluate its own way, interleave its own work,
//! or stop after a number of steps and resume later from the checkpoint.
//!
//! The engine owns no runtime: [`Engine::run`] returns a future that any executor can drive
//! ([`Engine::run_blocking`] uses `futures`' own). Steps complete in the order they were
//! launched, and every random choice comes from one ChaCha stream seeded by the run seed, so a
//! seeded run is reproducible even with several steps in flight — which is also what lets a
//! killed run resume exactly: recorded steps are replayed, the rest are computed.

mod budget;
mod config;
mod state;
mod stepper;
pub(crate) mod summary;

pub use budget::{Budget, StopHandle, StopReason};
pub use config::EngineConfig;
pub use stepper::{Ask, Proposal, StepId, Stepper};
pub use summary::{HistoryPoint, RunResult, RunSummary};

use std::collections::HashMap;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::candidate::Candidate;
use crate::checkpoint::StepRecord;
use crate::device::DeviceFacts;
use crate::emitter::Scheduler;
use crate::error::CoreError;
use crate::novelty::{Novelty, NoveltyConfig};
use crate::observe::{Observe, ObserverMode, RunInfo};
use crate::task::Task;
use crate::traits::archive::Archive;
use crate::traits::classifier::BehaviorClassifier;
use crate::traits::evaluator::Evaluator;
use crate::traits::mutator::{Mutator, Needs};
use crate::Checkpoint;
use config::BoxedObserver;
use state::{Parts, RunState};

/// The search engine, built by chaining configuration calls and consumed by [`Engine::run`]
/// (or [`Engine::start`], to drive it step by step).
///
/// What proposes the children is a [`Scheduler`] of emitters; a single mutator is a scheduler
/// of one ([`Scheduler::single`]), so [`Engine::new`] takes either, and the engine's type does
/// not depend on which.
///
/// # Example
///
/// ```
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive};
///
/// let classifier = SyntheticClassifier::new(3);
/// let archive = VecArchive::new(classifier.space().clone());
/// let result = Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
///     .seeds(vec![synthetic_seed(6)])
///     .seed(7)
///     .budget(Budget::evaluations(200))
///     .max_in_flight(4)
///     .run_blocking()
///     .unwrap();
/// assert_eq!(result.summary.evaluations, 200);
/// assert!(result.summary.metrics.filled > 1);
/// ```
pub struct Engine<E, C, A> {
    scheduler: Arc<Scheduler>,
    evaluator: E,
    classifier: C,
    archive: A,
    task: Option<Arc<Task>>,
    device: Option<Arc<DeviceFacts>>,
    seeds: Vec<Candidate>,
    config: EngineConfig,
    observers: Vec<BoxedObserver>,
    checkpoint: Option<Box<dyn Checkpoint<A>>>,
    stop: StopHandle,
    novelty: Option<(Arc<dyn Novelty>, NoveltyConfig)>,
}

impl<E, C, A> Engine<E, C, A>
where
    E: Evaluator,
    C: BehaviorClassifier,
    A: Archive,
{
    /// An engine over these parts, with default configuration. `proposer` is a [`Scheduler`]
    /// of emitters (each step, it picks an emitter, the emitter picks the parent and its
    /// mutator proposes the children, and the emitter is credited with what they did for the
    /// archive; see [`crate::emitter`]), or any [`Mutator`], which becomes a scheduler of one
    /// whose parents the archive selects ([`Scheduler::single`]).
    ///
    /// Give the task and the device facts with [`Engine::task`] and [`Engine::device`]; a
    /// mutator that needs them ([`Mutator::needs`]) makes the run fail with
    /// [`CoreError::MissingContext`] without them. Mutators that need neither see an unnamed
    /// task.
    pub fn new(proposer: impl Into<Scheduler>, evaluator: E, classifier: C, archive: A) -> Self {
        Engine {
            scheduler: Arc::new(proposer.into()),
            evaluator,
            classifier,
            archive,
            task: None,
            device: None,
            seeds: Vec::new(),
            config: EngineConfig::default(),
            observers: Vec::new(),
            checkpoint: None,
            stop: StopHandle::new(),
            novelty: None,
        }
    }

    /// An engine whose steps are chosen by `scheduler`: [`Engine::new`], which takes a
    /// scheduler as well as a mutator.
    #[deprecated(
        since = "0.1.0",
        note = "use `Engine::new`, which takes a `Scheduler` as well as a mutator"
    )]
    pub fn scheduled(scheduler: Scheduler, evaluator: E, classifier: C, archive: A) -> Self {
        Engine::new(scheduler, evaluator, classifier, archive)
    }

    /// The scheduler choosing this engine's emitters (one emitter for an engine over a single
    /// mutator): a handle to read its [`stats`](Scheduler::stats) after the run.
    pub fn scheduler(&self) -> Arc<Scheduler> {
        Arc::clone(&self.scheduler)
    }

    /// The task handed to mutators.
    pub fn task(mut self, task: Task) -> Self {
        self.task = Some(Arc::new(task));
        self
    }

    /// Facts of the device, handed to mutators (for prompts and for constraints that refer to
    /// the device).
    pub fn device(mut self, device: DeviceFacts) -> Self {
        self.device = Some(Arc::new(device));
        self
    }

    /// Initial kernels, evaluated first (each one engine step).
    pub fn seeds(mut self, seeds: Vec<Candidate>) -> Self {
        self.seeds = seeds;
        self
    }

    /// The run seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = seed;
        self
    }

    /// The limits.
    pub fn budget(mut self, budget: Budget) -> Self {
        self.config.budget = budget;
        self
    }

    /// Steps in flight at once (at least 1); with [`Stepper::ask`], steps asked and not yet
    /// told at once.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.config.max_in_flight = n;
        self
    }

    /// Replaces the whole configuration.
    pub fn configure(mut self, f: impl FnOnce(EngineConfig) -> EngineConfig) -> Self {
        self.config = f(self.config);
        self
    }

    /// Adds an observer called as `mode` says.
    pub fn add_observer(mut self, observer: impl Observe + 'static, mode: ObserverMode) -> Self {
        self.observers.push((Box::new(observer), mode));
        self
    }

    /// Records every completed step with `checkpoint`, and replays the steps it already holds.
    pub fn checkpoint(mut self, checkpoint: impl Checkpoint<A> + 'static) -> Self {
        self.checkpoint = Some(Box::new(checkpoint));
        self
    }

    /// Drops children that repeat (or nearly repeat) a kernel the run already judged, before
    /// they are evaluated; see [`crate::novelty`]. Seeds are always evaluated.
    pub fn novelty(mut self, novelty: impl Novelty + 'static, config: NoveltyConfig) -> Self {
        self.novelty = Some((Arc::new(novelty), config));
        self
    }

    /// A handle that stops the run from elsewhere.
    pub fn stop_handle(&self) -> StopHandle {
        self.stop.clone()
    }

    /// Stops the run when `handle` is triggered (for a handle made before the engine, such as
    /// one a Ctrl-C handler holds).
    pub fn stop_on(mut self, handle: StopHandle) -> Self {
        self.stop = handle;
        self
    }

    /// Runs the search on the current thread with `futures`' executor.
    pub fn run_blocking(self) -> Result<RunResult<A>, CoreError> {
        futures::executor::block_on(self.run())
    }

    /// Runs the search: [`Engine::start`], then [`Stepper::run`]. The future is `Send` (when
    /// the parts are) and may be driven by any executor.
    pub async fn run(self) -> Result<RunResult<A>, CoreError> {
        self.start()?.run().await
    }

    /// Checks the configuration, reads the steps the checkpoint holds (to replay them), tells
    /// the observers the run starts, and returns the run to drive step by step.
    pub fn start(mut self) -> Result<Stepper<E, C, A>, CoreError> {
        self.check_config()?;
        self.check_context()?;
        let recorded = self.recorded_steps()?;
        self.announce_start(recorded.len())?;
        let state = RunState::new(Parts {
            task: self.task.unwrap_or_else(|| Arc::new(Task::new("unnamed"))),
            rng: ChaCha8Rng::seed_from_u64(self.config.seed),
            scheduler: self.scheduler,
            classifier: self.classifier,
            archive: self.archive,
            device: self.device,
            seeds: self.seeds,
            config: self.config,
            observers: self.observers,
            checkpoint: self.checkpoint,
            stop: self.stop,
            novelty: self.novelty,
            recorded,
        });
        if !state.has_seeds() && state.archive.metrics().filled == 0 {
            return Err(CoreError::NoSeeds);
        }
        Ok(Stepper::new(self.evaluator, state))
    }

    /// Refuses a configuration a run cannot go by: a budget without any limit, or nothing
    /// allowed in flight or proposed per step.
    fn check_config(&self) -> Result<(), CoreError> {
        let config = &self.config;
        if config.budget.is_unbounded() {
            return Err(CoreError::InvalidConfig(
                "the budget sets no limit; give at least one of evaluations, wall time or cost"
                    .into(),
            ));
        }
        if config.max_in_flight == 0 || config.max_children_per_step == 0 {
            return Err(CoreError::InvalidConfig(
                "max_in_flight and max_children_per_step must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// Refuses a run whose mutators need the task or the device facts when the engine was not
    /// given them, naming the first mutator that needs what is missing.
    fn check_context(&self) -> Result<(), CoreError> {
        let needing = |what: fn(Needs) -> bool| {
            self.scheduler
                .emitters()
                .iter()
                .map(|e| e.mutator())
                .find(|m| what(m.needs()))
                .map(|m| m.name().to_owned())
        };
        let context: [ContextNeed; 2] = [
            (
                self.task.is_none(),
                |n| n.task,
                "the task (its name and sizes)",
                "task",
            ),
            (
                self.device.is_none(),
                |n| n.device,
                "the device facts",
                "device",
            ),
        ];
        for (_, needs, what, call) in context.into_iter().filter(|c| c.0) {
            if let Some(mutator) = needing(needs) {
                return Err(CoreError::MissingContext {
                    mutator,
                    what,
                    call,
                });
            }
        }
        Ok(())
    }

    /// The steps the checkpoint holds, by step number, to be replayed (none without one).
    fn recorded_steps(&mut self) -> Result<HashMap<u64, StepRecord>, CoreError> {
        Ok(match self.checkpoint.as_mut() {
            Some(c) => c
                .recorded()
                .map_err(CoreError::Checkpoint)?
                .into_iter()
                .map(|r| (r.step, r))
                .collect(),
            None => HashMap::new(),
        })
    }

    /// Tells every observer the run starts, with the seed, the evaluation budget, how many
    /// steps will be replayed and the mutator's name (`scheduler` for several emitters).
    fn announce_start(&mut self, replaying_steps: usize) -> Result<(), CoreError> {
        let mutator_name = if self.scheduler.is_single() {
            self.scheduler.name()
        } else {
            "scheduler".to_owned()
        };
        let info = RunInfo {
            seed: self.config.seed,
            max_evaluations: self.config.budget.max_evaluations,
            replaying_steps,
            mutator: &mutator_name,
        };
        for (o, _) in self.observers.iter_mut() {
            o.observe_start(&info).map_err(CoreError::Observer)?;
        }
        Ok(())
    }
}

/// A piece of the run's context a mutator may need: whether the engine lacks it, which of
/// the mutator's [`Needs`] asks for it, how [`CoreError::MissingContext`] names it and the
/// engine's call that gives it.
type ContextNeed = (bool, fn(Needs) -> bool, &'static str, &'static str);

/// An engine on the synthetic problem, as the engine's tests run it.
#[cfg(test)]
pub(crate) type SyntheticEngine = Engine<
    crate::testing::SyntheticEvaluator,
    crate::testing::SyntheticClassifier,
    crate::testing::VecArchive,
>;

/// An engine in which `proposer` searches the synthetic problem (its evaluator, its classifier
/// of 4 levels per dimension, an empty [`VecArchive`] of that space) from the one seed `seed`;
/// the caller sets the budget and the rest.
#[cfg(test)]
pub(crate) fn synthetic_engine(proposer: impl Into<Scheduler>, seed: Candidate) -> SyntheticEngine {
    use crate::testing::{SyntheticClassifier, SyntheticEvaluator, VecArchive};
    let classifier = SyntheticClassifier::new(4);
    let archive = VecArchive::new(classifier.space().clone());
    Engine::new(proposer, SyntheticEvaluator::new(), classifier, archive).seeds(vec![seed])
}

#[cfg(test)]
mod novelty_tests;

#[cfg(test)]
mod run_baseline_tests;

#[cfg(test)]
mod step_tests;

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::candidate::{Offspring, Origin};
    use crate::kernel::{KernelSource, Language, ParamValue, ParamValues};
    use crate::observe::EvaluationReport;
    use crate::test_support::Barren;
    use crate::testing::{
        synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive,
    };
    use crate::traits::archive::Elite;
    use crate::traits::mutator::Needs;
    use crate::traits::mutator::{Mutation, MutationContext};

    /// A synthetic point (see [`crate::testing`]): cell by coordinate, 4 levels per dimension.
    fn at(x: [f64; 3]) -> ParamValues {
        x.iter()
            .enumerate()
            .map(|(i, v)| (format!("X{i}"), ParamValue::Float(*v)))
            .collect()
    }

    fn synthetic_source() -> KernelSource {
        KernelSource::new(Language::OpenCl, "synthetic", "// synthetic kernel")
    }

    /// Proposes two children in one step, whatever the parent: `better` (the optimum of cell
    /// (3,3,3), speedup 10, a new best) and `worse` (in the seed's cell (2,2,2) but off its
    /// centre, so below the seed and not added), in the order asked.
    struct TwoChildren {
        better_first: bool,
    }

    #[async_trait::async_trait]
    impl Mutator for TwoChildren {
        type Error = std::convert::Infallible;
        fn name(&self) -> &str {
            "two-children"
        }
        async fn mutate(&self, _: &Elite, _: &MutationContext) -> Result<Mutation, Self::Error> {
            let child = |x, note: &str| {
                Offspring::new(
                    synthetic_source(),
                    at(x),
                    Origin::mutator("two-children").with_note(note),
                )
            };
            let better = child([0.875; 3], "better");
            let worse = child([0.5; 3], "worse");
            let children = if self.better_first {
                vec![better, worse]
            } else {
                vec![worse, better]
            };
            Ok(Mutation::free(children))
        }
    }

    #[test]
    fn a_search_whose_mutators_propose_nothing_stops_as_stalled() {
        let classifier = SyntheticClassifier::new(3);
        let archive = VecArchive::new(classifier.space().clone());
        // No wall-clock limit: before the idle-step rule this ran for ever.
        let result = Engine::new(Barren, SyntheticEvaluator::new(), classifier, archive)
            .seeds(vec![synthetic_seed(6)])
            .budget(Budget::evaluations(1_000))
            .run_blocking()
            .unwrap();
        assert_eq!(result.summary.stop_reason, StopReason::Stalled);
        // The seed's step, then exactly max_idle_steps empty ones.
        let idle = EngineConfig::default().max_idle_steps as u64;
        assert_eq!(result.summary.steps, 1 + idle);
        assert_eq!(result.summary.evaluations, 1);
    }

    /// The synthetic evaluator, with two configurations tuned for every candidate: each
    /// evaluation costs three device evaluations.
    struct TunesTwo(SyntheticEvaluator);

    #[async_trait::async_trait]
    impl Evaluator for TunesTwo {
        type Error = <SyntheticEvaluator as Evaluator>::Error;
        async fn evaluate(
            &self,
            c: &Candidate,
        ) -> Result<crate::evaluation::Evaluation, Self::Error> {
            let mut e = self.0.evaluate(c).await?;
            e.tuning_evaluations = 2;
            Ok(e)
        }
    }

    #[test]
    fn the_device_evaluation_budget_stops_the_run_after_the_step_that_spent_it() {
        let classifier = SyntheticClassifier::new(3);
        let archive = VecArchive::new(classifier.space().clone());
        let result = Engine::new(
            SyntheticMutator::new(0.1),
            TunesTwo(SyntheticEvaluator::new()),
            classifier,
            archive,
        )
        .seeds(vec![synthetic_seed(3)])
        .seed(7)
        .budget(Budget::evaluations(1_000).with_device_evaluations(10))
        .run_blocking()
        .unwrap();
        assert_eq!(result.summary.stop_reason, StopReason::DeviceEvaluations);
        // Three device evaluations a candidate: the fourth candidate's step spent the tenth.
        assert_eq!(result.summary.evaluations, 4);
    }

    /// What an observer was told of one child.
    #[derive(Debug, Clone, PartialEq)]
    struct Told {
        note: String,
        added: bool,
        new_best: bool,
        fitness: Option<f64>,
        best: Option<f64>,
        filled: usize,
    }

    /// Runs the seed (the centre of cell (2,2,2), speedup 7) and one step of [`TwoChildren`];
    /// returns what an `Always` observer and a `NewBest` observer were told, and the history.
    fn one_step_of_two(better_first: bool) -> (Vec<Told>, Vec<String>, Vec<HistoryPoint>) {
        let told = Arc::new(Mutex::new(Vec::new()));
        let new_bests = Arc::new(Mutex::new(Vec::new()));
        let (all, best_only) = (Arc::clone(&told), Arc::clone(&new_bests));
        let seed = Candidate::seed(synthetic_source(), at([0.625; 3]));
        let result = synthetic_engine(TwoChildren { better_first }, seed)
            .budget(Budget::evaluations(3))
            .add_observer(
                move |r: &EvaluationReport<'_>| -> Result<(), crate::BoxError> {
                    all.lock().unwrap().push(Told {
                        note: r.candidate.origin.note.clone(),
                        added: r.outcome.is_some_and(|o| o.is_added()),
                        new_best: r.new_best,
                        fitness: r.fitness.map(|f| f.value()),
                        best: r.metrics.best.map(|b| b.value()),
                        filled: r.metrics.filled,
                    });
                    Ok(())
                },
                ObserverMode::Always,
            )
            .add_observer(
                move |r: &EvaluationReport<'_>| -> Result<(), crate::BoxError> {
                    let note = r.candidate.origin.note.clone();
                    best_only.lock().unwrap().push(note);
                    Ok(())
                },
                ObserverMode::NewBest,
            )
            .run_blocking()
            .unwrap();
        let told = told.lock().unwrap().clone();
        let new_bests = new_bests.lock().unwrap().clone();
        (told, new_bests, result.summary.history)
    }

    #[test]
    fn observers_hear_of_each_child_with_the_archive_right_after_it() {
        for better_first in [true, false] {
            let (told, new_bests, history) = one_step_of_two(better_first);
            assert_eq!(told.len(), 3, "seed and two children: {told:?}");
            let seed = &told[0];
            assert!(seed.new_best && seed.added, "the seed is the first best");
            let (better, worse) = if better_first {
                (&told[1], &told[2])
            } else {
                (&told[2], &told[1])
            };
            assert_eq!(
                (better.note.as_str(), worse.note.as_str()),
                ("better", "worse")
            );
            assert!(worse.fitness < seed.fitness && seed.fitness < better.fitness);
            assert!(
                better.new_best && better.added,
                "order {better_first}: {better:?}"
            );
            assert!(
                !worse.new_best && !worse.added,
                "order {better_first}: {worse:?}"
            );
            // Metrics as they were right after each child.
            assert_eq!(better.best, better.fitness);
            assert_eq!(better.filled, 2);
            let (best_after_worse, filled_after_worse) = if better_first {
                (better.fitness, 2)
            } else {
                (seed.fitness, 1)
            };
            assert_eq!(worse.best, best_after_worse, "order {better_first}");
            assert_eq!(worse.filled, filled_after_worse, "order {better_first}");
            assert_eq!(
                new_bests,
                vec!["", "better"],
                "NewBest observers hear of the better child"
            );
            let bests: Vec<Option<f64>> =
                history.iter().map(|h| h.best.map(|b| b.value())).collect();
            let best_after_first_child = if better_first {
                better.fitness
            } else {
                seed.fitness
            };
            assert_eq!(
                bests,
                vec![seed.fitness, best_after_first_child, better.fitness]
            );
        }
    }

    /// Needs what it is told to, and proposes the parent again.
    struct Needy(Needs);

    #[async_trait::async_trait]
    impl Mutator for Needy {
        type Error = std::convert::Infallible;
        fn name(&self) -> &str {
            "needy"
        }
        fn needs(&self) -> Needs {
            self.0
        }
        async fn mutate(&self, p: &Elite, _: &MutationContext) -> Result<Mutation, Self::Error> {
            let c = &p.candidate;
            let again =
                Offspring::new(c.source.clone(), c.params.clone(), Origin::mutator("needy"));
            Ok(Mutation::free(vec![again]))
        }
    }

    fn needy_engine(needs: Needs) -> SyntheticEngine {
        synthetic_engine(Needy(needs), synthetic_seed(3)).budget(Budget::evaluations(2))
    }

    #[test]
    fn a_mutator_that_needs_the_task_or_device_is_refused_without_them() {
        let err = needy_engine(Needs::TASK).run_blocking().err();
        assert!(
            matches!(&err, Some(CoreError::MissingContext { mutator, call: "task", .. }) if mutator == "needy"),
            "{err:?}"
        );
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("Engine::task"), "{message}");

        let err = needy_engine(Needs::TASK_AND_DEVICE)
            .task(Task::new("gemm"))
            .run_blocking()
            .err();
        assert!(
            matches!(&err, Some(CoreError::MissingContext { call: "device", .. })),
            "{err:?}"
        );

        let ran = needy_engine(Needs::TASK_AND_DEVICE)
            .task(Task::new("gemm"))
            .device(DeviceFacts::unknown("test device"))
            .run_blocking();
        assert!(ran.is_ok(), "{:?}", ran.err());
        let ran = needy_engine(Needs::NOTHING).run_blocking();
        assert!(
            ran.is_ok(),
            "a mutator that needs nothing runs without them"
        );
    }

    /// Steps in flight reserve up to `max_children_per_step` evaluations each but use one:
    /// the released evaluations must still be spent, so the run uses its whole budget.
    #[test]
    fn the_whole_budget_is_spent_with_steps_in_flight() {
        for in_flight in [1, 2, 4, 7] {
            let result = synthetic_engine(SyntheticMutator::new(0.1), synthetic_seed(6))
                .seed(3)
                .budget(Budget::evaluations(50))
                .max_in_flight(in_flight)
                .run_blocking()
                .unwrap();
            assert_eq!(result.summary.evaluations, 50, "in flight {in_flight}");
            assert_eq!(result.summary.stop_reason, StopReason::Evaluations);
        }
    }
}
