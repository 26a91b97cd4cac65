//! The search engine: a consuming builder that composes a mutator, an evaluator, a classifier
//! and an archive, and runs the MAP-Elites loop with a bounded number of steps in flight.
//!
//! The engine owns no runtime: [`Engine::run`] returns a future that any executor can drive
//! ([`Engine::run_blocking`] uses `futures`' own). Steps complete in the order they were
//! launched, and every random choice comes from one ChaCha stream seeded by the run seed, so a
//! seeded run is reproducible even with several steps in flight — which is also what lets a
//! killed run resume exactly: recorded steps are replayed, the rest are computed.

mod budget;
pub(crate) mod summary;

pub use budget::{Budget, StopHandle, StopReason};
pub use summary::{HistoryPoint, RunResult, RunSummary};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, StreamExt};
use futures::FutureExt;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::candidate::{Candidate, CandidateId, Offspring};
use crate::checkpoint::{ChildRecord, StepRecord};
use crate::device::DeviceFacts;
use crate::emitter::{device_seconds, EmitterCredit, ScheduledMutator, Scheduler};
use crate::error::CoreError;
use crate::evaluation::Evaluation;
use crate::fitness::Fitness;
use crate::novelty::{Novelty, NoveltyConfig, NoveltyCounts, NoveltyIndex, Signature, Verdict};
use crate::observe::{EvaluationReport, Observe, ObserverMode, RunInfo};
use crate::task::Task;
use crate::traits::archive::{Archive, ArchiveMetrics, Elite, InsertOutcome};
use crate::traits::classifier::BehaviorClassifier;
use crate::traits::evaluator::Evaluator;
use crate::traits::mutator::{Mutation, MutationContext, Mutator, Usage};
use crate::Checkpoint;

/// Tunable knobs of the loop.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Seed of the run's random stream.
    pub seed: u64,
    /// Limits.
    pub budget: Budget,
    /// Steps (mutation + evaluation) in flight at once.
    pub max_in_flight: usize,
    /// Children evaluated per step at most; extra children are dropped.
    pub max_children_per_step: usize,
    /// Inspirations handed to the mutator.
    pub inspirations: usize,
    /// Steps that may fail in a row (mutator or evaluator errors) before the run aborts.
    pub max_consecutive_failures: u32,
    /// Steps in a row that may propose no child at all before the run ends with
    /// [`StopReason::Stalled`]: the mutators have nothing left to offer the archive's parents
    /// (a parameter move on a kernel without parameters, say), and going on would only write
    /// empty steps until the wall-clock budget runs out. Parents are drawn at random, so a
    /// few empty steps in a row are normal; this many are not.
    pub max_idle_steps: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            seed: 0,
            budget: Budget::default(),
            max_in_flight: 1,
            max_children_per_step: 8,
            inspirations: 3,
            max_consecutive_failures: 16,
            max_idle_steps: 64,
        }
    }
}

type BoxedObserver = (Box<dyn Observe>, ObserverMode);

/// The search engine, built by chaining configuration calls and consumed by [`Engine::run`].
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
pub struct Engine<M, E, C, A> {
    mutator: M,
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
    scheduler: Option<Arc<Scheduler>>,
    novelty: Option<(Arc<dyn Novelty>, NoveltyConfig)>,
}

impl<E, C, A> Engine<ScheduledMutator, E, C, A>
where
    E: Evaluator,
    C: BehaviorClassifier,
    A: Archive,
{
    /// An engine whose steps are chosen by `scheduler`: each step, it picks an emitter, the
    /// emitter picks the parent and its mutator proposes the children, and the emitter is
    /// credited with what they did for the archive (see [`crate::emitter`]). Seeds, budget,
    /// checkpoints and observers work as with [`Engine::new`].
    pub fn scheduled(scheduler: Scheduler, evaluator: E, classifier: C, archive: A) -> Self {
        let scheduler = Arc::new(scheduler);
        let mutator = ScheduledMutator::new(Arc::clone(&scheduler));
        let mut engine = Engine::new(mutator, evaluator, classifier, archive);
        engine.scheduler = Some(scheduler);
        engine
    }
}

