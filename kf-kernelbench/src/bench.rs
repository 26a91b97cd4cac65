//! `kf bench kernelbench`: KernelBench's metrics over a short search per shipped task.
//!
//! KernelBench's `fast_p` is the fraction of tasks whose generated kernel is correct **and**
//! faster than the reference implementation by more than `p` (speedup = reference time /
//! kernel time): `fast_0` is the fraction correct, `fast_1` correct and faster, `fast_2`
//! correct and more than twice as fast. KernelBench's reference is PyTorch eager on the GPU;
//! here it is PyTorch eager on the CPU when torch is installed for every task, and otherwise
//! the task's naive OpenCL baseline (timed interleaved with the kernels in the same run). The
//! table and the JSON file say which.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::KernelBenchError;
use crate::import::{write_atomic, TASK_FILE_NAME};

/// What speedups in `fast_p` are measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeedupReference {
    /// PyTorch eager on the CPU (every task had a torch time).
    TorchCpu,
    /// The task's naive OpenCL baseline kernel.
    NaiveBaseline,
}

impl SpeedupReference {
    /// Words for the table.
    pub fn describe(self) -> &'static str {
        match self {
            SpeedupReference::TorchCpu => "PyTorch eager on the CPU",
            SpeedupReference::NaiveBaseline => "the naive OpenCL baseline",
        }
    }
}

/// What the search on one task found.
#[derive(Debug, Clone, Serialize)]
pub struct TaskResult {
    /// The task folder's name (`19_ReLU`).
    pub task: String,
    /// Whether a correct kernel was found.
    pub correct: bool,
    /// Evaluations spent.
    pub evaluations: u64,
    /// The naive baseline's median time in the run, seconds.
    pub baseline_s: Option<f64>,
    /// The naive kernel's fastest correct median time in the run, seconds: the baseline as
    /// the search tuned its own `[params]` (its launch geometry), timed like every candidate.
    /// `baseline_s` is the naive kernel at its manifest's first values, which the search's
    /// speedups are over; this is what a user who tunes the naive kernel would compare with.
    #[serde(default)]
    pub tuned_naive_s: Option<f64>,
    /// The best correct kernel's median time, seconds.
    pub best_s: Option<f64>,
    /// PyTorch eager on the CPU at the same sizes, seconds (when torch is installed).
    pub torch_s: Option<f64>,
    /// Why the task has no PyTorch time (not installed, `--no-torch`, the timing failed).
    #[serde(default)]
    pub torch_note: Option<String>,
    /// The best kernel's fraction of the device's roofline (when the device has peaks).
    pub roofline_fraction: Option<f64>,
    /// The best kernel's file, when written.
    pub best_kernel: Option<PathBuf>,
    /// Why the task failed, when it did.
    pub error: Option<String>,
}

impl TaskResult {
    /// baseline / best, for a correct kernel.
    pub fn speedup_vs_baseline(&self) -> Option<f64> {
        ratio(self.correct, self.baseline_s, self.best_s)
    }

    /// tuned naive / best, for a correct kernel (see [`TaskResult::tuned_naive_s`]).
    pub fn speedup_vs_tuned_naive(&self) -> Option<f64> {
        ratio(self.correct, self.tuned_naive_s, self.best_s)
    }

    /// torch / best, for a correct kernel.
    pub fn speedup_vs_torch(&self) -> Option<f64> {
        ratio(self.correct, self.torch_s, self.best_s)
    }
}

fn ratio(correct: bool, reference: Option<f64>, best: Option<f64>) -> Option<f64> {
    match (correct, reference, best) {
        (true, Some(r), Some(b)) if r > 0.0 && b > 0.0 => Some(r / b),
        _ => None,
    }
}

