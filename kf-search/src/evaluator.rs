//! The search's evaluator: tuned evaluation in local worker processes, or the same through
//! distributed workers. One type ([`kf_core::Either`] of the two), so that the engine and
//! everything around it stay the same.

#[cfg(feature = "dist")]
use crate::Distributed;
use crate::{DeviceEvaluations, SearchConfig, SearchError, CLOSE_CALL_MARGIN};
use kf_core::Either;
#[cfg(feature = "dist")]
use kf_dist::{DistError, DistEvaluator};
use kf_eval::task::Sizes;
use kf_eval::WorkerCommand;
use kf_eval::{EvalError, IsolatedEvaluator};
use kf_mutate::CellPredictor;
use std::sync::Arc;
#[cfg(feature = "dist")]
use std::time::Duration;

use super::TunedEvaluator;

/// The distributed side of [`SearchEvaluator`]: tuned evaluation on distributed workers
/// (tuning stays here, one job per configuration).
#[cfg(feature = "dist")]
pub type RemoteEvaluator = TunedEvaluator<DistEvaluator>;

/// The distributed side of [`SearchEvaluator`]: uninhabited in a build without the `dist`
/// feature.
#[cfg(not(feature = "dist"))]
pub type RemoteEvaluator = std::convert::Infallible;

/// Why the distributed side could not evaluate.
#[cfg(feature = "dist")]
pub type RemoteError = DistError;

/// Why the distributed side could not evaluate: nothing, in a build without `dist`.
#[cfg(not(feature = "dist"))]
pub type RemoteError = std::convert::Infallible;

/// Where a search's evaluations run: in worker processes of this machine (`Left`) or on
/// distributed workers (`Right`). This is the shipped evaluator, which
/// [`EvaluatorLayer`](crate::EvaluatorLayer)s wrap.
pub type SearchEvaluator = Either<TunedEvaluator<IsolatedEvaluator>, RemoteEvaluator>;

/// Why an evaluation could not be done (a bad kernel is an `Ok` evaluation, not this): the
/// local evaluator's error (`Left`) or the distributed one's (`Right`).
pub type SearchEvalError = Either<EvalError, RemoteError>;

/// The shipped evaluator's workers, kept after the engine has consumed the evaluator: the
/// local workers re-time the best kernels beside the reference library and are then shut down;
/// a distributed run records its end and shuts its connection down. Only the shipped evaluator
/// has them ([`EvaluatorFactory::workers_after_run`]); one's own evaluator has none, so its
/// run has no final selection.
pub struct WorkersAfterRun(WorkersKind);

/// Which workers a run kept.
enum WorkersKind {
    Local(IsolatedEvaluator),
    #[cfg(feature = "dist")]
    Distributed(DistEvaluator),
}

impl WorkersAfterRun {
    /// The workers of `evaluator`.
    fn of(evaluator: &SearchEvaluator) -> Self {
        WorkersAfterRun(match evaluator {
            Either::Left(local) => WorkersKind::Local(local.inner().clone()),
            #[cfg(feature = "dist")]
            Either::Right(remote) => WorkersKind::Distributed(remote.inner().clone()),
            #[cfg(not(feature = "dist"))]
            Either::Right(never) => match *never {},
        })
    }

    /// Splits the workers after the run: the local evaluator, still running (its caller
    /// re-times the best kernel with it and then shuts it down), or the distributed evaluator,
    /// for the caller to record the run's end and shut it down.
    pub(crate) fn into_parts(self) -> (Option<IsolatedEvaluator>, Option<DistEvaluator>) {
        match self.0 {
            WorkersKind::Local(e) => (Some(e), None),
            #[cfg(feature = "dist")]
            WorkersKind::Distributed(d) => (None, Some(d)),
        }
    }
}

/// The distributed evaluator of a run, or nothing in a build without `dist`.
#[cfg(not(feature = "dist"))]
pub(crate) type DistEvaluator = std::convert::Infallible;

/// What the search tells an [`EvaluatorFactory`] when it makes the run's evaluator.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct EvaluatorInput<'a> {
    /// The search's configuration (task, backend, tuning budget, protocol, workers).
    pub config: &'a crate::SearchConfig,
    /// The task's sizes, the task's defaults filled in.
    pub sizes: &'a kf_eval::task::Sizes,
    /// The run's device evaluations: count each configuration sent to the device into it, and
    /// stop tuning at its limit.
    pub device_evaluations: &'a crate::DeviceEvaluations,
    /// Where the classifier would place a kernel before it is evaluated.
    pub cells: &'a kf_mutate::CellPredictor,
    /// The backend's factory.
    pub backend: &'a dyn kf_eval::DynBackendFactory,
    /// The tuning strategy's factory.
    pub strategy: &'a std::sync::Arc<dyn kf_tune::strategy::StrategyFactory>,
    /// When every evaluation of the run must be over: the start of the run plus its wall
    /// limit (`--time`), final re-timing included; `None` without one. An evaluator that can
    /// stop an evaluation in flight should ([`kf_eval::IsolatedEvaluatorBuilder::deadline`]).
    pub deadline: Option<std::time::Instant>,
}

