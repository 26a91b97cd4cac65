//! What a search produced: [`SearchOutcome`] and its summary.

use kf_core::RunSummary;

use crate::report::ReportOutput;
use crate::SearchArchive;

/// What a search produced; `Ar` is the archive's type (the shipped [`SearchArchive`] unless
/// the search was given another with [`SearchBuilder::archive_factory`](crate::SearchBuilder::archive_factory)).
#[derive(Debug)]
pub struct SearchOutcome<Ar = SearchArchive> {
    /// The archive (a grid unless `--archive` or `--islands` said otherwise).
    pub archive: Ar,
    /// The engine's summary.
    pub summary: RunSummary,
    /// The report files.
    pub report: ReportOutput,
    /// The naive seed's throughput in this run, GFLOP/s.
    pub baseline_gflops: Option<f64>,
    /// The best kernel's throughput, GFLOP/s (`None` for a task that declares no FLOP count).
    pub best_gflops: Option<f64>,
    /// The fittest correct kernel's median time, seconds.
    pub best_seconds: Option<f64>,
    /// Its speedup over the naive seed, as the search scored it (against the run's one
    /// reference baseline).
    pub best_speedup: Option<f64>,
    /// Device evaluations spent: every configuration compiled and timed, tuning included
    /// (replayed steps count what they cost when they ran).
    pub device_evaluations: u64,
    /// The evaluation budget the run directory had before this search extended it.
    pub extended_from: Option<u64>,
}

impl<Ar> SearchOutcome<Ar> {
    /// One line: evaluations, wall time, why the run stopped, cells filled.
    pub fn run_line(&self) -> String {
        let s = &self.summary;
        let mut line = format!(
            "{} evaluations ({} device evaluations) in {:.0} s ({:?}); {} of {} cells filled",
            s.evaluations,
            self.device_evaluations,
            s.wall_seconds,
            s.stop_reason,
            s.metrics.filled,
            s.metrics.cells
        );
        if let Some(from) = self.extended_from {
            line.push_str(&format!("; the run was extended from {from} evaluations"));
        }
        if s.steps > 0 && s.replayed_steps == s.steps {
            line.push_str(
                "; every step was replayed from the run directory (the run had already \
                 finished: ask for more evaluations to extend it)",
            );
        }
        line
    }

    /// The run line, then the best kernel's throughput against the naive seed's in this run.
    pub fn summary_text(&self) -> String {
        let best = best_line(
            self.best_gflops,
            self.baseline_gflops,
            self.best_seconds,
            self.best_speedup,
        );
        format!("{}\n{best}", self.run_line())
    }
}

/// The summary's line on the best kernel: its GFLOP/s against the naive seed's where the task
/// counts FLOPs, else its time and speedup (a task file without a FLOP count is judged by time
/// alone), else that no kernel was correct.
fn best_line(
    best_gflops: Option<f64>,
    baseline_gflops: Option<f64>,
    best_seconds: Option<f64>,
    best_speedup: Option<f64>,
) -> String {
    match (best_gflops, baseline_gflops, best_seconds, best_speedup) {
        (Some(best), Some(base), _, _) if base > 0.0 => format!(
            "best kernel {best:.1} GFLOP/s, naive seed {base:.1} GFLOP/s in the same run: {:.1}x",
            best / base
        ),
        (Some(best), _, _, _) => format!("best kernel {best:.1} GFLOP/s"),
        (None, _, Some(seconds), Some(speedup)) => format!(
            "best kernel {:.4} ms, {speedup:.2}x the naive seed in the same run",
            seconds * 1e3
        ),
        (None, _, Some(seconds), None) => format!("best kernel {:.4} ms", seconds * 1e3),
        (None, _, None, _) => "no correct kernel was found".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::best_line;

    /// A task with a FLOP count is summarised in GFLOP/s; one without (most task files) by
    /// its best time and speedup, not as if no kernel had been correct.
    #[test]
    fn the_best_line_uses_time_where_the_task_counts_no_flops() {
        assert_eq!(
            best_line(Some(30.0), Some(10.0), Some(1e-3), Some(3.0)),
            "best kernel 30.0 GFLOP/s, naive seed 10.0 GFLOP/s in the same run: 3.0x"
        );
        assert_eq!(
            best_line(None, None, Some(2.5e-5), Some(4.25)),
            "best kernel 0.0250 ms, 4.25x the naive seed in the same run"
        );
        assert_eq!(
            best_line(None, None, Some(2.5e-5), None),
            "best kernel 0.0250 ms"
        );
        assert_eq!(
            best_line(None, None, None, None),
            "no correct kernel was found"
        );
    }
}
