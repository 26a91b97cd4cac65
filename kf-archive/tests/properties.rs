//! Property tests of the grid archive's invariants, with `kf_core::testing::VecArchive` as the
//! oracle for insertion outcomes.

use kf_archive::{EliteArchive, GridArchive, GridConfig, SelectionRatios};
use kf_core::testing::VecArchive;
use kf_core::{
    Archive, Candidate, CandidateId, Descriptor, DescriptorSpace, Dimension, Elite, Evaluation,
    Fitness, KernelSource, Language, ParamValues, Status,
};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A space of 2 to 4 dimensions with 1 to 5 levels each.
fn space_strategy() -> impl Strategy<Value = DescriptorSpace> {
    prop::collection::vec(1usize..=5, 2..=4).prop_map(|levels| {
        DescriptorSpace::new(
            levels
                .iter()
                .enumerate()
                .map(|(i, &n)| Dimension::numbered(format!("d{i}"), n))
                .collect(),
        )
        .unwrap()
    })
}

/// Inserts: coordinates (sometimes out of range or of the wrong length) and a fitness from a
/// coarse set, so that ties happen.
fn inserts_strategy() -> impl Strategy<Value = Vec<(Vec<usize>, u32)>> {
    prop::collection::vec((prop::collection::vec(0usize..6, 1..=5), 0u32..40), 0..200)
}

fn fitness(f: u32) -> Fitness {
    Fitness::new(f64::from(f) / 2.0).unwrap()
}

fn elite(id: u64, coords: &[usize], f: u32) -> Elite {
    let source = KernelSource::new(Language::OpenCl, "k", "// test");
    let mut candidate = Candidate::seed(source, ParamValues::new());
    candidate.id = CandidateId(id);
    Elite {
        candidate,
        evaluation: Evaluation::failed(Status::CompileError, ""),
        descriptor: Descriptor::new(coords.to_vec(), "test"),
        fitness: fitness(f),
    }
}

