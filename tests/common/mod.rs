//! Helpers shared by the integration tests that drive the real `kf` binary.

// Each test binary that includes this module uses some of its helpers, not all.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use kernelfoundry::archive::RunLog;
use kernelfoundry::core::{ChildRecord, Elite};

pub(crate) mod kernelbench;

/// Runs the `kf` binary built for these tests with `args` and returns what it did; fails the
/// test if it panicked, whatever its exit code (a panic is never a clear error).
pub(crate) fn kf(args: &[&str]) -> Output {
    kf_with_env(args, &[])
}

/// [`kf`] with extra environment variables.
pub(crate) fn kf_with_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("running kf");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("panicked"),
        "kf {args:?} panicked:\n{stderr}"
    );
    out
}

/// A finished command's standard output and error, for assertion messages.
pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A fresh scratch folder for a test that runs kernels on the OpenCL runtime; `None` after the
/// skip message when the runtime is missing (a failure under `KF_REQUIRE_OPENCL=1`).
#[track_caller]
pub(crate) fn opencl_scratch() -> Option<tempfile::TempDir> {
    kernelfoundry::opencl::testing::backend_or_skip()?;
    Some(tempfile::tempdir().unwrap())
}

/// [`opencl_scratch`] for a test that also runs a task's NumPy reference: `None` after the
/// skip message when either runtime is missing.
#[track_caller]
pub(crate) fn opencl_numpy_scratch() -> Option<tempfile::TempDir> {
    kernelfoundry::opencl::testing::backend_or_skip()?;
    if !kernelfoundry::eval::task::file::python::numpy_or_skip() {
        return None;
    }
    Some(tempfile::tempdir().unwrap())
}

/// The shipped tiled GEMM kernel (`kf-eval/kernels/gemm_tiled`) written into `dir` with the
/// further tunable `param` (a manifest line such as `PAD = [0, 1]`) and `prelude` before its
/// code: the manifest's path.
pub(crate) fn tiled_gemm_with(dir: &Path, param: &str, prelude: &str) -> std::path::PathBuf {
    let shipped = root().join("kf-eval/kernels");
    let code = std::fs::read_to_string(shipped.join("gemm_tiled.cl")).unwrap();
    std::fs::write(dir.join("gemm_tiled.cl"), format!("{prelude}{code}")).unwrap();
    let wpt = "WPT = [1, 2, 4, 8]\n";
    let manifest = std::fs::read_to_string(shipped.join("gemm_tiled.toml")).unwrap();
    assert!(manifest.contains(wpt), "{manifest}");
    let path = dir.join("gemm_tiled.toml");
    std::fs::write(&path, manifest.replace(wpt, &format!("{wpt}{param}\n"))).unwrap();
    path
}

/// The checkout's root, where the shipped tasks and the tests' data lie.
pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Writes each `(name, text)` of `files` into `dir`: a task file with its reference script and
/// kernels, laid out as a user writes them.
pub(crate) fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("writing {name}: {e}"));
    }
}

/// The JSON document at `path` (a run's `report.json`, `run.json`, a cache file).
pub(crate) fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Copies the KernelBench problem `folder/stem.py` (relative to the checkout) into `dir`, as a
/// user has it, and imports it with `kf task import-kernelbench … --numpy` into `out`, with the
/// further `args` (its sizes, tolerances); fails the test unless the import succeeds.
pub(crate) fn import_kernelbench(folder: &str, stem: &str, dir: &Path, out: &Path, args: &[&str]) {
    let problem = dir.join(format!("{stem}.py"));
    std::fs::copy(root().join(folder).join(format!("{stem}.py")), &problem).unwrap();
    let (problem, out) = (problem.to_str().unwrap(), out.to_str().unwrap());
    let mut all = vec![
        "task",
        "import-kernelbench",
        problem,
        "--out",
        out,
        "--numpy",
    ];
    all.extend_from_slice(args);
    let run = kf(&all);
    assert!(run.status.success(), "{stem}: {}", text(&run));
}

/// `kf eval --json` of `kernel` on the task `task` names (`["--task-file", PATH]` or
/// `["--task", NAME]`), with `extra` arguments (sizes, parameters): the verdict's status and
/// diagnostics.
pub(crate) fn eval_verdict(task: [&str; 2], kernel: &Path, extra: &[&str]) -> (String, String) {
    let kernel = kernel.to_str().unwrap();
    let mut args = vec!["eval", task[0], task[1], "--kernel", kernel];
    args.extend_from_slice(extra);
    args.push("--json");
    let run = kf(&args);
    let json: serde_json::Value =
        serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&run)));
    (
        json["status"].as_str().unwrap_or_default().to_owned(),
        json["diagnostics"].as_str().unwrap_or_default().to_owned(),
    )
}

/// Every child a run's step log records as judged (the ones that failed to be judged left
/// out), in step order.
pub(crate) fn judged_elites(run: &RunLog) -> impl Iterator<Item = &Elite> {
    run.records
        .iter()
        .flat_map(|r| r.children.iter())
        .filter_map(|c| match c {
            ChildRecord::Judged { elite, .. } => Some(&**elite),
            ChildRecord::Failed { .. } => None,
        })
}

/// The arguments of a short `kf search` into `out` (4 evaluations, one tuning configuration
/// each) whose steps are LLM steps on the model server `server`: `task` names the task, its
/// sizes and any further options; `max_tokens` bounds each reply.
pub(crate) fn llm_search_args(
    task: &[&str],
    out: &Path,
    server: &kernelfoundry::prompt::testing::TestServer,
    max_tokens: &str,
) -> Vec<String> {
    let mut args = vec!["search"];
    args.extend_from_slice(task);
    args.extend([
        "--evaluations",
        "4",
        "--tune-budget",
        "1",
        "--no-progress",
        "--out",
        out.to_str().unwrap(),
        "--llm",
        "--llm-base-url",
        &server.base_url,
        "--llm-max-tokens",
        max_tokens,
        "--llm-compact",
        // The parameter moves stay in the mix; this weight makes the steps LLM steps.
        "--llm-weight",
        "1000",
    ]);
    let mut args: Vec<String> = args.into_iter().map(str::to_owned).collect();
    if let Some(m) = &server.model {
        args.extend(["--llm-model".to_owned(), m.clone()]);
    }
    args
}

/// A short `kf search` of the 64³ gemm into `out`: `evaluations` evaluations, one tuning
/// configuration each, with `extra` arguments and `env` set. Fails the test unless it succeeds.
pub(crate) fn gemm_search(
    out: &Path,
    evaluations: &str,
    extra: &[&str],
    env: &[(&str, &Path)],
) -> Output {
    let out = out.to_str().unwrap();
    let mut args = vec![
        "search",
        "--task",
        "gemm",
        "--size",
        "M=64,N=64,K=64",
        "--evaluations",
        evaluations,
        "--tune-budget",
        "1",
        "--no-progress",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    let run = kf_with_env(&args, env);
    assert!(run.status.success(), "{}", text(&run));
    run
}
