//! `kf search` measures its device's roofline before the workers start when none is cached
//! (real OpenCL runtime): the first search on a device writes the characterisation to the
//! cache and reports roofline fractions against it, the next one reads it back, and
//! `--no-characterise` measures nothing. Skips (printing `SKIPPED: …`) when no OpenCL runtime
//! is present and `KF_REQUIRE_OPENCL` is not `1`.

use std::path::Path;
use std::process::Output;

mod common;
use common::{gemm_search, opencl_scratch, text};

/// A short gemm search writing to `out`, with the characterisation cache at `cache`.
fn search(out: &Path, cache: &Path, extra: &[&str]) -> Output {
    let extra = [&["--no-reference"], extra].concat();
    gemm_search(out, "3", &extra, &[("KF_DEVICE_CACHE", cache)])
}

#[test]
fn a_search_characterises_its_device_once_and_reports_against_the_measured_roofline() {
    let Some(tmp) = opencl_scratch() else {
        return;
    };
    let cache = tmp.path().join("devices.json");

    let first = search(&tmp.path().join("a"), &cache, &[]);
    assert!(text(&first).contains("measured now"), "{}", text(&first));
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    let (key, c) = stored.as_object().unwrap().iter().next().unwrap();
    assert!(key.starts_with("opencl|"), "{stored}");
    let peak = c["peak_gflops"].as_f64().unwrap();
    assert!(
        peak > 0.0 && c["bandwidth_gbs"].as_f64().unwrap() > 0.0,
        "{c}"
    );
    // The workers judged against the measured roofline: min(peak, intensity × the bandwidth
    // of the task's working set as the evaluator times it), the smallest measured working set
    // of the timed curve at least as large (the largest one's for a larger task).
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("a/report.json")).unwrap())
            .unwrap();
    let gflops = report["best_gflops"].as_f64().unwrap();
    let fraction = report["roofline_fraction"].as_f64().unwrap();
    let (flops, bytes) = (2.0 * 64f64.powi(3), 3.0 * 64f64.powi(2) * 4.0);
    let timed = c["timed_curve"].as_array().unwrap();
    let gbs = timed
        .iter()
        .find(|p| p["bytes"].as_f64().unwrap() >= bytes)
        .or(timed.last())
        .map(|p| p["gbs"].as_f64().unwrap())
        .unwrap();
    let roofline = peak.min(flops / bytes * gbs);
    assert!(
        (fraction * roofline - gflops).abs() <= 0.01 * gflops,
        "fraction {fraction} is not {gflops} GFLOP/s of the measured roofline {roofline}: {report}"
    );

    let second = search(&tmp.path().join("b"), &cache, &[]);
    assert!(text(&second).contains("(cached)"), "{}", text(&second));
    assert!(!text(&second).contains("measured now"), "{}", text(&second));

    let elsewhere = tmp.path().join("other.json");
    let skipped = search(&tmp.path().join("c"), &elsewhere, &["--no-characterise"]);
    assert!(!elsewhere.exists(), "{}", text(&skipped));
    assert!(
        !text(&skipped).contains("roofline of"),
        "{}",
        text(&skipped)
    );
}
