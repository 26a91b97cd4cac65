//! `kf verify` on a run written by `kf search` (real OpenCL runtime): the best kernel and every
//! elite are re-checked on fresh inputs and re-timed next to their recorded times; a damaged
//! run (an elite whose kernel no longer computes the task) exits non-zero. Skips (printing
//! `SKIPPED: …`) when no OpenCL runtime is present and `KF_REQUIRE_OPENCL` is not `1`.

use std::path::Path;

use kernelfoundry::archive::{read_run, RunDir};
use kernelfoundry::core::{Checkpoint, ChildRecord};

mod common;
use common::{gemm_search, kf, opencl_scratch, text};

/// The run `kf verify` checks: a short gemm search into `out`.
fn search(out: &Path) {
    gemm_search(out, "5", &[], &[]);
}

/// A scratch folder holding a finished search in `<scratch>/gemm` (its path); `None` after the
/// skip message without the OpenCL runtime.
fn searched() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
    let tmp = opencl_scratch()?;
    let out = tmp.path().join("gemm");
    search(&out);
    Some((tmp, out))
}

/// `code` with `return;` as the first statement of every `__kernel` function.
fn return_at_entry(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + 64);
    let mut rest = code;
    while let Some(at) = rest.find("__kernel") {
        let brace = at + rest[at..].find('{').expect("a kernel has a body");
        out.push_str(&rest[..=brace]);
        out.push_str(" return;");
        rest = &rest[brace + 1..];
    }
    out.push_str(rest);
    assert!(out.contains("return;"), "no __kernel in {code}");
    out
}

#[test]
fn verify_rechecks_the_best_kernel_and_every_elite() {
    let Some((_tmp, out)) = searched() else {
        return;
    };
    // The evaluator kept the timing samples: the report gives each elite's interval.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let interval = &report["best_kernel"]["median_ms_interval"];
    let median = report["best_kernel"]["median_ms"].as_f64().unwrap();
    let (lo, hi) = (interval[0].as_f64().unwrap(), interval[1].as_f64().unwrap());
    assert!(lo <= median && median <= hi, "{report}");
    assert!(
        report["cells"][0]["median_ms_interval"].is_array(),
        "{report}"
    );

    let best = kf(&["verify", out.to_str().unwrap()]);
    let t = text(&best);
    assert!(best.status.success(), "{t}");
    assert!(t.contains("fresh inputs from data seed"), "{t}");
    let rows: Vec<&str> = t.lines().filter(|l| l.contains(" correct ")).collect();
    assert_eq!(rows.len(), 1, "{t}");
    assert!(
        rows[0].starts_with("best") && rows[0].trim_end().ends_with('x'),
        "{t}"
    );

    // The best kernel is the one report.json names (after a final selection it need not be
    // the fittest by its search measurement): name another correct elite there.
    let other = report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["status"] == "correct" && c["candidate"] != report["best_kernel"]["candidate"])
        .map(|c| c["candidate"].as_u64().unwrap())
        .expect("a second correct elite");
    {
        let mut named = report.clone();
        named["best_kernel"]["candidate"] = other.into();
        std::fs::write(out.join("report.json"), named.to_string()).unwrap();
        let v = kf(&["verify", out.to_str().unwrap()]);
        let t = text(&v);
        assert!(v.status.success(), "{t}");
        let best_row = t.lines().find(|l| l.starts_with("best")).unwrap();
        assert!(best_row.contains(&format!(" #{other} ")), "{t}");
        std::fs::write(out.join("report.json"), report.to_string()).unwrap();
    }

    // The run directory itself works too, with --all and a chosen data seed.
    let run_dir = out.join("run");
    let all = kf(&[
        "verify",
        run_dir.to_str().unwrap(),
        "--all",
        "--data-seed",
        "12345",
    ]);
    let t = text(&all);
    assert!(all.status.success(), "{t}");
    assert!(t.contains("data seed 12345"), "{t}");
    assert!(
        t.lines().filter(|l| l.contains(" correct ")).count() >= 2,
        "{t}"
    );
}

#[test]
fn verify_fails_when_a_recorded_kernel_is_no_longer_correct() {
    let Some((tmp, out)) = searched() else {
        return;
    };
    // Rewrite the run as if its kernels had been damaged after the search: every kernel
    // returns before doing anything, so the recorded elites no longer compute the product
    // (whatever way they store C: indexing, vstoreN, a pointer).
    let log = read_run(out.join("run")).unwrap();
    let damaged = tmp.path().join("damaged");
    let mut meta = log.meta.clone();
    meta.run_id = String::new();
    let mut dir = RunDir::open(damaged.join("run"), meta).unwrap();
    for mut record in log.records {
        for child in &mut record.children {
            if let ChildRecord::Judged { elite, .. } = child {
                let code = &mut elite.candidate.source.text;
                *code = return_at_entry(code).into();
            }
        }
        Checkpoint::<serde_json::Value>::record(&mut dir, &record, &serde_json::Value::Null)
            .unwrap();
    }
    drop(dir);
    let out = damaged;
    let v = kf(&["verify", out.to_str().unwrap()]);
    let t = text(&v);
    assert_eq!(v.status.code(), Some(1), "{t}");
    assert!(t.contains("no longer correct"), "{t}");
}

#[test]
fn verify_explains_what_is_not_a_run() {
    let tmp = tempfile::tempdir().unwrap();
    let v = kf(&["verify", tmp.path().to_str().unwrap()]);
    assert!(!v.status.success());
    assert!(text(&v).contains("is not a run directory"), "{}", text(&v));
}
