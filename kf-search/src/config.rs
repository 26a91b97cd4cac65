//! What a search is asked to do: [`SearchConfig`] (budget, run values, the protocol).

use std::path::PathBuf;
use std::time::Duration;

use kf_eval::task::Sizes;
use kf_eval::{BackendSpec, EvalConfig, TimeoutPolicy, WorkerCommand};
use serde::Serialize;

use crate::{backends, defaults};

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
    /// Backend and device (the kind is a backend factory's name: [`backends::factory_for`]
    /// turns a shipped one's into its factory).
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
    /// Measure the device's roofline before a search on this machine when no characterisation
    /// of it is cached ([`backends::characterise_device`](crate::backends::characterise_device), `kf devices --characterise`), so
    /// roofline fractions are against measured peaks rather than the backend's estimates.
    pub characterise: bool,
    /// Measure the reference library at the task's size after the search, on this machine
    /// ([`reference::measure`](crate::reference::measure)), for the report's `reference_gflops` and `reference_ratio`.
    pub reference: bool,
    /// Rounds of the final selection: after a search on this machine, the fastest elites are
    /// re-timed this many times each, alternating, and the one with the smallest median is
    /// the best kernel ([`final_selection`](crate::final_selection)); 0 names the fastest by its single measurement
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
    /// ([`TunedEvaluator::fanning_out`](crate::TunedEvaluator::fanning_out)); [`defaults::FAN_OUT_DISTRIBUTED`] from the command
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
            backend: BackendSpec::new(backends::DEFAULT_BACKEND),
            evaluations: defaults::EVALUATIONS,
            device_evaluations: None,
            wall: Some(defaults::WALL),
            seed: defaults::SEED,
            tune_budget: defaults::TUNE_BUDGET,
            eval: search_eval_config(),
            timeout: TimeoutPolicy::default(),
            progress: true,
            worker: None,
            in_flight: defaults::IN_FLIGHT,
            characterise: true,
            reference: true,
            final_rounds: defaults::FINAL_ROUNDS,
            #[cfg(feature = "dist")]
            distributed: None,
        }
    }

    pub(crate) fn is_distributed(&self) -> bool {
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
