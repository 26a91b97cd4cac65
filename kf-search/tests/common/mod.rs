//! Shared by the tests that run whole searches on OpenCL workers: the settings that keep such a
//! search short.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use kf_eval::task::Sizes;
use kf_eval::WorkerCommand;
use kf_search::SearchConfig;
use tempfile::TempDir;

/// A search of `task` at `sizes` writing to `out` that stops after `evaluations` evaluations:
/// one tuning step, workers started from this test binary (its `worker_test_entry!`), and
/// timing cut to a few short trials so that the test takes seconds. Five minutes of wall time
/// is a safety net, not a limit a passing run reaches.
pub(crate) fn short_search(task: &str, sizes: Sizes, out: &Path, evaluations: u64) -> SearchConfig {
    let mut config = SearchConfig::new(task, sizes);
    config.evaluations = evaluations;
    config.tune_budget = 1;
    config.wall = Some(Duration::from_secs(300));
    config.out = out.to_path_buf();
    config.worker = Some(WorkerCommand::test_harness().unwrap());
    config.eval.timing.min_trials = 3;
    config.eval.timing.min_seconds = 0.002;
    config.eval.timing.max_seconds = 0.1;
    config
}

/// Where a search test on OpenCL workers writes: a temporary folder (removed when dropped) and
/// the path `name` in it (not created: a run folder, say); `None`, after printing why, where
/// there is no OpenCL runtime (a skip under `KF_REQUIRE_OPENCL`'s rule).
#[track_caller]
pub(crate) fn run_folder_or_skip(name: &str) -> Option<(TempDir, PathBuf)> {
    kf_backend_opencl::testing::backend_or_skip()?;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join(name);
    Some((tmp, out))
}
