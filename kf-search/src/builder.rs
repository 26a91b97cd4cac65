//! [`Search::builder`]: the shipped search with any of its parts replaced.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kf_archive::{CvtConfig, FeatureSpace, GridConfig, IslandConfig};
use kf_core::emitter::Scheduler;
use kf_core::{
    BehaviorClassifier, BoxError, BoxMutator, Candidate, EvaluationReport, Language, Mutator,
    Observe, ObserverMode, RunInfo, RunSummary, StopHandle,
};
use kf_eval::task::{builtin_task, KernelTask, Sizes};
use kf_eval::{BackendFactory, DynBackendFactory, WorkerCommand};
use kf_mutate::{CellPredictor, MixMutator};
use kf_tune::strategy::StrategyFactory;

use crate::layer::{EvaluatorLayer, NoLayer, Stack};
use crate::{
    backends, defaults, offline_search, ArchiveFactory, DefaultClassifier, EvaluatorFactory,
    OfflineMutators, SearchConfig, SearchError, ShippedArchive, ShippedEvaluator, ShippedScheduler,
};
use kf_core::{Evaluation, Status};

/// What the builder knows when it makes the mutator and the seeds, once the task is known.
struct FactoryInput<'a> {
    task: &'a dyn KernelTask,
    language: Language,
    /// The seeds given ([`SearchBuilder::seeds`]), replacing the offline search's.
    seeds: Option<Vec<Candidate>>,
    /// Seeds added after either ([`SearchBuilder::extra_seeds`]).
    extra_seeds: Vec<Candidate>,
    cells: &'a CellPredictor,
    scheduler: ShippedScheduler,
    /// Mutators added beside the offline ones ([`SearchBuilder::also_mutator`]).
    extra_mutators: Vec<(BoxMutator, f64)>,
}

