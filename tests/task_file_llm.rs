//! `kf search --task-file … --llm` against the real LLM server (`scripts/llm-server.sh start`:
//! SmolLM2-135M on llama.cpp, 127.0.0.1) with the real OpenCL runtime and Python references:
//! the LLM mutator's children are evaluated and recorded in the run directory with a typed
//! status. A 135M model mostly writes kernels that do not compile or extract; the point is the
//! path, end to end, not their quality. A request budget keeps the run short: such a model's
//! children mostly repeat their parent, so without one the search asks until it stalls (about
//! 40 requests and three minutes on a 2-core machine); the budget's refusals are part of the
//! path checked.
//!
//! The server is found through `KF_LLM_TEST_BASE_URL` or `.runtime/llm-server.json`. Skips
//! (printing `SKIPPED: …`) when no server answers unless `KF_REQUIRE_LLM=1`, and when OpenCL or
//! Python with NumPy is missing unless `KF_REQUIRE_OPENCL=1` / `KF_REQUIRE_PYTHON=1`.

use std::path::Path;
use std::process::Command;

use kernelfoundry::archive::{RunDir, RunMeta};
use kernelfoundry::core::{ChildRecord, StepRecord};
use kernelfoundry::eval::task::file::python::numpy_or_skip;
use kernelfoundry::opencl::testing::backend_or_skip;
use kernelfoundry::prompt::testing::server_or_skip;

mod common;
use common::llm_search_args;

fn runtimes() -> bool {
    backend_or_skip().is_some() && numpy_or_skip()
}

/// Requests the search may send (`KF_LLM_BUDGET_REQUESTS`). The first LLM child is judged
/// within the first few; the rest are the prompt co-evolution's meta-calls and retries.
const REQUEST_BUDGET: u64 = 12;

#[test]
fn a_task_file_search_with_the_llm_mutator_evaluates_llm_children() {
    let Some(server) = server_or_skip(Path::new(env!("CARGO_MANIFEST_DIR"))) else {
        return;
    };
    if !runtimes() {
        return;
    }
    let task =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/examples/scaled_swish/scaled_swish.toml");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("search");
    let task_args = [
        "--task-file",
        task.to_str().unwrap(),
        "--size",
        "ROWS=64,COLS=64",
    ];
    let args = llm_search_args(&task_args, &out, &server, "160");
    let run = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(&args)
        // The endpoint is the one given; no key is needed by the local server.
        .env_remove("KF_LLM_BASE_URL")
        .env("KF_LLM_TIMEOUT_S", "600")
        .env("KF_LLM_BUDGET_REQUESTS", REQUEST_BUDGET.to_string())
        .output()
        .expect("running kf");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        run.status.success(),
        "kf search failed:\n{stdout}\n{stderr}"
    );
    // The summary line: `LLM: N requests (… refused by the budget), …`; the budget holds.
    let requests: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("LLM: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `LLM: N requests` line:\n{stdout}"));
    assert!(
        (1..=REQUEST_BUDGET).contains(&requests),
        "{requests} requests against a budget of {REQUEST_BUDGET}:\n{stdout}"
    );

    let meta: RunMeta =
        serde_json::from_slice(&std::fs::read(out.join("run/run.json")).expect("run.json"))
            .expect("run meta");
    let dir = RunDir::open(out.join("run"), meta).expect("the run directory is intact");
    let records: Vec<StepRecord> = dir.read_records().expect("the step records");
    let steps = format!("{} step records", records.len());
    let mut llm_children = Vec::new();
    for record in &records {
        for child in &record.children {
            if child.candidate().origin.mutator == "llm" {
                llm_children.push(child.clone());
            }
        }
    }
    assert!(
        !llm_children.is_empty(),
        "no LLM child in the run directory:\n{steps}\n{stdout}\n{stderr}"
    );
    for child in &llm_children {
        match child {
            ChildRecord::Judged { elite, .. } => {
                let c = &elite.candidate;
                assert!(c.origin.model.is_some(), "{:?}", c.origin);
                assert!(c.origin.prompt_variant.is_some(), "{:?}", c.origin);
                eprintln!(
                    "LLM child {}: {} ({})",
                    c.id,
                    elite.evaluation.status,
                    elite.evaluation.diagnostics.lines().next().unwrap_or("")
                );
            }
            ChildRecord::Failed { .. } => panic!("an LLM child was not judged: {child:?}"),
        }
    }
    // The exchanges were recorded for replay.
    assert!(out.join("llm").is_dir());
}
