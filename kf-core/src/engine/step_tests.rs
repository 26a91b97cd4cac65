//! The step API: ask/tell against `run`, completion order, stop and resume, refused tells,
//! typed mutator errors, the opaque cost budget.

use std::sync::{Arc, Mutex};

use futures::executor::block_on;

use super::synthetic_engine;
use super::*;
use crate::candidate::Origin;
use crate::emitter::Scheduler;
use crate::error::{BoxError, StepFailure};
use crate::observe::EvaluationReport;
use crate::testing::{
    synthetic_emitters, synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator,
    VecArchive,
};
use crate::traits::archive::Elite;
use crate::traits::mutator::{Mutation, MutationContext, Usage};
use crate::{BoxMutator, Offspring};

const SEED: u64 = 17;
const EVALUATIONS: u64 = 120;

type TestEngine = Engine<SyntheticEvaluator, SyntheticClassifier, VecArchive>;

/// The engine of these tests: the synthetic problem, one seed, `EVALUATIONS` evaluations.
fn engine(proposer: impl Into<Scheduler>) -> TestEngine {
    synthetic_engine(proposer, synthetic_seed(6))
        .seed(SEED)
        .budget(Budget::evaluations(EVALUATIONS))
}

fn gaussian() -> SyntheticMutator {
    SyntheticMutator::new(0.1)
}

fn bandit() -> Scheduler {
    Scheduler::bandit(synthetic_emitters()).unwrap()
}

/// The engine of these tests with the bandit scheduler, or with the Gaussian mutator alone.
fn engine_with(bandit_scheduler: bool) -> TestEngine {
    if bandit_scheduler {
        engine(bandit())
    } else {
        engine(gaussian())
    }
}

fn elites(archive: &VecArchive) -> Vec<Elite> {
    archive.elites().into_iter().cloned().collect()
}

/// Asks and tells one step at a time, evaluating with the engine's evaluator, for at most
/// `max_steps` told steps; returns the stepper and the steps told.
fn drive(
    mut stepper: Stepper<SyntheticEvaluator, SyntheticClassifier, VecArchive>,
    max_steps: usize,
) -> (
    Stepper<SyntheticEvaluator, SyntheticClassifier, VecArchive>,
    usize,
) {
    let mut told = 0;
    block_on(async {
        while told < max_steps {
            let Ask::Evaluate(proposal) = stepper.ask().await.unwrap() else {
                break;
            };
            let evaluations = stepper
                .evaluator()
                .evaluate_batch(proposal.candidates())
                .await;
            stepper.tell(proposal.id(), evaluations).unwrap();
            told += 1;
        }
    });
    (stepper, told)
}

#[test]
fn asking_and_telling_one_step_at_a_time_is_a_run_with_one_in_flight() {
    for bandit_scheduler in [false, true] {
        let make = || engine_with(bandit_scheduler);
        let ran = make().max_in_flight(1).run_blocking().unwrap();
        let (stepper, _) = drive(make().start().unwrap(), usize::MAX);
        assert_eq!(stepper.stop_reason(), Some(StopReason::Evaluations));
        let stats = stepper.scheduler().stats();
        let stepped = stepper.finish().unwrap();
        assert_eq!(stepped.summary.evaluations, EVALUATIONS);
        assert_eq!(stepped.summary.steps, ran.summary.steps);
        assert_eq!(stepped.summary.stop_reason, StopReason::Evaluations);
        assert_eq!(
            elites(&stepped.archive),
            elites(&ran.archive),
            "bandit {bandit_scheduler}"
        );
        assert!(stats.iter().map(|s| s.children).sum::<u64>() > 0);
        // And a different seed gives a different archive: the comparison can fail.
        let other = make()
            .seed(SEED + 1)
            .max_in_flight(1)
            .run_blocking()
            .unwrap();
        assert_ne!(elites(&other.archive), elites(&ran.archive));
    }
}

