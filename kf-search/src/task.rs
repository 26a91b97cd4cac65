//! The task a command judges kernels against: a built-in task by name or a task file
//! ([`ChosenTask`]), and the check of a task file (`kf task check`, [`check_task_file`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kf_eval::task::file::{FileTask, TaskFile, TaskFileError};
use kf_eval::task::{builtin_references, builtin_task, parse_sizes, sizes_text, KernelTask, Sizes};
use kf_eval::{
    BackendSpec, EvalConfig, EvalError, IsolatedEvaluator, IsolatedEvaluatorBuilder, TaskFileJob,
    TimeoutPolicy,
};

/// Why a task could not be chosen or checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskChoiceError {
    /// Both a built-in task and a task file were named.
    #[error("give either --task or --task-file, not both")]
    Both,
    /// Neither was named.
    #[error("give --task NAME (gemm, softmax) or --task-file T.toml")]
    Neither,
    /// The sizes do not parse.
    #[error("--size")]
    Sizes(#[source] EvalError),
    /// The built-in task is unknown, or its sizes are wrong.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// The task file is invalid.
    #[error(transparent)]
    TaskFile(Box<TaskFileError>),
    /// The task file's reference failed on its first input set.
    #[error("checking the reference of {}", path.display())]
    Reference {
        /// The task file.
        path: PathBuf,
        /// What went wrong.
        source: Box<TaskFileError>,
    },
}

impl From<TaskFileError> for TaskChoiceError {
    fn from(e: TaskFileError) -> Self {
        TaskChoiceError::TaskFile(Box::new(e))
    }
}

/// A resolved task: built here (for sizes, work and descriptions) and, for task files, the
/// job that lets evaluation workers rebuild it.
pub struct ChosenTask {
    /// The task at the chosen sizes.
    pub task: Box<dyn KernelTask>,
    /// The task file, when the task came from one.
    pub file: Option<(PathBuf, TaskFileJob)>,
    /// Seconds the task file's reference took on one input set (measured when resolving).
    pub reference_s: f64,
}

impl std::fmt::Debug for ChosenTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChosenTask")
            .field("task", &self.task.name())
            .field("file", &self.file.as_ref().map(|(path, _)| path))
            .field("reference_s", &self.reference_s)
            .finish()
    }
}

impl ChosenTask {
    /// `--task` or `--task-file` (exactly one), at `--size`. A task file's reference runs once
    /// here, uncached, before anything else happens: a broken reference stops the command
    /// before any evaluation or output file, and its time sizes the evaluation timeout.
    pub fn resolve(
        task: Option<&str>,
        task_file: Option<&Path>,
        size: &str,
    ) -> Result<Self, TaskChoiceError> {
        let sizes: Sizes = parse_sizes(size).map_err(TaskChoiceError::Sizes)?;
        match (task, task_file) {
            (Some(_), Some(_)) => Err(TaskChoiceError::Both),
            (None, None) => Err(TaskChoiceError::Neither),
            (Some(name), None) => Ok(ChosenTask::builtin(builtin_task(name, &sizes)?)),
            (None, Some(path)) => {
                let file = TaskFile::load(path)?;
                let job = TaskFileJob::from_task_file(&file)?;
                let task = FileTask::with_references(
                    Arc::new(file),
                    &sizes,
                    Arc::new(builtin_references()),
                )?;
                let uncached = task.clone().with_cache_dir(None);
                let reference_s = if task.file().spec.reference.kernel.is_none() {
                    let (_, took) =
                        uncached
                            .run_reference(&uncached.inputs(0, 0))
                            .map_err(|source| TaskChoiceError::Reference {
                                path: path.to_path_buf(),
                                source: Box::new(source),
                            })?;
                    took.as_secs_f64()
                } else {
                    0.0
                };
                Ok(ChosenTask {
                    task: Box::new(task),
                    file: Some((path.to_path_buf(), job)),
                    reference_s,
                })
            }
        }
    }

    /// A built-in task (no task file, no reference to make room for).
    pub fn builtin(task: Box<dyn KernelTask>) -> Self {
        ChosenTask {
            task,
            file: None,
            reference_s: 0.0,
        }
    }

    /// The task's name.
    pub fn name(&self) -> String {
        self.task.name().to_owned()
    }