impl<M, E, C, A> Engine<M, E, C, A>
where
    M: Mutator,
    E: Evaluator,
    C: BehaviorClassifier,
    A: Archive,
{
    /// An engine over these parts, with default configuration. Give the task and the device
    /// facts with [`Engine::task`] and [`Engine::device`]; a mutator that needs them
    /// ([`Mutator::needs`]) makes the run fail with [`CoreError::MissingContext`] without them.
    /// Mutators that need neither see an unnamed task.
    pub fn new(mutator: M, evaluator: E, classifier: C, archive: A) -> Self {
        Engine {
            mutator,
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
            scheduler: None,
            novelty: None,
        }
    }

    /// The scheduler choosing this engine's emitters, when it was made by
    /// [`Engine::scheduled`]: a handle to read its [`stats`](Scheduler::stats) after the run.
    pub fn scheduler(&self) -> Option<Arc<Scheduler>> {
        self.scheduler.clone()
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

    /// Steps in flight at once (at least 1).
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

    /// Runs the search. The future is `Send` and may be driven by any executor.
    pub async fn run(self) -> Result<RunResult<A>, CoreError> {
        let Engine {
            mutator,
            evaluator,
            classifier,
            archive,
            task,
            device,
            seeds,
            config,
            observers,
            checkpoint,
            stop,
            scheduler,
            novelty,
        } = self;
        if config.budget.is_unbounded() {
            return Err(CoreError::InvalidConfig(
                "the budget sets no limit; give at least one of evaluations, wall time, cost or tokens"
                    .into(),
            ));
        }
        if config.max_in_flight == 0 || config.max_children_per_step == 0 {
            return Err(CoreError::InvalidConfig(
                "max_in_flight and max_children_per_step must be at least 1".into(),
            ));
        }
        let needs = mutator.needs();
        if needs.task && task.is_none() {
            return Err(CoreError::MissingContext {
                mutator: mutator.name().to_owned(),
                what: "the task (its name and sizes)",
                call: "task",
            });
        }
        if needs.device && device.is_none() {
            return Err(CoreError::MissingContext {
                mutator: mutator.name().to_owned(),
                what: "the device facts",
                call: "device",
            });
        }
        let task = task.unwrap_or_else(|| Arc::new(Task::new("unnamed")));
        let mut state = LoopState {
            mutator: &mutator,
            classifier: &classifier,
            archive,
            task,
            device,
            config,
            observers,
            checkpoint,
            scheduler,
            novelty,
            novelty_index: Arc::new(Mutex::new(NoveltyIndex::default())),
            novelty_counts: NoveltyCounts::default(),
            started: Instant::now(),
            rng: ChaCha8Rng::seed_from_u64(0),
            next_id: 0,
            evaluations: 0,
            reserved: 0,
            budget_touched: false,
            usage: Usage::default(),
            steps_done: 0,
            replayed: 0,
            failed_steps: 0,
            consecutive_failures: 0,
            idle_steps: 0,
            best: None,
            history: Vec::new(),
        };
        state.rng = ChaCha8Rng::seed_from_u64(state.config.seed);
        let recorded: HashMap<u64, StepRecord> = match state.checkpoint.as_mut() {
            Some(c) => c
                .recorded()
                .map_err(CoreError::Checkpoint)?
                .into_iter()
                .map(|r| (r.step, r))
                .collect(),
            None => HashMap::new(),
        };
        let info = RunInfo {
            seed: state.config.seed,
            max_evaluations: state.config.budget.max_evaluations,
            replaying_steps: recorded.len(),
            mutator: mutator.name(),
        };
        for (o, _) in state.observers.iter_mut() {
            o.observe_start(&info).map_err(CoreError::Observer)?;
        }

        let mut seeds = seeds.into_iter();
        let mut pending_seed = seeds.next();
        if pending_seed.is_none() && state.archive.metrics().filled == 0 {
            return Err(CoreError::NoSeeds);
        }
        let mut in_flight: FuturesOrdered<BoxFuture<'_, StepDone<E::Error>>> =
            FuturesOrdered::new();
        let mut next_step: u64 = 0;
        let mut stop_reason = None;
        loop {
            // Launch as many steps as the limits allow.
            while stop_reason.is_none() && in_flight.len() < state.config.max_in_flight {
                if stop.is_stopped() {
                    stop_reason = Some(StopReason::Stopped);
                    break;
                }
                if let Some(reason) = state.exhausted() {
                    if reason == StopReason::Evaluations {
                        // From here on, launches depend on the budget (see below).
                        state.budget_touched = true;
                    }
                    // Steps in flight may use fewer evaluations than they reserved; once they
                    // complete, the released evaluations can still be spent.
                    if reason != StopReason::Evaluations || in_flight.is_empty() {
                        stop_reason = Some(reason);
                    }
                    break;
                }
                let step = next_step;
                let reservation = state.reservation();
                // A step launched with a clipped reservation, or after the budget ran out once,
                // would go differently under a larger budget: its record says so, so that an
                // extended run recomputes it.
                if reservation < state.config.max_children_per_step as u64 {
                    state.budget_touched = true;
                }
                let budget_bound = state.budget_touched;
                let replay = recorded.get(&step);
                let launched = if let Some(seed) = pending_seed.take() {
                    pending_seed = seeds.next();
                    let reservation = reservation.min(1);
                    let ids = state.take_ids(reservation);
                    let fut = match replay {
                        Some(rec) => replay_future(rec, None, None, step)?,
                        None => {
                            let child = Offspring::new(seed.source, seed.params, seed.origin);
                            let mutation = Ok(Mutation::free(vec![child]));
                            evaluate_future(&evaluator, mutation, None, ids.clone(), None)
                        }
                    };
                    Launched {
                        step,
                        parent: None,
                        emitter: None,
                        reservation,
                        budget_bound,
                        ids,
                        fut,
                    }
                } else {
                    let chosen = match &state.scheduler {
                        Some(s) => s
                            .choose(step, &mut state.archive, &mut state.rng)
                            .map(|(i, p)| (Some(i), p)),
                        None => state
                            .archive
                            .select_parent(&mut state.rng)
                            .cloned()
                            .map(|p| (None, p)),
                    };
                    let Some((emitter, parent)) = chosen else {
                        if in_flight.is_empty() {
                            return Err(CoreError::NoParent(
                                "every seed failed to evaluate or classify".into(),
                            ));
                        }
                        // Wait for the seeds in flight to fill the archive.
                        break;
                    };
                    let cell = parent.descriptor.coords.clone();
                    let inspirations: Vec<Elite> = state
                        .archive
                        .inspirations(&mut state.rng, &cell, state.config.inspirations)
                        .into_iter()
                        .cloned()
                        .collect();
                    let ctx = MutationContext {
                        step,
                        seed: state.rng.next_u64(),
                        task: Arc::clone(&state.task),
                        device: state.device.clone(),
                        inspirations,
                        hints: state.archive.hints(Some(&cell)),
                    };
                    let parent_id = parent.candidate.id;
                    let ids = state.take_ids(reservation);
                    let filter = state.filter();
                    let fut = match replay {
                        Some(rec) => {
                            let name = emitter
                                .and_then(|i| state.scheduler.as_ref().map(|s| s.name_of(i)));
                            replay_future(rec, Some(parent_id), name, step)?
                        }
                        None => {
                            let mutator = &mutator;
                            let evaluator = &evaluator;
                            let ids_for_step = ids.clone();
                            async move {
                                let mutation = mutator
                                    .mutate(&parent, &ctx)
                                    .await
                                    .map_err(|e| e.to_string());
                                evaluate_future(
                                    evaluator,
                                    mutation,
                                    Some(parent_id),
                                    ids_for_step,
                                    filter,
                                )
                                .await
                            }
                            .boxed()
                        }
                    };
                    Launched {
                        step,
                        parent: Some(parent_id),
                        emitter,
                        reservation,
                        budget_bound,
                        ids,
                        fut,
                    }
                };
                next_step += 1;
                state.reserved += launched.reservation;
                let Launched {
                    step,
                    parent,
                    emitter,
                    reservation,
                    budget_bound,
                    ids,
                    fut,
                } = launched;
                in_flight.push_back(
                    fut.map(move |outcome| StepDone {
                        step,
                        parent,
                        emitter,
                        reservation,
                        budget_bound,
                        ids,
                        outcome: outcome.outcome,
                    })
                    .boxed(),
                );
            }
            if stop.is_stopped() {
                stop_reason = Some(StopReason::Stopped);
                break;
            }
            let Some(done) = in_flight.next().await else {
                break;
            };
            state.complete(done)?;
        }
        drop(in_flight);
        let stop_reason = stop_reason.unwrap_or(StopReason::Evaluations);
        if let Some(c) = state.checkpoint.as_mut() {
            c.finish(&state.archive).map_err(CoreError::Checkpoint)?;
        }
        let summary = RunSummary {
            stop_reason,
            steps: state.steps_done,
            evaluations: state.evaluations,
            replayed_steps: state.replayed,
            failed_steps: state.failed_steps,
            metrics: state.archive.metrics(),
            usage: state.usage,
            wall_seconds: state.started.elapsed().as_secs_f64(),
            history: state.history,
            novelty: state.novelty_counts,
        };
        for (o, _) in state.observers.iter_mut() {
            o.observe_end(&summary).map_err(CoreError::Observer)?;
        }
        Ok(RunResult {
            archive: state.archive,
            summary,
        })
    }
}

/// A step whose future has been built but not yet queued.
struct Launched<'a, Err> {
    step: u64,
    parent: Option<CandidateId>,
    /// The scheduler's emitter for the step (none for seeds and unscheduled engines).
    emitter: Option<usize>,
    reservation: u64,
    budget_bound: bool,
    ids: std::ops::Range<u64>,
    fut: BoxFuture<'a, StepOutcomeOnly<Err>>,
}

