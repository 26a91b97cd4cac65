//! `kf tune --start` on the real OpenCL runtime: the manifest's defaults are evaluated first
//! when they are a valid configuration at the requested sizes, skipped with a note naming the
//! broken rule when they are not, and left out with `--start none`. Skips (printing
//! `SKIPPED: …`) when no OpenCL runtime is present and `KF_REQUIRE_OPENCL` is not `1`.

use std::path::{Path, PathBuf};

mod common;
use common::{kf, opencl_scratch, text};

/// The tiled GEMM kernel with its tile sizes listed largest first: its default configuration
/// is TS = 64, which does not divide M = N = K = 32.
fn kernel_with_large_defaults(dir: &Path) -> PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("kf-eval/kernels");
    std::fs::copy(shipped.join("gemm_tiled.cl"), dir.join("gemm_tiled.cl")).unwrap();
    let manifest = std::fs::read_to_string(shipped.join("gemm_tiled.toml"))
        .unwrap()
        .replace("TS = [8, 16, 32, 64]", "TS = [64, 8, 16, 32]");
    assert!(manifest.contains("TS = [64, 8, 16, 32]"), "{manifest}");
    let path = dir.join("gemm_tiled.toml");
    std::fs::write(&path, manifest).unwrap();
    path
}

/// Runs `kf tune` on `kernel` at M = N = K = `size` with `extra` arguments; the JSON summary
/// and standard error.
fn tune(kernel: &Path, size: u32, cache: &Path, extra: &[&str]) -> (serde_json::Value, String) {
    let sizes = format!("M={size},N={size},K={size}");
    let mut args = vec![
        "tune",
        "--task",
        "gemm",
        "--size",
        &sizes,
        "--kernel",
        kernel.to_str().unwrap(),
        "--budget",
        "3",
        "--cache",
        cache.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = kf(&args);
    assert!(out.status.success(), "{}", text(&out));
    let summary = serde_json::from_slice(&out.stdout).unwrap();
    (summary, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn defaults_go_first_are_skipped_when_invalid_and_left_out_on_request() {
    let Some(tmp) = opencl_scratch() else {
        return;
    };
    let kernel = kernel_with_large_defaults(tmp.path());

    // At 64³ the defaults (TS = 64, WPT = 1) are valid: evaluated first, compared with the best.
    let (v, _) = tune(&kernel, 64, &tmp.path().join("a.json"), &[]);
    assert_eq!(v["start"], "defaults", "{v}");
    assert_eq!(
        v["defaults"]["config"],
        serde_json::json!({"TS": 64, "WPT": 1}),
        "{v}"
    );
    assert_eq!(v["evaluations"], 3, "{v}");

    // At 32³ they break `M % TS == 0`: skipped with a note, and the strategy spends the budget.
    let (v, stderr) = tune(&kernel, 32, &tmp.path().join("b.json"), &[]);
    assert!(
        stderr.contains("the manifest's defaults") && stderr.contains("M % TS == 0"),
        "{stderr}"
    );
    assert!(v["defaults"].is_null(), "{v}");
    assert_eq!(v["evaluations"], 3, "{v}");
    assert_eq!(v["confirmed_status"], "correct", "{v}");

    // `--start none`: the strategy chooses every configuration.
    let (v, _) = tune(
        &kernel,
        64,
        &tmp.path().join("c.json"),
        &["--start", "none"],
    );
    assert_eq!(v["start"], "none", "{v}");
    assert!(v["defaults"].is_null(), "{v}");
    assert_eq!(v["evaluations"], 3, "{v}");
}