    /// `base` with room for the reference: a worker computes it for every fresh input set
    /// (and the baseline's), which must not count against the kernel.
    pub fn timeout(&self, base: TimeoutPolicy) -> TimeoutPolicy {
        if self.reference_s <= 0.0 || base.per_launch_factor == 0.0 {
            return base;
        }
        let extra = Duration::from_secs_f64(8.0 * self.reference_s + 5.0);
        TimeoutPolicy {
            max: base.max + extra,
            min: base.min + extra,
            allowance: base.allowance + extra,
            ..base
        }
    }

    /// The evaluation protocol for this task: task files reuse an input set (and its
    /// reference) for up to 8 evaluations in a warm worker, as the search does, so that a
    /// Python reference does not run three times per evaluation.
    pub fn eval_config(&self, base: EvalConfig) -> EvalConfig {
        match &self.file {
            Some(_) if base.reuse_inputs == 0 => EvalConfig {
                reuse_inputs: 8,
                ..base
            },
            _ => base,
        }
    }

    /// An isolated evaluator's builder for this task at its sizes.
    pub fn evaluator(&self, spec: BackendSpec) -> IsolatedEvaluatorBuilder {
        let builder = IsolatedEvaluator::builder(spec, self.name(), self.task.sizes());
        match &self.file {
            Some((_, job)) => builder.task_file(job.clone()),
            None => builder,
        }
    }
}

/// `kf task check`: validates the task file at `path` (at `size`), hands `out` one line at a
/// time what it declares (sizes, signature, buffers, scalars, work, baseline), then runs its
/// reference once, uncached, on the input set of `seed` and reports the outputs' ranges. A
/// kernel reference is not run (it runs on an evaluator's backend).
pub fn check_task_file(
    path: &Path,
    size: &str,
    seed: u64,
    mut out: impl FnMut(&str),
) -> Result<(), TaskChoiceError> {
    let sizes = parse_sizes(size).map_err(TaskChoiceError::Sizes)?;
    let file = TaskFile::load(path)?;
    // The reference really runs: no cache.
    let task = FileTask::new(file, &sizes)?.with_cache_dir(None);
    let spec = &task.file().spec;
    out(&format!("task {} ({}): valid", spec.name, path.display()));
    out(&format!("sizes: {}", sizes_text(&task.sizes())));
    out(&format!("signature: {}{}", spec.name, task.signature()));
    for (b, shape) in spec.buffers.iter().zip(task.shapes()) {
        out(&format!(
            "  buffer {:<10} {} {:?} {:?}",
            b.name, b.dtype, shape, b.role
        ));
    }
    for s in &spec.scalars {
        out(&format!(
            "  scalar {:<10} {} = {}",
            s.name,
            s.dtype,
            s.value.as_f64()
        ));
    }
    let work = task.describe().work;
    out(&format!(
        "work: {:.3e} flops, {:.3e} bytes",
        work.flops, work.bytes
    ));
    let alternatives: Vec<String> = task.alternative_sizes().iter().map(sizes_text).collect();
    out(&format!("alternative sizes: {}", alternatives.join("; ")));
    let baselines = spec
        .baseline
        .as_ref()
        .map(|b| b.kernel.to_vec().join(", "))
        .unwrap_or_else(|| "none".into());
    out(&format!("baseline: {baselines}"));
    if !spec.seeds.is_empty() {
        out(&format!("generated seeds: {}", spec.seeds.join(", ")));
    }
    let r = &spec.reference;
    if let Some(k) = &r.kernel {
        out(&format!(
            "reference: trusted kernel {k} (runs on the evaluator's backend; not run here)"
        ));
        return Ok(());
    }
    let data = task.inputs(seed, 0);
    let (outputs, took) = task.run_reference(&data)?;
    let which = r.python.as_deref().or(r.rust.as_deref()).unwrap_or("-");
    out(&format!(
        "reference {which}: ran in {:.3} s on input set 0 (seed {seed})",
        took.as_secs_f64()
    ));
    for ((b, shape), output) in spec.buffers.iter().zip(task.shapes()).zip(&outputs) {
        if output.is_empty() {
            continue;
        }
        let (lo, hi) = output
            .to_f64()
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
                (l.min(*x), h.max(*x))
            });
        out(&format!(
            "  output {:<10} {} {:?}: finite, range [{lo:.4}, {hi:.4}]",
            b.name, b.dtype, shape
        ));
    }
    family_lines(&task, &mut out);
    Ok(())
}

