//! `kf tune`: live tuning of a kernel through the evaluator, and `kf tune replay`
//! (`kernelfoundry::search::live_tune`, `kernelfoundry::tune::cli`).

use std::process::ExitCode;

pub(crate) use kernelfoundry::cli::TuneArgs;
use kernelfoundry::cli::TuneCommand;
use kernelfoundry::search::live_tune::{tune_live, TuneBar};
use kernelfoundry::tune::cli::{render_text, replay_main, ReplayArgs};

pub(crate) fn run(args: TuneArgs) -> anyhow::Result<ExitCode> {
    match args.into_parts() {
        (Some(TuneCommand::Replay(args)), _) => {
            let args = ReplayArgs::from(args);
            let summary = replay_main(&args)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                println!("{}", render_text(&summary));
            }
        }
        (None, Some(live)) => {
            let outcome = tune_live(&live.options(), &mut TuneBar::new(live.budget))?;
            if live.json {
                println!("{}", serde_json::to_string_pretty(&outcome.to_json())?);
            } else {
                print!("{}", outcome.render_text());
            }
            if live.profile_time {
                eprint!("{}", outcome.profile.render());
            }
        }
        (None, None) => anyhow::bail!(
            "give --task or --task-file, --kernel and --budget to tune, or use `kf tune replay`"
        ),
    }
    Ok(ExitCode::SUCCESS)
}
