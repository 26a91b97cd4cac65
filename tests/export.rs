//! `kf export` end to end (issue 51): a short gemm search at two sizes, 64³ and 256³ (`kf
//! search --size … --size …`: a folder of runs by size), exported into one Rust crate, which
//! is then built and tested with `cargo test --offline` in a temporary folder outside this repository, as a user would (the crate depends on no KernelFoundry crate, only on crates.io). Besides the crate's own test (every configuration against the reference), this test
//! adds one of its own to the crate: the dispatch picks each size's own configuration at the
//! tuned sizes, the nearer one at sizes between them, a valid one where the nearer one's
//! constraints fail, and every call's result matches a plain triple loop.
//!
//! The crate builds in `KF_EXPORT_TARGET_DIR` (default `target/kf-export-test` of this
//! workspace, kept between runs so that its dependencies are built once; not the workspace's
//! own target folder, which the running `cargo test` holds locked; the two tests' crates take
//! turns there, see [`GENERATED_CRATE`]). Uses the real `kf` binary
//! and the OpenCL runtime; skips with a message when the runtime is not installed, unless
//! `KF_REQUIRE_OPENCL=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use kernelfoundry::opencl::testing::backend_or_skip;

mod common;
use common::text;

/// `kf export --run RUNS FORMAT TO` (`--rust` or `--python` as `format`); fails the test unless
/// it succeeds.
fn export(runs: &Path, format: &str, to: &Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(["export", "--run"])
        .arg(runs)
        .arg(format)
        .arg(to)
        .output()
        .unwrap();
    assert!(o.status.success(), "kf export {format}: {}", text(&o));
}

/// [`test_generated_crate`], its output printed: it passes, and says each of `expected`
/// (test names and result lines). The output, for more checks.
fn generated_crate_passes(
    krate: &Path,
    envs: &[(&str, &std::ffi::OsStr)],
    expected: &[&str],
) -> String {
    let o = test_generated_crate(krate, envs);
    let out = text(&o);
    println!("{out}");
    assert!(
        o.status.success(),
        "cargo test of the generated crate: {out}"
    );
    for name in expected {
        assert!(out.contains(name), "missing `{name}`: {out}");
    }
    out
}

/// [`pytest_module`], its output printed: it passes with `passed` (`7 passed`) and skips
/// nothing.
fn module_passes(python: &Path, module: &Path, envs: &[(&str, &std::ffi::OsStr)], passed: &str) {
    let o = pytest_module(python, module, envs);
    let out = text(&o);
    println!("{out}");
    assert!(o.status.success(), "pytest of the Python module: {out}");
    assert!(out.contains(passed), "{out}");
    assert!(!out.contains("skipped"), "{out}");
}

