//! Strategies: named transformations of a template variant, with preconditions, and the
//! library of them for dense linear algebra.

use kf_core::{ParamValue, ParamValues};
use rand::{Rng, RngCore};

use crate::error::MutateError;
use crate::preprocess::{eval_closed, Defines};
use crate::template::{Structure, Template, TemplateLibrary};

/// How a strategy changes one switch or parameter.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Change {
    /// Sets this value.
    Set(i64),
    /// The next larger allowed value.
    Up,
    /// The next smaller allowed value.
    Down,
    /// One of these values other than the current one, drawn at random (values the target
    /// does not allow are ignored).
    OneOf(Vec<i64>),
}

/// A descriptor level a strategy moves a kernel toward, by dimension name (for example
/// `memory_access` level 2 for local-memory tiling); used to aim at empty archive cells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Dimension name, as in [`kf_core::DescriptorSpace`].
    pub dimension: String,
    /// Level index on that dimension.
    pub level: usize,
}

/// A named transformation of a template variant: preconditions over the parent's switches and
/// parameters, changes to switches (structure) and parameters (starting values of the child),
/// optionally a move to another template, and the descriptor levels it aims at.
///
/// Preconditions are C-preprocessor expressions where every switch and integer parameter of
/// the parent is a macro and anything else is undefined (0), so `!defined(KS)` asks whether
/// the parent has no `KS`. A strategy applies only when every precondition holds, every
/// changed name exists in the target template, and the change does something.
///
/// # Example
///
/// ```
/// use kf_mutate::{Change, MutationStrategy};
///
/// let pad = MutationStrategy::new("pad-local", "pad local tiles by one float against bank conflicts")
///     .requires("(LOCAL_A || LOCAL_B) && PAD == 0")
///     .change("PAD", Change::Set(1));
/// assert_eq!(pad.name(), "pad-local");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct MutationStrategy {
    name: String,
    description: String,
    requires: Vec<String>,
    changes: Vec<(String, Change)>,
    to_template: Option<String>,
    targets: Vec<Target>,
    weight: f64,
}

/// What applying a strategy produced: the template, structure and parameter values the child
/// should start from, and which names the strategy chose (a repair must not undo them).
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    /// Template of the child.
    pub template: String,
    /// Structure of the child.
    pub structure: Structure,
    /// Starting parameter values (not yet checked against the constraints).
    pub params: ParamValues,
    /// Names the strategy set.
    pub pinned: Vec<String>,
    /// What changed, such as `LOCAL_B 0→1, PAD 4→1`.
    pub note: String,
}

