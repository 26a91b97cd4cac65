//! `kf`: the KernelFoundry command line.

mod eval_cmd;
mod search_cmd;
mod tune_cmd;
mod worker_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kf",
    version,
    about = "KernelFoundry: evaluate, tune and evolve GPU kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate one kernel: compile, verify on fresh inputs, time against the task baseline.
    Eval(eval_cmd::EvalArgs),
    /// Tune a kernel's parameters, or replay a recorded tuning landscape.
    Tune(tune_cmd::TuneArgs),
    /// Evolve kernels for a task with MAP-Elites (offline mutators), here or on workers.
    Search(search_cmd::SearchCmdArgs),
    /// Evaluate distributed searches' jobs on this machine's device.
    Worker(worker_cmd::WorkerArgs),
    /// List the OpenCL devices this machine has.
    Devices,
}

fn main() -> ExitCode {
    // Evaluation workers are this same binary, re-executed.
    kernelfoundry::init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Eval(args) => eval_cmd::run(args),
        Command::Tune(args) => tune_cmd::run(args),
        Command::Search(args) => search_cmd::run(args),
        Command::Worker(args) => worker_cmd::run(args),
        Command::Devices => devices(),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One clear line, never a panic.
            eprintln!("kf: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::from(2)
        }
    }
}

fn devices() -> anyhow::Result<ExitCode> {
    for d in kernelfoundry::opencl::list_devices()? {
        println!("{d}");
    }
    Ok(ExitCode::SUCCESS)
}
