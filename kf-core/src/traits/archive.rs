//! [`Archive`]: where the engine keeps its elites. Implemented by `kf-archive`'s grid archive;
//! the engine only needs this trait, so embedders can bring CVT or island archives.

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::candidate::Candidate;
use crate::descriptor::{Descriptor, DescriptorSpace};
use crate::evaluation::Evaluation;
use crate::fitness::Fitness;

/// A judged candidate: what the archive stores per cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Elite {
    /// The candidate.
    pub candidate: Candidate,
    /// Its evaluation.
    pub evaluation: Evaluation,
    /// Its cell.
    pub descriptor: Descriptor,
    /// Its fitness (from the evaluation).
    pub fitness: Fitness,
}

impl Elite {
    /// The parameter values this elite was measured with, which earned it its place: its
    /// evaluation's (a tuner may have moved them) over its candidate's. Mutators start from
    /// these; see [`Evaluation::effective_params`].
    pub fn effective_params(&self) -> crate::ParamValues {
        self.evaluation.effective_params(&self.candidate)
    }
}

/// What an insertion did.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum InsertOutcome {
    /// The cell was empty.
    NewCell,
    /// The candidate replaced a worse elite.
    Improved {
        /// Fitness of the replaced elite.
        previous: Fitness,
        /// New minus previous fitness (> 0).
        gain: f64,
    },
    /// The cell's elite is at least as good.
    NotAdded {
        /// Fitness of the incumbent.
        incumbent: Fitness,
    },
}

impl InsertOutcome {
    /// True for a new cell or an improvement.
    pub fn is_added(&self) -> bool {
        !matches!(self, InsertOutcome::NotAdded { .. })
    }
}

/// Quality-diversity metrics of an archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchiveMetrics {
    /// Cells in the space.
    pub cells: usize,
    /// Cells holding an elite.
    pub filled: usize,
    /// `filled / cells`.
    pub coverage: f64,
    /// Sum over filled cells of `max(0, fitness - offset)`; never decreases.
    pub qd_score: f64,
    /// Best fitness.
    pub best: Option<Fitness>,
    /// Mean fitness of the elites.
    pub mean: Option<f64>,
    /// Insertions that added or improved a cell.
    pub additions: u64,
}

/// Where the archive is empty or improving, for mutators (and prompts) to aim at.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchiveHints {
    /// The descriptor space.
    pub space: Option<DescriptorSpace>,
    /// Empty cells next to filled ones (one level away on one dimension), nearest the parent
    /// first when the engine knows the parent.
    pub empty_frontier: Vec<Vec<usize>>,
    /// Cells improved most recently, newest first.
    pub recently_improved: Vec<Vec<usize>>,
    /// Every filled cell (empty when the archive does not list them): with it a mutator tells
    /// an empty cell from a filled one anywhere, not only on the frontier.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filled: Vec<Vec<usize>>,
    /// Current metrics.
    pub metrics: ArchiveMetrics,
}

/// A quality-diversity archive as the engine sees it.
///
/// # Example
///
/// A minimal archive with a single cell, enough to drive the engine:
///
/// ```
/// use kf_core::prelude::*;
/// use rand::RngCore;
///
/// struct OneCell {
///     space: DescriptorSpace,
///     elite: Option<Elite>,
///     additions: u64,
/// }
///
/// impl Archive for OneCell {
///     type Error = std::convert::Infallible;
///     fn space(&self) -> &DescriptorSpace {
///         &self.space
///     }
///     fn insert(&mut self, elite: Elite) -> Result<InsertOutcome, Self::Error> {
///         let outcome = match &self.elite {
///             None => InsertOutcome::NewCell,
///             Some(old) if elite.fitness > old.fitness => InsertOutcome::Improved {
///                 previous: old.fitness,
///                 gain: elite.fitness.value() - old.fitness.value(),
///             },
///             Some(old) => return Ok(InsertOutcome::NotAdded { incumbent: old.fitness }),
///         };
///         self.elite = Some(elite);
///         self.additions += 1;
///         Ok(outcome)
///     }
///     fn select_parent(&mut self, _rng: &mut dyn RngCore) -> Option<&Elite> {
///         self.elite.as_ref()
///     }
///     fn inspirations(&self, _rng: &mut dyn RngCore, _cell: &[usize], _n: usize) -> Vec<&Elite> {
///         Vec::new()
///     }
///     fn hints(&self, _near: Option<&[usize]>) -> ArchiveHints {
///         ArchiveHints { metrics: self.metrics(), ..ArchiveHints::default() }
///     }
///     fn metrics(&self) -> ArchiveMetrics {
///         let best = self.elite.as_ref().map(|e| e.fitness);
///         ArchiveMetrics {
///             cells: 1,
///             filled: usize::from(best.is_some()),
///             coverage: if best.is_some() { 1.0 } else { 0.0 },
///             qd_score: best.map_or(0.0, |f| f.value()),
///             best,
///             mean: best.map(|f| f.value()),
///             additions: self.additions,
///         }
///     }
///     fn elites(&self) -> Vec<&Elite> {
///         self.elite.iter().collect()
///     }
/// }
/// ```
pub trait Archive {
    /// Why an elite was refused (a descriptor outside the space, …).
    type Error: std::error::Error + Send + Sync + 'static;

    /// The descriptor space.
    fn space(&self) -> &DescriptorSpace;

    /// Offers an elite to its cell.
    fn insert(&mut self, elite: Elite) -> Result<InsertOutcome, Self::Error>;

    /// Picks a parent for the next mutation (`None` only when empty). Takes `&mut self` so that
    /// selection policies may keep state (such as visit counts).
    fn select_parent(&mut self, rng: &mut dyn RngCore) -> Option<&Elite>;

    /// Up to `n` elites from cells other than `cell`, for the mutator to draw ideas from.
    fn inspirations(&self, rng: &mut dyn RngCore, cell: &[usize], n: usize) -> Vec<&Elite>;

    /// Where the archive is empty or improving; `near` orders the frontier by distance to it.
    fn hints(&self, near: Option<&[usize]>) -> ArchiveHints;

    /// Current metrics.
    fn metrics(&self) -> ArchiveMetrics;

    /// Every elite, in cell order.
    fn elites(&self) -> Vec<&Elite>;
}