impl MutationStrategy {
    /// A strategy with a name and a one-line description, weight 1, no preconditions and no
    /// changes.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        MutationStrategy {
            name: name.into(),
            description: description.into(),
            requires: Vec::new(),
            changes: Vec::new(),
            to_template: None,
            targets: Vec::new(),
            weight: 1.0,
        }
    }

    /// Adds a precondition.
    pub fn requires(mut self, condition: impl Into<String>) -> Self {
        self.requires.push(condition.into());
        self
    }

    /// Adds a change of a switch or parameter.
    pub fn change(mut self, name: impl Into<String>, change: Change) -> Self {
        self.changes.push((name.into(), change));
        self
    }

    /// Moves the child to another template (switches and parameters of the same name carry
    /// over).
    pub fn to_template(mut self, template: impl Into<String>) -> Self {
        self.to_template = Some(template.into());
        self
    }

    /// Adds a descriptor level the strategy aims at.
    pub fn targets(mut self, dimension: impl Into<String>, level: usize) -> Self {
        self.targets.push(Target {
            dimension: dimension.into(),
            level,
        });
        self
    }

    /// Sets the selection weight (default 1).
    pub fn weight(mut self, weight: f64) -> Self {
        self.weight = weight;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The descriptor levels it aims at.
    pub fn target_levels(&self) -> &[Target] {
        &self.targets
    }

    /// The selection weight.
    pub fn base_weight(&self) -> f64 {
        self.weight
    }

    /// Applies the strategy to a variant of `template` with `structure` and `params`;
    /// `Ok(None)` when it does not apply. Random choices ([`Change::OneOf`]) use `rng`.
    pub fn apply(
        &self,
        library: &TemplateLibrary,
        template: &Template,
        structure: &Structure,
        params: &ParamValues,
        rng: &mut dyn RngCore,
    ) -> Result<Option<Move>, MutateError> {
        if !self.preconditions_hold(structure, params)? {
            return Ok(None);
        }
        let target = match &self.to_template {
            Some(name) => match library.get(name) {
                Some(t) => t,
                None => return Ok(None),
            },
            None => template,
        };
        let moved = target.name() != template.name();
        let (mut new_structure, mut new_params) = carried_over(target, structure, params);
        let mut notes = Vec::new();
        if moved {
            notes.push(format!("template {}→{}", template.name(), target.name()));
        }
        let Some(pinned) =
            self.apply_changes(target, &mut new_structure, &mut new_params, &mut notes, rng)
        else {
            return Ok(None);
        };
        if !moved && notes.is_empty() {
            return Ok(None);
        }
        Ok(Some(Move {
            template: target.name().to_owned(),
            structure: new_structure,
            params: new_params,
            pinned,
            note: notes.join(", "),
        }))
    }

    /// Whether every precondition holds for the parent: its switches and integer parameters
    /// are the macros (a switch wins over a parameter of the same name), anything else is
    /// undefined.
    fn preconditions_hold(
        &self,
        structure: &Structure,
        params: &ParamValues,
    ) -> Result<bool, MutateError> {
        let mut env: Defines = structure.0.clone();
        for (k, v) in params.iter() {
            if let Some(i) = v.as_i64() {
                env.entry(k.to_owned()).or_insert(i);
            }
        }
        for condition in &self.requires {
            let holds = eval_closed(condition, &env).map_err(|e| MutateError::Strategy {
                strategy: self.name.clone(),
                message: e.to_string(),
            })?;
            if !holds {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Applies each change to the child's structure (switches) or parameters, noting what
    /// changed in `notes`; the names set (to pin), or `None` when a change names something the
    /// target lacks or has no value to move to.
    fn apply_changes(
        &self,
        target: &Template,
        new_structure: &mut Structure,
        new_params: &mut ParamValues,
        notes: &mut Vec<String>,
        rng: &mut dyn RngCore,
    ) -> Option<Vec<String>> {
        let mut pinned = Vec::new();
        for (name, change) in &self.changes {
            let (current, allowed) = current_and_allowed(target, name, new_structure, new_params)?;
            let value = pick(change, current, &allowed, rng)?;
            if current != Some(value) {
                notes.push(match current {
                    Some(c) => format!("{name} {c}→{value}"),
                    None => format!("{name}={value}"),
                });
            }
            if target.switches().contains_key(name) {
                new_structure.set(name.clone(), value);
            } else {
                new_params.set(name.clone(), value);
            }
            pinned.push(name.clone());
        }
        Some(pinned)
    }
}

/// The child's structure and starting parameters on `target`: the target's base, with the
/// parent's switches and parameters of the same name carried over where the target allows
/// their values (a parent's parameter may become a switch and the other way round).
fn carried_over(
    target: &Template,
    structure: &Structure,
    params: &ParamValues,
) -> (Structure, ParamValues) {
    let mut new_structure = target.base().clone();
    for (k, allowed) in target.switches() {
        if let Some(v) = structure
            .get(k)
            .or_else(|| params.get(k).and_then(ParamValue::as_i64))
        {
            if allowed.contains(&v) {
                new_structure.set(k.clone(), v);
            }
        }
    }
    let mut new_params = target.base_params().clone();
    for (k, allowed) in &target.manifest().params {
        if target.switches().contains_key(k) {
            continue;
        }
        let carried = params
            .get(k)
            .cloned()
            .or_else(|| structure.get(k).map(ParamValue::Int));
        if let Some(v) = carried {
            if allowed.iter().any(|a| crate::space::same(a, &v)) {
                new_params.set(k.clone(), v);
            }
        }
    }
    (new_structure, new_params)
}

/// The current value of the switch or integer parameter `name` in the child and the values
/// `target` allows for it (sorted, without repeats); `None` when the target has no such name.
fn current_and_allowed(
    target: &Template,
    name: &str,
    structure: &Structure,
    params: &ParamValues,
) -> Option<(Option<i64>, Vec<i64>)> {
    if let Some(allowed) = target.switches().get(name) {
        Some((structure.get(name), allowed.clone()))
    } else if let Some(values) = target.manifest().params.get(name) {
        let mut ints: Vec<i64> = values.iter().filter_map(ParamValue::as_i64).collect();
        ints.sort_unstable();
        ints.dedup();
        Some((params.get(name).and_then(ParamValue::as_i64), ints))
    } else {
        None
    }
}

fn pick(
    change: &Change,
    current: Option<i64>,
    allowed: &[i64],
    rng: &mut dyn RngCore,
) -> Option<i64> {
    match change {
        Change::Set(v) => allowed.contains(v).then_some(*v),
        Change::Up => {
            let c = current?;
            allowed.iter().copied().find(|v| *v > c)
        }
        Change::Down => {
            let c = current?;
            allowed.iter().rev().copied().find(|v| *v < c)
        }
        Change::OneOf(values) => {
            let options: Vec<i64> = values
                .iter()
                .copied()
                .filter(|v| allowed.contains(v) && Some(*v) != current)
                .collect();
            if options.is_empty() {
                None
            } else {
                Some(options[rng.random_range(0..options.len())])
            }
        }
    }
}

/// A library of named strategies.
///
/// # Example
///
/// ```
/// use kf_mutate::{Change, MutationStrategy, StrategyLibrary};
///
/// let library = StrategyLibrary::dense_linear_algebra().with(
///     MutationStrategy::new("wide-groups", "32 work-items share the columns of B")
///         .requires("WG1 < 32")
///         .change("WG1", Change::Set(32)),
/// );
/// assert!(library.get("local-tiling-b").is_some());
/// assert!(library.get("wide-groups").is_some());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrategyLibrary {
    strategies: Vec<MutationStrategy>,
}

/// Dimension names of the default descriptor space ([`kf_core::DescriptorSpace::kernel_default`]).
pub(crate) const MEMORY: &str = "memory_access";
pub(crate) const ALGORITHM: &str = "algorithm_structure";
pub(crate) const COORDINATION: &str = "parallel_coordination";

impl MutationStrategy {
    /// `wider-vectors`: doubles the `VW` switch (vector width of the loads) while it is between
    /// 1 and 16 exclusive; shared by the dense-linear-algebra and the softmax libraries.
    pub fn wider_vectors() -> Self {
        MutationStrategy::new("wider-vectors", "double the vector width of the loads")
            .requires("VW > 1 && VW < 16")
            .change("VW", Change::Up)
            .targets(MEMORY, 1)
    }
}

/// How the vector-width strategies describe scalar code where neighbouring work-items are
/// independent: what most families' `scalar-lanes` says.
pub(crate) const SCALAR_LANES: &str =
    "scalar code: the runtime packs neighbouring work-items into SIMD lanes";

/// The vector-width strategies of the families with a `VW` switch (1 for scalar code), in the
/// order their libraries list them: `vector-loads` (explicit 16, 8 or 4-float vectors from
/// scalar code, described by `loads`), [`MutationStrategy::wider_vectors`] and `scalar-lanes`
/// (back to scalar code, described by `lanes`, such as [`SCALAR_LANES`]). The GEMM templates
/// have their own (they also reshape the work-group).
pub(crate) fn vector_width_strategies(loads: &str, lanes: &str) -> [MutationStrategy; 3] {
    [
        MutationStrategy::new("vector-loads", loads)
            .requires("VW == 1")
            .change("VW", Change::OneOf(vec![16, 8, 4]))
            .targets(MEMORY, 1)
            .weight(1.5),
        MutationStrategy::wider_vectors(),
        MutationStrategy::new("scalar-lanes", lanes)
            .requires("VW > 1")
            .change("VW", Change::Set(1))
            .targets(MEMORY, 0)
            .weight(0.5),
    ]
}

impl StrategyLibrary {
    /// No strategies.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a strategy (replacing one of the same name).
    pub fn with(mut self, strategy: MutationStrategy) -> Self {
        self.strategies.retain(|s| s.name != strategy.name);
        self.strategies.push(strategy);
        self
    }

    /// The strategies.
    pub fn strategies(&self) -> &[MutationStrategy] {
        &self.strategies
    }

    /// The strategy of that name.
    pub fn get(&self, name: &str) -> Option<&MutationStrategy> {
        self.strategies.iter().find(|s| s.name == name)
    }

    /// Strategies for dense linear algebra over templates that follow the switch and parameter
    /// names of the shipped GEMM templates: `VW` (vector width), `LOCAL_A` / `LOCAL_B`
    /// (local-memory tiles), `PAD`, `DOUBLE_BUFFER`, `PREFETCH`, `SUBGROUP`, `TM` / `TN`
    /// (register block), `WG0` / `WG1` (work-group shape), `TK` (K tile), `UNROLL`, `KS`
    /// (K split), `KC` / `RB` / `CB` (cache blocking: outer K block, row blocks and column
    /// panels per group) and `PACK_B` (a packed B panel in local memory). A strategy whose names a template lacks does not apply to it, so the
    /// library is safe to use with any template.
    pub fn dense_linear_algebra() -> Self {
        StrategyLibrary::new()
            .with_all(register_block_strategies())
            .with_all(gemm_vector_strategies())
            .with_all(staging_strategies())
            .with_all(schedule_strategies())
            .with_all(cache_blocking_strategies())
            .with_all(k_split_strategies())
    }

    /// Adds each of `strategies` in turn ([`StrategyLibrary::with`]).
    pub(crate) fn with_all(self, strategies: impl IntoIterator<Item = MutationStrategy>) -> Self {
        strategies.into_iter().fold(self, StrategyLibrary::with)
    }
}

/// Register blocking: how many outputs each work-item computes in registers.
fn register_block_strategies() -> [MutationStrategy; 5] {
    let s = MutationStrategy::new;
    [
        s("register-blocking", "compute a block of outputs per work-item in registers")
            .requires("TM * TN < 8")
            .change("TM", Change::OneOf(vec![4, 8]))
            .change("TN", Change::OneOf(vec![2, 4]))
            .targets(ALGORITHM, 3)
            .weight(2.0),
        s("more-rows-per-item", "one more doubling of the rows each work-item computes")
            .requires("TM * TN < 32")
            .change("TM", Change::Up)
            .targets(ALGORITHM, 3),
        s("more-columns-per-item", "one more doubling of the columns each work-item computes")
            .requires("TM * TN < 32")
            .change("TN", Change::Up)
            .targets(ALGORITHM, 3),
        s("one-output-per-item", "no register block: each work-item computes one output (one vector of VW with vector loads), the point register blocking is measured against")
            .requires("TM * TN > 1")
            .change("TM", Change::Set(1))
            .change("TN", Change::Set(1))
            .targets(ALGORITHM, 1),
        s("fewer-outputs-per-item", "halve the register block (less register pressure, more parallelism)")
            .requires("TM * TN >= 4")
            .change("TM", Change::Down)
            .weight(0.5),
    ]
}

/// The vector width of the loads of B and stores of C, and scalar code the runtime vectorises.
fn gemm_vector_strategies() -> [MutationStrategy; 3] {
    let s = MutationStrategy::new;
    [
        s("vector-loads", "explicit vector loads (vloadN) of B and stores of C, one work-item wide in dimension 0")
            .requires("VW == 1 && !SUBGROUP")
            .change("VW", Change::OneOf(vec![16, 8, 4]))
            .change("WG0", Change::Set(1))
            .targets(MEMORY, 1)
            .weight(1.5),
        MutationStrategy::wider_vectors(),
        s("lanes-across-work-items", "scalar code, 16 work-items side by side in dimension 0 (the runtime vectorises across them)")
            .requires("VW > 1")
            .change("VW", Change::Set(1))
            .change("WG0", Change::Set(16))
            .targets(MEMORY, 0),
    ]
}

/// How A and B are staged on their way to the arithmetic: local-memory tiles, padding,
/// double buffering, prefetching.
fn staging_strategies() -> [MutationStrategy; 6] {
    let s = MutationStrategy::new;
    [
        s(
            "local-tiling-b",
            "stage K tiles of B in local memory, shared by the work-group",
        )
        .requires("!LOCAL_B")
        .change("LOCAL_B", Change::Set(1))
        .targets(MEMORY, 2)
        .targets(COORDINATION, 1)
        .weight(1.5),
        s(
            "local-tiling-a",
            "stage K tiles of A in local memory, shared by the work-group",
        )
        .requires("!LOCAL_A && !SUBGROUP")
        .change("LOCAL_A", Change::Set(1))
        .targets(MEMORY, 2)
        .targets(COORDINATION, 1),
        s(
            "pad-local",
            "pad local tiles by one float against bank conflicts",
        )
        .requires("(LOCAL_A || LOCAL_B || defined(KS)) && PAD == 0")
        .change("PAD", Change::Set(1)),
        s(
            "drop-local-memory",
            "read A and B straight from global memory (CPU caches may do the tiling)",
        )
        .requires("LOCAL_A || LOCAL_B")
        .change("LOCAL_A", Change::Set(0))
        .change("LOCAL_B", Change::Set(0))
        .change("DOUBLE_BUFFER", Change::Set(0))
        .targets(MEMORY, 1)
        .targets(COORDINATION, 0),
        s(
            "double-buffering",
            "two local B tiles: stage the next while computing on the current",
        )
        .requires("LOCAL_B && !DOUBLE_BUFFER")
        .change("DOUBLE_BUFFER", Change::Set(1))
        .targets(MEMORY, 3),
        s("prefetch", "prefetch the B rows of the next K tile")
            .requires("!PREFETCH")
            .change("PREFETCH", Change::Set(1))
            .targets(MEMORY, 3),
    ]
}

/// How the work-items of a group share data and walk the K loop: sub-group broadcasts,
/// unrolling, the group's shape and the K tile.
fn schedule_strategies() -> [MutationStrategy; 4] {
    let s = MutationStrategy::new;
    [
        s(
            "sub-group-broadcast",
            "each lane of a 16-wide sub-group loads one A value; sub_group_broadcast shares it",
        )
        .requires("!SUBGROUP && !LOCAL_A")
        .change("SUBGROUP", Change::Set(1))
        .change("VW", Change::Set(1))
        .change("WG0", Change::Set(16))
        .targets(COORDINATION, 2),
        s("unroll", "unroll the inner k loop further")
            .requires("UNROLL < 8")
            .change("UNROLL", Change::Up),
        s(
            "work-group-rows",
            "change how many work-items of a group share the same columns (cache reuse of B)",
        )
        .change("WG1", Change::OneOf(vec![4, 8, 16, 32])),
        s("k-tile", "change the K tile (cache blocking)")
            .change("TK", Change::OneOf(vec![64, 128, 256])),
    ]
}

/// Cache blocking over K and N, and a packed B panel in local memory.
fn cache_blocking_strategies() -> [MutationStrategy; 3] {
    let s = MutationStrategy::new;
    [
        s("cache-blocking", "block the K loop for the caches (KC rows of B at a time) and let each work-group walk several row blocks under the same B panel")
            .requires("defined(KC) && defined(RB)")
            .change("KC", Change::OneOf(vec![128, 256, 512]))
            .change("RB", Change::OneOf(vec![2, 4, 8]))
            .targets(MEMORY, 2),
        s("n-blocking", "block over N as well: each work-group walks CB column panels within one K block, so its block of A is read from memory once and from the L2 for the other panels (the repair gives a parent without KC its K block)")
            .requires("defined(CB) && CB == 1")
            .change("CB", Change::OneOf(vec![2, 4]))
            .targets(MEMORY, 2),
        s("pack-b-panel", "copy each KC x BN panel of B once into a contiguous local-memory layout and reuse it for the group's row blocks")
            .requires("defined(PACK_B) && !PACK_B && !SUBGROUP")
            .change("PACK_B", Change::Set(1))
            .change("LOCAL_B", Change::Set(0))
            .change("DOUBLE_BUFFER", Change::Set(0))
            .change("KC", Change::OneOf(vec![128, 256]))
            .change("RB", Change::OneOf(vec![2, 4]))
            .targets(MEMORY, 2)
            .targets(COORDINATION, 1),
    ]
}

/// Splitting the K loop across a group's work-items (the `gemm_ksplit` template) and back.
fn k_split_strategies() -> [MutationStrategy; 3] {
    let s = MutationStrategy::new;
    [
        s("split-k", "split the K loop across the work-items of a group and reduce the partial sums in local memory")
            .requires("!defined(KS)")
            .to_template("gemm_ksplit")
            .targets(MEMORY, 2)
            .targets(COORDINATION, 1)
            .weight(0.5),
        s("more-k-slices", "split K into more slices")
            .requires("defined(KS) && KS < 16")
            .change("KS", Change::Up),
        s("tiles-per-group", "give up the K split: each work-item runs the whole K loop over its register block")
            .requires("defined(KS)")
            .to_template("gemm_blocked")
            .targets(ALGORITHM, 3)
            .targets(COORDINATION, 0),
    ]
}
