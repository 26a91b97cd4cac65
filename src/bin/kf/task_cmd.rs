//! `kf task check T.toml`: validates a task file and runs its reference once.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use kernelfoundry::eval::taskfile::{FileTask, TaskFile};
use kernelfoundry::eval::tasks::{parse_sizes, sizes_text, KernelTask};

/// Arguments of `kf task`.
#[derive(Args)]
pub(crate) struct TaskArgs {
    #[command(subcommand)]
    command: TaskCommand,
}

#[derive(Subcommand)]
enum TaskCommand {
    /// Validate a task file, run its reference once, and print shapes and timings.
    Check(CheckArgs),
    /// Turn a KernelBench problem file into a task file (sizes, buffers, reference).
    ImportKernelbench(crate::task_import::ImportKernelBenchArgs),
}

#[derive(Args)]
struct CheckArgs {
    /// The task file.
    file: PathBuf,
    /// Problem sizes, such as ROWS=64,COLS=32 (missing ones take the file's defaults).
    #[arg(long, default_value = "")]
    size: String,
    /// Seed of the input set the reference runs on.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub(crate) fn run(args: TaskArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        TaskCommand::Check(a) => check(a),
        TaskCommand::ImportKernelbench(a) => crate::task_import::run(a),
    }
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let sizes = parse_sizes(&args.size).context("--size")?;
    let file = TaskFile::load(&args.file)?;
    // The reference really runs: no cache.
    let task = FileTask::new(file, &sizes)?.with_cache_dir(None);
    let spec = &task.file().spec;
    println!("task {} ({}): valid", spec.name, args.file.display());
    println!("sizes: {}", sizes_text(&task.sizes()));
    println!("signature: {}{}", spec.name, task.signature());
    for (b, shape) in spec.buffers.iter().zip(task.shapes()) {
        println!(
            "  buffer {:<10} {} {:?} {:?}",
            b.name, b.dtype, shape, b.role
        );
    }
    for s in &spec.scalars {
        println!("  scalar {:<10} {} = {}", s.name, s.dtype, s.value.as_f64());
    }
    let work = task.describe().work;
    println!("work: {:.3e} flops, {:.3e} bytes", work.flops, work.bytes);
    let alternatives: Vec<String> = task.alternative_sizes().iter().map(sizes_text).collect();
    println!("alternative sizes: {}", alternatives.join("; "));
    let baselines = spec
        .baseline
        .as_ref()
        .map(|b| b.kernel.to_vec().join(", "))
        .unwrap_or_else(|| "none".into());
    println!("baseline: {baselines}");
    let r = &spec.reference;
    if let Some(k) = &r.kernel {
        println!("reference: trusted kernel {k} (runs on the evaluator's backend; not run here)");
        return Ok(ExitCode::SUCCESS);
    }
    let data = task.inputs(args.seed, 0);
    let (outputs, took) = task.run_reference(&data)?;
    let which = r.python.as_deref().or(r.rust.as_deref()).unwrap_or("-");
    println!(
        "reference {which}: ran in {:.3} s on input set 0 (seed {})",
        took.as_secs_f64(),
        args.seed
    );
    for ((b, shape), out) in spec.buffers.iter().zip(task.shapes()).zip(&outputs) {
        if out.is_empty() {
            continue;
        }
        let v = out.to_f64();
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
                (l.min(*x), h.max(*x))
            });
        println!(
            "  output {:<10} {} {:?}: finite, range [{lo:.4}, {hi:.4}]",
            b.name, b.dtype, shape
        );
    }
    Ok(ExitCode::SUCCESS)
}
