//! [`ParamMutator`]: moves within a kernel manifest's parameter space.

use std::collections::HashSet;

use kf_core::{async_trait, Elite, Mutation, MutationContext, Mutator, Needs, Offspring, Origin};
use kf_manifest::Manifest;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::MutateError;
use crate::space::Feasibility;

/// Settings of a [`ParamMutator`].
#[derive(Debug, Clone, PartialEq)]
pub struct ParamMutatorConfig {
    /// Children per mutation at most (fewer when the neighbourhood has fewer feasible
    /// configurations).
    pub children: usize,
    /// Probability that a child moves two parameters instead of one (when both kinds of move
    /// are left).
    pub two_step_probability: f64,
    /// Parameters a child may change: 1 (Hamming-1 moves only) or 2 (Hamming-1 and -2; once
    /// the one-parameter moves run out, two-parameter moves fill up the children).
    pub max_changes: usize,
}

impl Default for ParamMutatorConfig {
    fn default() -> Self {
        ParamMutatorConfig {
            children: 4,
            two_step_probability: 0.3,
            max_changes: 2,
        }
    }
}

/// Moves a parent's parameters within its manifest's space: each child changes one parameter
/// (or, with [`ParamMutatorConfig::two_step_probability`], two) to an adjacent allowed value —
/// Hamming distance 1 or 2 in the space of value indices — and satisfies the manifest's
/// constraints at the task's sizes on the context's device (device-dependent rules are skipped
/// when the context has no device facts). Children are distinct from each other and from the
/// parent; the kernel source (and its manifest) is the parent's. Works for any kernel that
/// carries a manifest; a parent without one gets no children.
///
/// Deterministic: the choices depend only on the parent and `ctx.seed` (ChaCha8).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use kf_core::prelude::*;
/// use kf_mutate::ParamMutator;
///
/// let manifest = r#"
/// entry = "gemm"
/// language = "opencl"
/// [params]
/// TS = [8, 16, 32]
/// WPT = [1, 2, 4]
/// [constraints]
/// rules = ["TS % WPT == 0", "M % TS == 0"]
/// [launch]
/// global = ["N", "M / WPT"]
/// local = ["TS", "TS / WPT"]
/// "#;
/// let source = KernelSource::new(Language::OpenCl, "gemm", "/* … */").with_manifest(manifest);
/// let params = ParamValues::new().with("TS", 16i64).with("WPT", 2i64);
/// let eval = Evaluation::failed(Status::WrongValues, "");
/// let parent = Elite {
///     candidate: Candidate::seed(source, params),
///     fitness: Fitness::of(&eval),
///     evaluation: eval,
///     descriptor: Descriptor::new([0, 0, 0], "test"),
/// };
/// let ctx = MutationContext {
///     step: 1,
///     seed: 42,
///     task: Arc::new(Task::new("gemm").with_size("M", 64).with_size("N", 64).with_size("K", 64)),
///     device: None,
///     inspirations: Vec::new(),
///     hints: ArchiveHints::default(),
/// };
/// let mutation = futures::executor::block_on(ParamMutator::new().mutate(&parent, &ctx)).unwrap();
/// assert!(!mutation.children.is_empty());
/// for child in &mutation.children {
///     assert_ne!(child.params, parent.effective_params());
/// }
/// ```
#[derive(Debug, Clone)]
pub struct ParamMutator {
    name: String,
    config: ParamMutatorConfig,
}

impl Default for ParamMutator {
    fn default() -> Self {
        Self::new()
    }
}

impl ParamMutator {
    /// A parameter mutator named `param` with the default settings.
    pub fn new() -> Self {
        ParamMutator {
            name: "param".to_owned(),
            config: ParamMutatorConfig::default(),
        }
    }

    /// Replaces the settings.
    pub fn with_config(mut self, config: ParamMutatorConfig) -> Self {
        self.config = config;
        self
    }

    /// Renames the mutator (the name is recorded in each child's origin).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The settings.
    pub fn config(&self) -> &ParamMutatorConfig {
        &self.config
    }

    /// The children of `parent`, synchronously (what [`Mutator::mutate`] returns).
    pub fn children(&self, parent: &Elite, ctx: &MutationContext) -> Vec<Offspring> {
        let source = &parent.candidate.source;
        let Ok(manifest) = Manifest::from_kernel(source) else {
            return Vec::new();
        };
        let space = Feasibility::new(&manifest, &ctx.task.sizes, ctx.device.as_deref());
        // Start from the values the parent was measured with (a tuner may have moved them).
        let measured = parent.effective_params();
        let current = space.complete(&measured);
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);

        let steps = space.steps(&current);
        let mut singles: Vec<usize> = (0..steps.len()).collect();
        singles.shuffle(&mut rng);
        let mut doubles: Vec<(usize, usize)> = Vec::new();
        for a in 0..steps.len() * usize::from(self.config.max_changes >= 2) {
            for b in a + 1..steps.len() {
                if steps[a].0 != steps[b].0 {
                    doubles.push((a, b));
                }
            }
        }
        doubles.shuffle(&mut rng);

        let p_two = if self.config.two_step_probability.is_finite() {
            self.config.two_step_probability.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let mut seen: HashSet<String> = HashSet::new();
        seen.insert(current.canonical_key());
        seen.insert(measured.canonical_key());
        let (mut si, mut di) = (0usize, 0usize);
        let mut children = Vec::new();
        while children.len() < self.config.children && (si < singles.len() || di < doubles.len()) {
            let two = di < doubles.len() && (si >= singles.len() || rng.random_bool(p_two));
            let (params, note) = if two {
                let (a, b) = doubles[di];
                di += 1;
                let mut p = current.clone();
                p.set(steps[a].0.clone(), steps[a].1.clone());
                p.set(steps[b].0.clone(), steps[b].1.clone());
                (p, format!("{}, {}", steps[a].2, steps[b].2))
            } else {
                let a = singles[si];
                si += 1;
                let mut p = current.clone();
                p.set(steps[a].0.clone(), steps[a].1.clone());
                (p, steps[a].2.clone())
            };
            if !seen.insert(params.canonical_key()) || !space.is_feasible(&params) {
                continue;
            }
            children.push(Offspring::new(
                source.clone(),
                params,
                Origin::mutator(self.name.clone()).with_note(note),
            ));
        }
        children
    }
}

#[async_trait]
impl Mutator for ParamMutator {
    type Error = MutateError;

    fn name(&self) -> &str {
        &self.name
    }

    /// The task's sizes decide which values are feasible; without them every constraint that
    /// names a size fails and no child is proposed. Device facts are used when given (without
    /// them device limits are left to the evaluator).
    fn needs(&self) -> Needs {
        Needs::TASK
    }

    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Self::Error> {
        Ok(Mutation::free(self.children(parent, ctx)))
    }
}
