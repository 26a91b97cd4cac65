//! Worker re-execution cannot recurse: a program whose `main` forgets `kernelfoundry::init()`
//! starts exactly one extra process, which is refused when it tries to start workers of its
//! own, and the program fails at its first evaluation with an error naming `init()`.
//!
//! The "program" is this test binary run on one test, [`forgetful_main`], which plays an
//! embedder's `main` without the `init()` call: its workers re-execute that same test, as a
//! worker re-executes an embedder's `main`. No OpenCL runtime is needed: no worker ever serves.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kf_core::{KernelSource, Language, ParamValues};
use kf_eval::{BackendSpec, EvalError, IsolatedEvaluator, WorkerCommand};

/// Set for the program run: the file each start of [`forgetful_main`] appends its pid to.
const COUNTER_ENV: &str = "KF_TEST_FORGETFUL_STARTS";

/// Starts after which the forgetful program stops by itself, so that a broken guard makes a
/// short chain that fails the test instead of an unbounded one.
const CHAIN_CAP: usize = 6;

/// How long the whole program may run before the test calls it a runaway and kills it. Far
/// above the seconds it takes; it only keeps a broken guard from hanging the suite.
const RUNAWAY_LIMIT: Duration = Duration::from_secs(120);

/// Arguments that run only [`forgetful_main`] in this test binary.
fn forgetful_args() -> Vec<String> {
    [
        "forgetful_main",
        "--ignored",
        "--exact",
        "--nocapture",
        "--quiet",
        "--test-threads=1",
    ]
    .map(String::from)
    .to_vec()
}

fn gemm_evaluator(command: WorkerCommand) -> IsolatedEvaluator {
    let sizes = kf_eval::task::parse_sizes("M=64,N=64,K=64").expect("sizes");
    IsolatedEvaluator::builder(BackendSpec::new("opencl"), "gemm", sizes)
        .command(command)
        .build()
}

fn some_kernel() -> KernelSource {
    KernelSource::new(Language::OpenCl, "gemm", "__kernel void gemm() {}")
}

/// An embedder's `main` that forgets `init()`: records its start, then evaluates a kernel with
/// workers that re-execute this same `main`. Does nothing in an ordinary test run.
#[test]
#[ignore = "a child process of another test: runs only with --ignored"]
fn forgetful_main() {
    let Some(counter) = std::env::var_os(COUNTER_ENV) else {
        return;
    };
    let mut starts = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&counter)
        .expect("counter file");
    // One write per line: appends from several processes never interleave within a line.
    starts
        .write_all(format!("{}\n", std::process::id()).as_bytes())
        .expect("record start");
    drop(starts);
    if recorded_pids(Path::new(&counter)).len() > CHAIN_CAP {
        // Only reached when the guard under test is broken: keep the failure cheap.
        std::process::exit(4);
    }
    let command = WorkerCommand {
        program: std::env::current_exe().expect("current exe"),
        args: forgetful_args(),
        env_remove: Vec::new(),
    };
    let evaluator = gemm_evaluator(command);
    match evaluator.evaluate_blocking(&some_kernel(), &ParamValues::new()) {
        Ok(e) => {
            eprintln!("forgetful main: unexpectedly evaluated: {:?}", e.status);
            std::process::exit(3);
        }
        Err(e) => {
            eprintln!("forgetful main: {e}");
            std::process::exit(1);
        }
    }
}