/// What a step's future yields.
struct StepOutcomeOnly<Err> {
    outcome: StepOutcome<Err>,
}

enum StepOutcome<Err> {
    /// Computed now: the mutation's usage (or its error), the kept children with their ids,
    /// and one evaluation per child.
    Live {
        usage: Result<Usage, String>,
        candidates: Vec<Candidate>,
        evaluations: Vec<Result<Evaluation, Err>>,
        /// Children the novelty filter found.
        novelty: NoveltyCounts,
    },
    /// Taken from the run directory.
    Replayed(StepRecord),
}

struct StepDone<Err> {
    step: u64,
    parent: Option<CandidateId>,
    emitter: Option<usize>,
    reservation: u64,
    budget_bound: bool,
    ids: std::ops::Range<u64>,
    outcome: StepOutcome<Err>,
}

fn replay_future<'a, Err: Send + 'a>(
    record: &StepRecord,
    parent: Option<CandidateId>,
    emitter: Option<&str>,
    step: u64,
) -> Result<BoxFuture<'a, StepOutcomeOnly<Err>>, CoreError> {
    if record.emitter.as_deref() != emitter {
        return Err(CoreError::ResumeMismatch {
            step,
            what: format!(
                "was emitted by {:?}, but this run chooses {:?}",
                record.emitter, emitter
            ),
        });
    }
    if record.parent != parent {
        return Err(CoreError::ResumeMismatch {
            step,
            what: format!(
                "mutated parent {:?}, but this run selects {:?}",
                record.parent, parent
            ),
        });
    }
    let outcome = StepOutcome::Replayed(record.clone());
    Ok(futures::future::ready(StepOutcomeOnly { outcome }).boxed())
}

