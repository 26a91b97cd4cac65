//! The whole search, as the examples run it: seeds → MAP-Elites over the default 64-cell
//! kernel space → each child tuned with a small kf-tune budget → judged by the cheat-proof
//! evaluator in worker processes → a report with a table, `report.json` and pictures.
//!
//! Embedders choose the mutator (offline, LLM, or a mix) and the task; everything else has
//! defaults chosen so that a search on a 2-core machine finishes in minutes. A run directory
//! under the output folder records every step, so an interrupted run resumes where it stopped
//! when started again with the same arguments.

mod cli;
mod evaluator;
mod setup;
mod tuned;

pub use cli::{
    stop_on_ctrl_c, template_seeds, DistArgs, SearchArgs, ServerArgs, DEFAULT_DATABASE_URL,
    DEFAULT_NATS_URL,
};
pub use setup::offline_search;
pub use tuned::TunedEvaluator;

use evaluator::SearchEvaluator;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kf_archive::{EliteArchive, GridConfig, RunDir, RunDirOptions, RunMeta};
use kf_classify::{ClassifierExt, StaticClassifier};
use kf_core::{
    Archive, BehaviorClassifier, BoxError, Budget, Candidate, Engine, EvaluationReport, Fitness,
    KernelSource, Mutator, Observe, ObserverMode, Origin, ParamValues, RunSummary, StopHandle,
};
use kf_eval::tasks::{builtin_task, sizes_text, KernelTask, Sizes};
use kf_eval::{BackendSpec, EvalConfig, IsolatedEvaluator, TimeoutPolicy, WorkerCommand};
use serde::Serialize;

use crate::report::{LogObserver, ProgressObserver, Report, ReportOutput};

