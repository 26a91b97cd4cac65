//! `kf setup`: installs runtimes into the per-user folder every backend finds by itself (the
//! installation is kf-setup's; this is its command line).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use kf_setup::{Description, Installer, Outcome};

#[derive(Args)]
pub(crate) struct SetupArgs {
    /// Also NVRTC and the CUDA headers (about 95 MB; compiling needs no GPU).
    #[arg(long)]
    cuda: bool,
    /// Also NumPy in a Python virtual environment (task files' Python references).
    #[arg(long)]
    numpy: bool,
    /// Also the DPC++ SYCL runtime (about 210 MB; then build kf again: the SYCL backend
    /// compiles its shim against it when it is built).
    #[arg(long)]
    sycl: bool,
    /// Install here instead of the per-user folder ($XDG_DATA_HOME/kernelfoundry); backends
    /// find it through KF_OPENCL_ICD / KF_CUDA_NVRTC / KF_SYCL_RUNTIME then.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// The Intel CPU OpenCL runtime always, then what the flags ask for.
pub(crate) fn run(args: SetupArgs) -> Result<ExitCode> {
    let description = Description::embedded()?;
    let mut installer = match args.dir {
        Some(dir) => Installer::new(dir),
        None => Installer::for_user()?,
    };
    let wanted = [("opencl", true), ("cuda", args.cuda), ("sycl", args.sycl)];
    let mut names: Vec<&str> = wanted.iter().filter(|w| w.1).map(|w| w.0).collect();
    if args.numpy {
        names.push("numpy");
    }
    for name in names {
        for outcome in installer.install_with_requirements(&description, name)? {
            if let Outcome::AlreadyInstalled(path) = outcome {
                eprintln!("[setup] already installed: {}", path.display());
            }
        }
    }
    eprintln!("[setup] done: {}", installer.root().display());
    Ok(ExitCode::SUCCESS)
}
