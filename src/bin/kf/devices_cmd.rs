//! `kf devices [--characterise [--backend B] [--device D] [--refresh]]`: every backend's
//! devices, or the measured roofline of each backend's default device next to the backend's
//! estimated peaks (`kernelfoundry::search::devices`).

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use kernelfoundry::search::devices::{characterise_line, device_lines, BACKEND_NAMES};

/// Options of `kf devices`.
#[derive(Args)]
pub(crate) struct DevicesArgs {
    /// Measure each device's peak fp32 GFLOP/s (FMA micro-kernel) and sustained GB/s (copy and
    /// triad), or print the cached figures; the evaluator's roofline uses them.
    #[arg(long)]
    characterise: bool,
    /// Only this backend (`opencl`, `sycl`, `cuda`).
    #[arg(long, value_name = "B")]
    backend: Option<String>,
    /// Device selector of the backend (as for `kf eval --device`).
    #[arg(long, value_name = "D")]
    device: Option<String>,
    /// Measure again even when figures are cached.
    #[arg(long)]
    refresh: bool,
}

pub(crate) fn run(args: DevicesArgs) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    let mut found = 0;
    let written = if args.characterise {
        let names = args
            .backend
            .as_ref()
            .map_or(BACKEND_NAMES.to_vec(), |b| vec![b.as_str()]);
        names.into_iter().try_for_each(|name| {
            let (measured, line) = characterise_line(name, args.device.clone(), args.refresh)?;
            found += usize::from(measured);
            Ok::<_, anyhow::Error>(writeln!(out, "{name:<7} {line}")?)
        })
    } else {
        let (lines, devices) = device_lines();
        found = devices;
        lines.iter().try_for_each(|l| Ok(writeln!(out, "{l}")?))
    };
    match written {
        // A closed pipe (`kf devices | head -1`) ends the listing quietly.
        Err(e)
            if e.downcast_ref::<std::io::Error>().map(|e| e.kind())
                == Some(std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e),
        Ok(()) if found > 0 => Ok(ExitCode::SUCCESS),
        Ok(()) => Ok(ExitCode::from(1)),
    }
}
