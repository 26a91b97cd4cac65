//! `kf tune`: live tuning of a kernel through the evaluator, and `kf tune replay`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use kernelfoundry::core::ParamValues;
use kernelfoundry::eval::{EvalConfig, TimeoutPolicy, WorkerCommand, TUNING_REUSE_INPUTS};
use kernelfoundry::manifest::Manifest;
use kernelfoundry::tune::cli::{render_text, replay_main, ReplayArgs};
use kernelfoundry::tune::{
    strategy, CacheKey, KtCache, KtWriter, Outcome, ResultCache, Space, TuneError, TuneResult,
    Tuner,
};
use serde_json::json;

use crate::tune_objective::LiveObjective;
use crate::tune_profile::RunProfile;

/// Arguments of `kf tune`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct TuneArgs {
    #[command(subcommand)]
    command: Option<TuneCommand>,
    #[command(flatten)]
    live: Option<LiveArgs>,
}

#[derive(Subcommand)]
enum TuneCommand {
    /// Replay a Kernel Tuner cache: the space is every configuration in the file, and
    /// evaluating one returns its recorded time.
    Replay(ReplayCmdArgs),
}

/// Arguments of `kf tune replay` (kf-tune's [`ReplayArgs`], parsed here: the library has no
/// command line).
#[derive(Debug, Clone, Args)]
struct ReplayCmdArgs {
    /// Kernel Tuner cache file (JSON, plain or gzip-compressed).
    #[arg(long)]
    cache: std::path::PathBuf,
    /// Strategy name (default, exhaustive, random, simulated_annealing, genetic_algorithm,
    /// greedy_ils, bayes_opt, forest, bandit).
    #[arg(long, default_value = "default")]
    strategy: String,
    /// Budget: distinct configurations evaluated (default: 2% of the valid configurations).
    #[arg(long)]
    budget: Option<usize>,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print one JSON object (otherwise a short text summary).
    #[arg(long)]
    json: bool,
    /// Also write every configuration of the run to this file in the FAIR T4 results format.
    #[arg(long)]
    t4: Option<std::path::PathBuf>,
}

impl From<ReplayCmdArgs> for ReplayArgs {
    fn from(a: ReplayCmdArgs) -> Self {
        ReplayArgs {
            cache: a.cache,
            strategy: a.strategy,
            budget: a.budget,
            seed: a.seed,
            json: a.json,
            t4: a.t4,
        }
    }
}

/// Live tuning of one kernel on the default device.
#[derive(Args)]
struct LiveArgs {
    /// Built-in task: gemm or softmax.
    #[arg(long, conflicts_with = "task_file")]
    task: Option<String>,
    /// A task file (TOML): your own operator with a Python, kernel or Rust reference.
    #[arg(long, value_name = "T.toml")]
    task_file: Option<PathBuf>,
    /// Problem sizes, such as M=1024,N=1024,K=1024.
    #[arg(long, default_value = "")]
    size: String,
    /// The kernel's TOML manifest; its `[params]` and `[constraints]` define the space.
    #[arg(long)]
    kernel: PathBuf,
    /// Strategy (default, exhaustive, random, simulated_annealing, genetic_algorithm,
    /// greedy_ils, bayes_opt, forest, bandit).
    #[arg(long, default_value = "default")]
    strategy: String,
    /// Distinct configurations to evaluate (cache hits are free).
    #[arg(long, default_value_t = 30)]
    budget: usize,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Kernel Tuner cache file to append to and resume from (default: `runs/tune/<kernel>_<task>_<sizes>.json`).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Backend.
    #[arg(long, default_value_t = kernelfoundry::search::BackendKind::OpenCl)]
    backend: kernelfoundry::search::BackendKind,
    /// Device: a name substring, an index, cpu or gpu.
    #[arg(long)]
    device: Option<String>,
    /// Print one JSON object at the end.
    #[arg(long)]
    json: bool,
    /// Print where the time went: per phase of a configuration's evaluation (compile, input
    /// sets, verification, baseline, timing, transfers, process hop) and around the loop.
    /// `--json` always carries the same figures under `profile`.
    #[arg(long)]
    profile_time: bool,
    /// Time every configuration in full and the baseline in every evaluation, as a search
    /// does (default: stop timing configurations that are clearly slower than the best so
    /// far, and re-measure the baseline every 64th evaluation; the checks are the same).
    #[arg(long)]
    full_timing: bool,
    /// Configurations compiled at once, one worker process each, before they are timed one
    /// after another (the tuner asks for this many at a time). 1 compiles each configuration
    /// just before timing it. Compiling while another configuration is timed would slow its
    /// trials on the CPU device, whose cores are the host's; compiling a batch first spreads
    /// the single-threaded compiler over the cores and leaves every timed trial alone. A
    /// batch is chosen with the outcomes of earlier batches only: the same seed and width
    /// give the same run.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    compile_ahead: u16,
    /// What is evaluated before the strategy proposes anything. `defaults`: the manifest's
    /// default configuration (each parameter's first value; the best kernel a search writes
    /// lists the values it was measured with first), so the tuned best is never slower than
    /// the kernel you had and the summary says how much faster it is; it costs one
    /// configuration of the budget. `none`: the strategy chooses every configuration (what a
    /// comparison of strategies wants). Defaults that break a constraint at these sizes are
    /// skipped, with a note.
    #[arg(long, value_enum, default_value_t = Start::Defaults)]
    start: Start,
}

