//! [`SearchRun`]: a started shipped search, driven step by step or to its end.

use std::sync::Arc;

use kf_core::{
    Ask, BehaviorClassifier, BoxError, Evaluation, Evaluator, Proposal, StepId, Stepper,
};

use crate::archive::{ArchiveFactory, WithFacts};
use crate::evaluator::EvaluatorFactory;
use crate::layer::EvaluatorLayer;
use crate::report::LogObserver;
use crate::report::ProgressObserver;
use crate::report::Report;
use crate::{
    cell_predictor, defaults, evaluator, novelty, task, ArchiveInput, DeviceEvaluationCounter,
    DeviceEvaluations, EvaluatorInput, FinishedRun, PartNames, PostRun, Retime, Search,
    SearchConfig, SearchEvaluator, SourceNovelty, BASELINE_NOTE,
};
use crate::{SearchError, SearchOutcome};
use kf_archive::RunDir;
use kf_archive::RunDirOptions;
use kf_archive::RunMeta;
use kf_core::{
    Archive, Budget, Candidate, Engine, EvaluationReport, Mutator, Observe, ObserverMode,
    StopHandle,
};
use kf_eval::tasks::sizes_text;
use kf_eval::tasks::Sizes;
use kf_eval::IsolatedEvaluator;
use kf_report::post_run;
use serde::Serialize;
use std::sync::Mutex;

/// The engine's [`Stepper`] inside a [`SearchRun`]: the search's layered evaluator, its
/// classifier (with the shipped continuous descriptors where the archive asks for them) and
/// its archive.
pub type SearchStepper<C, L, A, B> = Stepper<
    <L as EvaluatorLayer<<B as EvaluatorFactory>::Evaluator>>::Evaluator,
    WithFacts<Arc<C>>,
    <A as ArchiveFactory>::Archive,
>;

/// A shipped search, started ([`Search::start`](crate::Search::start)) and driven by its
/// caller: [`ask`](SearchRun::ask) for the next step's children,
/// [`evaluate`](SearchRun::evaluate) them with the search's evaluator (or one's own),
/// [`tell`](SearchRun::tell) their evaluations; or [`step`](SearchRun::step) for all three.
/// Every told step is recorded in the run directory, so dropping the run after any step stops
/// it, and the same search built again over the same output folder replays the recorded steps
/// and goes on. [`run`](SearchRun::run) runs the rest as [`Search::run`](crate::Search::run)
/// does; [`finish`](SearchRun::finish) ends the run where it is. Both end it as `Search::run`
/// does: final selection, reference measurement, `report.json`, the pictures and the explorer.
///
/// # Example
///
/// ```no_run
/// use kf_core::Ask;
/// use kf_search::Search;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// kf_search::init();
/// let out = std::env::temp_dir().join("kf-search-steps");
/// let search = || {
///     Search::builder()
///         .task("softmax")
///         .evaluations(12)
///         .seed(3)
///         .progress(false)
///         .out(&out)
///         .build()
/// };
/// // Five steps, one at a time, then stop (dropping the run keeps what was told).
/// let mut run = search()?.start()?;
/// for _ in 0..5 {
///     let Ask::Evaluate(proposal) = run.ask()? else { break };
///     let evaluations = run.evaluate(&proposal);
///     run.tell(proposal.id(), evaluations)?;
/// }
/// drop(run);
/// // The same search over the same folder replays those steps and runs to the end.
/// let outcome = search()?.start()?.run()?;
/// assert_eq!(outcome.summary.replayed_steps, 5);
/// # Ok(())
/// # }
/// ```
pub struct SearchRun<C, L, A, B>
where
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    stepper: SearchStepper<C, L, A, B>,
    after: AfterRun,
}

