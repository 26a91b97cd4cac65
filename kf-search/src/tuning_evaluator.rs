//! [`TunedEvaluator`]: tunes each new kernel's parameters with a small kf-tune budget before it
//! is judged, so that a structural idea is not dismissed for a bad tile size.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::DeviceEvaluations;
use indexmap::IndexMap;
use kf_core::{
    async_trait, Candidate, DeviceFacts, Evaluation, Evaluator, Fitness, KernelSource, ParamValues,
    Status,
};
use kf_manifest::Manifest;
use kf_mutate::CellPredictor;
use kf_tune::strategy::StrategyFactory;
use kf_tune::{outcome_of, AsyncObjective, CacheKey, Outcome, ResultCache, Space, Tuner};

/// Wraps an evaluator: each candidate is evaluated with its own parameters, then its manifest's
/// space is searched with up to `budget - 1` more configurations by a fresh kf-tune strategy
/// from a [`StrategyFactory`]; the best evaluation (by [`Fitness`], every configuration scored
/// against the same baseline figure, [`Fitness::against`]) is returned, with the parameters
/// it was measured with.
///
/// Tuning is seeded from the candidate's content hash and parameters, so a candidate is tuned
/// the same way in every run.
#[derive(Clone)]
pub struct TunedEvaluator<E> {
    inner: E,
    budget: usize,
    strategy: Arc<dyn StrategyFactory>,
    sizes: IndexMap<String, i64>,
    device: Arc<DeviceFacts>,
    count: DeviceEvaluations,
    cell: Option<CellPredictor>,
    close_call: Option<f64>,
    fan_out: usize,
}

/// The close-call margin the shipped local search uses ([`TunedEvaluator::remeasuring_close_calls`]):
/// a tuned configuration less than 25% faster than the candidate's own is measured again beside
/// it. Evaluations a few seconds apart on the 2-core test machine differed by 15–20% for the
/// same kernel (a GEMM start measured below a configuration that, timed alternately three times
/// afterwards, ran at 197–200 GFLOP/s against the start's 230–237).
pub const CLOSE_CALL_MARGIN: f64 = 0.25;

