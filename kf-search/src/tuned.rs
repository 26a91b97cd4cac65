//! [`TunedEvaluator`]: tunes each new kernel's parameters with a small kf-tune budget before it
//! is judged, so that a structural idea is not dismissed for a bad tile size.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::DeviceEvaluations;
use indexmap::IndexMap;
use kf_core::{
    async_trait, Candidate, DeviceFacts, Evaluation, Evaluator, Fitness, KernelSource, ParamValues,
};
use kf_manifest::Manifest;
use kf_mutate::CellPredictor;
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
    count: DeviceEvaluations,
    cell: Option<CellPredictor>,
    close_call: Option<f64>,
}

/// The close-call margin the shipped local search uses ([`TunedEvaluator::remeasuring_close_calls`]):
/// a tuned configuration less than 25% faster than the candidate's own is measured again beside
/// it. Evaluations a few seconds apart on the 2-core test machine differed by 15–20% for the
/// same kernel (a GEMM start measured below a configuration that, timed alternately three times
/// afterwards, ran at 197–200 GFLOP/s against the start's 230–237).
pub const CLOSE_CALL_MARGIN: f64 = 0.25;

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
            count: DeviceEvaluations::default(),
            cell: None,
            close_call: None,
        })
    }

    /// Counts every configuration it sends to the device into `count`, and tunes within its
    /// limit: a candidate is tuned with at most the evaluations the limit leaves after the
    /// candidate's own.
    pub fn counting(mut self, count: DeviceEvaluations) -> Self {
        self.count = count;
        self
    }

    /// Keeps a candidate a mutator aimed at a cell ([`kf_core::Origin::aimed_cell`]) in that
    /// cell: the best configuration is chosen among those the predictor places there (others
    /// are still measured and counted). Without it, tuning may carry a kernel aimed at an empty
    /// cell into an occupied one (a scalar-accumulator GEMM tuned into a register-blocked one),
    /// and the archive never sees the cell the mutation was for. Candidates not aimed anywhere
    /// (parameter moves, LLM kernels, seeds) are tuned freely.
    pub fn keeping_cell(mut self, predictor: CellPredictor) -> Self {
        self.cell = Some(predictor);
        self
    }

    /// Settles close calls by measuring again: when tuning picks a configuration other than
    /// the candidate's own and its median time is less than `margin` (a fraction: 0.25 is 25%)
    /// faster, both are evaluated once more, back to back (the candidate's own first), and the
    /// faster of the two new measurements is returned. A winner picked by one lucky
    /// measurement, minutes or seconds after the candidate's own on a noisy machine, would
    /// otherwise replace a better configuration (a search's own starting point, say) for the
    /// rest of the run. Both re-measurements are full evaluations (verified again, counted
    /// as device evaluations, within the limit; none when fewer than two are left); a
    /// re-measurement that is not correct loses. Off unless set (the shipped local search sets
    /// [`CLOSE_CALL_MARGIN`]); pointless where equal configurations are answered from a
    /// stored result, as distributed jobs are.
    pub fn remeasuring_close_calls(mut self, margin: f64) -> Self {
        self.close_call = (margin.is_finite() && margin > 0.0).then_some(margin);
        self
    }

    /// Evaluates `own` (the candidate's own configuration) and `winner` again, back to back,
    /// when `winner` won by less than the close-call margin; the faster correct
    /// re-measurement, or `None` when there is no close call, the limit leaves fewer than two
    /// evaluations, or the evaluator failed (the first choice stands).
    async fn settle_close_call(
        &self,
        source: &KernelSource,
        own_params: &ParamValues,
        own: &Evaluation,
        winner: &Evaluation,
    ) -> Option<(Evaluation, u32)> {
        let margin = self.close_call?;
        if winner.params.is_empty() {
            return None;
        }
        if !(own.status.is_correct() && winner.status.is_correct()) {
            return None;
        }
        let (own_s, winner_s) = (own.timing?.median_s, winner.timing?.median_s);
        if !(own_s.is_finite() && winner_s.is_finite() && winner_s > 0.0)
            || own_s / winner_s >= 1.0 + margin
        {
            return None;
        }
        if self.count.remaining().is_some_and(|left| left < 2) {
            return None;
        }
        let mut again = Vec::with_capacity(2);
        for params in [own_params, &winner.params] {
            self.count.add(1);
            let candidate = Candidate::seed(source.clone(), params.clone());
            again.push(self.inner.evaluate(&candidate).await.ok()?);
        }
        let winner_again = again.pop()?;
        let own_again = again.pop()?;
        let median = |e: &Evaluation| {
            e.status
                .is_correct()
                .then(|| e.timing.map(|t| t.median_s))
                .flatten()
                .filter(|s| s.is_finite())
        };
        let chosen = match (median(&own_again), median(&winner_again)) {
            (Some(o), Some(w)) if w < o => winner_again,
            (Some(_), _) => own_again,
            (None, Some(_)) => winner_again,
            // Neither is correct now: a flaky kernel; report the winner's failure.
            (None, None) => winner_again,
        };
        Some((chosen, 2))
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
    /// Configurations sent to the evaluator (each one compiled and, when it built, timed).
    calls: u32,
    /// The run's device evaluations, counted as they are spent.
    count: &'a DeviceEvaluations,
}