/// What `kf task check` says of the task's family: the declared one, or the one the NumPy
/// reference's trace shows (as a `[family]` table the user may copy), or why there is none.
fn family_lines(task: &FileTask, out: &mut impl FnMut(&str)) {
    let (family, source) = match (&task.file().spec.family, task.traced_family()) {
        (Some(declared), _) => (declared.clone(), "declared"),
        (None, Ok(Some(traced))) => (traced, "traced from the reference"),
        (None, Ok(None)) => {
            out("family: none recognised in the reference's graph (the search moves the task's own kernels)");
            return;
        }
        (None, Err(e)) => {
            out(&format!("family: none: {e}"));
            return;
        }
    };
    out(&format!("family ({source}):"));
    match family.to_toml() {
        Ok(table) => table.lines().for_each(|line| out(&format!("  {line}"))),
        Err(e) => out(&format!("  {} ({e})", family.kind())),
    }
}

/// The folder of a search's output (`--out`) that holds a copy of the task file it searched,
/// so that the output folder is self-contained: `kf export` reads the task's signature and
/// runs its reference from there.
pub const TASK_COPY_DIR: &str = "task";
/// The copied task file's name inside [`TASK_COPY_DIR`].
pub const TASK_COPY_FILE: &str = "task.toml";

/// Copies the task file `job` into `out/`[`TASK_COPY_DIR`]: its spec as TOML
/// ([`TASK_COPY_FILE`]) and every file it names at the same relative path (the Python
/// reference with the `*.py` modules beside it, the reference and baseline kernels with their
/// sources). A file named outside the task's folder is left out with a warning (`kf export`
/// then says which file is missing).
///
/// # Errors
///
/// Reading a named file or writing the copy fails.
pub fn record_task_file(job: &TaskFileJob, out: &Path) -> std::io::Result<()> {
    let dir = out.join(TASK_COPY_DIR);
    std::fs::create_dir_all(&dir)?;
    let spec = &job.spec;
    let text = spec.to_toml().map_err(std::io::Error::other)?;
    std::fs::write(
        dir.join(TASK_COPY_FILE),
        format!(
            "# The task file this search ran on ({}), copied for `kf export`.\n{text}",
            job.file
        ),
    )?;
    let mut files: Vec<String> = Vec::new();
    if let Some(script) = &spec.reference.python {
        files.push(script.clone());
        // The modules the script may import (the reference driver puts its folder on the path).
        let folder = Path::new(script).parent().unwrap_or_else(|| Path::new(""));
        if let Ok(entries) = std::fs::read_dir(job.base_dir.join(folder)) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with(".py") && entry.path().is_file() {
                    files.push(folder.join(name).to_string_lossy().into_owned());
                }
            }
        }
    }
    let kernels = spec
        .reference
        .kernel
        .iter()
        .cloned()
        .chain(spec.baseline.iter().flat_map(|b| b.kernel.to_vec()))
        .chain(spec.seeds.iter().cloned());
    for manifest in kernels {
        let text = std::fs::read_to_string(job.base_dir.join(&manifest))?;
        if let Ok(Some(source)) =
            kf_manifest::Manifest::parse(&text, &manifest, None).map(|m| m.source)
        {
            let folder = Path::new(&manifest)
                .parent()
                .unwrap_or_else(|| Path::new(""));
            files.push(folder.join(source).to_string_lossy().into_owned());
        }
        files.push(manifest);
    }
    for rel in files {
        let plain = Path::new(&rel)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain {
            tracing::warn!("{}: `{rel}` lies outside the task file's folder; the run's copy of the task (for kf export) leaves it out", job.file);
            continue;
        }
        let target = dir.join(&rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(job.base_dir.join(&rel), target)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_named_once() {
        assert!(matches!(
            ChosenTask::resolve(Some("gemm"), Some(Path::new("t.toml")), ""),
            Err(TaskChoiceError::Both)
        ));
        assert!(matches!(
            ChosenTask::resolve(None, None, ""),
            Err(TaskChoiceError::Neither)
        ));
        let e = ChosenTask::resolve(Some("gemm"), None, "M=").unwrap_err();
        assert!(matches!(e, TaskChoiceError::Sizes(_)), "{e}");
        let chosen = ChosenTask::resolve(Some("gemm"), None, "M=64,N=64,K=64").unwrap();
        assert_eq!(chosen.name(), "gemm");
        let base = TimeoutPolicy::default();
        assert_eq!(chosen.timeout(base).max, base.max);
        assert_eq!(chosen.eval_config(EvalConfig::default()).reuse_inputs, 0);
    }
}
