//! Live tuning of one kernel through the isolated evaluator (`kf tune --kernel K.toml`):
//! [`tune_live`] opens the evaluator and the Kernel Tuner cache file (resuming from it),
//! evaluates the manifest's defaults and then what the strategy proposes, compiling batches
//! ahead of their timing, confirms the best configuration and says where the time went.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use kf_search::live_tune::{tune_live, LiveTuneOptions};
//!
//! kf_search::init(); // evaluation workers re-execute this program: first call
//! let mut options = LiveTuneOptions::new("kernels/gemm_tiled.toml");
//! options.task = Some("gemm".into());
//! options.size = "M=256,N=256,K=256".into();
//! options.budget = 10;
//! let outcome = tune_live(&options, &mut ())?;
//! println!("{}", outcome.render_text());
//! # Ok(())
//! # }
//! ```

mod objective;
mod options;
mod profile;
mod progress;

pub use objective::{CompileAhead, LiveObjective};
pub use options::{LiveTuneOptions, TuneStart};
pub use profile::RunProfile;
#[cfg(feature = "progress")]
pub use progress::TuneBar;
pub use progress::TuneProgress;

use std::path::{Path, PathBuf};
use std::time::Instant;

use kf_core::{Evaluation, ParamValues};
use kf_eval::task::Sizes;
use kf_eval::{
    BackendSpec, EvalConfig, EvalError, IsolatedEvaluator, TimeoutPolicy, WorkerCommand,
    TUNING_REUSE_INPUTS,
};
use kf_manifest::{Manifest, ManifestError};
use kf_tune::{
    strategy, CacheKey, KtCache, KtWriter, Outcome, ResultCache, Space, TuneError, TuneResult,
    Tuner,
};
use serde_json::{json, Value};

use crate::task::{ChosenTask, TaskChoiceError};
use crate::BackendError;

/// Why a live tuning run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveTuneError {
    /// A budget of zero configurations.
    #[error("--budget must be at least 1")]
    NoBudget,
    /// The task could not be chosen.
    #[error(transparent)]
    Task(#[from] TaskChoiceError),
    /// The backend is unknown or not in this build.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The kernel's manifest is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The evaluator failed.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// The space, the strategy, the cache file or the tuner failed.
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// The cache file's folder could not be made.
    #[error("creating {}", path.display())]
    CacheDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No configuration satisfies the manifest's constraints at these sizes.
    #[error("no configuration of {} satisfies its constraints at these sizes", kernel.display())]
    EmptySpace {
        /// The kernel's manifest.
        kernel: PathBuf,
    },
    /// Every evaluated configuration failed.
    #[error("no configuration evaluated correct ({failures} failures)")]
    NoCorrect {
        /// Configurations that failed.
        failures: usize,
    },
}

/// How the manifest's defaults did, when the run started from them.
#[derive(Debug, Clone)]
pub struct DefaultsOutcome {
    /// The defaults.
    pub config: ParamValues,
    /// Their time, ms, when they ran correctly.
    pub time_ms: Option<f64>,
    /// Why they failed, when they did.
    pub failure: Option<String>,
    /// How many times as fast as the defaults the best configuration is.
    pub best_speedup: Option<f64>,
    /// The defaults stayed the best configuration found.
    pub stayed_best: bool,
}

