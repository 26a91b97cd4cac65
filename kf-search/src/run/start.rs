//! The start of a shipped run: the evaluator made once, the run directory opened (resumed when
//! it holds steps), the archive built over it, the engine assembled with its observers, and
//! the [`RunContext`] its end needs.

use kf_archive::{RunDir, RunDirOptions, RunMeta};
use kf_core::{
    Archive, BehaviorClassifier, Budget, DescriptorSpace, DeviceFacts, Engine, Evaluator, Mutator,
    ObserverMode, Stepper,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::end::{BaselineWatch, RunContext};
use crate::archive::{ArchiveFactory, WithFacts};
use crate::builder::BoxedObserver;
use crate::evaluator::EvaluatorFactory;
use crate::layer::EvaluatorLayer;
use crate::report::{LogObserver, ProgressObserver};
use crate::{
    cell_predictor, defaults, novelty, task, ArchiveInput, DeviceEvaluationCounter,
    DeviceEvaluations, EvaluatorInput, Search, SearchConfig, SearchError, SourceNovelty,
};

/// The engine's [`Stepper`] inside a [`SearchRun`](super::SearchRun): the search's layered
/// evaluator, its
/// classifier (with the shipped continuous descriptors where the archive asks for them) and
/// its archive.
pub type SearchStepper<C, L, A, B> = Stepper<
    <L as EvaluatorLayer<<B as EvaluatorFactory>::Evaluator>>::Evaluator,
    WithFacts<Arc<C>>,
    <A as ArchiveFactory>::Archive,
>;

/// A started run: the engine's stepper and what the end of the run needs.
pub(super) struct Started<C, L, A, B>
where
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    pub(super) stepper: SearchStepper<C, L, A, B>,
    pub(super) context: RunContext,
}

/// Starts a built search: everything the run needs up to its first step, each value made once
/// and passed on; the engine's stepper and what the end of the run needs.
pub(super) fn start<M, C, L, A, B>(
    search: Search<M, C, L, A, B>,
) -> Result<Started<C, L, A, B>, SearchError>
where
    M: Mutator + 'static,
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    let parts = search.part_names();
    let Search {
        config,
        task,
        seeds,
        proposer,
        mutator_type: _,
        classifier,
        archive: archive_factory,
        backend,
        strategy,
        evaluator: evaluator_factory,
        layer,
        stop,
        observers,
        post_run,
    } = search;
    // The run's --time counts from here: evaluations stop at the deadline ([`budget`]).
    let deadline = config.wall.map(|wall| Instant::now() + wall);
    let sizes = task.sizes();
    let device_count = DeviceEvaluations::with_limit(config.device_evaluations);
    let cells = cell_predictor(&classifier);
    let (evaluator, device) = evaluator_factory.make(&EvaluatorInput {
        config: &config,
        sizes: &sizes,
        device_evaluations: &device_count,
        cells: &cells,
        backend: backend.as_ref(),
        strategy: &strategy,
        deadline,
    })?;
    // The shipped evaluator's workers re-time the best kernels after the run.
    let workers = B::workers_after_run(&evaluator);
    let space = classifier.space().clone();
    let registers = backend.reports_registers();
    let classifier = with_shipped_facts(classifier, &archive_factory, registers);
    let identity = RunIdentity {
        config: &config,
        sizes: &sizes,
        device: &device,
        tune_strategy: strategy.name(),
        mutator: proposer.name(),
        archive: archive_factory.record(),
    };
    let run_dir = open_run_dir(&config, &identity.to_json())?;
    let archive = archive_factory.build(&ArchiveInput {
        space: &space,
        run_dir: run_dir.path(),
        registers,
    })?;
    let extended_from = extended_from(&run_dir, &config)?;
    let budget = budget(&config, deadline);
    let watch = Watchers::new(&space, &config, &budget, device_count.clone());
    let (trace, baseline) = (watch.trace.clone(), watch.baseline.clone());
    let engine = Engine::new(proposer, layer.layer(evaluator), classifier, archive)
        .task(task.describe())
        .device(device.clone())
        .seeds(seeds)
        .seed(config.seed)
        .budget(budget)
        .max_in_flight(config.in_flight.max(1))
        .checkpoint(run_dir)
        .novelty(SourceNovelty, novelty::shipped_config());
    let mut engine = watch.attach(engine, observers);
    // The caller's stop (a Ctrl-C handler); every limit of the run is in its budget.
    if let Some(stop) = stop {
        engine = engine.stop_on(stop);
    }
    // Emitter statistics for the report; none for a single mutator (`--scheduler mix`).
    let scheduler = Some(engine.scheduler()).filter(|s| !s.is_single());
    let context = RunContext {
        work: task.describe().work,
        config,
        sizes,
        device,
        space,
        parts,
        device_count,
        trace,
        baseline,
        workers,
        scheduler,
        extended_from,
        post_run,
    };
    Ok(Started {
        stepper: engine.start()?,
        context,
    })
}

/// `classifier` with the shipped continuous descriptors when the archive asks for them (a CVT
/// search whose classifier gives none of its own), and the register feature where the backend
/// reports registers.
fn with_shipped_facts<K: BehaviorClassifier>(
    classifier: K,
    archive_factory: &impl ArchiveFactory,
    registers: bool,
) -> WithFacts<K> {
    WithFacts::new(
        classifier,
        archive_factory.continuous_descriptors(),
        registers,
    )
}