/// pytest in the generated Python module `module`, on the OpenCL runtime the Rust backend
/// found (its loader variables, the first device), with `envs` set.
fn pytest_module(python: &Path, module: &Path, envs: &[(&str, &std::ffi::OsStr)]) -> Output {
    let backend = backend_or_skip().expect("the OpenCL runtime");
    Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .current_dir(module)
        .envs(backend.runtime().set_vars.iter().map(|(k, v)| (k, v)))
        .env("PYOPENCL_CTX", "0")
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

/// Serialises the generated crates' `cargo test`s: both tests' crates are named `kf-kernels`
/// and build in one target folder, where cargo names their test binaries alike (a path
/// package's hash is taken relative to its own workspace root), so one test's build would
/// overwrite the binaries the other is running.
static GENERATED_CRATE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `cargo test --offline -- --nocapture --test-threads 1` in the generated crate `krate`,
/// built in `KF_EXPORT_TARGET_DIR` (default `target/kf-export-test`), with `envs` set.
fn test_generated_crate(krate: &Path, envs: &[(&str, &std::ffi::OsStr)]) -> Output {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("KF_EXPORT_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target").join("kf-export-test"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let _serial = GENERATED_CRATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Command::new(cargo)
        .args([
            "test",
            "--offline",
            "--",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .current_dir(krate)
        .env("CARGO_TARGET_DIR", &target)
        .env("KF_REQUIRE_OPENCL", "1")
        .envs(envs.iter().copied())
        .output()
        .unwrap()
}

/// The generated crate lies outside this repository and depends only on crates.io crates (no
/// KernelFoundry crate, no path), so its `cargo test` is what a user gets.
fn assert_self_contained(krate: &Path) {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    assert!(!krate.starts_with(&workspace), "{}", krate.display());
    let cargo = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    let deps = cargo.split("[dependencies]").nth(1).unwrap_or_default();
    for line in deps
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let name = line.split('=').next().unwrap_or_default().trim();
        assert!(
            ["opencl3", "evalexpr", "libc", "serde", "serde_json", "half"].contains(&name)
                && !line.contains("path"),
            "{cargo}"
        );
    }
    assert!(!krate.join("Cargo.lock").exists());
}

/// One short `kf search` of the task `task` names (`--task NAME`, `--task-file PATH`) at both
/// of `sizes` into `out` (a folder of runs by size); fails the test unless it succeeds.
fn search_at(task: [&std::ffi::OsStr; 2], sizes: [&str; 2], out: &Path) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_kf"))
        .arg("search")
        .args(task)
        .args(["--size", sizes[0], "--size", sizes[1]])
        .args(["--evaluations", "4", "--no-progress", "--no-reference"])
        .args(["--final-rounds", "0", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "kf search {task:?}: {}", text(&o));
    o
}

/// One `kf search` at 64³ and 256³ into `out` (a folder of runs by size, `sizes.json`).
fn search_two_sizes(out: &Path) {
    let o = search_at(
        ["--task".as_ref(), "gemm".as_ref()],
        ["M=64,N=64,K=64", "M=256,N=256,K=256"],
        out,
    );
    let index = std::fs::read_to_string(out.join("sizes.json")).unwrap();
    for sizes in ["M=64,N=64,K=64", "M=256,N=256,K=256"] {
        assert!(index.contains(sizes), "{index}");
        assert!(
            out.join(sizes).join("best_kernel.toml").is_file(),
            "{}",
            text(&o)
        );
    }
}

/// The test this file adds to the generated crate.
const DISPATCH_TEST: &str = r#"//! Added by the workspace's tests/export.rs: the dispatch rule on real tuned configurations.

use kf_kernels::kf_runtime::distance;
use kf_kernels::*;

fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            0.5 + (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

fn reference(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f64;
            for p in 0..k {
                s += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
            }
            c[i * n + j] = s as f32;
        }
    }
    c
}

/// Calls `gemm` at (m, n, k), checks the result against the triple loop, returns the index.
fn call(device: &Device, (m, n, k): (i64, i64, i64)) -> usize {
    let (mu, nu, ku) = (m as usize, n as usize, k as usize);
    let a = data(mu * ku, 1);
    let b = data(ku * nu, 2);
    let mut c = vec![f32::NAN; mu * nu];
    let index = gemm(device, m, n, k, &a, &b, &mut c).expect("the dispatched call runs");
    let want = reference(mu, nu, ku, &a, &b);
    for (i, (g, w)) in c.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{} at {m}x{n}x{k}: element {i} is {g}, the reference {w}",
            GEMM_CONFIGURATIONS[index].name
        );
    }
    println!("{m}x{n}x{k}: {} (result matches the reference)", GEMM_CONFIGURATIONS[index].name);
    index
}

