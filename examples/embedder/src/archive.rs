//! The embedder's own archive: the shipped grid, wrapped so that it logs every insertion.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kernelfoundry::archive::{ArchiveError, EliteArchive};
use kernelfoundry::core::{
    Archive, ArchiveHints, ArchiveMetrics, DescriptorSpace, Elite, InsertOutcome,
};
use kernelfoundry::search::{defaults, ArchiveFactory, ArchiveInput};
use rand::RngCore;

/// Makes a [`LoggingGrid`] when the search starts; counts its insertions.
#[derive(Default)]
pub struct LoggingGridFactory {
    /// Elites offered to the archive so far.
    pub offered: Arc<AtomicU64>,
}

impl ArchiveFactory for LoggingGridFactory {
    type Archive = LoggingGrid;

    fn name(&self) -> String {
        "logging-grid".into()
    }

    fn build(self, input: &ArchiveInput<'_>) -> Result<LoggingGrid, ArchiveError> {
        let grid = EliteArchive::with_config(input.space.clone(), defaults::grid())?;
        Ok(LoggingGrid {
            grid,
            offered: self.offered,
        })
    }
}

/// The shipped grid, each insertion printed and counted. Serialised as the grid (the run
/// directory keeps snapshots of it).
#[derive(Debug)]
pub struct LoggingGrid {
    grid: EliteArchive,
    offered: Arc<AtomicU64>,
}

impl serde::Serialize for LoggingGrid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.grid.serialize(s)
    }
}

impl Archive for LoggingGrid {
    type Error = ArchiveError;

    fn space(&self) -> &DescriptorSpace {
        Archive::space(&self.grid)
    }

    fn insert(&mut self, elite: Elite) -> Result<InsertOutcome, ArchiveError> {
        let n = self.offered.fetch_add(1, Ordering::Relaxed) + 1;
        let (id, cell) = (elite.candidate.id, elite.descriptor.coords.clone());
        let outcome = Archive::insert(&mut self.grid, elite)?;
        println!("archive: insertion {n}: {id} into cell {cell:?}: {outcome:?}");
        Ok(outcome)
    }

    fn select_parent(&mut self, rng: &mut dyn RngCore) -> Option<&Elite> {
        self.grid.select_parent(rng)
    }

    fn inspirations(&self, rng: &mut dyn RngCore, cell: &[usize], n: usize) -> Vec<&Elite> {
        self.grid.inspirations(rng, cell, n)
    }

    fn hints(&self, near: Option<&[usize]>) -> ArchiveHints {
        Archive::hints(&self.grid, near)
    }

    fn metrics(&self) -> ArchiveMetrics {
        Archive::metrics(&self.grid)
    }

    fn elites(&self) -> Vec<&Elite> {
        Archive::elites(&self.grid)
    }
}