impl<C, L, A, B> SearchRun<C, L, A, B>
where
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    pub(crate) fn new(stepper: SearchStepper<C, L, A, B>, after: AfterRun) -> Self {
        SearchRun { stepper, after }
    }

    /// The next step's children ([`Stepper::ask`], on this thread); recorded steps of a
    /// resumed run are replayed on the way.
    pub fn ask(&mut self) -> Result<Ask, SearchError> {
        Ok(self.stepper.ask_blocking()?)
    }

    /// The evaluations of a proposal's children by the search's evaluator (tuned, in the
    /// isolated workers or the cluster, through the layers), one per child in order.
    pub fn evaluate(&self, proposal: &Proposal) -> Vec<Result<Evaluation, BoxError>> {
        let evaluator = self.stepper.evaluator();
        futures::executor::block_on(evaluator.evaluate_batch(proposal.candidates()))
            .into_iter()
            .map(|r| r.map_err(|e| Box::new(e) as BoxError))
            .collect()
    }

    /// The evaluations of an asked step's children ([`Stepper::tell`]): inserted, recorded in
    /// the run directory, reported to the observers.
    pub fn tell<Err: Into<BoxError>>(
        &mut self,
        id: StepId,
        evaluations: Vec<Result<Evaluation, Err>>,
    ) -> Result<(), SearchError> {
        Ok(self.stepper.tell(id, evaluations)?)
    }

    /// One whole step with the search's evaluator ([`Stepper::step`]): the number of the step
    /// told, or `None` when none can be asked (the run is over when
    /// [`Stepper::stop_reason`] says so).
    pub fn step(&mut self) -> Result<Option<u64>, SearchError> {
        Ok(self.stepper.step_blocking()?)
    }

    /// The engine's stepper, for what the methods above leave out (its `async` `ask` and
    /// `step`, the archive so far, counts, the stop handle).
    pub fn stepper(&self) -> &SearchStepper<C, L, A, B> {
        &self.stepper
    }

    /// The engine's stepper, to drive it with its `async` methods.
    pub fn stepper_mut(&mut self) -> &mut SearchStepper<C, L, A, B> {
        &mut self.stepper
    }

    /// Runs the rest of the search ([`Stepper::run`], up to the configured steps in flight)
    /// and ends it as [`Search::run`](crate::Search::run) does. Refuses to start while asked
    /// steps wait for their evaluations.
    pub fn run(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        let result = self.stepper.run_blocking();
        conclude(self.after, result)
    }

    /// Ends the search where it is ([`Stepper::finish`]: steps asked and not told are dropped),
    /// with the report of what was found, as [`Search::run`](crate::Search::run) ends it.
    pub fn finish(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        let result = self.stepper.finish();
        conclude(self.after, result)
    }
}

impl<M, C, L, A, B> Search<M, C, L, A, B>
where
    M: Mutator + 'static,
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    /// The configuration the search runs with.
    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    /// The seeds the search starts from.
    pub fn seeds(&self) -> &[Candidate] {
        &self.seeds
    }

    /// Runs the search (call [`crate::init`] first in `main`; [`crate::init_with`] with a
    /// backend of one's own).
    pub fn run(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        self.start()?.run()
    }

    /// [`run`](Self::run), named for what it is: it blocks until the search is over.
    pub fn run_blocking(self) -> Result<SearchOutcome<A::Archive>, SearchError> {
        self.start()?.run()
    }

    /// Starts the search and hands it over to be driven step by step ([`SearchRun`]): the
    /// evaluator (and its workers), the run directory (resumed when it holds steps), the archive
    /// and the observers are set up as [`run`](Self::run) sets them up; `run` is `start` and
    /// then [`SearchRun::run`]. Call [`crate::init`] first in `main`.
    pub fn start(self) -> Result<SearchRun<C, L, A, B>, SearchError> {
        start_built(self)
    }
}

