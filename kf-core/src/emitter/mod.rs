//! Emitters and their scheduler: parent selection and the choice of mutator, taken out of the
//! archive (pyribs' split). An archive stores elites and answers queries; an [`Emitter`]
//! decides which elite to mutate next and with which mutator; a [`Scheduler`] picks the
//! emitter of each step with a bandit credited by what its children did for the archive (a new
//! cell, an improved elite, QD-score gained per device-second), or by fixed weights.
//!
//! Run an engine over a scheduler with [`Engine::scheduled`](crate::Engine::scheduled). The
//! scheduler's state is a function of the judged children in step order, so a seeded run is
//! reproducible, and a resumed run rebuilds it exactly by replaying the recorded steps (each
//! [`StepRecord`](crate::StepRecord) names its emitter, and a resume that would choose another
//! is refused as a mismatch).

mod scheduler;

pub use scheduler::{
    device_seconds, EmitterCredit, EmitterStats, ScheduledMutator, Scheduler, SchedulerPolicy,
};

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
///     Box::new(kf_core::emitter::ArchiveEmitter::new(BoxMutator::new(SyntheticMutator::new(0.1)))),
/// ])
/// .unwrap();
/// let classifier = SyntheticClassifier::new(4);
/// let archive = VecArchive::new(classifier.space().clone());
/// let engine = Engine::scheduled(scheduler, SyntheticEvaluator::new(), classifier, archive)
///     .seeds(vec![synthetic_seed(4)])
///     .seed(3)
///     .budget(Budget::evaluations(100));
/// let scheduler = engine.scheduler().unwrap();
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

/// Mutates the parent the archive selects: today's behaviour, as an emitter.
#[derive(Debug)]
pub struct ArchiveEmitter {
    name: String,
    mutator: BoxMutator,
}

impl ArchiveEmitter {
    /// Applies `mutator` to the archive's choice; named `archive/<mutator>`.
    pub fn new(mutator: BoxMutator) -> Self {
        ArchiveEmitter {
            name: format!("archive/{}", crate::Mutator::name(&mutator)),
            mutator,
        }
    }
}

impl ArchiveEmitter {
    /// Renames the emitter (two emitters of one scheduler need different names).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl Emitter for ArchiveEmitter {
    fn name(&self) -> &str {
        &self.name
    }
    fn mutator(&self) -> &BoxMutator {
        &self.mutator
    }
    fn parent(&self, _view: &ArchiveView<'_>, _rng: &mut dyn RngCore) -> ParentChoice {
        ParentChoice::Archive
    }
}

/// Mutates an elite on the archive's frontier (one with an empty neighbouring cell), uniformly:
/// aims at coverage. With no frontier left it falls back to the archive's choice.
#[derive(Debug)]
pub struct FrontierEmitter {
    name: String,
    mutator: BoxMutator,
}

impl FrontierEmitter {
    /// Applies `mutator` to frontier elites; named `frontier/<mutator>`.
    pub fn new(mutator: BoxMutator) -> Self {
        FrontierEmitter {
            name: format!("frontier/{}", crate::Mutator::name(&mutator)),
            mutator,
        }
    }
}

impl FrontierEmitter {
    /// Renames the emitter (two emitters of one scheduler need different names).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl Emitter for FrontierEmitter {
    fn name(&self) -> &str {
        &self.name
    }
    fn mutator(&self) -> &BoxMutator {
        &self.mutator
    }
    fn parent(&self, view: &ArchiveView<'_>, rng: &mut dyn RngCore) -> ParentChoice {
        let frontier = view.frontier();
        if frontier.is_empty() {
            return ParentChoice::Archive;
        }
        ParentChoice::Elite(frontier[rng.random_range(0..frontier.len())])
    }
}

/// Mutates one of the `top` fittest elites, uniformly: aims at the best kernel.
#[derive(Debug)]
pub struct EliteEmitter {
    name: String,
    mutator: BoxMutator,
    top: usize,
}

impl EliteEmitter {
    /// Applies `mutator` to one of the `top` (at least 1) fittest elites; named
    /// `elite/<mutator>`.
    pub fn new(mutator: BoxMutator, top: usize) -> Self {
        EliteEmitter {
            name: format!("elite/{}", crate::Mutator::name(&mutator)),
            mutator,
            top: top.max(1),
        }
    }
}

impl EliteEmitter {
    /// Renames the emitter (two emitters of one scheduler need different names).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

impl Emitter for EliteEmitter {
    fn name(&self) -> &str {
        &self.name
    }
    fn mutator(&self) -> &BoxMutator {
        &self.mutator
    }
    fn parent(&self, view: &ArchiveView<'_>, rng: &mut dyn RngCore) -> ParentChoice {
        let mut order: Vec<usize> = (0..view.elites.len()).collect();
        // Fittest first; ties keep cell order, so the choice is a function of the archive.
        order.sort_by(|&a, &b| view.elites[b].fitness.cmp(&view.elites[a].fitness));
        order.truncate(self.top);
        if order.is_empty() {
            return ParentChoice::Archive;
        }
        ParentChoice::Elite(order[rng.random_range(0..order.len())])
    }
}

#[cfg(test)]
pub(crate) mod tests;
