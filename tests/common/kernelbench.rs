//! The shipped KernelBench tasks for the tests that evaluate kernels on them.

use std::path::{Path, PathBuf};

use kernelfoundry::core::prelude::*;
use kernelfoundry::eval::task::file::{FileTask, TaskFile};
use kernelfoundry::eval::task::parse_sizes;
use kernelfoundry::eval::{EvalConfig, KernelEvaluator};
use kernelfoundry::search::offline_search;

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

/// The seeds a search of the family task `task` starts from, after checking what it is offered:
/// a structural mutator in its mix and, for each of `markers`, a seed after the naive kernel
/// whose text carries it (`label` names the case in a failure).
pub(crate) fn seeded_with(task: &FileTask, markers: &[&str], label: &str) -> Vec<Candidate> {
    let (seeds, mix) = offline_search(task, Language::OpenCl).unwrap();
    assert!(
        mix.names().contains(&"structural"),
        "{label}: {:?}",
        mix.names()
    );
    for marker in markers {
        assert!(
            seeds.iter().skip(1).any(|s| s.source.text.contains(marker)),
            "{label}: no {marker} seed"
        );
    }
    seeds
}
