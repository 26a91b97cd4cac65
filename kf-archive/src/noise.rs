//! Noise-aware elite replacement: the archive's use of [`kf_core::noise::ReplacementRule`].
//!
//! A challenger replaces the elite of its cell only when its fitness is higher **and**, where
//! both kept their timing samples, a one-sided Mann–Whitney U test at α = 0.05 says it is
//! faster (relative to each evaluation's baseline when both measured it). Where either lacks
//! samples (run directories written before samples were kept, synthetic problems) or either
//! is not correct, the fitness comparison alone decides, as before. The rule is a pure
//! function of the two evaluations, so replays and resumed runs make the same decisions.

use kf_core::noise::ReplacementRule;
use kf_core::Elite;

/// Whether `challenger` may replace `incumbent` in its cell: higher fitness, and, when the
/// default [`ReplacementRule`] applies to the pair, faster with confidence.
///
/// ```
/// use kf_archive::noise::replaces;
/// use kf_core::prelude::*;
///
/// let elite = |samples: &[f64]| {
///     let mut evaluation = Evaluation::correct(TimingStats::from_samples(samples).unwrap(), None);
///     evaluation.samples = kf_core::noise::keep_samples(samples);
///     let source = KernelSource::new(Language::OpenCl, "k", "");
///     Elite {
///         candidate: Candidate::seed(source, ParamValues::new()),
///         fitness: evaluation.fitness(),
///         evaluation,
///         descriptor: Descriptor::new(vec![0], "doc"),
///     }
/// };
/// let incumbent = elite(&[1.0, 1.1, 0.9, 1.0, 1.05, 0.95]);
/// // A lower median by luck: not enough.
/// assert!(!replaces(&elite(&[0.98, 1.1, 0.9, 1.0, 1.05, 0.93]), &incumbent));
/// assert!(replaces(&elite(&[0.5, 0.55, 0.45, 0.5, 0.52, 0.48]), &incumbent));
/// ```
pub fn replaces(challenger: &Elite, incumbent: &Elite) -> bool {
    if challenger.fitness <= incumbent.fitness {
        return false;
    }
    ReplacementRule::default()
        .decide(&challenger.evaluation, &incumbent.evaluation)
        .unwrap_or(true)
}
