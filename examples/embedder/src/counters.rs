//! The counters of the parts of our own, read after the search.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::ensure;

use crate::archive::LoggingGridFactory;
use crate::layer::CountingLayer;
use crate::tuning::BestNeighbourFactory;

/// Handles on what the parts count.
pub struct Counters {
    launch_log: PathBuf,
    offered: Arc<AtomicU64>,
    tuned: Arc<AtomicU64>,
    layered: Arc<AtomicU64>,
}

/// Our archive, tuning strategy and evaluator layer, and the handles on their counters; the
/// backend's launches are counted in `launch_log`.
pub fn parts(
    launch_log: PathBuf,
) -> (
    LoggingGridFactory,
    BestNeighbourFactory,
    CountingLayer,
    Counters,
) {
    let archive = LoggingGridFactory::default();
    let strategy = BestNeighbourFactory::default();
    let layer = CountingLayer::default();
    let counters = Counters {
        launch_log,
        offered: Arc::clone(&archive.offered),
        tuned: Arc::clone(&strategy.made),
        layered: Arc::clone(&layer.evaluations),
    };
    (archive, strategy, layer, counters)
}

impl Counters {
    /// The counts so far.
    pub fn read(&self) -> [(&'static str, u64); 4] {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            (
                "kernel launches by the counting backend",
                crate::backend::launches(&self.launch_log),
            ),
            ("insertions logged by the archive", n(&self.offered)),
            ("kernels tuned by best-neighbour", n(&self.tuned)),
            ("evaluations through the counting layer", n(&self.layered)),
        ]
    }
}

/// Prints each count; fails when one is zero (that part was not used).
pub fn check(counts: &[(&str, u64)]) -> anyhow::Result<()> {
    for (what, n) in counts {
        println!("{what}: {n}");
        ensure!(*n > 0, "no {what}: the part was not used");
    }
    Ok(())
}
