//! The whole search, as the examples and `kf search` run it: seeds → MAP-Elites over the
//! default 64-cell kernel space → each child tuned with a small kf-tune budget → judged by the
//! cheat-proof evaluator in worker processes → a report with a table, `report.json` and
//! pictures.
//!
//! [`Search::builder`] opens every part of that pipeline: the task, the behaviour
//! [`classifier`](SearchBuilder::classifier), the archive's
//! [settings](SearchBuilder::archive), the [mutator](SearchBuilder::mutator) and
//! [seeds](SearchBuilder::seeds), [layers](SearchBuilder::evaluator_layer) around the
//! evaluator, the budget and the tuning. What is not set is the shipped search ([`defaults`]
//! holds its numbers, the one place they are set). A run directory under the output folder
//! records every step, so an interrupted run resumes where it stopped when started again with
//! the same arguments. A search stops early when the `StopHandle` given to
//! [`SearchBuilder::stop_on`] is triggered: `kf` and the examples trigger it on Ctrl-C (the
//! library installs no signal handler and no logging subscriber; `kf_search::logging`, feature
//! `logging`, is the programs' set-up).
//!
//! # Your own behaviour descriptor
//!
//! A classifier that puts kernels in cells by two facts of their source, searched with
//! everything else as shipped (a tiny softmax, 6 evaluations, on the OpenCL backend):
//!
//! ```
//! use kf_core::{BehaviorClassifier, Candidate, Descriptor, DescriptorSpace, Dimension, Evaluation};
//!
//!
//! struct LoopsAndBarriers(DescriptorSpace);
//!
//! impl BehaviorClassifier for LoopsAndBarriers {
//!     type Error = std::convert::Infallible;
//!     fn space(&self) -> &DescriptorSpace {
//!         &self.0
//!     }
//!     fn classify(&self, c: &Candidate, _: &Evaluation) -> Result<Descriptor, Self::Error> {
//!         let text = &c.source.text;
//!         let loops = text.matches("for (").count().min(3);
//!         let barriers = usize::from(text.contains("barrier("));
//!         Ok(Descriptor::new(vec![loops, barriers], "loops-and-barriers"))
//!     }
//! }
//!
//! kf_search::init(); // evaluation workers re-execute this program: first call
//! # if !kf_search::doctest_backend_available() { return Ok(()); }
//! let space = DescriptorSpace::new(vec![Dimension::numbered("loops", 4), Dimension::numbered("barriers", 2)])?;
//! let out = tempfile::tempdir()?;
//! let outcome = kf_search::Search::builder()
//!     .task("softmax")
//!     .size("ROWS=64,COLS=256")?
//!     .classifier(LoopsAndBarriers(space))
//!     .evaluations(6)
//!     .tune_budget(1)
//!     .out(out.path())
//!     .progress(false)
//!     .build()?
//!     .run()?;
//! assert!(outcome.summary.evaluations >= 1);
//! println!("{}", outcome.summary_text());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod archive;
mod backend_kind;
pub mod backends;
mod budget;
mod builder;
#[cfg(feature = "cli")]
mod cli;
pub mod devices;
#[cfg(feature = "dist")]
pub mod distributed;
mod evaluator;
pub mod kernel_eval;
#[cfg(feature = "llm")]
pub mod llm;
#[cfg(feature = "logging")]
pub mod logging;
pub mod novelty;
mod proposer;
mod search_run;
mod setup;
pub mod task;
pub mod tune;
mod tuned;
pub mod verify;

// The presentation lives in kf-report (issue 46); these paths stay for code written against
// them.
pub use kf_report::{explorer, final_selection, reference, report};
/// Post-run hooks ([`SearchBuilder::post_run`]): kf-report's.
pub use kf_report::{FinishedRun, PostRun, Retime};