/// KernelBench's metrics over a set of task results.
#[derive(Debug, Clone, Serialize)]
pub struct BenchSummary {
    /// What `fast_p` speedups are measured against.
    pub speedup_reference: SpeedupReference,
    /// Fraction of tasks with a correct kernel.
    pub fast_0: f64,
    /// Fraction correct and faster than the reference.
    pub fast_1: f64,
    /// Fraction correct and more than 2x faster than the reference.
    pub fast_2: f64,
    /// Geometric mean of the best kernels' speedups over the naive baselines (correct tasks).
    pub geomean_vs_baseline: Option<f64>,
    /// Geometric mean of the best kernels' speedups over the naive kernels at their tuned
    /// launch parameters (correct tasks where the run timed the naive kernel).
    pub geomean_vs_tuned_naive: Option<f64>,
    /// Geometric mean of the speedups over PyTorch on the CPU (correct tasks with a torch time).
    pub geomean_vs_torch: Option<f64>,
    /// Per task.
    pub tasks: Vec<TaskResult>,
}

fn geomean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values
        .filter(|v| *v > 0.0)
        .fold((0.0, 0usize), |(s, n), v| (s + v.ln(), n + 1));
    (n > 0).then(|| (sum / n as f64).exp())
}

impl BenchSummary {
    /// The metrics of `tasks`; speedups against torch when every task with a correct kernel
    /// has a torch time (a task without a correct kernel counts as not faster either way).
    pub fn new(tasks: Vec<TaskResult>) -> Self {
        let all_torch = tasks.iter().any(|t| t.torch_s.is_some())
            && tasks.iter().all(|t| !t.correct || t.torch_s.is_some());
        let speedup_reference = if all_torch {
            SpeedupReference::TorchCpu
        } else {
            SpeedupReference::NaiveBaseline
        };
        let n = tasks.len().max(1) as f64;
        let speedup = |t: &TaskResult| match speedup_reference {
            SpeedupReference::TorchCpu => t.speedup_vs_torch(),
            SpeedupReference::NaiveBaseline => t.speedup_vs_baseline(),
        };
        let fast = |p: f64| {
            tasks
                .iter()
                .filter(|t| t.correct && speedup(t).is_some_and(|s| s > p))
                .count() as f64
                / n
        };
        BenchSummary {
            speedup_reference,
            fast_0: tasks.iter().filter(|t| t.correct).count() as f64 / n,
            fast_1: fast(1.0),
            fast_2: fast(2.0),
            geomean_vs_baseline: geomean(tasks.iter().filter_map(TaskResult::speedup_vs_baseline)),
            geomean_vs_tuned_naive: geomean(
                tasks.iter().filter_map(TaskResult::speedup_vs_tuned_naive),
            ),
            geomean_vs_torch: geomean(tasks.iter().filter_map(TaskResult::speedup_vs_torch)),
            tasks,
        }
    }

    /// Whether some task could not even start its search (an error before any evaluation):
    /// `kf bench kernelbench` then exits with status 1.
    pub fn any_task_not_run(&self) -> bool {
        self.tasks
            .iter()
            .any(|t| t.error.is_some() && t.evaluations == 0)
    }

    /// The table printed by `kf bench kernelbench`.
    pub fn table(&self) -> String {
        let ms = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{:.3}", s * 1e3));
        let x = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{s:.2}x"));
        let mut table = comfy_table::Table::new();
        table.set_header(vec![
            "task",
            "correct",
            "evals",
            "naive ms",
            "best ms",
            "vs naive",
            "vs tuned naive",
            "roofline",
            "torch ms",
            "vs torch",
        ]);
        for t in &self.tasks {
            table.add_row(vec![
                t.task.clone(),
                if t.correct {
                    "yes".to_owned()
                } else {
                    format!(
                        "no{}",
                        t.error.as_ref().map_or(String::new(), |e| format!(": {e}"))
                    )
                },
                t.evaluations.to_string(),
                ms(t.baseline_s),
                ms(t.best_s),
                x(t.speedup_vs_baseline()),
                x(t.speedup_vs_tuned_naive()),
                t.roofline_fraction
                    .map_or("-".to_owned(), |f| format!("{:.0}%", f * 100.0)),
                ms(t.torch_s),
                x(t.speedup_vs_torch()),
            ]);
        }
        format!(
            "{table}\nfast_0 = {:.2}  fast_1 = {:.2}  fast_2 = {:.2}  (speedups relative to {})\n\
             geometric-mean speedup over the naive baselines: {} (over the naive kernels at \
             their tuned launch parameters: {}); over PyTorch CPU: {}\n",
            self.fast_0,
            self.fast_1,
            self.fast_2,
            self.speedup_reference.describe(),
            x(self.geomean_vs_baseline),
            x(self.geomean_vs_tuned_naive),
            self.geomean_vs_torch.map_or_else(
                || format!("n/a ({})", self.why_no_torch()),
                |g| format!("{g:.2}x")
            ),
        ) + &self.missing_torch_line()
    }

