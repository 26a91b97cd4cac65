//! The devices of every backend (`kf devices`, [`device_lines`]) and their measured roofline
//! (`kf devices --characterise`, [`characterise_line`]).

use kf_eval::characterise::{self, BandwidthPoint, CharacteriseOptions};
use kf_eval::BackendSpec;

use crate::BackendError;

/// The backends `kf devices` looks at, in its order.
pub const BACKEND_NAMES: [&str; 3] = ["opencl", "sycl", "cuda"];

/// One line per device of every backend in this build (`opencl  <device>  [queue: <kind>]`,
/// the queue name `kf worker` gives it), or one line saying why a backend has none; and how
/// many devices were found.
pub fn device_lines() -> (Vec<String>, usize) {
    #[allow(unused_mut)]
    let mut lines = Vec::new();
    #[allow(unused_mut)]
    let mut found = 0;
    #[cfg(feature = "opencl")]
    match kf_backend_opencl::list_devices() {
        Ok(list) => {
            for d in list {
                lines.push(format!(
                    "opencl  {d}  [queue: {}]",
                    queue_name("opencl", &d.name)
                ));
                found += 1;
            }
        }
        Err(e) => lines.push(format!("opencl  not available: {e}")),
    }
    #[cfg(feature = "sycl")]
    match kf_backend_sycl::list_devices() {
        Ok(list) => {
            for d in list {
                lines.push(format!(
                    "sycl    {d}  [queue: {}]",
                    queue_name("sycl", &d.name)
                ));
                found += 1;
            }
        }
        Err(e) => lines.push(format!("sycl    not available: {e}")),
    }
    #[cfg(feature = "cuda")]
    match kf_backend_cuda::list_devices() {
        Ok(list) if list.is_empty() => {
            lines.push("cuda    no GPU (kernels compile with NVRTC only)".to_owned())
        }
        Ok(list) => {
            for d in list {
                lines.push(format!(
                    "cuda    {d}  [queue: {}]",
                    queue_name("cuda", &d.name)
                ));
                found += 1;
            }
        }
        Err(e) => lines.push(format!("cuda    not available: {e}")),
    }
    // Where untrusted code (builds, launches, references) runs on this machine.
    lines.push(format!("confinement: {}", kf_eval::confine::probe()));
    (lines, found)
}

/// The queue a device's workers take jobs from (`kf worker`'s device kind); the device's own
/// name without distributed evaluation in this build.
#[allow(dead_code)]
fn queue_name(backend: &str, device: &str) -> String {
    #[cfg(feature = "dist")]
    return crate::distributed::device_kind_named(backend, device);
    #[cfg(not(feature = "dist"))]
    {
        let _ = backend;
        device.to_owned()
    }
}

/// The measured roofline of `name`'s device (`device` selects it, as for `kf eval --device`)
/// next to the backend's estimated peaks, measured now when `refresh` is set or nothing is
/// cached; `Ok(false, line)` when the device is there but could not be measured, or could not
/// be opened. An error only for a backend that is unknown or not in this build.
pub fn characterise_line(
    name: &str,
    device: Option<String>,
    refresh: bool,
) -> Result<(bool, String), BackendError> {
    let spec = BackendSpec::new(name).with_device(device);
    let factory = crate::backends::factory_for(&spec)?;
    let facts = match factory.device_facts(&spec) {
        Ok(facts) => facts,
        Err(e) => return Ok((false, format!("not available: {e}"))),
    };
    let estimate = match (facts.peak_gflops, facts.peak_bandwidth_gbs) {
        (Some(f), Some(b)) => format!("estimated {f:.0} GFLOP/s, {b:.0} GB/s"),
        _ => "no estimate".to_owned(),
    };
    Ok(
        match factory.characterise(&spec, &CharacteriseOptions::default(), refresh) {
            Ok((c, from_cache)) => (true, measured_line(&facts.name, &c, from_cache, &estimate)),
            Err(e) => (
                false,
                format!("not characterised: {} ({estimate}): {e}", facts.name),
            ),
        },
    )
}

/// The line of a measured device: its roofline, the copy bandwidth by working set, and the
/// backend's estimate beside it.
fn measured_line(
    device: &str,
    c: &characterise::Characterisation,
    from_cache: bool,
    estimate: &str,
) -> String {
    // Copy bandwidth by working set: as the evaluator times it (rotated copies, which
    // memory-bound tasks' rooflines use) and with warm caches (the anti-cheat allowance).
    let points = |curve: &[BandwidthPoint]| -> String {
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
    format!(
        "{device}: measured {:.1} GFLOP/s fp32 peak, {:.1} GB/s (copy {:.1}, triad {:.1}){curve}, ridge {:.1} flop/B{}{}; {estimate}",
        c.peak_gflops,
        c.bandwidth_gbs,
        c.copy_gbs,
        c.triad_gbs,
        c.ridge_flop_per_byte(),
        c.load_per_cpu
            .map(|l| format!(", host load {l:.1} per CPU while measured"))
            .unwrap_or_default(),
        if from_cache { " [cached]" } else { "" },
    )
}
