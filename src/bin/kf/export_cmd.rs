//! `kf export`: the best kernels of one or more runs as a Rust crate with typed calls and a
//! per-device, per-size dispatch (kf_export does the work; this only parses arguments).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

/// Arguments of `kf export`.
#[derive(Args)]
pub(crate) struct ExportArgs {
    /// A run directory (`kf search --out`, an example's `--out`), or the folder of a search at
    /// several sizes (`kf search --size A --size B`); repeat it to export several runs of the
    /// same task at other sizes or on other devices into one dispatch table.
    #[arg(long = "run", value_name = "DIR", required = true)]
    runs: Vec<PathBuf>,
    /// Write a Rust crate into this folder (created; its files are overwritten).
    #[arg(long, value_name = "OUT")]
    rust: Option<PathBuf>,
    /// Write a Python module over pyopencl into this folder (`<name>.py` and its pytest
    /// test `test_<name>.py`; NumPy arrays in, NumPy arrays out).
    #[arg(long, value_name = "OUT")]
    python: Option<PathBuf>,
    /// Package name of the generated crate (the Python module's name is the same with `_`
    /// for `-`).
    #[arg(long, default_value = "kf-kernels")]
    name: String,
}

pub(crate) fn run(args: ExportArgs) -> anyhow::Result<ExitCode> {
    if args.rust.is_none() && args.python.is_none() {
        bail!("say what to write: --rust OUT and/or --python OUT");
    }
    if let Some(out) = args.python {
        let mut export = kf_export::PythonExport::new(args.runs.clone(), out);
        export.module = args.name.replace('-', "_");
        let done = kf_export::export_python(&export)?;
        println!(
            "Exported {} configuration(s) into {} ({} files); `pytest` there checks them against NumPy.",
            done.kernels.len(),
            export.out.display(),
            done.files.len()
        );
        list(&done.kernels);
    }
    let Some(out) = args.rust else {
        return Ok(ExitCode::SUCCESS);
    };
    let mut export = kf_export::RustExport::new(args.runs, out);
    export.crate_name = args.name;
    let done = kf_export::export_rust(&export)?;
    println!(
        "Exported {} configuration(s) into {} ({} files); `cargo test` there checks them against the reference.",
        done.kernels.len(),
        export.out.display(),
        done.files.len()
    );
    list(&done.kernels);
    Ok(ExitCode::SUCCESS)
}

fn list(kernels: &[kf_export::TunedKernel]) {
    for k in kernels {
        println!(
            "  {} {} on {} from {}",
            k.task,
            k.sizes_text(),
            k.device,
            k.run.display()
        );
    }
}