/// What a live tuning run found.
#[derive(Debug, Clone)]
pub struct LiveTuneOutcome {
    /// The kernel's manifest.
    pub kernel: PathBuf,
    /// The task's name.
    pub task: String,
    /// The sizes tuned at.
    pub sizes: Sizes,
    /// The device's name.
    pub device: String,
    /// The device facts the manifest's constraints were evaluated with
    /// ([`kf_core::DeviceFacts::symbols`]), so that another tool can judge validity alike.
    pub device_symbols: Vec<(&'static str, i64)>,
    /// The random seed.
    pub seed: u64,
    /// The budget.
    pub budget: usize,
    /// Valid configurations in the space.
    pub valid_configurations: u64,
    /// The tuner's result.
    pub result: TuneResult,
    /// The best configuration.
    pub best: ParamValues,
    /// The best configuration's evaluation, with every check.
    pub confirmed: Evaluation,
    /// The Kernel Tuner cache file.
    pub cache: PathBuf,
    /// Where the time went.
    pub profile: RunProfile,
    /// What was evaluated before the strategy proposed.
    pub start: TuneStart,
    /// How the manifest's defaults did, when the run started from them.
    pub defaults: Option<DefaultsOutcome>,
}

impl LiveTuneOutcome {
    /// The summary `kf tune --json` prints.
    pub fn to_json(&self) -> Value {
        let result = &self.result;
        let defaults = self.defaults.as_ref().map(|d| {
            json!({
                "config": d.config, "time_ms": d.time_ms, "failure": d.failure,
                "best_speedup": d.best_speedup,
            })
        });
        json!({
            "kernel": self.kernel, "task": self.task, "sizes": self.sizes, "device": self.device,
            "device_symbols": self.device_symbols.iter()
                .map(|(name, value)| (name.to_string(), json!(value)))
                .collect::<serde_json::Map<_, _>>(),
            "strategy": result.strategy, "seed": self.seed, "budget": self.budget,
            "evaluations": result.evaluations, "cache_hits": result.cache_hits,
            "failures": result.failures, "valid_configurations": self.valid_configurations,
            "best_config": self.best, "best_time_ms": result.best_time,
            "confirmed_status": self.confirmed.status, "gflops": self.confirmed.gflops,
            "speedup": self.confirmed.speedup, "cache": self.cache,
            "profile": self.profile.to_json(), "start": self.start.name(),
            "defaults": defaults,
        })
    }

    /// The summary `kf tune` prints (lines ending in a newline).
    pub fn render_text(&self) -> String {
        let (result, confirm) = (&self.result, &self.confirmed);
        let mut out = format!(
            "{} of {} valid configurations evaluated ({} from the cache, {} failed)\nbest: {}\n",
            result.evaluations,
            self.valid_configurations,
            result.cache_hits,
            result.failures,
            self.best
        );
        if let Some(d) = &self.defaults {
            out += &match (d.time_ms, d.best_speedup) {
                (Some(t), Some(_)) if d.stayed_best => format!(
                    "the manifest's defaults ({t:.3} ms) stayed the best configuration found\n"
                ),
                (Some(t), Some(x)) => {
                    format!("the manifest's defaults: {t:.3} ms; the best is {x:.2}x as fast\n")
                }
                _ => format!(
                    "the manifest's defaults failed: {}\n",
                    d.failure.as_deref().unwrap_or("no time")
                ),
            };
        }
        out += &format!(
            "confirmed: {} · {} · {} over the task baseline\nKernel Tuner cache: {}\n",
            confirm.status,
            confirm
                .gflops
                .map_or("-".into(), |g| format!("{g:.2} GFLOP/s")),
            confirm.speedup.map_or("-".into(), |s| format!("{s:.2}x")),
            self.cache.display()
        );
        out
    }
}

/// The manifest's defaults when `start` asks for them and they are a valid configuration at
/// these sizes; otherwise `None`, with a note saying why.
fn start_configuration(
    start: TuneStart,
    manifest: &Manifest,
    space: &Space,
    progress: &mut dyn TuneProgress,
) -> Option<ParamValues> {
    if start == TuneStart::None {
        return None;
    }
    let defaults = manifest.default_params();
    let why = match space.point_of(&defaults) {
        Ok(p) if space.contains(&p) => return Some(defaults),
        Ok(p) => space.violated(&p).map_or_else(
            || "are outside the space".to_owned(),
            |rule| format!("break `{rule}`"),
        ),
        Err(e) => e.to_string(),
    };
    progress.note(&format!(
        "note: the manifest's defaults ({defaults}) {why} at these sizes; the strategy chooses \
         every configuration"
    ));
    None
}

/// The defaults' outcome in `result` (evaluated first, or found in the cache).
fn outcome_of_defaults<'r>(result: &'r TuneResult, defaults: &ParamValues) -> Option<&'r Outcome> {
    let key = defaults.canonical_key();
    result
        .trials
        .iter()
        .find(|t| t.config.canonical_key() == key)
        .map(|t| &t.outcome)
}

