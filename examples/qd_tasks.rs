//! Does diversity pay on real kernels? The shipped search on gemm and softmax with each of its
//! archive and scheduler configurations, several seeds each, the same candidate budget, one
//! after the other on this machine; prints coverage, QD-score and best throughput per
//! configuration (mean ± standard deviation over the seeds) and the device evaluations spent.
//!
//! ```sh
//! scripts/setup.sh
//! cargo run --release --example qd_tasks                        # gemm 512³ and softmax, 5 seeds
//! cargo run --release --example qd_tasks -- --tasks gemm --seeds 3 --evaluations 30
//! ```
//!
//! The configurations: `grid+mix` (one grid, fixed mutator weights, the archive's 70/20/10
//! parent selection: the search before emitters), `grid+bandit` (emitters under the bandit
//! scheduler), `cvt+bandit` (a CVT archive over continuous descriptors), `islands4+bandit`
//! (four grids with migration), and `keep-best` (one cell: no diversity, the best kernel
//! only, with the same mutators; its coverage is that of the 64-cell grid its evaluated
//! kernels would fill, read from its log, and its QD-score that of its one cell). Kernels are timed for real, so a seed does not fix
//! the result: the spread over seeds is part of the answer.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use kernelfoundry::core::{
    BehaviorClassifier, Candidate, ChildRecord, Descriptor, DescriptorSpace, Dimension, Evaluation,
};
use kernelfoundry::eval::task::parse_sizes;
use kernelfoundry::search::{defaults, Search, SearchConfig, ShippedArchive, ShippedScheduler};

#[derive(Parser)]
#[command(about = "Coverage, QD-score and best kernel per archive/scheduler configuration")]
struct Args {
    /// Tasks, comma-separated (gemm, softmax).
    #[arg(long, default_value = "gemm,softmax")]
    tasks: String,
    /// Sizes per task, `task:SIZES;…` (default gemm 512³, softmax at its default).
    #[arg(long, default_value = "gemm:M=512,N=512,K=512")]
    sizes: String,
    /// Seeds per configuration (0, 1, …).
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// Candidates per run.
    #[arg(long, default_value_t = 40)]
    evaluations: u64,
    /// Configurations, comma-separated (default: all).
    #[arg(
        long,
        default_value = "grid+mix,grid+bandit,cvt+bandit,islands4+bandit,keep-best"
    )]
    configs: String,
    /// Where the runs go (one folder per task, configuration and seed).
    #[arg(long, default_value = "runs/qd-tasks")]
    out: PathBuf,
}

/// One cell for every kernel: a search that keeps only the best one.
struct KeepBest {
    space: DescriptorSpace,
}

impl BehaviorClassifier for KeepBest {
    type Error = std::convert::Infallible;

    fn space(&self) -> &DescriptorSpace {
        &self.space
    }

    fn classify(&self, _: &Candidate, _: &Evaluation) -> Result<Descriptor, Self::Error> {
        Ok(Descriptor::new(vec![0], "keep-best"))
    }
}

/// What one run gave.
struct Outcome {
    cells: f64,
    qd: f64,
    best: f64,
    device_evaluations: f64,
    seconds: f64,
}