    /// Why no task has a speedup over PyTorch: the tasks' own notes (PyTorch not installed,
    /// `--no-torch`, a failed timing), or that no task has a correct kernel with a time.
    fn why_no_torch(&self) -> String {
        let mut notes: Vec<&str> = self
            .tasks
            .iter()
            .filter_map(|t| t.torch_note.as_deref())
            .collect();
        notes.dedup();
        match notes[..] {
            [] => "no task has both a correct kernel and a PyTorch time".to_owned(),
            [one] => one.to_owned(),
            _ => "see the tasks without a PyTorch time below".to_owned(),
        }
    }

    /// A line naming the correct tasks that have no PyTorch time and why, when some others
    /// have one (so that the reader knows why the speedups are over the naive kernels).
    fn missing_torch_line(&self) -> String {
        if self.tasks.iter().all(|t| t.torch_s.is_none()) {
            return String::new();
        }
        let missing: Vec<String> = self
            .tasks
            .iter()
            .filter(|t| t.torch_s.is_none())
            .map(|t| {
                format!(
                    "{} ({})",
                    t.task,
                    t.torch_note.as_deref().unwrap_or("no PyTorch time")
                )
            })
            .collect();
        if missing.is_empty() {
            String::new()
        } else {
            format!("no PyTorch time for: {}\n", missing.join("; "))
        }
    }

    /// Writes the summary as JSON to `path` (temp file + rename).
    pub fn write_json(&self, path: &Path) -> Result<(), KernelBenchError> {
        let text = serde_json::to_string_pretty(self)?;
        write_atomic(path, &format!("{text}\n"))
    }
}

