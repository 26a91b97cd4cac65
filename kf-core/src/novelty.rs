//! The novelty filter: children that repeat a kernel the run already evaluated are dropped
//! before they cost an evaluation.
//!
//! A [`Novelty`] implementation turns a kernel into a [`Signature`]: an exact key of its
//! normalised form (the shipped one, in `kf-search`, drops comments and whitespace, renames
//! identifiers and canonicalises parameter values), a group key (candidates are compared for
//! near-duplication only within a group: the shipped one groups by parameter values, so that a
//! parameter move is never a near-duplicate of its parent) and token shingles. The engine keeps
//! the signatures of every child it judged; a child with a known exact key is a duplicate, one
//! whose shingles overlap a known one of its group by at least [`NoveltyConfig::near_threshold`]
//! (Jaccard similarity) is a near-duplicate. Duplicates are never evaluated; near-duplicates
//! are dropped too unless [`NoveltyConfig::reject_near`] is off (then they are only counted).
//!
//! What a step may compare against is fixed when it is launched (the children judged by then,
//! and its own earlier children), so a seeded run filters the same children whatever the
//! timing of the steps in flight; a step's record counts what it dropped, so a resumed run
//! reports the same counts.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::kernel::{KernelSource, ParamValues};

/// What the filter compares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Signature {
    /// Equal for kernels that are the same after normalisation.
    pub exact: String,
    /// Near-duplicates are looked for only among signatures of the same group.
    pub group: String,
    /// Hashed token shingles, sorted and without repeats.
    pub shingles: Vec<u64>,
}

/// Computes signatures.
///
/// # Example
///
/// A signature that ignores case (a toy normalisation), used by an engine:
///
/// ```
/// use kf_core::novelty::{Novelty, NoveltyConfig, Signature};
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive};
///
/// struct CaseBlind;
///
/// impl Novelty for CaseBlind {
///     fn signature(&self, source: &KernelSource, params: &ParamValues) -> Signature {
///         let text = source.text.to_lowercase();
///         Signature {
///             exact: format!("{text}|{params:?}"),
///             group: format!("{params:?}"),
///             shingles: text.split_whitespace().map(|w| w.len() as u64).collect(),
///         }
///     }
/// }
///
/// let classifier = SyntheticClassifier::new(4);
/// let archive = VecArchive::new(classifier.space().clone());
/// let result = Engine::new(SyntheticMutator::new(0.1), SyntheticEvaluator::new(), classifier, archive)
///     .novelty(CaseBlind, NoveltyConfig::default())
///     .seeds(vec![synthetic_seed(3)])
///     .budget(Budget::evaluations(50))
///     .run_blocking()
///     .unwrap();
/// assert_eq!(result.summary.evaluations, 50);
/// ```
pub trait Novelty: Send + Sync {
    /// The signature of a kernel with these parameter values.
    fn signature(&self, source: &KernelSource, params: &ParamValues) -> Signature;
}

/// How the filter treats what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NoveltyConfig {
    /// Jaccard similarity of shingles from which a child is a near-duplicate (in `(0, 1]`;
    /// above 1 turns near-duplicate detection off).
    pub near_threshold: f64,
    /// Drop near-duplicates (true) or evaluate them and only count them (false).
    pub reject_near: bool,
}

impl Default for NoveltyConfig {
    fn default() -> Self {
        NoveltyConfig {
            near_threshold: 0.95,
            reject_near: true,
        }
    }
}

/// What the filter did in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoveltyCounts {
    /// Children dropped because they repeat an evaluated kernel.
    pub duplicates: u64,
    /// Near-duplicates found (dropped, unless the configuration only counts them).
    pub near_duplicates: u64,
}

impl NoveltyCounts {
    /// Adds another count to this one.
    pub fn add(&mut self, other: NoveltyCounts) {
        self.duplicates += other.duplicates;
        self.near_duplicates += other.near_duplicates;
    }

    /// True when nothing was found.
    pub fn is_zero(&self) -> bool {
        *self == NoveltyCounts::default()
    }
}

/// The filter's verdict on one child.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Verdict {
    Novel,
    Duplicate,
    NearDuplicate,
}

/// Jaccard similarity of two sorted, repeat-free lists of shingles (1 for two empty lists):
/// what [`NoveltyConfig::near_threshold`] is compared with.
///
/// ```
/// assert_eq!(kf_core::novelty::jaccard(&[1, 2, 3], &[2, 3, 4]), 0.5);
/// ```
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    common as f64 / (a.len() + b.len() - common) as f64
}

/// The signatures of every judged child, in the order they were judged.
#[derive(Debug, Default)]
pub(crate) struct NoveltyIndex {
    /// Exact key → position of its first appearance.
    exact: HashMap<String, usize>,
    /// Group → (position, shingles) of its members.
    groups: HashMap<String, Vec<(usize, Vec<u64>)>>,
    len: usize,
}

