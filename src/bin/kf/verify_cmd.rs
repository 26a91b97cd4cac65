//! `kf verify RUN_DIR [--all]`: re-checks a run's best kernel (with `--all`, every elite) from
//! scratch, on fresh inputs drawn from another data seed than the run's, through the same
//! isolated evaluator, and prints each kernel's time next to the recorded one. Exits with 1
//! when a kernel is no longer correct.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use kernelfoundry::core::noise::median_interval;
use kernelfoundry::core::{ChildRecord, Elite, Evaluation, InsertOutcome, Status};
use kernelfoundry::eval::tasks::{builtin_task, sizes_text, Sizes};
use kernelfoundry::eval::{BackendSpec, EvalConfig, TimeoutPolicy, WorkerCommand};

use crate::task_arg::ChosenTask;

/// Mixed into the run's seed for the default data seed, so that the inputs differ from any the
/// run could have drawn from its seed.
const VERIFY_SEED_SALT: u64 = 0x7665_7269_6679_0001;

/// Arguments of `kf verify`.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The run: a run directory, or the output folder of `kf search` (which holds one in `run/`).
    run_dir: PathBuf,
    /// Re-check every elite, not only the best.
    #[arg(long)]
    all: bool,
    /// The task file the run searched on (task-file runs record only the task's name).
    #[arg(long, value_name = "T.toml")]
    task_file: Option<PathBuf>,
    /// Seed of the fresh input data (default: derived from the run's seed, different from it).
    #[arg(long)]
    data_seed: Option<u64>,
    /// Device, overriding the one recorded in the run.
    #[arg(long)]
    device: Option<String>,
}

/// The run directory proper: `path` itself, or its `run/` folder.
fn locate(path: &Path) -> anyhow::Result<PathBuf> {
    if path.join("run.json").is_file() {
        return Ok(path.to_path_buf());
    }
    let inner = path.join("run");
    if inner.join("run.json").is_file() {
        return Ok(inner);
    }
    bail!(
        "{} is not a run directory (no run.json in it or in its run/ folder)",
        path.display()
    )
}

/// The candidate `report.json` beside the run directory names the best kernel, when there is
/// such a report (a run still going, or one written elsewhere, has none: the fittest elite is
/// then the best).
fn reported_best(run_dir: &Path) -> Option<u64> {
    let path = run_dir.parent()?.join("report.json");
    let text = std::fs::read(path).ok()?;
    let report: serde_json::Value = serde_json::from_slice(&text).ok()?;
    report.get("best_kernel")?.get("candidate")?.as_u64()
}

/// The run's elites as its log left them: per cell, the last candidate recorded as filling or
/// improving it.
fn final_elites(records: &[kernelfoundry::core::StepRecord]) -> Vec<Elite> {
    let mut cells: BTreeMap<Vec<usize>, Elite> = BTreeMap::new();
    for record in records {
        for child in &record.children {
            if let ChildRecord::Judged { elite, outcome } = child {
                if matches!(
                    outcome,
                    InsertOutcome::NewCell | InsertOutcome::Improved { .. }
                ) {
                    cells.insert(elite.descriptor.coords.clone(), Elite::clone(elite));
                }
            }
        }
    }
    cells.into_values().collect()
}

/// `median [lo–hi]` in milliseconds, from the samples where kept, else the median alone.
fn time_text(e: &Evaluation) -> String {
    match (median_interval(&e.samples), e.timing) {
        (Some(m), _) => format!(
            "{:.4} [{:.4}–{:.4}]",
            m.median * 1e3,
            m.lo * 1e3,
            m.hi * 1e3
        ),
        (None, Some(t)) => format!("{:.4}", t.median_s * 1e3),
        (None, None) => "-".to_owned(),
    }
}

fn cell_text(coords: &[usize]) -> String {
    coords
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("-")
}