/// The evaluator that times each configuration: the tuning protocol (inputs reused), or the
/// search's full protocol with `full_timing`.
fn timing_evaluator(
    chosen: &ChosenTask,
    spec: &BackendSpec,
    worker_command: &WorkerCommand,
    full_timing: bool,
) -> IsolatedEvaluator {
    let config = if full_timing {
        EvalConfig {
            reuse_inputs: TUNING_REUSE_INPUTS,
            ..EvalConfig::default()
        }
    } else {
        EvalConfig::for_tuning()
    };
    chosen
        .evaluator(spec.clone())
        .command(worker_command.clone())
        .config(chosen.eval_config(config))
        .timeout(chosen.timeout(TimeoutPolicy::default()))
        .build()
}

/// The tuning cache's path (the option, or `runs/tune/<kernel>_<task>_<sizes>.json`), its
/// folder created.
fn cache_path(
    options: &LiveTuneOptions,
    task_name: &str,
    size_text: &[String],
) -> Result<PathBuf, LiveTuneError> {
    let path = options.cache.clone().unwrap_or_else(|| {
        let stem = options
            .kernel
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        PathBuf::from("runs/tune").join(format!("{stem}_{task_name}_{}.json", size_text.join("x")))
    });
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| LiveTuneError::CacheDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    Ok(path)
}

/// What `kf tune` sets up before tuning: the task, the backend, the kernel and its manifest,
/// and the evaluator that times each configuration on the device.
struct LiveSetup {
    chosen: ChosenTask,
    spec: BackendSpec,
    worker_command: WorkerCommand,
    evaluator: IsolatedEvaluator,
    device: kf_core::DeviceFacts,
    manifest: Manifest,
    source: kf_core::KernelSource,
}

impl LiveSetup {
    fn prepare(options: &LiveTuneOptions) -> Result<Self, LiveTuneError> {
        if options.budget == 0 {
            return Err(LiveTuneError::NoBudget);
        }
        let chosen = ChosenTask::resolve(
            options.task.as_deref(),
            options.task_file.as_deref(),
            &options.size,
        )?;
        let spec = BackendSpec::new(&options.backend).with_device(options.device.clone());
        crate::backends::factory_for(&spec)?;
        let (manifest, source) = Manifest::load(&options.kernel)?;
        let worker_command = WorkerCommand::current_exe()?;
        let evaluator = timing_evaluator(&chosen, &spec, &worker_command, options.full_timing);
        let device = evaluator.device()?;
        Ok(LiveSetup {
            chosen,
            spec,
            worker_command,
            evaluator,
            device,
            manifest,
            source,
        })
    }
}

/// The tuning loop of `kf tune`: the tuner over the space, each configuration timed by the
/// setup's evaluator (with a pool compiling ahead), every outcome appended to the cache.
struct TuningLoop<'a> {
    setup: &'a LiveSetup,
    options: &'a LiveTuneOptions,
    space: &'a Space,
    sizes: &'a Sizes,
    start: Option<ParamValues>,
}

/// What the tuning loop found, and where its time went.
struct Tuned {
    result: TuneResult,
    /// Every evaluation of the run, by the configuration's canonical key.
    evaluations: std::collections::BTreeMap<String, Evaluation>,
    tuning_s: f64,
    spent: kf_eval::EvalProfile,
    ahead: objective::CompileAhead,
}

