//! Noise-aware elite replacement through the engine-facing `Archive::insert`: a challenger
//! with clearly faster samples replaces the incumbent, one whose samples overlap heavily does
//! not even when its median is lower by luck, and the same inputs give the same decision.

use kf_archive::EliteArchive;
use kf_core::noise::keep_samples;
use kf_core::{
    Archive, Candidate, Descriptor, DescriptorSpace, Dimension, Elite, Evaluation, InsertOutcome,
    KernelSource, Language, ParamValues, TimingStats,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn archive() -> EliteArchive {
    let space = DescriptorSpace::new(vec![Dimension::numbered("d", 2)]).unwrap();
    EliteArchive::new(space).unwrap()
}

/// A correct elite in cell 0 timed with `samples` against a baseline of `baseline` seconds.
fn elite(samples: &[f64], baseline: f64, keep: bool) -> Elite {
    let b = TimingStats::from_samples(&[baseline]);
    let mut evaluation = Evaluation::correct(TimingStats::from_samples(samples).unwrap(), b);
    if keep {
        evaluation.samples = keep_samples(samples);
    }
    Elite {
        candidate: Candidate::seed(
            KernelSource::new(Language::OpenCl, "k", "// test"),
            ParamValues::new(),
        ),
        fitness: evaluation.fitness(),
        evaluation,
        descriptor: Descriptor::new(vec![0], "test"),
    }
}

/// `n` samples around `centre` with relative noise `noise`, from `seed`.
fn noisy(seed: u64, n: usize, centre: f64, noise: f64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| centre * (1.0 + noise * (rng.random::<f64>() - 0.5)))
        .collect()
}

fn offer(incumbent: &Elite, challenger: &Elite) -> InsertOutcome {
    let mut a = archive();
    assert_eq!(a.insert(incumbent.clone()).unwrap(), InsertOutcome::NewCell);
    a.insert(challenger.clone()).unwrap()
}

#[test]
fn lucky_median_does_not_replace_but_real_speedup_does() {
    let inc = noisy(1, 20, 1.0e-3, 0.2);
    // Same distribution, shifted 1% down: a lower median, within the noise.
    let lucky: Vec<f64> = inc.iter().map(|s| s * 0.99).collect();
    let incumbent = elite(&inc, 1.0e-3, true);
    let challenger = elite(&lucky, 1.0e-3, true);
    assert!(challenger.fitness > incumbent.fitness);
    assert!(matches!(
        offer(&incumbent, &challenger),
        InsertOutcome::NotAdded { .. }
    ));
    // Without samples (old run directories), fitness alone decides, as before.
    let old = offer(&elite(&inc, 1.0e-3, false), &elite(&lucky, 1.0e-3, false));
    assert!(matches!(old, InsertOutcome::Improved { .. }));
    // Clearly faster: replaces.
    let fast = elite(&noisy(2, 20, 0.7e-3, 0.2), 1.0e-3, true);
    assert!(matches!(
        offer(&incumbent, &fast),
        InsertOutcome::Improved { .. }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Samples 30% faster with ±5% noise always replace.
    #[test]
    fn clearly_faster_replaces(seed in any::<u64>(), n in 8usize..60, m in 8usize..60) {
        let incumbent = elite(&noisy(seed, n, 1.0e-3, 0.1), 1.0e-3, true);
        let challenger = elite(&noisy(seed ^ 0x5eed, m, 0.7e-3, 0.1), 1.0e-3, true);
        let outcome = offer(&incumbent, &challenger);
        prop_assert!(matches!(outcome, InsertOutcome::Improved { .. }), "{outcome:?}");
    }

    /// The incumbent's own samples, each scaled down by under 2% of a ±25% noise band, never
    /// replace it, though the challenger's median and fitness are higher.
    #[test]
    fn heavy_overlap_does_not_replace(seed in any::<u64>(), n in 8usize..60, shift in 0.001f64..0.02) {
        let inc = noisy(seed, n, 1.0e-3, 0.5);
        let lucky: Vec<f64> = inc.iter().map(|s| s * (1.0 - shift)).collect();
        let incumbent = elite(&inc, 1.0e-3, true);
        let challenger = elite(&lucky, 1.0e-3, true);
        prop_assert!(challenger.fitness > incumbent.fitness);
        let outcome = offer(&incumbent, &challenger);
        prop_assert!(matches!(outcome, InsertOutcome::NotAdded { .. }), "{outcome:?}");
    }

    /// Same inputs, same decision.
    #[test]
    fn deterministic(seed in any::<u64>(), n in 5usize..40, m in 5usize..40, centre in 0.6f64..1.2) {
        let incumbent = elite(&noisy(seed, n, 1.0e-3, 0.3), 1.0e-3, true);
        let challenger = elite(&noisy(seed.wrapping_add(1), m, centre * 1.0e-3, 0.3), 1.0e-3, true);
        prop_assert_eq!(offer(&incumbent, &challenger), offer(&incumbent, &challenger));
    }
}