impl NoveltyIndex {
    /// Signatures registered so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Registers a judged child's signature.
    pub(crate) fn register(&mut self, signature: Signature) {
        let position = self.len;
        self.len += 1;
        if self.exact.contains_key(&signature.exact) {
            return;
        }
        self.exact.insert(signature.exact, position);
        self.groups
            .entry(signature.group)
            .or_default()
            .push((position, signature.shingles));
    }

    /// The verdict on `signature` against the first `visible` registered signatures and the
    /// `extra` ones (earlier children of the same step).
    pub(crate) fn verdict(
        &self,
        signature: &Signature,
        visible: usize,
        extra: &[Signature],
        config: &NoveltyConfig,
    ) -> Verdict {
        let known = self
            .exact
            .get(&signature.exact)
            .is_some_and(|&p| p < visible);
        if known || extra.iter().any(|s| s.exact == signature.exact) {
            return Verdict::Duplicate;
        }
        if config.near_threshold > 1.0 {
            return Verdict::Novel;
        }
        let near =
            |shingles: &[u64]| jaccard(shingles, &signature.shingles) >= config.near_threshold;
        let near_known = self.groups.get(&signature.group).is_some_and(|members| {
            members
                .iter()
                .take_while(|(p, _)| *p < visible)
                .any(|(_, s)| near(s))
        });
        let near_extra = extra
            .iter()
            .any(|s| s.group == signature.group && near(&s.shingles));
        if near_known || near_extra {
            Verdict::NearDuplicate
        } else {
            Verdict::Novel
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sig(exact: &str, group: &str, shingles: &[u64]) -> Signature {
        let mut shingles = shingles.to_vec();
        shingles.sort_unstable();
        shingles.dedup();
        Signature {
            exact: exact.into(),
            group: group.into(),
            shingles,
        }
    }

    #[test]
    fn duplicates_and_near_duplicates_are_found_only_among_what_is_visible() {
        let config = NoveltyConfig::default();
        let mut index = NoveltyIndex::default();
        let many: Vec<u64> = (0..100).collect();
        index.register(sig("a", "g", &many));
        let mut near: Vec<u64> = (0..99).collect();
        near.push(1000); // 99 of 101 shingles in common: 0.98
        let near = sig("b", "g", &near);
        assert_eq!(
            index.verdict(&sig("a", "x", &[]), 1, &[], &config),
            Verdict::Duplicate
        );
        assert_eq!(
            index.verdict(&sig("a", "x", &[]), 0, &[], &config),
            Verdict::Novel
        );
        assert_eq!(
            index.verdict(&near, 1, &[], &config),
            Verdict::NearDuplicate
        );
        let other_group = Signature {
            group: "h".into(),
            ..near.clone()
        };
        assert_eq!(index.verdict(&other_group, 1, &[], &config), Verdict::Novel);
        let off = NoveltyConfig {
            near_threshold: 1.5,
            ..config
        };
        assert_eq!(index.verdict(&near, 1, &[], &off), Verdict::Novel);
        // Earlier children of the same step count.
        let c = sig("c", "k", &[1, 2, 3]);
        assert_eq!(
            index.verdict(&c, 1, std::slice::from_ref(&c), &config),
            Verdict::Duplicate
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Jaccard similarity is symmetric, in [0, 1], and 1 exactly for equal sets.
        #[test]
        fn jaccard_is_a_similarity(a in proptest::collection::btree_set(0u64..64, 0..40),
                                   b in proptest::collection::btree_set(0u64..64, 0..40)) {
            let a: Vec<u64> = a.into_iter().collect();
            let b: Vec<u64> = b.into_iter().collect();
            let s = jaccard(&a, &b);
            prop_assert!((0.0..=1.0).contains(&s));
            prop_assert_eq!(s, jaccard(&b, &a));
            prop_assert_eq!(s == 1.0, a == b);
        }

        /// Whatever was registered, a registered exact key is a duplicate once visible, and a
        /// key never registered is never one.
        #[test]
        fn registered_keys_are_duplicates(keys in proptest::collection::vec(0u8..20, 1..40),
                                          probe in 20u8..40) {
            let mut index = NoveltyIndex::default();
            for k in &keys {
                index.register(sig(&k.to_string(), "g", &[u64::from(*k)]));
            }
            let config = NoveltyConfig { near_threshold: 2.0, reject_near: true };
            prop_assert_eq!(index.len(), keys.len());
            for k in &keys {
                let v = index.verdict(&sig(&k.to_string(), "g", &[]), index.len(), &[], &config);
                prop_assert_eq!(v, Verdict::Duplicate);
            }
            let v = index.verdict(&sig(&probe.to_string(), "g", &[]), index.len(), &[], &config);
            prop_assert_eq!(v, Verdict::Novel);
        }
    }
}
