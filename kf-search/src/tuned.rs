//! [`TunedEvaluator`]: tunes each new kernel's parameters with a small kf-tune budget before it
//! is judged, so that a structural idea is not dismissed for a bad tile size.

use std::collections::BTreeMap;
use std::sync::Arc;

use indexmap::IndexMap;
use kf_core::{
    async_trait, Candidate, DeviceFacts, Evaluation, Evaluator, Fitness, KernelSource, ParamValues,
};
use kf_manifest::Manifest;
use kf_tune::{outcome_of, strategy, AsyncObjective, CacheKey, Outcome, ResultCache, Space, Tuner};

/// Wraps an evaluator: each candidate is evaluated with its own parameters, then its manifest's
/// space is searched with up to `budget - 1` more configurations by a kf-tune strategy; the
/// best evaluation (by [`Fitness`]) is returned, with the parameters it was measured with.
///
/// Tuning is seeded from the candidate's content hash and parameters, so a candidate is tuned
/// the same way in every run.
#[derive(Clone)]
pub struct TunedEvaluator<E> {
    inner: E,
    budget: usize,
    strategy: String,
    sizes: IndexMap<String, i64>,
    device: Arc<DeviceFacts>,
}

impl<E: Evaluator + Clone + 'static> TunedEvaluator<E> {
    /// Tunes with `budget` configurations per candidate (1 = no tuning) using the named kf-tune
    /// strategy, for a task at `sizes` on `device`.
    ///
    /// # Errors
    /// An unknown strategy name (with a budget above 1): it would otherwise mean no tuning for
    /// every kernel, silently.
    pub fn new(
        inner: E,
        budget: usize,
        strategy: impl Into<String>,
        sizes: IndexMap<String, i64>,
        device: DeviceFacts,
    ) -> Result<Self, kf_tune::TuneError> {
        let strategy = strategy.into();
        let budget = budget.max(1);
        if budget > 1 {
            strategy::by_name(&strategy)?;
        }
        Ok(TunedEvaluator {
            inner,
            budget,
            strategy,
            sizes,
            device: Arc::new(device),
        })
    }

    /// The wrapped evaluator.
    pub fn inner(&self) -> &E {
        &self.inner
    }
}

/// The objective the tuner sees: every configuration goes through the wrapped evaluator, and
/// the full evaluations are kept so the best one can be returned whole.
struct Collect<'a, E> {
    inner: &'a E,
    source: &'a KernelSource,
    seen: BTreeMap<String, Evaluation>,
    errors: Vec<String>,
}

#[async_trait]
impl<E: Evaluator> AsyncObjective for Collect<'_, E> {
    async fn evaluate(&mut self, config: &ParamValues) -> kf_tune::Result<Outcome> {
        let candidate = Candidate::seed(self.source.clone(), config.clone());
        match self.inner.evaluate(&candidate).await {
            Ok(e) => {
                let outcome = outcome_of(&e);
                self.seen.insert(config.canonical_key(), e);
                Ok(outcome)
            }
            Err(e) => {
                self.errors.push(e.to_string());
                Err(kf_tune::TuneError::Objective(e.to_string()))
            }
        }
    }
}

fn tuning_seed(source: &KernelSource, params: &ParamValues) -> u64 {
    let digest =
        blake3::hash(format!("{}|{}", source.content_hash(), params.canonical_key()).as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest.as_bytes()[..8]);
    u64::from_le_bytes(bytes)
}

#[async_trait]
impl<E: Evaluator + Clone + 'static> Evaluator for TunedEvaluator<E> {
    type Error = E::Error;

    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, E::Error> {
        let first = self.inner.evaluate(candidate).await?;
        if self.budget <= 1 {
            return Ok(first);
        }
        let Ok(manifest) = Manifest::from_kernel(&candidate.source) else {
            return Ok(first);
        };
        let Ok(space) = Space::from_manifest(&manifest, &self.sizes, &self.device) else {
            return Ok(first);
        };
        let own = if first.params.is_empty() {
            candidate.params.clone()
        } else {
            first.params.clone()
        };
        // The candidate's own configuration is already measured: the tuner gets it for free.
        let key = CacheKey::new(
            candidate.source.content_hash(),
            self.device.name.clone(),
            "",
        );
        let mut cache = ResultCache::in_memory();
        let _ = cache.insert(&key, &own, &outcome_of(&first));
        // The name was checked in `new`; a strategy that cannot be built leaves the candidate
        // untuned rather than failing its evaluation.
        let Ok(mut strategy) = strategy::by_name(&self.strategy) else {
            return Ok(first);
        };
        let mut objective = Collect {
            inner: &self.inner,
            source: &candidate.source,
            seen: BTreeMap::new(),
            errors: Vec::new(),
        };
        let tuner = Tuner::new(&space, self.budget - 1).seed(tuning_seed(&candidate.source, &own));
        // A tuning failure (the evaluator itself broke) leaves the first evaluation standing;
        // the engine hears of evaluator errors through the untuned path.
        let _ = tuner
            .run_async(strategy.as_mut(), &mut objective, Some((&mut cache, &key)))
            .await;
        // Ties keep the earlier configuration (the candidate's own first, then key order), so
        // the choice is deterministic.
        let mut best = first;
        for e in objective.seen.into_values() {
            if Fitness::of(&e) > Fitness::of(&best) {
                best = e;
            }
        }
        Ok(best)
    }
}
