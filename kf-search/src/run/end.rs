//! The end of a shipped run: what its start kept ([`RunContext`]) and what it makes of the
//! engine's result: the distributed record, the final selection and reference comparison on
//! the kept workers, the report files and the explorer, the [`SearchOutcome`].

use std::sync::{Arc, Mutex};

use kf_core::{
    Archive, BoxError, DescriptorSpace, DeviceFacts, Elite, EvaluationReport, Observe, RunSummary,
    Work,
};
use kf_eval::task::{sizes_text, Sizes};
use kf_eval::IsolatedEvaluator;
use kf_report::post_run;
use serde::Serialize;

use crate::report::{ProgressTrace, Report};
use crate::{
    DeviceEvaluations, FinishedRun, PartNames, PostRun, Retime, SearchConfig, SearchError,
    SearchOutcome, WorkersAfterRun, BASELINE_NOTE,
};

/// A shipped run from its start to its report: what the engine does not hold and the end of
/// the run needs. Made once when the run starts ([`super::start`]), consumed by
/// [`RunContext::conclude`].
pub(crate) struct RunContext {
    /// The run's configuration (task name, output folder, final rounds, reference).
    pub(super) config: SearchConfig,
    /// The task's sizes and the work of one kernel run at them.
    pub(super) sizes: Sizes,
    pub(super) work: Work,
    /// The device the run evaluated on and the behaviour space.
    pub(super) device: DeviceFacts,
    pub(super) space: DescriptorSpace,
    /// The names of the run's parts, recorded in the report.
    pub(super) parts: PartNames,
    /// Device evaluations spent (tuning included), against their limit.
    pub(super) device_count: DeviceEvaluations,
    /// The progress observer's trace and the baseline seed's measured throughput.
    pub(super) trace: ProgressTrace,
    pub(super) baseline: BaselineWatch,
    /// The shipped evaluator's workers; `None` with one's own evaluator.
    pub(super) workers: Option<WorkersAfterRun>,
    /// The emitters' scheduler, for its statistics; `None` for a single mutator.
    pub(super) scheduler: Option<Arc<kf_core::emitter::Scheduler>>,
    /// The evaluation budget the run directory was extended from.
    pub(super) extended_from: Option<u64>,
    /// The builder's post-run hooks, run after the shipped ones.
    pub(super) post_run: Vec<Box<dyn PostRun>>,
}

impl RunContext {
    /// Ends the run whose engine gave `result`: records a distributed run's end, then the final
    /// selection and the reference measurement (on the local workers, which stay up for them: a
    /// fresh worker would prepare its inputs and baseline again), the report and the explorer,
    /// then the builder's hooks.
    pub(super) fn conclude<Ar: Archive + Serialize>(
        mut self,
        result: Result<kf_core::RunResult<Ar>, kf_core::CoreError>,
    ) -> Result<SearchOutcome<Ar>, SearchError> {
        let (retimer, remote) = self
            .workers
            .take()
            .map_or((None, None), WorkersAfterRun::into_parts);
        let result = result?;
        record_distributed_end(remote, &result)?;
        let archive = result.archive;
        let summary = result.summary;
        let elites = Archive::elites(&archive);
        let own_hooks = std::mem::take(&mut self.post_run);
        let report = self.present(&summary, &elites, retimer.as_ref(), own_hooks)?;
        let best = BestFigures::of(&elites);
        Ok(SearchOutcome {
            archive,
            summary,
            report,
            baseline_gflops: self.baseline.gflops(),
            best_gflops: best.gflops,
            best_seconds: best.seconds,
            best_speedup: best.speedup,
            device_evaluations: self.device_count.spent(),
            extended_from: self.extended_from,
        })
    }

    /// Runs the shipped post-run hooks and the builder's on the finished run, shuts the local
    /// workers down after them (also when a hook failed), and gives the report as written.
    fn present(
        &self,
        summary: &RunSummary,
        elites: &[&Elite],
        retimer: Option<&IsolatedEvaluator>,
        own_hooks: Vec<Box<dyn PostRun>>,
    ) -> Result<kf_report::report::ReportOutput, SearchError> {
        let report = self.report(summary, elites, retimer);
        let config = &self.config;
        let mut finished = FinishedRun {
            task: &config.task,
            task_file: config.task_file.is_some(),
            sizes: &self.sizes,
            work: &self.work,
            out: &config.out,
            distributed: config.is_distributed(),
            device: &self.device,
            space: &self.space,
            summary,
            elites,
            retimer: retimer.map(|r| r as &dyn Retime),
            report,
            output: None,
        };
        let mut hooks = post_run::shipped(config.final_rounds, config.reference);
        hooks.extend(own_hooks);
        let hooks_ran = finished.run_hooks(&mut hooks);
        if let Some(retimer) = retimer {
            retimer.shutdown();
        }
        hooks_ran?;
        Ok(finished.into_output()?)
    }