/// What a live step's children are checked against: the signatures judged before it was
/// launched (the first `visible`).
struct Filter {
    novelty: Arc<dyn Novelty>,
    config: NoveltyConfig,
    index: Arc<Mutex<NoveltyIndex>>,
    visible: usize,
}

impl Filter {
    /// Drops the children the filter rejects; returns what it found.
    fn apply(&self, children: &mut Vec<crate::candidate::Offspring>) -> NoveltyCounts {
        let mut counts = NoveltyCounts::default();
        let mut kept_signatures: Vec<Signature> = Vec::new();
        let index = self.index.lock().unwrap_or_else(|p| p.into_inner());
        children.retain(|child| {
            let signature = self.novelty.signature(&child.source, &child.params);
            match index.verdict(&signature, self.visible, &kept_signatures, &self.config) {
                Verdict::Novel => {}
                Verdict::Duplicate => {
                    counts.duplicates += 1;
                    return false;
                }
                Verdict::NearDuplicate => {
                    counts.near_duplicates += 1;
                    if self.config.reject_near {
                        return false;
                    }
                }
            }
            kept_signatures.push(signature);
            true
        });
        counts
    }
}

fn evaluate_future<'a, E: Evaluator>(
    evaluator: &'a E,
    mutation: Result<Mutation, String>,
    parent: Option<CandidateId>,
    ids: std::ops::Range<u64>,
    filter: Option<Filter>,
) -> BoxFuture<'a, StepOutcomeOnly<E::Error>> {
    async move {
        let mut novelty = NoveltyCounts::default();
        let (usage, candidates) = match mutation {
            Ok(mut m) => {
                if let Some(filter) = &filter {
                    novelty = filter.apply(&mut m.children);
                }
                let candidates: Vec<Candidate> = ids
                    .zip(m.children)
                    .map(|(id, child)| Candidate::from_offspring(CandidateId(id), parent, child))
                    .collect();
                (Ok(m.usage), candidates)
            }
            Err(e) => (Err(e), Vec::new()),
        };
        let evaluations = if candidates.is_empty() {
            Vec::new()
        } else {
            evaluator.evaluate_batch(&candidates).await
        };
        StepOutcomeOnly {
            outcome: StepOutcome::Live {
                usage,
                candidates,
                evaluations,
                novelty,
            },
        }
    }
    .boxed()
}

