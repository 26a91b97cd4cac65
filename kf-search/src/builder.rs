//! [`Search::builder`]: the shipped search with any of its parts replaced.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kf_archive::{CvtConfig, FeatureSpace, GridConfig, IslandConfig, MAX_ISLANDS};
use kf_core::emitter::Scheduler;
use kf_core::{
    BehaviorClassifier, BoxError, BoxMutator, Candidate, EvaluationReport, Evaluator, Language,
    Mutator, Observe, ObserverMode, RunInfo, RunSummary, StopHandle,
};
use kf_eval::tasks::{builtin_task, KernelTask, Sizes};
use kf_eval::WorkerCommand;
use kf_mutate::{CellPredictor, MixMutator};

use crate::{
    backends, defaults, offline_search, ArchiveKind, BackendKind, DefaultClassifier,
    OfflineMutators, SchedulerKind, SearchConfig, SearchError, SearchEvaluator,
};

/// A layer around the search's evaluator (tower style): it receives the shipped evaluator
/// (tuning, then isolated or distributed evaluation) and returns the one the engine uses.
/// Closures `FnOnce(SearchEvaluator) -> E` are layers; [`NoLayer`] is the default.
pub trait EvaluatorLayer {
    /// The evaluator the engine gets.
    type Evaluator: Evaluator + 'static;

    /// Wraps `inner`.
    fn layer(self, inner: SearchEvaluator) -> Self::Evaluator;
}

/// The shipped evaluator, unwrapped.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLayer;

impl EvaluatorLayer for NoLayer {
    type Evaluator = SearchEvaluator;

    fn layer(self, inner: SearchEvaluator) -> SearchEvaluator {
        inner
    }
}

impl<F, E> EvaluatorLayer for F
where
    F: FnOnce(SearchEvaluator) -> E,
    E: Evaluator + 'static,
{
    type Evaluator = E;

    fn layer(self, inner: SearchEvaluator) -> E {
        self(inner)
    }
}

/// What the builder knows when it makes the mutator and the seeds, once the task is known.
struct FactoryInput<'a> {
    task: &'a dyn KernelTask,
    language: Language,
    /// The seeds given ([`SearchBuilder::seeds`]), replacing the offline search's.
    seeds: Option<Vec<Candidate>>,
    /// Seeds added after either ([`SearchBuilder::extra_seeds`]).
    extra_seeds: Vec<Candidate>,
    cells: &'a CellPredictor,
    scheduler: SchedulerKind,
    /// Mutators added beside the offline ones ([`SearchBuilder::also_mutator`]).
    extra_mutators: Vec<(BoxMutator, f64)>,
}

