//! The state of one run and the three moves every driver makes with it: launch a step (choose
//! its emitter and parent, or take a seed, or a recorded step to replay), propose its children
//! (the mutation, off the state so that several can run at once), and complete it (insert,
//! credit, record, report). [`Stepper::ask`](crate::Stepper::ask) and
//! [`Stepper::tell`](crate::Stepper::tell) make these moves one at a time, and
//! [`Stepper::run`](crate::Stepper::run) with several steps in flight; there is no other path.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use super::budget::{StopHandle, StopReason};
use super::config::{BoxedObserver, EngineConfig};
use super::summary::{HistoryPoint, RunResult, RunSummary};
use crate::candidate::{Candidate, CandidateId, Offspring};
use crate::checkpoint::{ChildRecord, StepRecord};
use crate::compose::DynError;
use crate::device::DeviceFacts;
use crate::emitter::{device_seconds, EmitterCredit, Scheduler};
use crate::error::{BoxError, CoreError, StepFailure};
use crate::evaluation::Evaluation;
use crate::fitness::Fitness;
use crate::novelty::{Novelty, NoveltyConfig, NoveltyCounts, NoveltyIndex, Signature, Verdict};
use crate::observe::{EvaluationReport, ObserverMode};
use crate::run_baseline::RunBaseline;
use crate::task::Task;
use crate::traits::archive::{Archive, ArchiveMetrics, Elite, InsertOutcome};
use crate::traits::classifier::BehaviorClassifier;
use crate::traits::mutator::{Mutation, MutationContext, Mutator, Usage};
use crate::Checkpoint;

/// What the engine decided about a step when it launched it.
#[derive(Debug, Clone)]
pub(super) struct StepHeader {
    pub(super) step: u64,
    pub(super) parent: Option<CandidateId>,
    /// The scheduler's emitter for the step (none for seeds).
    pub(super) emitter: Option<usize>,
    /// Evaluations the step may use.
    pub(super) reservation: u64,
    pub(super) budget_bound: bool,
    /// The candidate ids reserved for its children.
    pub(super) ids: Range<u64>,
}

/// What [`RunState::launch`] decided.
pub(super) enum Launch {
    /// A step to propose and evaluate (boxed: it carries the parent and its context).
    Live(Box<LiveStep>),
    /// A recorded step, complete as it is.
    Replay(Box<StepDone>),
    /// Nothing can be launched until a step in flight completes (the budget is reserved by
    /// steps in flight, or the seeds in flight have not filled the archive yet).
    Wait,
    /// The run launches nothing more.
    Stop(StopReason),
}

/// A launched step whose children are still to be proposed. It owns everything the proposal
/// needs, so that proposals run while the state goes on.
pub(super) struct LiveStep {
    pub(super) header: StepHeader,
    work: Work,
    filter: Option<Filter>,
    scheduler: Arc<Scheduler>,
}

enum Work {
    Seed(Candidate),
    Mutate {
        emitter: usize,
        parent: Box<Elite>,
        ctx: MutationContext,
    },
}

/// The result of a live step's mutation: its usage and what the novelty filter found, or why
/// it failed.
type MutationResult = Result<(Usage, NoveltyCounts), StepFailure>;

/// A live step with its children proposed, waiting for their evaluations.
pub(super) struct Proposed {
    pub(super) header: StepHeader,
    mutation: MutationResult,
    pub(super) candidates: Vec<Candidate>,
}

/// A step ready to be folded into the run.
pub(super) struct StepDone {
    pub(super) header: StepHeader,
    outcome: StepOutcome,
}

enum StepOutcome {
    /// Computed now: one evaluation per candidate.
    Live {
        mutation: MutationResult,
        candidates: Vec<Candidate>,
        evaluations: Vec<Result<Evaluation, BoxError>>,
    },
    /// Taken from the checkpoint.
    Replayed(StepRecord),
}

