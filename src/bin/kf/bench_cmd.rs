//! `kf bench kernelbench`: a short offline search per shipped KernelBench task, then
//! KernelBench's fast_0 / fast_1 / fast_2 and geometric-mean speedups as a table and JSON.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use kernelfoundry::cli::SearchArgs;
use kernelfoundry::kernelbench::{run_bench, shipped_tasks, BenchOptions};

/// Arguments of `kf bench`.
#[derive(Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Search each shipped KernelBench level-1 task and report fast_0/fast_1/fast_2.
    Kernelbench(KernelBenchArgs),
}

#[derive(Args)]
struct KernelBenchArgs {
    /// Tasks to run: folder names or problem numbers (19 for 19_ReLU), comma-separated or
    /// repeated (default: all).
    #[arg(long, value_delimiter = ',')]
    tasks: Vec<String>,
    /// The folder of KernelBench task folders.
    #[arg(long, default_value = "tasks/kernelbench")]
    tasks_dir: PathBuf,
    /// Do not time the problem files with PyTorch even when it is installed.
    #[arg(long)]
    no_torch: bool,
    /// The search on each task (--evaluations is per task; --out defaults to runs/kernelbench).
    #[command(flatten)]
    search: SearchArgs,
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let BenchCommand::Kernelbench(args) = args.command;
    kernelfoundry::search::logging::init(args.search.verbose);
    let tasks = shipped_tasks(&args.tasks_dir, &args.tasks)?;
    let out = args
        .search
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs/kernelbench"));
    let search = args
        .search
        .config("kernelbench", Default::default(), Duration::from_secs(300));
    println!(
        "kf bench kernelbench: {} tasks, {} evaluations each, runs in {}",
        tasks.len(),
        search.evaluations,
        out.display()
    );
    let summary = run_bench(&BenchOptions {
        tasks,
        search,
        archive: args.search.archive(),
        scheduler: args.search.scheduler.clone(),
        out: out.clone(),
        torch: !args.no_torch,
    })?;
    print!("{}", summary.table());
    println!("JSON: {}", out.join("kernelbench.json").display());
    Ok(if summary.any_task_not_run() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