pub use archive::{
    cvt_features, ArchiveFactory, ArchiveInput, ArchiveKind, ArchiveSpec, SearchArchive,
    ShippedArchive, UnknownArchive, WithFacts,
};
pub use backends::{init, init_with, BackendError, BackendKind};
pub use budget::{DeviceEvaluationCounter, DeviceEvaluations};
pub use builder::{EvaluatorLayer, Named, NoLayer, PartNames, Search, SearchBuilder, Stack};
#[cfg(feature = "cli")]
pub use cli::SearchArgs;
#[cfg(all(feature = "cli", feature = "dist"))]
pub use cli::{DistArgs, SecurityArgs, ServerArgs, DEFAULT_DATABASE_URL, DEFAULT_NATS_URL};
pub use evaluator::{
    EvaluatorFactory, EvaluatorInput, RemoteError, RemoteEvaluator, SearchEvalError,
    SearchEvaluator, ShippedEvaluator,
};
pub use novelty::SourceNovelty;
pub use proposer::{SchedulerKind, UnknownScheduler};
pub use search_run::{SearchRun, SearchStepper};
pub use setup::{
    family_templates, offline_search, offline_search_with, template_seeds, OfflineMutators,
};
pub use tuned::{TunedEvaluator, CLOSE_CALL_MARGIN};

pub mod defaults;

/// The classifier of the shipped search ([`defaults::classifier`]).
pub type DefaultClassifier = kf_classify::CompilerFactsClassifier<kf_classify::StaticClassifier>;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kf_archive::{RunDir, RunDirOptions, RunMeta};
use kf_core::{
    Archive, BehaviorClassifier, BoxError, Budget, Candidate, Either, Engine, Evaluation,
    EvaluationReport, KernelSource, Language, Mutator, Observe, ObserverMode, Origin, ParamValues,
    RunSummary, Status, StopHandle,
};
use kf_eval::tasks::{sizes_text, KernelTask, Sizes};
use kf_eval::{BackendSpec, EvalConfig, IsolatedEvaluator, TimeoutPolicy, WorkerCommand};
use kf_mutate::CellPredictor;
use serde::Serialize;

use crate::report::{LogObserver, ProgressObserver, Report, ReportOutput};
use kf_report::post_run;

/// Why a search could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// Bad task, sizes or backend.
    #[error(transparent)]
    Eval(#[from] kf_eval::EvalError),
    /// The backend is unknown, not in this build, or could not be opened.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The archive or run directory refused.
    #[error(transparent)]
    Archive(#[from] kf_archive::ArchiveError),
    /// The engine stopped with an error.
    #[error(transparent)]
    Engine(#[from] kf_core::CoreError),
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// A post-run hook failed ([`SearchBuilder::post_run`]; the report files' own failure is
    /// [`SearchError::Report`]).
    #[error(transparent)]
    PostRun(kf_report::Error),
    /// Distributed evaluation failed to start.
    #[cfg(feature = "dist")]
    #[error(transparent)]
    Distributed(#[from] kf_dist::DistError),
    /// A kernel template or structural mutator could not be built.
    #[error(transparent)]
    Template(#[from] kf_mutate::MutateError),
    /// A shipped kernel's manifest could not be read.
    #[error(transparent)]
    Manifest(#[from] kf_manifest::ManifestError),
    /// The per-kernel tuning strategy is unknown ([`SearchBuilder::tune_strategy`]).
    #[error("tuning inside the search: {0}")]
    TuneStrategy(#[from] kf_tune::TuneError),
    /// Mutators were added beside the shipped ones ([`SearchBuilder::also_mutator`]) to a search
    /// whose mutator replaces them ([`SearchBuilder::mutator`]).
    #[error(
        "{added} mutator(s) were added beside the shipped ones (also_mutator), but the search's \
         mutator replaces them (mutator): mix them into the mutator given instead"
    )]
    MutatorsBesideReplaced {
        /// Mutators added.
        added: usize,
    },
    /// The shipped archive's settings were given ([`SearchBuilder::archive`],
    /// [`SearchBuilder::cvt`], …) to a search whose archive is another
    /// ([`SearchBuilder::archive_factory`]).
    #[error(
        "the shipped archive's settings were given, but the search's archive is one of its \
         own (archive_factory): set them on that archive instead"
    )]
    ArchiveSettingsUnused,
    /// No task was named ([`SearchBuilder::task`]).
    #[error("no task: name a built-in task or give a task file")]
    NoTask,
    /// An evaluation budget of zero.
    #[error("the evaluation budget must be at least 1")]
    NoEvaluations,
    /// No longer returned: task files travel with distributed jobs (`distributed::TaskBundle`,
    /// feature `dist`). Kept so that code matching it still compiles.
    #[error(
        "task files are evaluated on this machine: distributed workers do not receive task files yet"
    )]
    TaskFileDistributed,
    /// A task file could not be shipped with distributed jobs (a file outside its folder, too
    /// large, unreadable).
    #[cfg(feature = "dist")]
    #[error(transparent)]
    TaskBundle(#[from] distributed::TaskBundleError),
    /// The run directory already holds more evaluations than the budget.
    #[error(
        "the run directory {} already holds {recorded} evaluations; ask for at least that many to \
         resume or extend it, or use another output folder",
        path.display()
    )]
    RunDirAhead {
        /// The run directory.
        path: PathBuf,
        /// Evaluations it holds.
        recorded: u64,
    },
    /// The task has no kernel in the backend's language to start from.
    #[error("the {task} task has no {language:?} kernel to start from")]
    NoSeed {
        /// The task.
        task: String,
        /// The backend's kernel language.
        language: Language,
    },
    /// No shipped kernel of that name in that language.
    #[error("no shipped {kernel} kernel in {language}")]
    NoShippedKernel {
        /// The kernel's name.
        kernel: &'static str,
        /// The language asked for.
        language: Language,
    },
    /// No device here to name the workers' device kind after.
    #[error("no {backend} device here to name the workers' device kind ({source}); give the device kind")]
    NoLocalDevice {
        /// The backend.
        backend: String,
        /// Why its device could not be opened.
        source: BackendError,
    },
    /// No distributed worker of the device kind registered in time.
    #[error("no worker of device kind `{0}` registered within two minutes (start `kf worker`)")]
    NoWorker(String),
    /// A document (a profile, an archive snapshot, a worker's device facts) could not be
    /// (de)serialised.
    #[error("{what}: {source}")]
    Json {
        /// Which document.
        what: &'static str,
        /// What serde_json said.
        source: serde_json::Error,
    },
}

