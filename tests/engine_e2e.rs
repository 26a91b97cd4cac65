//! End to end: the engine of `kf-core` with the grid archive of `kf-archive` on the synthetic
//! problem of `kf_core::testing`.

use kf_archive::{EliteArchive, GridConfig};
use kf_core::testing::{
    synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, UniformMutator,
};
use kf_core::{Archive, BehaviorClassifier, Budget, Engine, Fitness, Mutator};

const DIMS: usize = 6;
const LEVELS: usize = 4;

fn archive(config: GridConfig) -> EliteArchive {
    EliteArchive::with_config(SyntheticClassifier::new(LEVELS).space().clone(), config).unwrap()
}

fn run<M: Mutator + 'static>(
    mutator: M,
    seed: u64,
    evaluations: u64,
    in_flight: usize,
    config: GridConfig,
) -> EliteArchive {
    Engine::new(
        mutator,
        SyntheticEvaluator::with_levels(LEVELS),
        SyntheticClassifier::new(LEVELS),
        archive(config),
    )
    .seeds(vec![synthetic_seed(DIMS)])
    .seed(seed)
    .budget(Budget::evaluations(evaluations))
    .max_in_flight(in_flight)
    .run_blocking()
    .unwrap()
    .archive
}

fn json(a: &EliteArchive) -> String {
    serde_json::to_string(a).unwrap()
}

#[test]
fn same_seed_same_archive() {
    let config = GridConfig::default();
    let a = run(SyntheticMutator::new(0.1), 42, 500, 1, config);
    let b = run(SyntheticMutator::new(0.1), 42, 500, 1, config);
    assert_eq!(json(&a), json(&b));
    assert_eq!(a, b);
    let c = run(SyntheticMutator::new(0.1), 43, 500, 1, config);
    assert_ne!(json(&a), json(&c), "another seed gives another run");
}

#[test]
fn same_seed_same_archive_with_steps_in_flight() {
    let config = GridConfig::default();
    for in_flight in [2, 4, 7] {
        let a = run(SyntheticMutator::new(0.1), 7, 400, in_flight, config);
        let b = run(SyntheticMutator::new(0.1), 7, 400, in_flight, config);
        assert_eq!(json(&a), json(&b), "max_in_flight = {in_flight}");
        assert_eq!(a.metrics().additions, b.metrics().additions);
    }
}

#[test]
fn map_elites_beats_random_search() {
    let evaluations = 1500;
    let seeds = 0..6u64;
    let mean = |qd: Vec<f64>| qd.iter().sum::<f64>() / qd.len() as f64;
    let score = |a: &EliteArchive| a.metrics().qd_score;
    // Both QD-scores: with offset 0 (every elite counts) and with the offset at the correct
    // rung (only speed counts).
    for offset in [0.0, Fitness::CORRECT_BASE] {
        let config = GridConfig::default().with_qd_offset(offset);
        let map_elites = mean(
            seeds
                .clone()
                .map(|s| score(&run(SyntheticMutator::new(0.08), s, evaluations, 1, config)))
                .collect(),
        );
        let random = mean(
            seeds
                .clone()
                .map(|s| score(&run(UniformMutator::new(DIMS), s, evaluations, 1, config)))
                .collect(),
        );
        println!("offset {offset}: MAP-Elites {map_elites:.3}, random search {random:.3}");
        assert!(
            map_elites > random,
            "offset {offset}: MAP-Elites {map_elites} <= random search {random}"
        );
    }
}

#[test]
fn elites_stay_below_the_known_optimum() {
    let evaluator = SyntheticEvaluator::with_levels(LEVELS);
    let a = run(
        SyntheticMutator::new(0.08),
        3,
        800,
        3,
        GridConfig::default(),
    );
    assert!(a.metrics().filled > 16);
    for e in a.elites() {
        let best = Fitness::CORRECT_BASE + evaluator.optimum(&e.descriptor.coords);
        assert!(e.fitness.value() <= best + 1e-9, "{} > {best}", e.fitness);
        assert_eq!(
            a.index_of(&e.descriptor.coords).ok(),
            Some(a.iter().find(|o| o.payload == e).unwrap().index)
        );
    }
}