fn config_strategy() -> impl Strategy<Value = GridConfig> {
    (0u32..10, 0u32..10, 0u32..10, 0u32..12, 0usize..6).prop_map(|(a, b, c, offset, recent)| {
        let (a, b, c) = if a + b + c == 0 { (1, 0, 0) } else { (a, b, c) };
        GridConfig::default()
            .with_selection(SelectionRatios::new(a.into(), b.into(), c.into()))
            .with_qd_offset(f64::from(offset) / 2.0)
            .with_recent_capacity(recent)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Outcomes, metrics and elites agree with the naive reference archive.
    #[test]
    fn agrees_with_vec_archive(space in space_strategy(), inserts in inserts_strategy()) {
        let mut grid = EliteArchive::new(space.clone()).unwrap();
        let mut oracle = VecArchive::new(space);
        for (i, (coords, f)) in inserts.iter().enumerate() {
            let e = elite(i as u64, coords, *f);
            let ours = Archive::insert(&mut grid, e.clone());
            let theirs = oracle.insert(e);
            match (ours, theirs) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(_), Err(_)) => {}
                (a, b) => prop_assert!(false, "grid {:?}, oracle {:?}", a, b),
            }
        }
        let (m, o) = (Archive::metrics(&grid), oracle.metrics());
        prop_assert_eq!(m.cells, o.cells);
        prop_assert_eq!(m.filled, o.filled);
        prop_assert_eq!(m.coverage, o.coverage);
        prop_assert_eq!(m.best, o.best);
        prop_assert_eq!(m.additions, o.additions);
        prop_assert!((m.qd_score - o.qd_score).abs() < 1e-9);
        match (m.mean, o.mean) {
            (Some(a), Some(b)) => prop_assert!((a - b).abs() < 1e-9),
            (a, b) => prop_assert_eq!(a, b),
        }
        prop_assert_eq!(grid.elites(), oracle.elites());
    }

    /// No elite is ever replaced by a worse one; coverage and QD-score never decrease; the
    /// incremental metrics match a recomputation.
    #[test]
    fn monotone(space in space_strategy(), config in config_strategy(), inserts in inserts_strategy()) {
        let mut grid: GridArchive<u32> = GridArchive::with_config(space, config).unwrap();
        let mut last = grid.metrics();
        for (coords, f) in &inserts {
            let before = grid.get(coords).ok().flatten().map(|o| o.fitness);
            let outcome = grid.insert_at(coords, fitness(*f), *f);
            let after = grid.get(coords).ok().flatten().map(|o| o.fitness);
            match outcome {
                Err(_) => prop_assert!(before.is_none() && after.is_none() && grid.get(coords).is_err()),
                Ok(o) => {
                    prop_assert!(after >= before);
                    prop_assert_eq!(o.is_added(), after != before || before.is_none());
                }
            }
            let m = grid.metrics();
            prop_assert!(m.coverage >= last.coverage);
            prop_assert!(m.qd_score >= last.qd_score);
            prop_assert!(m.best >= last.best);
            last = m;
        }
        let offset = config.qd_offset;
        let qd: f64 = grid.iter().map(|o| (o.fitness.value() - offset).max(0.0)).sum();
        prop_assert!((qd - last.qd_score).abs() < 1e-9);
        prop_assert_eq!(grid.iter().map(|o| o.fitness).max(), last.best);
        prop_assert_eq!(grid.iter().count(), last.filled);
    }

    /// Selection never returns an empty cell, and only `None` when the archive is empty;
    /// inspirations are distinct filled cells other than the parent's.
    #[test]
    fn selection_is_sound(space in space_strategy(), config in config_strategy(),
                          inserts in inserts_strategy(), seed in any::<u64>()) {
        let mut grid: GridArchive<u32> = GridArchive::with_config(space, config).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for (coords, f) in &inserts {
            let _ = grid.insert_at(coords, fitness(*f), *f);
            match grid.select(&mut rng) {
                None => prop_assert!(grid.is_empty()),
                Some(s) => {
                    let o = grid.get_index(s.occupant.index);
                    prop_assert_eq!(o, Some(s.occupant));
                }
            }
            let exclude = grid.filled_indices().first().copied();
            let picks = grid.inspiration_indices(&mut rng, exclude, 3);
            prop_assert_eq!(picks.len(), 3.min(grid.len() - usize::from(exclude.is_some())));
            for (k, p) in picks.iter().enumerate() {
                prop_assert!(Some(*p) != exclude);
                prop_assert!(grid.get_index(*p).is_some());
                prop_assert!(!picks[..k].contains(p));
            }
        }
    }

    /// Hints: the frontier holds empty cells next to filled ones, nearest first; recently
    /// improved cells are filled.
    #[test]
    fn hints_are_sound(space in space_strategy(), inserts in inserts_strategy(), near_seed in any::<u64>()) {
        let mut grid: GridArchive<u32> = GridArchive::new(space.clone()).unwrap();
        for (coords, f) in &inserts {
            let _ = grid.insert_at(coords, fitness(*f), *f);
        }
        let shape = space.shape();
        let near: Vec<usize> = shape.iter().enumerate().map(|(i, n)| (near_seed as usize >> (i * 3)) % n).collect();
        let hints = grid.hints(Some(&near));
        prop_assert!(hints.empty_frontier.len() <= grid.config().hint_cap);
        let distance = |c: &[usize]| c.iter().zip(&near).map(|(a, b)| a.abs_diff(*b)).sum::<usize>();
        for w in hints.empty_frontier.windows(2) {
            prop_assert!(distance(&w[0]) <= distance(&w[1]));
        }
        for c in &hints.empty_frontier {
            prop_assert!(grid.get(c).unwrap().is_none());
            let has_filled_neighbour = (0..c.len()).any(|d| {
                [c[d].wrapping_sub(1), c[d] + 1].iter().any(|&l| {
                    let mut n = c.clone();
                    n[d] = l;
                    grid.get(&n).ok().flatten().is_some()
                })
            });
            prop_assert!(has_filled_neighbour);
        }
        for c in &hints.recently_improved {
            prop_assert!(grid.get(c).unwrap().is_some());
        }
        if grid.is_empty() {
            prop_assert!(hints.empty_frontier.is_empty());
        }
    }

    /// Serializing and deserializing is the identity, and the restored archive behaves the same
    /// (same selections from the same random stream, same outcomes afterwards).
    #[test]
    fn snapshot_roundtrip(space in space_strategy(), config in config_strategy(),
                          inserts in inserts_strategy(), more in inserts_strategy(), seed in any::<u64>()) {
        let mut grid = EliteArchive::with_config(space, config).unwrap();
        for (i, (coords, f)) in inserts.iter().enumerate() {
            let _ = Archive::insert(&mut grid, elite(i as u64, coords, *f));
        }
        let json = serde_json::to_string(&grid).unwrap();
        let mut back: EliteArchive = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &grid);
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), json);
        let (mut r1, mut r2) = (ChaCha8Rng::seed_from_u64(seed), ChaCha8Rng::seed_from_u64(seed));
        for (i, (coords, f)) in more.iter().enumerate() {
            let a = grid.select(&mut r1).map(|s| s.occupant.index);
            let b = back.select(&mut r2).map(|s| s.occupant.index);
            prop_assert_eq!(a, b);
            let e = elite(1000 + i as u64, coords, *f);
            prop_assert_eq!(Archive::insert(&mut grid, e.clone()).ok(), Archive::insert(&mut back, e).ok());
        }
        prop_assert_eq!(back, grid);
    }
}

