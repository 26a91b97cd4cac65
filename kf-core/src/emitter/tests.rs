use super::*;
use crate::checkpoint::StepRecord;
use crate::compose::BoxMutator;
use crate::engine::{Budget, HistoryPoint};
use crate::error::CoreError;
use crate::test_support::{Barren, Shared};
use crate::testing::{
    synthetic_emitters, synthetic_seed, SyntheticClassifier, SyntheticEvaluator, UniformMutator,
    VecArchive,
};
use crate::traits::archive::{Archive, Elite, InsertOutcome};
use crate::traits::classifier::BehaviorClassifier;
use crate::Engine;

struct Outcome {
    history: Vec<HistoryPoint>,
    elites: Vec<Elite>,
    stats: Vec<EmitterStats>,
    records: Vec<StepRecord>,
}

fn run(
    policy: SchedulerPolicy,
    seed: u64,
    in_flight: usize,
    evaluations: u64,
    recorded: Vec<StepRecord>,
) -> Result<Outcome, CoreError> {
    let classifier = SyntheticClassifier::new(4);
    let archive = VecArchive::new(classifier.space().clone());
    let scheduler = Scheduler::new(synthetic_emitters(), policy)?;
    let checkpoint = Shared::holding(recorded);
    let engine = Engine::new(scheduler, SyntheticEvaluator::new(), classifier, archive)
        .seeds(vec![synthetic_seed(5)])
        .seed(seed)
        .budget(Budget::evaluations(evaluations))
        .max_in_flight(in_flight)
        .checkpoint(checkpoint.clone());
    let handle = engine.scheduler();
    let result = engine.run_blocking()?;
    let records = checkpoint.records();
    Ok(Outcome {
        history: result.summary.history,
        elites: result.archive.elites().into_iter().cloned().collect(),
        stats: handle.stats(),
        records,
    })
}

/// History without wall-clock times.
fn trace(h: &[HistoryPoint]) -> Vec<(u64, f64, f64)> {
    h.iter()
        .map(|p| (p.evaluations, p.qd_score, p.coverage))
        .collect()
}

#[test]
fn a_seeded_scheduled_run_is_reproducible_bit_for_bit() {
    for in_flight in [1, 3] {
        let a = run(SchedulerPolicy::default(), 5, in_flight, 150, Vec::new()).unwrap();
        let b = run(SchedulerPolicy::default(), 5, in_flight, 150, Vec::new()).unwrap();
        assert_eq!(trace(&a.history), trace(&b.history));
        assert_eq!(a.elites, b.elites);
        assert_eq!(a.stats, b.stats);
        assert_eq!(a.records, b.records);
        let c = run(SchedulerPolicy::default(), 6, in_flight, 150, Vec::new()).unwrap();
        assert_ne!(a.records, c.records, "another seed, another run");
        // Every step but the seed's names its emitter, and the bandit tried all three.
        assert!(a.records[1..].iter().all(|r| r.emitter.is_some()));
        assert!(a.stats.iter().all(|s| s.steps > 0), "{:?}", a.stats);
        let credited: u64 = a.stats.iter().map(|s| s.children).sum();
        assert_eq!(credited, 149);
    }
}

#[test]
fn a_resumed_run_rebuilds_the_scheduler_and_ends_where_an_uninterrupted_one_does() {
    let full = run(SchedulerPolicy::default(), 9, 3, 160, Vec::new()).unwrap();
    for cut in [1, 17, 60, full.records.len() - 1] {
        // A run killed after `cut` steps left their records; the rest is computed.
        let prefix = full.records[..cut].to_vec();
        let resumed = run(SchedulerPolicy::default(), 9, 3, 160, prefix).unwrap();
        assert_eq!(resumed.records, full.records, "cut at {cut}");
        assert_eq!(resumed.stats, full.stats, "cut at {cut}");
        assert_eq!(resumed.elites, full.elites, "cut at {cut}");
        assert_eq!(trace(&resumed.history), trace(&full.history));
    }
}