/// How the builder finds the proposer (a single mutator is a scheduler of one) and the seeds
/// (those given, else its own).
type MutatorFactory =
    Box<dyn FnOnce(FactoryInput<'_>) -> Result<(Vec<Candidate>, Scheduler), SearchError>>;

/// The shipped search, open: see [`Search::builder`].
pub struct Search<M, C, L> {
    pub(crate) config: SearchConfig,
    pub(crate) task: Box<dyn KernelTask>,
    pub(crate) seeds: Vec<Candidate>,
    pub(crate) proposer: Scheduler,
    /// The mutator type the builder was given (the proposer holds it, boxed).
    pub(crate) mutator_type: std::marker::PhantomData<fn() -> M>,
    /// Shared with the cell predictor of the default mutator and of tuning.
    pub(crate) classifier: Arc<C>,
    pub(crate) archive: ArchiveSettings,
    pub(crate) layer: L,
    pub(crate) stop: Option<StopHandle>,
    pub(crate) observers: Vec<(BoxedObserver, ObserverMode)>,
}

/// Builds a [`Search`]; every part not set is the shipped search's ([`defaults`]).
pub struct SearchBuilder<M = MixMutator, C = DefaultClassifier, L = NoLayer> {
    config: SearchConfig,
    out_set: bool,
    mutator: MutatorFactory,
    mutator_type: std::marker::PhantomData<fn() -> M>,
    seeds: Option<Vec<Candidate>>,
    extra_seeds: Vec<Candidate>,
    extra_mutators: Vec<(BoxMutator, f64)>,
    classifier: C,
    archive: ArchiveSettings,
    layer: L,
    stop: Option<StopHandle>,
    observers: Vec<(BoxedObserver, ObserverMode)>,
}

impl Search<MixMutator, DefaultClassifier, NoLayer> {
    /// A builder with the shipped search's settings: the offline mutators and seeds of
    /// [`offline_search`] under a bandit scheduler of emitters ([`defaults::SCHEDULER`]), the
    /// [default classifier](defaults::classifier), the
    /// [default grid](defaults::grid), tuning in the search ([`defaults::TUNE_BUDGET`]
    /// configurations per new kernel), isolated evaluation workers, the [`defaults`] budget.
    /// Name the task with [`SearchBuilder::task`] (or give a config with
    /// [`SearchBuilder::config`]).
    pub fn builder() -> SearchBuilder {
        SearchBuilder {
            config: SearchConfig::new("", Sizes::new()),
            out_set: false,
            mutator: Box::new(|input: FactoryInput<'_>| {
                let mut parts = OfflineMutators::for_task(
                    input.task,
                    input.language,
                    Some(input.cells.clone()),
                )?;
                let mut seeds = input.seeds.unwrap_or(std::mem::take(&mut parts.seeds));
                seeds.extend(input.extra_seeds);
                parts.extra.extend(input.extra_mutators);
                let proposer = match input.scheduler {
                    SchedulerKind::Mix => Scheduler::single(parts.mix()),
                    SchedulerKind::Bandit => parts.emitters(SchedulerKind::policy())?,
                };
                Ok((seeds, proposer))
            }),
            mutator_type: std::marker::PhantomData,
            seeds: None,
            extra_seeds: Vec::new(),
            extra_mutators: Vec::new(),
            classifier: defaults::classifier(),
            archive: ArchiveSettings::default(),
            layer: NoLayer,
            stop: None,
            observers: Vec::new(),
        }
    }
}

