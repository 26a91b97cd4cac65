//! The tuning loop: asks a [`Strategy`] for configurations, evaluates the new ones through an
//! objective (or the result cache), tells the strategy, and stops when the budget of distinct
//! evaluated configurations is spent.
//!
//! With a fan-out above one ([`Tuner::fan_out`]) the loop asks for several configurations
//! before it evaluates any: they go to the objective together
//! ([`AsyncObjective::evaluate_batch`]), which may evaluate them in parallel (on the workers of
//! a cluster, say), and their outcomes are told in the order asked, so a seeded run stays
//! deterministic. While a batch is filled its configurations are pending in the
//! [`History`](crate::History): strategies do not propose them again, and models are fitted to
//! measured outcomes only. A strategy ends a batch early by proposing a pending configuration
//! or by proposing nothing while some are pending.

use std::collections::VecDeque;

use kf_core::ParamValues;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::cache::{CacheKey, ResultCache};
use crate::ctx::{Ctx, History};
use crate::error::{Result, TuneError};
use crate::objective::{AsyncObjective, Objective, Outcome};
use crate::space::{Point, Space, WeightedSampler};
use crate::strategy::Strategy;

/// One evaluated configuration of a finished run.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    /// The configuration.
    pub config: ParamValues,
    /// Its outcome.
    pub outcome: Outcome,
    /// Whether it cost an evaluation (false: taken from the result cache).
    pub evaluated: bool,
}

/// The result of a tuning run.
#[derive(Debug, Clone, Serialize)]
pub struct TuneResult {
    /// Name of the strategy.
    pub strategy: String,
    /// The best configuration found.
    pub best_config: Option<ParamValues>,
    /// Its time.
    pub best_time: Option<f64>,
    /// Distinct configurations evaluated (cache hits excluded); never more than the budget.
    pub evaluations: usize,
    /// Configurations answered by the result cache.
    pub cache_hits: usize,
    /// Failed configurations among those seen.
    pub failures: usize,
    /// Every configuration seen, in order.
    pub trials: Vec<Trial>,
}

/// Runs strategies against objectives with a budget counted in distinct configurations.
///
/// ```
/// use kf_tune::{Param, Space, Tuner, Outcome, strategy};
/// use kf_core::{ParamValue, ParamValues};
///
/// let space = Space::builder()
///     .param(Param::powers_of_two("TS", 1, 256).unwrap())
///     .param(Param::range("U", 1, 8, 1).unwrap())
///     .build()
///     .unwrap();
/// let mut objective = |c: &ParamValues| {
///     let ts = c.get("TS").and_then(ParamValue::as_f64).unwrap();
///     let u = c.get("U").and_then(ParamValue::as_f64).unwrap();
///     Ok(Outcome::Time(1.0 + (ts.log2() - 5.0).abs() + (u - 3.0).abs()))
/// };
/// let mut s = strategy::by_name("default").unwrap();
/// let result = Tuner::new(&space, 30).seed(1).run(s.as_mut(), &mut objective).unwrap();
/// assert!(result.evaluations <= 30);
/// assert_eq!(result.best_time, Some(1.0));
/// ```
#[derive(Debug, Clone)]
pub struct Tuner<'s> {
    space: &'s Space,
    budget: usize,
    seed: u64,
    prior: Option<Vec<Vec<f64>>>,
    max_idle: usize,
    fan_out: usize,
    start: Vec<ParamValues>,
}

struct Session<'s> {
    space: &'s Space,
    budget: usize,
    rng: ChaCha8Rng,
    history: History,
    spent: usize,
    cache_hits: usize,
    prior: Option<WeightedSampler<'s>>,
    max_idle: usize,
    trials: Vec<Trial>,
    finished: bool,
    /// Safety bound on asks in one run (strategies that only repeat themselves).
    asks_left: usize,
    /// The configurations to evaluate before the strategy is asked ([`Tuner::start_with`]).
    start: VecDeque<Point>,
}