/// How the builder finds the proposer (a single mutator is a scheduler of one) and the seeds
/// (those given, else its own).
type MutatorFactory =
    Box<dyn FnOnce(FactoryInput<'_>) -> Result<(Vec<Candidate>, Scheduler), SearchError>>;

/// The shipped search, open: see [`Search::builder`]. Built, it holds its assembled parts
/// (the configuration, the task, the seeds, the backend, the tuning strategy, the archive's
/// factory, the classifier); [`run`](Self::run) runs them.
pub struct Search<M, C, L, A = ShippedArchive, B = ShippedEvaluator> {
    pub(crate) config: SearchConfig,
    pub(crate) task: Box<dyn KernelTask>,
    pub(crate) seeds: Vec<Candidate>,
    pub(crate) proposer: Scheduler,
    /// The mutator type the builder was given (the proposer holds it, boxed).
    pub(crate) mutator_type: std::marker::PhantomData<fn() -> M>,
    /// Shared with the cell predictor of the default mutator and of tuning.
    pub(crate) classifier: Arc<C>,
    pub(crate) archive: A,
    pub(crate) backend: Arc<dyn DynBackendFactory>,
    pub(crate) strategy: Arc<dyn StrategyFactory>,
    pub(crate) evaluator: B,
    pub(crate) layer: L,
    pub(crate) stop: Option<StopHandle>,
    pub(crate) observers: Vec<(BoxedObserver, ObserverMode)>,
    /// Post-run hooks of one's own, after the shipped ones.
    pub(crate) post_run: Vec<Box<dyn kf_report::PostRun>>,
}

/// A change to the configuration, applied in the order set over the configuration given
/// with [`SearchBuilder::config`] (or the shipped one), whenever that was given.
type ConfigEdit = Box<dyn FnOnce(&mut SearchConfig)>;

/// What a builder holds that does not depend on the types of its parts.
struct Common {
    base: Option<SearchConfig>,
    edits: Vec<ConfigEdit>,
    out_given: bool,
    /// The backend given; without one, the shipped backend the configuration names
    /// ([`backends::factory_for`] at [`SearchBuilder::build`]).
    backend: Option<Arc<dyn DynBackendFactory>>,
    strategy: Option<Arc<dyn StrategyFactory>>,
    /// How the shipped mutators propose ([`SearchBuilder::scheduler`]).
    scheduler: ShippedScheduler,
    /// The task as resolved already ([`SearchBuilder::chosen_task`]), so that it is not built
    /// again.
    task: Option<Box<dyn KernelTask>>,
    seeds: Option<Vec<Candidate>>,
    extra_seeds: Vec<Candidate>,
    extra_mutators: Vec<(BoxMutator, f64)>,
    /// The shipped archive's settings were given.
    archive_settings_given: bool,
    /// ... and then another archive replaced the shipped one.
    archive_settings_dropped: bool,
    stop: Option<StopHandle>,
    observers: Vec<(BoxedObserver, ObserverMode)>,
    post_run: Vec<Box<dyn kf_report::PostRun>>,
}

/// Builds a [`Search`]; every part not set is the shipped search's ([`defaults`]).
///
/// The setters do not depend on their order: [`config`](Self::config) gives the
/// configuration the other setters change, whether they come before or after it; setting one
/// part twice keeps the later. A part given that the search would not use is an error at
/// [`build`](Self::build), never silently dropped.
pub struct SearchBuilder<
    M = MixMutator,
    C = DefaultClassifier,
    L = NoLayer,
    A = ShippedArchive,
    B = ShippedEvaluator,
> {
    common: Common,
    mutator: MutatorFactory,
    /// The mutator type given (the factory holds it, boxed).
    mutator_type: std::marker::PhantomData<fn() -> M>,
    classifier: C,
    layer: L,
    archive: A,
    evaluator: B,
}

impl Search<MixMutator, DefaultClassifier, NoLayer, ShippedArchive> {
    /// A builder with the shipped search's settings: the offline mutators and seeds of
    /// [`offline_search`] under a bandit scheduler of emitters ([`ShippedScheduler::bandit`]), the
    /// [default classifier](defaults::classifier), the [default grid](defaults::grid)
    /// ([`ShippedArchive`]), the OpenCL backend, tuning in the search
    /// ([`defaults::TUNE_BUDGET`] configurations per new kernel, the
    /// [`defaults::TUNE_STRATEGY`] strategy), isolated evaluation workers, the [`defaults`]
    /// budget. Name the task with [`SearchBuilder::task`] (or give a config with
    /// [`SearchBuilder::config`]).
    pub fn builder() -> SearchBuilder {
        SearchBuilder {
            mutator_type: std::marker::PhantomData,
            common: Common {
                base: None,
                edits: Vec::new(),
                out_given: false,
                backend: None,
                strategy: None,
                scheduler: ShippedScheduler::default(),
                task: None,
                seeds: None,
                extra_seeds: Vec::new(),
                extra_mutators: Vec::new(),
                archive_settings_given: false,
                archive_settings_dropped: false,
                stop: None,
                observers: Vec::new(),
                post_run: Vec::new(),
            },
            mutator: Box::new(|input: FactoryInput<'_>| {
                let mut parts = OfflineMutators::for_task(
                    input.task,
                    input.language,
                    Some(input.cells.clone()),
                )?;
                let mut seeds = input.seeds.unwrap_or(std::mem::take(&mut parts.seeds));
                seeds.extend(input.extra_seeds);
                parts.extra.extend(input.extra_mutators);
                let proposer = match input.scheduler.policy() {
                    None => Scheduler::single(parts.mix()),
                    Some(policy) => parts.emitters(policy.clone())?,
                };
                Ok((seeds, proposer))
            }),
            classifier: defaults::classifier(),
            layer: NoLayer,
            archive: ShippedArchive::default(),
            evaluator: ShippedEvaluator,
        }
    }
}

impl<M, C, L, A, B> SearchBuilder<M, C, L, A, B> {
    /// The builder with the configuration changed by `edit` (in call order, over the
    /// configuration [`config`](Self::config) gives).
    fn edit(mut self, edit: impl FnOnce(&mut SearchConfig) + 'static) -> Self {
        self.common.edits.push(Box::new(edit));
        self
    }

    /// The built-in task to search (`gemm`, `softmax`); the output folder is `runs/<task>`
    /// unless [`out`](Self::out) or [`config`](Self::config) gives one.
    pub fn task(self, name: impl Into<String>) -> Self {
        let name = name.into();
        self.edit(move |c| c.task = name)
    }

    /// A task file to search on instead of a built-in task, under the task's `name`.
    pub fn task_file(self, name: impl Into<String>, job: kf_eval::TaskFileJob) -> Self {
        self.task(name).edit(move |c| c.task_file = Some(job))
    }

