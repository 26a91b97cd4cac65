//! Device characterisation on the real OpenCL device, and the roofline it gives every
//! evaluation: the micro-kernels compile and time through the `Backend` trait, an honest
//! softmax reports a memory-bound roofline fraction, and a timing faster than the measured
//! roofline allows is still rejected. Skips only when the OpenCL runtime is not installed,
//! unless `KF_REQUIRE_OPENCL=1`.

mod common;

use kf_core::{Backend, ParamValues, Status};
use kf_eval::characterise::{self, Characterisation, CharacteriseOptions, Peaks};
use kf_eval::task::{builtin_task, parse_sizes};
use kf_eval::{EvalConfig, KernelEvaluator};

fn quick() -> CharacteriseOptions {
    CharacteriseOptions {
        repetitions: 2,
        stream_elements: 1 << 21,
        min_launch_seconds: 0.005,
    }
}

fn config() -> EvalConfig {
    common::short_timing(3)
}

#[test]
fn the_device_is_characterised_and_evaluations_report_their_roofline() {
    let Some(backend) = kf_backend_opencl::testing::backend_or_skip() else {
        return;
    };
    let c = characterise::measure(&backend, &quick()).unwrap();
    eprintln!(
        "{}: {:.1} GFLOP/s, {:.1} GB/s (copy {:.1}, triad {:.1}), load {:?} per CPU",
        c.device, c.peak_gflops, c.bandwidth_gbs, c.copy_gbs, c.triad_gbs, c.load_per_cpu
    );
    assert!(c.peak_gflops.is_finite() && c.peak_gflops > 0.1);
    assert!(c.bandwidth_gbs.is_finite() && c.bandwidth_gbs > 0.01);
    assert_eq!(c.backend, "opencl");
    assert_eq!(c.driver_version, backend.device().driver_version);
    // Three smaller working sets, then the full-size copy; ascending.
    assert_eq!(c.bandwidth_curve.len(), 4, "{:?}", c.bandwidth_curve);
    assert!(c
        .bandwidth_curve
        .windows(2)
        .all(|w| w[0].bytes < w[1].bytes));
    assert_eq!(c.bandwidth_curve.last().map(|p| p.gbs), Some(c.copy_gbs));
    // The same working sets, timed as the evaluator times a candidate.
    let sets = |curve: &[characterise::BandwidthPoint]| -> Vec<f64> {
        curve.iter().map(|p| p.bytes).collect()
    };
    assert_eq!(sets(&c.timed_curve), sets(&c.bandwidth_curve));
    assert!(c
        .timed_curve
        .iter()
        .all(|p| p.gbs > 0.0 && p.gbs.is_finite()));
    // The estimate counts the driver's reported clock; CPUs boost above it (a fresh-clone CI
    // run measured 1.27× the estimate with a load of 0.16), so the check is against counting
    // errors (an FMA counted twice would be 2×), not against the clock.
    if let Some(estimate) = backend.device().peak_gflops {
        assert!(
            c.peak_gflops < estimate * 1.6,
            "the measured peak {} is below the upper-bound estimate {estimate}",
            c.peak_gflops
        );
    }

    // Softmax at a small size: under the ridge point of an idle machine, so memory-bound, in
    // GB/s. The ridge is the measured peak GFLOP/s over the bandwidth of the working set, so a
    // peak measured while the processor is busy can put it below softmax's intensity: the
    // classification is checked against the measured ridge, and the case that gives the
    // fraction in GB/s is the one asserted when the measurements say memory-bound.
    let sizes = parse_sizes("ROWS=256,COLS=256").unwrap();
    let task = builtin_task("softmax", &sizes).unwrap();
    let (source, _) = common::shipped_opencl("softmax_naive");
    let facts = backend.device().clone();
    let mut evaluator =
        KernelEvaluator::new(backend, config()).with_peaks(Some(Peaks::measured(&c, &facts)));
    let e = evaluator
        .evaluate(task.as_ref(), &source, &ParamValues::new())
        .unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    let work = task.describe().work;
    let peaks = Peaks::measured(&c, &facts);
    let ridge = peaks.gflops / peaks.gbs_for(work.bytes);
    let intensity = work.flops / work.bytes;
    assert_eq!(
        e.memory_bound,
        Some(intensity < ridge),
        "intensity {intensity} flop/byte against the measured ridge {ridge} \
         ({} GFLOP/s, load per CPU {:?})",
        peaks.gflops,
        c.load_per_cpu
    );
    let fraction = e.roofline_fraction.unwrap();
    assert!(fraction > 0.0 && fraction.is_finite());
    if e.memory_bound == Some(true) {
        let gbs = e.gbs.unwrap();
        // Against the bandwidth of its working set as the evaluator times it: the timed
        // curve's smallest working set at least as large (256×256 floats in and out fit a
        // cache).
        let bytes = work.bytes;
        let peak = peaks.gbs_for(bytes);
        let timed = c
            .timed_curve
            .iter()
            .find(|p| p.bytes >= bytes)
            .or(c.timed_curve.last())
            .map(|p| p.gbs);
        assert_eq!(Some(peak), timed, "{:?}", c.timed_curve);
        assert!((fraction - gbs / peak).abs() < 1e-9 * fraction.max(1.0));
    } else {
        eprintln!(
            "softmax measured compute-bound (ridge {ridge} below its intensity {intensity}: a \
             peak measured on a busy processor); its fraction in GB/s is not checked this time"
        );
    }

    // Peaks "measured" a million times too low: the same honest kernel now beats the measured
    // roofline by far more than the margin and is rejected as impossible.
    let mut slow = c.clone();
    slow.peak_gflops = c.peak_gflops * 1e-6;
    slow.load_per_cpu = None;
    let mut facts_without_estimates = facts.clone();
    facts_without_estimates.peak_gflops = None;
    facts_without_estimates.peak_bandwidth_gbs = None;
    slow.bandwidth_gbs = c.bandwidth_gbs * 1e-6;
    for p in &mut slow.bandwidth_curve {
        p.gbs *= 1e-6;
    }
    let mut evaluator =
        evaluator.with_peaks(Some(Peaks::measured(&slow, &facts_without_estimates)));
    let e = evaluator
        .evaluate(task.as_ref(), &source, &ParamValues::new())
        .unwrap();
    common::assert_judged(&e, Status::RuntimeError, &["cannot be genuine"]);
}

