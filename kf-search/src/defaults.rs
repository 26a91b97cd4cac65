//! The shipped search's settings: the one place they are set ([`SearchConfig::new`](crate::SearchConfig::new),
//! `SearchArgs`'s command-line defaults and [`Search::builder`](crate::Search::builder) all read them).

use std::time::Duration;

/// Candidates evaluated at most (seeds included).
pub const EVALUATIONS: u64 = 60;
/// Configurations tuned per new kernel (1 = no tuning).
pub const TUNE_BUDGET: usize = 3;
/// The kf-tune strategy of the per-kernel tuning (recorded as `default`).
pub const TUNE_STRATEGY: kf_tune::strategy::StrategyName = kf_tune::strategy::StrategyName::Default;
/// Wall-clock limit.
pub const WALL: Duration = Duration::from_secs(9 * 60);
/// Run seed.
pub const SEED: u64 = 0;
/// Rounds of the final selection among the fastest elites ([`crate::final_selection`]).
pub const FINAL_ROUNDS: u32 = 3;
/// The share of a run's `--time` kept for re-timing the best kernels after the search (the
/// final selection: four contenders, each re-timed `final_rounds` times). A re-timing that
/// does not fit is cut by the evaluator's deadline, and its contender leaves the selection
/// saying so.
pub const FINAL_SELECTION_SHARE: f64 = 0.1;
/// Steps in flight on one machine.
pub const IN_FLIGHT: usize = 1;
/// Steps in flight when evaluating on distributed workers.
pub const IN_FLIGHT_DISTRIBUTED: usize = 8;
/// Tuning configurations of one candidate sent out at once when evaluating on distributed
/// workers (`--fan-out 8`): as parallel jobs, over up to that many workers.
pub const FAN_OUT_DISTRIBUTED: usize = 8;
/// Islands: one archive (`--islands 1`).
pub const ISLANDS: usize = 1;
/// Centroids of a CVT archive (as many as the default grid's cells).
pub const CVT_CENTROIDS: usize = 64;
/// Steps between archive snapshots in the run directory.
pub const SNAPSHOT_EVERY: u64 = 25;

/// The shipped behaviour classifier: kf-classify's static classifier refined by the
/// compiler's facts (registers, spills) where the backend reports them.
pub fn classifier() -> super::DefaultClassifier {
    use kf_classify::ClassifierExt;
    kf_classify::StaticClassifier::new().with_compiler_facts()
}

/// The shipped CVT settings (used with `--archive cvt`): [`CVT_CENTROIDS`] centroids, seed 0
/// (the centroids are a property of the space, not of the run), the selection and QD offset
/// of [`grid`].
pub fn cvt() -> kf_archive::CvtConfig {
    kf_archive::CvtConfig::default()
        .with_centroids(CVT_CENTROIDS)
        .with_grid(grid())
}

/// The shipped island settings (used with `--islands N`, N > 1): migration of 2 elites to the
/// next island every 100 insertions, reseeding after 150 insertions without an improvement.
pub fn islands() -> kf_archive::IslandConfig {
    kf_archive::IslandConfig::default()
}

/// The shipped archive settings: the default grid, with the QD-score offset at the
/// fitness of the least correct kernel (so that only correct kernels add to it).
pub fn grid() -> kf_archive::GridConfig {
    kf_archive::GridConfig::default().with_qd_offset(kf_core::Fitness::CORRECT_BASE)
}

/// The shipped archive: these settings, as one value ([`crate::ShippedArchive`]).
impl Default for crate::ShippedArchive {
    fn default() -> Self {
        crate::ShippedArchive {
            layout: crate::archive::Layout::Grid,
            islands: ISLANDS,
            grid: grid(),
            cvt: cvt(),
            island: islands(),
            features: None,
        }
    }
}