    /// The task as [`ChosenTask::resolve`](crate::task::ChosenTask::resolve) built it (a
    /// built-in task, or a task file checked and its reference run once): its name, sizes and
    /// task file become the configuration's, and the search uses it as it is instead of
    /// building it again. (Sizes changed afterwards make the search build the task at those.)
    pub fn chosen_task(mut self, chosen: crate::task::ChosenTask) -> Self {
        let name = chosen.name();
        let sizes = chosen.task.sizes();
        let job = chosen.file.map(|(_, job)| job);
        self.common.task = Some(chosen.task);
        self.edit(move |c| {
            c.task = name;
            c.sizes = sizes;
            c.task_file = job;
        })
    }

    /// Problem sizes (missing ones take the task's defaults).
    pub fn sizes(self, sizes: Sizes) -> Self {
        self.edit(move |c| c.sizes = sizes)
    }

    /// Problem sizes as text, such as `ROWS=64,COLS=256`.
    pub fn size(self, text: &str) -> Result<Self, SearchError> {
        let sizes = kf_eval::task::parse_sizes(text)?;
        Ok(self.sizes(sizes))
    }

    /// The whole configuration at once (as `SearchArgs::config` makes it). The other setters
    /// change it, whether called before or after this.
    pub fn config(mut self, config: SearchConfig) -> Self {
        self.common.base = Some(config);
        self.common.out_given = true;
        self
    }

    /// The backend: a shipped one ([`OpenClFactory`](crate::backends::OpenClFactory),
    /// [`CudaFactory`](crate::backends::CudaFactory),
    /// [`SyclFactory`](crate::backends::SyclFactory)) or one's own, and its device (`None`: the
    /// backend's default device). The evaluation workers open it by its
    /// [`name`](BackendFactory::name): register one's own factory with
    /// [`init_with`](crate::backends::init_with) first thing in `main`.
    pub fn backend(self, factory: impl BackendFactory, device: Option<String>) -> Self {
        self.backend_shared(Arc::new(factory), device)
    }

    /// [`backend`](Self::backend) with a shared factory (as [`backends::factory_for`] gives
    /// one for a name).
    pub fn backend_shared(
        mut self,
        factory: Arc<dyn DynBackendFactory>,
        device: Option<String>,
    ) -> Self {
        let name = factory.name().to_owned();
        self.common.backend = Some(factory);
        // The configuration's compile-cache folder, if any, stays.
        self.edit(move |c| {
            c.backend.kind = name;
            c.backend.device = device;
        })
    }

    /// Candidates evaluated at most, seeds included (default [`defaults::EVALUATIONS`]).
    pub fn evaluations(self, n: u64) -> Self {
        self.edit(move |c| c.evaluations = n)
    }

    /// Wall-clock limit (default [`defaults::WALL`]); `None`: none.
    pub fn wall(self, wall: Option<Duration>) -> Self {
        self.edit(move |c| c.wall = wall)
    }

    /// Run seed: the same seed gives the same search (default [`defaults::SEED`]).
    pub fn seed(self, seed: u64) -> Self {
        self.edit(move |c| c.seed = seed)
    }

    /// Output folder: report, pictures, best kernel, run directory (default `runs/<task>`).
    pub fn out(mut self, out: impl AsRef<Path>) -> Self {
        let out = out.as_ref().to_path_buf();
        self.common.out_given = true;
        self.edit(move |c| c.out = out)
    }

    /// Configurations tuned per new kernel, 1 = no tuning (default [`defaults::TUNE_BUDGET`]).
    pub fn tune_budget(self, budget: usize) -> Self {
        self.edit(move |c| c.tune_budget = budget)
    }

    /// The per-kernel tuning strategy: each new kernel is tuned by a fresh strategy from
    /// `factory`, a built-in one ([`kf_tune::strategy::StrategyName`]; default
    /// [`defaults::TUNE_STRATEGY`]) or one's own; its [`name`](StrategyFactory::name) is
    /// recorded as the run's tuning strategy.
    pub fn tune_strategy(self, factory: impl StrategyFactory + 'static) -> Self {
        self.tune_strategy_shared(Arc::new(factory))
    }

    /// [`tune_strategy`](Self::tune_strategy) with a shared factory (as
    /// [`kf_tune::strategy::factory_by_name`] gives one for a name read as text).
    pub fn tune_strategy_shared(mut self, factory: Arc<dyn StrategyFactory>) -> Self {
        self.common.strategy = Some(factory);
        self
    }

