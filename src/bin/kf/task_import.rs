//! `kf task import-kernelbench`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kernelfoundry::kernelbench::{
    import_kernelbench, parse_size_assignments, ImportOptions, ImportTolerance, KernelBenchError,
    ReferencePreference, SizeBudget, KERNELBENCH_TOLERANCE,
};

/// Arguments of `kf task import-kernelbench`.
#[derive(Args)]
pub(crate) struct ImportKernelBenchArgs {
    /// The KernelBench problem file (a PyTorch `Model` with get_inputs()/get_init_inputs()).
    problem: PathBuf,
    /// The folder to write the task into (task.toml, the problem, its reference).
    #[arg(long)]
    out: PathBuf,
    /// Default sizes for the task instead of the problem's, NAME=VALUE; repeatable or
    /// comma-separated (the problems' sizes are meant for large GPUs).
    #[arg(long = "size", value_name = "NAME=VALUE", value_delimiter = ',')]
    sizes: Vec<String>,
    /// Lower every size of the problem above N to N (those given with --size excepted).
    #[arg(long, value_name = "N", conflicts_with = "fit")]
    max_size: Option<i64>,
    /// The size rule: scale all of the problem's sizes (those given with --size excepted) by
    /// one common factor until its inputs, weights and outputs take at most 32 MiB and its
    /// matrix products and convolutions at most 2 GFLOP (sizes of 16 and below stay; each
    /// scaled size keeps its power-of-two divisor up to 32).
    #[arg(long)]
    fit: bool,
    /// Use the NumPy reference `<stem>_ref.py` even when PyTorch is installed.
    #[arg(long)]
    numpy: bool,
    /// Python interpreter (default: KF_PYTHON, else .runtime/venv/bin/python, else python3).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Absolute tolerance of the element-wise check written into the task (default 1e-2,
    /// KernelBench's own `allclose` check; `[tolerance]` in the task file can change it later).
    #[arg(long, default_value_t = KERNELBENCH_TOLERANCE.atol)]
    atol: f64,
    /// Relative tolerance of the element-wise check (default 1e-2, KernelBench's).
    #[arg(long, default_value_t = KERNELBENCH_TOLERANCE.rtol)]
    rtol: f64,
}

pub(crate) fn run(args: ImportKernelBenchArgs) -> anyhow::Result<ExitCode> {
    let options = ImportOptions {
        problem: args.problem,
        out_dir: args.out,
        sizes: parse_size_assignments(&args.sizes)?,
        max_size: args.max_size,
        fit: args.fit.then_some(SizeBudget::SUITE),
        python: args.python,
        reference: if args.numpy {
            ReferencePreference::Numpy
        } else {
            ReferencePreference::Auto
        },
        tolerance: ImportTolerance::new(args.atol, args.rtol)?,
    };
    match import_kernelbench(&options) {
        Ok(report) => {
            print!("{}", report.describe());
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ KernelBenchError::ReferenceTemplateWritten { .. }) => {
            eprintln!("kf: {e}");
            Ok(ExitCode::from(3))
        }
        Err(e) => Err(e.into()),
    }
}
