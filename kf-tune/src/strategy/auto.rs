//! The default strategy.

use std::collections::HashSet;

use rand::seq::SliceRandom;

use super::base::{initial_design, log_time, space_filling, Proposals, Strategy};
use super::bayes::BayesOpt;
use super::forest_search::ForestSearch;
use crate::ctx::Ctx;
use crate::space::{Neighbourhood, Point};

/// The default strategy: two surrogate models of the space, chosen by how well each predicts
/// the results, then an exhaustive best-first local search around the best configurations.
///
/// * A small space-filling sample (about √budget configurations, 3 to 20, each the farthest
///   from those seen among a few random ones) starts the search.
/// * Then, at every step, both a random-forest search ([`ForestSearch`]: trees over value
///   indices and power-of-two alignment, expected improvement over random configurations,
///   neighbourhoods of the best ones and crossovers of them) and Gaussian-process Bayesian
///   optimisation ([`BayesOpt`]: log-time, categorical parameters one-hot, expected improvement
///   over the space) propose a configuration, and both predict it before it is measured. The
///   proposal is taken from the model whose recent predictions of new results were more
///   accurate, the forest only when its error is clearly smaller ([`Auto::forest_margin`]) (an exponential moving average of the squared error in log-time; the two
///   alternate during a short warm-up). Trees suit rugged, switch-dominated landscapes and the
///   GP suits smooth ones; which one a landscape is, is learnt on it rather than assumed.
///   Failed configurations are modelled as slightly slower than the slowest success, so both
///   models learn to avoid the regions where configurations fail.
/// * The last `polish` fraction of the budget is a best-first local search: the whole Hamming
///   neighbourhood of the best configuration is measured (the most promising neighbours by the
///   forest first), moving to a new best as soon as one is found, and when a neighbourhood is
///   exhausted without improvement the search continues around the next best configuration not
///   yet explored. Near the optimum, landscapes are often nearly flat (differences of a few
///   tenths of a percent between many configurations), where a model cannot rank neighbours
///   reliably but an exhaustive look at them does not miss the best.
///
/// The strategy never proposes a configuration it has seen, and it is deterministic given the
/// tuner's seed.
#[derive(Debug)]
pub struct Auto {
    /// Fraction of the budget kept for the final best-first local search (default 0.1; 0.25
    /// until the landscape benchmark, `examples/landscapes.rs`, showed the models using those
    /// evaluations better on most landscapes, the shared GEMM cache at 0.5% included).
    pub polish: f64,
    /// Model predictions scored before the models are compared; until then they take turns
    /// (default 4).
    pub warmup: usize,
    /// Weight of the past in the moving average of each model's squared prediction error
    /// (default 0.8: about the last five results count).
    pub memory: f64,
    /// The forest proposes only while its error is at most this fraction of the GP's (default
    /// 0.7: on the landscape benchmark the GP was the better model at small budgets on most
    /// landscapes, and the forest's errors had to be clearly smaller to pay off).
    pub forest_margin: f64,
    forest: ForestSearch,
    gp: BayesOpt,
    /// The proposals whose outcomes are to come (one, unless the tuner fans out) and each
    /// model's predicted log-time of them.
    pending: Proposals<[Option<f64>; 2]>,
    /// Moving average of each model's squared error on new results (forest, GP).
    err: [f64; 2],
    /// Predictions scored so far.
    scored: usize,
    /// Proposals made so far (alternation during the warm-up).
    turn: usize,
    /// The centre of the local search and its unexplored neighbours, best last.
    centre: Option<Point>,
    queue: Vec<Point>,
    /// Centres whose neighbourhoods were exhausted.
    explored: HashSet<Point>,
}

impl Default for Auto {
    fn default() -> Self {
        Self::new()
    }
}

impl Auto {
    /// The default strategy with its default settings.
    pub fn new() -> Self {
        let mut forest = ForestSearch::new();
        // The final phase is this strategy's own local search.
        forest.polish = 0.0;
        Auto {
            polish: 0.1,
            warmup: 4,
            memory: 0.8,
            forest_margin: 0.7,
            forest,
            gp: BayesOpt::new(),
            pending: Proposals::default(),
            err: [0.0; 2],
            scored: 0,
            turn: 0,
            centre: None,
            queue: Vec::new(),
            explored: HashSet::new(),
        }
    }