#[test]
fn a_resume_whose_scheduler_would_choose_another_emitter_is_refused() {
    let full = run(SchedulerPolicy::default(), 9, 1, 80, Vec::new()).unwrap();
    let fixed = SchedulerPolicy::Fixed {
        weights: vec![1.0, 1.0, 1.0],
    };
    let err = run(fixed, 9, 1, 80, full.records.clone()).err();
    assert!(
        matches!(&err, Some(CoreError::ResumeMismatch { .. })),
        "{err:?}"
    );
    let mut edited = full.records;
    edited[5].emitter = Some("another".into());
    let err = run(SchedulerPolicy::default(), 9, 1, 80, edited).err();
    assert!(
        matches!(&err, Some(CoreError::ResumeMismatch { step: 5, what }) if what.contains("emitted by")),
        "{err:?}"
    );
}

#[test]
fn the_bandit_learns_to_avoid_an_emitter_that_proposes_nothing() {
    let classifier = SyntheticClassifier::new(4);
    let archive = VecArchive::new(classifier.space().clone());
    let emitters: Vec<Box<dyn Emitter>> = vec![
        Box::new(SelectionEmitter::archive(BoxMutator::new(Barren))),
        Box::new(SelectionEmitter::archive(BoxMutator::new(
            UniformMutator::new(3),
        ))),
    ];
    let scheduler = Scheduler::bandit(emitters).unwrap();
    let engine = Engine::new(scheduler, SyntheticEvaluator::new(), classifier, archive)
        .seeds(vec![synthetic_seed(3)])
        .seed(1)
        .budget(Budget::evaluations(200));
    let handle = engine.scheduler();
    let result = engine.run_blocking().unwrap();
    assert_eq!(result.summary.evaluations, 200);
    let stats = handle.stats();
    assert_eq!(stats[0].children, 0);
    assert!(
        stats[0].steps * 5 < stats[1].steps,
        "the barren emitter should get few steps: {stats:?}"
    );
}

#[test]
fn fixed_weights_choose_emitters_in_proportion() {
    let out = run(
        SchedulerPolicy::Fixed {
            weights: vec![6.0, 3.0, 1.0],
        },
        2,
        1,
        1_001,
        Vec::new(),
    )
    .unwrap();
    let steps: Vec<u64> = out.stats.iter().map(|s| s.steps).collect();
    assert_eq!(steps.iter().sum::<u64>(), 1_000);
    // 600 / 300 / 100 expected; binomial spread is about ±15, ±14, ±9.
    assert!((540..=660).contains(&steps[0]), "{steps:?}");
    assert!((250..=350).contains(&steps[1]), "{steps:?}");
    assert!((60..=140).contains(&steps[2]), "{steps:?}");
}

#[test]
fn bad_scheduler_configurations_are_refused() {
    let cases = [
        Scheduler::new(Vec::new(), SchedulerPolicy::default()).err(),
        Scheduler::new(
            synthetic_emitters(),
            SchedulerPolicy::Fixed {
                weights: vec![1.0, 2.0],
            },
        )
        .err(),
        Scheduler::new(
            synthetic_emitters(),
            SchedulerPolicy::Fixed {
                weights: vec![1.0, 0.0, 2.0],
            },
        )
        .err(),
        Scheduler::new(
            synthetic_emitters(),
            SchedulerPolicy::Ucb {
                exploration: 0.5,
                discount: 0.0,
            },
        )
        .err(),
        Scheduler::new(
            vec![
                Box::new(SelectionEmitter::archive(BoxMutator::new(Barren))),
                Box::new(SelectionEmitter::archive(BoxMutator::new(Barren))),
            ],
            SchedulerPolicy::default(),
        )
        .err(),
    ];
    for (i, err) in cases.into_iter().enumerate() {
        assert!(
            matches!(err, Some(CoreError::InvalidConfig(_))),
            "case {i}: {err:?}"
        );
    }
}