    /// At most `n` device evaluations (every configuration compiled and timed, tuning
    /// included); `None`: only the candidate budget and the wall time.
    pub fn device_evaluations(self, n: Option<u64>) -> Self {
        self.edit(move |c| c.device_evaluations = n)
    }

    /// Whether to measure the reference library after the search (default true; see
    /// [`SearchConfig::reference`]).
    pub fn reference(self, measure: bool) -> Self {
        self.edit(move |c| c.reference = measure)
    }

    /// Rounds of the final selection among the fastest elites (default
    /// [`crate::defaults::FINAL_ROUNDS`]; 0: the fastest by its search measurement is the best
    /// kernel; see [`SearchConfig::final_rounds`]).
    pub fn final_rounds(self, rounds: u32) -> Self {
        self.edit(move |c| c.final_rounds = rounds)
    }

    /// Whether to show a progress bar on a terminal (default true).
    pub fn progress(self, show: bool) -> Self {
        self.edit(move |c| c.progress = show)
    }

    /// How to start evaluation workers (default: re-execute this program, whose `main` calls
    /// [`crate::init`] first).
    pub fn worker(self, command: WorkerCommand) -> Self {
        self.edit(move |c| c.worker = Some(command))
    }

    /// Stops the search when `stop` is triggered: every completed step is already in the run
    /// directory, and running the same search again resumes. The library installs no signal
    /// handler; a program triggers `stop` from its own (`kf` and the examples: Ctrl-C, with
    /// `ctrlc::set_handler(move || stop.stop())`).
    pub fn stop_on(mut self, stop: StopHandle) -> Self {
        self.common.stop = Some(stop);
        self
    }

    /// Adds an observer of the engine's events, after the shipped ones (progress, log lines,
    /// the baseline's throughput); `mode` says which evaluations it sees.
    pub fn observer(mut self, observer: impl Observe + 'static, mode: ObserverMode) -> Self {
        self.common
            .observers
            .push((BoxedObserver(Box::new(observer)), mode));
        self
    }

    /// Adds a hook that runs once the engine has stopped, after the shipped ones (the final
    /// selection, the reference comparison, the report files and the explorer page,
    /// [`kf_report::post_run::shipped`]): it sees the finished run, the report as written and
    /// the run's own evaluator for re-timing ([`crate::FinishedRun`]).
    pub fn post_run(mut self, hook: impl crate::PostRun + 'static) -> Self {
        self.common.post_run.push(Box::new(hook));
        self
    }

    /// An archive of one's own, made by `factory` when the search starts (replacing the
    /// shipped grid, CVT and islands; having set their settings too is an error at
    /// [`build`](Self::build)).
    pub fn archive_factory<A2: ArchiveFactory>(
        mut self,
        factory: A2,
    ) -> SearchBuilder<M, C, L, A2, B> {
        self.common.archive_settings_dropped |= self.common.archive_settings_given;
        SearchBuilder {
            common: self.common,
            mutator_type: std::marker::PhantomData,
            mutator: self.mutator,
            classifier: self.classifier,
            layer: self.layer,
            archive: factory,
            evaluator: self.evaluator,
        }
    }

    /// The seeds (default: those of [`offline_search`] for the task and backend). The first
    /// should be the task baseline (see [`seeds_for`](crate::seeds_for)): its throughput is the report's
    /// baseline.
    pub fn seeds(mut self, seeds: Vec<Candidate>) -> Self {
        self.common.seeds = Some(seeds);
        self
    }