impl EvaluatorInput<'_> {
    /// The facts of the device the configuration's backend spec selects, from the backend
    /// opened in this process.
    pub fn device(&self) -> Result<kf_core::DeviceFacts, crate::SearchError> {
        Ok(crate::backends::device_facts_with(
            self.backend,
            &self.config.backend,
        )?)
    }
}

/// Makes the evaluator at the bottom of the search's stack (its
/// [layers](crate::EvaluatorLayer) wrap it): the shipped one ([`ShippedEvaluator`]: tuning
/// around isolated or distributed workers), or one's own, replacing it
/// ([`crate::SearchBuilder::evaluator`]). With one's own, the search has no evaluator of its
/// own to re-time kernels with after the run: there is no final selection, and the report's
/// reference comparison has no re-timed kernel beside it.
///
/// # Example
///
/// ```
/// use kf_core::{DeviceFacts, Evaluator};
/// use kf_search::{EvaluatorFactory, EvaluatorInput, SearchError};
///
/// /// One's own evaluator, made when the search starts.
/// struct Mine<E>(E);
///
/// impl<E: Evaluator + 'static> EvaluatorFactory for Mine<E> {
///     type Evaluator = E;
///     fn name(&self) -> String {
///         "mine".into()
///     }
///     fn make(self, input: &EvaluatorInput<'_>) -> Result<(E, DeviceFacts), SearchError> {
///         Ok((self.0, input.device()?))
///     }
/// }
/// ```
pub trait EvaluatorFactory {
    /// The evaluator it makes.
    type Evaluator: kf_core::Evaluator + 'static;

    /// The stable name, recorded in the report.
    fn name(&self) -> String;

    /// The evaluator, and the facts of the device it evaluates on.
    fn make(
        self,
        input: &EvaluatorInput<'_>,
    ) -> Result<(Self::Evaluator, kf_core::DeviceFacts), crate::SearchError>;

    /// The workers that stay up after the run for its end (re-timing the best kernels, the
    /// final selection): the shipped evaluator's; none for one's own (the default).
    fn workers_after_run(evaluator: &Self::Evaluator) -> Option<WorkersAfterRun> {
        let _ = evaluator;
        None
    }
}

/// The shipped evaluator: each new kernel tuned (the search's strategy and budget), evaluated
/// in isolated worker processes of this program, or on distributed workers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShippedEvaluator;

impl EvaluatorFactory for ShippedEvaluator {
    type Evaluator = SearchEvaluator;

    fn name(&self) -> String {
        "shipped".into()
    }

    fn make(
        self,
        input: &EvaluatorInput<'_>,
    ) -> Result<(SearchEvaluator, kf_core::DeviceFacts), crate::SearchError> {
        local_or_distributed(input)
    }

    fn workers_after_run(evaluator: &SearchEvaluator) -> Option<WorkersAfterRun> {
        Some(WorkersAfterRun::of(evaluator))
    }
}

/// The shipped evaluator for `config`: tuning around isolated workers on this machine, or
/// around distributed workers; and the device it evaluates on.
fn local_or_distributed(
    input: &EvaluatorInput<'_>,
) -> Result<(SearchEvaluator, kf_core::DeviceFacts), SearchError> {
    let EvaluatorInput {
        config,
        sizes,
        device_evaluations: count,
        cells,
        backend,
        strategy,
        deadline,
    } = *input;
    #[cfg(feature = "dist")]
    if let Some(d) = &config.distributed {
        let (dist, device) = connect_distributed(config, d, sizes, backend)?;
        // Tuning stays here: each configuration is one job, cached by its own id (so close
        // calls are not measured again: the same configuration is answered from its result),
        // and a step's configurations go out together, over as many workers.
        let tuned = tuned_counting_around(dist, config, sizes, &device, count, cells, strategy)
            .fanning_out(d.fan_out);
        return Ok((Either::Right(tuned), device));
    }
    let worker = match &config.worker {
        Some(w) => w.clone(),
        None => WorkerCommand::current_exe()?,
    };
    if config.characterise {
        // Before the workers start: each reads the cache when it opens its evaluator.
        match crate::backends::characterise_with(backend, &config.backend, false) {
            Ok((c, cached)) => tracing::info!(
                "roofline of {}{}: {:.1} GFLOP/s, {:.1} GB/s sustained",
                c.device,
                if cached {
                    " (cached)"
                } else {
                    " (measured now, cached for later runs)"
                },
                c.peak_gflops,
                c.bandwidth_gbs
            ),
            Err(e) => {
                tracing::warn!("{e}; roofline fractions are against the backend's estimated peaks")
            }
        }
    }
    let mut builder =
        IsolatedEvaluator::builder(config.backend.clone(), config.task.clone(), sizes.clone());
    if let Some(job) = &config.task_file {
        builder = builder.task_file(job.clone());
    }
    // The run's --time bounds the evaluation in flight and the final re-timing as well.
    if let Some(at) = deadline {
        builder = builder.deadline(at);
    }
    let isolated = builder
        .command(worker)
        .config(config.eval.clone())
        .timeout(config.timeout)
        .build();
    let device = isolated.device()?;
    let tuned = tuned_counting_around(isolated, config, sizes, &device, count, cells, strategy)
        .remeasuring_close_calls(CLOSE_CALL_MARGIN);
    Ok((Either::Left(tuned), device))
}