fn run_one(
    task: &str,
    sizes: &str,
    config_name: &str,
    seed: u64,
    evaluations: u64,
    out: &Path,
) -> anyhow::Result<Outcome> {
    let sizes = parse_sizes(sizes)?;
    let mut config = SearchConfig::new(task, sizes);
    config.evaluations = evaluations;
    config.seed = seed;
    config.out = out.to_path_buf();
    config.progress = false;
    config.reference = false;
    config.wall = Some(defaults::WALL);
    let grid = ShippedArchive::default();
    let (archive, scheduler) = match config_name {
        "grid+mix" | "keep-best" => (grid, ShippedScheduler::mix()),
        "grid+bandit" => (grid, ShippedScheduler::bandit()),
        "cvt+bandit" => (grid.with_cvt(defaults::cvt()), ShippedScheduler::bandit()),
        "islands4+bandit" => (grid.with_islands(4), ShippedScheduler::bandit()),
        other => anyhow::bail!("unknown configuration `{other}`"),
    };
    let _ = std::fs::remove_dir_all(out);
    let started = std::time::Instant::now();
    let builder = Search::builder()
        .config(config)
        .archive_factory(archive)
        .scheduler(scheduler);
    let _outcome = if config_name == "keep-best" {
        let space = DescriptorSpace::new(vec![Dimension::new("all", ["all"])]);
        builder
            .classifier(KeepBest { space: space? })
            .build()?
            .run()?
    } else {
        builder.build()?.run()?
    };
    let seconds = started.elapsed().as_secs_f64();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json"))?)?;
    let number = |key: &str| report.get(key).and_then(serde_json::Value::as_f64);
    let memory_bound = report
        .get("memory_bound")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    let best = if memory_bound {
        number("best_gbs")
    } else {
        number("best_gflops")
    }
    .unwrap_or(0.0);
    let cells = if config_name == "keep-best" {
        grid_cells_of_log(out)?
    } else {
        number("cells_filled").unwrap_or(0.0)
    };
    Ok(Outcome {
        cells,
        qd: number("qd_score").unwrap_or(0.0),
        best,
        device_evaluations: number("device_evaluations").unwrap_or(0.0),
        seconds,
    })
}

/// The 64-cell grid cells a keep-best run's correct kernels would fill: each evaluated
/// kernel's source classified again by the shipped classifier (without compiler facts).
fn grid_cells_of_log(out: &Path) -> anyhow::Result<f64> {
    let run =
        kernelfoundry::archive::read_run(out.join("run")).context("the keep-best run directory")?;
    let classifier = Arc::new(defaults::classifier());
    let predictor = kernelfoundry::search::cell_predictor(&classifier);
    let mut cells = std::collections::HashSet::new();
    for record in &run.records {
        for child in &record.children {
            let ChildRecord::Judged { elite, .. } = child else {
                continue;
            };
            if elite.evaluation.status.is_correct() {
                let (source, params) = (&elite.candidate.source, &elite.candidate.params);
                if let Some(c) = predictor.predict(source, params) {
                    cells.insert(c);
                }
            }
        }
    }
    Ok(cells.len() as f64)
}

fn mean_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, var.sqrt())
}

fn main() -> anyhow::Result<()> {
    // Evaluation workers are this program, re-executed: serve first if we are one.
    kernelfoundry::init();
    let args = Args::parse();
    let sizes_of = |task: &str| -> String {
        args.sizes
            .split(';')
            .find_map(|s| s.strip_prefix(&format!("{task}:")).map(str::to_owned))
            .unwrap_or_default()
    };
    // The searches print their own reports; the table comes last.
    let mut rows = vec![
        "| task | configuration | cells | QD-score | best | device evals | wall s |".to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
    ];
    for task in args.tasks.split(',') {
        let unit = if task == "softmax" { "GB/s" } else { "GFLOP/s" };
        for config_name in args.configs.split(',') {
            let mut outcomes = Vec::new();
            for seed in 0..args.seeds {
                let out = args.out.join(format!("{task}-{config_name}-{seed}"));
                let o = run_one(
                    task,
                    &sizes_of(task),
                    config_name,
                    seed,
                    args.evaluations,
                    &out,
                )
                .with_context(|| format!("{task} {config_name} seed {seed}"))?;
                eprintln!(
                    "{task} {config_name} seed {seed}: {} cells, QD {:.1}, best {:.1} {unit}, {:.0} device evals, {:.0} s",
                    o.cells, o.qd, o.best, o.device_evaluations, o.seconds
                );
                outcomes.push(o);
            }
            let col = |f: fn(&Outcome) -> f64| mean_sd(&outcomes.iter().map(f).collect::<Vec<_>>());
            let (c, cs) = col(|o| o.cells);
            let (q, qs) = col(|o| o.qd);
            let (b, bs) = col(|o| o.best);
            let (d, _) = col(|o| o.device_evaluations);
            let (w, _) = col(|o| o.seconds);
            rows.push(format!(
                "| {task} | {config_name} | {c:.1} ± {cs:.1} | {q:.1} ± {qs:.1} | {b:.1} ± {bs:.1} {unit} | {d:.0} | {w:.0} |"
            ));
        }
    }
    println!("\n{}", rows.join("\n"));
    Ok(())
}