impl<'s> Tuner<'s> {
    /// A tuner over `space` that evaluates at most `budget` distinct configurations.
    pub fn new(space: &'s Space, budget: usize) -> Self {
        Tuner {
            space,
            budget,
            seed: 0,
            prior: None,
            max_idle: 64,
            fan_out: 1,
            start: Vec::new(),
        }
    }

    /// Asks for up to `width` configurations before telling the strategy any outcome, and
    /// hands them to the objective together (default 1: one at a time). Worth it where the
    /// objective evaluates a batch in parallel on separate devices; on one device, configurations
    /// timed side by side disturb each other's times. A width of 0 counts as 1.
    ///
    /// Same seed and width, same run. A wider batch is chosen with less information, so at the
    /// same budget it may end slightly worse (`examples/landscapes.rs` measures it: a strategy
    /// written `default/8` fans out to 8).
    pub fn fan_out(mut self, width: usize) -> Self {
        self.fan_out = width.max(1);
        self
    }

    /// Seeds the run's random number generator (ChaCha8); same seed, same run.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Prior weights per parameter value (see [`crate::prior::RulePrior::weights`]): random
    /// draws follow them, and exhaustive search visits heavier configurations first.
    pub fn prior(mut self, weights: Vec<Vec<f64>>) -> Self {
        self.prior = Some(weights);
        self
    }

    /// Evaluates these configurations first, in this order, before the strategy proposes any:
    /// known-good ones (a manifest's defaults, an earlier run's best), so that the run's best
    /// is never slower than they are and the strategy starts from what they show. Each costs
    /// one evaluation of the budget (nothing when the result cache has it) and the strategy is
    /// told its outcome like any other. A configuration outside the space (a missing or
    /// unknown value, a broken constraint) is skipped: check it with [`Space::point_of`] and
    /// [`Space::violated`] first to tell the user why.
    ///
    /// ```
    /// use kf_tune::{Param, Space, Tuner, Outcome, strategy};
    /// use kf_core::{ParamValue, ParamValues};
    ///
    /// let space = Space::builder().param(Param::range("U", 1, 64, 1).unwrap()).build().unwrap();
    /// let mut objective = |c: &ParamValues| {
    ///     let u = c.get("U").and_then(ParamValue::as_f64).unwrap();
    ///     Ok(Outcome::Time(1.0 + (u - 40.0).abs()))
    /// };
    /// let known: ParamValues = [("U".to_owned(), ParamValue::Int(39))].into_iter().collect();
    /// let mut s = strategy::by_name("random").unwrap();
    /// let result = Tuner::new(&space, 3).start_with([known.clone()]).run(s.as_mut(), &mut objective).unwrap();
    /// assert_eq!(result.trials[0].config, known);
    /// assert!(result.best_time.unwrap() <= 2.0);
    /// ```
    pub fn start_with(mut self, configs: impl IntoIterator<Item = ParamValues>) -> Self {
        self.start = configs.into_iter().collect();
        self
    }

