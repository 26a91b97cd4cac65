//! `kf tune` with compile-ahead on the real OpenCL runtime: a batch's configurations are
//! compiled at once in worker processes, then verified and timed one after another. A
//! configuration that does not build is answered from its compile-ahead verdict (a compile
//! failure in the result and in the Kernel Tuner cache); one that builds is still verified and
//! timed in full. Skips (printing `SKIPPED: …`) when no OpenCL runtime is present and
//! `KF_REQUIRE_OPENCL` is not `1`.

use std::path::Path;

mod common;
use common::{kf, opencl_scratch, text, tiled_gemm_with};

/// The tiled GEMM kernel with one more parameter, `BROKEN` (last, so the exhaustive order
/// alternates it): at 1 the source does not build.
fn kernel_with_a_broken_half(dir: &Path) -> std::path::PathBuf {
    tiled_gemm_with(
        dir,
        "BROKEN = [0, 1]",
        "#if BROKEN\n#error this configuration does not build\n#endif\n",
    )
}

#[test]
fn compiled_ahead_batches_answer_build_failures_and_time_the_rest() {
    let Some(tmp) = opencl_scratch() else {
        return;
    };
    let kernel = kernel_with_a_broken_half(tmp.path());
    let cache = tmp.path().join("tune.json");
    let run = |width: &str| {
        let out = kf(&[
            "tune",
            "--task",
            "gemm",
            "--size",
            "M=64,N=64,K=64",
            "--kernel",
            kernel.to_str().unwrap(),
            "--strategy",
            "exhaustive",
            "--budget",
            "8",
            "--compile-ahead",
            width,
            "--cache",
            cache.to_str().unwrap(),
            "--json",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        std::fs::remove_file(&cache).unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let ahead = run("4");
    let one_by_one = run("1");
    for v in [&ahead, &one_by_one] {
        assert_eq!(v["evaluations"], 8, "{v}");
        assert_eq!(v["confirmed_status"], "correct", "{v}");
        assert_eq!(v["best_config"]["BROKEN"], 0, "{v}");
    }
    // The same configurations fail either way: compile-ahead changes when a configuration is
    // built, not what the protocol says of it.
    assert_eq!(
        ahead["failures"], one_by_one["failures"],
        "{ahead}\n{one_by_one}"
    );
    assert!(ahead["failures"].as_u64().unwrap() >= 1, "{ahead}");
    let profile = &ahead["profile"];
    assert_eq!(profile["compile_ahead"]["width"], 4, "{profile}");
    assert_eq!(profile["compile_ahead"]["configurations"], 8, "{profile}");
    assert_eq!(one_by_one["profile"]["compile_ahead"]["batches"], 0);
    // Only the configurations that built reached the timing worker.
    let timed = profile["evaluations"]["trials"].as_u64().unwrap();
    assert!(timed >= 1, "{profile}");
}
