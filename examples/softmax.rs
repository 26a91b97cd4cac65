//! The whole search on a second task, row-wise softmax: the same machinery as the `gemm`
//! example (MAP-Elites over the 64-cell kernel behaviour space, offline mutators, each new
//! kernel tuned with a small kf-tune budget, every evaluation through the cheat-proof evaluator
//! in worker processes), with the softmax templates and strategies of kf-mutate. Prints a
//! table of the best kernel per cell and writes `report.json`, the best kernel, and pictures to
//! the output folder.
//!
//! Softmax is memory-bound, so besides GFLOP/s (5 flops per element, the task's count) the
//! summary gives kernel times and the effective bandwidth (8 bytes per element).
//!
//! ```sh
//! scripts/setup.sh
//! cargo run --release --example softmax                   # ROWS=4096, COLS=1024, a few minutes
//! cargo run --release --example softmax -- --size ROWS=1024,COLS=512 --evaluations 20 --out runs/sm
//! ```
//!
//! The templates are rendered in OpenCL C and SYCL (`--backend sycl` searches the same
//! structures); with `--backend cuda` the search starts from the CUDA naive baseline and moves
//! through its parameter space only.
//!
//! Interrupt with Ctrl-C and run the same command again to resume.

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kernelfoundry::cli::SearchArgs;
use kernelfoundry::core::StopHandle;
use kernelfoundry::eval::task::{builtin_task, parse_sizes_or_number};
use kernelfoundry::search::logging;

#[derive(Parser)]
#[command(about = "Evolve fast row-wise softmax kernels with MAP-Elites")]
struct Args {
    /// Problem size: ROWS=…,COLS=… (a missing one takes the task default), or one number for
    /// the number of rows (COLS=1024).
    #[arg(long, default_value = "ROWS=4096,COLS=1024")]
    size: String,
    #[command(flatten)]
    search: SearchArgs,
}

fn main() -> anyhow::Result<()> {
    // Evaluation workers are this program, re-executed: serve first if we are one.
    kernelfoundry::init();
    let args = Args::parse();
    logging::init(args.search.verbose);
    let sizes = parse_sizes_or_number(&args.size, |rows| format!("ROWS={rows},COLS=1024"))
        .context("--size is ROWS=…,COLS=… or a number of rows")?;
    // The task itself, for the work counts below.
    let task = builtin_task("softmax", &sizes)?;
    let sizes = task.sizes();
    let config = args
        .search
        .config("softmax", sizes, Duration::from_secs(300));

    // The builder's default mutator and seeds (`offline_search`): on OpenCL and SYCL the naive
    // baseline, every softmax template's base variant, structural transformations and
    // parameter moves; on CUDA the baseline and parameter moves.
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
        outcome.run_line()
    );
    // Kernel time and effective bandwidth from the task's work counts.
    let work = task.describe().work;
    let describe = |gflops: f64| {
        let seconds = work.flops / (gflops * 1e9);
        format!(
            "{gflops:.2} GFLOP/s ({:.3} ms, {:.1} GB/s)",
            seconds * 1e3,
            work.bytes / seconds / 1e9
        )
    };
    match (outcome.best_gflops, outcome.baseline_gflops) {
        (Some(best), Some(base)) if base > 0.0 => println!(
            "best kernel {}, naive seed {} in the same run: {:.1}x",
            describe(best),
            describe(base),
            best / base
        ),
        (Some(best), _) => println!("best kernel {}", describe(best)),
        _ => println!("no correct kernel was found"),
    }
    println!("report: {}", out.join("report.json").display());
    Ok(())
}
