//! The [`Emitter`] trait, what an emitter sees of the archive, and the shipped emitters.

use std::collections::HashSet;

use rand::{Rng, RngCore};

use crate::compose::BoxMutator;
use crate::descriptor::DescriptorSpace;
use crate::traits::archive::{ArchiveMetrics, Elite};

/// What an emitter sees of the archive when it picks a parent.
#[derive(Debug)]
pub struct ArchiveView<'a> {
    /// The descriptor space.
    pub space: &'a DescriptorSpace,
    /// Every elite, in the archive's cell order (not empty).
    pub elites: Vec<&'a Elite>,
    /// The archive's metrics.
    pub metrics: ArchiveMetrics,
}

impl ArchiveView<'_> {
    /// Indices (into [`ArchiveView::elites`]) of the elites with at least one empty
    /// neighbouring cell (one level away on one dimension): where new cells are nearest.
    pub fn frontier(&self) -> Vec<usize> {
        let shape = self.space.shape();
        let filled: HashSet<&[usize]> = self
            .elites
            .iter()
            .map(|e| e.descriptor.coords.as_slice())
            .collect();
        let mut neighbour = Vec::new();
        (0..self.elites.len())
            .filter(|&i| {
                let coords = &self.elites[i].descriptor.coords;
                (0..coords.len().min(shape.len())).any(|d| {
                    [coords[d].checked_sub(1), Some(coords[d] + 1)]
                        .into_iter()
                        .flatten()
                        .filter(|&level| level < shape[d])
                        .any(|level| {
                            neighbour.clear();
                            neighbour.extend_from_slice(coords);
                            neighbour[d] = level;
                            !filled.contains(neighbour.as_slice())
                        })
                })
            })
            .collect()
    }
}

/// Which parent an emitter chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentChoice {
    /// Let the archive choose ([`Archive::select_parent`](crate::Archive::select_parent): the
    /// grid archive's 70/20/10 exploit/explore/random mix).
    Archive,
    /// This elite (an index into [`ArchiveView::elites`]; an index out of range falls back
    /// to the archive's choice).
    Elite(usize),
}

/// Decides the parent of a step and the mutator that changes it.
///
/// An emitter draws its random choices from the `rng` it is handed (the run's seeded stream),
/// so that a seeded run stays reproducible; it keeps no state of its own (the scheduler
/// keeps the credit). Its mutator is credited with the children it produced, as an engine
/// credits its mutator.
///
/// # Example
///
/// An emitter that always mutates the worst elite (to lift the bottom of the archive):
///
/// ```
/// use kf_core::emitter::{ArchiveView, Emitter, ParentChoice, Scheduler};
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive};
/// use kf_core::BoxMutator;
/// use rand::RngCore;
///
/// struct LiftWorst(BoxMutator);
///
/// impl Emitter for LiftWorst {
///     fn name(&self) -> &str {
///         "lift-worst"
///     }
///     fn mutator(&self) -> &BoxMutator {
///         &self.0
///     }
///     fn parent(&self, view: &ArchiveView<'_>, _rng: &mut dyn RngCore) -> ParentChoice {
///         let worst = (0..view.elites.len()).min_by_key(|&i| view.elites[i].fitness);
///         worst.map_or(ParentChoice::Archive, ParentChoice::Elite)
///     }
/// }
///
/// let scheduler = Scheduler::bandit(vec![
///     Box::new(LiftWorst(BoxMutator::new(SyntheticMutator::new(0.1)))),
///     Box::new(kf_core::emitter::SelectionEmitter::archive(BoxMutator::new(SyntheticMutator::new(0.1)))),
/// ])
/// .unwrap();
/// let classifier = SyntheticClassifier::new(4);
/// let archive = VecArchive::new(classifier.space().clone());
/// let engine = Engine::new(scheduler, SyntheticEvaluator::new(), classifier, archive)
///     .seeds(vec![synthetic_seed(4)])
///     .seed(3)
///     .budget(Budget::evaluations(100));
/// let scheduler = engine.scheduler();
/// let result = engine.run_blocking().unwrap();
/// assert_eq!(result.summary.evaluations, 100);
/// let stats = scheduler.stats();
/// assert_eq!(stats.iter().map(|s| s.children).sum::<u64>(), 99, "every child but the seed");
/// ```
pub trait Emitter: Send + Sync {
    /// Short name, recorded in each step's record.
    fn name(&self) -> &str;

    /// The mutator this emitter applies.
    fn mutator(&self) -> &BoxMutator;

    /// Picks the parent of the next step.
    fn parent(&self, view: &ArchiveView<'_>, rng: &mut dyn RngCore) -> ParentChoice;
}

/// Which parents a [`SelectionEmitter`] picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// The archive's choice: today's behaviour, as an emitter.
    Archive,
    /// An elite on the archive's frontier (one with an empty neighbouring cell), uniformly:
    /// aims at coverage. With no frontier left, the archive's choice.
    Frontier,
    /// One of the `top` fittest elites, uniformly: aims at the best kernel.
    Elite {
        /// How many of the fittest to choose among (at least 1).
        top: usize,
    },
}

/// The shipped emitters: one mutator applied to parents chosen by a [`Selection`].
#[derive(Debug)]
pub struct SelectionEmitter {
    name: String,
    mutator: BoxMutator,
    selection: Selection,
}

impl SelectionEmitter {
    /// Applies `mutator` to parents chosen by `selection`; named `<selection>/<mutator>`
    /// (`archive/param`, `frontier/param`, `elite/param`).
    pub fn new(selection: Selection, mutator: BoxMutator) -> Self {
        let kind = match selection {
            Selection::Archive => "archive",
            Selection::Frontier => "frontier",
            Selection::Elite { .. } => "elite",
        };
        SelectionEmitter {
            name: format!("{kind}/{}", crate::Mutator::name(&mutator)),
            mutator,
            selection,
        }
    }

    /// [`Selection::Archive`].
    pub fn archive(mutator: BoxMutator) -> Self {
        Self::new(Selection::Archive, mutator)
    }

    /// [`Selection::Frontier`].
    pub fn frontier(mutator: BoxMutator) -> Self {
        Self::new(Selection::Frontier, mutator)
    }

    /// [`Selection::Elite`] among the `top` fittest.
    pub fn elite(mutator: BoxMutator, top: usize) -> Self {
        Self::new(Selection::Elite { top: top.max(1) }, mutator)
    }

    /// Renames the emitter (two emitters of one scheduler need different names).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl Emitter for SelectionEmitter {
    fn name(&self) -> &str {
        &self.name
    }

    fn mutator(&self) -> &BoxMutator {
        &self.mutator
    }

    fn parent(&self, view: &ArchiveView<'_>, rng: &mut dyn RngCore) -> ParentChoice {
        let candidates = match self.selection {
            Selection::Archive => return ParentChoice::Archive,
            Selection::Frontier => view.frontier(),
            Selection::Elite { top } => {
                let mut order: Vec<usize> = (0..view.elites.len()).collect();
                // Fittest first; ties keep cell order, so the choice is a function of the
                // archive.
                order.sort_by(|&a, &b| view.elites[b].fitness.cmp(&view.elites[a].fitness));
                order.truncate(top.max(1));
                order
            }
        };
        if candidates.is_empty() {
            return ParentChoice::Archive;
        }
        ParentChoice::Elite(candidates[rng.random_range(0..candidates.len())])
    }
}