#[test]
fn the_frontier_is_the_elites_next_to_an_empty_cell() {
    let classifier = SyntheticClassifier::new(2);
    let mut archive = VecArchive::new(classifier.space().clone());
    let evaluator = SyntheticEvaluator::with_levels(2);
    let mut insert = |x: [f64; 3]| {
        let c = crate::Candidate::seed(
            crate::KernelSource::new(crate::Language::OpenCl, "s", ""),
            x.iter()
                .enumerate()
                .map(|(i, v)| (format!("X{i}"), crate::ParamValue::Float(*v)))
                .collect(),
        );
        let e = futures::executor::block_on(crate::Evaluator::evaluate(&evaluator, &c)).unwrap();
        let d = classifier.classify(&c, &e).unwrap();
        let fitness = crate::Fitness::of(&e);
        crate::Archive::insert(
            &mut archive,
            Elite {
                candidate: c,
                evaluation: e,
                descriptor: d,
                fitness,
            },
        )
        .unwrap();
    };
    // Fill every cell of the 2×2×2 grid but (1,1,1).
    for i in 0..7 {
        insert([
            0.25 + 0.5 * f64::from(i & 1),
            0.25 + 0.5 * f64::from((i >> 1) & 1),
            0.25 + 0.5 * f64::from((i >> 2) & 1),
        ]);
    }
    let view = ArchiveView {
        space: crate::Archive::space(&archive),
        elites: crate::Archive::elites(&archive),
        metrics: crate::Archive::metrics(&archive),
    };
    let mut frontier: Vec<Vec<usize>> = view
        .frontier()
        .into_iter()
        .map(|i| view.elites[i].descriptor.coords.clone())
        .collect();
    frontier.sort();
    assert_eq!(frontier, vec![vec![0, 1, 1], vec![1, 0, 1], vec![1, 1, 0]]);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn outcome() -> impl Strategy<Value = Option<InsertOutcome>> {
        prop_oneof![
            Just(None),
            Just(Some(InsertOutcome::NewCell)),
            (0.0f64..5.0).prop_map(|g| Some(InsertOutcome::Improved {
                previous: crate::Fitness::MIN,
                gain: g
            })),
            Just(Some(InsertOutcome::NotAdded {
                incumbent: crate::Fitness::MIN
            })),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the credits, the bandit's statistics stay sane: counts add up, every mean
        /// reward lies in [0, 1], and every choice is one of the emitters.
        #[test]
        fn bandit_statistics_stay_in_range(
            credits in proptest::collection::vec(
                (0usize..3, outcome(), -1.0f64..100.0, prop_oneof![Just(0.0), 0.0f64..10.0, Just(f64::NAN)]),
                0..200,
            ),
            discount in 0.5f64..=1.0,
            seed in any::<u64>(),
        ) {
            let scheduler = Scheduler::new(
                synthetic_emitters(),
                SchedulerPolicy::Ucb { exploration: 0.5, discount },
            ).unwrap();
            for (arm, outcome, gain, device) in &credits {
                scheduler.credit(*arm, None, EmitterCredit {
                    outcome: *outcome,
                    qd_gain: *gain,
                    device_seconds: *device,
                    child: true,
                });
            }
            let stats = scheduler.stats();
            let children: u64 = stats.iter().map(|s| s.children).sum();
            prop_assert_eq!(children, credits.len() as u64);
            for s in &stats {
                prop_assert!((0.0..=1.0).contains(&s.mean_reward()), "{:?}", s);
                prop_assert!(s.weight >= 0.0 && s.weight <= s.children as f64 + 1e-9);
                prop_assert!(s.qd_gain >= 0.0);
                prop_assert!(s.new_cells + s.improved <= s.children);
            }
            let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed);
            let state = scheduler.lock();
            prop_assert!(scheduler.choose_emitter(&state, &mut rng) < 3);
        }
    }
}