#[test]
fn the_dispatch_picks_own_nearer_and_valid_configurations() {
    let opened = Device::open().expect("the OpenCL device");
    let device = opened.facts();
    assert_eq!(GEMM_CONFIGURATIONS.len(), 2);
    let tuned = |i: usize| GEMM_CONFIGURATIONS[i].tuned_sizes[0].1;
    let small = (0..2).find(|&i| tuned(i) == 64).expect("a configuration tuned at 64");
    let large = (0..2).find(|&i| tuned(i) == 256).expect("a configuration tuned at 256");

    // Each tuned size gets its own configuration.
    assert_eq!(call(&opened, (64, 64, 64)), small);
    assert_eq!(call(&opened, (256, 256, 256)), large);

    // Every shape of multiples of 32 up to 320: the choice is the nearer valid configuration
    // (ties to the larger tuned size), or an error naming the rules when neither is valid.
    let mut between: Vec<((i64, i64, i64), usize)> = Vec::new();
    let mut fallback: Option<((i64, i64, i64), usize)> = None;
    // Every decision, for the Python export's test to make the same ones.
    let mut choices: Vec<String> = Vec::new();
    let steps: Vec<i64> = (1..=10).map(|i| i * 32).collect();
    for &m in &steps {
        for &n in &steps {
            for &k in &steps {
                let sizes = [("M", m), ("N", n), ("K", k)];
                let valid: Vec<bool> =
                    (0..2).map(|i| GEMM.check(i, device, &[m, n, k]).is_ok()).collect();
                let d: Vec<f64> =
                    (0..2).map(|i| distance(&sizes, GEMM_CONFIGURATIONS[i].tuned_sizes)).collect();
                let nearer = if (d[small] - d[large]).abs() < 1e-9 || d[large] < d[small] {
                    large
                } else {
                    small
                };
                let got = gemm_choice(device, m, n, k);
                choices.push(format!(
                    "{m} {n} {k} {}",
                    got.as_ref().map_or("none".to_owned(), |i| i.to_string())
                ));
                match (valid[small], valid[large]) {
                    (true, true) => {
                        assert_eq!(got.unwrap(), nearer, "at {m}x{n}x{k}");
                        let inside = [m, n, k].iter().all(|v| (64..=256).contains(v));
                        let tuned_shape = m == n && n == k && (m == 64 || m == 256);
                        let strict = (d[small] - d[large]).abs() > 1e-9;
                        if inside
                            && strict
                            && !tuned_shape
                            && !between.iter().any(|(_, i)| *i == nearer)
                        {
                            between.push(((m, n, k), nearer));
                        }
                    }
                    (false, false) => {
                        let e = got.unwrap_err().to_string();
                        assert!(e.contains("no exported configuration") && e.contains('%'), "{e}");
                    }
                    (vs, _) => {
                        let only = if vs { small } else { large };
                        assert_eq!(got.unwrap(), only, "at {m}x{n}x{k}");
                        if only != nearer && fallback.is_none() {
                            fallback = Some(((m, n, k), only));
                        }
                    }
                }
            }
        }
    }
    // Sizes between the tuned ones, strictly nearer one of them: the nearer configuration runs
    // and is correct (ties were checked above, without running).
    assert!(!between.is_empty(), "no shape between 64 and 256 where both configurations hold");
    for (shape, nearer) in &between {
        assert_eq!(call(&opened, *shape), *nearer);
    }
    // Where the nearer configuration's constraints fail, the valid one runs and is correct.
    let (shape, only) = fallback.expect(
        "no shape where the nearer configuration's constraints fail and the other's hold",
    );
    assert_eq!(call(&opened, shape), only);
    if let Some(path) = std::env::var_os("KF_EXPORT_FACTS") {
        let facts: Vec<String> = device.symbols.iter().map(|(k, v)| format!("{k} {v}")).collect();
        std::fs::write(path, facts.join("\n") + "\n").expect("the facts file");
    }
    if let Some(path) = std::env::var_os("KF_EXPORT_CHOICES") {
        std::fs::write(path, choices.join("\n") + "\n").expect("the choices file");
    }
}
"#;

/// The pytest test this file adds beside the generated Python module: the module makes the
/// same dispatch decision as the Rust crate on every shape the Rust test tried, and the calls
/// at the tuned sizes, between them and where only one configuration is valid match NumPy.
const PY_DISPATCH_TEST: &str = r#"# Added by the workspace's tests/export.rs.
import os

import numpy as np
import pytest

import kf_kernels as m

KERNELS = m.Kernels()


def decisions():
    with open(os.environ["KF_EXPORT_CHOICES"]) as f:
        for line in f:
            mm, nn, kk, got = line.split()
            yield (int(mm), int(nn), int(kk)), (None if got == "none" else int(got))