impl<E: Evaluator + Clone + 'static> TunedEvaluator<E> {
    /// Tunes with `budget` configurations per candidate (1 = no tuning), each candidate with a
    /// fresh strategy from `strategy` (a built-in one, [`kf_tune::strategy::StrategyName`], or
    /// one's own), for a task at `sizes` on `device`.
    pub fn new(
        inner: E,
        budget: usize,
        strategy: impl StrategyFactory + 'static,
        sizes: IndexMap<String, i64>,
        device: DeviceFacts,
    ) -> Self {
        Self::with_strategy_factory(inner, budget, Arc::new(strategy), sizes, device)
    }

    /// [`new`](Self::new) with a shared factory (one's own, a built-in
    /// [`kf_tune::strategy::StrategyName`], or one for a name read as text:
    /// [`kf_tune::strategy::factory_by_name`]), for a task at `sizes` on
    /// `device`. A strategy the factory cannot make leaves the candidate untuned (and says so
    /// in the log).
    pub fn with_strategy_factory(
        inner: E,
        budget: usize,
        strategy: Arc<dyn StrategyFactory>,
        sizes: IndexMap<String, i64>,
        device: DeviceFacts,
    ) -> Self {
        TunedEvaluator {
            inner,
            budget: budget.max(1),
            strategy,
            sizes,
            device: Arc::new(device),
            count: DeviceEvaluations::default(),
            cell: None,
            close_call: None,
            fan_out: 1,
        }
    }

    /// The name of the tuning strategy ([`StrategyFactory::name`]).
    pub fn strategy_name(&self) -> String {
        self.strategy.name()
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
    /// faster, both are evaluated once more, back to back (the candidate's own first, so that
    /// the winner is measured last, nearest to what the archive compares it with), and the
    /// faster of the two new measurements is returned. A winner picked by one lucky
    /// measurement, seconds after the candidate's own on a noisy machine, would otherwise
    /// replace a better configuration (a search's own starting point, say) for the rest of the
    /// run.
    ///
    /// Both re-measurements are full evaluations: verified again, and counted as device
    /// evaluations (in [`Evaluation::tuning_evaluations`], whatever their outcome), within the
    /// limit (no re-measurement when fewer than two are left). A re-measurement that is not
    /// correct loses; when neither is correct, a verification failure or a broken guard
    /// (wrong values, wrong shape, runtime error) is returned, since the kernel computed
    /// wrongly on a run, while timeouts, build failures and evaluator errors (a loaded machine,
    /// a lost worker) leave the first choice standing. A candidate aimed at a cell is settled
    /// only when its own configuration is in that cell, as the tuned winner is.
    ///
    /// Off unless set; a `margin` that is not a positive number turns it off. The shipped
    /// local search sets [`CLOSE_CALL_MARGIN`]. Pointless where equal configurations are
    /// answered from a stored result, as distributed jobs are.
    pub fn remeasuring_close_calls(mut self, margin: f64) -> Self {
        self.close_call = (margin.is_finite() && margin > 0.0).then_some(margin);
        self
    }

    /// Sends up to `width` of a candidate's tuning configurations to the wrapped evaluator at
    /// once ([`Tuner::fan_out`]): on a cluster they become parallel jobs, so one kernel's tuning
    /// spreads over several workers instead of waiting on one configuration after another.
    /// Their outcomes reach the tuning strategy in the order it asked, so a candidate is still
    /// tuned the same way in every run (at the same width).
    ///
    /// A batch is at most the tuning budget left (`budget - 1` for a fresh candidate: with the
    /// shipped `--tune-budget 3`, two configurations at once). When the wrapped evaluator fails
    /// on one configuration of a batch (an evaluator error, not a failed kernel), tuning ends
    /// there as it does one at a time, but the batch's other configurations have run: they are
    /// counted, and a correct one among them may still be chosen.
    ///
    /// Default 1. Keep it at 1 where the wrapped evaluator times on one device: configurations
    /// timed side by side there disturb each other's times. The distributed search sets
    /// `--fan-out` (8 unless told).
    pub fn fanning_out(mut self, width: usize) -> Self {
        self.fan_out = width.max(1);
        self
    }

    /// Evaluates the candidate's own configuration (`own_params`, first measured as `own`) and
    /// `winner`'s again, back to back, when `winner` won by less than the close-call margin.
    /// Returns the re-measurement to use in place of `winner` (`None`: the first choice
    /// stands) and the device evaluations spent.
    async fn settle_close_call(
        &self,
        source: &KernelSource,
        own_params: &ParamValues,
        own: &Evaluation,
        winner: &Evaluation,
    ) -> (Option<Evaluation>, u32) {
        let Some(margin) = self.close_call else {
            return (None, 0);
        };
        let median = |e: &Evaluation| {
            e.status
                .is_correct()
                .then(|| e.timing.map(|t| t.median_s))
                .flatten()
                .filter(|s| s.is_finite() && *s > 0.0)
        };
        let (Some(own_s), Some(winner_s)) = (median(own), median(winner)) else {
            return (None, 0);
        };
        if winner.params.is_empty()
            || own_s / winner_s >= 1.0 + margin
            || self.count.remaining().is_some_and(|left| left < 2)
        {
            return (None, 0);
        }
        let mut again = Vec::with_capacity(2);
        let mut spent = 0;
        for params in [own_params, &winner.params] {
            self.count.add(1);
            spent += 1;
            let candidate = Candidate::seed(source.clone(), params.clone());
            match self.inner.evaluate(&candidate).await {
                Ok(e) => again.push(e),
                Err(e) => {
                    tracing::warn!("measuring a close call again failed: {e}");
                    return (None, spent);
                }
            }
        }
        let (Some(winner_again), Some(own_again)) = (again.pop(), again.pop()) else {
            return (None, spent);
        };
        let misbehaved = |e: &Evaluation| {
            matches!(
                e.status,
                Status::WrongValues | Status::WrongShape | Status::RuntimeError
            )
        };
        let chosen = match (median(&own_again), median(&winner_again)) {
            (Some(o), Some(w)) if w < o => Some(winner_again),
            (Some(_), _) => Some(own_again),
            (None, Some(_)) => Some(winner_again),
            (None, None) if misbehaved(&winner_again) => Some(winner_again),
            (None, None) if misbehaved(&own_again) => Some(own_again),
            (None, None) => None,
        };
        (chosen, spent)
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

impl<E: Evaluator> Collect<'_, E> {
    /// Keeps a configuration's evaluation and says what the tuner sees of it.
    fn keep(
        &mut self,
        config: &ParamValues,
        evaluated: Result<Evaluation, E::Error>,
    ) -> kf_tune::Result<Outcome> {
        match evaluated {
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

#[async_trait]
impl<E: Evaluator> AsyncObjective for Collect<'_, E> {
    async fn evaluate(&mut self, config: &ParamValues) -> kf_tune::Result<Outcome> {
        let candidate = Candidate::seed(self.source.clone(), config.clone());
        self.calls = self.calls.saturating_add(1);
        self.count.add(1);
        let evaluated = self.inner.evaluate(&candidate).await;
        self.keep(config, evaluated)
    }

    /// The batch's configurations are evaluated concurrently (each its own job on a cluster);
    /// the answers come back in the order asked.
    async fn evaluate_batch(&mut self, configs: &[ParamValues]) -> Vec<kf_tune::Result<Outcome>> {
        let candidates: Vec<Candidate> = configs
            .iter()
            .map(|c| Candidate::seed(self.source.clone(), c.clone()))
            .collect();
        let n = u32::try_from(configs.len()).unwrap_or(u32::MAX);
        self.calls = self.calls.saturating_add(n);
        self.count.add(u64::from(n));
        let inner = self.inner;
        let evaluated =
            futures::future::join_all(candidates.iter().map(|c| inner.evaluate(c))).await;
        configs
            .iter()
            .zip(evaluated)
            .map(|(config, e)| self.keep(config, e))
            .collect()
    }
}

impl<E> TunedEvaluator<E> {
    /// Whether a configuration's evaluation stays in the cell its candidate was aimed at. Only
    /// a child a mutator aimed at a cell is held there; any other is tuned freely.
    fn in_cell(&self, candidate: &Candidate, e: &Evaluation) -> bool {
        match (&self.cell, &candidate.origin.aimed_cell) {
            (Some(p), Some(cell)) => {
                p.predict(&candidate.source, &e.effective_params(candidate))
                    .as_ref()
                    == Some(cell)
            }
            _ => true,
        }
    }

    /// The fittest of the candidate's first evaluation and the tuning's, among those in its
    /// cell. Ties keep the earlier configuration (the candidate's own first, then key order),
    /// so the choice is deterministic. One baseline figure serves every configuration (the
    /// first one the tuning measured): a speedup over the baseline timed beside each would rank
    /// them partly by how that baseline happened to run (the engine then scores the chosen one
    /// against the run's).
    fn fittest_in_cell(
        &self,
        candidate: &Candidate,
        first: &Evaluation,
        seen: BTreeMap<String, Evaluation>,
    ) -> Evaluation {
        let reference = std::iter::once(first)
            .chain(seen.values())
            .find_map(Evaluation::speedup_reference_s);
        let fitness = |e: &Evaluation| match reference {
            Some(r) => Fitness::against(e, r),
            None => Fitness::of(e),
        };
        let mut best = first.clone();
        for e in seen.into_values() {
            if fitness(&e) > fitness(&best) && self.in_cell(candidate, &e) {
                best = e;
            }
        }
        best
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
        // A strategy that cannot be built leaves the candidate untuned rather than failing its
        // evaluation (a name given to `new` was checked there).
        let mut strategy = match self.strategy.build() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("tuning strategy {}: {e}; not tuned", self.strategy.name());
                return Ok(first);
            }
        };
        let mut objective = Collect {
            inner: &self.inner,
            source: &candidate.source,
            seen: BTreeMap::new(),
            errors: Vec::new(),
            calls: 0,
            count: &self.count,
        };
        let mut tuner = Tuner::new(&space, tune_budget)
            .seed(tuning_seed(&candidate.source, &own))
            .fan_out(self.fan_out);
        if let Some(weights) = rule_prior(&manifest, &space, &self.sizes, &self.device) {
            tuner = tuner.prior(weights);
        }
        // A tuning failure (the evaluator itself broke) leaves the first evaluation standing;
        // the engine hears of evaluator errors through the untuned path.
        let _ = tuner
            .run_async(strategy.as_mut(), &mut objective, Some((&mut cache, &key)))
            .await;
        let mut calls = objective.calls;
        let mut best = self.fittest_in_cell(candidate, &first, objective.seen);
        if best.params.canonical_key() != own.canonical_key() && self.in_cell(candidate, &first) {
            let (settled, spent) = self
                .settle_close_call(&candidate.source, &own, &first, &best)
                .await;
            calls = calls.saturating_add(spent);
            if let Some(settled) = settled {
                best = settled;
            }
        }
        best.tuning_evaluations = calls;
        Ok(best)
    }
}

/// The weights of the shipped rule priors ([`kf_tune::RulePrior::family_rules`]) for a kernel
/// whose manifest carries tags (`tags = ["matmul"]`; the family templates bound to a task carry
/// their family's), or `None` where no rule applies: the tuner then runs without a prior.
pub(crate) fn rule_prior(
    manifest: &Manifest,
    space: &Space,
    sizes: &IndexMap<String, i64>,
    device: &DeviceFacts,
) -> Option<Vec<Vec<f64>>> {
    if manifest.tags.is_empty() {
        return None;
    }
    let mut context = kf_tune::prior::PriorContext::tagged(manifest.tags.iter().cloned())
        .with_device(device.clone());
    for (name, value) in sizes {
        context = context.with_size(name.clone(), *value);
    }
    kf_tune::prior::RulePrior::family_rules()
        .applied(space, &context)
        .unwrap_or_else(|e| {
            tracing::warn!("rule prior: {e}; tuning without it");
            None
        })
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

    /// A device every test configuration fits, and the test task's sizes.
    fn device_and_sizes() -> (DeviceFacts, IndexMap<String, i64>) {
        let mut device = DeviceFacts::unknown("test device");
        device.max_work_group_size = 1024;
        device.max_work_item_sizes = vec![1024, 1024, 1024];
        let sizes = [("N".to_owned(), 4096)].into_iter().collect();
        (device, sizes)
    }

    fn tuned(budget: usize, count: DeviceEvaluations) -> (TunedEvaluator<Counting>, Counting) {
        let inner = Counting::default();
        let (device, sizes) = device_and_sizes();
        let t = TunedEvaluator::new(
            inner.clone(),
            budget,
            kf_tune::strategy::StrategyName::Random,
            sizes,
            device,
        )
        .counting(count);
        (t, inner)
    }

    fn candidate() -> Candidate {
        let source = KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}\n")
            .with_manifest(MANIFEST);
        Candidate::seed(source, ParamValues::new().with("TS", 1i64))
    }

    /// Answers as [`Counting`] does, but only after every evaluation begun so far has had the
    /// chance to begin (it yields once), recording the most evaluations under way at once.
    #[derive(Clone, Default)]
    struct Overlapping {
        now: Arc<AtomicU32>,
        most: Arc<AtomicU32>,
        ran: Arc<AtomicU32>,
    }

    /// A future that is pending once (waking itself), then ready.
    struct YieldOnce(bool);

    impl std::future::Future for YieldOnce {
        type Output = ();
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            if self.0 {
                return std::task::Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }

    #[async_trait]
    impl Evaluator for Overlapping {
        type Error = std::convert::Infallible;
        async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            self.ran.fetch_add(1, Ordering::SeqCst);
            YieldOnce(false).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            Counting::default().evaluate(c).await
        }
    }

    #[test]
    fn fanned_out_tuning_sends_a_step_s_configurations_at_once() {
        let (device, sizes) = device_and_sizes();
        let run = |width: usize| {
            let inner = Overlapping::default();
            let count = DeviceEvaluations::default();
            let t = TunedEvaluator::new(
                inner.clone(),
                8,
                kf_tune::strategy::StrategyName::Random,
                sizes.clone(),
                device.clone(),
            )
            .counting(count.clone())
            .fanning_out(width);
            let e = futures::executor::block_on(t.evaluate(&candidate())).unwrap();
            let ran = inner.ran.load(Ordering::SeqCst);
            assert_eq!(ran, 8, "the candidate's own and seven tuned configurations");
            assert_eq!(count.spent(), u64::from(ran));
            assert_eq!(e.tuning_evaluations, 7);
            (e.params, inner.most.load(Ordering::SeqCst))
        };
        let (one_at_a_time, most) = run(1);
        assert_eq!(most, 1);
        let (fanned, most) = run(4);
        assert_eq!(most, 4, "four tuning configurations under way at once");
        assert_eq!(run(4).0, fanned, "the same width tunes the same way");
        // The space has eight values: both widths see all of it here.
        assert_eq!(fanned, one_at_a_time);
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

    /// What a scripted device answers for one evaluation: its status and time, or an
    /// evaluator error.
    type Answer = Result<(Status, f64), std::io::Error>;

    /// A scripted device: `script(call, TS)` answers the `call`-th evaluation (from 1).
    #[derive(Clone)]
    struct Scripted {
        script: Arc<dyn Fn(u32, i64) -> Answer + Send + Sync>,
        calls: Arc<AtomicU32>,
    }

    #[async_trait]
    impl Evaluator for Scripted {
        type Error = std::io::Error;
        async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            let ts = c.params.get("TS").and_then(|v| v.as_i64()).unwrap_or(0);
            let (status, seconds) = (self.script)(call, ts)?;
            let mut e = if status == Status::Correct {
                Evaluation::correct(TimingStats::from_samples(&[seconds]).unwrap(), None)
            } else {
                Evaluation::failed(status, "scripted")
            };
            e.params = c.params.clone();
            Ok(e)
        }
    }

    /// A noisy device: TS=1 takes `own_first` seconds on its first evaluation and 0.8 after
    /// (the machine was busy at first), TS=2 always `other` seconds.
    fn noisy_script(own_first: f64, other: f64) -> impl Fn(u32, i64) -> Answer + Send + Sync {
        move |call, ts| match (call, ts) {
            (1, 1) => Ok((Status::Correct, own_first)),
            (_, 1) => Ok((Status::Correct, 0.8)),
            _ => Ok((Status::Correct, other)),
        }
    }

    /// Tunes TS=1 with budget 2 (so TS=2 is the one other configuration, the second call) on
    /// a scripted device; returns the evaluation and the device's evaluations, after checking
    /// that every one was counted, in the run's count and in the evaluation.
    fn tune_two(
        script: impl Fn(u32, i64) -> Answer + Send + Sync + 'static,
        margin: Option<f64>,
        limit: Option<u64>,
    ) -> (Evaluation, u32) {
        tune_two_aimed(script, margin, limit, false)
    }

    /// [`tune_two`], the candidate aimed (when `aimed`) at the cell of TS=2, where its own
    /// configuration is not.
    fn tune_two_aimed(
        script: impl Fn(u32, i64) -> Answer + Send + Sync + 'static,
        margin: Option<f64>,
        limit: Option<u64>,
        aimed: bool,
    ) -> (Evaluation, u32) {
        let device_count = DeviceEvaluations::with_limit(limit);
        let inner = Scripted {
            script: Arc::new(script),
            calls: Arc::default(),
        };
        let (device, sizes) = device_and_sizes();
        let mut t = TunedEvaluator::new(
            inner.clone(),
            2,
            kf_tune::strategy::StrategyName::Random,
            sizes,
            device,
        )
        .counting(device_count.clone());
        if let Some(m) = margin {
            t = t.remeasuring_close_calls(m);
        }
        if aimed {
            t = t.keeping_cell(CellPredictor::new(|_, p| {
                Some(vec![usize::from(
                    p.get("TS").and_then(|v| v.as_i64()) == Some(2),
                )])
            }));
        }
        let source =
            KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}\n").with_manifest(TWO);
        let mut candidate = Candidate::seed(source, ParamValues::new().with("TS", 1i64));
        if aimed {
            candidate.origin.aimed_cell = Some(vec![1]);
        }
        let e = futures::executor::block_on(t.evaluate(&candidate)).unwrap();
        let ran = inner.calls.load(Ordering::SeqCst);
        assert_eq!(device_count.spent(), u64::from(ran), "every run counted");
        assert_eq!(e.device_evaluations(), u64::from(ran), "every run recorded");
        (e, ran)
    }

    fn ts_of(e: &Evaluation) -> Option<i64> {
        e.params.get("TS").and_then(|v| v.as_i64())
    }

    /// The baseline timed beside each configuration drifts: TS=2 is faster in seconds (0.8
    /// against 1.0) but was measured beside a baseline that ran 1.6x faster, so its speedup
    /// over that baseline is lower (3.1 against 4.0). Ranked by one baseline figure, it wins.
    #[test]
    fn configurations_are_ranked_by_one_baseline_figure() {
        #[derive(Clone)]
        struct Drifting;
        #[async_trait]
        impl Evaluator for Drifting {
            type Error = std::io::Error;
            async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
                let ts = c.params.get("TS").and_then(|v| v.as_i64());
                let (kernel_s, baseline_s) = if ts == Some(2) {
                    (0.8, 2.5)
                } else {
                    (1.0, 4.0)
                };
                let timed = |s: f64| TimingStats::from_samples(&[s]);
                let mut e = Evaluation::correct(timed(kernel_s).unwrap(), timed(baseline_s));
                e.params = c.params.clone();
                Ok(e)
            }
        }
        let (device, sizes) = device_and_sizes();
        let tuned = TunedEvaluator::new(
            Drifting,
            2,
            kf_tune::strategy::StrategyName::Random,
            sizes,
            device,
        );
        let source =
            KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}\n").with_manifest(TWO);
        let candidate = Candidate::seed(source, ParamValues::new().with("TS", 1i64));
        let own = futures::executor::block_on(Drifting.evaluate(&candidate)).unwrap();
        let e = futures::executor::block_on(tuned.evaluate(&candidate)).unwrap();
        assert_eq!(ts_of(&e), Some(2), "the faster configuration");
        assert_eq!(e.device_evaluations(), 2);
        assert!(
            Fitness::of(&e) < Fitness::of(&own),
            "by the speedup over the baseline beside each, the slower one would win"
        );
    }

    /// A tuned configuration that beat the candidate's own by a lucky 10% is measured again
    /// beside it, and the candidate's own, faster when measured back to back, is kept.
    #[test]
    fn a_close_call_is_measured_again_and_the_faster_kept() {
        let margin = Some(CLOSE_CALL_MARGIN);
        let (e, ran) = tune_two(noisy_script(1.0, 0.9), margin, None);
        assert_eq!(ran, 4, "own, TS=2, then both again");
        assert_eq!(ts_of(&e), Some(1));
        assert_eq!(
            e.timing.unwrap().median_s,
            0.8,
            "the re-measurement is returned"
        );
        // Without the rule, the lucky configuration wins on one measurement.
        let (e, ran) = tune_two(noisy_script(1.0, 0.9), None, None);
        assert_eq!((ts_of(&e), ran), (Some(2), 2));
        // A clear win (2×) is not a close call.
        let (e, ran) = tune_two(noisy_script(1.0, 0.5), margin, None);
        assert_eq!((ts_of(&e), ran), (Some(2), 2));
        // Measured again, the tuned one still wins: it stays.
        let (e, ran) = tune_two(noisy_script(0.95, 0.78), margin, None);
        assert_eq!((ts_of(&e), ran), (Some(2), 4));
        // The device-evaluation limit: one left after tuning is no room for two more, two
        // left is.
        let (e, ran) = tune_two(noisy_script(1.0, 0.9), margin, Some(3));
        assert_eq!((ts_of(&e), ran), (Some(2), 2));
        let (e, ran) = tune_two(noisy_script(1.0, 0.9), margin, Some(4));
        assert_eq!((ts_of(&e), ran), (Some(1), 4));
        // Aimed at TS=2's cell, the candidate's own configuration (in another cell) is not a
        // contender: the winner in the cell stays without a re-measurement.
        let (e, ran) = tune_two_aimed(noisy_script(1.0, 0.9), margin, None, true);
        assert_eq!((ts_of(&e), ran), (Some(2), 2));
    }

    /// Failed re-measurements: what was spent is counted whatever happened; a configuration
    /// that computes wrongly when measured again loses or is reported; a timeout or an
    /// evaluator error leaves the first choice standing.
    #[test]
    fn failed_remeasurements_are_counted_and_judged() {
        let margin = Some(CLOSE_CALL_MARGIN);
        // The evaluator fails on the third call (re-measuring the candidate's own).
        let (e, ran) = tune_two(
            |call, ts| match (call, ts) {
                (3, _) => Err(std::io::Error::other("worker lost")),
                (_, 1) => Ok((Status::Correct, 1.0)),
                _ => Ok((Status::Correct, 0.9)),
            },
            margin,
            None,
        );
        assert_eq!((ts_of(&e), ran, e.status), (Some(2), 3, Status::Correct));
        // The winner computes wrong values when measured again: the candidate's own wins.
        let (e, ran) = tune_two(
            |call, ts| match (call, ts) {
                (4, _) => Ok((Status::WrongValues, 0.0)),
                (_, 1) => Ok((Status::Correct, 1.0)),
                _ => Ok((Status::Correct, 0.9)),
            },
            margin,
            None,
        );
        assert_eq!((ts_of(&e), ran, e.status), (Some(1), 4, Status::Correct));
        // Both time out (a loaded machine): the first choice stands.
        let timeouts = |call, ts| match (call, ts) {
            (3 | 4, _) => Ok((Status::Timeout, 0.0)),
            (_, 1) => Ok((Status::Correct, 1.0)),
            _ => Ok((Status::Correct, 0.9)),
        };
        let (e, ran) = tune_two(timeouts, margin, None);
        assert_eq!((ts_of(&e), ran, e.status), (Some(2), 4, Status::Correct));
        assert_eq!(e.timing.unwrap().median_s, 0.9);
        // Both compute wrongly now: the kernel is reported as it behaved.
        let (e, ran) = tune_two(
            |call, ts| match (call, ts) {
                (3 | 4, _) => Ok((Status::WrongValues, 0.0)),
                (_, 1) => Ok((Status::Correct, 1.0)),
                _ => Ok((Status::Correct, 0.9)),
            },
            margin,
            None,
        );
        assert_eq!((ran, e.status), (4, Status::WrongValues));
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
