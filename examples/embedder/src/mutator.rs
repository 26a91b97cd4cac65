//! The embedder's own mutator, mixed with the library's.

use kernelfoundry::core::prelude::*;
use kernelfoundry::core::{async_trait, Needs};

use crate::classifier::OUTPUT_FACTORS;

/// The embedder's own mutator: doubles the first output factor the parent has, from the values
/// it was measured with. Children the manifest rules out are left to the evaluator to reject.
pub struct MoreOutputsPerItem;

#[async_trait]
impl Mutator for MoreOutputsPerItem {
    type Error = std::convert::Infallible;

    fn name(&self) -> &str {
        "more-outputs"
    }

    fn needs(&self) -> Needs {
        Needs::NOTHING
    }

    async fn mutate(
        &self,
        parent: &Elite,
        _ctx: &MutationContext,
    ) -> Result<Mutation, Self::Error> {
        let params = parent.effective_params();
        let Some((name, value)) = OUTPUT_FACTORS
            .iter()
            .find_map(|n| params.get(n).and_then(ParamValue::as_i64).map(|v| (*n, v)))
        else {
            return Ok(Mutation::default());
        };
        let child = Offspring::new(
            parent.candidate.source.clone(),
            params.clone().with(name, value * 2),
            Origin::mutator(self.name()).with_note(format!("{name} {value} -> {}", value * 2)),
        );
        Ok(Mutation::free(vec![child]))
    }
}