def call(shape):
    mm, nn, kk = shape
    rng = np.random.default_rng(mm * 1000003 + nn * 1009 + kk)
    a = rng.uniform(0.5, 1.5, (mm, kk)).astype(np.float32)
    b = rng.uniform(0.5, 1.5, (kk, nn)).astype(np.float32)
    c = m.gemm(mm, nn, kk, a, b, kernels=KERNELS).reshape(mm, nn)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_the_module_decides_as_the_rust_crate_does():
    seen = 0
    used = set()
    for shape, rust in decisions():
        if rust is None:
            with pytest.raises(m.NoConfiguration):
                m.gemm_choice(*shape, kernels=KERNELS)
        else:
            assert m.gemm_choice(*shape, kernels=KERNELS) == rust, shape
            used.add(rust)
        seen += 1
    assert seen == 1000
    assert used == {0, 1}


def test_the_device_facts_are_the_rust_backends():
    with open(os.environ["KF_EXPORT_FACTS"]) as f:
        rust = {name: int(value) for name, value in (line.split() for line in f if line.strip())}
    ours = m.device_facts(KERNELS.device)
    for name, value in rust.items():
        # Read from the host when each side opens the device; "cpu MHz" moves meanwhile.
        if name == "max_clock_mhz":
            continue
        assert ours.get(name) == value, (name, ours.get(name), value)


def test_calls_match_numpy_at_tuned_between_and_fallback_shapes():
    tuned = {c: m._GEMM.configurations[c].tuned_sizes["M"] for c in range(2)}
    shapes = [(64, 64, 64), (256, 256, 256)]
    for shape, rust in decisions():
        if rust is not None and shape not in shapes and len(shapes) < 8:
            shapes.append(shape)
    for shape in shapes:
        call(shape)
    assert m.gemm_choice(64, 64, 64, kernels=KERNELS) == [c for c, t in tuned.items() if t == 64][0]
"#;

/// A Python with pyopencl, pytest and NumPy: `KF_EXPORT_PYTHON`, else the project's venv.
fn python_with_pyopencl() -> Option<PathBuf> {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = std::env::var_os("KF_EXPORT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join(".runtime/venv/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import pyopencl, pytest, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(python)
    } else {
        kernelfoundry::core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::PyOpenCl,
            format!(
                "{} cannot import pyopencl, pytest and NumPy (scripts/setup.sh --pyopencl installs them)",
                python.display()
            ),
        );
        None
    }
}

#[test]
fn exported_gemm_runs_build_and_dispatch_by_size() {
    if backend_or_skip().is_none() {
        return;
    }
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    search_two_sizes(&runs);
    let searched = started.elapsed();

    let krate = tmp.path().join("kernels");
    export(&runs, "--rust", &krate);
    let lib = std::fs::read_to_string(krate.join("src/lib.rs")).unwrap();
    assert!(lib.contains(
        "pub fn gemm(device: &Device, m: i64, n: i64, k: i64, a: &[f32], b: &[f32], c: &mut [f32])"
    ));
    assert!(
        lib.contains("Which configuration serves which region"),
        "{lib}"
    );
    assert_self_contained(&krate);
    std::fs::write(krate.join("tests/dispatch.rs"), DISPATCH_TEST).unwrap();
    let choices = tmp.path().join("choices.txt");
    let facts = tmp.path().join("facts.txt");

    let built = Instant::now();
    let out = generated_crate_passes(
        &krate,
        &[
            ("KF_EXPORT_CHOICES", choices.as_os_str()),
            ("KF_EXPORT_FACTS", facts.as_os_str()),
        ],
        &[
            "gemm::every_configuration_matches_the_reference_at_a_small_size",
            "gemm::the_dispatched_call_matches_the_reference",
            "the_dispatch_picks_own_nearer_and_valid_configurations",
            "test result: ok. 2 passed",
            "test result: ok. 1 passed",
        ],
    );
    let crate_tested = built.elapsed();
    assert!(!out.contains("SKIPPED"), "{out}");
    println!(
        "searches {:.1} s, export + cargo test of the crate {:.1} s",
        searched.as_secs_f64(),
        crate_tested.as_secs_f64()
    );

    // The same runs as a Python module, tested with pytest against NumPy and against the
    // Rust crate's decisions.
    let Some(python) = python_with_pyopencl() else {
        return;
    };
    let module = tmp.path().join("py");
    export(&runs, "--python", &module);
    let source = std::fs::read_to_string(module.join("kf_kernels.py")).unwrap();
    assert!(
        source.contains("def gemm(m, n, k, a, b, *, kernels=None):"),
        "{source}"
    );
    assert!(source.contains("Which configuration serves which region"));
    std::fs::write(module.join("test_dispatch.py"), PY_DISPATCH_TEST).unwrap();
    let pytested = Instant::now();
    // Every configuration, the dispatched call and the wrong length, plus this file's three.
    module_passes(
        &python,
        &module,
        &[
            ("KF_EXPORT_CHOICES", choices.as_os_str()),
            ("KF_EXPORT_FACTS", facts.as_os_str()),
        ],
        "7 passed",
    );
    println!(
        "kf export --python + pytest {:.1} s",
        pytested.elapsed().as_secs_f64()
    );
}