/// What `kf tune` evaluates before the strategy proposes (`--start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Start {
    /// The manifest's default configuration.
    Defaults,
    /// Nothing: the strategy chooses every configuration.
    None,
}

/// The manifest's defaults when `--start defaults` asks for them and they are a valid
/// configuration at these sizes; otherwise `None`, with a note saying why.
fn start_configuration(start: Start, manifest: &Manifest, space: &Space) -> Option<ParamValues> {
    if start == Start::None {
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
    eprintln!(
        "note: the manifest's defaults ({defaults}) {why} at these sizes; the strategy chooses \
         every configuration"
    );
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

pub(crate) fn run(args: TuneArgs) -> anyhow::Result<ExitCode> {
    match (args.command, args.live) {
        (Some(TuneCommand::Replay(args)), _) => {
            let args = ReplayArgs::from(args);
            let summary = replay_main(&args)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                println!("{}", render_text(&summary));
            }
            Ok(ExitCode::SUCCESS)
        }
        (None, Some(live)) => run_live(live),
        (None, None) => {
            bail!("give --task or --task-file, --kernel and --budget to tune, or use `kf tune replay`")
        }
    }
}

fn run_live(args: LiveArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    if args.budget == 0 {
        bail!("--budget must be at least 1");
    }
    let chosen = crate::task_arg::ChosenTask::resolve(
        args.task.as_deref(),
        args.task_file.as_deref(),
        &args.size,
    )?;
    let task = &chosen.task;
    let task_name = chosen.name();
    let sizes = task.sizes();
    let spec = args.backend.spec(args.device.clone());
    kernelfoundry::backends::check(&spec)?;
    let (manifest, source) = Manifest::load(&args.kernel)?;
    let worker_command = WorkerCommand::current_exe()?;
    let evaluator = chosen
        .evaluator(spec)
        .command(worker_command.clone())
        .config(chosen.eval_config(if args.full_timing {
            EvalConfig {
                reuse_inputs: TUNING_REUSE_INPUTS,
                ..EvalConfig::default()
            }
        } else {
            EvalConfig::for_tuning()
        }))
        .timeout(chosen.timeout(TimeoutPolicy::default()))
        .build();
    let device = evaluator.device()?;
    let mut profile = RunProfile {
        startup_s: started.elapsed().as_secs_f64(),
        ..RunProfile::default()
    };
    let space = Space::from_manifest(&manifest, &sizes, &device)?;
    let valid = kernelfoundry::core::ParamSpace::count(&space)?;
    if valid == 0 {
        bail!(
            "no configuration of {} satisfies its constraints at these sizes",
            args.kernel.display()
        );
    }

    let start = start_configuration(args.start, &manifest, &space);

    let size_text: Vec<String> = sizes.values().map(i64::to_string).collect();
    let cache_path = args.cache.clone().unwrap_or_else(|| {
        let stem = args
            .kernel
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        PathBuf::from("runs/tune").join(format!(
            "{stem}_{}_{}.json",
            task_name,
            size_text.join("x")
        ))
    });
    if let Some(dir) = cache_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let header = KtCache::new(
        device.name.clone(),
        source.entry.clone(),
        json!(sizes.values().collect::<Vec<_>>()),
        manifest
            .params
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    // The writer holds the cache's lock until it is closed at the end of the run, so a second
    // `kf tune` on the same cache waits here and then resumes from everything this one wrote.
    let (writer, previous) = match KtWriter::try_open(&cache_path, &header) {
        Err(TuneError::CacheLocked { path, lock }) => {
            eprintln!(
                "waiting for {}: another kf tune run is writing it (it holds {}); this run \
                 starts when that one ends, with its configurations",
                path.display(),
                lock.display()
            );
            KtWriter::open(&cache_path, &header)?
        }
        opened => opened?,
    };
    // Earlier measurements are free: the tuner finds them in its result cache.
    let key = CacheKey::new(
        source.content_hash(),
        device.name.clone(),
        size_text.join(","),
    );
    let mut results = ResultCache::in_memory();
    let mut resumed = 0usize;
    for entry in previous.entries.values() {
        results.insert(&key, &entry.params, &entry.outcome)?;
        resumed += 1;
    }

    let bar = ProgressBar::new(args.budget as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} configurations · {msg} · ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    if resumed > 0 {
        bar.println(format!(
            "resuming: {resumed} configurations from {}",
            cache_path.display()
        ));
    }
    let width = usize::from(args.compile_ahead.max(1));
    // The pool compiles a batch's other configurations; the timing worker compiles its first.
    let compilers = (width > 1).then(|| {
        chosen
            .evaluator(args.backend.spec(args.device.clone()))
            .command(worker_command.clone())
            .config(evaluator.config().clone())
            .timeout(chosen.timeout(TimeoutPolicy::default()))
            .workers(width - 1)
            .build()
    });
    let mut objective = LiveObjective::new(
        &evaluator,
        compilers.as_ref().map(|pool| (pool, width)),
        &source,
        writer,
        &bar,
        task.describe().work.flops,
    );
    if args.full_timing {
        objective = objective.full_timing();
    }
    let mut s = strategy::by_name(&args.strategy)?;
    let loop_started = Instant::now();
    let result = Tuner::new(&space, args.budget)
        .seed(args.seed)
        .fan_out(width)
        .start_with(start.clone())
        .run_cached(s.as_mut(), &mut objective, &mut results, &key);
    if let Some(pool) = &compilers {
        pool.shutdown();
    }
    let result = result?;
    profile.tuning_s = loop_started.elapsed().as_secs_f64();
    profile.evaluations = objective.spent;
    profile.compile_ahead = objective.ahead;
    profile.configurations = result.evaluations;
    bar.finish_and_clear();
    let evaluations = std::mem::take(&mut objective.evaluations);
    objective.into_writer().close()?;

    let Some(best) = result.best_config.clone() else {
        evaluator.shutdown();
        bail!(
            "no configuration evaluated correct ({} failures)",
            result.failures
        );
    };
    // The winner's evaluation, with every check, when this run measured it; else (it came
    // from an earlier run's cache) a fresh one.
    let measured = evaluations.get(&best.canonical_key()).cloned();
    let confirm = match measured {
        Some(e) => e,
        None => {
            let confirm_started = Instant::now();
            let e = evaluator.evaluate_blocking(&source, &best)?;
            profile.confirm_s = confirm_started.elapsed().as_secs_f64();
            e
        }
    };
    evaluator.shutdown();
    let defaults = start.as_ref().and_then(|d| {
        let outcome = outcome_of_defaults(&result, d)?;
        let time = outcome.time();
        Some(json!({
            "config": d,
            "time_ms": time,
            "failure": match outcome {
                Outcome::Failed(f) => Some(f.to_string()),
                Outcome::Time(_) => None,
            },
            "best_speedup": time.zip(result.best_time).map(|(d, b)| d / b),
        }))
    });
    let summary = json!({
        "kernel": args.kernel, "task": task_name, "sizes": sizes, "device": device.name,
        "strategy": result.strategy, "seed": args.seed, "budget": args.budget,
        "evaluations": result.evaluations, "cache_hits": result.cache_hits,
        "failures": result.failures, "valid_configurations": valid,
        "best_config": best, "best_time_ms": result.best_time,
        "confirmed_status": confirm.status, "gflops": confirm.gflops, "speedup": confirm.speedup,
        "cache": cache_path, "profile": profile.to_json(),
        "start": args.start.to_possible_value().map(|v| v.get_name().to_owned()),
        "defaults": defaults,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        println!(
            "{} of {} valid configurations evaluated ({} from the cache, {} failed)",
            result.evaluations, valid, result.cache_hits, result.failures
        );
        println!("best: {best}");
        if let Some(d) = &defaults {
            let stayed_best = start
                .as_ref()
                .is_some_and(|s| s.canonical_key() == best.canonical_key());
            match (d["time_ms"].as_f64(), d["best_speedup"].as_f64()) {
                (Some(t), Some(_)) if stayed_best => println!(
                    "the manifest's defaults ({t:.3} ms) stayed the best configuration found"
                ),
                (Some(t), Some(x)) => {
                    println!("the manifest's defaults: {t:.3} ms; the best is {x:.2}x as fast")
                }
                _ => println!(
                    "the manifest's defaults failed: {}",
                    d["failure"].as_str().unwrap_or("no time")
                ),
            }
        }
        println!(
            "confirmed: {} · {} · {} over the task baseline",
            confirm.status,
            confirm
                .gflops
                .map_or("-".into(), |g| format!("{g:.2} GFLOP/s")),
            confirm.speedup.map_or("-".into(), |s| format!("{s:.2}x"))
        );
        println!("Kernel Tuner cache: {}", cache_path.display());
    }
    if args.profile_time {
        eprint!("{}", profile.render());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn replay_args_parse() {
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            replay: ReplayCmdArgs,
        }
        let cli = Cli::try_parse_from([
            "kf",
            "--cache",
            "x.json",
            "--strategy",
            "random",
            "--budget",
            "9",
            "--seed",
            "4",
            "--json",
        ])
        .expect("parses");
        let replay = ReplayArgs::from(cli.replay);
        assert_eq!(replay.budget, Some(9));
        assert_eq!(replay.seed, 4);
        assert_eq!(replay.strategy, "random");
        assert!(replay.json);
    }
}
