//! The grid archive as the engine's [`Archive`]: a [`GridArchive`] of [`Elite`]s.

use kf_core::{Archive, ArchiveHints, ArchiveMetrics, DescriptorSpace, Elite, InsertOutcome};
use rand::RngCore;

use crate::error::ArchiveError;
use crate::grid::GridArchive;

/// The grid archive the engine drives: one [`Elite`] per cell, placed by its descriptor's
/// coordinates and ranked by its fitness.
///
/// # Example
///
/// ```
/// use kf_archive::EliteArchive;
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator};
///
/// let classifier = SyntheticClassifier::new(4);
/// let archive = EliteArchive::new(classifier.space().clone())?;
/// let result = Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
///     .seeds(vec![synthetic_seed(6)])
///     .seed(3)
///     .budget(Budget::evaluations(300))
///     .run_blocking()?;
/// let metrics = result.archive.metrics();
/// assert!(metrics.filled > 8);
/// assert_eq!(result.archive.elites().len(), metrics.filled);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type EliteArchive = GridArchive<Elite>;

impl Archive for GridArchive<Elite> {
    type Error = ArchiveError;

    fn space(&self) -> &DescriptorSpace {
        GridArchive::space(self)
    }

    /// Fills an empty cell, or replaces a worse elite — one whose timing samples the challenger
    /// beats with confidence when both kept samples (see [`crate::noise::replaces`]).
    fn insert(&mut self, elite: Elite) -> Result<InsertOutcome, ArchiveError> {
        let index = self.index_of(&elite.descriptor.coords)?;
        insert_elite_at(self, index, elite)
    }

    fn select_parent(&mut self, rng: &mut dyn RngCore) -> Option<&Elite> {
        self.select(rng).map(|s| s.occupant.payload)
    }

    fn inspirations(&self, rng: &mut dyn RngCore, cell: &[usize], n: usize) -> Vec<&Elite> {
        let exclude = self.index_of(cell).ok();
        self.inspiration_indices(rng, exclude, n)
            .into_iter()
            .filter_map(|i| self.get_index(i).map(|o| o.payload))
            .collect()
    }

    fn hints(&self, near: Option<&[usize]>) -> ArchiveHints {
        GridArchive::hints(self, near)
    }

    fn metrics(&self) -> ArchiveMetrics {
        GridArchive::metrics(self)
    }

    fn elites(&self) -> Vec<&Elite> {
        self.iter().map(|o| o.payload).collect()
    }
}

/// Offers `elite` to cell `index` of `grid` by the engine's rule: it fills an empty cell or
/// replaces a worse elite (see [`crate::noise::replaces`]).
pub(crate) fn insert_elite_at(
    grid: &mut GridArchive<Elite>,
    index: usize,
    elite: Elite,
) -> Result<InsertOutcome, ArchiveError> {
    if let Some(incumbent) = grid.get_index(index) {
        if !crate::noise::replaces(&elite, incumbent.payload) {
            return Ok(InsertOutcome::NotAdded {
                incumbent: incumbent.fitness,
            });
        }
    }
    grid.insert_index(index, elite.fitness, elite)
}