/// A mutator's error, unwrapped from however many [`DynError`] boxes it came through, so that
/// it downcasts to the mutator's own error type.
fn unwrap_dyn(error: DynError) -> BoxError {
    let mut error = error.into_inner();
    loop {
        match error.downcast::<DynError>() {
            Ok(inner) => error = inner.into_inner(),
            Err(original) => return original,
        }
    }
}

impl LiveStep {
    /// Runs the mutation (none for a seed), drops what the novelty filter rejects and numbers
    /// the children with the step's ids.
    pub(super) async fn propose(self: Box<Self>) -> Proposed {
        let LiveStep {
            header,
            work,
            filter,
            scheduler,
        } = *self;
        let mutation = match work {
            Work::Seed(seed) => Ok(Mutation::free(vec![Offspring::new(
                seed.source,
                seed.params,
                seed.origin,
            )])),
            Work::Mutate {
                emitter,
                parent,
                ctx,
            } => {
                let mutator = scheduler.mutator(emitter);
                mutator
                    .mutate(&parent, &ctx)
                    .await
                    .map_err(|e| StepFailure::Mutator {
                        mutator: mutator.name().to_owned(),
                        source: unwrap_dyn(e),
                    })
            }
        };
        let (mutation, candidates) = match mutation {
            Ok(mut m) => {
                let novelty = filter
                    .as_ref()
                    .map(|f| f.apply(&mut m.children))
                    .unwrap_or_default();
                let candidates = header
                    .ids
                    .clone()
                    .zip(m.children)
                    .map(|(id, child)| {
                        Candidate::from_offspring(CandidateId(id), header.parent, child)
                    })
                    .collect();
                (Ok((m.usage, novelty)), candidates)
            }
            Err(e) => (Err(e), Vec::new()),
        };
        Proposed {
            header,
            mutation,
            candidates,
        }
    }
}

