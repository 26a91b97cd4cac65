//! Shared by the kill-and-resume tests: a search run in a child process of the test binary
//! kills itself with SIGKILL mid-run, and the test resumes it from its run directory.

#![allow(dead_code)]

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use kf_core::{BoxError, EvaluationReport};

/// The observer of a run that must not be interrupted: it does nothing.
pub(crate) fn quiet(_: &EvaluationReport<'_>) -> Result<(), BoxError> {
    Ok(())
}

/// An observer that kills this process with SIGKILL (no unwinding, no flushing: a crash) once
/// `kill_at` evaluations are reported, and so recorded in the run directory.
pub(crate) fn sigkill_at(
    kill_at: u64,
) -> impl FnMut(&EvaluationReport<'_>) -> Result<(), BoxError> {
    move |r| {
        if r.evaluations >= kill_at {
            // SAFETY: kill(2) on our own pid; no memory is touched.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
        Ok(())
    }
}

/// Runs the ignored test `child_test` of this test binary in a child process, with the
/// variable `dir_var` naming `dir` (its run directory), and asserts that the child died of
/// SIGKILL.
pub(crate) fn run_child_until_killed(child_test: &str, dir_var: &str, dir: &Path) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", child_test, "--nocapture"])
        .env(dir_var, dir)
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
}