impl From<kf_report::Error> for SearchError {
    fn from(e: kf_report::Error) -> Self {
        match e {
            kf_report::Error::Report(e) => SearchError::Report(e),
            other => SearchError::PostRun(other),
        }
    }
}

/// The origin note of the task-baseline seed (`Origin::note` of the search's first seed, the
/// task's naive kernel): how a reader of a run's records finds the naive kernel's evaluations.
pub const BASELINE_NOTE: &str = "task baseline (naive)";

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
    /// Backend and device (the kind is a [`BackendKind`] name).
    pub backend: BackendSpec,
    /// Candidates evaluated at most (seeds included).
    pub evaluations: u64,
    /// Device evaluations at most: every configuration compiled and timed, the candidates'
    /// own and those tuned for them (`None`: only the candidate budget).
    pub device_evaluations: Option<u64>,
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
    /// The archive: one grid, or a CVT archive over continuous descriptors
    /// ([`cvt_features`]) (default [`defaults::ARCHIVE`]).
    pub archive: ArchiveKind,
    /// Archives evolving as islands, with migration (default [`defaults::ISLANDS`]: one).
    pub islands: usize,
    /// How each step's parent and mutator are picked, for the shipped mutators (default
    /// [`defaults::SCHEDULER`]: emitters under a bandit).
    pub scheduler: SchedulerKind,
    /// Steps (mutation + evaluation) in flight at once: 1 on one machine (one device); more
    /// keeps several distributed workers busy.
    pub in_flight: usize,
    /// Measure the device's roofline before a search on this machine when no characterisation
    /// of it is cached ([`backends::characterise_device`], `kf devices --characterise`), so
    /// roofline fractions are against measured peaks rather than the backend's estimates.
    pub characterise: bool,
    /// Measure the reference library at the task's size after the search, on this machine
    /// ([`reference::measure`]), for the report's `reference_gflops` and `reference_ratio`.
    pub reference: bool,
    /// Rounds of the final selection: after a search on this machine, the fastest elites are
    /// re-timed this many times each, alternating, and the one with the smallest median is
    /// the best kernel ([`final_selection`]); 0 names the fastest by its single measurement
    /// in the search.
    pub final_rounds: u32,
    /// Evaluate on workers through NATS JetStream and PostgreSQL instead of in this process.
    #[cfg(feature = "dist")]
    #[serde(skip)]
    pub distributed: Option<Distributed>,
}

