//! [`StructuralMutator`]: changes a kernel's structure by applying strategies to templates.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use kf_core::{
    async_trait, ArchiveHints, Elite, KernelSource, Mutation, MutationContext, Mutator, Needs,
    Offspring, Origin, ParamValues,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::error::MutateError;
use crate::mix::draw_by_weight;
use crate::space::Feasibility;
use crate::strategy::{MutationStrategy, StrategyLibrary};
use crate::template::{Structure, Template, TemplateLibrary};

/// Settings of a [`StructuralMutator`].
#[derive(Debug, Clone, PartialEq)]
pub struct StructuralConfig {
    /// Children per mutation at most.
    pub children: usize,
    /// Weight multiplier for a strategy aiming at a descriptor level that some empty frontier
    /// cell of the archive has.
    pub frontier_bonus: f64,
    /// Weight multiplier for a strategy whose every target level the parent already has.
    pub same_cell_factor: f64,
    /// Configurations tried per child when repairing parameters into feasibility.
    pub repair_budget: usize,
    /// With a [`CellPredictor`]: children drawn per mutation before the `children` aimed best
    /// at the archive's empty cells are kept (see [`StructuralMutator::predicting_cells`]).
    pub pool: usize,
    /// With a [`CellPredictor`]: when none of the drawn children is predicted in an empty
    /// cell, the configuration nearest the parent among those the task's templates are
    /// predicted to reach in an empty cell replaces the last child. The reachable cells are
    /// mapped once per task, sizes and device (about a second for a few hundred structures).
    /// Single strategy steps miss cells that only a combination of moves reaches (a
    /// local-memory tile, a prefetch, a sub-group broadcast *and* one output per work-item,
    /// say), so a search without this fills them only by the luck of its parent choices.
    pub reach: bool,
}

impl Default for StructuralConfig {
    fn default() -> Self {
        StructuralConfig {
            children: 2,
            frontier_bonus: 3.0,
            same_cell_factor: 0.5,
            repair_budget: 3000,
            pool: 16,
            reach: true,
        }
    }
}

/// Configurations tried per point of a [`ReachMap`] when repairing its parameters; a point
/// that does not repair this quickly is passed over.
const REACH_REPAIR_BUDGET: usize = 64;

/// Proposes children with a different structure: it recognises the parent as a variant of one
/// of its templates (by the marker in the manifest), or, for any other kernel of a task it has
/// templates for (the naive seed, an LLM's kernel), starts from the base structure of the
/// task's first template (strategies such as `split-k` lead to the others).
/// It then applies strategies of its [`StrategyLibrary`] whose preconditions hold, drawn by
/// weight — strategies aiming at descriptor levels of the archive's empty frontier cells
/// ([`ArchiveHints::empty_frontier`]) are preferred — and instantiates each chosen structure
/// into real source text and a manifest. Parameters carry over from the parent where they can,
/// then are repaired into the constraints at the task's sizes on the context's device,
/// without undoing what the strategy chose. Each child's origin note names the strategy.
///
/// Deterministic: the choices depend only on the parent, the hints and `ctx.seed` (ChaCha8).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use kf_core::prelude::*;
/// use kf_mutate::StructuralMutator;
///
/// // The naive seed of the gemm task: not a template variant, so it is adopted.
/// let naive = KernelSource::new(Language::OpenCl, "gemm", "__kernel void gemm() {}");
/// let eval = Evaluation::failed(Status::WrongValues, "");
/// let parent = Elite {
///     candidate: Candidate::seed(naive, ParamValues::new()),
///     fitness: Fitness::of(&eval),
///     evaluation: eval,
///     descriptor: Descriptor::new([0, 2, 0], "test"),
/// };
/// let ctx = MutationContext {
///     step: 1,
///     seed: 7,
///     task: Arc::new(Task::new("gemm").with_size("M", 256).with_size("N", 192).with_size("K", 128)),
///     device: None,
///     inspirations: Vec::new(),
///     hints: ArchiveHints::default(),
/// };
/// let mutator = StructuralMutator::builtin().unwrap();
/// let mutation = futures::executor::block_on(mutator.mutate(&parent, &ctx)).unwrap();
/// assert!(!mutation.children.is_empty());
/// for child in &mutation.children {
///     assert!(child.source.manifest.is_some());
///     assert!(child.origin.note.starts_with(|c: char| c.is_ascii_lowercase()));
/// }
/// ```
#[derive(Debug, Clone)]
pub struct StructuralMutator {
    name: String,
    templates: TemplateLibrary,
    strategies: StrategyLibrary,
    config: StructuralConfig,
    predictor: Option<CellPredictor>,
    /// The last [`ReachMap`] made, shared by clones (it depends only on the templates, the
    /// predictor, the task and the device).
    reach_cache: Arc<Mutex<Option<Arc<ReachMap>>>>,
}