impl TuningLoop<'_> {
    /// Runs the tuner to its budget; the cache is closed (its lock released) at the end.
    fn run(
        self,
        cache: TuningCache,
        progress: &mut dyn TuneProgress,
    ) -> Result<Tuned, LiveTuneError> {
        let (setup, options) = (self.setup, self.options);
        let TuningCache {
            writer,
            key,
            mut results,
            ..
        } = cache;
        let width = options.compile_ahead.max(1);
        // The pool compiles a batch's other configurations; the timing worker compiles its
        // first.
        let compilers = (width > 1).then(|| {
            setup
                .chosen
                .evaluator(setup.spec.clone())
                .command(setup.worker_command.clone())
                .config(setup.evaluator.config().clone())
                .timeout(setup.chosen.timeout(TimeoutPolicy::default()))
                .workers(width - 1)
                .build()
        });
        let mut objective = LiveObjective::new(
            &setup.evaluator,
            compilers.as_ref().map(|pool| (pool, width)),
            &setup.source,
            writer,
            &mut *progress,
            setup.chosen.task.describe().work.flops,
        );
        if options.full_timing {
            objective = objective.full_timing();
        }
        let mut s = strategy::by_name(&options.strategy)?;
        let loop_started = Instant::now();
        let mut tuner = Tuner::new(self.space, options.budget)
            .seed(options.seed)
            .fan_out(width)
            .start_with(self.start);
        // A tagged manifest (`tags = ["matmul"]`) brings the shipped rule priors.
        let prior = crate::tuning_evaluator::rule_prior(
            &setup.manifest,
            self.space,
            self.sizes,
            &setup.device,
        );
        if let Some(weights) = prior {
            tuner = tuner.prior(weights);
        }
        let result = tuner.run_cached(s.as_mut(), &mut objective, &mut results, &key);
        if let Some(pool) = &compilers {
            pool.shutdown();
        }
        let result = result?;
        let tuning_s = loop_started.elapsed().as_secs_f64();
        let (spent, ahead) = (objective.spent, objective.ahead);
        let evaluations = std::mem::take(&mut objective.evaluations);
        let writer = objective.into_writer();
        progress.finished();
        writer.close()?;
        Ok(Tuned {
            result,
            evaluations,
            tuning_s,
            spent,
            ahead,
        })
    }
}

/// The run's tuning cache: its file (locked while this run writes it), the tuner's key, and
/// the result cache holding what earlier runs measured (free now).
struct TuningCache {
    path: PathBuf,
    writer: KtWriter,
    key: CacheKey,
    results: ResultCache,
}

