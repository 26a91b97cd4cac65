//! Task files through the `kf` command line, as a user runs them: `kf task check`, `kf eval`,
//! `kf tune` and `kf search` on the shipped example (real OpenCL runtime, real Python with
//! NumPy), and every malformed task file of issue 13 failing with a clear error, a non-zero
//! exit code, no panic, and nothing written.
//!
//! Skips (printing `SKIPPED: …`) only when a runtime is missing and `KF_REQUIRE_OPENCL` /
//! `KF_REQUIRE_PYTHON` is not `1`.

use std::path::{Path, PathBuf};
use std::process::Output;

use kernelfoundry::core::Status;
use kernelfoundry::eval::task::file::python::numpy_or_skip;
use kernelfoundry::opencl::testing::backend_or_skip;

mod common;
use common::{judged_elites, kf, opencl_numpy_scratch, read_json, text};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/examples/scaled_swish")
}

fn json(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in:\n{text}"));
    serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("{e}:\n{text}"))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Fails the test, with what the command said, unless it succeeded.
#[track_caller]
fn assert_succeeded(out: &Output) {
    assert!(out.status.success(), "{}", text(out));
}

/// `kf eval --json` of `kernel` on the task file `task` at `sizes`, with `extra` arguments.
fn eval(task: &Path, kernel: &Path, sizes: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "eval",
        "--task-file",
        path(task),
        "--kernel",
        path(kernel),
        "--size",
        sizes,
    ];
    args.extend_from_slice(extra);
    args.push("--json");
    kf(&args)
}

#[test]
fn check_and_eval_accept_the_honest_kernel_and_reject_half_the_work() {
    if !(backend_or_skip().is_some() && numpy_or_skip()) {
        return;
    }
    let dir = example();
    let task = dir.join("scaled_swish.toml");
    let out = kf(&["task", "check", path(&task), "--size", "ROWS=64,COLS=48"]);
    assert_succeeded(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("valid") && text.contains("[64, 48]"),
        "{text}"
    );
    assert!(
        text.contains("reference scaled_swish_ref.py: ran in"),
        "{text}"
    );

    let sizes = "ROWS=256,COLS=128";
    let fast = dir.join("scaled_swish_fast.toml");
    let out = eval(&task, &fast, sizes, &["--param", "TILE=2"]);
    assert_succeeded(&out);
    let v = json(&out);
    assert_eq!(v["status"], "correct", "{v}");
    assert_eq!(v["task"], "scaled_swish");
    assert!(v["speedup"].as_f64().is_some(), "{v}");

    let cheat = dir.join("scaled_swish_halfwork.toml");
    let out = eval(&task, &cheat, sizes, &[]);
    let v = json(&out);
    assert_eq!(v["status"], "wrong_shape", "{v}");
    assert!(
        v["diagnostics"].as_str().unwrap().contains("unwritten"),
        "{v}"
    );
}