#[async_trait]
impl<E: Evaluator> AsyncObjective for Collect<'_, E> {
    async fn evaluate(&mut self, config: &ParamValues) -> kf_tune::Result<Outcome> {
        let candidate = Candidate::seed(self.source.clone(), config.clone());
        self.calls = self.calls.saturating_add(1);
        self.count.add(1);
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
        // Counted as spent before the device runs it: a configuration that crashed its worker
        // ran all the same.
        self.count.add(1);
        let first = self.inner.evaluate(candidate).await?;
        // Tuning gets what the limit leaves after the candidate's own evaluation.
        let tune_budget = match self.count.remaining() {
            Some(left) => (self.budget - 1).min(usize::try_from(left).unwrap_or(usize::MAX)),
            None => self.budget - 1,
        };
        if tune_budget == 0 {
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
            calls: 0,
            count: &self.count,
        };
        let tuner = Tuner::new(&space, tune_budget).seed(tuning_seed(&candidate.source, &own));
        // A tuning failure (the evaluator itself broke) leaves the first evaluation standing;
        // the engine hears of evaluator errors through the untuned path.
        let _ = tuner
            .run_async(strategy.as_mut(), &mut objective, Some((&mut cache, &key)))
            .await;
        // Ties keep the earlier configuration (the candidate's own first, then key order), so
        // the choice is deterministic.
        // Only a child a mutator aimed at a cell is held there; any other is tuned freely.
        let own_cell = match (&self.cell, &candidate.origin.aimed_cell) {
            (Some(_), Some(cell)) => Some(cell.clone()),
            _ => None,
        };
        let in_cell = |e: &Evaluation| match (&self.cell, &own_cell) {
            (Some(p), Some(cell)) => {
                p.predict(&candidate.source, &e.effective_params(candidate))
                    .as_ref()
                    == Some(cell)
            }
            _ => true,
        };
        let mut best = first.clone();
        for e in objective.seen.into_values() {
            if Fitness::of(&e) > Fitness::of(&best) && in_cell(&e) {
                best = e;
            }
        }
        let mut calls = objective.calls;
        if best.params.canonical_key() != own.canonical_key() {
            if let Some((settled, extra)) = self
                .settle_close_call(&candidate.source, &own, &first, &best)
                .await
            {
                best = settled;
                calls = calls.saturating_add(extra);
            }
        }
        best.tuning_evaluations = calls;
        Ok(best)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use kf_core::{Language, ParamValue, TimingStats};

    use super::*;

    const MANIFEST: &str = "entry = \"k\"\nlanguage = \"opencl\"\n[params]\n\
                            TS = [1, 2, 4, 8, 16, 32, 64, 128]\n\
                            [launch]\nglobal = [\"N\"]\nlocal = [\"TS\"]\n";

    /// An evaluator that counts the configurations it is given (what a device would compile
    /// and time) and makes larger TS faster.
    #[derive(Clone, Default)]
    struct Counting(Arc<AtomicU32>);

    #[async_trait]
    impl Evaluator for Counting {
        type Error = std::convert::Infallible;
        async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
            self.0.fetch_add(1, Ordering::SeqCst);
            let ts = match c.params.get("TS") {
                Some(ParamValue::Int(v)) => *v as f64,
                _ => 1.0,
            };
            let timing = TimingStats::from_samples(&[1.0 / ts]).unwrap();
            let mut e = Evaluation::correct(timing, None);
            e.gflops = Some(ts);
            e.params = c.params.clone();
            Ok(e)
        }
    }

    fn tuned(budget: usize, count: DeviceEvaluations) -> (TunedEvaluator<Counting>, Counting) {
        let inner = Counting::default();
        let mut device = DeviceFacts::unknown("test device");
        device.max_work_group_size = 1024;
        device.max_work_item_sizes = vec![1024, 1024, 1024];
        let sizes: IndexMap<String, i64> = [("N".to_owned(), 4096)].into_iter().collect();
        let t = TunedEvaluator::new(inner.clone(), budget, "random", sizes, device)
            .unwrap()
            .counting(count);
        (t, inner)
    }

    fn candidate() -> Candidate {
        let source = KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}\n")
            .with_manifest(MANIFEST);
        Candidate::seed(source, ParamValues::new().with("TS", 1i64))
    }

    #[test]
    fn the_evaluation_says_how_many_configurations_the_device_ran() {
        let count = DeviceEvaluations::default();
        let (t, inner) = tuned(5, count.clone());
        let e = futures::executor::block_on(t.evaluate(&candidate())).unwrap();
        let ran = inner.0.load(Ordering::SeqCst);
        assert_eq!(ran, 5, "the candidate's own and four tuned configurations");
        assert_eq!(count.spent(), u64::from(ran));
        assert_eq!(e.device_evaluations(), u64::from(ran));
        assert_eq!(e.tuning_evaluations, ran - 1);
    }

    /// Keeping the cell: of the configurations tuned, the best one in the cell the candidate
    /// was aimed at wins, though faster ones elsewhere were measured; a candidate aimed nowhere
    /// is tuned freely.
    #[test]
    fn tuning_keeps_the_candidate_in_its_predicted_cell() {
        let ts = |p: &ParamValues| match p.get("TS") {
            Some(ParamValue::Int(v)) => *v,
            _ => 0,
        };
        // Cell 0 for TS up to 4, cell 1 above.
        let predictor = CellPredictor::new(move |_, p| Some(vec![usize::from(ts(p) > 4)]));
        let (free, _) = tuned(8, DeviceEvaluations::default());
        let (kept, inner) = tuned(8, DeviceEvaluations::default());
        let kept = kept.keeping_cell(predictor);
        let mut aimed = candidate();
        aimed.origin.aimed_cell = Some(vec![0]);
        let free = futures::executor::block_on(free.evaluate(&aimed)).unwrap();
        let e = futures::executor::block_on(kept.evaluate(&aimed)).unwrap();
        assert!(
            ts(&free.params) > 4,
            "untied tuning leaves the cell: {:?}",
            free.params
        );
        assert!(ts(&e.params) <= 4, "{:?}", e.params);
        assert!(
            ts(&e.params) > 1,
            "a better configuration within the cell: {:?}",
            e.params
        );
        assert_eq!(inner.0.load(Ordering::SeqCst), 8, "all still measured");
        let unaimed = futures::executor::block_on(kept.evaluate(&candidate())).unwrap();
        assert_eq!(
            unaimed.params, free.params,
            "not aimed: tuned as without the predictor"
        );
    }

    const TWO: &str = "entry = \"k\"\nlanguage = \"opencl\"\n[params]\nTS = [1, 2]\n\
                       [launch]\nglobal = [\"N\"]\nlocal = [\"TS\"]\n";

    /// A noisy device: TS=1 takes `own_first` seconds on its first evaluation and 0.8 after
    /// (the machine was busy at first), TS=2 always `other` seconds.
    #[derive(Clone)]
    struct Noisy {
        own_first: f64,
        other: f64,
        calls: Arc<AtomicU32>,
        own_calls: Arc<AtomicU32>,
    }

    #[async_trait]
    impl Evaluator for Noisy {
        type Error = std::convert::Infallible;
        async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let seconds = match c.params.get("TS") {
                Some(ParamValue::Int(1)) => {
                    if self.own_calls.fetch_add(1, Ordering::SeqCst) == 0 {
                        self.own_first
                    } else {
                        0.8
                    }
                }
                _ => self.other,
            };
            let timing = TimingStats::from_samples(&[seconds]).unwrap();
            let mut e = Evaluation::correct(timing, None);
            e.params = c.params.clone();
            Ok(e)
        }
    }

    /// Tunes TS=1 with budget 2 (so TS=2 is the one other configuration) on a [`Noisy`]
    /// device; returns the evaluation, the device's evaluations and the count.
    fn noisy(
        own_first: f64,
        other: f64,
        margin: Option<f64>,
        limit: Option<u64>,
    ) -> (Evaluation, u32) {
        let device_count = DeviceEvaluations::with_limit(limit);
        let inner = Noisy {
            own_first,
            other,
            calls: Arc::default(),
            own_calls: Arc::default(),
        };
        let mut device = DeviceFacts::unknown("test device");
        device.max_work_group_size = 1024;
        device.max_work_item_sizes = vec![1024, 1024, 1024];
        let sizes: IndexMap<String, i64> = [("N".to_owned(), 4096)].into_iter().collect();
        let mut t = TunedEvaluator::new(inner.clone(), 2, "random", sizes, device)
            .unwrap()
            .counting(device_count.clone());
        if let Some(m) = margin {
            t = t.remeasuring_close_calls(m);
        }
        let source =
            KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}\n").with_manifest(TWO);
        let candidate = Candidate::seed(source, ParamValues::new().with("TS", 1i64));
        let e = futures::executor::block_on(t.evaluate(&candidate)).unwrap();
        let ran = inner.calls.load(Ordering::SeqCst);
        assert_eq!(device_count.spent(), u64::from(ran), "every run counted");
        assert_eq!(e.device_evaluations(), u64::from(ran));
        (e, ran)
    }

    fn ts_of(e: &Evaluation) -> Option<i64> {
        e.params.get("TS").and_then(|v| v.as_i64())
    }

    /// A tuned configuration that beat the candidate's own by a lucky 10% is measured again
    /// beside it, and the candidate's own, faster when measured back to back, is kept.
    #[test]
    fn a_close_call_is_measured_again_and_the_faster_kept() {
        let (e, ran) = noisy(1.0, 0.9, Some(CLOSE_CALL_MARGIN), None);
        assert_eq!(ran, 4, "own, TS=2, then both again");
        assert_eq!(ts_of(&e), Some(1));
        assert_eq!(
            e.timing.unwrap().median_s,
            0.8,
            "the re-measurement is returned"
        );
        // Without the rule, the lucky configuration wins on one measurement.
        let (e, ran) = noisy(1.0, 0.9, None, None);
        assert_eq!((ts_of(&e), ran), (Some(2), 2));
        // A clear win (2×) is not a close call.
        let (e, ran) = noisy(1.0, 0.5, Some(CLOSE_CALL_MARGIN), None);
        assert_eq!((ts_of(&e), ran), (Some(2), 2));
        // Measured again, the tuned one still wins: it stays.
        let (e, ran) = noisy(0.95, 0.78, Some(CLOSE_CALL_MARGIN), None);
        assert_eq!((ts_of(&e), ran), (Some(2), 4));
        // The device-evaluation limit leaves no room for two more: the first choice stands.
        let (e, ran) = noisy(1.0, 0.9, Some(CLOSE_CALL_MARGIN), Some(3));
        assert_eq!((ts_of(&e), ran), (Some(2), 2));
    }

    #[test]
    fn tuning_stops_at_the_device_evaluation_limit() {
        let count = DeviceEvaluations::with_limit(Some(10));
        count.add(7);
        let (t, inner) = tuned(8, count.clone());
        let e = futures::executor::block_on(t.evaluate(&candidate())).unwrap();
        // Three left: the candidate's own and two tuned ones.
        assert_eq!(inner.0.load(Ordering::SeqCst), 3);
        assert_eq!(e.device_evaluations(), 3);
        assert!(count.is_spent());
        // Spent: a further candidate is evaluated (it was asked for) but not tuned.
        let e = futures::executor::block_on(t.evaluate(&candidate())).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 4);
        assert_eq!(e.device_evaluations(), 1);
        assert_eq!(count.spent(), 11);
    }

    #[test]
    fn an_untuned_candidate_costs_one_device_evaluation() {
        let (t, inner) = tuned(1, DeviceEvaluations::default());
        let e = futures::executor::block_on(t.evaluate(&candidate())).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 1);
        assert_eq!(e.device_evaluations(), 1);
    }
}
