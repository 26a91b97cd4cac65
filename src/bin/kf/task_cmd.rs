//! `kf task check T.toml`: validates a task file and runs its reference once
//! (`kernelfoundry::search::task::check_task_file`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use kernelfoundry::search::task::check_task_file;

/// Arguments of `kf task`.
#[derive(Args)]
pub(crate) struct TaskArgs {
    #[command(subcommand)]
    command: TaskCommand,
}

#[derive(Subcommand)]
enum TaskCommand {
    /// Validate a task file, run its reference once, and print shapes and timings.
    Check(CheckArgs),
    /// Turn a KernelBench problem file into a task file (sizes, buffers, reference).
    ImportKernelbench(crate::task_import::ImportKernelBenchArgs),
}

#[derive(Args)]
struct CheckArgs {
    /// The task file.
    file: PathBuf,
    /// Problem sizes, such as ROWS=64,COLS=32 (missing ones take the file's defaults).
    #[arg(long, default_value = "")]
    size: String,
    /// Seed of the input set the reference runs on.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub(crate) fn run(args: TaskArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        TaskCommand::Check(a) => check(a),
        TaskCommand::ImportKernelbench(a) => crate::task_import::run(a),
    }
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    check_task_file(&args.file, &args.size, args.seed, |line| println!("{line}"))?;
    Ok(ExitCode::SUCCESS)
}