/// Starts a built search: everything the run needs up to its first step.
fn start_built<M, C, L, A, B>(
    search: Search<M, C, L, A, B>,
) -> Result<SearchRun<C, L, A, B>, SearchError>
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
        post_run: post_run_hooks,
    } = search;
    let config = &config;
    let sizes = task.sizes();
    let work = task.describe().work;
    let device_count = DeviceEvaluations::with_limit(config.device_evaluations);
    let cells = cell_predictor(&classifier);
    let (evaluator, device) = evaluator_factory.make(&EvaluatorInput {
        config,
        sizes: &sizes,
        device_evaluations: &device_count,
        cells: &cells,
        backend: backend.as_ref(),
        strategy: &strategy,
    })?;
    let space = classifier.space().clone();
    // The shipped continuous descriptors when the archive asks for them (a CVT search whose
    // classifier gives none of its own); registers where the backend reports them.
    let registers = backend.reports_registers();
    let classifier = WithFacts::new(
        classifier,
        archive_factory.continuous_descriptors(),
        registers,
    );
    let mut budget = Budget::evaluations(config.evaluations);
    if let Some(w) = config.wall {
        budget = budget.with_wall(w);
    }
    // What may not change when the run is resumed or extended; the budget may.
    let mut run_config = serde_json::json!({
        "task": config.task, "sizes": sizes, "backend": config.backend,
        "device": device.name,
        "tune_budget": config.tune_budget, "tune_strategy": strategy.name(),
        "mutator": proposer.name(),
    });
    let archive_meta = archive_factory.record();
    if let (false, Some(map)) = (archive_meta.is_null(), run_config.as_object_mut()) {
        map.insert("archive".into(), archive_meta);
    }
    let run_dir = open_run_dir(config, &run_config)?;
    let archive = archive_factory.build(&ArchiveInput {
        space: &space,
        run_dir: run_dir.path(),
        registers,
    })?;
    let extended_from = extended_from(&run_dir, config)?;
    let mut progress = ProgressObserver::new(&space).with_budget(&budget);
    if !config.progress {
        progress = progress.without_bar();
    }
    let trace = progress.trace();
    let baseline = BaselineWatch::default();
    // The shipped evaluator's workers re-time the best kernels after the run; one's own
    // evaluator has none.
    let evaluator_handle = (&evaluator as &dyn std::any::Any)
        .downcast_ref::<SearchEvaluator>()
        .map(evaluator::handle);
    let evaluator = layer.layer(evaluator);
    // The device-evaluation budget stops the run through the same handle as Ctrl-C.
    let stop = stop.unwrap_or_default();
    let mut engine = Engine::new(proposer, evaluator, classifier, archive)
        .task(task.describe())
        .device(device.clone())
        .seeds(seeds)
        .seed(config.seed)
        .budget(budget)
        .max_in_flight(config.in_flight.max(1))
        .checkpoint(run_dir)
        .novelty(SourceNovelty, novelty::shipped_config())
        .add_observer(progress, ObserverMode::Always)
        .add_observer(LogObserver::new(&space), ObserverMode::Always)
        .add_observer(baseline.clone(), ObserverMode::Always);
    for (observer, mode) in observers {
        engine = engine.add_observer(observer, mode);
    }
    let engine = engine
        .add_observer(
            DeviceEvaluationCounter::new(device_count.clone(), stop.clone()),
            ObserverMode::Always,
        )
        .stop_on(stop);
    // Emitter statistics for the report; none for a single mutator (`--scheduler mix`).
    let scheduler = Some(engine.scheduler()).filter(|s| !s.is_single());
    let after = AfterRun {
        config: config.clone(),
        sizes,
        work,
        device_count,
        space,
        trace,
        baseline,
        evaluator_handle,
        scheduler,
        extended_from,
        device,
        parts,
        post_run: post_run_hooks,
    };
    Ok(SearchRun::new(engine.start()?, after))
}

