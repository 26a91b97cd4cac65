//! # kf-archive
//!
//! Quality-diversity archives for KernelFoundry-rs.
//!
//! * [`GridArchive`]: a MAP-Elites grid over any [`kf_core::DescriptorSpace`] (the default
//!   kernel space is 3 dimensions × 4 levels = 64 cells), storing one payload per cell with
//!   its [`kf_core::Fitness`]. Insertion is O(1) and allocation-free; coverage, QD-score (with
//!   a configurable offset), best and mean fitness are maintained incrementally. Parent
//!   selection mixes exploitation (fitness-proportional), exploration (recently improved cells
//!   and cells with empty neighbours) and uniform draws, 70/20/10 by default.
//! * [`EliteArchive`] = `GridArchive<Elite>`, which implements [`kf_core::Archive`] for the
//!   engine.
//! * [`CvtArchive`]: MAP-Elites over a continuous [`FeatureSpace`] (a classifier's
//!   [`kf_core::Descriptor::features`]): one elite per centroid, the centroids placed by
//!   k-means on a seeded sample of the space and kept with the run
//!   ([`CvtArchive::in_run_dir`]).
//! * [`IslandArchive`]: several archives of one type evolving separately, with periodic
//!   migration of elites and reseeding of stagnant islands, as one [`kf_core::Archive`].
//! * [`noise`]: an elite is replaced only by a challenger that is faster with confidence
//!   (a one-sided rank test on the timing samples, [`kf_core::noise::ReplacementRule`]).
//! * [`RunDir`]: a crash-safe run directory implementing [`kf_core::Checkpoint`]: an
//!   append-only JSON-lines step log, atomic snapshots of the archive and the run's metadata,
//!   from which a killed run resumes exactly and an archive is restored.
//!
//! ```
//! use kf_archive::{EliteArchive, GridConfig};
//! use kf_core::prelude::*;
//! use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator};
//!
//! let classifier = SyntheticClassifier::new(4);
//! // Count only the speed of correct kernels in the QD-score.
//! let config = GridConfig::default().with_qd_offset(Fitness::CORRECT_BASE);
//! let archive = EliteArchive::with_config(classifier.space().clone(), config)?;
//! let result = Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
//!     .seeds(vec![synthetic_seed(6)])
//!     .seed(1)
//!     .budget(Budget::evaluations(400))
//!     .run_blocking()?;
//! let metrics = result.summary.metrics;
//! assert!(metrics.coverage > 0.1 && metrics.qd_score > 0.0);
//! println!("{}", serde_json::to_string(&result.archive)?.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod cvt;
mod elite;
mod error;
mod grid;
mod islands;
pub mod noise;
mod rundir;
mod size_runs;

pub use cvt::{CvtArchive, CvtConfig, Feature, FeatureSpace, CENTROIDS_FILE, MAX_CENTROIDS};
pub use elite::EliteArchive;
pub use error::ArchiveError;
pub use grid::{
    GridArchive, GridConfig, Occupant, Selected, SelectionMode, SelectionRatios, MAX_CELLS,
    MAX_RECENT,
};
pub use islands::{IslandArchive, IslandConfig, MAX_ISLANDS};
pub use rundir::{read_run, RunDir, RunDirOptions, RunLog, RunMeta, SyncMode};
pub use size_runs::{SizeRun, SizeRuns, SIZE_RUNS_FILE};
