//! A genetic algorithm.

use rand::seq::IndexedRandom;
use rand::Rng;

use super::base::{log_time, Strategy};
use crate::ctx::Ctx;
use crate::space::{Neighbourhood, Point};

/// A generational genetic algorithm: rank-weighted parent selection, uniform crossover,
/// per-gene mutation (an adjacent value or any value), repair of invalid children by mutation or
/// resampling, and elitism (the best individuals survive).
#[derive(Debug, Clone)]
pub struct Genetic {
    /// Population size.
    pub population: usize,
    /// Mutation probability per gene (as a multiple of `1 / genes`).
    pub mutation: f64,
    /// Individuals carried over unchanged each generation.
    pub elite: usize,
    pop: Vec<(Point, f64)>,
    queue: Vec<Point>,
    generation: Vec<Point>,
}

impl Default for Genetic {
    fn default() -> Self {
        Genetic {
            population: 20,
            mutation: 1.5,
            elite: 2,
            pop: Vec::new(),
            queue: Vec::new(),
            generation: Vec::new(),
        }
    }
}

impl Genetic {
    /// A GA with the default settings.
    pub fn new() -> Self {
        Self::default()
    }

    fn fitness(ctx: &Ctx<'_>, p: &Point) -> Option<f64> {
        ctx.history
            .get(p)
            .map(|v| v.map_or(f64::INFINITY, log_time))
    }

    fn breed(&mut self, ctx: &mut Ctx<'_>) {
        // Survivors: the current generation's evaluated members plus last population, best first.
        let mut pool: Vec<(Point, f64)> = self
            .generation
            .iter()
            .filter_map(|p| Self::fitness(ctx, p).map(|f| (p.clone(), f)))
            .chain(self.pop.iter().cloned())
            .collect();
        pool.sort_by(|a, b| a.1.total_cmp(&b.1));
        pool.dedup_by(|a, b| a.0 == b.0);
        pool.truncate(self.population.max(2));
        self.pop = pool;
        self.generation.clear();
        let n = self.pop.len();
        if n == 0 {
            return;
        }
        // Rank weights: best gets n, worst 1.
        let weights: Vec<f64> = (0..n).map(|i| (n - i) as f64).collect();
        let total: f64 = weights.iter().sum();
        let pick = |rng: &mut rand_chacha::ChaCha8Rng| {
            let mut r = rng.random::<f64>() * total;
            for (i, w) in weights.iter().enumerate() {
                if r < *w {
                    return i;
                }
                r -= w;
            }
            n - 1
        };
        let dims = ctx.space.dims().max(1);
        let rate = (self.mutation / dims as f64).min(1.0);
        let mut children: Vec<Point> = Vec::new();
        let mut tries = 0;
        while children.len() < self.population.saturating_sub(self.elite).max(1) && tries < 2000 {
            tries += 1;
            let a = &self.pop[pick(ctx.rng)].0;
            let b = &self.pop[pick(ctx.rng)].0;
            let mut child: Point = a
                .iter()
                .zip(b)
                .map(|(x, y)| if ctx.rng.random_bool(0.5) { *x } else { *y })
                .collect();
            for (gene, param) in child.iter_mut().zip(ctx.space.params()) {
                if ctx.rng.random_bool(rate) {
                    let len = param.len();
                    if len > 1 {
                        *gene = if ctx.rng.random_bool(0.5) {
                            let up = ctx.rng.random_bool(0.5);
                            let v = i64::from(*gene) + if up { 1 } else { -1 };
                            v.clamp(0, len as i64 - 1) as u16
                        } else {
                            ctx.rng.random_range(0..len) as u16
                        };
                    }
                }
            }
            if !ctx.space.contains(&child) {
                // Repair: a random valid neighbour, else skip.
                let ns = ctx.space.neighbours_of(&child, Neighbourhood::Hamming);
                match ns.choose(ctx.rng) {
                    Some(p) => child = p.clone(),
                    None => continue,
                }
            }
            if !ctx.history.contains(&child) && !children.contains(&child) {
                children.push(child);
            }
        }
        while children.len() < self.population / 2 {
            match ctx.random_unseen() {
                Some(p) if !children.contains(&p) => children.push(p),
                Some(_) => continue,
                None => break,
            }
        }
        self.generation = children.clone();
        children.reverse();
        self.queue = children;
    }
}

impl Strategy for Genetic {
    fn name(&self) -> &str {
        "genetic_algorithm"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        if self.pop.is_empty() && self.generation.is_empty() {
            let mut first = Vec::new();
            for _ in 0..self.population {
                if let Some(p) = ctx.random_unseen() {
                    if !first.contains(&p) {
                        first.push(p);
                    }
                }
            }
            self.generation = first.clone();
            first.reverse();
            self.queue = first;
        }
        loop {
            if let Some(p) = self.queue.pop() {
                return Some(p);
            }
            // A generation is bred from its members' outcomes: while some are still to come
            // (the tuner fans out), this batch ends here.
            if self.generation.iter().any(|p| ctx.history.is_pending(p)) {
                return None;
            }
            self.breed(ctx);
            if self.queue.is_empty() {
                return ctx.random_unseen();
            }
        }
    }

    fn tell(&mut self, _ctx: &mut Ctx<'_>, _point: &Point, _time: Option<f64>) {}
}