/// Where a kernel would land in the archive, predicted before it is evaluated: the cell
/// coordinates a behaviour classifier gives the source at these parameters (a static
/// classifier's answer needs no evaluation), or `None` when it cannot say.
///
/// ```
/// use kf_mutate::CellPredictor;
/// // Cell by whether the kernel stages data in local memory.
/// let predict = CellPredictor::new(|source, _params| {
///     Some(vec![usize::from(source.text.contains("__local")), 0, 0])
/// });
/// # let _ = predict;
/// ```
#[derive(Clone)]
pub struct CellPredictor(Arc<PredictFn>);

/// What a [`CellPredictor`] calls.
type PredictFn = dyn Fn(&KernelSource, &ParamValues) -> Option<Vec<usize>> + Send + Sync;

impl CellPredictor {
    /// A predictor from a function of the source and its parameter values.
    pub fn new(
        predict: impl Fn(&KernelSource, &ParamValues) -> Option<Vec<usize>> + Send + Sync + 'static,
    ) -> Self {
        CellPredictor(Arc::new(predict))
    }

    /// The predicted cell of `source` at `params`.
    pub fn predict(&self, source: &KernelSource, params: &ParamValues) -> Option<Vec<usize>> {
        (self.0)(source, params)
    }
}

impl fmt::Debug for CellPredictor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CellPredictor(..)")
    }
}

impl StructuralMutator {
    /// A mutator over the given templates and strategies, named `structural`.
    pub fn new(templates: TemplateLibrary, strategies: StrategyLibrary) -> Self {
        StructuralMutator {
            name: "structural".to_owned(),
            templates,
            strategies,
            config: StructuralConfig::default(),
            predictor: None,
            reach_cache: Arc::default(),
        }
    }

    /// Aims each mutation at the archive's empty cells: [`StructuralConfig::pool`] children are
    /// drawn as usual, their cells predicted, and the [`StructuralConfig::children`] kept are
    /// first those predicted in an empty frontier cell ([`ArchiveHints::empty_frontier`]),
    /// then in any other empty cell (not in [`ArchiveHints::filled`]; where the archive lists
    /// no filled cells, any cell but the parent's), then in another filled cell, then the
    /// rest, each group in draw order.
    /// The strategy weights aim at levels of single dimensions; this aims at whole cells, which
    /// matters where a level is reached only in combination (a scalar accumulator *and* a
    /// sub-group broadcast, say). Still deterministic for a seed.
    pub fn predicting_cells(mut self, predictor: CellPredictor) -> Self {
        self.predictor = Some(predictor);
        // A map made with another predictor would place configurations in its cells.
        self.reach_cache = Arc::default();
        self
    }

    /// The shipped GEMM templates with the dense linear algebra strategies.
    pub fn builtin() -> Result<Self, MutateError> {
        Ok(Self::new(
            TemplateLibrary::builtin()?,
            StrategyLibrary::dense_linear_algebra(),
        ))
    }

    /// Replaces the settings.
    pub fn with_config(mut self, config: StructuralConfig) -> Self {
        self.config = config;
        self
    }

    /// Renames the mutator (the name is recorded in each child's origin).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The templates.
    pub fn templates(&self) -> &TemplateLibrary {
        &self.templates
    }

    /// The strategies.
    pub fn strategies(&self) -> &StrategyLibrary {
        &self.strategies
    }

    /// The settings.
    pub fn config(&self) -> &StructuralConfig {
        &self.config
    }

    fn weight(&self, strategy: &MutationStrategy, parent: &Elite, hints: &ArchiveHints) -> f64 {
        let mut w = strategy.base_weight().max(0.0);
        if !w.is_finite() {
            return 0.0;
        }
        let targets = strategy.target_levels();
        if targets.is_empty() {
            return w;
        }
        let dimension_index = |name: &str| {
            hints
                .space
                .as_ref()
                .and_then(|s| s.dimensions.iter().position(|d| d.name == name))
        };
        let aims_at_frontier = targets.iter().any(|t| {
            dimension_index(&t.dimension).is_some_and(|d| {
                hints
                    .empty_frontier
                    .iter()
                    .any(|cell| cell.get(d) == Some(&t.level))
            })
        });
        if aims_at_frontier {
            w *= self.config.frontier_bonus;
        }
        let all_same = targets.iter().all(|t| {
            dimension_index(&t.dimension)
                .is_some_and(|d| parent.descriptor.coords.get(d) == Some(&t.level))
        });
        if all_same && hints.space.is_some() {
            w *= self.config.same_cell_factor;
        }
        w
    }