/// Where a distributed search sends its jobs.
#[cfg(feature = "dist")]
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
    /// A candidate's tuning configurations sent out at once, as parallel jobs
    /// ([`TunedEvaluator::fanning_out`]); [`defaults::FAN_OUT_DISTRIBUTED`] from the command
    /// line.
    pub fan_out: usize,
    /// Send every job to the compile workers first (`kf worker --role compile`), which build
    /// it, answer the kernels that cannot run and pass the others on with their binaries to
    /// the execute workers ([`kf_dist::DistEvaluatorBuilder::compile_first`]).
    pub compile_first: bool,
}

impl SearchConfig {
    /// The shipped settings ([`defaults`]) for `task` at `sizes`: output in `runs/<task>`,
    /// OpenCL's default device, a progress bar.
    pub fn new(task: impl Into<String>, sizes: Sizes) -> Self {
        let task = task.into();
        SearchConfig {
            out: PathBuf::from("runs").join(&task),
            task,
            task_file: None,
            sizes,
            backend: BackendKind::default().spec(None),
            evaluations: defaults::EVALUATIONS,
            device_evaluations: None,
            wall: Some(defaults::WALL),
            seed: defaults::SEED,
            tune_budget: defaults::TUNE_BUDGET,
            tune_strategy: defaults::TUNE_STRATEGY.into(),
            eval: search_eval_config(),
            timeout: TimeoutPolicy::default(),
            progress: true,
            worker: None,
            in_flight: defaults::IN_FLIGHT,
            archive: defaults::ARCHIVE,
            islands: defaults::ISLANDS,
            scheduler: defaults::SCHEDULER,
            characterise: true,
            reference: true,
            final_rounds: defaults::FINAL_ROUNDS,
            #[cfg(feature = "dist")]
            distributed: None,
        }
    }

    /// The backend the config names.
    pub fn backend_kind(&self) -> Result<BackendKind, BackendError> {
        BackendKind::of(&self.backend)
    }

