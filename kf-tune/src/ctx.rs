//! What a [`crate::strategy::Strategy`] sees: the [`Ctx`] of one ask or tell, and the
//! [`History`] of the run so far. Below both the tuner and the strategies, so that neither
//! depends on the other through it.

use std::collections::HashMap;

use rand_chacha::ChaCha8Rng;

use crate::space::{Point, Space, WeightedSampler};

/// Every configuration seen in one run, in order, with its outcome; and the configurations
/// asked for whose outcomes are still to come (when the tuner fans out, see
/// [`crate::Tuner::fan_out`]).
#[derive(Debug, Clone, Default)]
pub struct History {
    entries: Vec<(Point, Option<f64>)>,
    index: HashMap<Point, usize>,
    best: Option<usize>,
    /// Asked for, outcome not known yet, in the order asked. Kept apart from `entries` so that
    /// models fitted to the history only ever see measured outcomes.
    pending: Vec<Point>,
}

impl History {
    /// Number of distinct configurations seen (evaluated or taken from the cache); pending
    /// ones are not counted.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing has been seen.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value of `point` if seen: `Some(Some(time))`, `Some(None)` for a failure.
    pub fn get(&self, point: &[u16]) -> Option<Option<f64>> {
        self.index.get(point).map(|&i| self.entries[i].1)
    }

    /// Whether `point` was seen or is pending: either way, proposing it again gains nothing.
    pub fn contains(&self, point: &[u16]) -> bool {
        self.index.contains_key(point) || self.is_pending(point)
    }

    /// Whether `point` was asked for in the current fan-out and its outcome is still to come.
    pub fn is_pending(&self, point: &[u16]) -> bool {
        self.pending.iter().any(|p| p.as_slice() == point)
    }

    /// The configurations whose outcomes are still to come, in the order they were asked for
    /// (empty unless the tuner fans out).
    pub fn pending(&self) -> &[Point] {
        &self.pending
    }

    /// Marks `point` as asked for, its outcome still to come.
    pub(crate) fn begin(&mut self, point: Point) {
        if !self.contains(&point) {
            self.pending.push(point);
        }
    }

    /// Seen configurations in order with their time (`None`: failed).
    pub fn entries(&self) -> &[(Point, Option<f64>)] {
        &self.entries
    }

    /// The best configuration so far and its time.
    pub fn best(&self) -> Option<(&Point, f64)> {
        self.best
            .and_then(|i| self.entries[i].1.map(|t| (&self.entries[i].0, t)))
    }

    /// Records a configuration's outcome (the first one seen for it counts); it is no longer
    /// pending.
    pub(crate) fn push(&mut self, point: Point, value: Option<f64>) {
        self.pending.retain(|p| *p != point);
        if self.index.contains_key(&point) {
            return;
        }
        let i = self.entries.len();
        self.index.insert(point.clone(), i);
        self.entries.push((point, value));
        if let Some(t) = value {
            if self.best().is_none_or(|(_, b)| t < b) {
                self.best = Some(i);
            }
        }
    }
}

/// What a strategy sees when it is asked for the next configuration.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The space being searched.
    pub space: &'a Space,
    /// The run's random number generator (seeded by the tuner).
    pub rng: &'a mut ChaCha8Rng,
    /// Everything seen so far.
    pub history: &'a History,
    /// The budget: distinct configurations that may be evaluated.
    pub budget: usize,
    /// Evaluations spent so far.
    pub spent: usize,
    /// The prior-weighted sampler (from rule priors), when the tuner has a prior.
    pub prior: Option<&'a WeightedSampler<'a>>,
}

impl Ctx<'_> {
    /// Evaluations left.
    pub fn left(&self) -> usize {
        self.budget.saturating_sub(self.spent)
    }

    /// A random valid configuration, drawn by the prior's weights when there is a prior and
    /// uniformly otherwise.
    pub fn random_point(&mut self) -> Option<Point> {
        match self.prior {
            Some(w) => w
                .sample(self.rng)
                .or_else(|| self.space.sample_point(self.rng)),
            None => self.space.sample_point(self.rng),
        }
    }

    /// A random valid configuration not seen yet (a few hundred draws, then a scan of the space);
    /// `None` when every configuration was seen.
    pub fn random_unseen(&mut self) -> Option<Point> {
        for _ in 0..256 {
            let p = self.random_point()?;
            if !self.history.contains(&p) {
                return Some(p);
            }
        }
        self.space
            .iter_points()
            .take(5_000_000)
            .find(|p| !self.history.contains(p))
    }
}
