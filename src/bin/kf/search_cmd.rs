//! `kf search`: the offline MAP-Elites search of the examples, for any built-in task, on this
//! machine or on distributed workers.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use kernelfoundry::eval::tasks::{builtin_task, parse_sizes};
use kernelfoundry::search::{offline_search, run_search, stop_on_ctrl_c, SearchArgs};

/// Arguments of `kf search`.
#[derive(Args)]
pub(crate) struct SearchCmdArgs {
    /// Built-in task: gemm or softmax.
    #[arg(long, default_value = "gemm")]
    task: String,
    /// Problem sizes, such as M=1024,N=1024,K=1024 (missing ones take the task's defaults).
    #[arg(long, default_value = "")]
    size: String,
    #[command(flatten)]
    search: SearchArgs,
}

pub(crate) fn run(args: SearchCmdArgs) -> anyhow::Result<ExitCode> {
    kernelfoundry::report::init_logging(args.search.verbose);
    let sizes = parse_sizes(&args.size).context("--size")?;
    let task = builtin_task(&args.task, &sizes)?;
    let sizes = task.sizes();
    let config = args
        .search
        .config(&args.task, sizes, Duration::from_secs(540));
    let (seeds, mutator) = offline_search(task.as_ref(), args.search.language())?;
    let outcome = run_search(&config, mutator, seeds, Some(stop_on_ctrl_c()?))?;
    println!(
        "
{}",
        outcome.summary_text()
    );
    println!("report: {}", config.out.join("report.json").display());
    Ok(ExitCode::SUCCESS)
}