    /// The behaviour classifier: which cell of the archive each kernel goes to (default
    /// [`defaults::classifier`]); its [`name`](BehaviorClassifier::name) is in the report.
    pub fn classifier<C2: BehaviorClassifier + 'static>(
        self,
        classifier: C2,
    ) -> SearchBuilder<M, C2, L, A, B> {
        SearchBuilder {
            common: self.common,
            mutator_type: std::marker::PhantomData,
            mutator: self.mutator,
            classifier,
            layer: self.layer,
            archive: self.archive,
            evaluator: self.evaluator,
        }
    }

    /// The mutator, replacing the shipped ones and their scheduler (default: [`offline_search`]'s
    /// for the task and backend under [`ShippedScheduler::bandit`]); the archive selects each
    /// step's parent. The seeds stay the offline search's unless [`seeds`](Self::seeds) are
    /// given (before or after). To add a mutator to the shipped ones instead, use
    /// [`also_mutator`](Self::also_mutator); the two together are an error at
    /// [`build`](Self::build) ([`SearchError::MutatorsBesideReplaced`]).
    pub fn mutator<M2: Mutator + 'static>(self, mutator: M2) -> SearchBuilder<M2, C, L, A, B> {
        SearchBuilder {
            common: self.common,
            mutator_type: std::marker::PhantomData,
            mutator: Box::new(move |input: FactoryInput<'_>| {
                if !input.extra_mutators.is_empty() {
                    return Err(SearchError::MutatorsBesideReplaced {
                        added: input.extra_mutators.len(),
                    });
                }
                let mut seeds = match input.seeds {
                    Some(seeds) => seeds,
                    None => offline_search(input.task, input.language)?.0,
                };
                seeds.extend(input.extra_seeds);
                Ok((seeds, Scheduler::single(mutator)))
            }),
            classifier: self.classifier,
            layer: self.layer,
            archive: self.archive,
            evaluator: self.evaluator,
        }
    }

    /// Adds a mutator beside the shipped ones (an LLM mutator, say): with weight `weight` in the
    /// fixed mix ([`ShippedScheduler::mix`]), or as an emitter of its own whose parents the
    /// archive selects ([`ShippedScheduler::bandit`]). With [`mutator`](Self::mutator), which
    /// replaces the shipped mutators, it is an error at [`build`](Self::build) (in either
    /// order): mix the mutators into the one given instead.
    pub fn also_mutator<M2: Mutator + 'static>(mut self, mutator: M2, weight: f64) -> Self {
        self.common
            .extra_mutators
            .push((BoxMutator::new(mutator), weight));
        self
    }

    /// Seeds added after the search's own (the offline search's, or those of
    /// [`seeds`](Self::seeds)): kernels of one's own to start from.
    pub fn extra_seeds(mut self, seeds: Vec<Candidate>) -> Self {
        self.common.extra_seeds.extend(seeds);
        self
    }

    /// How the shipped mutators propose each step's parent and mutator (default
    /// [`ShippedScheduler::bandit`]; `--scheduler`, [`ShippedScheduler::named`]).
    pub fn scheduler(mut self, scheduler: ShippedScheduler) -> Self {
        self.common.scheduler = scheduler;
        self
    }

    /// Adds a layer around the evaluator: layers stack in the order added, the first
    /// innermost (right around the shipped evaluator), tower style. Each layer's
    /// [`names`](EvaluatorLayer::names) are in the report.
    pub fn evaluator_layer<L2>(self, layer: L2) -> SearchBuilder<M, C, Stack<L, L2>, A, B> {
        SearchBuilder {
            common: self.common,
            mutator_type: std::marker::PhantomData,
            mutator: self.mutator,
            classifier: self.classifier,
            layer: Stack {
                inner: self.layer,
                outer: layer,
            },
            archive: self.archive,
            evaluator: self.evaluator,
        }
    }
}

impl<M, C, L, A> SearchBuilder<M, C, L, A, ShippedEvaluator> {
    /// An evaluator of one's own, replacing the shipped one (tuning, isolated or distributed
    /// workers) at the bottom of the stack; the [layers](Self::evaluator_layer) wrap it. The
    /// search then has no evaluator of its own to re-time kernels with: no final selection,
    /// and no re-timed kernel beside the reference library. The factory receives the
    /// configuration, the backend and the tuning strategy
    /// ([`EvaluatorInput`](crate::EvaluatorInput)) to use as it sees fit.
    pub fn evaluator<B2: EvaluatorFactory>(self, factory: B2) -> SearchBuilder<M, C, L, A, B2> {
        SearchBuilder {
            common: self.common,
            mutator_type: std::marker::PhantomData,
            mutator: self.mutator,
            classifier: self.classifier,
            layer: self.layer,
            archive: self.archive,
            evaluator: factory,
        }
    }
}

impl<M, C, L, B> SearchBuilder<M, C, L, ShippedArchive, B> {
    fn shipped_archive(mut self, change: impl FnOnce(&mut ShippedArchive)) -> Self {
        change(&mut self.archive);
        self.common.archive_settings_given = true;
        self
    }