/// The shipped task folders under `dir` (those holding a `task.toml`), sorted by problem
/// number, filtered to `only` when it is not empty (each entry a folder name or its leading
/// problem number, `19` for `19_ReLU`). An entry that matches nothing is an error.
pub fn shipped_tasks(dir: &Path, only: &[String]) -> Result<Vec<PathBuf>, KernelBenchError> {
    let entries = std::fs::read_dir(dir).map_err(|e| KernelBenchError::io(dir, e))?;
    let mut tasks: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join(TASK_FILE_NAME).is_file())
        .collect();
    let number = |p: &PathBuf| -> (u64, String) {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let n = name
            .split('_')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX);
        (n, name)
    };
    tasks.sort_by_key(number);
    if only.is_empty() {
        return Ok(tasks);
    }
    let mut chosen = Vec::new();
    for want in only {
        let found: Vec<&PathBuf> = tasks
            .iter()
            .filter(|p| {
                let (n, name) = number(p);
                name == *want || want.parse::<u64>().is_ok_and(|w| w == n)
            })
            .collect();
        if found.is_empty() {
            let names: Vec<String> = tasks.iter().map(|p| number(p).1).collect();
            return Err(KernelBenchError::BadProblemPath {
                path: dir.join(want),
                reason: format!("no shipped task `{want}` (tasks: {})", names.join(", ")),
            });
        }
        chosen.extend(found.into_iter().cloned());
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(task: &str, correct: bool, base: f64, best: f64, torch: Option<f64>) -> TaskResult {
        TaskResult {
            task: task.into(),
            correct,
            evaluations: 10,
            baseline_s: Some(base),
            tuned_naive_s: Some(base / 2.0),
            best_s: Some(best),
            torch_s: torch,
            torch_note: torch
                .is_none()
                .then(|| "the PyTorch timing failed: test".to_owned()),
            roofline_fraction: Some(0.25),
            best_kernel: None,
            error: None,
        }
    }

    #[test]
    fn fast_p_counts_correct_kernels_beyond_the_threshold() {
        let s = BenchSummary::new(vec![
            result("a", true, 4.0, 1.0, None),  // 4x
            result("b", true, 1.5, 1.0, None),  // 1.5x
            result("c", true, 1.0, 1.0, None),  // 1.0x: not faster
            result("d", false, 9.0, 1.0, None), // wrong: never counts
        ]);
        assert_eq!(s.speedup_reference, SpeedupReference::NaiveBaseline);
        assert_eq!(s.fast_0, 0.75);
        assert_eq!(s.fast_1, 0.5);
        assert_eq!(s.fast_2, 0.25);
        let g = s.geomean_vs_baseline.unwrap();
        assert!(
            (g - (4.0f64 * 1.5 * 1.0).powf(1.0 / 3.0)).abs() < 1e-12,
            "{g}"
        );
        assert!(s.geomean_vs_torch.is_none());
        // Over the naive kernels at their tuned parameters (here twice as fast as at their
        // first values): half the speedups.
        let tuned = s.geomean_vs_tuned_naive.unwrap();
        assert!((tuned - g / 2.0).abs() < 1e-12, "{tuned}");
        assert!(s.table().contains("vs tuned naive") && s.table().contains("2.00x"));
        assert!(s.table().contains("relative to the naive OpenCL baseline"));
        // Each task's fraction of the roofline is a column, so regressions show.
        assert!(s.table().contains("roofline") && s.table().contains("25%"));
    }

    #[test]
    fn torch_becomes_the_reference_only_when_every_task_has_it() {
        let s = BenchSummary::new(vec![
            result("a", true, 4.0, 1.0, Some(0.5)), // 0.5x of torch
            result("b", true, 2.0, 1.0, Some(3.0)), // 3x of torch
        ]);
        assert_eq!(s.speedup_reference, SpeedupReference::TorchCpu);
        assert_eq!(s.fast_1, 0.5);
        assert_eq!(s.fast_2, 0.5);
        let g = s.geomean_vs_torch.unwrap();
        assert!((g - 1.5f64.sqrt()).abs() < 1e-12, "{g}");
        let mixed = BenchSummary::new(vec![
            result("a", true, 4.0, 1.0, Some(0.5)),
            result("b", true, 2.0, 1.0, None),
        ]);
        assert_eq!(mixed.speedup_reference, SpeedupReference::NaiveBaseline);
        assert_eq!(mixed.fast_2, 0.5);
        // The table says which task lacks a PyTorch time and why, and never that PyTorch is
        // not installed when it timed the others.
        let text = mixed.table();
        assert!(
            text.contains("no PyTorch time for: b (the PyTorch timing failed: test)"),
            "{text}"
        );
        assert!(!text.contains("not installed"), "{text}");
        // A task without a correct kernel does not take the PyTorch reference away.
        let one_wrong = BenchSummary::new(vec![
            result("a", true, 4.0, 1.0, Some(0.5)),
            result("c", false, 2.0, 1.0, None),
        ]);
        assert_eq!(one_wrong.speedup_reference, SpeedupReference::TorchCpu);
        assert_eq!(one_wrong.fast_0, 0.5);
        assert_eq!(one_wrong.fast_1, 0.0);
    }

    #[test]
    fn shipped_tasks_are_found_sorted_and_filtered() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/kernelbench");
        let all = shipped_tasks(&dir, &[]).unwrap();
        assert!(all.len() >= 12);
        let names: Vec<String> = all
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names[0], "1_Square_matrix_multiplication_");
        let some = shipped_tasks(&dir, &["19".into(), "23_Softmax".into()]).unwrap();
        assert_eq!(some.len(), 2);
        assert!(some[0].ends_with("19_ReLU"));
        let err = shipped_tasks(&dir, &["999".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no shipped task `999`"), "{err}");
    }
}