/// Why a search could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// Bad task, sizes or backend.
    #[error("{0}")]
    Eval(#[from] kf_eval::EvalError),
    /// The archive or run directory refused.
    #[error("{0}")]
    Archive(#[from] kf_archive::ArchiveError),
    /// The engine stopped with an error.
    #[error("{0}")]
    Engine(#[from] kf_core::CoreError),
    /// The report could not be written.
    #[error("{0}")]
    Report(#[from] crate::report::ReportError),
    /// Distributed evaluation failed to start.
    #[error("{0}")]
    Distributed(#[from] kf_dist::DistError),
    /// A bad configuration.
    #[error("{0}")]
    Config(String),
}

/// The origin note of the task-baseline seed.
const BASELINE_NOTE: &str = "task baseline (naive)";

/// What to search for and how.
#[derive(Debug, Clone, Serialize)]
pub struct SearchConfig {
    /// Built-in task name (`gemm`, `softmax`), or the task file's name.
    pub task: String,
    /// A task file to search on instead of a built-in task (evaluated locally: distributed
    /// workers do not receive task files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_file: Option<kf_eval::TaskFileJob>,
    /// Problem sizes.
    pub sizes: Sizes,
    /// Backend and device.
    pub backend: BackendSpec,
    /// Candidates evaluated at most (seeds included).
    pub evaluations: u64,
    /// Wall-clock limit.
    pub wall: Option<Duration>,
    /// Run seed.
    pub seed: u64,
    /// Output folder (report, pictures, best kernel, run directory).
    pub out: PathBuf,
    /// Configurations tried per new kernel (1 = no tuning).
    pub tune_budget: usize,
    /// kf-tune strategy for the per-kernel tuning.
    pub tune_strategy: String,
    /// Protocol of each evaluation.
    #[serde(skip)]
    pub eval: EvalConfig,
    /// Hard limit per evaluation.
    #[serde(skip)]
    pub timeout: TimeoutPolicy,
    /// Show a progress bar on a terminal.
    pub progress: bool,
    /// How to start evaluation workers; `None` re-executes the current program
    /// ([`WorkerCommand::current_exe`]), whose `main` calls [`crate::init`] first. Test binaries
    /// set [`WorkerCommand::test_harness`] (with `kf_eval::worker_test_entry!`).
    #[serde(skip)]
    pub worker: Option<WorkerCommand>,
    /// Steps (mutation + evaluation) in flight at once: 1 on one machine (one device); more
    /// keeps several distributed workers busy.
    pub in_flight: usize,
    /// Evaluate on workers through NATS JetStream and PostgreSQL instead of in this process.
    #[serde(skip)]
    pub distributed: Option<Distributed>,
}

/// Where a distributed search sends its jobs.
#[derive(Debug, Clone)]
pub struct Distributed {
    /// Servers and queue settings.
    pub dist: kf_dist::DistConfig,
    /// Queue name of the workers' device; default: this machine's device for the backend
    /// ([`crate::distributed::device_kind`]), which must then exist here.
    pub device_kind: Option<String>,
    /// Run id on the queue and in the database; default: derived from the output folder and
    /// the seed, so that a resumed run finds its results.
    pub run: Option<String>,
}

impl SearchConfig {
    /// Defaults for `task` at `sizes`: 120 evaluations, at most 9 minutes, seed 0, output in
    /// `runs/<task>`, 6 configurations of tuning per kernel, OpenCL's default device.
    pub fn new(task: impl Into<String>, sizes: Sizes) -> Self {
        let task = task.into();
        SearchConfig {
            out: PathBuf::from("runs").join(&task),
            task,
            task_file: None,
            sizes,
            backend: BackendSpec::new("opencl"),
            evaluations: 120,
            wall: Some(Duration::from_secs(9 * 60)),
            seed: 0,
            tune_budget: 6,
            tune_strategy: "default".into(),
            eval: search_eval_config(),
            timeout: TimeoutPolicy::default(),
            progress: true,
            worker: None,
            in_flight: 1,
            distributed: None,
        }
    }
}

/// The evaluation protocol the search uses: the full checks, with timing trimmed to what a
/// search needs (one warm-up, the median of at least 5 trials and 30 ms of kernel time, at
/// most a second of timing; one interleaved baseline launch per evaluation feeding the
/// worker's rolling baseline window), and input sets reused for up to 8 evaluations so that
/// large host references are not recomputed for every kernel.
pub fn search_eval_config() -> EvalConfig {
    let mut c = EvalConfig::default();
    c.timing.warmup = 1;
    c.timing.min_trials = 5;
    c.timing.min_seconds = 0.03;
    c.timing.max_seconds = 1.0;
    c.timing.baseline_trials = 1;
    c.reuse_inputs = 8;
    c
}

/// What a search produced.
#[derive(Debug)]
pub struct SearchOutcome {
    /// The archive.
    pub archive: EliteArchive,
    /// The engine's summary.
    pub summary: RunSummary,
    /// The report files.
    pub report: ReportOutput,
    /// The naive seed's throughput in this run, GFLOP/s.
    pub baseline_gflops: Option<f64>,
    /// The best kernel's throughput, GFLOP/s.
    pub best_gflops: Option<f64>,
}

impl SearchOutcome {
    /// One line: evaluations, wall time, why the run stopped, cells filled.
    pub fn run_line(&self) -> String {
        let s = &self.summary;
        format!(
            "{} evaluations in {:.0} s ({:?}); {} of {} cells filled",
            s.evaluations, s.wall_seconds, s.stop_reason, s.metrics.filled, s.metrics.cells
        )
    }

    /// The run line, then the best kernel's throughput against the naive seed's in this run.
    pub fn summary_text(&self) -> String {
        let best = match (self.best_gflops, self.baseline_gflops) {
            (Some(best), Some(base)) if base > 0.0 => format!(
                "best kernel {best:.1} GFLOP/s, naive seed {base:.1} GFLOP/s in the same run: {:.1}x",
                best / base
            ),
            (Some(best), _) => format!("best kernel {best:.1} GFLOP/s"),
            _ => "no correct kernel was found".to_string(),
        };
        format!("{}\n{best}", self.run_line())
    }
}

/// The task's baseline as the first seed, then `extra` seeds; each with its manifest's first
/// parameter values.
pub fn seeds_for(
    task: &dyn KernelTask,
    language: kf_core::Language,
    extra: Vec<(KernelSource, ParamValues)>,
) -> Vec<Candidate> {
    let mut seeds = Vec::new();
    if let Some(base) = task.baseline(language) {
        let params = kf_manifest::Manifest::from_kernel(&base)
            .map(|m| m.default_params())
            .unwrap_or_default();
        let mut c = Candidate::seed(base, params);
        c.origin = Origin::mutator("seed").with_note(BASELINE_NOTE);
        seeds.push(c);
    }
    for (source, params) in extra {
        let mut c = Candidate::seed(source, params);
        c.origin = Origin::mutator("seed").with_note("template");
        seeds.push(c);
    }
    seeds
}

/// Runs the search with `mutator` from `seeds` (the first seed should be the task baseline:
/// its throughput is the report's baseline). Call [`crate::init`] first in `main`.
pub fn run_search<M: Mutator + 'static>(
    config: &SearchConfig,
    mutator: M,
    seeds: Vec<Candidate>,
    stop: Option<StopHandle>,
) -> Result<SearchOutcome, SearchError> {
    crate::backends::check(&config.backend).map_err(SearchError::Config)?;
    if config.evaluations == 0 {
        return Err(SearchError::Config(
            "the evaluation budget must be at least 1".into(),
        ));
    }
    let task: Box<dyn KernelTask> = match &config.task_file {
        Some(job) => Box::new(job.build(&config.sizes, &kf_eval::tasks::builtin_references())?),
        None => builtin_task(&config.task, &config.sizes)?,
    };
    if config.task_file.is_some() && config.distributed.is_some() {
        return Err(SearchError::Config(
            "task files are evaluated on this machine: distributed workers do not receive              task files yet"
                .into(),
        ));
    }
    let sizes = task.sizes();
    let (evaluator, device) = match &config.distributed {
        None => {
            let worker = match &config.worker {
                Some(w) => w.clone(),
                None => WorkerCommand::current_exe()?,
            };
            let mut builder = IsolatedEvaluator::builder(
                config.backend.clone(),
                config.task.clone(),
                sizes.clone(),
            );
            if let Some(job) = &config.task_file {
                builder = builder.task_file(job.clone());
            }
            let isolated = builder
                .command(worker)
                .config(config.eval.clone())
                .timeout(config.timeout)
                .build();
            let device = isolated.device()?;
            let tuned = TunedEvaluator::new(
                isolated,
                config.tune_budget,
                config.tune_strategy.clone(),
                sizes.clone(),
                device.clone(),
            );
            (SearchEvaluator::Local(tuned), device)
        }
        Some(d) => {
            let (dist, device) = connect_distributed(config, d, &sizes)?;
            // Tuning stays here: each configuration is one job, cached by its own id.
            let tuned = TunedEvaluator::new(
                dist,
                config.tune_budget,
                config.tune_strategy.clone(),
                sizes.clone(),
                device.clone(),
            );
            (SearchEvaluator::Distributed(tuned), device)
        }
    };
    let classifier = StaticClassifier::new().with_compiler_facts();
    let space = classifier.space().clone();
    let archive = EliteArchive::with_config(
        space.clone(),
        GridConfig::default().with_qd_offset(Fitness::CORRECT_BASE),
    )?;
    let mut budget = Budget::evaluations(config.evaluations);
    if let Some(w) = config.wall {
        budget = budget.with_wall(w);
    }
    std::fs::create_dir_all(&config.out).map_err(kf_eval::EvalError::Io)?;
    let meta = RunMeta::new(
        config.seed,
        &serde_json::json!({
            "task": config.task, "sizes": sizes, "backend": config.backend,
            "device": device.name, "evaluations": config.evaluations,
            "tune_budget": config.tune_budget, "tune_strategy": config.tune_strategy,
            "mutator": mutator.name(),
        }),
    )?;
    let run_dir = RunDir::open_with(
        config.out.join("run"),
        meta,
        RunDirOptions {
            snapshot_every: 25,
            ..RunDirOptions::default()
        },
    )?;
    let mut progress = ProgressObserver::new(&space).with_budget(&budget);
    if !config.progress {
        progress = progress.without_bar();
    }
    let trace = progress.trace();
    let baseline = BaselineWatch::default();
    let evaluator_handle = evaluator.handle();
    let mut engine = Engine::new(mutator, evaluator, classifier, archive)
        .task(task.describe())
        .device(device.clone())
        .seeds(seeds)
        .seed(config.seed)
        .budget(budget)
        .max_in_flight(config.in_flight.max(1))
        .checkpoint(run_dir)
        .add_observer(progress, ObserverMode::Always)
        .add_observer(LogObserver::new(&space), ObserverMode::Always)
        .add_observer(baseline.clone(), ObserverMode::Always);
    if let Some(stop) = stop {
        engine = engine.stop_on(stop);
    }
    let result = engine.run_blocking();
    let evaluator_after = evaluator_handle.shutdown_handle();
    let result = result?;
    let archive = result.archive;
    if let Some(dist) = &evaluator_after {
        // The final archive joins the run's record in the database.
        let snapshot =
            serde_json::to_value(&archive).map_err(|e| SearchError::Config(e.to_string()))?;
        let evaluations = result.summary.evaluations;
        dist.block_on(
            dist.store()
                .store_snapshot(dist.run(), evaluations, &snapshot),
        )?;
        dist.clone().shutdown();
    }
    let summary = result.summary;
    let elites = Archive::elites(&archive);
    let baseline_gflops = baseline.gflops();
    let report = Report::new(&space, &summary, elites.iter().copied())
        .baseline_gflops(baseline_gflops)
        .trace(trace.points())
        .title(format!("{} {}", config.task, sizes_text(&sizes)))
        .extra("device", &device.name)
        .extra("seed", config.seed)
        .write_and_print(&config.out)?;
    let best_gflops = elites
        .iter()
        .filter(|e| e.evaluation.status.is_correct())
        .filter_map(|e| e.evaluation.gflops)
        .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g))));
    Ok(SearchOutcome {
        archive,
        summary,
        report,
        baseline_gflops,
        best_gflops,
    })
}

