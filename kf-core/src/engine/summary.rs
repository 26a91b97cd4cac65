//! What a run returns.

use serde::{Deserialize, Serialize};

use crate::engine::budget::StopReason;
use crate::fitness::Fitness;
use crate::novelty::NoveltyCounts;
use crate::traits::archive::ArchiveMetrics;
use crate::traits::mutator::Usage;

/// Archive metrics after one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistoryPoint {
    /// Evaluations done.
    pub evaluations: u64,
    /// QD-score after it.
    pub qd_score: f64,
    /// Coverage after it.
    pub coverage: f64,
    /// Best fitness after it.
    pub best: Option<Fitness>,
    /// Seconds since the run started.
    pub elapsed_s: f64,
}

/// Summary of a finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Steps completed.
    pub steps: u64,
    /// Candidates evaluated.
    pub evaluations: u64,
    /// Steps replayed from a run directory.
    pub replayed_steps: u64,
    /// Steps that failed (mutator or evaluator errors).
    pub failed_steps: u64,
    /// Final archive metrics.
    pub metrics: ArchiveMetrics,
    /// Mutator usage.
    pub usage: Usage,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Metrics after every evaluation.
    pub history: Vec<HistoryPoint>,
    /// What the novelty filter found (zero without one).
    #[serde(default)]
    pub novelty: NoveltyCounts,
}

/// A finished run: the archive and the summary.
#[derive(Debug)]
pub struct RunResult<A> {
    /// The archive with the elites found.
    pub archive: A,
    /// What happened.
    pub summary: RunSummary,
}