/// The test this file adds to the crate exported from the scaled-swish runs: each tuned size
/// gets its own configuration, sizes between them the nearer one, and a call with a scalar
/// other than the task file's value computes the task's formula with it.
const SWISH_DISPATCH_TEST: &str = r#"//! Added by the workspace's tests/export.rs.

use kf_kernels::*;

#[test]
fn each_size_gets_its_own_configuration_and_the_scalar_is_passed() {
    let opened = Device::open().expect("the OpenCL device");
    let device = opened.facts();
    assert_eq!(SCALED_SWISH_CONFIGURATIONS.len(), 2);
    assert_eq!(SCALED_SWISH_ALPHA, 1.5);
    let tuned = |i: usize| SCALED_SWISH_CONFIGURATIONS[i].tuned_sizes[0];
    let small = (0..2).find(|&i| tuned(i) == ("ROWS", 64)).expect("a configuration tuned at 64");
    let large = (0..2).find(|&i| tuned(i) == ("ROWS", 256)).expect("a configuration tuned at 256");
    let mut choices = Vec::new();
    for ((rows, cols), want) in [((64, 64), small), ((256, 256), large), ((100, 90), small), ((200, 180), large)] {
        let got = scaled_swish_choice(device, rows, cols).expect("a configuration serves");
        assert_eq!(got, want, "at ROWS={rows},COLS={cols}");
        choices.push(format!("{rows} {cols} {got}"));
    }
    // alpha = 0.75, not the task's 1.5: the kernel must take it from the argument.
    let (rows, cols, alpha) = (200usize, 180usize, 0.75f32);
    let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919) % 2001) as f32 / 100.0 - 10.0).collect();
    let bias: Vec<f32> = (0..cols).map(|c| c as f32 / 90.0 - 1.0).collect();
    let mut y = vec![f32::NAN; rows * cols];
    let index = scaled_swish(&opened, rows as i64, cols as i64, alpha, &x, &bias, &mut y).expect("the call runs");
    assert_eq!(index, large);
    for (i, (got, v)) in y.iter().zip(&x).enumerate() {
        let v = f64::from(*v);
        let want = v / (1.0 + (-f64::from(alpha) * v).exp()) + f64::from(bias[i % cols]);
        assert!((f64::from(*got) - want).abs() <= 1e-4 + 1e-4 * want.abs(), "element {i}: {got}, want {want}");
    }
    std::fs::write(std::env::var_os("KF_EXPORT_CHOICES").expect("KF_EXPORT_CHOICES"), choices.join("\n") + "\n").expect("the choices file");
}
"#;

/// The pytest test this file adds beside the module exported from the scaled-swish runs: the
/// same decisions as the Rust crate, and the scalar passed through.
const SWISH_PY_TEST: &str = r#"# Added by the workspace's tests/export.rs.
import os

import numpy as np

import kf_kernels as m

KERNELS = m.Kernels()


def test_the_module_decides_as_the_rust_crate_and_passes_the_scalar():
    with open(os.environ["KF_EXPORT_CHOICES"]) as f:
        decisions = [tuple(int(v) for v in line.split()) for line in f if line.strip()]
    assert len(decisions) == 4
    for rows, cols, rust in decisions:
        assert m.scaled_swish_choice(rows, cols, kernels=KERNELS) == rust, (rows, cols)
    assert m.SCALED_SWISH_ALPHA == 1.5
    rows, cols, alpha = 200, 180, 0.75
    rng = np.random.default_rng(3)
    x = rng.uniform(-10, 10, (rows, cols)).astype(np.float32)
    bias = rng.uniform(-1, 1, cols).astype(np.float32)
    y = m.scaled_swish(rows, cols, alpha, x, bias, kernels=KERNELS).reshape(rows, cols)
    x64 = x.astype(np.float64)
    want = x64 / (1.0 + np.exp(-alpha * x64)) + bias.astype(np.float64)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
