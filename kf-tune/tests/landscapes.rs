//! The landscape benchmark's ranking, small: on every synthetic landscape kind the default
//! strategy finds better configurations than random sampling, in the mean over a few seeds at
//! 2% of the valid configurations. Deterministic (seeded landscapes, seeded tuner); the full table with every
//! strategy and budget is `cargo run --release -p kf-tune --example landscapes`.

use kf_tune::synthetic::LandscapeKind;
use kf_tune::{strategy, Replay};

fn mean_score(kind: LandscapeKind, name: &str, seeds: std::ops::Range<u64>) -> f64 {
    let n = seeds.end - seeds.start;
    let mut total = 0.0;
    for seed in seeds {
        let replay = Replay::from_cache(kind.build(seed)).expect("a synthetic cache replays");
        let budget = replay.valid() / 50;
        let mut s = strategy::by_name(name).expect("built-in strategy");
        let result = replay.run(s.as_mut(), budget, seed).expect("replay runs");
        assert!(result.evaluations <= budget);
        total += replay.score(&result);
    }
    total / n as f64
}

#[test]
fn the_default_beats_random_sampling_on_every_synthetic_kind() {
    for kind in LandscapeKind::ALL {
        let default = mean_score(kind, "default", 0..6);
        let random = mean_score(kind, "random", 0..6);
        assert!(
            default > random,
            "{kind}: default {default:.3} is not ahead of random {random:.3}"
        );
    }
}
