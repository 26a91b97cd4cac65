//! `kf serve RUN_DIR`: the run explorer over HTTP, live while a search writes the run.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// Arguments of `kf serve`.
#[derive(Args)]
pub(crate) struct ServeArgs {
    /// The run: a run directory, or the output folder of `kf search` (which holds one in `run/`).
    run_dir: PathBuf,
    /// Port (0: any free port; the address is printed).
    #[arg(long, default_value_t = 8717)]
    port: u16,
    /// Address to bind. The default serves this machine only; another address exposes the
    /// run's kernels to whoever can reach it.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let addr = SocketAddr::new(args.bind, args.port);
    kernelfoundry::explorer::serve::serve(&args.run_dir, addr, |bound| {
        use std::io::Write;
        println!("serving {} on http://{bound}/", args.run_dir.display());
        let _ = std::io::stdout().flush();
    })?;
    Ok(ExitCode::SUCCESS)
}
