//! `kf report RUN_DIR`: writes the run explorer page, `RUN_DIR/report.html`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// Arguments of `kf report`.
#[derive(Args)]
pub(crate) struct ReportArgs {
    /// The run: a run directory, or the output folder of `kf search` (which holds one in `run/`).
    run_dir: PathBuf,
    /// Inline every source while their unique bytes stay under this many MB (above it, only the
    /// elites' and their lineage's; `kf serve` loads the rest on demand).
    #[arg(long, default_value_t = 4.0)]
    inline_mb: f64,
}

pub(crate) fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    if !(args.inline_mb.is_finite() && args.inline_mb >= 0.0) {
        anyhow::bail!("--inline-mb must be a number of megabytes, 0 or more");
    }
    let limit = (args.inline_mb * 1024.0 * 1024.0) as usize;
    let path = kernelfoundry::explorer::write_report_with(&args.run_dir, None, limit)?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}