impl<M, C, L> SearchBuilder<M, C, L>
where
    M: Mutator + 'static,
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer,
{
    /// The built-in task to search (`gemm`, `softmax`); the output folder becomes
    /// `runs/<task>` unless [`out`](Self::out) is set.
    pub fn task(mut self, name: impl Into<String>) -> Self {
        self.config.task = name.into();
        if !self.out_set {
            self.config.out = PathBuf::from("runs").join(&self.config.task);
        }
        self
    }

    /// A task file to search on instead of a built-in task, under the task's `name`.
    pub fn task_file(mut self, name: impl Into<String>, job: kf_eval::TaskFileJob) -> Self {
        self = self.task(name);
        self.config.task_file = Some(job);
        self
    }

    /// Problem sizes (missing ones take the task's defaults).
    pub fn sizes(mut self, sizes: Sizes) -> Self {
        self.config.sizes = sizes;
        self
    }

    /// Problem sizes as text, such as `ROWS=64,COLS=256`.
    pub fn size(self, text: &str) -> Result<Self, SearchError> {
        let sizes = kf_eval::tasks::parse_sizes(text)?;
        Ok(self.sizes(sizes))
    }

    /// The whole configuration at once (as `SearchArgs::config` makes it), replacing what
    /// was set before.
    pub fn config(mut self, config: SearchConfig) -> Self {
        self.config = config;
        self.out_set = true;
        self
    }

    /// The backend and device (`None`: the backend's default device).
    pub fn backend(mut self, kind: BackendKind, device: Option<String>) -> Self {
        self.config.backend = kind.spec(device);
        self
    }

    /// Candidates evaluated at most, seeds included (default [`defaults::EVALUATIONS`]).
    pub fn evaluations(mut self, n: u64) -> Self {
        self.config.evaluations = n;
        self
    }

    /// Wall-clock limit (default [`defaults::WALL`]); `None`: none.
    pub fn wall(mut self, wall: Option<Duration>) -> Self {
        self.config.wall = wall;
        self
    }

    /// Run seed: the same seed gives the same search (default [`defaults::SEED`]).
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = seed;
        self
    }

    /// Output folder: report, pictures, best kernel, run directory (default `runs/<task>`).
    pub fn out(mut self, out: impl AsRef<Path>) -> Self {
        self.config.out = out.as_ref().to_path_buf();
        self.out_set = true;
        self
    }

    /// Configurations tuned per new kernel, 1 = no tuning (default [`defaults::TUNE_BUDGET`]).
    pub fn tune_budget(mut self, budget: usize) -> Self {
        self.config.tune_budget = budget;
        self
    }

    /// The kf-tune strategy of the per-kernel tuning (default [`defaults::TUNE_STRATEGY`]).
    pub fn tune_strategy(mut self, strategy: impl Into<String>) -> Self {
        self.config.tune_strategy = strategy.into();
        self
    }

    /// At most `n` device evaluations (every configuration compiled and timed, tuning
    /// included); `None`: only the candidate budget and the wall time.
    pub fn device_evaluations(mut self, n: Option<u64>) -> Self {
        self.config.device_evaluations = n;
        self
    }

    /// Whether to measure the reference library after the search (default true; see
    /// [`SearchConfig::reference`]).
    pub fn reference(mut self, measure: bool) -> Self {
        self.config.reference = measure;
        self
    }

    /// Rounds of the final selection among the fastest elites (default
    /// [`crate::defaults::FINAL_ROUNDS`]; 0: the fastest by its search measurement is the best
    /// kernel; see [`SearchConfig::final_rounds`]).
    pub fn final_rounds(mut self, rounds: u32) -> Self {
        self.config.final_rounds = rounds;
        self
    }

    /// Whether to show a progress bar on a terminal (default true).
    pub fn progress(mut self, show: bool) -> Self {
        self.config.progress = show;
        self
    }

    /// How to start evaluation workers (default: re-execute this program, whose `main` calls
    /// [`crate::init`] first).
    pub fn worker(mut self, command: WorkerCommand) -> Self {
        self.config.worker = Some(command);
        self
    }

    /// Stops the search when `stop` is triggered: every completed step is already in the run
    /// directory, and running the same search again resumes. The library installs no signal
    /// handler; a program triggers `stop` from its own (`kf` and the examples: Ctrl-C, with
    /// `ctrlc::set_handler(move || stop.stop())`).
    pub fn stop_on(mut self, stop: StopHandle) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Adds an observer of the engine's events, after the shipped ones (progress, log lines,
    /// the baseline's throughput); `mode` says which evaluations it sees.
    pub fn observer(mut self, observer: impl Observe + 'static, mode: ObserverMode) -> Self {
        self.observers
            .push((BoxedObserver(Box::new(observer)), mode));
        self
    }

    /// The archive's settings (default [`defaults::grid`]); with a CVT archive, its
    /// selection, QD offset and hints.
    pub fn archive(mut self, grid: GridConfig) -> Self {
        self.archive.grid = grid;
        self
    }

    /// The kind of archive (default [`defaults::ARCHIVE`], `--archive`).
    pub fn archive_kind(mut self, kind: ArchiveKind) -> Self {
        self.config.archive = kind;
        self
    }

    /// Archives evolving as islands with migration (default [`defaults::ISLANDS`],
    /// `--islands`); at least 1.
    pub fn islands(mut self, n: usize) -> Self {
        self.config.islands = n;
        self
    }

    /// The CVT archive's centroids (default [`defaults::cvt`]); its `grid` field is replaced
    /// by [`archive`](Self::archive)'s settings.
    pub fn cvt(mut self, cvt: CvtConfig) -> Self {
        self.archive.cvt = cvt;
        self
    }

    /// Migration and reseeding of the islands (default [`defaults::islands`]); the number of
    /// islands is [`islands`](Self::islands)'.
    pub fn island_config(mut self, island: IslandConfig) -> Self {
        self.archive.island = island;
        self
    }

    /// The continuous descriptors a CVT search places kernels by, when the classifier gives
    /// its own [`features`](kf_core::Descriptor::features) (default: the shipped
    /// [`cvt_features`](crate::cvt_features), which the search adds to every descriptor).
    pub fn cvt_features(mut self, features: FeatureSpace) -> Self {
        self.archive.features = Some(features);
        self
    }

    /// The seeds (default: those of [`offline_search`] for the task and backend). The first
    /// should be the task baseline (see [`seeds_for`](crate::seeds_for)): its throughput is the report's
    /// baseline.
    pub fn seeds(mut self, seeds: Vec<Candidate>) -> Self {
        self.seeds = Some(seeds);
        self
    }

    /// The behaviour classifier: which cell of the archive each kernel goes to (default
    /// [`defaults::classifier`]).
    pub fn classifier<C2: BehaviorClassifier + 'static>(
        self,
        classifier: C2,
    ) -> SearchBuilder<M, C2, L> {
        SearchBuilder {
            config: self.config,
            out_set: self.out_set,
            mutator: self.mutator,
            mutator_type: std::marker::PhantomData,
            seeds: self.seeds,
            extra_seeds: self.extra_seeds,
            extra_mutators: self.extra_mutators,
            classifier,
            archive: self.archive,
            layer: self.layer,
            stop: self.stop,
            observers: self.observers,
        }
    }

    /// The mutator, replacing the shipped ones and their scheduler (default: [`offline_search`]'s
    /// for the task and backend under [`SchedulerKind::Bandit`]); the archive selects each
    /// step's parent. The seeds stay the offline search's unless [`seeds`](Self::seeds) are
    /// given (before or after). To add a mutator to the shipped ones instead, use
    /// [`also_mutator`](Self::also_mutator).
    pub fn mutator<M2: Mutator + 'static>(self, mutator: M2) -> SearchBuilder<M2, C, L> {
        SearchBuilder {
            config: self.config,
            out_set: self.out_set,
            mutator: Box::new(move |input: FactoryInput<'_>| {
                let mut seeds = match input.seeds {
                    Some(seeds) => seeds,
                    None => offline_search(input.task, input.language)?.0,
                };
                seeds.extend(input.extra_seeds);
                Ok((seeds, Scheduler::single(mutator)))
            }),
            mutator_type: std::marker::PhantomData,
            seeds: self.seeds,
            extra_seeds: self.extra_seeds,
            extra_mutators: self.extra_mutators,
            classifier: self.classifier,
            archive: self.archive,
            layer: self.layer,
            stop: self.stop,
            observers: self.observers,
        }
    }

    /// Adds a mutator beside the shipped ones (an LLM mutator, say): with weight `weight` in the
    /// fixed mix ([`SchedulerKind::Mix`]), or as an emitter of its own whose parents the
    /// archive selects ([`SchedulerKind::Bandit`]). Ignored after [`mutator`](Self::mutator),
    /// which replaces the shipped mutators.
    pub fn also_mutator<M2: Mutator + 'static>(mut self, mutator: M2, weight: f64) -> Self {
        self.extra_mutators.push((BoxMutator::new(mutator), weight));
        self
    }

    /// Seeds added after the search's own (the offline search's, or those of
    /// [`seeds`](Self::seeds)): kernels of one's own to start from.
    pub fn extra_seeds(mut self, seeds: Vec<Candidate>) -> Self {
        self.extra_seeds.extend(seeds);
        self
    }

    /// How each step's parent and mutator are picked (default [`defaults::SCHEDULER`],
    /// `--scheduler`).
    pub fn scheduler(mut self, kind: SchedulerKind) -> Self {
        self.config.scheduler = kind;
        self
    }

    /// A layer around the shipped evaluator (replacing any layer set before; compose inside
    /// the closure).
    pub fn evaluator_layer<L2: EvaluatorLayer>(self, layer: L2) -> SearchBuilder<M, C, L2> {
        SearchBuilder {
            config: self.config,
            out_set: self.out_set,
            mutator: self.mutator,
            mutator_type: std::marker::PhantomData,
            seeds: self.seeds,
            extra_seeds: self.extra_seeds,
            extra_mutators: self.extra_mutators,
            classifier: self.classifier,
            archive: self.archive,
            layer,
            stop: self.stop,
            observers: self.observers,
        }
    }

    /// Checks the configuration, resolves the task and finds the seeds and mutator.
    pub fn build(self) -> Result<Search<M, C, L>, SearchError> {
        let config = self.config;
        if config.task.is_empty() {
            return Err(SearchError::NoTask);
        }
        let kind = backends::check(&config.backend)?;
        if config.evaluations == 0 || config.device_evaluations == Some(0) {
            return Err(SearchError::NoEvaluations);
        }
        if config.islands == 0 || config.islands > MAX_ISLANDS {
            return Err(SearchError::Archive(
                kf_archive::ArchiveError::InvalidConfig(format!(
                    "--islands must be 1 to {MAX_ISLANDS}, got {}",
                    config.islands
                )),
            ));
        }
        // An unknown strategy would otherwise mean "no tuning" for every kernel, silently.
        if config.tune_budget > 1 {
            kf_tune::strategy::by_name(&config.tune_strategy)?;
        }
        let task: Box<dyn KernelTask> = match &config.task_file {
            Some(job) => Box::new(job.build(&config.sizes, &kf_eval::tasks::builtin_references())?),
            None => builtin_task(&config.task, &config.sizes)?,
        };
        if config.task_file.is_some() && config.is_distributed() {
            return Err(SearchError::TaskFileDistributed);
        }
        let classifier = Arc::new(self.classifier);
        let cells = crate::cell_predictor(&classifier);
        let (seeds, proposer) = (self.mutator)(FactoryInput {
            task: task.as_ref(),
            language: kind.language(),
            seeds: self.seeds,
            extra_seeds: self.extra_seeds,
            cells: &cells,
            scheduler: config.scheduler,
            extra_mutators: self.extra_mutators,
        })?;
        Ok(Search {
            config,
            task,
            seeds,
            proposer,
            mutator_type: std::marker::PhantomData,
            classifier,
            archive: self.archive,
            layer: self.layer,
            stop: self.stop,
            observers: self.observers,
        })
    }
}

