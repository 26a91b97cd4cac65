//! Property tests of the CVT and island archives' invariants, reproducibility for a seed, and
//! their snapshots.

use kf_archive::{
    CvtArchive, CvtConfig, EliteArchive, Feature, FeatureSpace, GridConfig, IslandArchive,
    IslandConfig, CENTROIDS_FILE,
};
use kf_core::testing::VecArchive;
use kf_core::{
    Archive, Candidate, CandidateId, Descriptor, DescriptorSpace, Dimension, Elite, Evaluation,
    Fitness, InsertOutcome, KernelSource, Language, ParamValues, Status,
};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn fitness(f: u32) -> Fitness {
    Fitness::new(f64::from(f) / 2.0).unwrap()
}

fn elite(id: u64, parent: Option<u64>, coords: &[usize], features: &[f64], f: u32) -> Elite {
    let source = KernelSource::new(Language::OpenCl, "k", "// test");
    let mut candidate = Candidate::seed(source, ParamValues::new());
    candidate.id = CandidateId(id);
    candidate.parents = parent.map(CandidateId).into_iter().collect();
    Elite {
        candidate,
        evaluation: Evaluation::failed(Status::CompileError, ""),
        descriptor: Descriptor::new(coords.to_vec(), "test").with_features(features.to_vec()),
        fitness: fitness(f),
    }
}

/// Two to three features with ranges of different scales.
fn features_strategy() -> impl Strategy<Value = FeatureSpace> {
    prop::collection::vec((-4i32..4, 1u32..5), 2..=3).prop_map(|ranges| {
        FeatureSpace::new(
            ranges
                .iter()
                .enumerate()
                .map(|(i, &(low, width))| {
                    let low = f64::from(low) * 10.0;
                    Feature::new(format!("f{i}"), low, low + f64::from(width) * 10.0)
                })
                .collect(),
        )
        .unwrap()
    })
}

/// Feature points (inside, outside the ranges, or with a NaN or a wrong length) and fitness.
fn points_strategy() -> impl Strategy<Value = Vec<(Vec<f64>, u32)>> {
    let value = prop_oneof![
        8 => -60.0f64..60.0,
        1 => Just(f64::NAN),
    ];
    prop::collection::vec((prop::collection::vec(value, 1..=4), 0u32..30), 0..150)
}

/// The centroid nearest `x` by brute force over the archive's centroids in feature units,
/// with each feature scaled to its range and clamped to it.
fn oracle_nearest(archive: &CvtArchive, x: &[f64]) -> Option<usize> {
    let f = &archive.features().features;
    if x.len() != f.len() || x.iter().any(|v| v.is_nan()) {
        return None;
    }
    let unit = |i: usize, v: f64| ((v - f[i].low) / (f[i].high - f[i].low)).clamp(0.0, 1.0);
    let mut best = (f64::INFINITY, usize::MAX);
    for c in 0..archive.num_centroids() {
        let centroid = archive.centroid(c).unwrap();
        let d: f64 = (0..f.len())
            .map(|i| (unit(i, x[i]) - unit(i, centroid[i])).powi(2))
            .sum();
        if d < best.0 {
            best = (d, c);
        }
    }
    Some(best.1)
}