impl TuningCache {
    fn open(
        options: &LiveTuneOptions,
        task_name: &str,
        sizes: &Sizes,
        device_name: &str,
        manifest: &Manifest,
        source: &kf_core::KernelSource,
        progress: &mut dyn TuneProgress,
    ) -> Result<Self, LiveTuneError> {
        let size_text: Vec<String> = sizes.values().map(i64::to_string).collect();
        let path = cache_path(options, task_name, &size_text)?;
        let header = KtCache::new(
            device_name.to_owned(),
            source.entry.clone(),
            json!(sizes.values().collect::<Vec<_>>()),
            manifest
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        let (writer, previous) = open_cache(&path, &header, progress)?;
        let key = CacheKey::new(
            source.content_hash(),
            device_name.to_owned(),
            size_text.join(","),
        );
        let results = resumed_results(&previous, &key, &path, progress)?;
        Ok(TuningCache {
            path,
            writer,
            key,
            results,
        })
    }
}

/// Opens the tuning cache for writing, with what it already holds. The writer holds the
/// cache's lock until it is closed at the end of the run, so a second `kf tune` on the same
/// cache waits here (saying so) and then resumes from everything the first one wrote.
fn open_cache(
    cache_path: &Path,
    header: &KtCache,
    progress: &mut dyn TuneProgress,
) -> Result<(KtWriter, KtCache), LiveTuneError> {
    match KtWriter::try_open(cache_path, header) {
        Err(TuneError::CacheLocked { path, lock }) => {
            progress.note(&format!(
                "waiting for {}: another kf tune run is writing it (it holds {}); this run \
                 starts when that one ends, with its configurations",
                path.display(),
                lock.display()
            ));
            Ok(KtWriter::open(cache_path, header)?)
        }
        opened => Ok(opened?),
    }
}

/// The tuner's result cache holding the configurations an earlier run measured under `key`
/// (they cost nothing now), saying how many.
fn resumed_results(
    previous: &KtCache,
    key: &CacheKey,
    cache_path: &Path,
    progress: &mut dyn TuneProgress,
) -> Result<ResultCache, LiveTuneError> {
    let mut results = ResultCache::in_memory();
    for entry in previous.entries.values() {
        results.insert(key, &entry.params, &entry.outcome)?;
    }
    let resumed = previous.entries.len();
    if resumed > 0 {
        progress.resumed(&format!(
            "resuming: {resumed} configurations from {}",
            cache_path.display()
        ));
    }
    Ok(results)
}

/// How the starting configuration `d` (the manifest's defaults) did against the best one.
fn defaults_outcome(
    result: &TuneResult,
    d: &ParamValues,
    best: &ParamValues,
) -> Option<DefaultsOutcome> {
    let outcome = outcome_of_defaults(result, d)?;
    let time = outcome.time();
    Some(DefaultsOutcome {
        config: d.clone(),
        time_ms: time,
        failure: match outcome {
            Outcome::Failed(f) => Some(f.to_string()),
            Outcome::Time(_) => None,
        },
        best_speedup: time.zip(result.best_time).map(|(d, b)| d / b),
        stayed_best: d.canonical_key() == best.canonical_key(),
    })
}

/// Tunes one kernel live, as `kf tune` does; see the module documentation. `progress` hears
/// of every configuration evaluated.
pub fn tune_live(
    options: &LiveTuneOptions,
    progress: &mut dyn TuneProgress,
) -> Result<LiveTuneOutcome, LiveTuneError> {
    let started = Instant::now();
    let setup = LiveSetup::prepare(options)?;
    let (manifest, device) = (&setup.manifest, &setup.device);
    let sizes = setup.chosen.task.sizes();
    let mut profile = RunProfile {
        startup_s: started.elapsed().as_secs_f64(),
        ..RunProfile::default()
    };
    let space = Space::from_manifest(manifest, &sizes, device)?;
    let valid = kf_core::ParamSpace::count(&space)?;
    if valid == 0 {
        return Err(LiveTuneError::EmptySpace {
            kernel: options.kernel.clone(),
        });
    }

    let start = start_configuration(options.start, manifest, &space, progress);

    let cache = TuningCache::open(
        options,
        &setup.chosen.name(),
        &sizes,
        &device.name,
        manifest,
        &setup.source,
        progress,
    )?;
    let cache_path = cache.path.clone();
    let tuned = TuningLoop {
        setup: &setup,
        options,
        space: &space,
        sizes: &sizes,
        start: start.clone(),
    }
    .run(cache, progress)?;
    let (result, evaluations) = (tuned.result, tuned.evaluations);
    profile.tuning_s = tuned.tuning_s;
    profile.evaluations = tuned.spent;
    profile.compile_ahead = tuned.ahead;
    profile.configurations = result.evaluations;
    let LiveSetup {
        chosen,
        evaluator,
        device,
        source,
        ..
    } = setup;
    let task_name = chosen.name();

    let Some(best) = result.best_config.clone() else {
        evaluator.shutdown();
        return Err(LiveTuneError::NoCorrect {
            failures: result.failures,
        });
    };
    // The winner's evaluation, with every check, when this run measured it; else (it came
    // from an earlier run's cache) a fresh one.
    let confirmed = match evaluations.get(&best.canonical_key()).cloned() {
        Some(e) => Ok(e),
        None => {
            let confirm_started = Instant::now();
            let e = evaluator.evaluate_blocking(&source, &best);
            profile.confirm_s = confirm_started.elapsed().as_secs_f64();
            e
        }
    };
    evaluator.shutdown();
    let confirmed = confirmed?;
    let defaults = start
        .as_ref()
        .and_then(|d| defaults_outcome(&result, d, &best));
    Ok(LiveTuneOutcome {
        kernel: options.kernel.clone(),
        task: task_name,
        sizes,
        device_symbols: device.symbols(),
        device: device.name,
        seed: options.seed,
        budget: options.budget,
        valid_configurations: valid,
        result,
        best,
        confirmed,
        cache: cache_path,
        profile,
        start: options.start,
        defaults,
    })
}
