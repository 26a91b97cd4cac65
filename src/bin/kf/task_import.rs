//! `kf task import-kernelbench`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use indexmap::IndexMap;
use kernelfoundry::kernelbench::{
    import_kernelbench, ImportOptions, ImportTolerance, KernelBenchError, ReferenceKind,
    ReferencePreference, KERNELBENCH_TOLERANCE,
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
    let mut sizes = IndexMap::new();
    for text in args.sizes.iter().filter(|s| !s.trim().is_empty()) {
        let Some((name, value)) = text.split_once('=') else {
            bail!("--size `{text}` is not NAME=VALUE");
        };
        let value: i64 = value
            .trim()
            .parse()
            .with_context(|| format!("--size `{text}`: not an integer"))?;
        sizes.insert(name.trim().to_owned(), value);
    }
    let options = ImportOptions {
        problem: args.problem,
        out_dir: args.out,
        sizes,
        python: args.python,
        reference: if args.numpy {
            ReferencePreference::Numpy
        } else {
            ReferencePreference::Auto
        },
        tolerance: ImportTolerance {
            atol: args.atol,
            rtol: args.rtol,
        },
    };
    for (name, value) in [("--atol", args.atol), ("--rtol", args.rtol)] {
        if !(value.is_finite() && value >= 0.0) {
            bail!("{name} {value} is not a non-negative number");
        }
    }
    match import_kernelbench(&options) {
        Ok(report) => {
            println!("wrote {}", report.task_file.display());
            println!(
                "reference: {} ({})",
                report.reference_file.display(),
                match report.reference {
                    ReferenceKind::Torch => "the unchanged problem file with PyTorch on the CPU",
                    ReferenceKind::Numpy => "NumPy",
                }
            );
            println!("kernel arguments: {}", report.spec.args.join(", "));
            for b in &report.spec.buffers {
                let shape: Vec<String> = b.shape.iter().map(|e| e.text()).collect();
                println!(
                    "  {:<8} {:<24} {} [{}]",
                    format!("{:?}", b.role).to_lowercase(),
                    b.name,
                    b.dtype,
                    shape.join(", ")
                );
            }
            let sizes: Vec<String> = report
                .spec
                .sizes
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            println!("sizes: {}", sizes.join(", "));
            if report.spec.baseline.is_none() {
                println!(
                    "no baseline: write naive.toml (+ its .cl) beside the task file and add \
                     [baseline] kernel = \"naive.toml\""
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ KernelBenchError::ReferenceTemplateWritten { .. }) => {
            eprintln!("kf: {e}");
            Ok(ExitCode::from(3))
        }
        Err(e) => Err(e.into()),
    }
}
