//! `kf run repair DIR`: keeps the intact prefix of a damaged run directory's step log.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

/// Arguments of `kf run`.
#[derive(Args)]
pub(crate) struct RunArgs {
    #[command(subcommand)]
    command: RunCommand,
}

#[derive(Subcommand)]
enum RunCommand {
    /// Keep the intact records of a run directory whose step log is damaged (and drop the rest
    /// and the snapshot), so that the same search command resumes from there.
    Repair {
        /// The search's output folder (`--out`) or its `run/` directory.
        dir: PathBuf,
    },
}

pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        RunCommand::Repair { dir } => {
            let run_dir = run_dir_of(&dir);
            let kept = kernelfoundry::archive::RunDir::keep_valid_prefix(&run_dir)?;
            println!(
                "{}: kept the first {kept} records of the step log; the same search command \
                 resumes from there",
                run_dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A search's output folder holds its run directory in `run/`.
fn run_dir_of(dir: &Path) -> PathBuf {
    let inner = dir.join("run");
    if inner.join("run.json").is_file() {
        inner
    } else {
        dir.to_path_buf()
    }
}