/// The output folder (with a task file's copy beside the run, so that it exports on its own)
/// and its run directory, opened for `run_config` (what may not change when the run is resumed
/// or extended) and the configuration's budget.
fn open_run_dir(
    config: &SearchConfig,
    run_config: &serde_json::Value,
) -> Result<RunDir, SearchError> {
    std::fs::create_dir_all(&config.out).map_err(kf_eval::EvalError::Io)?;
    if let Some(job) = &config.task_file {
        task::record_task_file(job, &config.out).map_err(kf_eval::EvalError::Io)?;
    }
    let meta = RunMeta::new(config.seed, run_config)?.with_budget(&run_budget(config))?;
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

/// What the end of a search needs from its start: the report, final selection, reference
/// measurement and explorer are made from it and the engine's result.
pub(crate) struct AfterRun {
    config: SearchConfig,
    sizes: Sizes,
    work: kf_core::Work,
    device_count: DeviceEvaluations,
    space: kf_core::DescriptorSpace,
    trace: crate::report::ProgressTrace,
    baseline: BaselineWatch,
    evaluator_handle: Option<evaluator::EvaluatorHandle>,
    scheduler: Option<Arc<kf_core::emitter::Scheduler>>,
    extended_from: Option<u64>,
    device: kf_core::DeviceFacts,
    parts: PartNames,
    /// The builder's post-run hooks, run after the shipped ones.
    post_run: Vec<Box<dyn PostRun>>,
}

/// Ends a search whose engine gave `result`: shuts the evaluator down, stores the distributed
/// snapshot, does the final selection and the reference measurement, writes the report and the
/// explorer.
pub(crate) fn conclude<Ar: Archive + Serialize>(
    after: AfterRun,
    result: Result<kf_core::RunResult<Ar>, kf_core::CoreError>,
) -> Result<SearchOutcome<Ar>, SearchError> {
    let AfterRun {
        config,
        sizes,
        work,
        device_count,
        space,
        trace,
        baseline,
        evaluator_handle,
        scheduler,
        extended_from,
        device,
        parts,
        post_run: post_run_hooks,
    } = after;
    let config = &config;
    // The local workers stay up to re-time the best kernel beside the reference library (a
    // fresh worker would prepare its inputs and baseline again); they stop after it.
    let (retimer, evaluator_after) = evaluator_handle.map_or((None, None), |h| h.into_parts());
    let result = result?;
    let archive = result.archive;
    #[cfg(feature = "dist")]
    if let Some(dist) = &evaluator_after {
        // The final archive joins the run's record in the database.
        let snapshot = serde_json::to_value(&archive).map_err(|source| SearchError::Json {
            what: "the archive snapshot",
            source,
        })?;
        let evaluations = result.summary.evaluations;
        dist.block_on(
            dist.store()
                .store_snapshot(dist.run(), evaluations, &snapshot),
        )?;
        dist.clone().shutdown();
    }
    #[cfg(not(feature = "dist"))]
    let _ = evaluator_after;
    let summary = result.summary;
    let elites = Archive::elites(&archive);
    let baseline_gflops = baseline.gflops();
    let report = Report::new(&space, &summary, elites.iter().copied())
        .device_evaluations(device_count.spent(), device_count.limit())
        // How the local workers were confined; a distributed run records it on each
        // evaluation row.
        .confinement(retimer.as_ref().and_then(IsolatedEvaluator::confinement))
        .baseline_gflops(baseline_gflops)
        .trace(trace.points())
        .title(format!("{} {}", config.task, sizes_text(&sizes)))
        .extra("device", &device.name)
        .extra("seed", config.seed)
        .extra("extended_from_evaluations", extended_from)
        .extra("emitters", scheduler.map(|s| s.stats()))
        .extra("parts", &parts);
    // The presentation is kf-report's post-run hooks: the final selection and the reference
    // comparison (re-timing on the local workers, which stay up for them: a fresh worker would
    // prepare its inputs and baseline again), the report files and the explorer page; then the
    // builder's own hooks.
    let mut finished = FinishedRun {
        task: &config.task,
        task_file: config.task_file.is_some(),
        sizes: &sizes,
        work: &work,
        out: &config.out,
        distributed: config.is_distributed(),
        device: &device,
        space: &space,
        summary: &summary,
        elites: &elites,
        retimer: retimer.as_ref().map(|r| r as &dyn Retime),
        report,
        output: None,
    };
    let mut hooks = post_run::shipped(config.final_rounds, config.reference);
    hooks.extend(post_run_hooks);
    let hooks_ran = finished.run_hooks(&mut hooks);
    if let Some(retimer) = &retimer {
        retimer.shutdown();
    }
    hooks_ran?;
    let report = finished.into_output()?;
    let best_gflops = elites
        .iter()
        .filter(|e| e.evaluation.status.is_correct())
        .filter_map(|e| e.evaluation.gflops)
        .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.max(g))));
    let fittest = elites
        .iter()
        .filter(|e| e.evaluation.status.is_correct())
        .max_by(|a, b| a.fitness.cmp(&b.fitness));
    let best_seconds = fittest.and_then(|e| e.evaluation.timing.map(|t| t.median_s));
    let best_speedup = fittest.and_then(|e| e.evaluation.speedup);
    Ok(SearchOutcome {
        archive,
        summary,
        report,
        baseline_gflops,
        best_gflops,
        best_seconds,
        best_speedup,
        device_evaluations: device_count.spent(),
        extended_from,
    })
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

/// Remembers the throughput of the task baseline seed as this run measured it (its cell may
/// later be taken by a faster kernel).
#[derive(Clone, Default)]
struct BaselineWatch(Arc<Mutex<Option<f64>>>);

impl BaselineWatch {
    fn gflops(&self) -> Option<f64> {
        self.0.lock().ok().and_then(|g| *g)
    }
}

impl Observe for BaselineWatch {
    fn observe_evaluation(&mut self, r: &EvaluationReport<'_>) -> Result<(), BoxError> {
        if r.candidate.origin.mutator == "seed" && r.candidate.origin.note.contains(BASELINE_NOTE) {
            if let (Some(e), Ok(mut slot)) = (r.evaluation, self.0.lock()) {
                if slot.is_none() {
                    *slot = e.gflops;
                }
            }
        }
        Ok(())
    }
}

