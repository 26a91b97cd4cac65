//! `kf devices --characterise [--backend B] [--device D] [--refresh]`: the measured roofline of
//! each backend's default device, next to the backend's estimated peaks.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use kernelfoundry::backends::{open_cuda, open_opencl, open_sycl};
use kernelfoundry::core::Backend;
use kernelfoundry::eval::characterise::{self, CharacteriseOptions};
use kernelfoundry::eval::BackendSpec;

/// Options of `kf devices`.
#[derive(Args)]
pub(crate) struct DevicesArgs {
    /// Measure each device's peak fp32 GFLOP/s (FMA micro-kernel) and sustained GB/s (copy and
    /// triad), or print the cached figures; the evaluator's roofline uses them.
    #[arg(long)]
    pub(crate) characterise: bool,
    /// Only this backend (`opencl`, `sycl`, `cuda`).
    #[arg(long, value_name = "B")]
    pub(crate) backend: Option<String>,
    /// Device selector of the backend (as for `kf eval --device`).
    #[arg(long, value_name = "D")]
    pub(crate) device: Option<String>,
    /// Measure again even when figures are cached.
    #[arg(long)]
    pub(crate) refresh: bool,
}

/// Characterises the default device of each backend asked for.
pub(crate) fn run(args: DevicesArgs) -> anyhow::Result<ExitCode> {
    let names: Vec<&str> = match &args.backend {
        Some(b) => vec![b.as_str()],
        None => vec!["opencl", "sycl", "cuda"],
    };
    let mut out = std::io::stdout().lock();
    let mut ok = 0;
    for name in names {
        let mut spec = BackendSpec::new(name);
        spec.device = args.device.clone();
        kernelfoundry::backends::check(&spec).map_err(anyhow::Error::msg)?;
        let line = match name {
            "opencl" => open_opencl(&spec).map(|b| one(&b, args.refresh)),
            "sycl" => open_sycl(&spec).map(|b| one(&b, args.refresh)),
            _ => open_cuda(&spec).map(|b| one(&b, args.refresh)),
        };
        let line = match line {
            Ok(Ok(l)) => {
                ok += 1;
                l
            }
            Ok(Err(e)) => format!("not characterised: {e}"),
            Err(e) => format!("not available: {e}"),
        };
        writeln!(out, "{name:<7} {line}")?;
    }
    Ok(if ok > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn one<B: Backend>(backend: &B, refresh: bool) -> Result<String, String> {
    let facts = backend.device();
    let estimate = match (facts.peak_gflops, facts.peak_bandwidth_gbs) {
        (Some(f), Some(b)) => format!("estimated {f:.0} GFLOP/s, {b:.0} GB/s"),
        _ => "no estimate".to_owned(),
    };
    let (c, from_cache) =
        characterise::characterise(backend, &CharacteriseOptions::default(), refresh)
            .map_err(|e| format!("{} ({estimate}): {e}", facts.name))?;
    // Copy bandwidth by working set: as the evaluator times it (rotated copies, which
    // memory-bound tasks' rooflines use) and with warm caches (the anti-cheat allowance).
    let points = |curve: &[characterise::BandwidthPoint]| -> String {
        curve
            .iter()
            .map(|p| format!("{:.0} MB {:.1}", p.bytes / 1e6, p.gbs))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut curve = String::new();
    if !c.timed_curve.is_empty() {
        curve += &format!(
            "; copy by working set as timed (rotated): {} GB/s",
            points(&c.timed_curve)
        );
    }
    if !c.bandwidth_curve.is_empty() {
        curve += &format!("; warm: {} GB/s", points(&c.bandwidth_curve));
    }
    Ok(format!(
        "{}: measured {:.1} GFLOP/s fp32 peak, {:.1} GB/s (copy {:.1}, triad {:.1}){curve}, ridge {:.1} flop/B{}{}; {estimate}",
        facts.name,
        c.peak_gflops,
        c.bandwidth_gbs,
        c.copy_gbs,
        c.triad_gbs,
        c.ridge_flop_per_byte(),
        c.load_per_cpu
            .map(|l| format!(", host load {l:.1} per CPU while measured"))
            .unwrap_or_default(),
        if from_cache { " [cached]" } else { "" },
    ))
}
