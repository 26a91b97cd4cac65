//! The shipped KernelBench tasks for the tests that evaluate kernels on them.

use std::path::{Path, PathBuf};

use kernelfoundry::core::prelude::*;
use kernelfoundry::eval::taskfile::{FileTask, TaskFile};
use kernelfoundry::eval::tasks::parse_sizes;
use kernelfoundry::eval::{EvalConfig, KernelEvaluator};

/// The shipped task `tasks/kernelbench/NAME` at `sizes` (the task's own where not given),
/// compiling into `cache`.
pub(crate) fn shipped_task(name: &str, sizes: &str, cache: &Path) -> FileTask {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tasks/kernelbench")
        .join(name)
        .join("task.toml");
    let file = TaskFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
    FileTask::new(file, &parse_sizes(sizes).unwrap())
        .unwrap_or_else(|e| panic!("{e}"))
        .with_cache_dir(Some(cache.to_path_buf()))
}

/// An evaluation that checks correctness and times briefly (2–3 launches): these tests judge
/// correctness, not speed. `data_seed` fixes the inputs.
pub(crate) fn correctness_config(data_seed: u64) -> EvalConfig {
    let mut c = EvalConfig::default();
    c.timing.min_trials = 2;
    c.timing.min_seconds = 0.0;
    c.timing.max_trials = 3;
    c.data_seed = Some(data_seed);
    c
}

/// Every seed computes `task` correctly (`label` names the case in a failure).
pub(crate) fn every_seed_is_correct<'a, B: Backend>(
    ev: &mut KernelEvaluator<B>,
    task: &FileTask,
    seeds: impl IntoIterator<Item = &'a Candidate>,
    label: &str,
) {
    for seed in seeds {
        let e = ev.evaluate(task, &seed.source, &seed.params).unwrap();
        assert_eq!(
            e.status,
            Status::Correct,
            "{label} {}: {}",
            seed.params,
            e.diagnostics
        );
    }
}