#[test]
fn steps_complete_in_the_order_they_were_asked() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&order);
    let mut stepper = engine(gaussian())
        .max_in_flight(3)
        .add_observer(
            move |r: &EvaluationReport<'_>| -> Result<(), BoxError> {
                seen.lock().unwrap().push(r.step);
                Ok(())
            },
            ObserverMode::Always,
        )
        .start()
        .unwrap();
    block_on(async {
        let Ask::Evaluate(seed) = stepper.ask().await.unwrap() else {
            panic!("the seed is asked first");
        };
        assert_eq!(seed.step(), 0);
        assert_eq!(seed.parent(), None);
        // No parent until the seed is in the archive.
        assert!(matches!(stepper.ask().await.unwrap(), Ask::Wait));
        let evaluations = stepper.evaluator().evaluate_batch(seed.candidates()).await;
        stepper.tell(seed.id(), evaluations).unwrap();
        let mut asked = Vec::new();
        while let Ask::Evaluate(p) = stepper.ask().await.unwrap() {
            asked.push(p);
        }
        assert_eq!(asked.len(), 3, "max_in_flight steps at once");
        assert_eq!(
            asked.iter().map(Proposal::step).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        for p in asked.iter().rev() {
            assert_eq!(
                stepper.steps(),
                1,
                "nothing completes before step 1 is told"
            );
            let evaluations = stepper.evaluator().evaluate_batch(p.candidates()).await;
            stepper.tell(p.id(), evaluations).unwrap();
        }
        assert_eq!(stepper.steps(), 4);
    });
    let order = order.lock().unwrap().clone();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted, "observers hear of steps in asked order");
    assert_eq!(order.first(), Some(&0));
    assert_eq!(order.last(), Some(&3));
}

/// An in-memory checkpoint whose records outlive the engine, as a run directory's do.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<StepRecord>>>);

impl<A> Checkpoint<A> for Shared {
    fn recorded(&mut self) -> Result<Vec<StepRecord>, BoxError> {
        Ok(self.0.lock().unwrap().clone())
    }
    fn record(&mut self, step: &StepRecord, _: &A) -> Result<(), BoxError> {
        self.0.lock().unwrap().push(step.clone());
        Ok(())
    }
}

#[test]
fn stopping_after_n_steps_and_resuming_gives_the_uninterrupted_archive() {
    for bandit_scheduler in [false, true] {
        let make = || engine_with(bandit_scheduler);
        let uninterrupted = make().run_blocking().unwrap();
        let records = Shared::default();
        // Stop after 25 steps: the stepper is dropped, as a process that exits would.
        let (stepper, told) = drive(make().checkpoint(records.clone()).start().unwrap(), 25);
        assert_eq!(told, 25);
        drop(stepper);
        assert_eq!(records.0.lock().unwrap().len(), 25);
        // Resume step by step for a while, then run to the end.
        let (stepper, _) = drive(make().checkpoint(records.clone()).start().unwrap(), 10);
        assert!(stepper.steps() >= 35, "replayed steps complete inside ask");
        let resumed = block_on(stepper.run()).unwrap();
        assert_eq!(resumed.summary.replayed_steps, 25);
        assert_eq!(resumed.summary.evaluations, EVALUATIONS);
        assert_eq!(
            elites(&resumed.archive),
            elites(&uninterrupted.archive),
            "bandit {bandit_scheduler}"
        );
    }
}

#[test]
fn tell_refuses_foreign_unknown_and_miscounted_steps() {
    let mut one = engine(gaussian()).start().unwrap();
    let mut other = engine(gaussian()).start().unwrap();
    let evaluator = SyntheticEvaluator::new();
    let evaluate = |p: &Proposal| block_on(evaluator.evaluate_batch(p.candidates()));
    let Ask::Evaluate(mine) = block_on(one.ask()).unwrap() else {
        panic!("a seed step");
    };
    let Ask::Evaluate(theirs) = block_on(other.ask()).unwrap() else {
        panic!("a seed step");
    };
    let err = one.tell(theirs.id(), evaluate(&mine)).unwrap_err();
    assert!(matches!(err, CoreError::ForeignStep { step: 0 }), "{err:?}");
    let err = one
        .tell(mine.id(), Vec::<Result<crate::Evaluation, BoxError>>::new())
        .unwrap_err();
    assert!(
        matches!(
            err,
            CoreError::EvaluationCount {
                step: 0,
                expected: 1,
                got: 0
            }
        ),
        "{err:?}"
    );
    assert_eq!(one.steps(), 0, "a refused tell changes nothing");
    one.tell(mine.id(), evaluate(&mine)).unwrap();
    assert_eq!(one.steps(), 1);
    let err = one.tell(mine.id(), evaluate(&mine)).unwrap_err();
    assert!(matches!(err, CoreError::UnknownStep { step: 0 }), "{err:?}");
    assert!(
        matches!(block_on(other.ask()).unwrap(), Ask::Wait),
        "max_in_flight 1: the seed is still asked"
    );
    // Running to the end refuses while a step waits for its evaluations.
    let Ask::Evaluate(waiting) = block_on(one.ask()).unwrap() else {
        panic!("a step after the seed");
    };
    let err = block_on(one.run()).err();
    assert!(
        matches!(&err, Some(CoreError::StepsOutstanding { steps }) if steps == &[waiting.step()]),
        "{err:?}"
    );
}

