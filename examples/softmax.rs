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
//! The templates are OpenCL C; with another backend (`--backend cuda`) the search starts from
//! that language's naive baseline and moves through its parameter space only.
//!
//! Interrupt with Ctrl-C and run the same command again to resume.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kernelfoundry::core::{Language, StopHandle};
use kernelfoundry::eval::tasks::{builtin_task, parse_sizes};
use kernelfoundry::eval::BackendSpec;
use kernelfoundry::mutate::{MixMutator, ParamMutator, StructuralMutator, TemplateLibrary};
use kernelfoundry::report::init_logging;
use kernelfoundry::search::{run_search, seeds_for, SearchConfig};

#[derive(Parser)]
#[command(about = "Evolve fast row-wise softmax kernels with MAP-Elites")]
struct Args {
    /// Problem size: ROWS=…,COLS=… (a missing one takes the task default), or one number for
    /// the number of rows (COLS=1024).
    #[arg(long, default_value = "ROWS=4096,COLS=1024")]
    size: String,
    /// Candidates evaluated at most (seeds included).
    #[arg(long, default_value_t = 60)]
    evaluations: u64,
    /// Wall-clock limit, seconds.
    #[arg(long, default_value_t = 300)]
    time: u64,
    /// Configurations tuned per new kernel (1 = no tuning).
    #[arg(long, default_value_t = 3)]
    tune_budget: usize,
    /// Run seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Backend.
    #[arg(long, default_value = "opencl")]
    backend: String,
    /// Device (a name substring, an index, cpu or gpu).
    #[arg(long)]
    device: Option<String>,
    /// Output folder.
    #[arg(long, default_value = "runs/softmax")]
    out: PathBuf,
    /// No progress bar (log lines instead).
    #[arg(long)]
    no_progress: bool,
    /// More log output (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> anyhow::Result<()> {
    // Evaluation workers are this program, re-executed: serve first if we are one.
    kernelfoundry::init();
    let args = Args::parse();
    init_logging(args.verbose);
    let sizes = if args.size.contains('=') {
        parse_sizes(&args.size)?
    } else {
        let rows: i64 = args
            .size
            .parse()
            .context("--size is ROWS=…,COLS=… or a number of rows")?;
        parse_sizes(&format!("ROWS={rows},COLS=1024"))?
    };
    let task = builtin_task("softmax", &sizes)?;
    let sizes = task.sizes();
    let mut config = SearchConfig::new("softmax", sizes.clone());
    config.backend = BackendSpec {
        kind: args.backend.clone(),
        device: args.device.clone(),
    };
    config.evaluations = args.evaluations;
    config.wall = Some(Duration::from_secs(args.time));
    config.tune_budget = args.tune_budget;
    config.seed = args.seed;
    config.out = args.out.clone();
    config.progress = !args.no_progress;

    let language = match args.backend.as_str() {
        "sycl" => Language::Sycl,
        "cuda" => Language::Cuda,
        _ => Language::OpenCl,
    };
    let (seeds, mutator) = if language == Language::OpenCl {
        // Seeds: the naive task baseline, and the base variant of every softmax template (the
        // structural mutator transforms template variants).
        let library = TemplateLibrary::softmax()?;
        let mut extra = Vec::new();
        for template in library.for_task("softmax") {
            let variant = template.instantiate(template.base())?;
            let params = variant.manifest.default_params();
            extra.push((variant.source, params));
        }
        let mutator = MixMutator::new()
            .with(StructuralMutator::softmax()?, 2.0)
            .with(ParamMutator::new(), 1.0);
        (seeds_for(task.as_ref(), language, extra), mutator)
    } else {
        // The templates are OpenCL C: search from the language's naive baseline with parameter
        // moves (each new kernel is tuned as well).
        let mutator = MixMutator::new().with(ParamMutator::new(), 1.0);
        (seeds_for(task.as_ref(), language, Vec::new()), mutator)
    };
    anyhow::ensure!(
        !seeds.is_empty(),
        "the softmax task has no {language:?} baseline kernel to start from"
    );

    let stop = StopHandle::new();
    let on_ctrl_c = stop.clone();
    ctrlc::set_handler(move || on_ctrl_c.stop()).context("installing the Ctrl-C handler")?;

    let outcome = run_search(&config, mutator, seeds, Some(stop))?;
    let s = &outcome.summary;
    println!(
        "\n{} evaluations in {:.0} s ({:?}); {} of {} cells filled",
        s.evaluations, s.wall_seconds, s.stop_reason, s.metrics.filled, s.metrics.cells
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
    println!("report: {}", config.out.join("report.json").display());
    Ok(())
}