    fn is_distributed(&self) -> bool {
        #[cfg(feature = "dist")]
        {
            self.distributed.is_some()
        }
        #[cfg(not(feature = "dist"))]
        {
            false
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

/// What a search produced; `Ar` is the archive's type (the shipped [`SearchArchive`] unless
/// the search was given another with [`SearchBuilder::archive_factory`]).
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

/// The task's baseline as the first seed, then `extra` seeds; each with its manifest's first
/// parameter values.
pub fn seeds_for(
    task: &dyn KernelTask,
    language: Language,
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

impl<M, C, L, A, B> Search<M, C, L, A, B>
where
    M: Mutator + 'static,
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    /// The configuration the search runs with.
    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    /// The seeds the search starts from.
    pub fn seeds(&self) -> &[Candidate] {
        &self.seeds
    }

    /// Runs the search (call [`crate::init`] first in `main`; [`crate::init_with`] with a
    /// backend of one's own).
    pub fn run(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        self.start()?.run()
    }

    /// [`run`](Self::run), named for what it is: it blocks until the search is over.
    pub fn run_blocking(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        self.start()?.run()
    }

    /// Starts the search and hands it over to be driven step by step ([`SearchRun`]): the
    /// evaluator (and its workers), the run directory (resumed when it holds steps), the archive
    /// and the observers are set up as [`run`](Self::run) sets them up; `run` is `start` and
    /// then [`SearchRun::run`]. Call [`crate::init`] first in `main`.
    pub fn start(self) -> Result<SearchRun<C, L, A, B>, SearchError> {
        start_built(self)
    }
}

/// Where `classifier` would place a kernel before it is evaluated: its descriptor for the
/// source at those parameters with an evaluation that says only "correct" (a static
/// classifier's answer; one that needs measurements may predict nothing or the wrong cell,
/// which only changes which children are preferred). The shipped search's structural mutator
/// aims at empty cells with it, and its tuning keeps each kernel in the predicted cell.
pub fn cell_predictor<C: BehaviorClassifier + 'static>(classifier: &Arc<C>) -> CellPredictor {
    let classifier = Arc::clone(classifier);
    let judged = Evaluation::failed(Status::Correct, "");
    CellPredictor::new(move |source, params| {
        let candidate = Candidate::seed(source.clone(), params.clone());
        classifier
            .classify(&candidate, &judged)
            .ok()
            .map(|d| d.coords)
    })
}

/// Starts a built search: everything the run needs up to its first step.
fn start_built<M, C, L, A, B>(
    search: Search<M, C, L, A, B>,
) -> Result<SearchRun<C, L, A, B>, SearchError>
where
    M: Mutator + 'static,
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    let parts = search.part_names();
    let Search {
        config,
        task,
        seeds,
        proposer,
        mutator_type: _,
        classifier,
        archive: archive_factory,
        backend,
        strategy,
        evaluator: evaluator_factory,
        layer,
        stop,
        observers,
        post_run: post_run_hooks,
    } = search;
    let config = &config;
    let sizes = task.sizes();
    let work = task.describe().work;
    let device_count = DeviceEvaluations::with_limit(config.device_evaluations);
    let cells = cell_predictor(&classifier);
    let (evaluator, device) = evaluator_factory.make(&EvaluatorInput {
        config,
        sizes: &sizes,
        device_evaluations: &device_count,
        cells: &cells,
        backend: backend.as_ref(),
        strategy: &strategy,
    })?;
    let space = classifier.space().clone();
    // The shipped continuous descriptors when the archive asks for them (a CVT search whose
    // classifier gives none of its own); registers where the backend reports them.
    let registers = backend.reports_registers();
    let classifier = WithFacts::new(
        classifier,
        archive_factory.continuous_descriptors(),
        registers,
    );
    let mut budget = Budget::evaluations(config.evaluations);
    if let Some(w) = config.wall {
        budget = budget.with_wall(w);
    }
    std::fs::create_dir_all(&config.out).map_err(kf_eval::EvalError::Io)?;
    // A task file's copy beside the run, so that the output folder exports on its own.
    if let Some(job) = &config.task_file {
        task::record_task_file(job, &config.out).map_err(kf_eval::EvalError::Io)?;
    }
    // What may not change when the run is resumed or extended; the budget may.
    let mut run_config = serde_json::json!({
        "task": config.task, "sizes": sizes, "backend": config.backend,
        "device": device.name,
        "tune_budget": config.tune_budget, "tune_strategy": config.tune_strategy,
        "mutator": proposer.name(),
    });
    let archive_meta = archive_factory.record();
    if let (false, Some(map)) = (archive_meta.is_null(), run_config.as_object_mut()) {
        map.insert("archive".into(), archive_meta);
    }
    let meta = RunMeta::new(config.seed, &run_config)?.with_budget(&run_budget(config))?;
    let run_dir = RunDir::open_with(
        config.out.join("run"),
        meta,
        RunDirOptions {
            snapshot_every: defaults::SNAPSHOT_EVERY,
            ..RunDirOptions::default()
        },
    )?;
    let archive = archive_factory.build(&ArchiveInput {
        space: &space,
        run_dir: run_dir.path(),
        registers,
    })?;
    let recorded_evaluations: u64 = run_dir
        .read_records()?
        .iter()
        .map(|r| r.children.len() as u64)
        .sum();
    if recorded_evaluations > config.evaluations {
        return Err(SearchError::RunDirAhead {
            path: run_dir.path().to_path_buf(),
            recorded: recorded_evaluations,
        });
    }
    let extended_from = run_dir
        .extended_from()
        .and_then(|b| b.get("evaluations"))
        .and_then(serde_json::Value::as_u64);
    let mut progress = ProgressObserver::new(&space).with_budget(&budget);
    if !config.progress {
        progress = progress.without_bar();
    }
    let trace = progress.trace();
    let baseline = BaselineWatch::default();
    // The shipped evaluator's workers re-time the best kernels after the run; one's own
    // evaluator has none.
    let evaluator_handle = (&evaluator as &dyn std::any::Any)
        .downcast_ref::<SearchEvaluator>()
        .map(evaluator::handle);
    let evaluator = layer.layer(evaluator);
    // The device-evaluation budget stops the run through the same handle as Ctrl-C.
    let stop = stop.unwrap_or_default();
    let mut engine = Engine::new(proposer, evaluator, classifier, archive)
        .task(task.describe())
        .device(device.clone())
        .seeds(seeds)
        .seed(config.seed)
        .budget(budget)
        .max_in_flight(config.in_flight.max(1))
        .checkpoint(run_dir)
        .novelty(SourceNovelty, novelty::shipped_config())
        .add_observer(progress, ObserverMode::Always)
        .add_observer(LogObserver::new(&space), ObserverMode::Always)
        .add_observer(baseline.clone(), ObserverMode::Always);
    for (observer, mode) in observers {
        engine = engine.add_observer(observer, mode);
    }
    let engine = engine
        .add_observer(
            DeviceEvaluationCounter::new(device_count.clone(), stop.clone()),
            ObserverMode::Always,
        )
        .stop_on(stop);
    // Emitter statistics for the report; none for a single mutator (`--scheduler mix`).
    let scheduler = Some(engine.scheduler()).filter(|s| !s.is_single());
    let after = AfterRun {
        config: config.clone(),
        sizes,
        work,
        device_count,
        space,
        trace,
        baseline,
        evaluator_handle,
        scheduler,
        extended_from,
        device,
        parts,
        post_run: post_run_hooks,
    };
    Ok(SearchRun::new(engine.start()?, after))
}

/// What the end of a search needs from its start: the report, final selection, reference
/// measurement and explorer are made from it and the engine's result.
pub(crate) struct AfterRun {
    config: SearchConfig,
    sizes: Sizes,
    work: kf_core::Work,
    device_count: DeviceEvaluations,
    space: kf_core::DescriptorSpace,
    trace: crate::report::ProgressTrace,
    baseline: BaselineWatch,
    evaluator_handle: Option<evaluator::EvaluatorHandle>,
    scheduler: Option<Arc<kf_core::emitter::Scheduler>>,
    extended_from: Option<u64>,
    device: kf_core::DeviceFacts,
    parts: PartNames,
    /// The builder's post-run hooks, run after the shipped ones.
    post_run: Vec<Box<dyn PostRun>>,
}

/// Ends a search whose engine gave `result`: shuts the evaluator down, stores the distributed
/// snapshot, does the final selection and the reference measurement, writes the report and the
/// explorer.
pub(crate) fn conclude<Ar: Archive + Serialize>(
    after: AfterRun,
    result: Result<kf_core::RunResult<Ar>, kf_core::CoreError>,
) -> Result<SearchOutcome<Ar>, SearchError> {
    let AfterRun {
        config,
        sizes,
        work,
        device_count,
        space,
        trace,
        baseline,
        evaluator_handle,
        scheduler,
        extended_from,
        device,
        parts,
        post_run: post_run_hooks,
    } = after;
    let config = &config;
    // The local workers stay up to re-time the best kernel beside the reference library (a
    // fresh worker would prepare its inputs and baseline again); they stop after it.
    let (retimer, evaluator_after) = evaluator_handle.map_or((None, None), |h| h.into_parts());
    let result = result?;
    let archive = result.archive;
    #[cfg(feature = "dist")]
    if let Some(dist) = &evaluator_after {
        // The final archive joins the run's record in the database.
        let snapshot = serde_json::to_value(&archive).map_err(|source| SearchError::Json {
            what: "the archive snapshot",
            source,
        })?;
        let evaluations = result.summary.evaluations;
        dist.block_on(
            dist.store()
                .store_snapshot(dist.run(), evaluations, &snapshot),
        )?;
        dist.clone().shutdown();
    }
    #[cfg(not(feature = "dist"))]
    let _ = evaluator_after;
    let summary = result.summary;
    let elites = Archive::elites(&archive);
    let baseline_gflops = baseline.gflops();
    let report = Report::new(&space, &summary, elites.iter().copied())
        .device_evaluations(device_count.spent(), device_count.limit())
        // How the local workers were confined; a distributed run records it on each
        // evaluation row.
        .confinement(retimer.as_ref().and_then(IsolatedEvaluator::confinement))
        .baseline_gflops(baseline_gflops)
        .trace(trace.points())
        .title(format!("{} {}", config.task, sizes_text(&sizes)))
        .extra("device", &device.name)
        .extra("seed", config.seed)
        .extra("extended_from_evaluations", extended_from)
        .extra("emitters", scheduler.map(|s| s.stats()))
        .extra("parts", &parts);
    // The presentation is kf-report's post-run hooks: the final selection and the reference
    // comparison (re-timing on the local workers, which stay up for them: a fresh worker would
    // prepare its inputs and baseline again), the report files and the explorer page; then the
    // builder's own hooks.
    let mut finished = FinishedRun {
        task: &config.task,
        task_file: config.task_file.is_some(),
        sizes: &sizes,
        work: &work,
        out: &config.out,
        distributed: config.is_distributed(),
        device: &device,
        space: &space,
        summary: &summary,
        elites: &elites,
        retimer: retimer.as_ref().map(|r| r as &dyn Retime),
        report,
        output: None,
    };
    let mut hooks = post_run::shipped(config.final_rounds, config.reference);
    hooks.extend(post_run_hooks);
    let hooks_ran = finished.run_hooks(&mut hooks);
    if let Some(retimer) = &retimer {
        retimer.shutdown();
    }
    hooks_ran?;
    let report = finished.into_output()?;
    let best_gflops = elites
        .iter()
        .filter(|e| e.evaluation.status.is_correct())
        .filter_map(|e| e.evaluation.gflops)
        .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g))));
    let fittest = elites
        .iter()
        .filter(|e| e.evaluation.status.is_correct())
        .max_by(|a, b| a.fitness.cmp(&b.fitness));
    let best_seconds = fittest.and_then(|e| e.evaluation.timing.map(|t| t.median_s));
    let best_speedup = fittest.and_then(|e| e.evaluation.speedup);
    Ok(SearchOutcome {
        archive,
        summary,
        report,
        baseline_gflops,
        best_gflops,
        best_seconds,
        best_speedup,
        device_evaluations: device_count.spent(),
        extended_from,
    })
}

