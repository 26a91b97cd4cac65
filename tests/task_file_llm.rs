//! `kf search --task-file … --llm` against the real LLM server (`scripts/llm-server.sh start`:
//! SmolLM2-135M on llama.cpp, 127.0.0.1) with the real OpenCL runtime and Python references:
//! the LLM mutator's children are evaluated and recorded in the run directory with a typed
//! status. A 135M model mostly writes kernels that do not compile or extract; the point is the
//! path, end to end, not their quality.
//!
//! The server is found through `KF_LLM_TEST_BASE_URL` or `.runtime/llm-server.json`. Skips
//! (printing `SKIPPED: …`) when no server answers unless `KF_REQUIRE_LLM=1`, and when OpenCL or
//! Python with NumPy is missing unless `KF_REQUIRE_OPENCL=1` / `KF_REQUIRE_PYTHON=1`.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kernelfoundry::archive::{RunDir, RunMeta};
use kernelfoundry::core::{ChildRecord, StepRecord};
use kernelfoundry::eval::taskfile::python::python_interpreter;

fn required(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

/// The server's base URL and model, if one answers `/health`.
fn server() -> Result<(String, Option<String>), String> {
    let (url, model) = match std::env::var("KF_LLM_TEST_BASE_URL") {
        Ok(u) if !u.trim().is_empty() => (u.trim().to_owned(), None),
        _ => {
            let info = Path::new(env!("CARGO_MANIFEST_DIR")).join(".runtime/llm-server.json");
            let text = std::fs::read_to_string(&info).map_err(|_| {
                format!(
                    "no {} (run scripts/llm-server.sh install && scripts/llm-server.sh start)",
                    info.display()
                )
            })?;
            let v: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", info.display()))?;
            (
                v["base_url"]
                    .as_str()
                    .ok_or("llm-server.json has no base_url")?
                    .to_owned(),
                v["model"].as_str().map(str::to_owned),
            )
        }
    };
    let host_port = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let addr = host_port
        .to_socket_addrs()
        .map_err(|e| format!("{host_port}: {e}"))?
        .next()
        .ok_or(format!("{host_port} resolves to nothing"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("{url}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    write!(
        s,
        "GET /health HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    if reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200") {
        Ok((url, model))
    } else {
        Err(format!("{url}/health did not answer 200"))
    }
}

fn runtimes() -> bool {
    if let Err(e) = kernelfoundry::opencl::OpenClBackend::new() {
        assert!(
            !required("KF_REQUIRE_OPENCL"),
            "KF_REQUIRE_OPENCL=1 but: {e}"
        );
        eprintln!("SKIPPED: no OpenCL runtime ({e})");
        return false;
    }
    let numpy = Command::new(python_interpreter())
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !numpy {
        assert!(
            !required("KF_REQUIRE_PYTHON"),
            "KF_REQUIRE_PYTHON=1 but no NumPy"
        );
        eprintln!("SKIPPED: no Python with NumPy; run scripts/setup.sh");
    }
    numpy
}

#[test]
fn a_task_file_search_with_the_llm_mutator_evaluates_llm_children() {
    let (url, model) = match server() {
        Ok(s) => s,
        Err(why) => {
            assert!(!required("KF_REQUIRE_LLM"), "KF_REQUIRE_LLM=1 but {why}");
            eprintln!("SKIPPED: no LLM server: {why}");
            return;
        }
    };
    if !runtimes() {
        return;
    }
    let task =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/examples/scaled_swish/scaled_swish.toml");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("search");
    let mut args: Vec<String> = [
        "search",
        "--task-file",
        task.to_str().unwrap(),
        "--size",
        "ROWS=64,COLS=64",
        "--evaluations",
        "4",
        "--tune-budget",
        "1",
        "--no-progress",
        "--out",
        out.to_str().unwrap(),
        "--llm",
        "--llm-base-url",
        &url,
        "--llm-max-tokens",
        "160",
        "--llm-compact",
        // The parameter moves stay in the mix; this weight makes the steps LLM steps.
        "--llm-weight",
        "1000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(m) = model {
        args.extend(["--llm-model".to_owned(), m]);
    }
    let run = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(&args)
        // The endpoint is the one given; no key is needed by the local server.
        .env_remove("KF_LLM_BASE_URL")
        .env("KF_LLM_TIMEOUT_S", "600")
        .output()
        .expect("running kf");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        run.status.success(),
        "kf search failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("LLM: "), "{stdout}");

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