#[test]
fn tampered_snapshots_are_refused() {
    let mut grid: GridArchive<u32> = GridArchive::new(DescriptorSpace::kernel_default()).unwrap();
    grid.insert_at(&[1, 2, 3], fitness(10), 1).unwrap();
    grid.insert_at(&[0, 0, 0], fitness(4), 2).unwrap();
    let good = serde_json::to_value(&grid).unwrap();
    let tamper = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        f(&mut v);
        serde_json::from_value::<GridArchive<u32>>(v)
    };
    assert!(tamper(&|_| {}).is_ok());
    assert!(tamper(&|v| v["cells"][0]["coords"] = serde_json::json!([1, 2, 4])).is_err());
    assert!(tamper(&|v| v["cells"][1]["coords"] = serde_json::json!([1, 2, 3])).is_err());
    assert!(tamper(&|v| v["cells"][0]["fitness"] = serde_json::json!(-1.0)).is_err());
    assert!(tamper(&|v| v["qd_score"] = serde_json::json!(100.0)).is_err());
    assert!(tamper(&|v| v["best"] = serde_json::json!(0)).is_err());
    assert!(tamper(&|v| v["recent"] = serde_json::json!([5])).is_err());
    assert!(tamper(&|v| v["config"]["selection"]["exploit"] = serde_json::json!(-1.0)).is_err());
    assert!(tamper(&|v| v["space"]["dimensions"] = serde_json::json!([])).is_err());
}

#[test]
fn bad_coordinates_are_typed_errors() {
    let mut grid: GridArchive<u8> = GridArchive::new(DescriptorSpace::kernel_default()).unwrap();
    use kf_archive::ArchiveError;
    assert!(matches!(
        grid.insert_at(&[0, 0], fitness(1), 0),
        Err(ArchiveError::DimensionMismatch { expected: 3, .. })
    ));
    assert!(matches!(
        grid.insert_at(&[0, 4, 0], fitness(1), 0),
        Err(ArchiveError::OutOfRange {
            dimension: 1,
            level: 4,
            levels: 4,
            ..
        })
    ));
    assert!(matches!(
        grid.insert_index(64, fitness(1), 0),
        Err(ArchiveError::IndexOutOfRange {
            index: 64,
            cells: 64
        })
    ));
    assert!(grid.coords_of(64).is_err());
    assert_eq!(grid.coords_of(27).unwrap(), vec![1, 2, 3]);
    assert_eq!(grid.index_of(&[1, 2, 3]).unwrap(), 27);
    assert!(GridArchive::<u8>::with_config(
        DescriptorSpace::kernel_default(),
        GridConfig::default().with_qd_offset(f64::NAN)
    )
    .is_err());
    assert!(GridArchive::<u8>::with_config(
        DescriptorSpace::kernel_default(),
        GridConfig::default().with_selection(SelectionRatios::new(0.0, 0.0, 0.0))
    )
    .is_err());
    assert!(GridArchive::<u8>::new(DescriptorSpace { dimensions: vec![] }).is_err());
}

#[test]
fn selection_follows_the_ratios() {
    use kf_archive::SelectionMode;
    let mut grid: GridArchive<u32> = GridArchive::new(DescriptorSpace::kernel_default()).unwrap();
    for i in 0..64u32 {
        let coords = grid.coords_of(i as usize).unwrap();
        grid.insert_at(&coords, fitness(i % 8), i).unwrap();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut counts = [0usize; 3];
    let mut exploit_fitness = 0.0;
    let mut exploit_n = 0.0;
    let n = 20_000;
    for _ in 0..n {
        let s = grid.select(&mut rng).unwrap();
        match s.mode {
            SelectionMode::Exploit => {
                counts[0] += 1;
                exploit_fitness += s.occupant.fitness.value();
                exploit_n += 1.0;
            }
            SelectionMode::Explore => counts[1] += 1,
            SelectionMode::Random => counts[2] += 1,
        }
    }
    let share = |c: usize| c as f64 / n as f64;
    assert!((share(counts[0]) - 0.7).abs() < 0.02, "{counts:?}");
    assert!((share(counts[1]) - 0.2).abs() < 0.02, "{counts:?}");
    assert!((share(counts[2]) - 0.1).abs() < 0.02, "{counts:?}");
    // Fitness-proportional over values 0, 0.5, …, 3.5: E[f] = Σf² / Σf = 2.5.
    let mean = exploit_fitness / exploit_n;
    assert!((mean - 2.5).abs() < 0.05, "mean exploited fitness {mean}");
}

#[test]
fn hints_order_and_recent() {
    let mut grid: GridArchive<u32> = GridArchive::new(DescriptorSpace::kernel_default()).unwrap();
    grid.insert_at(&[0, 0, 0], fitness(2), 0).unwrap();
    grid.insert_at(&[3, 3, 3], fitness(2), 1).unwrap();
    grid.insert_at(&[0, 0, 0], fitness(4), 2).unwrap();
    let hints = grid.hints(Some(&[3, 3, 3]));
    assert_eq!(hints.recently_improved, vec![vec![0, 0, 0], vec![3, 3, 3]]);
    assert_eq!(hints.empty_frontier.len(), 6);
    assert_eq!(
        &hints.empty_frontier[..3],
        &[vec![2, 3, 3], vec![3, 2, 3], vec![3, 3, 2]]
    );
    assert!(hints.space.is_some());
    assert_eq!(hints.metrics.filled, 2);
}
