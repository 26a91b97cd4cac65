//! Behaviour of the compositions.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use futures::executor::block_on;

use super::*;
use crate::prelude::*;
use crate::testing::{
    synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive,
};

#[derive(Debug, thiserror::Error)]
#[error("failed: {0}")]
struct Failed(&'static str);

fn elite() -> Elite {
    let evaluation = Evaluation::failed(Status::Correct, "");
    Elite {
        candidate: synthetic_seed(3),
        fitness: evaluation.fitness(),
        evaluation,
        descriptor: Descriptor::new([0, 0, 0], "test"),
    }
}

fn ctx() -> MutationContext {
    MutationContext {
        step: 3,
        seed: 7,
        task: Arc::new(Task::new("t")),
        device: None,
        inspirations: Vec::new(),
        hints: ArchiveHints::default(),
    }
}

/// A mutator proposing one child whose origin names it; counts the credit it is given.
struct Named {
    name: &'static str,
    needs: Needs,
    fail: bool,
    credited: Arc<AtomicUsize>,
}

impl Named {
    fn new(name: &'static str) -> Self {
        Named {
            name,
            needs: Needs::NOTHING,
            fail: false,
            credited: Arc::new(AtomicUsize::new(0)),
        }
    }
}

#[async_trait]
impl Mutator for Named {
    type Error = Failed;
    fn name(&self) -> &str {
        self.name
    }
    fn needs(&self) -> Needs {
        self.needs
    }
    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Failed> {
        if self.fail {
            return Err(Failed(self.name));
        }
        let child = Offspring::new(
            parent.candidate.source.clone(),
            parent.effective_params(),
            Origin::mutator(self.name).with_note(format!("seed {}", ctx.seed)),
        );
        Ok(Mutation::free(vec![child]))
    }
    fn credit(&self, _child: &Elite, _outcome: &InsertOutcome) {
        self.credited.fetch_add(1, Ordering::SeqCst);
    }
}

/// An evaluator that says which of its methods was called (in the diagnostics).
struct Tagged(&'static str);

#[async_trait]
impl Evaluator for Tagged {
    type Error = Failed;
    async fn evaluate(&self, _c: &Candidate) -> Result<Evaluation, Failed> {
        Ok(Evaluation::failed(
            Status::CompileError,
            format!("{} one", self.0),
        ))
    }
    async fn evaluate_batch(&self, cs: &[Candidate]) -> Vec<Result<Evaluation, Failed>> {
        cs.iter()
            .map(|_| {
                Err(Failed(if self.0 == "left" {
                    "left batch"
                } else {
                    "right batch"
                }))
            })
            .collect()
    }
}

const ADDED: InsertOutcome = InsertOutcome::NewCell;

#[test]
fn either_mutator_dispatches_to_the_side_it_holds() {
    let mut right = Named::new("right");
    right.needs = Needs::TASK_AND_DEVICE;
    right.fail = true;
    let left: Either<Named, Named> = Either::Left(Named::new("left"));
    let right: Either<Named, Named> = Either::Right(right);

    assert_eq!(left.name(), "left");
    assert_eq!(right.name(), "right");
    assert_eq!(left.needs(), Needs::NOTHING);
    assert_eq!(right.needs(), Needs::TASK_AND_DEVICE);

    let m = block_on(left.mutate(&elite(), &ctx())).unwrap();
    assert_eq!(m.children[0].origin.mutator, "left");
    assert_eq!(m.children[0].origin.note, "seed 7");
    match block_on(right.mutate(&elite(), &ctx())) {
        Err(Either::Right(Failed("right"))) => {}
        other => panic!("expected the right side's error, got {other:?}"),
    }

    left.credit(&elite(), &ADDED);
    left.credit(&elite(), &ADDED);
    right.credit(&elite(), &ADDED);
    let count = |e: &Either<Named, Named>| match e {
        Either::Left(m) | Either::Right(m) => m.credited.load(Ordering::SeqCst),
    };
    assert_eq!((count(&left), count(&right)), (2, 1));
}

#[test]
fn either_error_displays_and_chains_like_its_side() {
    let e: Either<Failed, std::io::Error> = Either::Left(Failed("x"));
    assert_eq!(e.to_string(), "failed: x");
    let dyn_error: &dyn std::error::Error = &e;
    assert!(dyn_error.source().is_none());
}

#[test]
fn either_evaluator_keeps_the_sides_batching() {
    let left: Either<Tagged, Tagged> = Either::Left(Tagged("left"));
    let right: Either<Tagged, Tagged> = Either::Right(Tagged("right"));
    let c = synthetic_seed(3);
    assert_eq!(block_on(left.evaluate(&c)).unwrap().diagnostics, "left one");
    assert_eq!(
        block_on(right.evaluate(&c)).unwrap().diagnostics,
        "right one"
    );
    let batch = block_on(right.evaluate_batch(&[c.clone(), c]));
    assert_eq!(batch.len(), 2);
    assert!(matches!(
        batch[0],
        Err(Either::Right(Failed("right batch")))
    ));
}

#[test]
fn either_classifier_uses_the_sides_space_and_cells() {
    let two: Either<SyntheticClassifier, SyntheticClassifier> =
        Either::Left(SyntheticClassifier::new(2));
    let five: Either<SyntheticClassifier, SyntheticClassifier> =
        Either::Right(SyntheticClassifier::new(5));
    assert_eq!(two.space().cells(), 8);
    assert_eq!(five.space().cells(), 125);
    let c = synthetic_seed(3);
    let e = Evaluation::failed(Status::Correct, "");
    assert_eq!(
        two.classify(&c, &e).unwrap(),
        SyntheticClassifier::new(2).classify(&c, &e).unwrap()
    );
    assert_eq!(
        five.classify(&c, &e).unwrap(),
        SyntheticClassifier::new(5).classify(&c, &e).unwrap()
    );
}

#[test]
fn box_mutator_forwards_name_needs_mutation_credit_and_error() {
    let mut inner = Named::new("inner");
    inner.needs = Needs::TASK;
    let credited = inner.credited.clone();
    let boxed = inner.boxed_mutator();
    assert_eq!(boxed.name(), "inner");
    assert_eq!(boxed.needs(), Needs::TASK);
    assert_eq!(format!("{boxed:?}"), "BoxMutator(\"inner\")");
    let m = block_on(boxed.mutate(&elite(), &ctx())).unwrap();
    assert_eq!(m.children[0].origin.mutator, "inner");
    boxed.credit(&elite(), &ADDED);
    assert_eq!(credited.load(Ordering::SeqCst), 1);

    let mut failing = Named::new("failing");
    failing.fail = true;
    let err = block_on(BoxMutator::new(failing).mutate(&elite(), &ctx())).unwrap_err();
    assert_eq!(err.to_string(), "failed: failing");
    assert!(err.get_ref().is::<Failed>());
    assert!(err.into_inner().downcast::<Failed>().is_ok());
}

#[test]
fn box_evaluator_forwards_single_and_batch_evaluations() {
    let boxed = Tagged("left").boxed_evaluator();
    let c = synthetic_seed(3);
    assert_eq!(
        block_on(boxed.evaluate(&c)).unwrap().diagnostics,
        "left one"
    );
    let batch = block_on(boxed.evaluate_batch(&[c]));
    assert_eq!(
        batch[0].as_ref().unwrap_err().to_string(),
        "failed: left batch"
    );
}

#[test]
fn box_classifier_forwards_space_and_cells() {
    let boxed = SyntheticClassifier::new(3).boxed_classifier();
    assert_eq!(boxed.space(), SyntheticClassifier::new(3).space());
    let c = synthetic_seed(3);
    let e = Evaluation::failed(Status::Correct, "");
    assert_eq!(
        boxed.classify(&c, &e).unwrap(),
        SyntheticClassifier::new(3).classify(&c, &e).unwrap()
    );
}

#[test]
fn fn_adapters_call_their_functions() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let m = mutator_fn("fn", move |parent: &Elite, ctx: &MutationContext| {
        seen.fetch_add(1, Ordering::SeqCst);
        if ctx.step == 0 {
            return Err(Failed("step 0"));
        }
        Ok(Mutation::free(vec![Offspring::new(
            parent.candidate.source.clone(),
            parent.effective_params(),
            Origin::mutator("fn"),
        )]))
    })
    .with_needs(Needs::TASK);
    assert_eq!((m.name(), m.needs()), ("fn", Needs::TASK));
    assert_eq!(
        block_on(m.mutate(&elite(), &ctx())).unwrap().children.len(),
        1
    );
    let mut step0 = ctx();
    step0.step = 0;
    assert!(block_on(m.mutate(&elite(), &step0)).is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let e = evaluator_fn(|c: &Candidate| {
        Ok::<_, Failed>(Evaluation::failed(Status::Timeout, c.id.to_string()))
    });
    let batch = block_on(e.evaluate_batch(&[synthetic_seed(3), synthetic_seed(4)]));
    assert_eq!(batch.len(), 2);
    assert_eq!(batch[1].as_ref().unwrap().status, Status::Timeout);

    let space = SyntheticClassifier::new(2).space().clone();
    let c = classifier_fn(space.clone(), |_c: &Candidate, _e: &Evaluation| {
        Ok::<_, Failed>(Descriptor::new([1, 0, 1], "fn"))
    });
    assert_eq!(c.space(), &space);
    let d = c
        .classify(&synthetic_seed(3), &Evaluation::failed(Status::Correct, ""))
        .unwrap();
    assert_eq!(d.coords, vec![1, 0, 1]);
}

#[test]
fn boxed_and_either_runs_equal_the_plain_run() {
    fn run<M: Mutator + 'static, E: Evaluator, C: BehaviorClassifier>(
        m: M,
        e: E,
        c: C,
    ) -> crate::RunSummary {
        let archive = VecArchive::new(c.space().clone());
        Engine::new(m, e, c, archive)
            .seeds(vec![synthetic_seed(6)])
            .seed(11)
            .budget(Budget::evaluations(150))
            .run_blocking()
            .unwrap()
            .summary
    }
    let plain = run(
        SyntheticMutator::new(0.15),
        SyntheticEvaluator::new(),
        SyntheticClassifier::new(3),
    );
    let boxed = run(
        SyntheticMutator::new(0.15).boxed_mutator(),
        SyntheticEvaluator::new().boxed_evaluator(),
        SyntheticClassifier::new(3).boxed_classifier(),
    );
    let either = run(
        Either::<Named, SyntheticMutator>::Right(SyntheticMutator::new(0.15)).boxed_mutator(),
        Either::<Tagged, SyntheticEvaluator>::Right(SyntheticEvaluator::new()).boxed_evaluator(),
        Either::<SyntheticClassifier, SyntheticClassifier>::Left(SyntheticClassifier::new(3))
            .boxed_classifier(),
    );
    for other in [&boxed, &either] {
        assert_eq!(other.metrics, plain.metrics);
        assert_eq!(other.evaluations, plain.evaluations);
        let points = |s: &crate::RunSummary| {
            s.history
                .iter()
                .map(|h| (h.evaluations, h.qd_score, h.best))
                .collect::<Vec<_>>()
        };
        assert_eq!(points(other), points(&plain));
    }
}
