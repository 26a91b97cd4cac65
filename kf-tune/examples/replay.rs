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
    #[command(flatten)]
    replay: ReplayArgs,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let summary = replay_main(&cli.replay)?;
    if cli.replay.json {
        println!("{summary}");
    } else {
        println!("{}", render_text(&summary));
    }
    Ok(())
}
