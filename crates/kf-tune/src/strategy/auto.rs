//! The default strategy.

use crate::space::Point;
use crate::strategy::{Bandit, BayesOpt, SimulatedAnnealing, Strategy};
use crate::tuner::Ctx;

/// The default strategy: an adaptive portfolio. A bandit ([`Bandit`], UCB1 on improvement
/// credit) chooses, proposal by proposal, between Bayesian optimisation (a Gaussian-process model
/// of log-time over the whole space, expected improvement: strong when the landscape is smooth
/// enough to model) and simulated annealing (a neighbourhood walk that accepts worse moves and
/// restarts: strong on rugged landscapes with interacting switches). All arms see every result,
/// so the model learns from the walk and the walk restarts from the model's discoveries.
#[derive(Debug)]
pub struct Auto {
    inner: Bandit,
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
        Auto { inner }
    }
}

impl Strategy for Auto {
    fn name(&self) -> &str {
        "default"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        self.inner.ask(ctx)
    }

    fn tell(&mut self, ctx: &mut Ctx<'_>, point: &Point, time: Option<f64>) {
        self.inner.tell(ctx, point, time)
    }
}