/// The run directory's record of the budget (which may change when a run is extended); the
/// device-evaluation limit only when there is one, so that run directories from before it
/// existed resume unchanged.
fn run_budget(config: &SearchConfig) -> serde_json::Value {
    let mut budget = serde_json::json!({
        "evaluations": config.evaluations,
        "wall_seconds": config.wall.map(|w| w.as_secs_f64()),
    });
    if let (Some(limit), Some(map)) = (config.device_evaluations, budget.as_object_mut()) {
        map.insert("device_evaluations".into(), limit.into());
    }
    budget
}

/// Runs the shipped search with `mutator` from `seeds` (the first seed should be the task
/// baseline: its throughput is the report's baseline): [`Search::builder`] with `config`,
/// `mutator` and `seeds`, and every other part the default. Call [`crate::init`] first in
/// `main`.
pub fn run_search<M: Mutator + 'static>(
    config: &SearchConfig,
    mutator: M,
    seeds: Vec<Candidate>,
    stop: Option<StopHandle>,
) -> Result<SearchOutcome, SearchError> {
    let mut builder = Search::builder()
        .config(config.clone())
        .mutator(mutator)
        .seeds(seeds);
    if let Some(stop) = stop {
        builder = builder.stop_on(stop);
    }
    builder.build()?.run()
}