    /// The children of `parent`, synchronously (what [`Mutator::mutate`] returns).
    pub fn children(
        &self,
        parent: &Elite,
        ctx: &MutationContext,
    ) -> Result<Vec<Offspring>, MutateError> {
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let source = &parent.candidate.source;
        // Start from the values the parent was measured with (a tuner may have moved them).
        let measured = parent.effective_params();
        let Some((template, structure, params)) = self.starting_point(source, &measured, ctx)
        else {
            return Ok(Vec::new());
        };
        let origin = (template, &structure, &params);

        let mut pool: Vec<(&MutationStrategy, f64)> = self
            .strategies
            .strategies()
            .iter()
            .map(|s| (s, self.weight(s, parent, &ctx.hints)))
            .filter(|(_, w)| w.is_finite() && *w > 0.0)
            .collect();
        let mut seen: HashSet<(String, String)> = HashSet::new();
        seen.insert((source.content_hash(), measured.canonical_key()));
        let mut children = Vec::new();
        let draws = match &self.predictor {
            Some(_) => self.config.pool.max(self.config.children),
            None => self.config.children,
        };
        while children.len() < draws && !pool.is_empty() {
            let Some(index) = draw_by_weight(&pool, &mut rng) else {
                break;
            };
            let (strategy, _) = pool.swap_remove(index);
            if let Some(child) = self.child_by(strategy, origin, ctx, &mut rng, &mut seen)? {
                children.push(child);
            }
        }
        if let Some(predictor) = &self.predictor {
            children = self.ranked_by_cell(children, parent, origin, ctx, predictor, &mut seen)?;
        }
        Ok(children)
    }

