//! Greedy iterated local search.

use rand::seq::SliceRandom;
use rand::Rng;

use super::base::{Proposals, Strategy};
use crate::ctx::Ctx;
use crate::space::{Neighbourhood, Point};

/// Greedy iterated local search: first-improvement hill climbing over the Hamming neighbourhood
/// (visited in random order); at a local optimum, perturb the best configuration found by
/// changing a few parameters at random (or restart at random) and climb again.
#[derive(Debug, Clone)]
pub struct GreedyIls {
    /// Parameters changed by a perturbation.
    pub kick: usize,
    /// Probability of a full random restart instead of a perturbation.
    pub restart_probability: f64,
    current: Option<(Point, f64)>,
    queue: Vec<Point>,
    /// Proposals whose outcomes are to come (one, unless the tuner fans out).
    pending: Proposals<()>,
}

impl Default for GreedyIls {
    fn default() -> Self {
        GreedyIls {
            kick: 3,
            restart_probability: 0.2,
            current: None,
            queue: Vec::new(),
            pending: Proposals::default(),
        }
    }
}

impl GreedyIls {
    /// Local search with the default perturbation.
    pub fn new() -> Self {
        Self::default()
    }

    fn set_current(&mut self, ctx: &mut Ctx<'_>, point: Point, y: f64) {
        let mut ns = ctx.space.neighbours_of(&point, Neighbourhood::Hamming);
        ns.shuffle(ctx.rng);
        // Popped from the back: put adjacent moves last so they are tried first.
        let adj = ctx.space.neighbours_of(&point, Neighbourhood::Adjacent);
        ns.retain(|p| !adj.contains(p));
        let mut adj = adj;
        adj.shuffle(ctx.rng);
        ns.extend(adj);
        self.queue = ns;
        self.current = Some((point, y));
    }

    fn perturb(&self, ctx: &mut Ctx<'_>) -> Option<Point> {
        if ctx.rng.random_bool(self.restart_probability) {
            return ctx.random_unseen();
        }
        let (best, _) = ctx.history.best()?;
        let best = best.clone();
        for _ in 0..50 {
            let mut p = best.clone();
            for _ in 0..self.kick {
                let d = ctx.rng.random_range(0..p.len());
                let n = ctx.space.params()[d].len();
                p[d] = ctx.rng.random_range(0..n) as u16;
            }
            if ctx.space.contains(&p) && !ctx.history.contains(&p) {
                return Some(p);
            }
        }
        ctx.random_unseen()
    }
}

impl Strategy for GreedyIls {
    fn name(&self) -> &str {
        "greedy_ils"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        self.pending.forget_unmeasured(ctx.history);
        let p = if self.current.is_none() {
            ctx.random_unseen()?
        } else {
            loop {
                match self.queue.pop() {
                    Some(p) if ctx.history.contains(&p) => continue,
                    Some(p) => break p,
                    // Neighbours still being measured may yet improve: this batch ends here.
                    None if !self.pending.is_empty() => return None,
                    None => {
                        // Local optimum: perturb.
                        self.current = None;
                        break self.perturb(ctx)?;
                    }
                }
            }
        };
        self.pending.push(p.clone(), ());
        Some(p)
    }

    fn tell(&mut self, ctx: &mut Ctx<'_>, point: &Point, time: Option<f64>) {
        if self.pending.take(point).is_none() {
            return;
        }
        let Some(t) = time else { return };
        match &self.current {
            Some((_, cur)) if t >= *cur => {}
            _ => self.set_current(ctx, point.clone(), t),
        }
    }
}