/// The shipped evaluator for `config`: tuning around isolated workers on this machine, or
/// around distributed workers; and the device it evaluates on.
pub(crate) fn local_or_distributed(
    config: &SearchConfig,
    sizes: &Sizes,
    count: &DeviceEvaluations,
    cells: &CellPredictor,
    backend: &dyn kf_eval::DynBackendFactory,
    strategy: &Arc<dyn kf_tune::strategy::StrategyFactory>,
) -> Result<(SearchEvaluator, kf_core::DeviceFacts), SearchError> {
    #[cfg(feature = "dist")]
    if let Some(d) = &config.distributed {
        let (dist, device) = connect_distributed(config, d, sizes, backend)?;
        // Tuning stays here: each configuration is one job, cached by its own id (so close
        // calls are not measured again: the same configuration is answered from its result),
        // and a step's configurations go out together, over as many workers.
        let tuned = TunedEvaluator::with_strategy_factory(
            dist,
            config.tune_budget,
            Arc::clone(strategy),
            sizes.clone(),
            device.clone(),
        )
        .counting(count.clone())
        .keeping_cell(cells.clone())
        .fanning_out(d.fan_out);
        return Ok((Either::Right(tuned), device));
    }
    let worker = match &config.worker {
        Some(w) => w.clone(),
        None => WorkerCommand::current_exe()?,
    };
    if config.characterise {
        // Before the workers start: each reads the cache when it opens its evaluator.
        match crate::backends::characterise_with(backend, &config.backend) {
            Ok((c, cached)) => tracing::info!(
                "roofline of {}{}: {:.1} GFLOP/s, {:.1} GB/s sustained",
                c.device,
                if cached {
                    " (cached)"
                } else {
                    " (measured now, cached for later runs)"
                },
                c.peak_gflops,
                c.bandwidth_gbs
            ),
            Err(e) => {
                tracing::warn!("{e}; roofline fractions are against the backend's estimated peaks")
            }
        }
    }
    let mut builder =
        IsolatedEvaluator::builder(config.backend.clone(), config.task.clone(), sizes.clone());
    if let Some(job) = &config.task_file {
        builder = builder.task_file(job.clone());
    }
    let isolated = builder
        .command(worker)
        .config(config.eval.clone())
        .timeout(config.timeout)
        .build();
    let device = isolated.device()?;
    let tuned = TunedEvaluator::with_strategy_factory(
        isolated,
        config.tune_budget,
        Arc::clone(strategy),
        sizes.clone(),
        device.clone(),
    )
    .counting(count.clone())
    .keeping_cell(cells.clone())
    .remeasuring_close_calls(CLOSE_CALL_MARGIN);
    Ok((Either::Left(tuned), device))
}

