//! [`Stepper`]: a started run, driven step by step ([`Stepper::ask`], [`Stepper::tell`]) or to
//! its end ([`Stepper::run`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, StreamExt};
use futures::FutureExt;

use super::budget::{StopHandle, StopReason};
use super::state::{Launch, Proposed, RunState, StepDone};
use super::summary::RunResult;
use crate::candidate::{Candidate, CandidateId};
use crate::emitter::Scheduler;
use crate::error::{BoxError, CoreError};
use crate::evaluation::Evaluation;
use crate::traits::archive::Archive;
use crate::traits::classifier::BehaviorClassifier;
use crate::traits::evaluator::Evaluator;

/// Tells steppers apart, so that a step id from one is refused by another.
static NEXT_STEPPER: AtomicU64 = AtomicU64::new(0);

/// Names one asked step of one [`Stepper`]; [`Stepper::tell`] takes it back with the step's
/// evaluations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepId {
    stepper: u64,
    step: u64,
}

impl StepId {
    /// The step's number in its run (from 0; seeds are steps too).
    pub fn step(&self) -> u64 {
        self.step
    }
}

/// The children of one step, for the caller to evaluate and [`tell`](Stepper::tell).
#[derive(Debug)]
pub struct Proposal {
    id: StepId,
    parent: Option<CandidateId>,
    emitter: Option<String>,
    candidates: Vec<Candidate>,
}

impl Proposal {
    /// The id to tell the evaluations with.
    pub fn id(&self) -> StepId {
        self.id
    }

    /// The step's number.
    pub fn step(&self) -> u64 {
        self.id.step
    }

    /// The parent the step mutated (`None` for a seed).
    pub fn parent(&self) -> Option<CandidateId> {
        self.parent
    }

    /// The emitter that proposed the children (`None` for a seed and for a single mutator).
    pub fn emitter(&self) -> Option<&str> {
        self.emitter.as_deref()
    }

    /// The candidates to evaluate, in order (at least one), with their final ids.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }
}

/// What [`Stepper::ask`] has for the caller.
#[derive(Debug)]
pub enum Ask {
    /// A step's children to evaluate.
    Evaluate(Proposal),
    /// Nothing until an asked step is told: as many steps as
    /// [`EngineConfig::max_in_flight`](crate::EngineConfig::max_in_flight) allows are waiting,
    /// or the budget or the archive depends on their outcome.
    Wait,
    /// The run launches no more steps, for this reason. Steps already asked may still be told
    /// (unless the run was stopped); then [`Stepper::finish`] ends it.
    Done(StopReason),
}

/// A step in the stepper's queue: asked and waiting for evaluations, or complete and waiting
/// for the steps before it.
enum Slot {
    Asked(Proposed),
    Ready(StepDone),
}

/// A started run ([`Engine::start`](crate::Engine::start)), driven by its caller: [`ask`]
/// gives the next step's children, [`tell`] takes their evaluations and folds them into the
/// archive, the scheduler, the checkpoint and the observers exactly as [`run`] does (it is the
/// same code: `run` is this loop with up to `max_in_flight` steps at once and the engine's
/// evaluator). So a caller can evaluate children its own way, do its own work between steps,
/// or stop after any step: every told step is recorded by the checkpoint, and an engine built
/// the same way with the same checkpoint replays them and goes on where this one stopped.
///
/// Steps complete in the order they were asked, whatever the order of `tell`s; the run is a
/// function of the seed and of that order, so asking and telling one step at a time gives
/// the archive of [`Engine::run`](crate::Engine::run) with `max_in_flight(1)`. Recorded steps
/// (on resume) and steps without children are completed inside `ask`.
///
/// [`ask`]: Stepper::ask
/// [`tell`]: Stepper::tell
/// [`run`]: Stepper::run
///
/// # Example
///
/// ```
/// use kf_core::engine::Ask;
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive};
///
/// # futures::executor::block_on(async {
/// let classifier = SyntheticClassifier::new(3);
/// let archive = VecArchive::new(classifier.space().clone());
/// let mut stepper = Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
///     .seeds(vec![synthetic_seed(6)])
///     .seed(7)
///     .budget(Budget::evaluations(100))
///     .start()?;
/// let mut steps = 0;
/// while let Ask::Evaluate(proposal) = stepper.ask().await? {
///     // Evaluate however one likes; here with the engine's own evaluator.
///     let evaluations = stepper.evaluator().evaluate_batch(proposal.candidates()).await;
///     stepper.tell(proposal.id(), evaluations)?;
///     steps += 1;
///     if steps == 20 {
///         break; // stop early: what was told is kept
///     }
/// }
/// assert_eq!(stepper.steps(), 20);
/// let result = stepper.finish()?;
/// assert_eq!(result.summary.evaluations, 20);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct Stepper<E, C, A> {
    id: u64,
    evaluator: E,
    state: RunState<C, A>,
    queue: VecDeque<Slot>,
}

