//! Running the benchmark: the shipped search on each shipped task, then [`BenchSummary`].

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use kf_core::Archive;
use kf_eval::task::file::TaskFile;
use kf_eval::TaskFileJob;

use crate::bench::{BenchSummary, TaskResult};
use crate::error::KernelBenchError;
use crate::import::TASK_FILE_NAME;
use crate::python::{default_python, torch_available};
use crate::torch_time::torch_cpu_seconds;
use kf_search::{Search, SearchConfig, ShippedArchive, ShippedScheduler};

/// How to run `kf bench kernelbench`.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The task folders (see [`crate::shipped_tasks`]).
    pub tasks: Vec<PathBuf>,
    /// The search configuration every task starts from (evaluations, backend, seed, tuning,
    /// wall limit); its task, sizes and output folder are set per task.
    pub search: SearchConfig,
    /// The archive of every task's search (`--archive`, `--islands`).
    pub archive: ShippedArchive,
    /// How every task's search proposes (`--scheduler`).
    pub scheduler: ShippedScheduler,
    /// Where each task's run goes (`<out>/<task>/`) and `kernelbench.json`.
    pub out: PathBuf,
    /// Time the unchanged problem files with PyTorch on the CPU when torch imports.
    pub torch: bool,
}

/// Runs the search on every task (a failing task is recorded, not fatal), writes
/// `<out>/kernelbench.json` and returns the summary.
pub fn run_bench(options: &BenchOptions) -> Result<BenchSummary, KernelBenchError> {
    let python = default_python();
    let with_torch = options.torch && torch_available(&python);
    let mut results = Vec::new();
    for dir in &options.tasks {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let result = match bench_task(options, dir, &name) {
            Ok(r) => r,
            Err(e) => failed(&name, e.to_string()),
        };
        // PyTorch is timed for every task, with a correct kernel or not, so that the table
        // shows what each problem costs it; a failure is the task's note (fast_p then falls
        // back to the naive baselines if a task with a correct kernel lacks a time).
        let (torch_s, torch_note) = if !options.torch {
            (None, Some("PyTorch not timed (--no-torch)".to_owned()))
        } else if !with_torch {
            (
                None,
                Some(format!("PyTorch is not installed in {}", python.display())),
            )
        } else {
            match TaskFile::load(&dir.join(TASK_FILE_NAME))
                .map_err(KernelBenchError::from)
                .and_then(|t| torch_cpu_seconds(&python, &t, &IndexMap::new()))
            {
                Ok(seconds) => (Some(seconds), None),
                Err(e) => (None, Some(format!("the PyTorch timing failed: {e}"))),
            }
        };
        results.push(TaskResult {
            torch_s,
            torch_note,
            ..result
        });
    }
    let summary = BenchSummary::new(results);
    std::fs::create_dir_all(&options.out).map_err(|e| KernelBenchError::io(&options.out, e))?;
    summary.write_json(&options.out.join("kernelbench.json"))?;
    Ok(summary)
}

fn failed(name: &str, error: String) -> TaskResult {
    TaskResult {
        task: name.to_owned(),
        correct: false,
        evaluations: 0,
        baseline_s: None,
        tuned_naive_s: None,
        best_s: None,
        torch_s: None,
        torch_note: None,
        roofline_fraction: None,
        best_kernel: None,
        error: Some(error),
    }
}

fn bench_task(
    options: &BenchOptions,
    dir: &Path,
    name: &str,
) -> Result<TaskResult, KernelBenchError> {
    let file = TaskFile::load(&dir.join(TASK_FILE_NAME))?;
    let job = TaskFileJob::from_task_file(&file)?;
    let mut config = options.search.clone();
    config.task = file.spec.name.clone();
    config.sizes = file.spec.sizes.clone();
    config.task_file = Some(job);
    config.out = options.out.join(name);
    // The shipped search as `kf search` runs it: its seeds, mutators and scheduler.
    let outcome = Search::builder()
        .config(config.clone())
        .archive_factory(options.archive.clone())
        .scheduler(options.scheduler.clone())
        .build()
        .and_then(|search| search.run())?;
    // The best correct kernel by its speedup over the baseline timed in the same worker.
    let best = Archive::elites(&outcome.archive)
        .into_iter()
        .filter(|e| e.evaluation.status.is_correct())
        .filter(|e| e.evaluation.speedup.is_some())
        .max_by(|a, b| {
            let (a, b) = (a.evaluation.speedup, b.evaluation.speedup);
            a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal)
        });
    let mut result = failed(name, "no correct kernel was found".into());
    result.evaluations = outcome.summary.evaluations;
    if let Some(best) = best {
        let e = &best.evaluation;
        result.correct = true;
        result.error = None;
        result.best_s = e.timing.as_ref().map(|t| t.median_s);
        result.roofline_fraction = e.roofline_fraction;
        // The run's one reference median, which the speedup is over (the baseline timed
        // beside this candidate may differ: kf_core::RunBaseline).
        result.baseline_s = e
            .speedup_reference_s()
            .or(match (e.speedup, result.best_s) {
                (Some(s), Some(t)) => Some(s * t),
                _ => None,
            });
        result.best_kernel = Some(config.out.clone());
        result.tuned_naive_s = tuned_naive_seconds(&config.out.join("run"));
    }
    Ok(result)
}

/// The naive kernel's fastest correct median time among the run's evaluations: the task
/// baseline seed (tuned over its own `[params]` when it was evaluated) and any parameter
/// moves of it, which keep its source. `None` when the run log cannot be read or the naive
/// kernel was never judged correct.
fn tuned_naive_seconds(run: &Path) -> Option<f64> {
    let log = kf_archive::read_run(run).ok()?;
    let judged = || {
        log.records
            .iter()
            .flat_map(|r| r.children.iter())
            .filter_map(|c| match c {
                kf_core::ChildRecord::Judged { elite, .. } => Some(elite),
                _ => None,
            })
    };
    let naive = judged()
        .find(|e| {
            e.candidate.origin.mutator == "seed"
                && e.candidate.origin.note.contains(kf_search::BASELINE_NOTE)
        })?
        .candidate
        .source
        .text
        .clone();
    judged()
        .filter(|e| e.candidate.source.text == naive && e.evaluation.status.is_correct())
        .filter_map(|e| e.evaluation.timing.map(|t| t.median_s))
        .fold(None, |best: Option<f64>, t| {
            Some(best.map_or(t, |b| b.min(t)))
        })
}
