//! `kf verify RUN_DIR [--all]`: re-checks a run's best kernel (with `--all`, every elite) on
//! fresh inputs and prints each kernel's time next to the recorded one
//! (`kernelfoundry::search::verify`). Exits with 1 when a kernel is no longer correct.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kernelfoundry::search::verify::{verify_run, VerifyOptions};

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

pub(crate) fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let options = VerifyOptions {
        run_dir: args.run_dir,
        all: args.all,
        task_file: args.task_file,
        data_seed: args.data_seed,
        device: args.device,
    };
    let verdict = verify_run(&options, |line| println!("{line}"))?;
    Ok(if verdict.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