/// Connects the distributed evaluator and finds the device the workers have: this machine's
/// when it has the same kind, else one a worker registered (waiting up to two minutes for the
/// first worker).
#[cfg(feature = "dist")]
fn connect_distributed(
    config: &SearchConfig,
    d: &Distributed,
    sizes: &Sizes,
    factory: &dyn kf_eval::DynBackendFactory,
) -> Result<(kf_dist::DistEvaluator, kf_core::DeviceFacts), SearchError> {
    use crate::distributed::{device_kind, TaskProfile};
    let backend = factory.name();
    let local = crate::backends::device_facts_with(factory, &config.backend);
    let kind = match (&d.device_kind, &local) {
        (Some(k), _) => k.clone(),
        (None, Ok(facts)) => device_kind(backend, facts),
        (None, Err(e)) => {
            return Err(SearchError::NoLocalDevice {
                backend: config.backend.kind.clone(),
                source: e.clone(),
            })
        }
    };
    let run = match &d.run {
        Some(r) => r.clone(),
        None => default_run_id(config),
    };
    let profile = TaskProfile {
        task: config.task.clone(),
        sizes: sizes.clone(),
        backend: backend.to_owned(),
        eval: config.eval.clone(),
        timeout: config.timeout.into(),
        // The task file, its reference and kernels go with the jobs, hashed and signed.
        task_file: config
            .task_file
            .as_ref()
            .map(crate::distributed::TaskBundle::from_job)
            .transpose()?,
    };
    let profile = serde_json::to_value(&profile).map_err(|source| SearchError::Json {
        what: "the task profile",
        source,
    })?;
    let dist = kf_dist::DistEvaluator::builder(d.dist.clone(), run, kind.clone(), profile)
        .compile_first(d.compile_first)
        .connect()?;
    if let Ok(facts) = local {
        if device_kind(backend, &facts) == kind {
            return Ok((dist, facts));
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = dist.block_on(dist.store().worker_device(&kind))? {
            let facts = serde_json::from_value(v).map_err(|source| SearchError::Json {
                what: "a worker registered bad device facts",
                source,
            })?;
            return Ok((dist, facts));
        }
        if std::time::Instant::now() > deadline {
            return Err(SearchError::NoWorker(kind));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A run id from the task, the output folder and the seed: the same command resumes the same
/// run (and finds its results on the queue).
#[cfg(feature = "dist")]
pub fn default_run_id(config: &SearchConfig) -> String {
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

/// For this crate's doc example: whether the OpenCL runtime opens here. When it does not, it
/// prints why and the example skips, as `kf_backend_opencl::testing` does in tests (and, as
/// there, `KF_REQUIRE_OPENCL=1` makes a missing runtime a failure instead).
#[doc(hidden)]
#[track_caller]
pub fn doctest_backend_available() -> bool {
    #[cfg(feature = "opencl")]
    {
        kf_backend_opencl::testing::backend_or_skip().is_some()
    }
    #[cfg(not(feature = "opencl"))]
    {
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::OpenCl,
            "this build has no OpenCL backend (feature `opencl`)",
        );
        false
    }
}

#[cfg(test)]
mod summary_tests {
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
