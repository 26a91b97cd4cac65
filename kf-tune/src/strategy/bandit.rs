//! A bandit over strategies.

use rand::Rng;

use super::anneal::SimulatedAnnealing;
use super::base::{log_time, Proposals, Strategy};
use super::basic::RandomSearch;
use super::bayes::BayesOpt;
use super::genetic::Genetic;
use super::ils::GreedyIls;
use crate::ctx::Ctx;
use crate::space::Point;

/// A multi-armed bandit over strategies: each proposal comes from one arm, chosen by UCB1 on the
/// arm's rate of improving the best time (improvements weighted by how much they gained). Every
/// arm is told every outcome, so arms learn from each other's evaluations.
pub struct Bandit {
    arms: Vec<Box<dyn Strategy>>,
    pulls: Vec<f64>,
    rewards: Vec<f64>,
    /// Proposals whose outcomes are to come, with the arm of each (one, unless the tuner fans
    /// out).
    pending: Proposals<usize>,
    /// UCB exploration constant.
    pub exploration: f64,
}

impl std::fmt::Debug for Bandit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bandit")
            .field(
                "arms",
                &self
                    .arms
                    .iter()
                    .map(|a| a.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .field("pulls", &self.pulls)
            .field("rewards", &self.rewards)
            .finish()
    }
}

impl Bandit {
    /// A bandit over the given arms.
    pub fn new(arms: Vec<Box<dyn Strategy>>) -> Self {
        let n = arms.len();
        Bandit {
            arms,
            pulls: vec![0.0; n],
            rewards: vec![0.0; n],
            pending: Proposals::default(),
            exploration: 0.5,
        }
    }

    /// The standard arms: Bayesian optimisation, genetic algorithm, simulated annealing, greedy
    /// local search and random sampling.
    pub fn standard() -> Self {
        Self::new(vec![
            Box::new(BayesOpt::new()),
            Box::new(Genetic::new()),
            Box::new(SimulatedAnnealing::new()),
            Box::new(GreedyIls::new()),
            Box::new(RandomSearch::new()),
        ])
    }

    /// The arm to pull, among those not `waiting`. Proposals still pending count as pulls
    /// (with no reward yet), so that one batch of a fan-out spreads over the arms as
    /// consecutive pulls would.
    fn choose(&self, ctx: &mut Ctx<'_>, waiting: &[bool]) -> usize {
        let pulls: Vec<f64> = (0..self.arms.len())
            .map(|i| self.pulls[i] + self.pending.iter().filter(|(_, a)| *a == i).count() as f64)
            .collect();
        if let Some(i) = (0..self.arms.len()).find(|&i| pulls[i] == 0.0 && !waiting[i]) {
            return i;
        }
        let total: f64 = pulls.iter().sum();
        let mut best = (0, f64::NEG_INFINITY);
        for i in 0..self.arms.len() {
            if waiting[i] {
                continue;
            }
            let mean = self.rewards[i] / pulls[i];
            let ucb = mean
                + self.exploration * (total.ln() / pulls[i]).sqrt()
                + 1e-9 * ctx.rng.random::<f64>();
            if ucb > best.1 {
                best = (i, ucb);
            }
        }
        best.0
    }
}

impl Strategy for Bandit {
    fn name(&self) -> &str {
        "bandit"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        if self.arms.is_empty() {
            return ctx.random_unseen();
        }
        self.pending.forget_unmeasured(ctx.history);
        let mut waiting = vec![false; self.arms.len()];
        for _ in 0..self.arms.len() {
            let i = self.choose(ctx, &waiting);
            if let Some(p) = self.arms[i].ask(ctx) {
                self.pending.push(p.clone(), i);
                return Some(p);
            }
            if ctx.history.pending().is_empty() {
                // An exhausted arm is never chosen again.
                self.pulls[i] = f64::INFINITY;
            } else {
                // It may be waiting for outcomes of the batch (a genetic generation): another
                // arm proposes this time.
                waiting[i] = true;
                if waiting.iter().all(|w| *w) {
                    return None;
                }
            }
        }
        ctx.random_unseen()
    }

    fn tell(&mut self, ctx: &mut Ctx<'_>, point: &Point, time: Option<f64>) {
        if let Some(arm) = self.pending.take(point) {
            let before = ctx
                .history
                .entries()
                .iter()
                .filter(|(q, _)| q != point)
                .filter_map(|(_, t)| *t)
                .fold(f64::INFINITY, f64::min);
            let reward = match time {
                Some(t) if before.is_finite() && t < before => {
                    (1.0 + 10.0 * (log_time(before) - log_time(t))).min(2.0)
                }
                Some(_) if !before.is_finite() => 1.0,
                _ => 0.0,
            };
            self.pulls[arm] += 1.0;
            self.rewards[arm] += reward;
        }
        for a in &mut self.arms {
            a.tell(ctx, point, time);
        }
    }
}