/// The run's limits: evaluations, wall-clock time and device evaluations, all stopping the run
/// through the engine's budget. The search's wall-clock share ends [`defaults::FINAL_SELECTION_SHARE`]
/// of `--time` before `deadline` when the best kernels are re-timed after it, so that the
/// re-timing fits in the same limit.
fn budget(config: &SearchConfig, deadline: Option<Instant>) -> Budget {
    let mut budget = Budget::evaluations(config.evaluations);
    if let (Some(wall), Some(deadline)) = (config.wall, deadline) {
        let reserve = if config.final_rounds > 0 {
            wall.mul_f64(defaults::FINAL_SELECTION_SHARE)
        } else {
            Duration::ZERO
        };
        let left = deadline.saturating_duration_since(Instant::now());
        budget = budget.with_wall(left.saturating_sub(reserve));
    }
    if let Some(limit) = config.device_evaluations {
        budget = budget.with_device_evaluations(limit);
    }
    budget
}

/// What may not change when a run is resumed or extended (the budget may): recorded in the
/// run directory and checked against it.
struct RunIdentity<'a> {
    config: &'a SearchConfig,
    sizes: &'a kf_eval::task::Sizes,
    device: &'a DeviceFacts,
    tune_strategy: String,
    mutator: String,
    /// The archive's own record (its kind and settings); `null` for one that records nothing.
    archive: serde_json::Value,
}

impl RunIdentity<'_> {
    fn to_json(&self) -> serde_json::Value {
        let config = self.config;
        let mut identity = serde_json::json!({
            "task": config.task, "sizes": self.sizes, "backend": config.backend,
            "device": self.device.name,
            "tune_budget": config.tune_budget, "tune_strategy": self.tune_strategy,
            "mutator": self.mutator,
        });
        if let (false, Some(map)) = (self.archive.is_null(), identity.as_object_mut()) {
            map.insert("archive".into(), self.archive.clone());
        }
        identity
    }
}

/// The shipped observers of a run, beside the builder's own: progress (bar and trace), the
/// log, the baseline's throughput, and the device-evaluation count.
struct Watchers {
    progress: ProgressObserver,
    log: LogObserver,
    trace: crate::report::ProgressTrace,
    baseline: BaselineWatch,
    device_count: DeviceEvaluations,
}

impl Watchers {
    fn new(
        space: &DescriptorSpace,
        config: &SearchConfig,
        budget: &Budget,
        device_count: DeviceEvaluations,
    ) -> Self {
        let mut progress = ProgressObserver::new(space).with_budget(budget);
        if !config.progress {
            progress = progress.without_bar();
        }
        Watchers {
            trace: progress.trace(),
            progress,
            log: LogObserver::new(space),
            baseline: BaselineWatch::default(),
            device_count,
        }
    }

    /// Adds the shipped observers around the builder's `own`, in the order they report.
    fn attach<E, Cl, Ar>(
        self,
        engine: Engine<E, Cl, Ar>,
        own: Vec<(BoxedObserver, ObserverMode)>,
    ) -> Engine<E, Cl, Ar>
    where
        E: Evaluator,
        Cl: BehaviorClassifier,
        Ar: Archive,
    {
        let mut engine = engine
            .add_observer(self.progress, ObserverMode::Always)
            .add_observer(self.log, ObserverMode::Always)
            .add_observer(self.baseline, ObserverMode::Always);
        for (observer, mode) in own {
            engine = engine.add_observer(observer, mode);
        }
        engine.add_observer(
            DeviceEvaluationCounter::new(self.device_count),
            ObserverMode::Always,
        )
    }
}

/// The output folder (with a task file's copy beside the run, so that it exports on its own)
/// and its run directory, opened for `identity` (what may not change when the run is resumed
/// or extended) and the configuration's budget.
fn open_run_dir(
    config: &SearchConfig,
    identity: &serde_json::Value,
) -> Result<RunDir, SearchError> {
    std::fs::create_dir_all(&config.out).map_err(kf_eval::EvalError::Io)?;
    if let Some(job) = &config.task_file {
        task::record_task_file(job, &config.out).map_err(kf_eval::EvalError::Io)?;
    }
    let meta = RunMeta::new(config.seed, identity)?.with_budget(&run_budget(config))?;
    Ok(RunDir::open_with(
        config.out.join("run"),
        meta,
        RunDirOptions {
            snapshot_every: defaults::SNAPSHOT_EVERY,
            ..RunDirOptions::default()
        },
    )?)
}

/// The evaluation budget the run directory was extended from, if it was; an error when it
/// already holds more evaluations than the configuration's budget.
fn extended_from(run_dir: &RunDir, config: &SearchConfig) -> Result<Option<u64>, SearchError> {
    let recorded: u64 = run_dir
        .read_records()?
        .iter()
        .map(|r| r.children.len() as u64)
        .sum();
    if recorded > config.evaluations {
        return Err(SearchError::RunDirAhead {
            path: run_dir.path().to_path_buf(),
            recorded,
        });
    }
    Ok(run_dir
        .extended_from()
        .and_then(|b| b.get("evaluations"))
        .and_then(serde_json::Value::as_u64))
}

/// The run directory's record of the budget (which may change when a run is extended); the
/// device-evaluation limit only when there is one, so that run directories from before it
/// existed resume unchanged.
fn run_budget(config: &SearchConfig) -> serde_json::Value {
    let mut budget = serde_json::json!({
        "evaluations": config.evaluations,
        "wall_seconds": config.wall.map(|w| w.as_secs_f64()),
    });
    if let (Some(limit), Some(map)) = (config.device_evaluations, budget.as_object_mut()) {
        map.insert("device_evaluations".into(), limit.into());
    }
    budget
}
