//! Simulated annealing over neighbourhoods, with restarts.

use rand::seq::IndexedRandom;
use rand::Rng;

use super::base::{log_time, Proposals, Strategy};
use crate::ctx::Ctx;
use crate::space::{Neighbourhood, Point};

/// Simulated annealing: from the current configuration, propose a random neighbour (adjacent
/// values or any value of one parameter); accept it when better, or when worse with probability
/// `exp(-Δ / T)` where Δ is the increase in log-time. The temperature decays geometrically and
/// the walk restarts from a random configuration when it freezes or stalls.
#[derive(Debug, Clone)]
pub struct SimulatedAnnealing {
    /// Initial temperature (in units of log-time).
    pub t0: f64,
    /// Decay per proposal.
    pub alpha: f64,
    /// Temperature at which the walk restarts.
    pub t_min: f64,
    current: Option<(Point, f64)>,
    /// Proposals whose outcomes are to come (one, unless the tuner fans out).
    pending: Proposals<()>,
    temperature: f64,
    stall: usize,
}

impl Default for SimulatedAnnealing {
    fn default() -> Self {
        SimulatedAnnealing {
            t0: 0.3,
            alpha: 0.97,
            t_min: 0.005,
            current: None,
            pending: Proposals::default(),
            temperature: 0.3,
            stall: 0,
        }
    }
}

impl SimulatedAnnealing {
    /// Annealing with the default schedule.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Strategy for SimulatedAnnealing {
    fn name(&self) -> &str {
        "simulated_annealing"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        self.pending.forget_unmeasured(ctx.history);
        if self.temperature < self.t_min || self.stall > 30 {
            self.current = None;
            self.temperature = self.t0;
            self.stall = 0;
        }
        let Some((cur, _)) = &self.current else {
            let p = ctx.random_unseen()?;
            self.pending.push(p.clone(), ());
            return Some(p);
        };
        let kind = if ctx.rng.random_bool(0.5) {
            Neighbourhood::Adjacent
        } else {
            Neighbourhood::Hamming
        };
        let ns = ctx.space.neighbours_of(cur, kind);
        let unseen: Vec<&Point> = ns.iter().filter(|p| !ctx.history.contains(p)).collect();
        let choice = match unseen.choose(ctx.rng) {
            Some(p) => (*p).clone(),
            None => match ns.choose(ctx.rng) {
                Some(p) => p.clone(),
                None => {
                    self.current = None;
                    return ctx.random_unseen();
                }
            },
        };
        self.temperature *= self.alpha;
        self.pending.push(choice.clone(), ());
        Some(choice)
    }

    fn tell(&mut self, ctx: &mut Ctx<'_>, point: &Point, time: Option<f64>) {
        if self.pending.take(point).is_none() {
            return;
        }
        let Some(t) = time else {
            self.stall += 1;
            return;
        };
        let y = log_time(t);
        match &self.current {
            None => self.current = Some((point.clone(), y)),
            Some((_, cur)) => {
                let delta = y - cur;
                if delta < 0.0 {
                    self.current = Some((point.clone(), y));
                    self.stall = 0;
                } else {
                    self.stall += 1;
                    let p = (-delta / self.temperature.max(1e-12)).exp();
                    if ctx.rng.random::<f64>() < p {
                        self.current = Some((point.clone(), y));
                    }
                }
            }
        }
    }
}