#[test]
fn the_cache_file_is_written_atomically_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(characterise::CACHE_FILE);
    let c = Characterisation {
        backend: "opencl".into(),
        device: "d".into(),
        driver_version: "7".into(),
        peak_gflops: 1.0,
        bandwidth_gbs: 1.0,
        copy_gbs: 1.0,
        triad_gbs: 1.0,
        stream_elements: 64,
        repetitions: 1,
        measured_unix: 1,
        load_per_cpu: Some(0.5),
        host_cpus: None,
        bandwidth_curve: vec![characterise::BandwidthPoint {
            bytes: 128.0,
            gbs: 1.0,
        }],
        timed_curve: vec![characterise::BandwidthPoint {
            bytes: 128.0,
            gbs: 0.5,
        }],
    };
    characterise::store_in(&path, &c).unwrap();
    // Only the file itself and its lock file are left: the temporary one was renamed over it
    // (the lock file stays: removing it would race with a writer waiting on it).
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            characterise::CACHE_FILE.to_owned(),
            format!("{}.lock", characterise::CACHE_FILE)
        ]
    );
    let mut facts = kf_core::DeviceFacts::unknown("d");
    facts.driver_version = "7".into();
    assert_eq!(
        characterise::cached_in(&path, "opencl", &facts),
        Some(c.clone())
    );
    // A CPU device's figures hold for the CPUs they were measured on (one core moves less
    // than two): an entry from another count of CPUs is not this process's.
    let mut cpu = facts.clone();
    cpu.kind = kf_core::DeviceKind::Cpu;
    assert_eq!(characterise::cached_in(&path, "opencl", &cpu), None);
    let here = std::thread::available_parallelism().map_or(1, |n| n.get());
    let on = |n: usize| Characterisation {
        host_cpus: Some(n),
        ..c.clone()
    };
    characterise::store_in(&path, &on(here + 1)).unwrap();
    assert_eq!(characterise::cached_in(&path, "opencl", &cpu), None);
    characterise::store_in(&path, &on(here)).unwrap();
    assert_eq!(
        characterise::cached_in(&path, "opencl", &cpu),
        Some(on(here))
    );
    // The GPU-style entry without CPUs is still there beside them.
    assert_eq!(
        characterise::cached_in(&path, "opencl", &facts),
        Some(c.clone())
    );
    // An entry measured before the timed curve existed is stale: measured again, not used.
    let stale = Characterisation {
        timed_curve: Vec::new(),
        ..c
    };
    characterise::store_in(&path, &stale).unwrap();
    assert_eq!(characterise::cached_in(&path, "opencl", &facts), None);
}