    /// The shipped archive's grid settings (default [`defaults::grid`]); with a CVT archive,
    /// its selection, QD offset and hints.
    pub fn archive(self, grid: GridConfig) -> Self {
        self.shipped_archive(|a| a.grid = grid)
    }

    /// A CVT archive with these centroids (default: the grid; `--archive cvt` gives
    /// [`defaults::cvt`]); its `grid` field is replaced by [`archive`](Self::archive)'s
    /// settings ([`ShippedArchive::with_cvt`]).
    pub fn cvt(self, cvt: CvtConfig) -> Self {
        self.shipped_archive(|a| {
            a.layout = crate::archive::Layout::Cvt;
            a.cvt = cvt;
        })
    }

    /// Shipped archives evolving as islands with migration (default [`defaults::ISLANDS`]:
    /// one; `--islands`); 1 to [`kf_archive::MAX_ISLANDS`], checked at
    /// [`build`](SearchBuilder::build).
    pub fn islands(self, n: usize) -> Self {
        self.shipped_archive(|a| a.islands = n)
    }

    /// Migration and reseeding of the islands (default [`defaults::islands`]); the number of
    /// islands is [`islands`](Self::islands)'.
    pub fn island_config(self, island: IslandConfig) -> Self {
        self.shipped_archive(|a| a.island = island)
    }

    /// The continuous descriptors a CVT search places kernels by, when the classifier gives
    /// its own [`features`](kf_core::Descriptor::features) (default: the shipped
    /// [`cvt_features`](crate::cvt_features), which the search adds to every descriptor).
    pub fn cvt_features(self, features: FeatureSpace) -> Self {
        self.shipped_archive(|a| a.features = Some(features))
    }
}

impl<M, C, L, A, B> SearchBuilder<M, C, L, A, B>
where
    M: Mutator + 'static,
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    /// Checks the configuration, resolves the task, the backend, the tuning strategy and the
    /// archive, and finds the seeds and mutator.
    pub fn build(self) -> Result<Search<M, C, L, A, B>, SearchError> {
        let common = self.common;
        let mut config = common
            .base
            .unwrap_or_else(|| SearchConfig::new("", Sizes::new()));
        for edit in common.edits {
            edit(&mut config);
        }
        if !common.out_given {
            config.out = PathBuf::from("runs").join(&config.task);
        }
        if config.task.is_empty() {
            return Err(SearchError::NoTask);
        }
        let backend = match common.backend {
            Some(factory) => factory,
            None => backends::factory_for(&config.backend)?,
        };
        if config.evaluations == 0 || config.device_evaluations == Some(0) {
            return Err(SearchError::NoEvaluations);
        }
        if common.archive_settings_dropped {
            return Err(SearchError::ArchiveSettingsUnused);
        }
        let archive = self.archive;
        archive.check()?;
        let strategy = common
            .strategy
            .unwrap_or_else(|| Arc::new(defaults::TUNE_STRATEGY));
        let chosen = common
            .task
            .filter(|t| t.name() == config.task && t.sizes() == config.sizes);
        let task: Box<dyn KernelTask> = match (chosen, &config.task_file) {
            (Some(task), _) => task,
            (None, Some(job)) => {
                Box::new(job.build(&config.sizes, &kf_eval::task::builtin_references())?)
            }
            (None, None) => builtin_task(&config.task, &config.sizes)?,
        };
        let classifier = Arc::new(self.classifier);
        let cells = cell_predictor(&classifier);
        let (seeds, proposer) = (self.mutator)(FactoryInput {
            task: task.as_ref(),
            language: backend.language(),
            seeds: common.seeds,
            extra_seeds: common.extra_seeds,
            cells: &cells,
            scheduler: common.scheduler,
            extra_mutators: common.extra_mutators,
        })?;
        if seeds.is_empty() {
            return Err(SearchError::NoSeeds {
                task: config.task.clone(),
            });
        }
        Ok(Search {
            config,
            task,
            seeds,
            proposer,
            mutator_type: std::marker::PhantomData,
            classifier,
            archive,
            backend,
            strategy,
            evaluator: self.evaluator,
            layer: self.layer,
            stop: common.stop,
            observers: common.observers,
            post_run: common.post_run,
        })
    }
}