    /// The template, structure and parameters the strategies start from: the parent's own when
    /// it is a variant of one of the templates; otherwise the task's first template at its
    /// base (the parent is rewritten as it), or `None` when the task has no template.
    fn starting_point<'a>(
        &'a self,
        source: &KernelSource,
        measured: &ParamValues,
        ctx: &'a MutationContext,
    ) -> Option<(&'a Template, Structure, ParamValues)> {
        match self.templates.identify(source) {
            Some((t, s)) => Some((t, s, measured.clone())),
            None => {
                let t = self.templates.for_task(&ctx.task.name).next()?;
                Some((t, t.base().clone(), t.base_params().clone()))
            }
        }
    }

    /// The child `strategy` makes of the parent at `origin`: the moved variant with its
    /// parameters repaired into feasibility at the task's sizes; `None` when the strategy does
    /// not apply, the structure is ruled out, no feasible parameters were found, or the same
    /// kernel and parameters were already made (`seen`).
    fn child_by(
        &self,
        strategy: &MutationStrategy,
        (template, structure, params): (&Template, &Structure, &ParamValues),
        ctx: &MutationContext,
        rng: &mut ChaCha8Rng,
        seen: &mut HashSet<(String, String)>,
    ) -> Result<Option<Offspring>, MutateError> {
        let Some(m) = strategy.apply(&self.templates, template, structure, params, rng)? else {
            return Ok(None);
        };
        let Some(target) = self.templates.get(&m.template) else {
            return Ok(None);
        };
        let variant = match target.instantiate(&m.structure) {
            Ok(v) => v,
            // A structure the template's constraints rule out entirely.
            Err(MutateError::Template { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let space = Feasibility::new(&variant.manifest, &ctx.task.sizes, ctx.device.as_deref());
        let pinned: Vec<&str> = m.pinned.iter().map(String::as_str).collect();
        let Some(child_params) = space.repair(&m.params, &pinned, rng, self.config.repair_budget)
        else {
            return Ok(None);
        };
        if !seen.insert((variant.source.content_hash(), child_params.canonical_key())) {
            return Ok(None);
        }
        let note = format!(
            "{}: {} ({}; {} {})",
            strategy.name(),
            strategy.description(),
            m.note,
            variant.template,
            variant.structure
        );
        Ok(Some(Offspring::new(
            variant.source,
            child_params,
            Origin::mutator(self.name.clone()).with_note(note),
        )))
    }

    /// With a cell predictor: the children ordered by where they are predicted to land (an
    /// empty frontier cell first, then a cell the archive lacks, then another cell than the
    /// parent's), with a child that reaches an empty cell added when none of them aims at one
    /// ([`StructuralConfig::reach`]), cut to [`StructuralConfig::children`]; a child aimed at
    /// an empty cell records it, so that tuning keeps it there.
    fn ranked_by_cell(
        &self,
        children: Vec<Offspring>,
        parent: &Elite,
        origin: (&Template, &Structure, &ParamValues),
        ctx: &MutationContext,
        predictor: &CellPredictor,
        seen: &mut HashSet<(String, String)>,
    ) -> Result<Vec<Offspring>, MutateError> {
        let hints = &ctx.hints;
        let listed = !hints.filled.is_empty();
        let rank = |cell: Option<&Vec<usize>>| -> u8 {
            match cell {
                Some(cell) if hints.empty_frontier.contains(cell) => 0,
                Some(cell) if listed && !hints.filled.contains(cell) => 1,
                Some(cell) if !listed && *cell != parent.descriptor.coords => 1,
                Some(cell) if *cell != parent.descriptor.coords => 2,
                _ => 3,
            }
        };
        // A stable sort: draw order (the strategy weights) decides within a rank.
        let mut ranked: Vec<(u8, Option<Vec<usize>>, Offspring)> = children
            .into_iter()
            .map(|child| {
                let cell = predictor.predict(&child.source, &child.params);
                (rank(cell.as_ref()), cell, child)
            })
            .collect();
        ranked.sort_by_key(|(r, _, _)| *r);
        let aimed_somewhere = ranked.first().is_some_and(|(r, _, _)| *r <= 1);
        if !aimed_somewhere && self.config.reach {
            if let Some((child, cell, r)) = self.reach(origin, ctx, predictor, &rank, seen)? {
                // It takes the place of the last child kept.
                let at = ranked.len().min(self.config.children.saturating_sub(1));
                ranked.insert(at, (r, Some(cell), child));
            }
        }
        Ok(ranked
            .into_iter()
            .take(self.config.children)
            .map(|(r, cell, mut child)| {
                // Aimed at an empty cell: tuning is to keep it there.
                if r <= 1 {
                    child.origin.aimed_cell = cell;
                }
                child
            })
            .collect())
    }
}

/// The cells the templates of one task reach at its sizes on its device, each with the
/// configurations predicted there ([`StructuralConfig::reach`]).
#[derive(Debug)]
struct ReachMap {
    /// What the map was made for: the task's name and sizes, the device.
    key: String,
    /// Per predicted cell, up to [`REACH_EXAMPLES`] configurations, in enumeration order.
    cells: BTreeMap<Vec<usize>, Vec<ReachPoint>>,
}

/// One configuration of a [`ReachMap`].
#[derive(Debug)]
struct ReachPoint {
    template: String,
    structure: Structure,
    source: KernelSource,
    params: ParamValues,
    /// The source's content hash and the parameters' canonical key: what `seen` holds.
    seen_key: (String, String),
}

/// Configurations a [`ReachMap`] keeps per cell.
const REACH_EXAMPLES: usize = 16;

impl StructuralMutator {
    /// The reach pass of [`StructuralConfig::reach`]: of the configurations the task's
    /// [`ReachMap`] holds in cells `rank` calls empty (0 or 1), the best ranked, then the
    /// nearest the parent (fewest switches and parameters that differ), then the first
    /// mapped, not yet `seen`.
    fn reach(
        &self,
        (parent_template, parent_structure, parent_params): (&Template, &Structure, &ParamValues),
        ctx: &MutationContext,
        predictor: &CellPredictor,
        rank: &dyn Fn(Option<&Vec<usize>>) -> u8,
        seen: &mut HashSet<(String, String)>,
    ) -> Result<Option<(Offspring, Vec<usize>, u8)>, MutateError> {
        let map = self.reach_map(ctx, predictor)?;
        let distance = |point: &ReachPoint| {
            let switches = if point.template == parent_template.name() {
                point
                    .structure
                    .iter()
                    .filter(|(name, value)| parent_structure.get(name) != Some(*value))
                    .count()
            } else {
                point.structure.0.len() + parent_structure.0.len()
            };
            let params = point
                .params
                .iter()
                .filter(|(name, value)| parent_params.get(name) != Some(*value))
                .count();
            switches + params
        };
        let best = map
            .cells
            .iter()
            .map(|(cell, points)| (rank(Some(cell)), cell, points))
            .filter(|(r, _, _)| *r <= 1)
            .flat_map(|(r, cell, points)| points.iter().map(move |p| (r, cell, p)))
            .filter(|(_, _, p)| !seen.contains(&p.seen_key))
            .min_by_key(|(r, _, p)| (*r, distance(p)));
        Ok(best.map(|(r, cell, point)| {
            seen.insert(point.seen_key.clone());
            let note = format!(
                "reach: the mapped configuration nearest the parent in the empty cell {cell:?} ({} {}, {} switches and parameters changed)",
                point.template,
                point.structure,
                distance(point)
            );
            let child = Offspring::new(
                point.source.clone(),
                point.params.clone(),
                Origin::mutator(self.name.clone()).with_note(note),
            );
            (child, cell.clone(), r)
        }))
    }

    /// The [`ReachMap`] of `ctx`'s task and device, made on first use and kept while they
    /// stay the same. Every structure of every template for the task is instantiated and
    /// predicted at its base parameters, at every parameter's smallest and at every
    /// parameter's largest allowed value, and with one parameter at a time at either end
    /// (behaviour changes most at the ends: one output per work-item, no vectors), each
    /// repaired into feasibility at the task's sizes on the device.
    fn reach_map(
        &self,
        ctx: &MutationContext,
        predictor: &CellPredictor,
    ) -> Result<Arc<ReachMap>, MutateError> {
        let key = format!("{} {:?} {:?}", ctx.task.name, ctx.task.sizes, ctx.device);
        let mut cache = self.reach_cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(map) = cache.as_ref().filter(|m| m.key == key) {
            return Ok(Arc::clone(map));
        }
        // Repair breaks ties at random; a fixed seed keeps the map the same for every run.
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut cells: BTreeMap<Vec<usize>, Vec<ReachPoint>> = BTreeMap::new();
        for template in self.templates.for_task(&ctx.task.name) {
            for structure in template.all_structures() {
                let variant = match template.instantiate(&structure) {
                    Ok(v) => v,
                    Err(MutateError::Template { .. }) => continue,
                    Err(e) => return Err(e),
                };
                let space =
                    Feasibility::new(&variant.manifest, &ctx.task.sizes, ctx.device.as_deref());
                let base = space.complete(template.base_params());
                let names: Vec<String> = variant.manifest.params.keys().cloned().collect();
                let ends = |name: &str| {
                    let values = space.ordered_values(name);
                    values.first().cloned().zip(values.last().cloned())
                };
                let mut profiles: Vec<(ParamValues, Vec<&str>)> = vec![(base.clone(), Vec::new())];
                let (mut lows, mut highs) = (base.clone(), base.clone());
                for name in &names {
                    let Some((low, high)) = ends(name) else {
                        continue;
                    };
                    lows.set(name.clone(), low.clone());
                    highs.set(name.clone(), high.clone());
                    for value in [low, high] {
                        let mut p = base.clone();
                        p.set(name.clone(), value);
                        profiles.push((p, vec![name.as_str()]));
                    }
                }
                profiles.push((lows, Vec::new()));
                profiles.push((highs, Vec::new()));
                let mut mapped = HashSet::new();
                for (desired, pinned) in profiles {
                    let Some(params) =
                        space.repair(&desired, &pinned, &mut rng, REACH_REPAIR_BUDGET)
                    else {
                        continue;
                    };
                    if !mapped.insert(params.canonical_key()) {
                        continue;
                    }
                    let Some(cell) = predictor.predict(&variant.source, &params) else {
                        continue;
                    };
                    let points = cells.entry(cell).or_default();
                    if points.len() < REACH_EXAMPLES {
                        points.push(ReachPoint {
                            template: variant.template.clone(),
                            structure: variant.structure.clone(),
                            seen_key: (variant.source.content_hash(), params.canonical_key()),
                            source: variant.source.clone(),
                            params,
                        });
                    }
                }
            }
        }
        let map = Arc::new(ReachMap { key, cells });
        *cache = Some(Arc::clone(&map));
        Ok(map)
    }
}

#[async_trait]
impl Mutator for StructuralMutator {
    type Error = MutateError;

    fn name(&self) -> &str {
        &self.name
    }

    /// Templates are chosen by the task's name and instantiated at its sizes. Device facts are
    /// used when given.
    fn needs(&self) -> Needs {
        Needs::TASK
    }

    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Self::Error> {
        Ok(Mutation::free(self.children(parent, ctx)?))
    }
}