    /// The next configuration of the best-first local search; `None` when every seen
    /// configuration's neighbourhood was explored.
    fn polish_step(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        // A new best moves the search at once (first improvement).
        if let Some((best, _)) = ctx.history.best() {
            if self.centre.as_ref() != Some(best) && !self.explored.contains(best) {
                self.set_centre(ctx, best.clone());
            }
        }
        loop {
            while let Some(p) = self.queue.pop() {
                if !ctx.history.contains(&p) {
                    return Some(p);
                }
            }
            if let Some(c) = self.centre.take() {
                self.explored.insert(c);
            }
            // The next best configuration not yet explored.
            let next = ctx
                .history
                .entries()
                .iter()
                .filter_map(|(p, t)| t.map(|t| (p, t)))
                .filter(|(p, _)| !self.explored.contains(*p))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(p, _)| p.clone())?;
            self.set_centre(ctx, next);
        }
    }

    /// Queues the unseen Hamming neighbours of `centre`, the forest's most promising last
    /// (adjacent values of ordered parameters first when the forest has no model yet).
    fn set_centre(&mut self, ctx: &mut Ctx<'_>, centre: Point) {
        let mut adjacent = ctx.space.neighbours_of(&centre, Neighbourhood::Adjacent);
        let mut all = ctx.space.neighbours_of(&centre, Neighbourhood::Hamming);
        all.retain(|p| !ctx.history.contains(p) && !adjacent.contains(p));
        adjacent.retain(|p| !ctx.history.contains(p));
        all.shuffle(ctx.rng);
        adjacent.shuffle(ctx.rng);
        all.extend(adjacent);
        // Stable sort: ties keep the adjacent-last (popped first), shuffled order.
        let mut keyed: Vec<(f64, Point)> = all
            .into_iter()
            .map(|p| {
                let key = self
                    .forest
                    .predict_log_time(&p)
                    .map_or(0.0, |(m, s)| -(m - s));
                (key, p)
            })
            .collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.queue = keyed.into_iter().map(|(_, p)| p).collect();
        self.centre = Some(centre);
    }

    /// Which model proposes: 0 the forest, 1 the GP.
    fn choose(&mut self) -> usize {
        if self.scored < self.warmup {
            self.turn += 1;
            self.turn % 2
        } else if self.err[0] <= self.forest_margin * self.err[1] {
            0
        } else {
            1
        }
    }
}

impl Strategy for Auto {
    fn name(&self) -> &str {
        "default"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        if ctx.history.len() < initial_design(ctx.budget) || ctx.history.best().is_none() {
            return space_filling(ctx);
        }
        self.pending.forget_unmeasured(ctx.history);
        if (ctx.left() as f64) <= self.polish * ctx.budget as f64 {
            if let Some(p) = self.polish_step(ctx) {
                return Some(p);
            }
        }
        // Both models propose (which keeps both up to date); one proposal is taken.
        let from_forest = self.forest.ask(ctx);
        let from_gp = self.gp.ask(ctx);
        let p = if self.choose() == 0 {
            from_forest.or(from_gp)
        } else {
            from_gp.or(from_forest)
        }?;
        let preds = [
            self.forest.predict_log_time(&p).map(|x| x.0),
            self.gp.predict_log_time(ctx, &p).map(|x| x.0),
        ];
        self.pending.push(p.clone(), preds);
        Some(p)
    }

    fn tell(&mut self, _ctx: &mut Ctx<'_>, point: &Point, time: Option<f64>) {
        let Some(preds) = self.pending.take(point) else {
            return;
        };
        // Failures are not scored: each model imputes them its own way.
        if let (Some(t), [Some(a), Some(b)]) = (time, preds) {
            let y = log_time(t);
            let m = self.memory;
            self.err[0] = m * self.err[0] + (1.0 - m) * (a - y) * (a - y);
            self.err[1] = m * self.err[1] + (1.0 - m) * (b - y) * (b - y);
            self.scored += 1;
        }
    }
}