fn recorded_pids(counter: &Path) -> Vec<i32> {
    std::fs::read_to_string(counter)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn is_running(pid: i32) -> bool {
    // A zombie has exited; only its parent's wait is missing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Whether `pid` runs this test binary (never signal anything else).
fn runs_this_binary(pid: i32) -> bool {
    let exe = std::env::current_exe().ok();
    std::fs::read_link(format!("/proc/{pid}/exe")).ok() == exe
}

/// Stops every process of the chain that is still running: each recorded itself before
/// starting the next, so stopping all recorded ones until a round finds none running catches
/// the ones started meanwhile. Returns the pids that were still running.
fn stop_chain(counter: &Path) -> Vec<i32> {
    let mut stopped = Vec::new();
    loop {
        let running: Vec<i32> = recorded_pids(counter)
            .into_iter()
            .filter(|p| is_running(*p) && runs_this_binary(*p))
            .collect();
        if running.is_empty() {
            return stopped;
        }
        for pid in &running {
            // SAFETY: kill(2) on pids this test's program started; no memory is involved.
            unsafe { libc::kill(*pid, libc::SIGSTOP) };
        }
        for pid in &running {
            // SAFETY: as above.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        stopped.extend(running);
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_program_that_forgets_init_fails_fast_with_one_extra_process() {
    if std::env::var_os(COUNTER_ENV).is_some() || kf_eval::worker::is_worker_process() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let counter: PathBuf = dir.path().join("starts");
    let started = Instant::now();
    let mut program = Command::new(std::env::current_exe().expect("current exe"))
        .args(forgetful_args())
        .env(COUNTER_ENV, &counter)
        .env_remove(kf_eval::worker::WORKER_ENV)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the program");
    while program.try_wait().expect("poll").is_none() {
        if started.elapsed() > RUNAWAY_LIMIT {
            let _ = program.kill();
            stop_chain(&counter);
            panic!(
                "the program still ran after {RUNAWAY_LIMIT:?}; {} processes started",
                recorded_pids(&counter).len()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = program.wait_with_output().expect("program output");
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!(
        "the program ended after {elapsed:.2?} with {}",
        output.status
    );
    eprintln!("its stderr:\n{stderr}");

    assert_eq!(
        output.status.code(),
        Some(1),
        "the program fails with its evaluation error"
    );
    // A broken guard leaves a chain running after the program ended: stop it before failing.
    let still_running = stop_chain(&counter);
    assert!(
        still_running.is_empty(),
        "{} processes still ran after the program ended",
        still_running.len()
    );
    let pids = recorded_pids(&counter);
    assert_eq!(
        pids.len(),
        2,
        "the program and exactly one worker attempt start, got {pids:?}"
    );
    assert!(
        stderr.contains("did not enter worker mode") && stderr.contains("kernelfoundry::init()"),
        "the program's error names the missing init(): {stderr}"
    );
    assert!(
        stderr.contains("ran the program's own `main` instead of serving"),
        "the worker attempt told its parent it is not serving: {stderr}"
    );
}

/// The same program started as a worker with nobody listening: it is refused at once, starts
/// no process, and says why on standard error and, for its parent, on standard output.
#[test]
fn a_worker_process_refuses_to_start_workers() {
    if std::env::var_os(COUNTER_ENV).is_some() || kf_eval::worker::is_worker_process() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let counter = dir.path().join("starts");
    let output = Command::new(std::env::current_exe().expect("current exe"))
        .args(forgetful_args())
        .env(COUNTER_ENV, &counter)
        .env(kf_eval::worker::WORKER_ENV, r#"{"kind":"opencl"}"#)
        .stdin(Stdio::null())
        .output()
        .expect("run the program as a worker");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert_eq!(recorded_pids(&counter).len(), 1, "no process was started");
    assert!(
        stderr.contains("started as an evaluation worker (KF_EVAL_WORKER is set)")
            && stderr.contains("kernelfoundry::init()"),
        "{stderr}"
    );
    assert!(
        stdout.contains(r#"KFEVAL {"NotServing""#),
        "the parent is told on the protocol channel: {stdout}"
    );
}

#[test]
fn a_silent_child_is_not_taken_for_a_worker() {
    if kf_eval::worker::is_worker_process() {
        return;
    }
    let sizes = kf_eval::task::parse_sizes("M=64,N=64,K=64").expect("sizes");
    let evaluator = IsolatedEvaluator::builder(BackendSpec::new("opencl"), "gemm", sizes)
        .command(WorkerCommand {
            program: PathBuf::from("sleep"),
            args: vec!["600".into()],
            env_remove: Vec::new(),
        })
        .handshake_timeout(Duration::from_millis(500))
        .build();
    let err = evaluator
        .evaluate_blocking(&some_kernel(), &ParamValues::new())
        .expect_err("sleep is no worker");
    match &err {
        EvalError::WorkerNotServing {
            program, detail, ..
        } => {
            assert_eq!(program, "sleep");
            assert!(detail.contains("did not answer"), "{detail}");
        }
        other => panic!("expected WorkerNotServing, got {other:?}"),
    }
    assert!(err.to_string().contains("kernelfoundry::init()"), "{err}");
    assert_eq!(evaluator.workers_started(), 1);
    assert!(evaluator.idle_worker_pids().is_empty());
}

#[test]
fn a_child_that_exits_at_once_is_not_taken_for_a_worker() {
    if kf_eval::worker::is_worker_process() {
        return;
    }
    let evaluator = gemm_evaluator(WorkerCommand {
        program: PathBuf::from("sh"),
        args: vec!["-c".into(), "echo 'embedder main ran' >&2".into()],
        env_remove: Vec::new(),
    });
    let err = evaluator
        .evaluate_blocking(&some_kernel(), &ParamValues::new())
        .expect_err("sh is no worker");
    match &err {
        EvalError::WorkerNotServing { detail, stderr, .. } => {
            assert!(detail.contains("exited without answering"), "{detail}");
            assert!(stderr.contains("embedder main ran"), "{stderr}");
        }
        other => panic!("expected WorkerNotServing, got {other:?}"),
    }
}
