//! The engine with a novelty filter: repeats are never evaluated, counts survive a resume.

use super::synthetic_engine;
use crate::kernel::{KernelSource, ParamValues};
use crate::novelty::{Novelty, NoveltyConfig, Signature};
use crate::test_support::Shared;

/// Signature by exact parameter values; shingles are the coordinates rounded to tenths
/// (so near-duplicates, at threshold 1, are points in the same box of a 10×10×10 grid),
/// all in one group.
struct ByParams;

impl Novelty for ByParams {
    fn signature(&self, _: &KernelSource, params: &ParamValues) -> Signature {
        let x: Vec<f64> = params.iter().filter_map(|(_, v)| v.as_f64()).collect();
        let shingles = x
            .iter()
            .enumerate()
            .map(|(i, v)| ((i as u64) << 32) | (v * 10.0).round() as u64)
            .collect();
        Signature {
            exact: format!("{x:?}"),
            group: String::new(),
            shingles,
        }
    }
}

/// Proposes the parent again and a Gaussian step from it.
struct Repeater(crate::testing::SyntheticMutator);

#[async_trait::async_trait]
impl crate::Mutator for Repeater {
    type Error = std::convert::Infallible;
    fn name(&self) -> &str {
        "repeater"
    }
    async fn mutate(
        &self,
        parent: &crate::Elite,
        ctx: &crate::MutationContext,
    ) -> Result<crate::Mutation, Self::Error> {
        let mut m = self.0.mutate(parent, ctx).await?;
        let c = &parent.candidate;
        let again = crate::Offspring::new(
            c.source.clone(),
            c.params.clone(),
            crate::Origin::mutator("repeater"),
        );
        m.children.insert(0, again);
        Ok(m)
    }
}

fn run_repeater(
    filter: Option<NoveltyConfig>,
    recorded: Vec<crate::StepRecord>,
) -> (crate::RunSummary, Vec<crate::Elite>, Vec<crate::StepRecord>) {
    use crate::testing::{synthetic_seed, SyntheticMutator};
    use crate::Archive;
    let checkpoint = Shared::holding(recorded);
    let mut engine = synthetic_engine(Repeater(SyntheticMutator::new(0.05)), synthetic_seed(3))
        .seed(4)
        .max_in_flight(3)
        .budget(crate::Budget::evaluations(80))
        .checkpoint(checkpoint.clone());
    if let Some(config) = filter {
        engine = engine.novelty(ByParams, config);
    }
    let result = engine.run_blocking().unwrap();
    let elites = result.archive.elites().into_iter().cloned().collect();
    let records = checkpoint.records();
    (result.summary, elites, records)
}

fn judged_params(records: &[crate::StepRecord]) -> Vec<String> {
    records
        .iter()
        .flat_map(|r| &r.children)
        .map(|c| format!("{:?}", c.candidate().params))
        .collect()
}

#[test]
fn the_engine_never_evaluates_a_repeat_and_counts_what_it_dropped() {
    let (plain, _, plain_records) = run_repeater(None, Vec::new());
    let mut seen = judged_params(&plain_records);
    let all = seen.len();
    seen.sort();
    seen.dedup();
    assert!(
        seen.len() < all,
        "without the filter, repeats are evaluated"
    );
    assert!(plain.novelty.is_zero());

    let exact_only = NoveltyConfig {
        near_threshold: 2.0,
        reject_near: true,
    };
    let (summary, _, records) = run_repeater(Some(exact_only), Vec::new());
    assert_eq!(summary.evaluations, 80);
    let mut judged = judged_params(&records);
    let n = judged.len();
    judged.sort();
    judged.dedup();
    assert_eq!(judged.len(), n, "every evaluated kernel is new");
    // Every step but the seed's proposed its parent again.
    assert!(
        summary.novelty.duplicates >= summary.steps - 1,
        "{:?} in {} steps",
        summary.novelty,
        summary.steps
    );
    assert_eq!(summary.novelty.near_duplicates, 0);
    let recorded: u64 = records.iter().map(|r| r.novelty.duplicates).sum();
    assert_eq!(recorded, summary.novelty.duplicates);

    // Near-duplicates: small steps often stay in their parent's box.
    let boxes = |records: &[crate::StepRecord]| {
        let mut b: Vec<Vec<u64>> = records
            .iter()
            .flat_map(|r| &r.children)
            .map(|c| {
                ByParams
                    .signature(&c.candidate().source, &c.candidate().params)
                    .shingles
            })
            .collect();
        let n = b.len();
        b.sort();
        b.dedup();
        n - b.len()
    };
    let reject = NoveltyConfig {
        near_threshold: 1.0,
        reject_near: true,
    };
    let (near, _, near_records) = run_repeater(Some(reject), Vec::new());
    assert!(near.novelty.near_duplicates > 0, "{:?}", near.novelty);
    assert_eq!(near.evaluations, 80);
    let count_only = NoveltyConfig {
        reject_near: false,
        ..reject
    };
    let (counted, _, counted_records) = run_repeater(Some(count_only), Vec::new());
    assert!(counted.novelty.near_duplicates > 0);
    assert!(
        boxes(&counted_records) > boxes(&near_records),
        "counted near-duplicates are evaluated, rejected ones are not"
    );
}

#[test]
fn a_filtered_run_is_reproducible_and_resumes_with_the_same_counts() {
    let config = NoveltyConfig::default();
    let (a, elites_a, records_a) = run_repeater(Some(config), Vec::new());
    let (b, _, records_b) = run_repeater(Some(config), Vec::new());
    assert_eq!(records_a, records_b);
    assert_eq!(a.novelty, b.novelty);
    for cut in [1, records_a.len() / 2, records_a.len() - 1] {
        let (resumed, elites, records) = run_repeater(Some(config), records_a[..cut].to_vec());
        assert_eq!(records, records_a, "cut at {cut}");
        assert_eq!(elites, elites_a);
        assert_eq!(resumed.novelty, a.novelty, "cut at {cut}");
    }
}
