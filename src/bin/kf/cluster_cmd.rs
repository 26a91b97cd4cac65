//! `kf cluster status`: the distributed evaluation's workers, queue, throughput and failures.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use kernelfoundry::cli::ServerArgs;
use kernelfoundry::dist::ClusterStatus;

/// Arguments of `kf cluster`.
#[derive(Args)]
pub(crate) struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Workers by role and device kind (alive, gone: silent for three heartbeats, stopped),
    /// jobs on the queue, jobs in flight, throughput and failures.
    Status(StatusArgs),
}

#[derive(Args)]
struct StatusArgs {
    /// Seconds of recent history the throughput and failures cover.
    #[arg(long, default_value_t = 60.0)]
    window: f64,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Servers.
    #[command(flatten)]
    servers: ServerArgs,
}

pub(crate) fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ClusterCommand::Status(args) => status(args),
    }
}

fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.window.is_finite() && args.window > 0.0,
        "--window must be a positive number of seconds"
    );
    // The search role's rights suffice: it reads the workers, results and the queue.
    let config = args.servers.dist_config(kernelfoundry::dist::Role::Search);
    let status =
        ClusterStatus::read_blocking(&config, std::time::Duration::from_secs_f64(args.window))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        print!("{status}");
    }
    Ok(ExitCode::SUCCESS)
}
