//! The whole search on SGEMM: MAP-Elites over the 64-cell kernel behaviour space, offline
//! mutators (parameter moves and structural transformations of kernel templates), each new
//! kernel tuned with a small kf-tune budget, every evaluation through the cheat-proof evaluator
//! in worker processes. Prints a table of the best kernel per cell and writes `report.json`,
//! the best kernel, and pictures to the output folder.
//!
//! ```sh
//! scripts/setup.sh
//! cargo run --release --example gemm                       # M=N=K=1024, about 5 minutes
//! cargo run --release --example gemm -- --size 512 --evaluations 40 --out runs/small
//! scripts/setup.sh --sycl
//! cargo run --release --example gemm -- --backend sycl --size 256 --evaluations 12
//! ```
//!
//! The structural templates are rendered in OpenCL C and SYCL (`kf-mutate/templates/`,
//! `templates/sycl/`): `--backend sycl` searches the same structures as OpenCL. With
//! `--backend cuda` the search starts from the CUDA kernels shipped in `kf-eval/kernels/cuda/`
//! (the naive baseline and the tiled GEMM) and moves through their parameter spaces.
//!
//! Interrupt with Ctrl-C and run the same command again to resume. With `--distributed`, the
//! evaluations go to `kf worker` processes through NATS JetStream and PostgreSQL
//! (`scripts/dist-servers.sh start` runs both on this machine).

use anyhow::Context;
use clap::Parser;
use kernelfoundry::cli::SearchArgs;
use kernelfoundry::core::StopHandle;
use kernelfoundry::eval::task::parse_sizes_or_number;
use kernelfoundry::search::logging;

#[derive(Parser)]
#[command(about = "Evolve fast SGEMM kernels with MAP-Elites")]
struct Args {
    /// Problem size: one number for M=N=K, or M=…,N=…,K=….
    #[arg(long, default_value = "1024")]
    size: String,
    #[command(flatten)]
    search: SearchArgs,
}

fn main() -> anyhow::Result<()> {
    // Evaluation workers are this program, re-executed: serve first if we are one.
    kernelfoundry::init();
    let args = Args::parse();
    logging::init(args.search.verbose);
    let sizes = parse_sizes_or_number(&args.size, |n| format!("M={n},N={n},K={n}"))
        .context("--size is a number or M=…,N=…,K=…")?;
    let config = args
        .search
        .config("gemm", sizes, kernelfoundry::search::defaults::WALL);

    // The builder's default mutator and seeds (`offline_search`): on OpenCL and SYCL the naive
    // baseline, every template's base variant, structural transformations and parameter moves;
    // on CUDA the baseline and the shipped tiled kernel, parameter moves.
    let out = config.out.clone();
    // Ctrl-C stops the search after the steps in flight: every completed step is already in
    // the run directory, and the same command resumes.
    let stop = StopHandle::new();
    let on_ctrl_c = stop.clone();
    ctrlc::set_handler(move || on_ctrl_c.stop()).context("installing the Ctrl-C handler")?;
    // The configuration, with the backend, archive and scheduler the options name.
    let outcome = args.search.builder(config)?.stop_on(stop).build()?.run()?;
    println!(
        "
{}",
        outcome.summary_text()
    );
    println!("report: {}", out.join("report.json").display());
    Ok(())
}
