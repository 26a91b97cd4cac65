//! `kf search`: the offline MAP-Elites search of the examples, for any built-in task or task
//! file, on this machine or (built-in tasks) on distributed workers.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use kernelfoundry::cli::SearchArgs;
use kernelfoundry::core::{Candidate, Origin, StopHandle};
use kernelfoundry::manifest::Manifest;

/// Arguments of `kf search`.
#[derive(Args)]
pub(crate) struct SearchCmdArgs {
    /// Built-in task: gemm or softmax (default gemm when no --task-file is given).
    #[arg(long, conflicts_with = "task_file")]
    task: Option<String>,
    /// A task file (TOML): search kernels for your own operator.
    #[arg(long, value_name = "T.toml")]
    task_file: Option<PathBuf>,
    /// A kernel manifest to seed the search with, besides the task's baseline (repeatable).
    #[arg(long = "kernel", value_name = "K.toml")]
    kernels: Vec<PathBuf>,
    /// Problem sizes, such as M=1024,N=1024,K=1024 (missing ones take the task's defaults).
    /// Repeat it to search at several sizes, one after another: each size's run goes into
    /// `<out>/<sizes>/` and `<out>/sizes.json` lists them (`kf export --run <out>` exports
    /// every size's best kernel into one dispatch table).
    #[arg(long = "size", default_values_t = [String::new()])]
    sizes: Vec<String>,
    #[command(flatten)]
    search: SearchArgs,
    #[command(flatten)]
    llm: crate::llm_args::LlmArgs,
}

pub(crate) fn run(args: SearchCmdArgs) -> anyhow::Result<ExitCode> {
    kernelfoundry::search::logging::init(args.search.verbose);
    // Ctrl-C stops the search after the steps in flight: every completed step is already in
    // the run directory, and the same command resumes.
    let stop = StopHandle::new();
    let on_ctrl_c = stop.clone();
    ctrlc::set_handler(move || on_ctrl_c.stop()).context("installing the Ctrl-C handler")?;
    if let [size] = args.sizes.as_slice() {
        return search_one(&args, size, None, &stop);
    }
    let mut runs = kernelfoundry::archive::SizeRuns::default();
    for size in &args.sizes {
        search_one(&args, size, Some(&mut runs), &stop)?;
        if stop.is_stopped() {
            break;
        }
    }
    println!("\nRuns by size (sizes.json):");
    for run in runs.runs() {
        let sizes: Vec<String> = run.sizes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  {}: {}", sizes.join(","), run.dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// One search at `size`; with `runs`, into its size's folder under the output folder, recorded
/// in `runs` (and `sizes.json`) once its report is written.
fn search_one(
    args: &SearchCmdArgs,
    size: &str,
    runs: Option<&mut kernelfoundry::archive::SizeRuns>,
    stop: &StopHandle,
) -> anyhow::Result<ExitCode> {
    let task_name = match (&args.task, &args.task_file) {
        (None, None) => Some("gemm"),
        (t, _) => t.as_deref(),
    };
    let chosen = crate::task_arg::ChosenTask::resolve(task_name, args.task_file.as_deref(), size)?;
    let task = &chosen.task;
    let sizes = task.sizes();
    // Everything is checked before a run directory exists: the task file and its reference
    // (run once by `resolve`) and the user's kernels.
    let mut user_seeds = Vec::new();
    for path in &args.kernels {
        let (manifest, source) =
            Manifest::load(path).with_context(|| format!("--kernel {}", path.display()))?;
        let mut c = Candidate::seed(source, manifest.default_params());
        c.origin = Origin::mutator("seed").with_note(format!("user kernel {}", path.display()));
        user_seeds.push(c);
    }
    let mut config = args
        .search
        .config(&chosen.name(), sizes, Duration::from_secs(540));
    let parent = config.out.clone();
    if runs.is_some() {
        config.out = parent.join(kernelfoundry::eval::task::sizes_text(&config.sizes));
    }
    config.timeout = chosen.timeout(config.timeout);
    // Through the queue, the LLM's questions are asked as a run of their own beside the
    // search's (task, output folder, seed), so that a resumed search finds its answers.
    let llm_run = config.distributed.as_ref().map(|d| {
        let run = d
            .run
            .clone()
            .unwrap_or_else(|| kernelfoundry::search::default_run_id(&config));
        kernelfoundry::dist::subject_token(&format!("llm-{run}"))
    });
    let queue = config
        .distributed
        .as_ref()
        .zip(llm_run.as_deref())
        .map(|(d, run)| (&d.dist, run));
    let llm = args.llm.mutator(&config.out, queue)?;
    let out = config.out.clone();
    let run_sizes = config.sizes.clone();
    // The builder's own seeds, mutators and scheduler (aimed at empty cells), with the user's
    // kernels after its seeds and the LLM beside its mutators; the task as resolved above
    // (built once, its reference run once).
    let mut builder = args
        .search
        .builder(config)?
        .chosen_task(chosen)
        .extra_seeds(user_seeds)
        .stop_on(stop.clone());
    if let Some(llm) = &llm {
        builder = builder.also_mutator(llm.clone(), args.llm.llm_weight);
    }
    let outcome = builder.build()?.run()?;
    println!(
        "
{}",
        outcome.summary_text()
    );
    if let Some(llm) = &llm {
        println!("{}", crate::llm_args::stats_line(llm));
    }
    println!("report: {}", out.join("report.json").display());
    if let Some(runs) = runs {
        runs.record(&parent, &out, &run_sizes)?;
    }
    Ok(ExitCode::SUCCESS)
}