impl<E, C, A> Stepper<E, C, A>
where
    E: Evaluator,
    C: BehaviorClassifier,
    A: Archive,
{
    pub(super) fn new(evaluator: E, state: RunState<C, A>) -> Self {
        Stepper {
            id: NEXT_STEPPER.fetch_add(1, Ordering::Relaxed),
            evaluator,
            state,
            queue: VecDeque::new(),
        }
    }

    /// The next step's children. Runs the step's mutation (which is why it is `async`);
    /// completes on the way the steps that need no evaluation (recorded steps being replayed,
    /// steps whose mutator proposed nothing or failed).
    ///
    /// A mutator's failure is recorded and counted like one in [`run`](Stepper::run); too many
    /// in a row end the run with [`CoreError::TooManyFailures`], whose source is the mutator's
    /// own error.
    pub async fn ask(&mut self) -> Result<Ask, CoreError> {
        loop {
            if self.state.in_flight >= self.state.config.max_in_flight {
                return Ok(Ask::Wait);
            }
            match self.state.launch()? {
                Launch::Stop(reason) => return Ok(Ask::Done(reason)),
                Launch::Wait => return Ok(Ask::Wait),
                Launch::Replay(done) => self.push_ready(*done)?,
                Launch::Live(live) => {
                    let proposed = live.propose().await;
                    if proposed.candidates.is_empty() {
                        self.push_ready(proposed.evaluated(Vec::new()))?;
                        continue;
                    }
                    let header = &proposed.header;
                    let proposal = Proposal {
                        id: StepId {
                            stepper: self.id,
                            step: header.step,
                        },
                        parent: header.parent,
                        emitter: header
                            .emitter
                            .and_then(|i| self.state.scheduler.recorded_name(i))
                            .map(str::to_owned),
                        candidates: proposed.candidates.clone(),
                    };
                    self.queue.push_back(Slot::Asked(proposed));
                    return Ok(Ask::Evaluate(proposal));
                }
            }
        }
    }

    /// [`Stepper::ask`] on the current thread with `futures`' executor.
    pub fn ask_blocking(&mut self) -> Result<Ask, CoreError> {
        futures::executor::block_on(self.ask())
    }

    /// One whole step: asks, evaluates the children with the engine's evaluator, tells. Gives
    /// the number of the step told, or `None` when no step can be asked now (see
    /// [`Ask::Wait`] and [`Ask::Done`]; [`Stepper::stop_reason`] says whether the run is over).
    pub async fn step(&mut self) -> Result<Option<u64>, CoreError> {
        let Ask::Evaluate(proposal) = self.ask().await? else {
            return Ok(None);
        };
        let evaluations = evaluate(&self.evaluator, proposal.candidates()).await;
        self.tell(proposal.id(), evaluations)?;
        Ok(Some(proposal.step()))
    }

    /// [`Stepper::step`] on the current thread with `futures`' executor.
    pub fn step_blocking(&mut self) -> Result<Option<u64>, CoreError> {
        futures::executor::block_on(self.step())
    }

    /// The evaluations of an asked step's candidates, one per candidate in order. The step is
    /// completed as soon as every step asked before it is; an error of an evaluation is the
    /// child's failure (recorded, and counted towards
    /// [`max_consecutive_failures`](crate::EngineConfig::max_consecutive_failures)).
    ///
    /// Refuses, changing nothing, an id another stepper gave ([`CoreError::ForeignStep`]), a
    /// step not waiting for evaluations ([`CoreError::UnknownStep`]) and a wrong number of
    /// evaluations ([`CoreError::EvaluationCount`]).
    pub fn tell<Err: Into<BoxError>>(
        &mut self,
        id: StepId,
        evaluations: Vec<Result<Evaluation, Err>>,
    ) -> Result<(), CoreError> {
        if id.stepper != self.id {
            return Err(CoreError::ForeignStep { step: id.step });
        }
        let position = self
            .queue
            .iter()
            .position(|s| matches!(s, Slot::Asked(p) if p.header.step == id.step))
            .ok_or(CoreError::UnknownStep { step: id.step })?;
        let Some(Slot::Asked(proposed)) = self.queue.get(position) else {
            return Err(CoreError::UnknownStep { step: id.step });
        };
        if proposed.candidates.len() != evaluations.len() {
            return Err(CoreError::EvaluationCount {
                step: id.step,
                expected: proposed.candidates.len(),
                got: evaluations.len(),
            });
        }
        let evaluations = evaluations
            .into_iter()
            .map(|r| r.map_err(Into::into))
            .collect();
        if let Some(Slot::Asked(proposed)) = self.queue.remove(position) {
            let done = proposed.evaluated(evaluations);
            self.queue.insert(position, Slot::Ready(done));
        }
        self.complete_ready()
    }

    /// Queues a complete step and completes what is ready.
    fn push_ready(&mut self, done: StepDone) -> Result<(), CoreError> {
        self.queue.push_back(Slot::Ready(done));
        self.complete_ready()
    }

    /// Completes the steps at the front of the queue that have their evaluations.
    fn complete_ready(&mut self) -> Result<(), CoreError> {
        while matches!(self.queue.front(), Some(Slot::Ready(_))) {
            if let Some(Slot::Ready(done)) = self.queue.pop_front() {
                self.state.complete(done)?;
            }
        }
        Ok(())
    }

    /// Runs the rest of the search with up to
    /// [`max_in_flight`](crate::EngineConfig::max_in_flight) steps at once, each mutated and
    /// then evaluated by the engine's evaluator, and ends it ([`Stepper::finish`]). Steps
    /// complete in launch order. Refuses to start while asked steps wait for their evaluations
    /// ([`CoreError::StepsOutstanding`]).
    pub async fn run(mut self) -> Result<RunResult<A>, CoreError> {
        let outstanding: Vec<u64> = self
            .queue
            .iter()
            .filter_map(|s| match s {
                Slot::Asked(p) => Some(p.header.step),
                Slot::Ready(_) => None,
            })
            .collect();
        if !outstanding.is_empty() {
            return Err(CoreError::StepsOutstanding { steps: outstanding });
        }
        {
            let Stepper {
                evaluator, state, ..
            } = &mut self;
            let evaluator = &*evaluator;
            let mut in_flight: FuturesOrdered<BoxFuture<'_, StepDone>> = FuturesOrdered::new();
            loop {
                // Launch as many steps as the limits allow.
                while in_flight.len() < state.config.max_in_flight {
                    match state.launch()? {
                        Launch::Live(live) => in_flight.push_back(
                            async move {
                                let proposed = live.propose().await;
                                let evaluations = evaluate(evaluator, &proposed.candidates).await;
                                proposed.evaluated(evaluations)
                            }
                            .boxed(),
                        ),
                        Launch::Replay(done) => {
                            in_flight.push_back(futures::future::ready(*done).boxed())
                        }
                        Launch::Wait | Launch::Stop(_) => break,
                    }
                }
                if state.stop.is_stopped() {
                    // Steps in flight are abandoned (dropping their futures cancels them).
                    state.stop_reason = Some(StopReason::Stopped);
                    break;
                }
                let Some(done) = in_flight.next().await else {
                    break;
                };
                state.complete(done)?;
            }
        }
        let reason = self.state.stop_reason.unwrap_or(StopReason::Evaluations);
        self.state.finish(reason)
    }

    /// [`Stepper::run`] on the current thread with `futures`' executor.
    pub fn run_blocking(self) -> Result<RunResult<A>, CoreError> {
        futures::executor::block_on(self.run())
    }

    /// Ends the run where it is: the checkpoint's [`finish`](crate::Checkpoint::finish), the
    /// summary, the observers' end. Steps asked and not told are dropped (not recorded). The
    /// stop reason is the run's, or [`StopReason::Stopped`] when it could have gone on.
    pub fn finish(self) -> Result<RunResult<A>, CoreError> {
        let reason = self.state.stop_reason.unwrap_or(StopReason::Stopped);
        self.state.finish(reason)
    }

    /// The engine's evaluator (to evaluate proposals with, when the caller has no other).
    pub fn evaluator(&self) -> &E {
        &self.evaluator
    }

    /// The archive as the completed steps left it.
    pub fn archive(&self) -> &A {
        &self.state.archive
    }

    /// The scheduler (its [`stats`](Scheduler::stats) so far).
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.state.scheduler
    }

    /// Steps completed (replayed ones included).
    pub fn steps(&self) -> u64 {
        self.state.steps_done
    }

    /// Candidates evaluated or replayed so far.
    pub fn evaluations(&self) -> u64 {
        self.state.evaluations
    }

    /// Why the run launches no more steps, once it does not.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.state.stop_reason
    }

    /// The handle that stops this run.
    pub fn stop_handle(&self) -> StopHandle {
        self.state.stop.clone()
    }
}

/// The evaluations of a step's candidates by the engine's evaluator.
async fn evaluate<E: Evaluator>(
    evaluator: &E,
    candidates: &[Candidate],
) -> Vec<Result<Evaluation, BoxError>> {
    if candidates.is_empty() {
        return Vec::new();
    }
    evaluator
        .evaluate_batch(candidates)
        .await
        .into_iter()
        .map(|r| r.map_err(|e| Box::new(e) as BoxError))
        .collect()
}