/// The archive settings the builder holds besides the kind and the number of islands (which
/// are in the [`SearchConfig`]).
#[derive(Debug, Clone)]
pub(crate) struct ArchiveSettings {
    pub(crate) grid: GridConfig,
    pub(crate) cvt: CvtConfig,
    pub(crate) island: IslandConfig,
    /// The classifier's own continuous descriptors, when it gives them.
    pub(crate) features: Option<FeatureSpace>,
}

impl Default for ArchiveSettings {
    fn default() -> Self {
        ArchiveSettings {
            grid: defaults::grid(),
            cvt: defaults::cvt(),
            island: defaults::islands(),
            features: None,
        }
    }
}

/// An observer the builder holds until the engine exists.
pub(crate) struct BoxedObserver(Box<dyn Observe>);

impl Observe for BoxedObserver {
    fn observe_start(&mut self, info: &RunInfo<'_>) -> Result<(), BoxError> {
        self.0.observe_start(info)
    }

    fn observe_evaluation(&mut self, report: &EvaluationReport<'_>) -> Result<(), BoxError> {
        self.0.observe_evaluation(report)
    }

    fn observe_end(&mut self, summary: &RunSummary) -> Result<(), BoxError> {
        self.0.observe_end(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_tuning_strategy_is_an_error_not_silently_no_tuning() {
        let err = Search::builder()
            .task("gemm")
            .tune_budget(4)
            .tune_strategy("no_such_strategy")
            .build()
            .err()
            .expect("an unknown strategy is refused");
        assert!(matches!(err, SearchError::TuneStrategy(_)), "{err}");
        assert!(err.to_string().contains("no_such_strategy"), "{err}");
    }

    #[test]
    fn no_islands_is_an_error() {
        let err = Search::builder()
            .task("gemm")
            .islands(0)
            .build()
            .err()
            .expect("zero islands are refused");
        assert!(
            matches!(
                err,
                SearchError::Archive(kf_archive::ArchiveError::InvalidConfig(_))
            ),
            "{err}"
        );
        assert!(err.to_string().contains("--islands"), "{err}");
    }
}
