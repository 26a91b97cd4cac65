//! The API key never leaves the process that talks to the LLM: a real `kf search --llm` (the
//! real LLM server of `scripts/llm-server.sh start`, the real OpenCL runtime, real evaluation
//! worker processes) runs with a distinctive key in `KF_LLM_API_KEY`; while it runs, the
//! environment of every process it starts is read from `/proc/<pid>/environ`, and afterwards
//! every file the run wrote (run directory, LLM records, prompt variants, report.json,
//! report.html) and everything it logged (stdout, stderr at `-vv`) is searched for the key.
//!
//! Skips (printing `SKIPPED: …`) when no LLM server answers unless `KF_REQUIRE_LLM=1`, and when
//! OpenCL is missing unless `KF_REQUIRE_OPENCL=1`. Linux only (it reads `/proc`).

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kernelfoundry::opencl::testing::backend_or_skip;
use kernelfoundry::prompt::testing::server_or_skip;

mod common;
use common::llm_search_args;

/// Pids of every descendant of `root`, from the parent pid in `/proc/<pid>/stat`.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent: BTreeMap<u32, u32> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                parent.insert(pid, ppid);
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (child, _) in parent.iter().filter(|(_, pp)| **pp == p) {
            out.push(*child);
            frontier.push(*child);
        }
    }
    out
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                files_under(&p, out);
            } else {
                out.push(p);
            }
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn the_api_key_reaches_no_worker_file_log_or_report() {
    let Some(server) = server_or_skip(Path::new(env!("CARGO_MANIFEST_DIR"))) else {
        return;
    };
    if backend_or_skip().is_none() {
        return;
    }
    // Distinctive, and split so that this file itself holds no copy of the whole value.
    let key = format!("sk-kfleak-{}-{}", "7f3a9c", std::process::id());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("search");
    let gemm = ["--task", "gemm", "--size", "M=64,N=64,K=64", "-vv"];
    let args = llm_search_args(&gemm, &out, &server, "96");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(&args)
        .env("KF_LLM_API_KEY", &key)
        .env_remove("OPENAI_API_KEY")
        .env_remove("KF_LLM_BASE_URL")
        .env("KF_LLM_TIMEOUT_S", "600")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kf");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err_thread = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    // The key is in the search process itself (the test would prove nothing otherwise). Right
    // after spawn the child may not have exec'd yet and still shows this test's environment,
    // so look again until it has.
    let exec_deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let own = std::fs::read(format!("/proc/{}/environ", child.id())).unwrap_or_default();
        if contains(&own, key.as_bytes()) {
            break;
        }
        assert!(Instant::now() < exec_deadline, "kf did not get the key");
        std::thread::sleep(Duration::from_millis(10));
    }

    let mut inspected = HashSet::new();
    let mut leaks = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(1200);
    let search_cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap_or_default();
    let status = loop {
        for pid in descendants(child.id()) {
            // A child caught between fork and exec still has the search's memory, environment
            // and command line: only a process that has exec'd (its own command line, the same
            // before and after its environment was read) says what a worker was given.
            let cmdline = |pid: u32| std::fs::read(format!("/proc/{pid}/cmdline")).ok();
            let before = cmdline(pid);
            let env = std::fs::read(format!("/proc/{pid}/environ"));
            let after = cmdline(pid);
            let (Some(before), Ok(env)) = (before, env) else {
                continue;
            };
            if env.is_empty() || Some(&before) != after.as_ref() || before == search_cmdline {
                continue;
            }
            inspected.insert(pid);
            if contains(&env, key.as_bytes()) {
                leaks.push(format!("the environment of process {pid}"));
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "kf search did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_thread.join().unwrap();
    let stderr = err_thread.join().unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    assert!(status.success(), "kf search failed:\n{text}");
    assert!(
        !inspected.is_empty(),
        "no worker process was seen while the search ran:\n{text}"
    );
    assert!(
        text.contains("LLM: "),
        "the LLM mutator did not run:\n{text}"
    );
    if contains(&stdout, key.as_bytes()) || contains(&stderr, key.as_bytes()) {
        leaks.push("the log output".into());
    }

    let mut files = Vec::new();
    files_under(&out, &mut files);
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.strip_prefix(&out).ok())
        .map(|p| p.display().to_string())
        .collect();
    for expected in ["report.json", "report.html", "run/run.json"] {
        assert!(
            names.iter().any(|n| n == expected),
            "no {expected} in {names:?}"
        );
    }
    assert!(
        names.iter().any(|n| n.starts_with("llm/")),
        "no LLM records in {names:?}"
    );
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        if contains(&bytes, key.as_bytes()) {
            leaks.push(f.display().to_string());
        }
    }
    assert!(leaks.is_empty(), "the API key leaked into: {leaks:?}");
    eprintln!(
        "searched {} files ({} bytes of logs) and the environments of {} processes",
        files.len(),
        stdout.len() + stderr.len(),
        inspected.len()
    );
}
