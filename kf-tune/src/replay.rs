//! Replay: judge strategies on measured landscapes without a GPU. The space is every
//! configuration of a Kernel Tuner cache; evaluating one returns its recorded time (or its
//! failure, which still costs an evaluation).

use std::collections::HashMap;
use std::path::Path;

use kf_core::ParamValues;

use crate::error::Result;
use crate::kt::KtCache;
use crate::objective::{Failure, Objective, Outcome};
use crate::space::{Point, Space};
use crate::strategy::Strategy;
use crate::tuner::{TuneResult, Tuner};

/// A replayable landscape.
///
/// ```no_run
/// use kf_tune::{strategy, Replay};
/// let replay = Replay::load("gemm_RTX_3090.json.gz").unwrap();
/// let mut s = strategy::by_name("default").unwrap();
/// let result = replay.run(s.as_mut(), 89, 1).unwrap();
/// println!("{:.3} of optimal", replay.score(&result));
/// ```
#[derive(Debug)]
pub struct Replay {
    cache: KtCache,
    space: Space,
    outcomes: Vec<Outcome>,
    index: HashMap<Point, usize>,
    optimum: Option<(usize, f64)>,
}

impl Replay {
    /// Loads a Kernel Tuner cache file (plain or gzip).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        Self::from_cache(KtCache::read(path)?)
    }

    /// A replay of an in-memory cache.
    pub fn from_cache(cache: KtCache) -> Result<Self> {
        let (space, outcomes) = cache.space()?;
        let members = space.members().unwrap_or_default();
        let index = members
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), i))
            .collect();
        let optimum = outcomes
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.time().map(|t| (i, t)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        Ok(Replay {
            cache,
            space,
            outcomes,
            index,
            optimum,
        })
    }

    /// The cache being replayed.
    pub fn cache(&self) -> &KtCache {
        &self.cache
    }

    /// The space: every configuration in the cache.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// Number of configurations in the cache.
    pub fn total(&self) -> usize {
        self.outcomes.len()
    }

    /// Number of configurations with a time (not failed).
    pub fn valid(&self) -> usize {
        self.outcomes.iter().filter(|o| o.time().is_some()).count()
    }

    /// The fastest configuration and its time.
    pub fn optimum(&self) -> Option<(ParamValues, f64)> {
        let members = self.space.members()?;
        self.optimum
            .map(|(i, t)| (self.space.to_values(&members[i]), t))
    }

    /// The recorded outcome of a configuration (`InvalidConfig` when it is not in the cache).
    pub fn outcome(&self, config: &ParamValues) -> Outcome {
        self.space
            .point_of(config)
            .ok()
            .and_then(|p| self.index.get(&p))
            .map_or(Outcome::Failed(Failure::Invalid), |&i| {
                self.outcomes[i].clone()
            })
    }

    /// An objective that answers from the cache.
    pub fn objective(&self) -> ReplayObjective<'_> {
        ReplayObjective { replay: self }
    }

    /// Runs `strategy` with `budget` evaluations and `seed`.
    pub fn run(&self, strategy: &mut dyn Strategy, budget: usize, seed: u64) -> Result<TuneResult> {
        self.run_fanned_out(strategy, budget, seed, 1)
    }

    /// Runs `strategy` as [`Replay::run`] does, asking for `width` configurations at a time
    /// ([`Tuner::fan_out`]): what tuning spread over `width` workers would find.
    pub fn run_fanned_out(
        &self,
        strategy: &mut dyn Strategy,
        budget: usize,
        seed: u64,
        width: usize,
    ) -> Result<TuneResult> {
        Tuner::new(&self.space, budget)
            .seed(seed)
            .fan_out(width)
            .run(strategy, &mut self.objective())
    }

    /// `optimum time / best time found` (0 when nothing valid was found).
    pub fn score(&self, result: &TuneResult) -> f64 {
        match (self.optimum, result.best_time) {
            (Some((_, opt)), Some(best)) if best > 0.0 => opt / best,
            _ => 0.0,
        }
    }
}

/// The objective of a [`Replay`].
#[derive(Debug, Clone, Copy)]
pub struct ReplayObjective<'r> {
    replay: &'r Replay,
}

impl Objective for ReplayObjective<'_> {
    fn evaluate(&mut self, config: &ParamValues) -> Result<Outcome> {
        Ok(self.replay.outcome(config))
    }
}