/// Tuning around `inner` as both sides of the shipped evaluator have it: the configuration's
/// tuning budget and strategy, counting the device evaluations and keeping each candidate's
/// predicted cell. What differs between the sides (fanning out, re-measuring close calls) the
/// caller adds.
fn tuned_counting_around<E: kf_core::Evaluator + Clone + 'static>(
    inner: E,
    config: &SearchConfig,
    sizes: &Sizes,
    device: &kf_core::DeviceFacts,
    count: &DeviceEvaluations,
    cells: &CellPredictor,
    strategy: &Arc<dyn kf_tune::strategy::StrategyFactory>,
) -> TunedEvaluator<E> {
    TunedEvaluator::with_strategy_factory(
        inner,
        config.tune_budget,
        Arc::clone(strategy),
        sizes.clone(),
        device.clone(),
    )
    .counting(count.clone())
    .keeping_cell(cells.clone())
}

/// Connects the distributed evaluator and finds the device the workers have: this machine's
/// when it has the same kind, else one a worker registered (waiting up to two minutes for the
/// first worker).
#[cfg(feature = "dist")]
fn connect_distributed(
    config: &SearchConfig,
    d: &Distributed,
    sizes: &Sizes,
    factory: &dyn kf_eval::DynBackendFactory,
) -> Result<(kf_dist::DistEvaluator, kf_core::DeviceFacts), SearchError> {
    use crate::distributed::{device_kind, TaskProfile};
    let backend = factory.name();
    let local = crate::backends::device_facts_with(factory, &config.backend);
    let kind = match (&d.device_kind, &local) {
        (Some(k), _) => k.clone(),
        (None, Ok(facts)) => device_kind(backend, facts),
        (None, Err(e)) => {
            return Err(SearchError::NoLocalDevice {
                backend: config.backend.kind.clone(),
                source: e.clone(),
            })
        }
    };
    let run = match &d.run {
        Some(r) => r.clone(),
        None => default_run_id(config),
    };
    let profile = TaskProfile {
        task: config.task.clone(),
        sizes: sizes.clone(),
        backend: backend.to_owned(),
        eval: config.eval.clone(),
        timeout: config.timeout.into(),
        // The task file, its reference and kernels go with the jobs, hashed and signed.
        task_file: config
            .task_file
            .as_ref()
            .map(crate::distributed::TaskBundle::from_job)
            .transpose()?,
    };
    let profile = serde_json::to_value(&profile).map_err(|source| SearchError::Json {
        what: "the task profile",
        source,
    })?;
    let dist = kf_dist::DistEvaluator::builder(d.dist.clone(), run, kind.clone(), profile)
        .compile_first(d.compile_first)
        .connect()?;
    if let Ok(facts) = local {
        if device_kind(backend, &facts) == kind {
            return Ok((dist, facts));
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = dist.block_on(dist.store().worker_device(&kind))? {
            let facts = serde_json::from_value(v).map_err(|source| SearchError::Json {
                what: "a worker registered bad device facts",
                source,
            })?;
            return Ok((dist, facts));
        }
        if std::time::Instant::now() > deadline {
            return Err(SearchError::NoWorker(kind));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A run id from the task, the output folder and the seed: the same command resumes the same
/// run (and finds its results on the queue).
#[cfg(feature = "dist")]
pub fn default_run_id(config: &SearchConfig) -> String {
    let out = std::fs::canonicalize(&config.out).unwrap_or_else(|_| config.out.clone());
    let key = format!("{}\n{}\n{}", config.task, out.display(), config.seed);
    let hash = blake3::hash(key.as_bytes()).to_hex();
    format!("{}-{}", kf_dist::subject_token(&config.task), &hash[..16])
}