impl Proposed {
    /// The step with its children's evaluations, one per candidate in order.
    pub(super) fn evaluated(self, evaluations: Vec<Result<Evaluation, BoxError>>) -> StepDone {
        StepDone {
            header: self.header,
            outcome: StepOutcome::Live {
                mutation: self.mutation,
                candidates: self.candidates,
                evaluations,
            },
        }
    }
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
    fn apply(&self, children: &mut Vec<Offspring>) -> NoveltyCounts {
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

/// The parts of an engine a run needs besides the evaluator.
pub(super) struct Parts<C, A> {
    pub(super) scheduler: Arc<Scheduler>,
    pub(super) classifier: C,
    pub(super) archive: A,
    pub(super) task: Arc<Task>,
    pub(super) device: Option<Arc<DeviceFacts>>,
    pub(super) seeds: Vec<Candidate>,
    pub(super) config: EngineConfig,
    pub(super) observers: Vec<BoxedObserver>,
    pub(super) checkpoint: Option<Box<dyn Checkpoint<A>>>,
    pub(super) stop: StopHandle,
    pub(super) novelty: Option<(Arc<dyn Novelty>, NoveltyConfig)>,
    pub(super) recorded: HashMap<u64, StepRecord>,
    pub(super) rng: ChaCha8Rng,
}

/// The mutable state of one run.
pub(super) struct RunState<C, A> {
    pub(super) scheduler: Arc<Scheduler>,
    classifier: C,
    pub(super) archive: A,
    task: Arc<Task>,
    device: Option<Arc<DeviceFacts>>,
    pub(super) config: EngineConfig,
    pub(super) observers: Vec<BoxedObserver>,
    checkpoint: Option<Box<dyn Checkpoint<A>>>,
    pub(super) stop: StopHandle,
    novelty: Option<(Arc<dyn Novelty>, NoveltyConfig)>,
    /// Signatures of every judged child, for the novelty filter.
    novelty_index: Arc<Mutex<NoveltyIndex>>,
    novelty_counts: NoveltyCounts,
    /// Steps recorded by an earlier run, replayed when launched.
    recorded: HashMap<u64, StepRecord>,
    seeds: std::vec::IntoIter<Candidate>,
    pending_seed: Option<Candidate>,
    next_step: u64,
    /// Steps launched and not yet completed.
    pub(super) in_flight: usize,
    /// Set once the run launches nothing more.
    pub(super) stop_reason: Option<StopReason>,
    started: Instant,
    rng: ChaCha8Rng,
    next_id: u64,
    pub(super) evaluations: u64,
    /// Evaluations done plus evaluations reserved by steps in flight.
    reserved: u64,
    /// Set once the evaluation budget shaped a launch (see [`StepRecord::budget_bound`]).
    budget_touched: bool,
    usage: Usage,
    /// Device evaluations of the completed steps (see
    /// [`Budget::max_device_evaluations`](super::budget::Budget::max_device_evaluations)).
    device_evaluations: u64,
    pub(super) steps_done: u64,
    replayed: u64,
    failed_steps: u64,
    consecutive_failures: u32,
    /// Steps in a row that proposed no child (see [`EngineConfig::max_idle_steps`]).
    idle_steps: u32,
    best: Option<Fitness>,
    history: Vec<HistoryPoint>,
    /// The one baseline figure every judged evaluation is scored against.
    run_baseline: RunBaseline,
}

impl<C, A> RunState<C, A>
where
    C: BehaviorClassifier,
    A: Archive,
{
    pub(super) fn new(parts: Parts<C, A>) -> Self {
        let mut seeds = parts.seeds.into_iter();
        let pending_seed = seeds.next();
        RunState {
            scheduler: parts.scheduler,
            classifier: parts.classifier,
            archive: parts.archive,
            task: parts.task,
            device: parts.device,
            config: parts.config,
            observers: parts.observers,
            checkpoint: parts.checkpoint,
            stop: parts.stop,
            novelty: parts.novelty,
            novelty_index: Arc::new(Mutex::new(NoveltyIndex::default())),
            novelty_counts: NoveltyCounts::default(),
            recorded: parts.recorded,
            seeds,
            pending_seed,
            next_step: 0,
            in_flight: 0,
            stop_reason: None,
            started: Instant::now(),
            rng: parts.rng,
            next_id: 0,
            evaluations: 0,
            reserved: 0,
            budget_touched: false,
            usage: Usage::default(),
            device_evaluations: 0,
            steps_done: 0,
            replayed: 0,
            failed_steps: 0,
            consecutive_failures: 0,
            idle_steps: 0,
            best: None,
            history: Vec::new(),
            run_baseline: RunBaseline::new(),
        }
    }

    /// Whether a seed is still to be launched.
    pub(super) fn has_seeds(&self) -> bool {
        self.pending_seed.is_some()
    }

    /// Launches the next step, if the limits allow one.
    pub(super) fn launch(&mut self) -> Result<Launch, CoreError> {
        if let Some(halt) = self.halt() {
            return Ok(halt);
        }
        let step = self.next_step;
        let reservation = self.reservation();
        // A step launched with a clipped reservation, or after the budget ran out once, would
        // go differently under a larger budget: its record says so, so that an extended run
        // recomputes it.
        if reservation < self.config.max_children_per_step as u64 {
            self.budget_touched = true;
        }
        let budget_bound = self.budget_touched;
        let (header, work) = if let Some(seed) = self.pending_seed.take() {
            self.seed_step(seed, step, reservation, budget_bound)
        } else {
            match self.mutation_step(step, reservation, budget_bound)? {
                Some(prepared) => prepared,
                // Wait for the seeds in flight to fill the archive.
                None => return Ok(Launch::Wait),
            }
        };
        let launch = self.replay_or_live(header, work)?;
        self.next_step += 1;
        self.reserved += reservation_of(&launch);
        self.in_flight += 1;
        Ok(launch)
    }

    /// Why no step may be launched now: a stop (by request or by a spent limit), or a wait for
    /// the steps in flight to release evaluations. `None` when a step may be launched.
    fn halt(&mut self) -> Option<Launch> {
        if let Some(reason) = self.stop_reason {
            return Some(Launch::Stop(reason));
        }
        if self.stop.is_stopped() {
            self.stop_reason = Some(StopReason::Stopped);
            return Some(Launch::Stop(StopReason::Stopped));
        }
        let reason = self.exhausted()?;
        if reason == StopReason::Evaluations {
            // From here on, launches depend on the budget (see `launch`).
            self.budget_touched = true;
        }
        // Steps in flight may use fewer evaluations than they reserved; once they
        // complete, the released evaluations can still be spent.
        if reason != StopReason::Evaluations || self.in_flight == 0 {
            self.stop_reason = Some(reason);
            return Some(Launch::Stop(reason));
        }
        Some(Launch::Wait)
    }

    /// The header and work of a step that evaluates `seed` (one evaluation at most), queuing
    /// the next seed.
    fn seed_step(
        &mut self,
        seed: Candidate,
        step: u64,
        reservation: u64,
        budget_bound: bool,
    ) -> (StepHeader, Work) {
        self.pending_seed = self.seeds.next();
        let reservation = reservation.min(1);
        let ids = self.take_ids(reservation);
        let header = StepHeader {
            step,
            parent: None,
            emitter: None,
            reservation,
            budget_bound,
            ids,
        };
        (header, Work::Seed(seed))
    }

    /// The header and work of a step that mutates a parent the scheduler chooses, with its
    /// inspirations and hints from the archive. `None` while the archive has no parent yet but
    /// seeds are in flight; an error when no seed can ever fill it.
    fn mutation_step(
        &mut self,
        step: u64,
        reservation: u64,
        budget_bound: bool,
    ) -> Result<Option<(StepHeader, Work)>, CoreError> {
        let Some((emitter, parent)) = self.scheduler.choose(&mut self.archive, &mut self.rng)
        else {
            if self.in_flight == 0 {
                return Err(CoreError::NoParent(
                    "every seed failed to evaluate or classify".into(),
                ));
            }
            return Ok(None);
        };
        let cell = parent.descriptor.coords.clone();
        let inspirations: Vec<Elite> = self
            .archive
            .inspirations(&mut self.rng, &cell, self.config.inspirations)
            .into_iter()
            .cloned()
            .collect();
        let ctx = MutationContext {
            step,
            seed: self.rng.next_u64(),
            task: Arc::clone(&self.task),
            device: self.device.clone(),
            inspirations,
            hints: self.archive.hints(Some(&cell)),
        };
        let header = StepHeader {
            step,
            parent: Some(parent.candidate.id),
            emitter: Some(emitter),
            reservation,
            budget_bound,
            ids: self.take_ids(reservation),
        };
        let work = Work::Mutate {
            emitter,
            parent: Box::new(parent),
            ctx,
        };
        Ok(Some((header, work)))
    }

    /// A recorded step (checked against what was decided now) replays as it was; any other
    /// step goes live, with the novelty filter when it mutates.
    fn replay_or_live(&mut self, header: StepHeader, work: Work) -> Result<Launch, CoreError> {
        if let Some(record) = self.recorded.remove(&header.step) {
            let emitter = header.emitter.and_then(|i| self.scheduler.recorded_name(i));
            check_replay(&record, header.parent, emitter, header.step)?;
            return Ok(Launch::Replay(Box::new(StepDone {
                header,
                outcome: StepOutcome::Replayed(record),
            })));
        }
        let filter = match work {
            Work::Mutate { .. } => self.filter(),
            Work::Seed(_) => None,
        };
        Ok(Launch::Live(Box::new(LiveStep {
            header,
            work,
            filter,
            scheduler: Arc::clone(&self.scheduler),
        })))
    }

    /// Which limit, if any, forbids launching another step.
    fn exhausted(&self) -> Option<StopReason> {
        let b = &self.config.budget;
        if b.max_evaluations.is_some_and(|m| self.reserved >= m) {
            return Some(StopReason::Evaluations);
        }
        if b.max_wall.is_some_and(|w| self.started.elapsed() >= w) {
            return Some(StopReason::WallTime);
        }
        if b.max_cost.is_some_and(|c| self.usage.cost >= c) {
            return Some(StopReason::Cost);
        }
        if b.max_device_evaluations
            .is_some_and(|m| self.device_evaluations >= m)
        {
            return Some(StopReason::DeviceEvaluations);
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
    fn take_ids(&mut self, n: u64) -> Range<u64> {
        let start = self.next_id;
        self.next_id += n;
        start..self.next_id
    }

    /// Folds one completed step into the archive, the scheduler, the checkpoint and the
    /// observers. Steps complete in launch order.
    pub(super) fn complete(&mut self, done: StepDone) -> Result<(), CoreError> {
        let StepDone { header, outcome } = done;
        self.in_flight = self.in_flight.saturating_sub(1);
        let qd_before = self.archive.metrics().qd_score;
        let (record, replayed, metrics_after, failure) = match outcome {
            StepOutcome::Replayed(record) => {
                let metrics_after = self.apply_replay(&record, header.ids.clone())?;
                let failure = record.error.clone().or_else(|| first_child_error(&record));
                (
                    record,
                    true,
                    metrics_after,
                    failure.map(StepFailure::Recorded),
                )
            }
            StepOutcome::Live {
                mutation,
                candidates,
                evaluations,
            } => {
                let (mut record, metrics_after, failure) =
                    self.judge(&header, mutation, candidates, evaluations);
                record.budget_bound = header.budget_bound;
                record.emitter = header
                    .emitter
                    .and_then(|i| self.scheduler.recorded_name(i).map(str::to_owned));
                (record, false, metrics_after, failure)
            }
        };
        match header.emitter {
            Some(index) => {
                credit_emitter(&self.scheduler, index, &record, qd_before, &metrics_after)
            }
            // A seed's children teach a lone mutator too (as they did when engines took a
            // mutator directly); emitters are credited with their own steps only.
            None if self.scheduler.is_single() => {
                for child in &record.children {
                    if let ChildRecord::Judged { elite, outcome } = child {
                        self.scheduler.mutator(0).credit(elite, outcome);
                    }
                }
            }
            None => {}
        }
        self.register_novelty(&record);
        let used = record.children.len() as u64;
        if record.children.is_empty() && record.error.is_none() {
            self.idle_steps += 1;
        } else {
            self.idle_steps = 0;
        }
        let reservation = header.reservation;
        self.reserved = self.reserved - reservation.min(self.reserved) + used.min(reservation);
        self.steps_done += 1;
        self.usage.add(&record.usage);
        self.device_evaluations += device_evaluations_of(&record);
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
                return Err(CoreError::TooManyFailures {
                    count: self.consecutive_failures,
                    last: failure.unwrap_or_else(|| StepFailure::Recorded(String::new())),
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
    /// archive's metrics right after each child was judged (what observers are told of it)
    /// and the step's first failure, typed.
    fn judge(
        &mut self,
        header: &StepHeader,
        mutation: MutationResult,
        candidates: Vec<Candidate>,
        evaluations: Vec<Result<Evaluation, BoxError>>,
    ) -> (StepRecord, Vec<ArchiveMetrics>, Option<StepFailure>) {
        let mut record = StepRecord {
            step: header.step,
            parent: header.parent,
            usage: Usage::default(),
            children: Vec::new(),
            error: None,
            budget_bound: false,
            emitter: None,
            novelty: NoveltyCounts::default(),
        };
        let (usage, novelty) = match mutation {
            Ok(m) => m,
            Err(failure) => {
                record.error = Some(failure.to_string());
                return (record, Vec::new(), Some(failure));
            }
        };
        record.usage = usage;
        record.novelty = novelty;
        let mut first_failure = None;
        let mut metrics_after = Vec::with_capacity(candidates.len());
        for (candidate, evaluation) in candidates.into_iter().zip(evaluations) {
            let (child, failure) = self.judge_child(candidate, evaluation);
            record.children.push(child);
            if first_failure.is_none() {
                first_failure = failure;
            }
            metrics_after.push(self.archive.metrics());
        }
        (record, metrics_after, first_failure)
    }

    /// Classifies and inserts one evaluated child; a child that could not be judged comes with
    /// its failure.
    fn judge_child(
        &mut self,
        candidate: Candidate,
        evaluation: Result<Evaluation, BoxError>,
    ) -> (ChildRecord, Option<StepFailure>) {
        let failed = |candidate: Candidate, failure: StepFailure| {
            let record = ChildRecord::Failed {
                candidate: Box::new(candidate),
                error: failure.to_string(),
            };
            (record, Some(failure))
        };
        let mut evaluation = match evaluation {
            Ok(e) => e,
            Err(e) => return failed(candidate, StepFailure::Evaluator(e)),
        };
        // Against the run's one baseline figure, not the one timed beside this candidate: on a
        // loaded machine that one varies, and would rank candidates by it. Before the
        // classifier, which may read the speedup.
        self.run_baseline.score(&mut evaluation);
        let descriptor = match self.classifier.classify(&candidate, &evaluation) {
            Ok(d) => d,
            Err(e) => return failed(candidate, StepFailure::Classifier(Box::new(e))),
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
                // Judged children fix the reference, live as in a replay (see apply_replay).
                self.run_baseline.adopt(&elite.evaluation);
                let record = ChildRecord::Judged {
                    elite: Box::new(elite),
                    outcome,
                };
                (record, None)
            }
            Err(e) => failed(elite.candidate, StepFailure::Archive(Box::new(e))),
        }
    }

    /// Re-applies a recorded step, checking that it is what this run would have done; returns
    /// the archive's metrics right after each child.
    fn apply_replay(
        &mut self,
        record: &StepRecord,
        ids: Range<u64>,
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
                // The recorded evaluation carries the reference it was scored against, so
                // the run goes on against the figure of its start.
                self.run_baseline.adopt(&elite.evaluation);
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

    /// Ends the run: the checkpoint's last word, the summary, the observers' end.
    pub(super) fn finish(mut self, stop_reason: StopReason) -> Result<RunResult<A>, CoreError> {
        if let Some(c) = self.checkpoint.as_mut() {
            c.finish(&self.archive).map_err(CoreError::Checkpoint)?;
        }
        let summary = RunSummary {
            stop_reason,
            steps: self.steps_done,
            evaluations: self.evaluations,
            replayed_steps: self.replayed,
            failed_steps: self.failed_steps,
            metrics: self.archive.metrics(),
            usage: self.usage,
            wall_seconds: self.started.elapsed().as_secs_f64(),
            history: self.history,
            novelty: self.novelty_counts,
        };
        for (o, _) in self.observers.iter_mut() {
            o.observe_end(&summary).map_err(CoreError::Observer)?;
        }
        Ok(RunResult {
            archive: self.archive,
            summary,
        })
    }
}

/// The evaluations a launch reserved (a step's reservation; none for the other launches).
fn reservation_of(launch: &Launch) -> u64 {
    match launch {
        Launch::Live(live) => live.header.reservation,
        Launch::Replay(done) => done.header.reservation,
        Launch::Wait | Launch::Stop(_) => 0,
    }
}

/// The message of a recorded step's first failed child.
fn first_child_error(record: &StepRecord) -> Option<String> {
    record.children.iter().find_map(|c| match c {
        ChildRecord::Failed { error, .. } => Some(error.clone()),
        ChildRecord::Judged { .. } => None,
    })
}

/// Refuses to replay a recorded step that this run would have launched otherwise (another
/// emitter or parent).
fn check_replay(
    record: &StepRecord,
    parent: Option<CandidateId>,
    emitter: Option<&str>,
    step: u64,
) -> Result<(), CoreError> {
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
    Ok(())
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

/// The device evaluations a completed step spent: each judged child's own and its tuning's;
/// one for a child whose evaluation failed (it was sent to the device all the same).
fn device_evaluations_of(record: &StepRecord) -> u64 {
    record
        .children
        .iter()
        .map(|child| match child {
            ChildRecord::Judged { elite, .. } => elite.evaluation.device_evaluations(),
            ChildRecord::Failed { .. } => 1,
        })
        .sum()
}