    fn session(&self) -> Session<'s> {
        let mut start = VecDeque::new();
        for config in &self.start {
            if let Ok(p) = self.space.point_of(config) {
                if self.space.contains(&p) && !start.contains(&p) {
                    start.push_back(p);
                }
            }
        }
        Session {
            space: self.space,
            budget: self.budget,
            rng: ChaCha8Rng::seed_from_u64(self.seed),
            history: History::default(),
            spent: 0,
            cache_hits: 0,
            prior: self
                .prior
                .as_ref()
                .map(|w| self.space.weighted_sampler(w.clone())),
            max_idle: self.max_idle,
            trials: Vec::new(),
            finished: false,
            asks_left: self.budget.saturating_mul(200).saturating_add(10_000),
            start,
        }
    }

    /// Runs `strategy` against a synchronous objective.
    pub fn run(
        &self,
        strategy: &mut dyn Strategy,
        objective: &mut dyn Objective,
    ) -> Result<TuneResult> {
        self.run_inner(strategy, objective, None)
    }

    /// Runs with a persistent result cache: configurations found under `key` cost nothing, new
    /// results are appended as they arrive.
    pub fn run_cached(
        &self,
        strategy: &mut dyn Strategy,
        objective: &mut dyn Objective,
        cache: &mut ResultCache,
        key: &CacheKey,
    ) -> Result<TuneResult> {
        self.run_inner(strategy, objective, Some((cache, key)))
    }

    fn run_inner(
        &self,
        strategy: &mut dyn Strategy,
        objective: &mut dyn Objective,
        mut cache: Option<(&mut ResultCache, &CacheKey)>,
    ) -> Result<TuneResult> {
        let mut s = self.session();
        while let Some(batch) = s.next_batch(strategy, &mut cache, self.fan_out) {
            let outcomes = objective.evaluate_batch(&configs_of(&batch));
            s.record_batch(strategy, batch, outcomes, &mut cache)?;
        }
        Ok(s.finish(strategy))
    }

    /// Runs `strategy` against an asynchronous objective (for example an
    /// [`crate::EvaluatorObjective`]), optionally with a result cache. The future is
    /// executor-agnostic.
    pub async fn run_async(
        &self,
        strategy: &mut dyn Strategy,
        objective: &mut dyn AsyncObjective,
        mut cache: Option<(&mut ResultCache, &CacheKey)>,
    ) -> Result<TuneResult> {
        let mut s = self.session();
        while let Some(batch) = s.next_batch(strategy, &mut cache, self.fan_out) {
            let outcomes = objective.evaluate_batch(&configs_of(&batch)).await;
            s.record_batch(strategy, batch, outcomes, &mut cache)?;
        }
        Ok(s.finish(strategy))
    }
}

/// The configurations of a batch [`Session::next_batch`] chose, in its order: what the
/// objective evaluates.
fn configs_of(batch: &[(Point, ParamValues)]) -> Vec<ParamValues> {
    batch.iter().map(|(_, v)| v.clone()).collect()
}