/// The mutable state of one run.
struct LoopState<'m, M, C, A> {
    mutator: &'m M,
    classifier: &'m C,
    archive: A,
    task: Arc<Task>,
    device: Option<Arc<DeviceFacts>>,
    config: EngineConfig,
    observers: Vec<BoxedObserver>,
    checkpoint: Option<Box<dyn Checkpoint<A>>>,
    scheduler: Option<Arc<Scheduler>>,
    novelty: Option<(Arc<dyn Novelty>, NoveltyConfig)>,
    /// Signatures of every judged child, for the novelty filter.
    novelty_index: Arc<Mutex<NoveltyIndex>>,
    novelty_counts: NoveltyCounts,
    started: Instant,
    rng: ChaCha8Rng,
    next_id: u64,
    evaluations: u64,
    /// Evaluations done plus evaluations reserved by steps in flight.
    reserved: u64,
    /// Set once the evaluation budget shaped a launch (see [`StepRecord::budget_bound`]).
    budget_touched: bool,
    usage: Usage,
    steps_done: u64,
    replayed: u64,
    failed_steps: u64,
    consecutive_failures: u32,
    /// Steps in a row that proposed no child (see [`EngineConfig::max_idle_steps`]).
    idle_steps: u32,
    best: Option<Fitness>,
    history: Vec<HistoryPoint>,
}

