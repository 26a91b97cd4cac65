//! `kf tune`: live tuning of a kernel through the evaluator, and `kf tune replay`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use kernelfoundry::tune::cli::{render_text, replay_main, ReplayArgs};

/// Arguments of `kf tune`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct TuneArgs {
    #[command(subcommand)]
    command: Option<TuneCommand>,
}

#[derive(Subcommand)]
enum TuneCommand {
    /// Replay a Kernel Tuner cache: the space is every configuration in the file, and
    /// evaluating one returns its recorded time.
    Replay(ReplayArgs),
}

pub(crate) fn run(args: TuneArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(TuneCommand::Replay(args)) => {
            let summary = replay_main(&args)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                println!("{}", render_text(&summary));
            }
            Ok(ExitCode::SUCCESS)
        }
        None => anyhow::bail!("live tuning is not wired yet; use `kf tune replay`"),
    }
}
