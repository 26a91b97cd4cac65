//! KernelBench's verdict on honest float scans (issue 49): the reverse and exclusive
//! cumulative sums of KernelBench level 1 (`../shared/kernelbench/level1/91_…`, `92_…`, here
//! vendored unchanged under `tests/data/kernelbench_unseen/vendor/`) imported by the documented command with a
//! NumPy reference, at 16,384 elements per row. The obvious kernel (one work-item per row, a
//! sequential f32 sum) is `correct` on every input set (uniform(0, 1), normal, uniform(-3, 3):
//! the last two cross zero, where an f32 prefix's error exceeds the old 1e-4 tolerance), and a
//! kernel that computes the exclusive scan where the inclusive one is asked (and the other way
//! round) is `wrong_values`.
//!
//! The evaluator's accumulation rule (`kf_eval::verify::accumulation_allowance`): the importer
//! declares the scanned length (`accumulates = "input_shape_0"`), so even under a strict
//! `--atol 1e-6 --rtol 1e-6` the honest scan is `correct` (its rounding is within
//! `γ_n · Σ|x_i|`) and the wrong scan is not; the control removes the declaration and sees the
//! honest scan rejected, so the test is about the rule. The strict tolerance is far below an
//! f32 prefix's rounding (about 1e-4 after thousands of terms of magnitude 1), so the control's
//! verdict does not depend on the draw: at the old strict 1e-4 / 1e-3 only the few elements of
//! a row that cross zero exceeded it, and an unlucky draw let the honest scan pass.
//!
//! Skips (printing `SKIPPED: …`) without OpenCL or NumPy unless `KF_REQUIRE_OPENCL=1` /
//! `KF_REQUIRE_PYTHON=1`.

use std::path::{Path, PathBuf};

mod common;
use common::{eval_verdict, import_kernelbench, opencl_numpy_scratch};

/// The NumPy references a user writes beside the problem, by problem.
fn numpy_reference(stem: &str) -> &'static str {
    match stem {
        "91_cumsum_reverse" => {
            "import numpy as np\n\n\ndef reference(inputs, sizes, scalars):\n    \
             x = inputs['x'].astype(np.float64)\n    \
             return {'output': np.flip(np.cumsum(np.flip(x, 1), 1), 1).astype(np.float32)}\n"
        }
        _ => {
            "import numpy as np\n\n\ndef reference(inputs, sizes, scalars):\n    \
             x = inputs['x'].astype(np.float64)\n    out = np.zeros_like(x)\n    \
             out[:, 1:] = np.cumsum(x[:, :-1], axis=1)\n    \
             return {'output': out.astype(np.float32)}\n"
        }
    }
}

/// One work-item per row, a sequential f32 scan: `reverse` runs from the row's end,
/// `exclusive` writes the sum before adding the element.
fn scan_kernel(reverse: bool, exclusive: bool) -> String {
    let (start, cond, step) = if reverse {
        ("n - 1", "i >= 0", "--i")
    } else {
        ("0", "i < n", "++i")
    };
    let body = if exclusive {
        "out[i] = acc;\n        acc += in[i];"
    } else {
        "acc += in[i];\n        out[i] = acc;"
    };
    format!(
        "__kernel void scan(__global const float* x, __global float* output, const int \
         batch_size, const int input_shape_0, const int dim) {{
    const int row = get_global_id(0);
    if (row >= batch_size) {{
        return;
    }}
    const int n = input_shape_0;
    __global const float* in = x + (long)row * n;
    __global float* out = output + (long)row * n;
    float acc = 0.0f;
    for (int i = {start}; {cond}; {step}) {{
        {body}
    }}
}}
"
    )
}

fn write_kernel(dir: &Path, name: &str, source: &str) -> PathBuf {
    std::fs::write(dir.join(format!("{name}.cl")), source).unwrap();
    let manifest = format!(
        "source = \"{name}.cl\"\nentry = \"scan\"\nlanguage = \"opencl\"\n\n[launch]\n\
         global = [\"batch_size\"]\nlocal = [\"1\"]\n"
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, manifest).unwrap();
    path
}

/// Imports `stem` as a user would, into `dir/<folder>`, with `extra` arguments.
fn import(dir: &Path, stem: &str, folder: &str, extra: &[&str]) -> PathBuf {
    std::fs::write(dir.join(format!("{stem}_ref.py")), numpy_reference(stem)).unwrap();
    let out = dir.join(folder);
    let sizes = ["--size", "batch_size=32,input_shape_0=16384"];
    import_kernelbench(
        "tests/data/kernelbench_unseen/vendor",
        stem,
        dir,
        &out,
        &[&sizes[..], extra].concat(),
    );
    out.join("task.toml")
}

/// `kf eval` of `kernel` on the task: its status and diagnostics.
fn eval(task: &Path, kernel: &Path) -> (String, String) {
    eval_verdict(["--task-file", task.to_str().unwrap()], kernel, &[])
}

#[test]
fn honest_scans_are_correct_and_the_wrong_scan_is_not() {
    let Some(scratch) = opencl_numpy_scratch() else {
        return;
    };
    for (stem, reverse, exclusive) in [
        ("91_cumsum_reverse", true, false),
        ("92_cumsum_exclusive", false, true),
    ] {
        let dir = scratch.path().join(stem);
        std::fs::create_dir(&dir).unwrap();
        let task = import(&dir, stem, "task", &[]);
        let written = std::fs::read_to_string(&task).unwrap();
        assert!(
            written.contains("atol = 0.01") && written.contains("rtol = 0.01"),
            "KernelBench's tolerance by default: {written}"
        );
        assert!(
            written.contains("accumulates = \"input_shape_0\""),
            "the scanned length is declared: {written}"
        );
        let honest = write_kernel(&dir, "honest", &scan_kernel(reverse, exclusive));
        // Several evaluations: each draws fresh input sets of all three distributions.
        for _ in 0..2 {
            let (status, said) = eval(&task, &honest);
            assert_eq!(status, "correct", "{stem}, the honest scan: {said}");
        }
        let wrong = write_kernel(&dir, "wrong", &scan_kernel(reverse, !exclusive));
        let (status, said) = eval(&task, &wrong);
        assert_eq!(status, "wrong_values", "{stem}, the other scan: {said}");
        // Under a tolerance far below f32 rounding the accumulation rule alone accepts the
        // honest scan and still rejects the wrong one.
        let strict = import(&dir, stem, "strict", &["--atol", "1e-6", "--rtol", "1e-6"]);
        let (status, said) = eval(&strict, &honest);
        assert_eq!(status, "correct", "{stem} under 1e-6 with the rule: {said}");
        let (status, said) = eval(&strict, &wrong);
        assert_eq!(
            status, "wrong_values",
            "{stem}, the other scan, strict: {said}"
        );
        // The control: without the declaration, the same honest scan is rejected.
        let text = std::fs::read_to_string(&strict).unwrap();
        let undeclared: String = text
            .lines()
            .filter(|l| !l.starts_with("accumulates"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_ne!(undeclared, text);
        std::fs::write(&strict, undeclared).unwrap();
        let (status, said) = eval(&strict, &honest);
        assert_eq!(
            status, "wrong_values",
            "{stem} under 1e-6 without the rule: {said}"
        );
    }
}