#[test]
fn tune_finds_a_correct_configuration_and_a_short_search_tunes_the_seeded_kernel() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let dir = example();
    let task = dir.join("scaled_swish.toml");
    let fast = dir.join("scaled_swish_fast.toml");
    let cache = tmp.path().join("tune.json");
    let out = kf(&[
        "tune",
        "--task-file",
        path(&task),
        "--kernel",
        path(&fast),
        "--budget",
        "4",
        "--size",
        "ROWS=256,COLS=256",
        "--cache",
        path(&cache),
        "--json",
    ]);
    assert_succeeded(&out);
    let v = json(&out);
    assert_eq!(v["confirmed_status"], "correct", "{v}");
    assert_eq!(v["evaluations"], 4, "{v}");
    assert!(cache.is_file());
    // The manifest's defaults (each parameter's first value) went first, and the summary
    // compares the best with them.
    assert_eq!(v["start"], "defaults", "{v}");
    let defaults = &v["defaults"];
    assert_eq!(
        defaults["config"],
        serde_json::json!({"TILE": 1, "WG": 16}),
        "{v}"
    );
    assert!(defaults["time_ms"].as_f64().unwrap() > 0.0, "{v}");
    assert!(defaults["best_speedup"].as_f64().unwrap() >= 1.0, "{v}");
    // Where the time went: every evaluated configuration was compiled and timed.
    let profile = &v["profile"];
    assert_eq!(profile["configurations"], 4, "{profile}");
    let phases = &profile["evaluations"];
    assert!(phases["compile_s"].as_f64().unwrap() > 0.0, "{profile}");
    assert!(phases["trials"].as_u64().unwrap() >= 4, "{profile}");
    assert!(
        profile["tuning_s"].as_f64().unwrap() >= phases["total_s"].as_f64().unwrap(),
        "{profile}"
    );
    // Compile-ahead (default width 2): configurations were compiled in pairs before timing,
    // and their evaluations were still judged correct from the cached binaries.
    let ahead = &profile["compile_ahead"];
    assert_eq!(ahead["width"], 2, "{profile}");
    assert!(ahead["batches"].as_u64().unwrap() >= 1, "{profile}");
    assert!(ahead["configurations"].as_u64().unwrap() >= 2, "{profile}");

    let run = tmp.path().join("search");
    let out = kf(&[
        "search",
        "--task-file",
        path(&task),
        "--kernel",
        path(&fast),
        "--evaluations",
        "4",
        // The seeded kernel's first parameter values (TILE=1, WG=16) run at about a quarter
        // of the baseline on the CPU runtime; its good configurations (TILE=4, WG=64: 1.7x)
        // are a quarter of its space. Tuning 8 of its 16 configurations finds one of them
        // whatever the sampling order; 2 did not always (a CI run ended at the baseline).
        "--tune-budget",
        "8",
        "--size",
        "ROWS=512,COLS=256",
        "--out",
        path(&run),
        "--no-progress",
    ]);
    assert_succeeded(&out);
    let report = read_json(&run.join("report.json"));
    let (best, base) = (
        report["best_gflops"].as_f64().unwrap(),
        report["baseline_gflops"].as_f64().unwrap(),
    );
    assert!(
        best >= base,
        "best {best} GFLOP/s vs baseline {base} GFLOP/s"
    );
    assert!(run.join("best_kernel.cl").is_file());
    // The seeded kernel was verified correct and tuned (more than one configuration compiled
    // and timed). Whether it is also faster than the baseline is a timing on a shared machine
    // (about 1.7x on an idle one, but 0.5–2.4x with two other builds running): that belongs to
    // a benchmark, not to this test.
    let recorded = kernelfoundry::archive::read_run(run.join("run")).unwrap();
    let seeded: Vec<_> = judged_elites(&recorded)
        .filter(|e| e.candidate.source.text.contains("TILE"))
        .collect();
    assert!(!seeded.is_empty(), "the seeded kernel was not evaluated");
    for e in &seeded {
        assert_eq!(
            e.evaluation.status,
            Status::Correct,
            "{}",
            e.evaluation.diagnostics
        );
        assert!(
            e.evaluation.device_evaluations() > 1,
            "the seeded kernel was not tuned: {:?}",
            e.evaluation
        );
    }
}

/// Copies the example into a fresh folder, replaces the first occurrence of `edit`'s first text
/// in the task file by its second, writes `reference` as the reference script (where given),
/// and returns the folder with the task path.
fn broken(edit: Option<(&str, &str)>, reference: Option<&str>) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(example()).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, tmp.path().join(f.file_name().unwrap())).unwrap();
    }
    let task = tmp.path().join("scaled_swish.toml");
    if let Some((from, to)) = edit {
        let text = std::fs::read_to_string(&task).unwrap();
        std::fs::write(&task, text.replacen(from, to, 1)).unwrap();
    }
    if let Some(r) = reference {
        std::fs::write(tmp.path().join("scaled_swish_ref.py"), r).unwrap();
    }
    (tmp, task)
}

/// A malformed case: what is broken, the edit of the task file (the text replaced, its
/// replacement), the reference script that replaces the example's, and what the error must say.
type BrokenCase = (
    &'static str,
    Option<(&'static str, &'static str)>,
    Option<&'static str>,
    &'static str,
);

/// Task files broken in one field: what is broken, the text of the example's task file replaced
/// and what replaces it, and what the error must say.
const BROKEN_FIELDS: &[(&str, &str, &str, &str)] = &[
    ("unknown dtype", "dtype = \"f32\"", "dtype = \"f64\"", "f64"),
    (
        "shape over an unknown size",
        "shape = [\"COLS\"]",
        "shape = [\"WIDTH\"]",
        "buffer[1].shape[0]",
    ),
    (
        "args naming a missing buffer",
        "\"bias\", \"y\"]",
        "\"bias\", \"out\"]",
        "args[5]",
    ),
    (
        "zero-size buffer",
        "shape = [\"COLS\"]",
        "shape = [\"COLS - COLS\"]",
        "buffer[1].shape[0]",
    ),
    ("negative size", "ROWS = 1024", "ROWS = -2", "sizes.ROWS"),
    (
        "missing reference file",
        "scaled_swish_ref.py",
        "nowhere.py",
        "reference.python",
    ),
];

/// Broken reference scripts (run only with Python): what is broken, the script that replaces
/// the example's, and what the error must say.
const BROKEN_REFERENCES: &[(&str, &str, &str)] = &[
    (
        "reference with a syntax error",
        "def reference(inputs, sizes, scalars)\n    return {}\n",
        "SyntaxError",
    ),
    (
        "reference returning the wrong shape",
        "def reference(inputs, sizes, scalars):\n    return {'y': inputs['x'][:2]}\n",
        "has shape [2, 512]",
    ),
];