/// The error of [`Unreachable`], which the engine must hand back as itself.
#[derive(Debug, thiserror::Error)]
#[error("the model server at {0} is unreachable")]
struct ServerDown(&'static str);

/// A mutator whose every call fails.
struct Unreachable;

#[async_trait::async_trait]
impl crate::Mutator for Unreachable {
    type Error = ServerDown;
    fn name(&self) -> &str {
        "unreachable"
    }
    async fn mutate(&self, _: &Elite, _: &MutationContext) -> Result<Mutation, ServerDown> {
        Err(ServerDown("http://127.0.0.1:9"))
    }
}

fn failing_run(proposer: impl Into<Scheduler>) -> CoreError {
    engine(proposer)
        .configure(|c| EngineConfig {
            max_consecutive_failures: 3,
            ..c
        })
        .run_blocking()
        .expect_err("a mutator that always fails ends the run")
}

#[test]
fn a_mutator_error_reaches_the_caller_typed() {
    let boxed_twice = BoxMutator::new(BoxMutator::new(Unreachable));
    let scheduled = Scheduler::bandit(vec![Box::new(crate::emitter::SelectionEmitter::frontier(
        BoxMutator::new(Unreachable),
    ))])
    .unwrap();
    for err in [
        failing_run(Unreachable),
        failing_run(boxed_twice),
        failing_run(scheduled),
    ] {
        let CoreError::TooManyFailures { count, last } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(*count, 4);
        let StepFailure::Mutator { mutator, source } = last else {
            panic!("{last:?}");
        };
        assert_eq!(mutator, "unreachable");
        let down = source.downcast_ref::<ServerDown>();
        assert_eq!(down.map(|d| d.0), Some("http://127.0.0.1:9"));
        // Through the standard source chain as well.
        let mut chain = std::error::Error::source(&err);
        let mut found = false;
        while let Some(e) = chain {
            found |= e.downcast_ref::<ServerDown>().is_some();
            chain = e.source();
        }
        assert!(found, "the chain of {err} holds the mutator's error");
        assert!(err
            .to_string()
            .contains("mutator `unreachable`: the model server"));
    }
}

/// Proposes the parent again and reports a cost of 1.5 per mutation.
struct Costly;

#[async_trait::async_trait]
impl crate::Mutator for Costly {
    type Error = std::convert::Infallible;
    fn name(&self) -> &str {
        "costly"
    }
    async fn mutate(
        &self,
        p: &Elite,
        _: &MutationContext,
    ) -> Result<Mutation, std::convert::Infallible> {
        let c = &p.candidate;
        let child = Offspring::new(
            c.source.clone(),
            c.params.clone(),
            Origin::mutator("costly"),
        );
        Ok(Mutation {
            children: vec![child],
            usage: Usage {
                cost: 1.5,
                ..Usage::default()
            },
        })
    }
}

#[test]
fn the_cost_budget_counts_what_mutations_report() {
    let result = engine(Costly)
        .budget(Budget::evaluations(1_000).with_cost(6.0))
        .run_blocking()
        .unwrap();
    assert_eq!(result.summary.stop_reason, StopReason::Cost);
    assert_eq!(result.summary.usage.cost, 6.0);
    // The seed, then four mutations of 1.5.
    assert_eq!(result.summary.evaluations, 5);
}

/// Any executor may drive a run or a step (the parts here are `Send`).
#[test]
fn runs_and_steps_are_send_futures() {
    fn send<T: Send>(_: T) {}
    send(engine(bandit()).run());
    let mut stepper = engine(gaussian()).start().unwrap();
    send(stepper.ask());
    send(stepper.step());
}