"#;

/// `kf search --task-file` on the scaled-swish example at two sizes, exported as a Rust crate
/// and as a Python module: the crate's generated test (every configuration and the dispatched
/// call against the reference outputs `kf export` stored, computed by the task's Python
/// reference on inputs from its `init` distributions), this file's dispatch test, and the
/// module's pytest run.
#[test]
fn exported_task_file_runs_build_check_the_stored_reference_and_dispatch_by_size() {
    if backend_or_skip().is_none() || !kernelfoundry::eval::task::file::python::numpy_or_skip() {
        return;
    }
    let started = Instant::now();
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let task = workspace.join("tasks/examples/scaled_swish/scaled_swish.toml");
    search_at(
        ["--task-file".as_ref(), task.as_os_str()],
        ["ROWS=64,COLS=64", "ROWS=256,COLS=256"],
        &runs,
    );
    for sizes in ["ROWS=64,COLS=64", "ROWS=256,COLS=256"] {
        // The run keeps a copy of its task file and the reference script it names.
        let copy = runs.join(sizes).join("task");
        assert!(copy.join("task.toml").is_file() && copy.join("scaled_swish_ref.py").is_file());
    }
    let searched = started.elapsed();

    let exported = Instant::now();
    let krate = tmp.path().join("kernels");
    export(&runs, "--rust", &krate);
    let lib = std::fs::read_to_string(krate.join("src/lib.rs")).unwrap();
    assert!(lib.contains("pub fn scaled_swish(device: &Device, rows: i64, cols: i64, alpha: f32, x: &[f32], bias: &[f32], y: &mut [f32])"), "{lib}");
    let index = std::fs::read_to_string(krate.join("reference/scaled_swish/index.json")).unwrap();
    assert!(index.contains("python scaled_swish_ref.py"), "{index}");
    assert_self_contained(&krate);
    std::fs::write(krate.join("tests/dispatch.rs"), SWISH_DISPATCH_TEST).unwrap();
    let export_s = exported.elapsed();

    let choices = tmp.path().join("choices.txt");
    let built = Instant::now();
    let out = generated_crate_passes(
        &krate,
        &[("KF_EXPORT_CHOICES", choices.as_os_str())],
        &[
            "scaled_swish::every_configuration_matches_the_reference_at_a_small_size ... ",
            "scaled_swish::the_dispatched_call_matches_the_reference ... ",
            "each_size_gets_its_own_configuration_and_the_scalar_is_passed",
            "case 0 (ROWS=32,COLS=17)",
            "matches the reference at case",
            "test result: ok. 2 passed",
            "test result: ok. 1 passed",
        ],
    );
    assert!(
        !out.contains("SKIPPED") && !out.contains("no stored case"),
        "{out}"
    );
    let crate_tested = built.elapsed();

    let Some(python) = python_with_pyopencl() else {
        return;
    };
    let pytested = Instant::now();
    let module = tmp.path().join("py");
    export(&runs, "--python", &module);
    let source = std::fs::read_to_string(module.join("kf_kernels.py")).unwrap();
    assert!(
        source.contains("def scaled_swish(rows, cols, alpha, x, bias, *, kernels=None):"),
        "{source}"
    );
    assert!(module.join("reference/scaled_swish/index.json").is_file());
    std::fs::write(module.join("test_dispatch.py"), SWISH_PY_TEST).unwrap();
    // Each configuration, the dispatched call, the wrong length, and this file's test.
    module_passes(
        &python,
        &module,
        &[("KF_EXPORT_CHOICES", choices.as_os_str())],
        "5 passed",
    );
    println!(
        "search {:.1} s, export {:.1} s, cargo test of the crate {:.1} s, Python export + pytest {:.1} s",
        searched.as_secs_f64(),
        export_s.as_secs_f64(),
        crate_tested.as_secs_f64(),
        pytested.elapsed().as_secs_f64()
    );
}