fn small_cvt(features: FeatureSpace, k: usize, seed: u64, offset: u32) -> CvtArchive {
    let config = CvtConfig {
        centroids: k,
        samples_per_centroid: 20,
        iterations: 20,
        seed,
        grid: GridConfig::default().with_qd_offset(f64::from(offset) / 2.0),
    };
    CvtArchive::new(features, config).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One elite per centroid; each the first of the fittest inserted with that nearest
    /// centroid; outcomes and QD metrics consistent with that; bad features refused.
    #[test]
    fn cvt_keeps_the_best_per_nearest_centroid(
        features in features_strategy(),
        k in 1usize..24,
        seed in 0u64..1000,
        offset in 0u32..10,
        points in points_strategy(),
    ) {
        let mut archive = small_cvt(features, k, seed, offset);
        let mut best: Vec<Option<(u32, u64)>> = vec![None; k];
        for (i, (x, f)) in points.iter().enumerate() {
            let id = i as u64;
            let result = archive.insert(elite(id, None, &[0], x, *f));
            match oracle_nearest(&archive, x) {
                None => prop_assert!(result.is_err(), "{x:?} accepted"),
                Some(c) => {
                    let outcome = result.unwrap();
                    let expected = match best[c] {
                        None => InsertOutcome::NewCell,
                        Some((g, _)) if *f > g => InsertOutcome::Improved {
                            previous: fitness(g),
                            gain: fitness(*f).value() - fitness(g).value(),
                        },
                        Some((g, _)) => InsertOutcome::NotAdded { incumbent: fitness(g) },
                    };
                    prop_assert_eq!(outcome, expected);
                    if outcome.is_added() {
                        best[c] = Some((*f, id));
                    }
                }
            }
        }
        let m = archive.metrics();
        let filled: Vec<(usize, (u32, u64))> =
            best.iter().enumerate().filter_map(|(c, b)| b.map(|b| (c, b))).collect();
        prop_assert_eq!(m.cells, k);
        prop_assert_eq!(m.filled, filled.len());
        prop_assert_eq!(archive.elites().len(), filled.len());
        prop_assert!((m.coverage - filled.len() as f64 / k as f64).abs() < 1e-12);
        let off = f64::from(offset) / 2.0;
        let qd: f64 = filled.iter().map(|(_, (f, _))| (fitness(*f).value() - off).max(0.0)).sum();
        prop_assert!((m.qd_score - qd).abs() < 1e-9, "{} vs {qd}", m.qd_score);
        prop_assert_eq!(m.best, filled.iter().map(|(_, (f, _))| fitness(*f)).max());
        for (c, (f, id)) in &filled {
            let e = archive.get(*c).unwrap();
            prop_assert_eq!(e.candidate.id, CandidateId(*id));
            prop_assert_eq!(e.fitness, fitness(*f));
            prop_assert_eq!(oracle_nearest(&archive, &e.descriptor.features), Some(*c));
        }
        // A snapshot reads back equal, and selection never returns nothing from a filled one.
        let json = serde_json::to_string(&archive).unwrap();
        let back: CvtArchive = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &archive);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        prop_assert_eq!(archive.select_parent(&mut rng).is_some(), !filled.is_empty());
    }

    /// The same features, configuration and seed give the same centroids; they lie in the
    /// ranges and are distinct.
    #[test]
    fn cvt_centroids_are_reproducible(features in features_strategy(), k in 1usize..24, seed in 0u64..1000) {
        let a = small_cvt(features.clone(), k, seed, 0);
        let b = small_cvt(features.clone(), k, seed, 0);
        prop_assert_eq!(&a, &b);
        let centroids: Vec<Vec<f64>> = (0..k).map(|c| a.centroid(c).unwrap()).collect();
        for c in &centroids {
            for (v, f) in c.iter().zip(&features.features) {
                prop_assert!((f.low..=f.high).contains(v), "{v} outside {f:?}");
            }
        }
        for i in 0..k {
            for j in 0..i {
                prop_assert_ne!(&centroids[i], &centroids[j]);
            }
        }
        // Built from its centroids, the archive is the same one.
        let again = CvtArchive::with_centroids(features, *a.config(), &centroids).unwrap();
        for c in 0..k {
            let (x, y) = (a.centroid(c).unwrap(), again.centroid(c).unwrap());
            for (p, q) in x.iter().zip(&y) {
                prop_assert!((p - q).abs() < 1e-9);
            }
        }
    }

    /// Islands: the union is exactly a grid fed every insertion; every island's elites are
    /// elites of their cells no better than the union's; the state is a function of the
    /// insertions and reads back from its snapshot.
    #[test]
    fn islands_union_is_the_best_of_everything(
        n in 1usize..5,
        interval in 0u64..12,
        migrants in 0usize..3,
        stagnation in 0u64..10,
        inserts in prop::collection::vec((0usize..3, 0usize..3, 0u32..30, any::<prop::sample::Index>()), 1..150),
    ) {
        let space = DescriptorSpace::new(vec![Dimension::numbered("a", 3), Dimension::numbered("b", 3)]).unwrap();
        let config = IslandConfig {
            islands: n,
            migration_interval: interval,
            migrants,
            stagnation,
            reseed_elites: 2,
        };
        let build = || IslandArchive::new(EliteArchive::new(space.clone()).unwrap(), config).unwrap();
        let mut islands = build();
        let mut twin = build();
        let mut oracle = VecArchive::new(space.clone());
        for (i, (a, b, f, parent)) in inserts.iter().enumerate() {
            // The first is a seed; the others children of an earlier candidate.
            let parent = (i > 0).then(|| parent.index(i) as u64);
            let e = elite(i as u64, parent, &[*a, *b], &[], *f);
            let o1 = islands.insert(e.clone()).unwrap();
            let o2 = twin.insert(e.clone()).unwrap();
            prop_assert_eq!(o1, o2);
            oracle.insert(e).unwrap();
        }
        prop_assert_eq!(&islands, &twin);
        let (m, o) = (islands.metrics(), oracle.metrics());
        prop_assert_eq!(m.filled, o.filled);
        prop_assert_eq!(m.best, o.best);
        prop_assert!((m.qd_score - o.qd_score).abs() < 1e-9);
        let union: Vec<(Vec<usize>, Fitness)> =
            islands.elites().iter().map(|e| (e.descriptor.coords.clone(), e.fitness)).collect();
        let expected: Vec<(Vec<usize>, Fitness)> =
            oracle.elites().iter().map(|e| (e.descriptor.coords.clone(), e.fitness)).collect();
        prop_assert_eq!(union, expected);
        prop_assert_eq!(islands.islands().len(), n);
        for island in islands.islands() {
            prop_assert!(island.metrics().filled <= m.filled);
            for e in island.elites() {
                let top = oracle.elites().into_iter().find(|u| u.descriptor.coords == e.descriptor.coords);
                prop_assert!(top.is_some_and(|u| u.fitness >= e.fitness));
            }
        }
        if interval > 0 && n > 1 && migrants > 0 {
            prop_assert_eq!(islands.migrations(), inserts.len() as u64 / interval);
        }
        let json = serde_json::to_string(&islands).unwrap();
        let back: IslandArchive<EliteArchive> = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &islands);
    }
}