    /// The report as the run leaves it, before the post-run hooks add the final selection and
    /// the reference comparison.
    fn report<'a>(
        &'a self,
        summary: &'a RunSummary,
        elites: &[&'a Elite],
        retimer: Option<&IsolatedEvaluator>,
    ) -> Report<'a> {
        Report::new(&self.space, summary, elites.iter().copied())
            .device_evaluations(self.device_count.spent(), self.device_count.limit())
            // How the local workers were confined; a distributed run records it on each
            // evaluation row.
            .confinement(retimer.and_then(IsolatedEvaluator::confinement))
            .baseline_gflops(self.baseline.gflops())
            .trace(self.trace.points())
            .title(format!("{} {}", self.config.task, sizes_text(&self.sizes)))
            .extra("device", &self.device.name)
            .extra("seed", self.config.seed)
            .extra("extended_from_evaluations", self.extended_from)
            .extra("emitters", self.scheduler.as_ref().map(|s| s.stats()))
            .extra("parts", &self.parts)
    }
}

/// A distributed run's end: the final archive joins the run's record in the database, and the
/// connection is shut down.
#[cfg(feature = "dist")]
fn record_distributed_end<Ar: Serialize>(
    remote: Option<kf_dist::DistEvaluator>,
    result: &kf_core::RunResult<Ar>,
) -> Result<(), SearchError> {
    let Some(dist) = remote else {
        return Ok(());
    };
    let snapshot = serde_json::to_value(&result.archive).map_err(|source| SearchError::Json {
        what: "the archive snapshot",
        source,
    })?;
    let evaluations = result.summary.evaluations;
    dist.block_on(
        dist.store()
            .store_snapshot(dist.run(), evaluations, &snapshot),
    )?;
    dist.shutdown();
    Ok(())
}

/// Without `dist` there is no distributed run to record.
#[cfg(not(feature = "dist"))]
fn record_distributed_end<Ar>(
    remote: Option<crate::evaluator::DistEvaluator>,
    _result: &kf_core::RunResult<Ar>,
) -> Result<(), SearchError> {
    match remote {
        None => Ok(()),
        Some(never) => match never {},
    }
}

/// The best correct kernel's figures for the outcome: the highest throughput of any correct
/// elite, and the fittest correct elite's time and speedup.
struct BestFigures {
    gflops: Option<f64>,
    seconds: Option<f64>,
    speedup: Option<f64>,
}

impl BestFigures {
    fn of(elites: &[&Elite]) -> Self {
        let correct = || elites.iter().filter(|e| e.evaluation.status.is_correct());
        let gflops = correct()
            .filter_map(|e| e.evaluation.gflops)
            .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g))));
        let fittest = correct().max_by(|a, b| a.fitness.cmp(&b.fitness));
        BestFigures {
            gflops,
            seconds: fittest.and_then(|e| e.evaluation.timing.map(|t| t.median_s)),
            speedup: fittest.and_then(|e| e.evaluation.speedup),
        }
    }
}

/// Remembers the throughput of the task baseline seed as this run measured it (its cell may
/// later be taken by a faster kernel).
#[derive(Clone, Default)]
pub(super) struct BaselineWatch(Arc<Mutex<Option<f64>>>);

impl BaselineWatch {
    fn gflops(&self) -> Option<f64> {
        self.0.lock().ok().and_then(|g| *g)
    }
}

impl Observe for BaselineWatch {
    fn observe_evaluation(&mut self, r: &EvaluationReport<'_>) -> Result<(), BoxError> {
        if r.candidate.origin.mutator == "seed" && r.candidate.origin.note.contains(BASELINE_NOTE) {
            if let (Some(e), Ok(mut slot)) = (r.evaluation, self.0.lock()) {
                if slot.is_none() {
                    *slot = e.gflops;
                }
            }
        }
        Ok(())
    }
}
