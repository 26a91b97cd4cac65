//! `--task NAME` or `--task-file T.toml`: the task a command judges kernels against.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use kernelfoundry::eval::taskfile::{FileTask, TaskFile};
use kernelfoundry::eval::tasks::{
    builtin_references, builtin_task, parse_sizes, KernelTask, Sizes,
};
use kernelfoundry::eval::{
    BackendSpec, EvalConfig, IsolatedEvaluator, IsolatedEvaluatorBuilder, TaskFileJob,
    TimeoutPolicy,
};

/// A resolved task: built here (for sizes, work and descriptions) and, for task files, the
/// job that lets evaluation workers rebuild it.
pub(crate) struct ChosenTask {
    /// The task at the chosen sizes.
    pub(crate) task: Box<dyn KernelTask>,
    /// The task file, when the task came from one.
    pub(crate) file: Option<(PathBuf, TaskFileJob)>,
    /// Seconds the task file's reference took on one input set (measured when resolving).
    pub(crate) reference_s: f64,
}

impl ChosenTask {
    /// `--task` or `--task-file` (exactly one), at `--size`.
    pub(crate) fn resolve(
        task: Option<&str>,
        task_file: Option<&Path>,
        size: &str,
    ) -> anyhow::Result<Self> {
        let sizes: Sizes = parse_sizes(size).context("--size")?;
        match (task, task_file) {
            (Some(_), Some(_)) => bail!("give either --task or --task-file, not both"),
            (None, None) => bail!("give --task NAME (gemm, softmax) or --task-file T.toml"),
            (Some(name), None) => Ok(ChosenTask {
                task: builtin_task(name, &sizes)?,
                file: None,
                reference_s: 0.0,
            }),
            (None, Some(path)) => {
                let file = TaskFile::load(path)?;
                let job = TaskFileJob::from_task_file(&file)?;
                let task = FileTask::with_references(
                    Arc::new(file),
                    &sizes,
                    Arc::new(builtin_references()),
                )?;
                // The reference runs once here, uncached, before anything else happens: a
                // broken reference stops the command before any evaluation or output file,
                // and its time sizes the evaluation timeout.
                let uncached = task.clone().with_cache_dir(None);
                let reference_s = if task.file().spec.reference.kernel.is_none() {
                    let (_, took) = uncached
                        .run_reference(&uncached.inputs(0, 0))
                        .with_context(|| format!("checking the reference of {}", path.display()))?;
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

    /// The task's name.
    pub(crate) fn name(&self) -> String {
        self.task.name().to_owned()
    }

    /// `base` with room for the reference: a worker computes it for every fresh input set
    /// (and the baseline's), which must not count against the kernel.
    pub(crate) fn timeout(&self, base: TimeoutPolicy) -> TimeoutPolicy {
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
    pub(crate) fn eval_config(&self, base: EvalConfig) -> EvalConfig {
        match &self.file {
            Some(_) if base.reuse_inputs == 0 => EvalConfig {
                reuse_inputs: 8,
                ..base
            },
            _ => base,
        }
    }

    /// An isolated evaluator's builder for this task at its sizes.
    pub(crate) fn evaluator(&self, spec: BackendSpec) -> IsolatedEvaluatorBuilder {
        let builder = IsolatedEvaluator::builder(spec, self.name(), self.task.sizes());
        match &self.file {
            Some((_, job)) => builder.task_file(job.clone()),
            None => builder,
        }
    }
}