/// Connects the distributed evaluator and finds the device the workers have: this machine's
/// when it has the same kind, else one a worker registered (waiting up to two minutes for the
/// first worker).
fn connect_distributed(
    config: &SearchConfig,
    d: &Distributed,
    sizes: &kf_eval::tasks::Sizes,
) -> Result<(kf_dist::DistEvaluator, kf_core::DeviceFacts), SearchError> {
    use crate::distributed::{device_kind, TaskProfile};
    let local = crate::backends::device_facts(&config.backend);
    let kind = match (&d.device_kind, &local) {
        (Some(k), _) => k.clone(),
        (None, Ok(facts)) => device_kind(&config.backend.kind, facts),
        (None, Err(e)) => {
            return Err(SearchError::Config(format!(
                "no {} device here to name the workers' device kind ({e}); give the device kind",
                config.backend.kind
            )))
        }
    };
    let run = match &d.run {
        Some(r) => r.clone(),
        None => default_run_id(config),
    };
    let profile = TaskProfile {
        task: config.task.clone(),
        sizes: sizes.clone(),
        backend: config.backend.kind.clone(),
        eval: config.eval.clone(),
        timeout: config.timeout.into(),
    };
    let profile = serde_json::to_value(&profile).map_err(|e| SearchError::Config(e.to_string()))?;
    let dist =
        kf_dist::DistEvaluator::builder(d.dist.clone(), run, kind.clone(), profile).connect()?;
    if let Ok(facts) = local {
        if device_kind(&config.backend.kind, &facts) == kind {
            return Ok((dist, facts));
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = dist.block_on(dist.store().worker_device(&kind))? {
            let facts = serde_json::from_value(v).map_err(|e| {
                SearchError::Config(format!("a worker registered bad device facts: {e}"))
            })?;
            return Ok((dist, facts));
        }
        if std::time::Instant::now() > deadline {
            return Err(SearchError::Config(format!(
                "no worker of device kind `{kind}` registered within two minutes (start `kf worker`)"
            )));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A run id from the task, the output folder and the seed: the same command resumes the same
/// run (and finds its results on the queue).
fn default_run_id(config: &SearchConfig) -> String {
    let out = std::fs::canonicalize(&config.out).unwrap_or_else(|_| config.out.clone());
    let key = format!("{}\n{}\n{}", config.task, out.display(), config.seed);
    let hash = blake3::hash(key.as_bytes()).to_hex();
    format!("{}-{}", kf_dist::subject_token(&config.task), &hash[..16])
}

/// Remembers the throughput of the task baseline seed as this run measured it (its cell may
/// later be taken by a faster kernel).
#[derive(Clone, Default)]
struct BaselineWatch(Arc<Mutex<Option<f64>>>);

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
