//! Helpers shared by the integration tests that drive the real `kf` binary.

// Each test binary that includes this module uses some of its helpers, not all.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

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