pub(crate) fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let dir = locate(&args.run_dir)?;
    let log = kernelfoundry::archive::read_run(&dir)
        .with_context(|| format!("reading the run directory {}", dir.display()))?;
    let config = &log.meta.config;
    let task_name = config
        .get("task")
        .and_then(|t| t.as_str())
        .context("run.json names no task")?
        .to_owned();
    let sizes: Sizes = match config.get("sizes") {
        Some(s) => serde_json::from_value(s.clone()).context("run.json's sizes")?,
        None => Sizes::new(),
    };
    let mut spec: BackendSpec = match config.get("backend") {
        Some(b) => serde_json::from_value(b.clone()).context("run.json's backend")?,
        None => BackendSpec::new("opencl"),
    };
    if args.device.is_some() {
        spec.device = args.device.clone();
    }
    let chosen = match &args.task_file {
        Some(path) => {
            let chosen = ChosenTask::resolve(None, Some(path), &sizes_text(&sizes))?;
            if chosen.name() != task_name {
                bail!(
                    "{} defines task `{}`, but the run searched `{task_name}`",
                    path.display(),
                    chosen.name()
                );
            }
            chosen
        }
        None => match builtin_task(&task_name, &sizes) {
            Ok(task) => ChosenTask {
                task,
                file: None,
                reference_s: 0.0,
            },
            Err(e) => bail!(
                "the run searched `{task_name}`, which is not a built-in task ({e}): give the \
                 task file it was searched on with --task-file T.toml"
            ),
        },
    };
    kernelfoundry::backends::check(&spec).map_err(anyhow::Error::msg)?;

    let mut elites = final_elites(&log.records);
    if elites.is_empty() {
        bail!("the run in {} has no elite yet", dir.display());
    }
    // Fittest first; among equals, the earliest candidate (the archive's notion of the best).
    elites.sort_by(|a, b| {
        b.fitness
            .cmp(&a.fitness)
            .then(a.candidate.id.0.cmp(&b.candidate.id.0))
    });
    // The report's best kernel first: after a final selection it is the elite that was fastest
    // when re-timed, not necessarily the fittest by its single measurement in the search.
    if let Some(chosen) = reported_best(&dir) {
        if let Some(i) = elites.iter().position(|e| e.candidate.id.0 == chosen) {
            let best = elites.remove(i);
            elites.insert(0, best);
        }
    }
    if !args.all {
        elites.truncate(1);
    }

    let data_seed = args.data_seed.unwrap_or(log.meta.seed ^ VERIFY_SEED_SALT);
    // The full protocol (the default timing, fresh data for every evaluation), from a data seed
    // the run did not use.
    let eval_config = EvalConfig {
        data_seed: Some(data_seed),
        reuse_inputs: 0,
        ..EvalConfig::default()
    };
    let evaluator = chosen
        .evaluator(spec.clone())
        .command(WorkerCommand::current_exe()?)
        .config(eval_config)
        .timeout(chosen.timeout(TimeoutPolicy::default()))
        .build();
    let device = evaluator.device()?;
    println!(
        "run {}: task {} ({}), {} on {}; fresh inputs from data seed {data_seed}",
        dir.display(),
        task_name,
        sizes_text(&chosen.task.sizes()),
        spec.kind,
        device.name
    );
    println!(
        "{:<4} {:<10} {:>6} {:<12} {:>28} {:>28} {:>9}",
        "", "cell", "cand", "status", "recorded ms [95%]", "now ms [95%]", "now/rec"
    );
    let mut broken = 0usize;
    let mut rechecked = 0usize;
    for (i, elite) in elites.iter().enumerate() {
        // An archive keeps the best attempt per cell even when none of its kernels was correct
        // (the status ladder ranks a compile error below wrong values); such a kernel was never
        // correct, so it cannot have become incorrect: list it, do not count it.
        let row = |status: &str, recorded: &str, now: &str, ratio: &str| {
            println!(
                "{:<4} {:<10} {:>6} {:<12} {:>28} {:>28} {:>9}",
                if i == 0 { "best" } else { "" },
                cell_text(&elite.descriptor.coords),
                format!("#{}", elite.candidate.id.0),
                status,
                recorded,
                now,
                ratio,
            );
        };
        if elite.evaluation.status != Status::Correct {
            let status = format!("({})", elite.evaluation.status.as_str());
            row(&status, "-", "not re-checked", "-");
            continue;
        }
        rechecked += 1;
        let params = elite.effective_params();
        let now = match evaluator.evaluate_blocking(&elite.candidate.source, &params) {
            Ok(e) => e,
            Err(e) => Evaluation::failed(Status::RuntimeError, format!("evaluator: {e}")),
        };
        let ratio = now
            .timing
            .zip(elite.evaluation.timing)
            .filter(|(_, r)| r.median_s > 0.0)
            .map(|(n, r)| n.median_s / r.median_s);
        row(
            now.status.as_str(),
            &time_text(&elite.evaluation),
            &time_text(&now),
            &ratio.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}x")),
        );
        if now.status != Status::Correct {
            broken += 1;
            println!("     {}", now.diagnostics);
        }
    }
    evaluator.shutdown();
    if rechecked == 0 {
        println!("the run recorded no correct kernel: nothing to re-check");
        return Ok(ExitCode::from(1));
    }
    if broken > 0 {
        println!("{broken} of {rechecked} kernels are no longer correct");
        return Ok(ExitCode::from(1));
    }
    println!("{rechecked} kernel(s) still correct");
    Ok(ExitCode::SUCCESS)
}