impl Session<'_> {
    fn ctx(&mut self) -> Ctx<'_> {
        Ctx {
            space: self.space,
            rng: &mut self.rng,
            history: &self.history,
            budget: self.budget,
            // Pending configurations are as good as spent: they will be evaluated.
            spent: self.spent + self.history.pending().len(),
            prior: self.prior.as_ref(),
        }
    }

    /// The next configuration to evaluate: new (neither in the history nor pending) and
    /// valid. Repeated proposals are answered from the history for free; after `max_idle` of
    /// them in a row a random unseen configuration is substituted. `None` ends the batch being
    /// filled, and the session when nothing is pending.
    fn next(&mut self, strategy: &mut dyn Strategy) -> Option<Point> {
        let mut idle = 0usize;
        loop {
            let pending = self.history.pending().len();
            if self.finished || self.spent + pending >= self.budget || self.asks_left == 0 {
                return None;
            }
            if (self.history.len() + pending) as u128 >= self.space.len() {
                return None;
            }
            if let Some(p) = self.start.pop_front() {
                if !self.history.contains(&p) {
                    return Some(p);
                }
                continue;
            }
            self.asks_left -= 1;
            if idle >= self.max_idle {
                return self.ctx().random_unseen();
            }
            let proposal = {
                let mut ctx = self.ctx();
                strategy.ask(&mut ctx)
            };
            let Some(p) = proposal else {
                // With outcomes to come the strategy may have more to say once it hears them.
                if pending == 0 {
                    self.finished = true;
                }
                return None;
            };
            if !self.space.contains(&p) {
                idle += 1;
                continue;
            }
            if self.history.is_pending(&p) {
                // The strategy has nothing new before it hears the batch's outcomes.
                return None;
            }
            match self.history.get(&p) {
                None => return Some(p),
                Some(v) => {
                    idle += 1;
                    let mut ctx = self.ctx();
                    strategy.tell(&mut ctx, &p, v);
                }
            }
        }
    }

    fn record(
        &mut self,
        strategy: &mut dyn Strategy,
        point: Point,
        values: ParamValues,
        outcome: Outcome,
        evaluated: bool,
    ) {
        if evaluated {
            self.spent += 1;
        } else {
            self.cache_hits += 1;
        }
        let v = outcome.time();
        self.history.push(point.clone(), v);
        self.trials.push(Trial {
            config: values,
            outcome,
            evaluated,
        });
        let mut ctx = self.ctx();
        strategy.tell(&mut ctx, &point, v);
    }

    /// The next point the objective must evaluate, with its values: points the cache answers
    /// are recorded (as not evaluated) on the way. `None` when the session is over.
    fn next_uncached(
        &mut self,
        strategy: &mut dyn Strategy,
        cache: &mut Option<(&mut ResultCache, &CacheKey)>,
    ) -> Option<(Point, ParamValues)> {
        while let Some(point) = self.next(strategy) {
            let values = self.space.to_values(&point);
            if let Some((c, key)) = cache.as_mut() {
                if let Some(o) = c.get(key, &values) {
                    let o = o.clone();
                    self.record(strategy, point, values, o, false);
                    continue;
                }
            }
            return Some((point, values));
        }
        None
    }

    /// Up to `width` configurations to evaluate together, each marked pending as it is chosen;
    /// `None` when the session is over.
    fn next_batch(
        &mut self,
        strategy: &mut dyn Strategy,
        cache: &mut Option<(&mut ResultCache, &CacheKey)>,
        width: usize,
    ) -> Option<Vec<(Point, ParamValues)>> {
        let mut batch = Vec::new();
        while batch.len() < width.max(1) {
            let Some((point, values)) = self.next_uncached(strategy, cache) else {
                break;
            };
            self.history.begin(point.clone());
            batch.push((point, values));
        }
        (!batch.is_empty()).then_some(batch)
    }

    /// Records a batch's outcomes in the order asked, up to the first error (which ends the
    /// run); an objective that answered more or fewer than asked, without an error, is one.
    fn record_batch(
        &mut self,
        strategy: &mut dyn Strategy,
        batch: Vec<(Point, ParamValues)>,
        outcomes: Vec<Result<Outcome>>,
        cache: &mut Option<(&mut ResultCache, &CacheKey)>,
    ) -> Result<()> {
        let (asked, answered) = (batch.len(), outcomes.len());
        let wrong_count = || {
            TuneError::Objective(format!(
                "the objective answered {answered} of a batch of {asked} configurations"
            ))
        };
        if answered > asked {
            return Err(wrong_count());
        }
        for ((point, values), outcome) in batch.into_iter().zip(outcomes) {
            self.record_evaluated(strategy, point, values, outcome?, cache)?;
        }
        if answered < asked {
            return Err(wrong_count());
        }
        Ok(())
    }

    /// Stores a fresh outcome in the cache (when there is one) and records it as evaluated.
    fn record_evaluated(
        &mut self,
        strategy: &mut dyn Strategy,
        point: Point,
        values: ParamValues,
        outcome: Outcome,
        cache: &mut Option<(&mut ResultCache, &CacheKey)>,
    ) -> Result<()> {
        if let Some((c, key)) = cache.as_mut() {
            c.insert(key, &values, &outcome)?;
        }
        self.record(strategy, point, values, outcome, true);
        Ok(())
    }

    fn finish(self, strategy: &dyn Strategy) -> TuneResult {
        let best = self
            .history
            .best()
            .map(|(p, t)| (self.space.to_values(p), t));
        TuneResult {
            strategy: strategy.name().to_owned(),
            best_config: best.as_ref().map(|(c, _)| c.clone()),
            best_time: best.map(|(_, t)| t),
            evaluations: self.spent,
            cache_hits: self.cache_hits,
            failures: self
                .trials
                .iter()
                .filter(|t| t.outcome.time().is_none())
                .count(),
            trials: self.trials,
        }
    }
}