#[test]
fn bad_configurations_are_errors() {
    let unit = FeatureSpace::unit(2).unwrap();
    assert!(CvtArchive::new(unit.clone(), CvtConfig::default().with_centroids(0)).is_err());
    assert!(FeatureSpace::new(vec![Feature::new("x", 1.0, 1.0)]).is_err());
    assert!(FeatureSpace::new(vec![]).is_err());
    let grid = EliteArchive::new(DescriptorSpace::kernel_default()).unwrap();
    assert!(IslandArchive::new(grid.clone(), IslandConfig::default().with_islands(0)).is_err());
    let mut filled = grid;
    Archive::insert(&mut filled, elite(0, None, &[0, 0, 0], &[], 3)).unwrap();
    assert!(IslandArchive::new(filled, IslandConfig::default()).is_err());
}

#[test]
fn a_different_seed_gives_other_centroids() {
    let unit = FeatureSpace::unit(3).unwrap();
    let a = CvtArchive::new(unit.clone(), CvtConfig::default().with_seed(1)).unwrap();
    let b = CvtArchive::new(unit, CvtConfig::default().with_seed(2)).unwrap();
    assert_ne!(a.centroid(0), b.centroid(0));
}

#[test]
fn a_snapshot_with_an_elite_away_from_its_centroid_is_refused() {
    let unit = FeatureSpace::unit(2).unwrap();
    let mut a = CvtArchive::new(unit, CvtConfig::default().with_centroids(8)).unwrap();
    a.insert(elite(0, None, &[0], &[0.0, 0.0], 4)).unwrap();
    let mut json: serde_json::Value = serde_json::to_value(&a).unwrap();
    json["grid"]["cells"][0]["payload"]["descriptor"]["features"] = serde_json::json!([1.0, 1.0]);
    let err = serde_json::from_value::<CvtArchive>(json).unwrap_err();
    assert!(err.to_string().contains("nearest"), "{err}");
}

#[test]
fn centroids_are_kept_in_the_run_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let features = FeatureSpace::unit(3).unwrap();
    let config = CvtConfig::default().with_centroids(16).with_seed(5);
    let first = CvtArchive::in_run_dir(tmp.path(), features.clone(), config).unwrap();
    assert!(tmp.path().join(CENTROIDS_FILE).exists());
    // Centroids written by another k-means (here: edited) are the ones a resumed run uses.
    let path = tmp.path().join(CENTROIDS_FILE);
    let mut file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    file["centroids"][0] = serde_json::json!([0.125, 0.25, 0.5]);
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    let resumed = CvtArchive::in_run_dir(tmp.path(), features.clone(), config).unwrap();
    assert_eq!(resumed.centroid(0), Some(vec![0.125, 0.25, 0.5]));
    assert_eq!(resumed.centroid(1), first.centroid(1));
    // Another configuration is refused rather than silently recomputed.
    let err = CvtArchive::in_run_dir(tmp.path(), features, config.with_seed(6)).unwrap_err();
    assert!(
        matches!(err, kf_archive::ArchiveError::CentroidMismatch { .. }),
        "{err}"
    );
}