/// Runs the shipped search with `mutator` from `seeds` (the first seed should be the task
/// baseline: its throughput is the report's baseline): [`Search::builder`] with `config`,
/// `mutator` and `seeds`, and every other part the default. Call [`crate::init`] first in
/// `main`.
pub fn run_search<M: Mutator + 'static>(
    config: &SearchConfig,
    mutator: M,
    seeds: Vec<Candidate>,
    stop: Option<StopHandle>,
) -> Result<SearchOutcome, SearchError> {
    let mut builder = Search::builder()
        .config(config.clone())
        .mutator(mutator)
        .seeds(seeds);
    if let Some(stop) = stop {
        builder = builder.stop_on(stop);
    }
    builder.build()?.run()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use kf_core::{Archive, Candidate, Evaluation, TimingStats};

    use super::*;
    use crate::{Search, SearchError};

    /// Judges every kernel correct, faster the shorter its source and the larger its first
    /// parameter: deterministic, so that a resumed run can be compared with an uninterrupted one.
    #[derive(Clone, Default)]
    struct Deterministic(Arc<AtomicU64>);

    #[kf_core::async_trait]
    impl Evaluator for Deterministic {
        type Error = std::convert::Infallible;
        async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
            self.0.fetch_add(1, Ordering::Relaxed);
            let first = c.params.iter().next().and_then(|(_, v)| v.as_i64());
            let seconds = c.source.text.len() as f64 * 1e-6 / first.unwrap_or(1).max(1) as f64;
            let timing = TimingStats::from_samples(&[seconds]).expect("one sample");
            let mut e = Evaluation::correct(timing, None);
            e.gflops = Some(1.0 / seconds);
            e.params = c.params.clone();
            Ok(e)
        }
    }

    impl EvaluatorFactory for Deterministic {
        type Evaluator = Deterministic;
        fn name(&self) -> String {
            "deterministic".into()
        }
        fn make(
            self,
            input: &crate::EvaluatorInput<'_>,
        ) -> Result<(Deterministic, kf_core::DeviceFacts), SearchError> {
            Ok((self, input.device()?))
        }
    }

    /// The elites' ids and fitness, in the archive's order.
    fn elites(archive: &impl Archive) -> Vec<(String, Option<f64>)> {
        archive
            .elites()
            .iter()
            .map(|e| (e.candidate.id.to_string(), e.evaluation.gflops))
            .collect()
    }

    #[test]
    fn stopped_after_three_steps_and_resumed_it_ends_as_an_uninterrupted_run() {
        if !crate::doctest_backend_available() {
            return;
        }
        let search = |out: &std::path::Path, evaluator: Deterministic| {
            Search::builder()
                .task("softmax")
                .size("ROWS=8,COLS=32")
                .expect("sizes")
                .evaluator(evaluator)
                .evaluations(8)
                .seed(46)
                .reference(false)
                .out(out)
                .progress(false)
                .build()
                .expect("builds")
        };
        let whole = tempfile::tempdir().expect("a temporary folder");
        let uninterrupted = search(whole.path(), Deterministic::default())
            .run()
            .expect("runs");

        let out = tempfile::tempdir().expect("a temporary folder");
        let first = Deterministic::default();
        let mut run = search(out.path(), first.clone()).start().expect("starts");
        for _ in 0..3 {
            let Ask::Evaluate(proposal) = run.ask().expect("asks") else {
                panic!("the run ended early");
            };
            let evaluations = run.evaluate(&proposal);
            run.tell(proposal.id(), evaluations).expect("told");
        }
        assert_eq!(run.stepper().steps(), 3);
        let told = run.stepper().evaluations();
        assert_eq!(first.0.load(Ordering::Relaxed), told);
        drop(run);

        let second = Deterministic::default();
        let mut run = search(out.path(), second.clone()).start().expect("resumes");
        assert!(run.step().expect("a step").is_some());
        let resumed = run.run().expect("runs to the end");
        assert_eq!(resumed.summary.replayed_steps, 3);
        assert_eq!(resumed.summary.evaluations, 8);
        assert_eq!(
            second.0.load(Ordering::Relaxed),
            8 - told,
            "replayed, not evaluated"
        );
        assert_eq!(elites(&resumed.archive), elites(&uninterrupted.archive));
        assert!(out.path().join("report.json").exists());
    }

    #[test]
    fn finish_ends_the_run_where_it_is_with_a_report() {
        if !crate::doctest_backend_available() {
            return;
        }
        let out = tempfile::tempdir().expect("a temporary folder");
        let mut run = Search::builder()
            .task("softmax")
            .size("ROWS=8,COLS=32")
            .expect("sizes")
            .evaluator(Deterministic::default())
            .evaluations(8)
            .reference(false)
            .out(out.path())
            .progress(false)
            .build()
            .expect("builds")
            .start()
            .expect("starts");
        assert_eq!(run.step().expect("a step"), Some(0));
        let outcome = run.finish().expect("finishes");
        assert_eq!(outcome.summary.steps, 1);
        assert_eq!(outcome.summary.stop_reason, kf_core::StopReason::Stopped);
        assert!(out.path().join("report.json").exists());
    }
}
