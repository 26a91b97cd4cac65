//! The default strategy.

use rand::seq::SliceRandom;

use crate::space::{Neighbourhood, Point};
use crate::strategy::{Bandit, BayesOpt, SimulatedAnnealing, Strategy};
use crate::tuner::Ctx;

/// The default strategy: an adaptive portfolio followed by a local polish.
///
/// * Until the last `polish` fraction of the budget, a bandit ([`Bandit`], UCB1 on improvement
///   credit) chooses, proposal by proposal, between Bayesian optimisation (a Gaussian-process
///   model of log-time over the whole space, expected improvement: strong when the landscape
///   is smooth enough to model) and simulated annealing (a neighbourhood walk that accepts worse
///   moves and restarts: strong on rugged landscapes with interacting switches). All arms see
///   every result, so the model learns from the walk and vice versa.
/// * The rest of the budget climbs from the best configuration found: its adjacent values
///   first, then the rest of its Hamming neighbourhood, moving whenever a neighbour is faster.
#[derive(Debug)]
pub struct Auto {
    inner: Bandit,
    /// Fraction of the budget kept for the final local polish.
    pub polish: f64,
    centre: Option<Point>,
    queue: Vec<Point>,
}

impl Default for Auto {
    fn default() -> Self {
        Self::new()
    }
}

impl Auto {
    /// The default portfolio.
    pub fn new() -> Self {
        let arms: Vec<Box<dyn Strategy>> = vec![
            Box::new(BayesOpt::new()),
            Box::new(SimulatedAnnealing::new()),
        ];
        let mut inner = Bandit::new(arms);
        inner.exploration = 1.0;
        Auto {
            inner,
            polish: 0.15,
            centre: None,
            queue: Vec::new(),
        }
    }

    fn polish_step(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        let (best, _) = ctx.history.best()?;
        if self.centre.as_ref() != Some(best) {
            let best = best.clone();
            let mut hamming = ctx.space.neighbours_of(&best, Neighbourhood::Hamming);
            let mut adjacent = ctx.space.neighbours_of(&best, Neighbourhood::Adjacent);
            hamming.retain(|p| !adjacent.contains(p));
            hamming.shuffle(ctx.rng);
            adjacent.shuffle(ctx.rng);
            // Popped from the back: adjacent values first.
            hamming.extend(adjacent);
            self.queue = hamming;
            self.centre = Some(best);
        }
        while let Some(p) = self.queue.pop() {
            if !ctx.history.contains(&p) {
                return Some(p);
            }
        }
        None
    }
}

impl Strategy for Auto {
    fn name(&self) -> &str {
        "default"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        if (ctx.left() as f64) <= self.polish * ctx.budget as f64 {
            if let Some(p) = self.polish_step(ctx) {
                return Some(p);
            }
        }
        self.inner.ask(ctx)
    }

    fn tell(&mut self, ctx: &mut Ctx<'_>, point: &Point, time: Option<f64>) {
        self.inner.tell(ctx, point, time)
    }
}
