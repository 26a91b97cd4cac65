//! [`TransformMutator`]: the transformations as a search's mutator.

use kf_core::{async_trait, Elite, Mutation, MutationContext, Mutator, Offspring, Origin};
use kf_mutate::CellPredictor;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::child::Transformed;
use crate::error::TransformError;
use crate::transformation::Transformation;

/// Offers the [`Transformation`]s that apply to the parent (an OpenCL C kernel with a
/// manifest, any task): each child is the parent rewritten by one of them, its origin note
/// naming it, its manifest declaring the tunables the transformation added (so the tuner and
/// the parameter moves follow) and the launch geometry it needs. Transformations are drawn
/// without replacement, the more valuable ones (earlier in [`Transformation::ALL`]) more
/// likely; with a [`CellPredictor`] the children predicted in the archive's empty cells come
/// first, as [`kf_mutate::StructuralMutator::predicting_cells`] does for templates.
///
/// Deterministic: the choices depend only on the parent, the hints and `ctx.seed` (ChaCha8).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use kf_core::prelude::*;
/// use kf_transform::TransformMutator;
///
/// let manifest = "entry = \"relu\"\nlanguage = \"opencl\"\n[launch]\nglobal = [\"n\"]\n";
/// let source = KernelSource::new(
///     Language::OpenCl,
///     "relu",
///     "__kernel void relu(__global const float* x, __global float* y, const int n) {\n    const int i = get_global_id(0);\n    y[i] = fmax(x[i], 0.0f);\n}\n",
/// )
/// .with_manifest(manifest);
/// let eval = Evaluation::failed(Status::WrongValues, "");
/// let parent = Elite {
///     candidate: Candidate::seed(source, ParamValues::new()),
///     fitness: Fitness::of(&eval),
///     evaluation: eval,
///     descriptor: Descriptor::new([0, 0, 0], "test"),
/// };
/// let ctx = MutationContext {
///     step: 1,
///     seed: 7,
///     task: Arc::new(Task::new("relu").with_size("n", 1000)),
///     device: None,
///     inspirations: Vec::new(),
///     hints: ArchiveHints::default(),
/// };
/// let mutation = futures::executor::block_on(TransformMutator::new().mutate(&parent, &ctx)).unwrap();
/// assert_eq!(mutation.children.len(), 2);
/// assert!(mutation.children.iter().all(|c| c.origin.note.contains(": ")));
/// ```
#[derive(Debug, Clone)]
pub struct TransformMutator {
    name: String,
    transformations: Vec<Transformation>,
    children: usize,
    predictor: Option<CellPredictor>,
}

impl Default for TransformMutator {
    fn default() -> Self {
        Self::new()
    }
}

impl TransformMutator {
    /// Every transformation, two children per mutation, named `transform`.
    pub fn new() -> Self {
        TransformMutator {
            name: "transform".to_owned(),
            transformations: Transformation::ALL.to_vec(),
            children: 2,
            predictor: None,
        }
    }

    /// Only these transformations (their order is their value).
    pub fn with_transformations(mut self, transformations: &[Transformation]) -> Self {
        self.transformations = transformations.to_vec();
        self
    }

    /// Children per mutation at most.
    pub fn with_children(mut self, children: usize) -> Self {
        self.children = children;
        self
    }

    /// Renames the mutator (recorded in each child's origin).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Puts the children predicted in the archive's empty cells first.
    pub fn predicting_cells(mut self, predictor: CellPredictor) -> Self {
        self.predictor = Some(predictor);
        self
    }

    /// The children of `parent`, synchronously (what [`Mutator::mutate`] returns).
    pub fn children(
        &self,
        parent: &Elite,
        ctx: &MutationContext,
    ) -> Result<Vec<Offspring>, TransformError> {
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let params = parent.effective_params();
        let mut pool: Vec<(usize, Transformation)> =
            self.transformations.iter().copied().enumerate().collect();
        let mut drawn: Vec<(Transformation, Transformed)> = Vec::new();
        let count = self.transformations.len();
        while !pool.is_empty() {
            // Weight count - rank: the first transformation is `count` times as likely as
            // the last.
            let weights: Vec<usize> = pool.iter().map(|(rank, _)| count - rank).collect();
            let total: usize = weights.iter().sum();
            let mut x = rng.random_range(0..total);
            let mut index = pool.len() - 1;
            for (i, w) in weights.iter().enumerate() {
                if x < *w {
                    index = i;
                    break;
                }
                x -= w;
            }
            let (_, transformation) = pool.swap_remove(index);
            if let Some(child) = transformation.apply(&parent.candidate.source, &params)? {
                drawn.push((transformation, child));
            }
        }
        if let Some(predictor) = &self.predictor {
            let hints = &ctx.hints;
            let listed = !hints.filled.is_empty();
            let rank = |child: &Transformed| -> u8 {
                match predictor.predict(&child.source, &child.params) {
                    Some(cell) if hints.empty_frontier.contains(&cell) => 0,
                    Some(cell) if listed && !hints.filled.contains(&cell) => 1,
                    Some(cell) if !listed && cell != parent.descriptor.coords => 1,
                    Some(cell) if cell != parent.descriptor.coords => 2,
                    _ => 3,
                }
            };
            drawn.sort_by_cached_key(|(_, child)| rank(child));
        }
        Ok(drawn
            .into_iter()
            .take(self.children)
            .map(|(transformation, child)| {
                Offspring::new(
                    child.source,
                    child.params,
                    Origin::mutator(self.name.clone())
                        .with_note(format!("{transformation}: {}", child.note)),
                )
            })
            .collect())
    }
}

#[async_trait]
impl Mutator for TransformMutator {
    type Error = TransformError;

    fn name(&self) -> &str {
        &self.name
    }

    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Self::Error> {
        Ok(Mutation::free(self.children(parent, ctx)?))
    }
}