#[test]
fn malformed_task_files_fail_with_the_file_and_field_and_write_nothing() {
    let needs_python = numpy_or_skip();
    let mut cases: Vec<BrokenCase> = BROKEN_FIELDS
        .iter()
        .map(|&(what, from, to, expect)| (what, Some((from, to)), None, expect))
        .collect();
    if needs_python {
        cases.extend(
            BROKEN_REFERENCES
                .iter()
                .map(|&(what, script, expect)| (what, None, Some(script), expect)),
        );
    }
    for (what, edit, reference, expect) in cases {
        let (tmp, task) = broken(edit, reference);
        let run = tmp.path().join("run");
        let kernel = tmp.path().join("scaled_swish_fast.toml");
        for args in [
            vec!["task", "check", path(&task)],
            vec![
                "eval",
                "--task-file",
                path(&task),
                "--kernel",
                path(&kernel),
                "--json",
            ],
            vec![
                "search",
                "--task-file",
                path(&task),
                "--out",
                path(&run),
                "--evaluations",
                "2",
            ],
        ] {
            let out = kf(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{what}: kf {args:?} succeeded");
            assert!(
                stderr.contains("scaled_swish") && stderr.contains(expect),
                "{what}: kf {args:?}:\n{stderr}"
            );
            assert!(!run.exists(), "{what}: kf {args:?} wrote {}", run.display());
        }
    }
}

/// `--time` bounds the whole search, the evaluation in flight included: a correct kernel whose
/// every launch spins for seconds is seeded after the naive baseline, and its evaluation (far
/// longer than the run's time, shorter than its own limit of 15 s and more) is stopped by the
/// run's deadline, saying so; the process ends soon after the limit.
#[test]
fn time_bounds_the_search_and_the_evaluation_in_flight() {
    let Some(tmp) = opencl_numpy_scratch() else {
        return;
    };
    let task = example().join("scaled_swish.toml");
    let naive = std::fs::read_to_string(example().join("scaled_swish_naive.cl")).unwrap();
    // Work-item 0 spins about 4e9 dependent steps per launch (seconds on any CPU) before the
    // naive loop; `spin` stays below 3, so the output is the naive kernel's, and no compiler
    // can drop a loop whose value the output depends on.
    let slow = naive.replacen(
        "    for (int c = 0; c < COLS; ++c) {",
        "    float spin = 0.0f;\n    \
         if (r == 0) for (int j = 0; j < 8; ++j) for (int i = 0; i < 500000000; ++i)\n        \
         spin = spin * 0.5f + 1.0f;\n    \
         for (int c = 0; c < COLS; ++c) {",
        1,
    );
    let slow = slow.replacen("+ bias[c];", "+ bias[c] + (spin > 3.0f ? 1.0f : 0.0f);", 1);
    assert!(slow.contains("spin > 3.0f"), "{slow}");
    std::fs::write(tmp.path().join("slow.cl"), slow).unwrap();
    std::fs::write(
        tmp.path().join("slow.toml"),
        "source = \"slow.cl\"\nentry = \"scaled_swish\"\nlanguage = \"opencl\"\n\n\
         [launch]\nglobal = [\"ROWS\"]\n",
    )
    .unwrap();
    let run = tmp.path().join("search");
    let limit_s = 15.0;
    let started = std::time::Instant::now();
    let out = kf(&[
        "search",
        "--task-file",
        path(&task),
        "--kernel",
        path(&tmp.path().join("slow.toml")),
        "--evaluations",
        "20",
        "--time",
        "15",
        // A roofline measured on a machine without a cached one takes seconds of the run's
        // time; the seeded kernel must be reached within it.
        "--no-characterise",
        "--out",
        path(&run),
        "--no-progress",
    ]);
    let took = started.elapsed().as_secs_f64();
    assert_succeeded(&out);
    let recorded = kernelfoundry::archive::read_run(run.join("run")).unwrap();
    let cut: Vec<_> = judged_elites(&recorded)
        .filter(|e| e.candidate.source.text.contains("spin"))
        .collect();
    assert!(!cut.is_empty(), "the slow kernel was not evaluated");
    for e in &cut {
        assert_eq!(e.evaluation.status, Status::Timeout, "{:?}", e.evaluation);
        assert!(
            e.evaluation
                .diagnostics
                .contains(kernelfoundry::eval::DEADLINE_CUT),
            "{}",
            e.evaluation.diagnostics
        );
    }
    // Loose: the process also starts the Python reference and the OpenCL runtime before the
    // run's clock starts and writes its report after it, on a machine that may be loaded.
    // Without the deadline the slow evaluation alone ran to its own limit (15 s or more).
    assert!(took < limit_s + 12.0, "the search took {took:.1} s");
}
