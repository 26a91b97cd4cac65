//! `kf tune replay` as a stand-alone program: replays a Kernel Tuner cache with a strategy and
//! prints one JSON object (with `--json`) or a short summary.
//!
//! ```text
//! cargo run --release -p kf-tune --example replay -- \
//!     --cache ../shared/tuning-spaces/gemm_RTX_3090.json.gz --strategy default --budget 89 --seed 0 --json
//! ```

use clap::Parser;
use kf_tune::cli::{render_text, replay_main, ReplayArgs};

/// Replay a Kernel Tuner cache.
#[derive(Parser)]
struct Cli {
    /// Kernel Tuner cache file (JSON, plain or gzip-compressed).
    #[arg(long)]
    cache: std::path::PathBuf,
    /// Strategy name.
    #[arg(long, default_value = "default")]
    strategy: String,
    /// Budget: distinct configurations evaluated (default: 2% of the valid configurations).
    #[arg(long)]
    budget: Option<usize>,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print one JSON object (otherwise a short text summary).
    #[arg(long)]
    json: bool,
    /// Also write the run in the FAIR T4 results format.
    #[arg(long)]
    t4: Option<std::path::PathBuf>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let replay = ReplayArgs {
        cache: cli.cache,
        strategy: cli.strategy,
        budget: cli.budget,
        seed: cli.seed,
        json: cli.json,
        t4: cli.t4,
    };
    let summary = replay_main(&replay)?;
    if replay.json {
        println!("{summary}");
    } else {
        println!("{}", render_text(&summary));
    }
    Ok(())
}