impl<M, C, A> LoopState<'_, M, C, A>
where
    M: Mutator,
    C: BehaviorClassifier,
    A: Archive,
{
    /// Which limit, if any, forbids launching another step.
    fn exhausted(&self) -> Option<StopReason> {
        let b = &self.config.budget;
        if b.max_evaluations.is_some_and(|m| self.reserved >= m) {
            return Some(StopReason::Evaluations);
        }
        if b.max_wall.is_some_and(|w| self.started.elapsed() >= w) {
            return Some(StopReason::WallTime);
        }
        if b.max_cost_usd.is_some_and(|c| self.usage.cost_usd >= c) {
            return Some(StopReason::Cost);
        }
        if b.max_tokens.is_some_and(|t| self.usage.tokens() >= t) {
            return Some(StopReason::Tokens);
        }
        if self.idle_steps >= self.config.max_idle_steps {
            return Some(StopReason::Stalled);
        }
        None
    }

    /// Evaluations the next step may use.
    fn reservation(&self) -> u64 {
        let cap = self.config.max_children_per_step as u64;
        match self.config.budget.max_evaluations {
            Some(m) => cap.min(m.saturating_sub(self.reserved)),
            None => cap,
        }
    }

    /// The novelty filter of a step launched now.
    fn filter(&self) -> Option<Filter> {
        let (novelty, config) = self.novelty.as_ref()?;
        let visible = self
            .novelty_index
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        Some(Filter {
            novelty: Arc::clone(novelty),
            config: *config,
            index: Arc::clone(&self.novelty_index),
            visible,
        })
    }

    /// Registers a completed step's children with the novelty filter.
    fn register_novelty(&mut self, record: &StepRecord) {
        self.novelty_counts.add(record.novelty);
        let Some((novelty, _)) = &self.novelty else {
            return;
        };
        let mut index = self.novelty_index.lock().unwrap_or_else(|p| p.into_inner());
        for child in &record.children {
            let c = child.candidate();
            index.register(novelty.signature(&c.source, &c.params));
        }
    }

    /// Reserves a block of candidate ids for a step at launch, so that ids follow launch order
    /// and the evaluator sees each candidate's final id. Unused ids are skipped.
    fn take_ids(&mut self, n: u64) -> std::ops::Range<u64> {
        let start = self.next_id;
        self.next_id += n;
        start..self.next_id
    }

    /// Folds one completed step into the archive, the checkpoint and the observers.
    fn complete<Err: std::fmt::Display>(&mut self, done: StepDone<Err>) -> Result<(), CoreError> {
        let StepDone {
            step,
            parent,
            emitter,
            reservation,
            budget_bound,
            ids,
            outcome,
        } = done;
        let qd_before = self.archive.metrics().qd_score;
        let (record, replayed, metrics_after) = match outcome {
            StepOutcome::Replayed(record) => {
                let metrics_after = self.apply_replay(&record, ids)?;
                (record, true, metrics_after)
            }
            StepOutcome::Live {
                usage,
                candidates,
                evaluations,
                novelty,
            } => {
                let (mut record, metrics_after) =
                    self.judge(step, parent, usage, candidates, evaluations);
                record.budget_bound = budget_bound;
                record.novelty = novelty;
                record.emitter =
                    emitter.and_then(|i| self.scheduler.as_ref().map(|s| s.name_of(i).to_owned()));
                (record, false, metrics_after)
            }
        };
        if let (Some(scheduler), Some(index)) = (&self.scheduler, emitter) {
            scheduler.finish_step(step);
            credit_emitter(scheduler, index, &record, qd_before, &metrics_after);
        }
        self.register_novelty(&record);
        let used = record.children.len() as u64;
        if record.children.is_empty() && record.error.is_none() {
            self.idle_steps += 1;
        } else {
            self.idle_steps = 0;
        }
        self.reserved = self.reserved - reservation.min(self.reserved) + used.min(reservation);
        self.steps_done += 1;
        self.usage.add(&record.usage);
        let failed = record.error.is_some()
            || (!record.children.is_empty()
                && record
                    .children
                    .iter()
                    .all(|c| matches!(c, ChildRecord::Failed { .. })));
        if failed {
            self.failed_steps += 1;
            self.consecutive_failures += 1;
            if self.consecutive_failures > self.config.max_consecutive_failures {
                let last = record.error.clone().unwrap_or_else(|| {
                    record
                        .children
                        .iter()
                        .find_map(|c| match c {
                            ChildRecord::Failed { error, .. } => Some(error.clone()),
                            ChildRecord::Judged { .. } => None,
                        })
                        .unwrap_or_default()
                });
                return Err(CoreError::TooManyFailures {
                    count: self.consecutive_failures,
                    last,
                });
            }
        } else {
            self.consecutive_failures = 0;
        }
        if replayed {
            self.replayed += 1;
        } else if let Some(c) = self.checkpoint.as_mut() {
            // Recorded before observers hear of it: whatever was reported survives a crash.
            c.record(&record, &self.archive)
                .map_err(CoreError::Checkpoint)?;
        }
        self.report(&record, replayed, &metrics_after)
    }

    /// Classifies and inserts the children of a live step and builds its record, with the
    /// archive's metrics right after each child was judged (what observers are told of it).
    fn judge<Err: std::fmt::Display>(
        &mut self,
        step: u64,
        parent: Option<CandidateId>,
        usage: Result<Usage, String>,
        candidates: Vec<Candidate>,
        evaluations: Vec<Result<Evaluation, Err>>,
    ) -> (StepRecord, Vec<ArchiveMetrics>) {
        let usage = match usage {
            Ok(u) => u,
            Err(error) => {
                let record = StepRecord {
                    step,
                    parent,
                    usage: Usage::default(),
                    children: Vec::new(),
                    error: Some(format!("mutator `{}`: {error}", self.mutator.name())),
                    budget_bound: false,
                    emitter: None,
                    novelty: NoveltyCounts::default(),
                };
                return (record, Vec::new());
            }
        };
        let mut children = Vec::with_capacity(candidates.len());
        let mut metrics_after = Vec::with_capacity(candidates.len());
        for (candidate, evaluation) in candidates.into_iter().zip(evaluations) {
            children.push(self.judge_child(candidate, evaluation));
            metrics_after.push(self.archive.metrics());
        }
        let record = StepRecord {
            step,
            parent,
            usage,
            children,
            error: None,
            budget_bound: false,
            emitter: None,
            novelty: NoveltyCounts::default(),
        };
        (record, metrics_after)
    }

    /// Classifies and inserts one evaluated child.
    fn judge_child<Err: std::fmt::Display>(
        &mut self,
        candidate: Candidate,
        evaluation: Result<Evaluation, Err>,
    ) -> ChildRecord {
        let evaluation = match evaluation {
            Ok(e) => e,
            Err(e) => {
                return ChildRecord::Failed {
                    candidate: Box::new(candidate),
                    error: format!("evaluator: {e}"),
                }
            }
        };
        let descriptor = match self.classifier.classify(&candidate, &evaluation) {
            Ok(d) => d,
            Err(e) => {
                return ChildRecord::Failed {
                    candidate: Box::new(candidate),
                    error: format!("classifier: {e}"),
                }
            }
        };
        let fitness = Fitness::of(&evaluation);
        let elite = Elite {
            candidate,
            evaluation,
            descriptor,
            fitness,
        };
        match self.archive.insert(elite.clone()) {
            Ok(outcome) => {
                self.mutator.credit(&elite, &outcome);
                ChildRecord::Judged {
                    elite: Box::new(elite),
                    outcome,
                }
            }
            Err(e) => ChildRecord::Failed {
                candidate: Box::new(elite.candidate),
                error: format!("archive: {e}"),
            },
        }
    }

    /// Re-applies a recorded step, checking that it is what this run would have done; returns
    /// the archive's metrics right after each child.
    fn apply_replay(
        &mut self,
        record: &StepRecord,
        ids: std::ops::Range<u64>,
    ) -> Result<Vec<ArchiveMetrics>, CoreError> {
        let mut metrics_after = Vec::with_capacity(record.children.len());
        if record.children.len() as u64 > ids.end - ids.start {
            return Err(CoreError::ResumeMismatch {
                step: record.step,
                what: format!(
                    "has {} children, more than this run allows per step",
                    record.children.len()
                ),
            });
        }
        for (child, expected) in record.children.iter().zip(ids) {
            let found = child.candidate().id;
            if found != CandidateId(expected) {
                return Err(CoreError::ResumeMismatch {
                    step: record.step,
                    what: format!("numbers a child {found}, but this run gives it #{expected}"),
                });
            }
            if let ChildRecord::Judged { elite, outcome } = child {
                let now = self
                    .archive
                    .insert(Elite::clone(elite))
                    .map_err(|e| CoreError::Archive(Box::new(e)))?;
                if now != *outcome {
                    return Err(CoreError::ResumeMismatch {
                        step: record.step,
                        what: format!("inserted {found} as {outcome:?}, but now it is {now:?}"),
                    });
                }
                self.mutator.credit(elite, outcome);
            }
            metrics_after.push(self.archive.metrics());
        }
        Ok(metrics_after)
    }

    /// Updates counters and history and calls the observers for each child of a step, in
    /// order, each with the archive as it was right after that child was judged
    /// (`metrics_after`, one per child): with several children per step, "new best" belongs to
    /// the child that made it, not to whichever comes last.
    fn report(
        &mut self,
        record: &StepRecord,
        replayed: bool,
        metrics_after: &[ArchiveMetrics],
    ) -> Result<(), CoreError> {
        for (i, child) in record.children.iter().enumerate() {
            self.evaluations += 1;
            let metrics = metrics_after
                .get(i)
                .copied()
                .unwrap_or_else(|| self.archive.metrics());
            let new_best = metrics.best.is_some() && metrics.best > self.best;
            if new_best {
                self.best = metrics.best;
            }
            let elapsed_s = self.started.elapsed().as_secs_f64();
            self.history.push(HistoryPoint {
                evaluations: self.evaluations,
                qd_score: metrics.qd_score,
                coverage: metrics.coverage,
                best: metrics.best,
                elapsed_s,
            });
            if self.observers.is_empty() {
                continue;
            }
            let (evaluation, descriptor, fitness, outcome, error) = match child {
                ChildRecord::Judged { elite, outcome } => (
                    Some(&elite.evaluation),
                    Some(&elite.descriptor),
                    Some(elite.fitness),
                    Some(*outcome),
                    None,
                ),
                ChildRecord::Failed { error, .. } => (None, None, None, None, Some(error.as_str())),
            };
            let report = EvaluationReport {
                step: record.step,
                evaluations: self.evaluations,
                candidate: child.candidate(),
                evaluation,
                descriptor,
                fitness,
                outcome,
                error,
                metrics,
                new_best,
                replayed,
                elapsed_s,
                usage: self.usage,
            };
            let added = outcome.is_some_and(|o: InsertOutcome| o.is_added());
            for (observer, mode) in self.observers.iter_mut() {
                let call = match mode {
                    ObserverMode::Always => true,
                    ObserverMode::Every(n) => *n > 0 && self.evaluations.is_multiple_of(*n),
                    ObserverMode::NewBest => new_best,
                    ObserverMode::Added => added,
                };
                if call {
                    observer
                        .observe_evaluation(&report)
                        .map_err(CoreError::Observer)?;
                }
            }
        }
        Ok(())
    }
}