/// The names of a search's parts, as the report records them (`parts` in `report.json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartNames {
    /// The backend ([`BackendFactory::name`]).
    pub backend: String,
    /// The archive ([`ArchiveFactory::name`]).
    pub archive: String,
    /// The tuning strategy ([`StrategyFactory::name`]).
    pub tune_strategy: String,
    /// The classifier ([`BehaviorClassifier::name`]).
    pub classifier: String,
    /// The mutator, or the scheduler of emitters.
    pub mutator: String,
    /// The evaluator at the bottom of the stack ([`EvaluatorFactory::name`]; `shipped`).
    pub evaluator: String,
    /// The evaluator's layers, innermost first ([`EvaluatorLayer::names`]).
    pub evaluator_layers: Vec<String>,
}

impl<M, C, L, A, B> Search<M, C, L, A, B>
where
    M: Mutator + 'static,
    C: BehaviorClassifier + 'static,
    L: EvaluatorLayer<B::Evaluator>,
    A: ArchiveFactory,
    B: EvaluatorFactory,
{
    /// The names of the search's parts.
    pub fn part_names(&self) -> PartNames {
        PartNames {
            backend: self.backend.name().to_owned(),
            archive: self.archive.name(),
            tune_strategy: self.strategy.name(),
            classifier: self.classifier.name().to_owned(),
            mutator: self.proposer.name(),
            evaluator: self.evaluator.name(),
            evaluator_layers: self.layer.names(),
        }
    }

    /// The backend's factory.
    pub fn backend(&self) -> &Arc<dyn DynBackendFactory> {
        &self.backend
    }

    /// The tuning strategy's factory.
    pub fn tune_strategy(&self) -> &Arc<dyn StrategyFactory> {
        &self.strategy
    }

    /// The archive's factory.
    pub fn archive(&self) -> &A {
        &self.archive
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

/// Where `classifier` would place a kernel before it is evaluated: its descriptor for the
/// source at those parameters with an evaluation that says only "correct" (a static
/// classifier's answer; one that needs measurements may predict nothing or the wrong cell,
/// which only changes which children are preferred). The shipped search's structural mutator
/// aims at empty cells with it, and its tuning keeps each kernel in the predicted cell.
pub fn cell_predictor<C: BehaviorClassifier + 'static>(classifier: &Arc<C>) -> CellPredictor {
    let classifier = Arc::clone(classifier);
    let judged = Evaluation::failed(Status::Correct, "");
    CellPredictor::new(move |source, params| {
        let candidate = Candidate::seed(source.clone(), params.clone());
        classifier
            .classify(&candidate, &judged)
            .ok()
            .map(|d| d.coords)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::Named;
    use crate::test_evaluator::SourceLengthEvaluator;
    use crate::SearchEvaluator;

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

    #[test]
    fn config_given_after_other_setters_keeps_them() {
        let search = Search::builder()
            .task("gemm")
            .evaluations(7)
            .tune_budget(1)
            .config(SearchConfig::new("softmax", Sizes::new()))
            .seed(9)
            .build()
            .expect("builds");
        let c = search.config();
        assert_eq!((c.task.as_str(), c.evaluations, c.seed), ("gemm", 7, 9));
        assert_eq!(c.tune_budget, 1);
        assert_eq!(
            c.out,
            PathBuf::from("runs/softmax"),
            "the config's own folder"
        );
        let plain = Search::builder().task("gemm").build().expect("builds");
        assert_eq!(plain.config().out, PathBuf::from("runs/gemm"));
    }

    #[test]
    fn a_mutator_beside_a_replaced_one_is_an_error_in_either_order() {
        let m = || kf_core::testing::UniformMutator::new(3);
        let after = Search::builder()
            .task("gemm")
            .mutator(m())
            .also_mutator(m(), 1.0)
            .build()
            .err()
            .expect("refused");
        assert!(
            matches!(after, SearchError::MutatorsBesideReplaced { added: 1 }),
            "{after}"
        );
        let before = Search::builder()
            .task("gemm")
            .also_mutator(m(), 1.0)
            .mutator(m())
            .build()
            .err()
            .expect("refused");
        assert!(
            matches!(before, SearchError::MutatorsBesideReplaced { .. }),
            "{before}"
        );
    }

    /// The shipped grid under another name: an archive factory of one's own.
    struct OwnGrid;

    impl ArchiveFactory for OwnGrid {
        type Archive = kf_archive::EliteArchive;
        fn name(&self) -> String {
            "own-grid".into()
        }
        fn build(
            self,
            input: &crate::ArchiveInput<'_>,
        ) -> Result<kf_archive::EliteArchive, kf_archive::ArchiveError> {
            kf_archive::EliteArchive::with_config(input.space.clone(), defaults::grid())
        }
    }

    #[test]
    fn parts_of_one_s_own_are_named_and_unused_settings_refused() {
        let layered = |inner: SearchEvaluator| inner;
        let search = Search::builder()
            .task("gemm")
            .archive_factory(OwnGrid)
            .tune_strategy(kf_tune::strategy::StrategyName::Random)
            .evaluator_layer(Named::new("first", layered))
            .evaluator_layer(|inner| inner)
            .build()
            .expect("builds");
        let names = search.part_names();
        assert_eq!(names.archive, "own-grid");
        assert_eq!(names.tune_strategy, "random");
        assert_eq!(names.backend, "opencl");
        assert_eq!(names.classifier, "static+compiler-facts");
        assert_eq!(names.evaluator_layers, ["first", "layer"]);
        let settings = Search::builder()
            .task("gemm")
            .archive(defaults::grid())
            .archive_factory(OwnGrid)
            .build()
            .err()
            .expect("refused");
        assert!(
            matches!(settings, SearchError::ArchiveSettingsUnused),
            "{settings}"
        );
        let islands = Search::builder()
            .task("gemm")
            .islands(2)
            .archive_factory(OwnGrid)
            .build()
            .err()
            .expect("refused");
        assert!(
            matches!(islands, SearchError::ArchiveSettingsUnused),
            "{islands}"
        );
    }

    #[test]
    fn an_evaluator_of_one_s_own_replaces_the_shipped_one() {
        if !crate::doctest_backend_available() {
            return;
        }
        let out = tempfile::tempdir().expect("a temporary folder");
        let evaluator = SourceLengthEvaluator::by_length();
        let evaluations = evaluator.clone();
        let search = Search::builder()
            .task("softmax")
            .size("ROWS=8,COLS=32")
            .expect("sizes")
            .evaluator(evaluator)
            .evaluator_layer(Named::new("outer", |inner: SourceLengthEvaluator| inner))
            .evaluations(4)
            .reference(false)
            .out(out.path())
            .progress(false)
            .build()
            .expect("builds");
        assert_eq!(search.part_names().evaluator, "by-length");
        let outcome = search.run().expect("runs");
        assert_eq!(outcome.summary.evaluations, 4);
        assert_eq!(evaluations.count(), 4);
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.path().join("report.json")).expect("report.json"),
        )
        .expect("json");
        assert_eq!(report["extra"]["parts"]["evaluator"], "by-length");
        assert_eq!(report["extra"]["parts"]["evaluator_layers"][0], "outer");
    }

    /// A resumed run refuses another archive, tuning strategy or backend: the run directory
    /// records their names.
    #[test]
    fn a_resumed_run_refuses_parts_of_other_names() {
        if !crate::doctest_backend_available() {
            return;
        }
        let out = tempfile::tempdir().expect("a temporary folder");
        let search = || {
            Search::builder()
                .task("softmax")
                .size("ROWS=8,COLS=32")
                .expect("sizes")
                .evaluator(SourceLengthEvaluator::by_length())
                .evaluations(3)
                .reference(false)
                .out(out.path())
                .progress(false)
        };
        let first = search().archive_factory(OwnGrid).build().expect("builds");
        first.run().expect("runs");
        let again = search().archive_factory(OwnGrid).build().expect("builds");
        assert_eq!(again.run().expect("resumes").summary.evaluations, 3);
        let mismatch = |r: Result<_, SearchError>| {
            matches!(
                r,
                Err(SearchError::Archive(
                    kf_archive::ArchiveError::MetaMismatch { .. }
                ))
            )
        };
        let shipped = search().build().expect("builds").run();
        assert!(
            mismatch(shipped.map(|_| ())),
            "the shipped grid is another archive"
        );
        let strategy = search()
            .archive_factory(OwnGrid)
            .tune_strategy(kf_tune::strategy::FnStrategy::new("mine", || {
                kf_tune::strategy::StrategyName::Random.build()
            }))
            .build()
            .expect("builds")
            .run();
        assert!(mismatch(strategy.map(|_| ())), "another tuning strategy");
    }
}
