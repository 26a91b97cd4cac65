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
/// the parameter moves follow) and the launch geometry it needs. A child may also be made by
/// a chain of transformations (coarsened and unrolled, say; its note names them all).
/// Children are drawn without replacement, single steps and the more valuable
/// transformations (earlier in [`Transformation::ALL`]) more likely; with a [`CellPredictor`] the children predicted in the archive's empty cells come
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
        // Every chain of distinct transformations in their order of value (a child may be
        // coarsened, unrolled and qualified at once): the children that a single step makes
        // land in their parent's cell, and only the fastest of a cell stays in the archive to
        // be transformed further, so single steps alone run out after a few moves.
        let mut chains: Vec<(Vec<Transformation>, Transformed)> = Vec::new();
        let mut frontier: Vec<(Vec<Transformation>, Option<Transformed>)> =
            vec![(Vec::new(), None)];
        while let Some((chain, last)) = frontier.pop() {
            let from = chain
                .last()
                .and_then(|t| self.transformations.iter().position(|x| x == t))
                .map_or(0, |i| i + 1);
            for &transformation in &self.transformations[from..] {
                let (source, at) = match &last {
                    Some(child) => (&child.source, &child.params),
                    None => (&parent.candidate.source, &params),
                };
                if let Some(child) = transformation.apply(source, at)? {
                    let mut longer = chain.clone();
                    longer.push(transformation);
                    chains.push((longer.clone(), child.clone()));
                    frontier.push((longer, Some(child)));
                }
            }
        }
        // Drawn without replacement, weighted: shorter chains and more valuable first steps
        // are likelier.
        let count = self.transformations.len();
        let weight = |chain: &[Transformation]| -> usize {
            let first = chain
                .first()
                .and_then(|t| self.transformations.iter().position(|x| x == t))
                .unwrap_or(0);
            (count - first) * (count + 1 - chain.len().min(count))
        };
        let mut drawn: Vec<(Vec<Transformation>, Transformed)> = Vec::new();
        while !chains.is_empty() {
            let weights: Vec<usize> = chains.iter().map(|(c, _)| weight(c)).collect();
            let total: usize = weights.iter().sum();
            let mut x = rng.random_range(0..total.max(1));
            let mut index = chains.len() - 1;
            for (i, w) in weights.iter().enumerate() {
                if x < *w {
                    index = i;
                    break;
                }
                x -= w;
            }
            drawn.push(chains.swap_remove(index));
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
            .map(|(chain, child)| {
                let names: Vec<&str> = chain.iter().map(|t| t.name()).collect();
                Offspring::new(
                    child.source,
                    child.params,
                    Origin::mutator(self.name.clone()).with_note(format!(
                        "{}: {}",
                        names.join(" + "),
                        child.note
                    )),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kf_core::prelude::*;

    use super::*;

    fn parent() -> Elite {
        let manifest = "entry = \"scan\"\nlanguage = \"opencl\"\n[params]\nWG = [8]\n[launch]\nglobal = [\"((rows + WG - 1) / WG) * WG\"]\nlocal = [\"WG\"]\n";
        let text = "__kernel void scan(__global float* x, __global float* out, const int rows, const int n) {\n    const int r = get_global_id(0);\n    if (r >= rows) {\n        return;\n    }\n    float acc = 0.0f;\n    for (int i = 0; i < n; ++i) {\n        acc += x[r * n + i];\n        out[r * n + i] = acc;\n    }\n}\n";
        let source = KernelSource::new(Language::OpenCl, "scan", text).with_manifest(manifest);
        let eval = Evaluation::failed(Status::WrongValues, "");
        Elite {
            candidate: Candidate::seed(source, ParamValues::new().with("WG", 8i64)),
            fitness: Fitness::of(&eval),
            evaluation: eval,
            descriptor: Descriptor::new([0, 0, 0], "test"),
        }
    }

    fn ctx(seed: u64) -> MutationContext {
        MutationContext {
            step: 1,
            seed,
            task: Arc::new(Task::new("scan").with_size("rows", 37)),
            device: None,
            inspirations: Vec::new(),
            hints: ArchiveHints::default(),
        }
    }

    /// Chains of transformations are offered beside single steps, a seed gives the same
    /// children every time, and a chain's manifest declares every step's tunables.
    #[test]
    fn chains_are_offered_deterministically() {
        let mutator = TransformMutator::new().with_children(4);
        let mut chained = 0;
        for seed in 0..8 {
            let a = mutator.children(&parent(), &ctx(seed)).unwrap();
            let b = mutator.children(&parent(), &ctx(seed)).unwrap();
            assert_eq!(a, b);
            assert_eq!(a.len(), 4);
            for child in a.iter().filter(|c| c.origin.note.contains(" + ")) {
                chained += 1;
                let manifest = kf_manifest::Manifest::from_kernel(&child.source).unwrap();
                let steps = crate::applied(&child.source);
                assert!(steps.len() >= 2, "{steps:?}");
                if steps.iter().any(|s| s.starts_with("coarsen"))
                    && steps.contains(&"unroll".into())
                {
                    assert!(manifest.params.contains_key("COARSEN"));
                    assert!(manifest.params.contains_key("UNROLL"));
                }
            }
        }
        assert!(chained > 0, "no chain offered in 8 seeds");
    }

    /// A qualified kernel (an archived elite `qualify` made) is still transformed: its
    /// `KF_RESTRICT` macro does not stop the parser.
    #[test]
    fn a_qualified_kernel_is_transformed_further() {
        let parent = parent();
        let params = parent.candidate.params.clone();
        let qualified = Transformation::Qualify
            .apply(&parent.candidate.source, &params)
            .unwrap()
            .expect("the scan kernel is qualified");
        assert!(qualified.source.text.contains("KF_RESTRICT"));
        let unrolled = Transformation::Unroll
            .apply(&qualified.source, &qualified.params)
            .unwrap()
            .expect("the qualified kernel is unrolled");
        assert_eq!(
            crate::applied(&unrolled.source),
            ["qualify".to_owned(), "unroll".to_owned()]
        );
    }
}
