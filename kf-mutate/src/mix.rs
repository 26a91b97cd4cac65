//! [`MixMutator`]: a seeded, weighted choice among mutators.

use kf_core::compose::BoxMutator;
use kf_core::{
    async_trait, Elite, InsertOutcome, Mutation, MutationContext, Mutator, Needs, Usage,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::MutateError;

/// Combines mutators: each mutation draws one of them by weight (seeded by `ctx.seed`) and
/// hands it the context with a seed derived for it; when the drawn mutator proposes no
/// children, the others are tried in a weighted random order. Credit goes to the mutator named
/// in the child's origin.
///
/// # Example
///
/// ```
/// use kf_mutate::{MixMutator, ParamMutator, StructuralMutator};
///
/// let mix = MixMutator::new()
///     .with(ParamMutator::new(), 2.0)
///     .with(StructuralMutator::builtin().unwrap(), 1.0);
/// assert_eq!(mix.names(), vec!["param", "structural"]);
/// ```
pub struct MixMutator {
    name: String,
    entries: Vec<(BoxMutator, f64)>,
}

impl std::fmt::Debug for MixMutator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixMutator")
            .field("name", &self.name)
            .field(
                "entries",
                &self
                    .entries
                    .iter()
                    .map(|(m, w)| (m.name().to_owned(), *w))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Default for MixMutator {
    fn default() -> Self {
        Self::new()
    }
}

/// SplitMix64: derives independent seeds from one.
fn derive_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15_u64.wrapping_mul(index.wrapping_add(1)));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl MixMutator {
    /// An empty mix named `mix` (add mutators with [`MixMutator::with`]).
    pub fn new() -> Self {
        MixMutator {
            name: "mix".to_owned(),
            entries: Vec::new(),
        }
    }

    /// Adds a mutator with a selection weight (weights need not sum to one; a weight that is
    /// not a positive finite number makes [`Mutator::mutate`] fail with a configuration
    /// error).
    pub fn with<M: Mutator + 'static>(mut self, mutator: M, weight: f64) -> Self {
        self.entries.push((BoxMutator::new(mutator), weight));
        self
    }

    /// Renames the mix.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Names of the combined mutators, in order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(m, _)| m.name()).collect()
    }

    fn check(&self) -> Result<(), MutateError> {
        if self.entries.is_empty() {
            return Err(MutateError::Config(
                "a MixMutator needs at least one mutator".into(),
            ));
        }
        for (m, w) in &self.entries {
            if !(w.is_finite() && *w > 0.0) {
                return Err(MutateError::Config(format!(
                    "mutator `{}` has weight {w}; weights must be positive",
                    m.name()
                )));
            }
        }
        Ok(())
    }

    /// The order in which the mutators are tried for a seed: weighted sampling without
    /// replacement.
    fn order(&self, seed: u64) -> Vec<usize> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut pool: Vec<(usize, f64)> = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, (_, w))| (i, *w))
            .collect();
        let mut order = Vec::with_capacity(pool.len());
        while !pool.is_empty() {
            let Some(pick) = draw_by_weight(&pool, &mut rng) else {
                // Weights too large to add up: fall back to declaration order.
                order.extend(pool.iter().map(|(i, _)| *i));
                break;
            };
            order.push(pool.swap_remove(pick).0);
        }
        order
    }
}

/// The index of an entry drawn from `pool` with probability proportional to its weight;
/// `None` when the weights do not add up to a positive, finite total. (Both the mix's order
/// and the structural mutator's strategies are drawn so, without replacement.)
pub(crate) fn draw_by_weight<T>(pool: &[(T, f64)], rng: &mut impl Rng) -> Option<usize> {
    let total: f64 = pool.iter().map(|(_, w)| w).sum();
    if !(total.is_finite() && total > 0.0) {
        return None;
    }
    let mut x = rng.random_range(0.0..total);
    let mut index = pool.len() - 1;
    for (i, (_, w)) in pool.iter().enumerate() {
        if x < *w {
            index = i;
            break;
        }
        x -= w;
    }
    Some(index)
}

#[async_trait]
impl Mutator for MixMutator {
    type Error = MutateError;

    fn name(&self) -> &str {
        &self.name
    }

    /// Whatever any of its mutators needs.
    fn needs(&self) -> Needs {
        self.entries
            .iter()
            .fold(Needs::NOTHING, |needs, (m, _)| needs.union(m.needs()))
    }

    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, Self::Error> {
        self.check()?;
        let mut usage = Usage::default();
        for i in self.order(ctx.seed) {
            let (mutator, _) = &self.entries[i];
            let mut inner = ctx.clone();
            inner.seed = derive_seed(ctx.seed, i as u64);
            let mutation =
                mutator
                    .mutate(parent, &inner)
                    .await
                    .map_err(|source| MutateError::Inner {
                        mutator: mutator.name().to_owned(),
                        source: source.into_inner(),
                    })?;
            usage.add(&mutation.usage);
            if !mutation.children.is_empty() {
                return Ok(Mutation {
                    children: mutation.children,
                    usage,
                });
            }
        }
        Ok(Mutation {
            children: Vec::new(),
            usage,
        })
    }

    fn credit(&self, child: &Elite, outcome: &InsertOutcome) {
        for (m, _) in &self.entries {
            if m.name() == child.candidate.origin.mutator {
                m.credit(child, outcome);
            }
        }
    }
}