/// Credits a step's emitter with each of its children (what each did to the QD-score, from
/// the archive's metrics right after it), or with nothing for a step that proposed none.
fn credit_emitter(
    scheduler: &Scheduler,
    index: usize,
    record: &StepRecord,
    qd_before: f64,
    metrics_after: &[ArchiveMetrics],
) {
    if record.children.is_empty() {
        scheduler.credit(index, None, EmitterCredit::NOTHING);
        return;
    }
    let mut qd = qd_before;
    for (i, child) in record.children.iter().enumerate() {
        let after = metrics_after.get(i).map_or(qd, |m| m.qd_score);
        let credit = match child {
            ChildRecord::Judged { elite, outcome } => EmitterCredit {
                outcome: Some(*outcome),
                qd_gain: after - qd,
                device_seconds: device_seconds(&elite.evaluation),
                child: true,
            },
            ChildRecord::Failed { .. } => EmitterCredit {
                child: true,
                ..EmitterCredit::NOTHING
            },
        };
        let elite = match child {
            ChildRecord::Judged { elite, .. } => Some(elite.as_ref()),
            ChildRecord::Failed { .. } => None,
        };
        scheduler.credit(index, elite, credit);
        qd = after;
    }
}

#[cfg(test)]
mod novelty_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::Origin;
    use crate::kernel::{KernelSource, Language, ParamValue, ParamValues};
    use crate::test_support::Barren;
    use crate::testing::{
        synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive,
    };
    use crate::traits::mutator::Needs;

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
        let classifier = SyntheticClassifier::new(4);
        let archive = VecArchive::new(classifier.space().clone());
        let result = Engine::new(
            TwoChildren { better_first },
            SyntheticEvaluator::new(),
            classifier,
            archive,
        )
        .seeds(vec![Candidate::seed(synthetic_source(), at([0.625; 3]))])
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

    fn needy_engine(
        needs: Needs,
    ) -> Engine<Needy, SyntheticEvaluator, SyntheticClassifier, VecArchive> {
        let classifier = SyntheticClassifier::new(4);
        let archive = VecArchive::new(classifier.space().clone());
        Engine::new(Needy(needs), SyntheticEvaluator::new(), classifier, archive)
            .seeds(vec![synthetic_seed(3)])
            .budget(Budget::evaluations(2))
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
            let classifier = SyntheticClassifier::new(4);
            let archive = VecArchive::new(classifier.space().clone());
            let result = Engine::new(
                SyntheticMutator::new(0.1),
                SyntheticEvaluator::new(),
                classifier,
                archive,
            )
            .seeds(vec![synthetic_seed(6)])
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
