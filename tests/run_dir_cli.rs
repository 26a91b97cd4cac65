//! `kf search` and its run directory, as a user drives it: two searches on one output folder,
//! and a finished run extended with more evaluations. Uses the real `kf` binary and the OpenCL
//! runtime; skips with a message when the runtime is not installed, unless
//! `KF_REQUIRE_OPENCL=1`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kernelfoundry::archive::{RunDir, RunMeta};

mod common;
use common::{opencl_scratch, text};

fn search(out: &Path, evaluations: u64) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kf"));
    cmd.args(["search", "--task", "gemm", "--size", "M=64,N=64,K=64"])
        .args(["--tune-budget", "1", "--no-progress", "--evaluations"])
        .arg(evaluations.to_string())
        .arg("--out")
        .arg(out);
    cmd
}

/// Runs [`search`] to its end, which must succeed: what it said.
fn search_succeeds(out: &Path, evaluations: u64) -> String {
    let run = search(out, evaluations).output().unwrap();
    assert!(run.status.success(), "{}", text(&run));
    text(&run)
}

/// Waits until the search holding `out` has written its process id into the lock file.
fn wait_for_lock(child: &mut Child, out: &Path) {
    let lock = out.join("run").join("run.lock");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let holder = std::fs::read_to_string(&lock).unwrap_or_default();
        if holder.trim() == child.id().to_string() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the first search exited ({status}) before it locked its run directory");
        }
        assert!(
            Instant::now() < deadline,
            "the first search never locked {lock:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Evaluations recorded in a run directory, checking every line on the way.
fn recorded_evaluations(out: &Path) -> u64 {
    let meta: RunMeta =
        serde_json::from_slice(&std::fs::read(out.join("run/run.json")).unwrap()).unwrap();
    let dir = RunDir::open(out.join("run"), meta).expect("the run directory is intact");
    let records = dir.read_records().unwrap();
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.step, i as u64, "steps in order, each once");
    }
    records.iter().map(|r| r.children.len() as u64).sum()
}

#[test]
fn a_second_search_on_the_same_folder_exits_at_once_and_the_first_is_intact() {
    let Some(tmp) = opencl_scratch() else {
        return;
    };
    let out = tmp.path().join("gemm");
    let mut first = search(&out, 8)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_lock(&mut first, &out);
    let second = search(&out, 8).output().unwrap();
    let first_still_running = first.try_wait().unwrap().is_none();
    let said = text(&second);
    assert!(
        !second.status.success(),
        "the second search must fail: {said}"
    );
    assert!(
        said.contains(&format!("in use by process {}", first.id())),
        "the message names the holder: {said}"
    );
    assert!(
        first_still_running,
        "the second search returned only after the first had finished"
    );
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", text(&first));
    assert_eq!(recorded_evaluations(&out), 8);
}

#[test]
fn a_finished_search_is_extended_with_more_evaluations() {
    let Some(tmp) = opencl_scratch() else {
        return;
    };
    let out = tmp.path().join("gemm");
    search_succeeds(&out, 8);
    assert_eq!(recorded_evaluations(&out), 8);

    // The same command again: a finished run, replayed, and the user is told how to extend it.
    let again = search_succeeds(&out, 8);
    assert!(
        again.contains("ask for more evaluations to extend it"),
        "{again}"
    );

    let longer = search_succeeds(&out, 12);
    assert!(longer.contains("extended from 8 evaluations"), "{longer}");
    assert_eq!(recorded_evaluations(&out), 12);
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["evaluations"], 12);
    assert_eq!(report["extra"]["extended_from_evaluations"], 8);

    // Fewer evaluations than recorded: refused, nothing lost.
    let fewer = search(&out, 4).output().unwrap();
    assert!(!fewer.status.success());
    assert!(
        text(&fewer).contains("already holds 12 evaluations"),
        "{}",
        text(&fewer)
    );
    assert_eq!(recorded_evaluations(&out), 12);
}
