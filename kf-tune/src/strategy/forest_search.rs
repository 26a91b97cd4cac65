//! Model-based search with a random-forest surrogate.

use rand::Rng;

use super::base::{alignment, initial_design, log_time, Strategy};
use super::forest::{Forest, ForestParams};
use super::gp::expected_improvement;
use crate::ctx::Ctx;
use crate::space::{Neighbourhood, Point, Space};

/// Best configurations whose Hamming neighbourhoods are scored during the search.
const LOCAL_CENTRES: usize = 10;
/// Best configurations recombined into crossover candidates.
const PARENTS: usize = 20;
/// Best configurations whose neighbourhoods are searched during the final polish.
const POLISH_CENTRES: usize = 3;

/// Sequential model-based search (SMAC-style) with a random-forest surrogate.
///
/// * A small uniform random sample (about √budget configurations, 3 to 20) starts the search.
/// * Then a random forest is fitted to the log-times seen so far (failures count as slightly
///   worse than the worst time), over the parameters' value indices plus an alignment feature
///   per integer parameter (the power-of-two factor of its value, since GPU kernels often care
///   whether a size is a multiple of 32 or 64 more than about its magnitude). Trees cope with
///   the rugged, interacting, partly categorical landscapes of kernel parameters better than a
///   smooth kernel does, and the spread of the trees' predictions is the model's uncertainty.
/// * Proposals are the candidates with the largest expected improvement among three kinds of
///   candidates scored together, so that the model decides between exploring and exploiting:
///   random configurations (global exploration), the Hamming neighbourhoods of the best
///   configurations (local search), and uniform crossovers of the best configurations
///   (recombination of good building blocks, as in a genetic algorithm).
/// * The last `polish` fraction of the budget scores only the neighbourhoods of the three best
///   configurations: near-optimal regions are often flat up to measurement noise, and the best
///   neighbour of a runner-up is as likely to be the optimum as one of the leader's.
/// * The model is refitted after every evaluation early on and whenever the best time improves;
///   otherwise after every `n / refit` new results (n results seen), proposing the next best
///   candidates of the last scoring in between, which keeps long runs fast.
///
/// Everything is seeded through the tuner's generator, and the budget counts distinct
/// configurations (the strategy never proposes a configuration it has seen).
#[derive(Debug, Clone)]
pub struct ForestSearch {
    /// Fraction of the budget kept for the final polish.
    pub polish: f64,
    /// Random configurations scored per model fit.
    pub pool: usize,
    /// Crossover candidates scored per model fit.
    pub crossovers: usize,
    /// Refit schedule: with n results seen, the model is refitted after `max(1, n / refit)` new
    /// results (and whenever the best time improves).
    pub refit: usize,
    forest: ForestParams,
    features: Option<Features>,
    /// Feature rows of the history, in the history's order.
    rows: Vec<Vec<u16>>,
    /// Scored candidates not yet proposed, best last.
    queue: Vec<Point>,
    /// When the queue was scored: results seen, best time, polishing.
    scored_at: Option<(usize, f64, bool)>,
    /// The last fitted forest and its target scaling (shift, scale) of log-times.
    model: Option<(Forest, f64, f64)>,
}

impl Default for ForestSearch {
    fn default() -> Self {
        Self::new()
    }
}

/// Model features of a configuration: the value index of each parameter, then the alignment
/// features.
#[derive(Debug, Clone)]
struct Features {
    /// Number of values of each feature.
    sizes: Vec<usize>,
    /// (parameter, power-of-two factor of each of its values, capped at 15).
    alignment: Vec<(usize, Vec<u16>)>,
}

impl Features {
    fn new(space: &Space) -> Self {
        let alignment = alignment(space);
        let mut sizes: Vec<usize> = space.params().iter().map(|p| p.len()).collect();
        sizes.extend(alignment.iter().map(|_| 16));
        Features { sizes, alignment }
    }

    fn row_into(&self, p: &[u16], out: &mut Vec<u16>) {
        out.clear();
        out.extend_from_slice(p);
        for (d, twos) in &self.alignment {
            out.push(twos.get(usize::from(p[*d])).copied().unwrap_or(0));
        }
    }

    fn row(&self, p: &[u16]) -> Vec<u16> {
        let mut r = Vec::with_capacity(self.sizes.len());
        self.row_into(p, &mut r);
        r
    }
}

impl ForestSearch {
    /// Forest-based search with its default settings.
    pub fn new() -> Self {
        ForestSearch {
            polish: 0.25,
            pool: 2000,
            crossovers: 200,
            refit: 25,
            forest: ForestParams::default(),
            features: None,
            rows: Vec::new(),
            queue: Vec::new(),
            scored_at: None,
            model: None,
        }
    }

    /// Candidates for the next proposals (may contain seen configurations).
    fn candidates(&self, ctx: &mut Ctx<'_>, ranked: &[&Point], polishing: bool) -> Vec<Point> {
        let mut pool: Vec<Point> = Vec::new();
        if polishing {
            for p in ranked.iter().take(POLISH_CENTRES) {
                pool.extend(ctx.space.neighbours_of(p, Neighbourhood::Hamming));
            }
            if pool.iter().any(|p| !ctx.history.contains(p)) {
                return pool;
            }
            pool.clear();
        }
        for p in ranked.iter().take(LOCAL_CENTRES) {
            pool.extend(ctx.space.neighbours_of(p, Neighbourhood::Hamming));
        }
        let parents = &ranked[..ranked.len().min(PARENTS)];
        if parents.len() >= 2 {
            for _ in 0..self.crossovers {
                let a = parents[ctx.rng.random_range(0..parents.len())];
                let b = parents[ctx.rng.random_range(0..parents.len())];
                let child: Point = a
                    .iter()
                    .zip(b.iter())
                    .map(|(x, y)| if ctx.rng.random_bool(0.5) { *x } else { *y })
                    .collect();
                if ctx.space.contains(&child) {
                    pool.push(child);
                }
            }
        }
        for _ in 0..self.pool {
            match ctx.random_point() {
                Some(p) => pool.push(p),
                None => break,
            }
        }
        pool
    }

    /// Fits the model to the history and refills the queue with the best candidates by expected
    /// improvement.
    fn rescore(&mut self, ctx: &mut Ctx<'_>, polishing: bool) {
        let history = ctx.history;
        let entries = history.entries();
        let features = self
            .features
            .get_or_insert_with(|| Features::new(ctx.space));
        for (p, _) in &entries[self.rows.len().min(entries.len())..] {
            self.rows.push(features.row(p));
        }
        // Standardised log-times, failures a little worse than the worst time.
        let ok: Vec<f64> = entries
            .iter()
            .filter_map(|(_, t)| t.map(log_time))
            .collect();
        let lo = ok.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ok.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let fail = hi + 0.1 * (hi - lo).max(0.1);
        let raw: Vec<f64> = entries
            .iter()
            .map(|(_, t)| t.map_or(fail, log_time))
            .collect();
        let n = raw.len() as f64;
        let mean = raw.iter().sum::<f64>() / n;
        let sd = (raw.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n)
            .sqrt()
            .max(1e-9);
        let y: Vec<f64> = raw.iter().map(|v| (v - mean) / sd).collect();
        let best = (lo - mean) / sd;
        let forest = Forest::fit(&self.rows, &y, &features.sizes, &self.forest, ctx.rng);

        let mut ranked: Vec<(&Point, f64)> = entries
            .iter()
            .filter_map(|(p, t)| t.map(|t| (p, t)))
            .collect();
        ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
        let ranked: Vec<&Point> = ranked.into_iter().map(|(p, _)| p).collect();
        let mut pool = self.candidates(ctx, &ranked, polishing);
        pool.sort_unstable();
        pool.dedup();
        pool.retain(|p| !history.contains(p));

        let Some(features) = self.features.as_ref() else {
            return;
        };
        let mut row = Vec::with_capacity(features.sizes.len());
        // Ties (common with trees) are broken uniformly at random.
        let mut scored: Vec<(f64, u32, Point)> = pool
            .into_iter()
            .map(|q| {
                features.row_into(&q, &mut row);
                let (m, s) = forest.predict(&row);
                let ei = expected_improvement(m, s, best, 0.0);
                (ei, ctx.rng.random::<u32>(), q)
            })
            .collect();
        scored.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let keep = self.batch(entries.len()) + 8;
        let start = scored.len().saturating_sub(keep);
        self.queue = scored.drain(start..).map(|(_, _, q)| q).collect();
        let best_time = history.best().map_or(f64::INFINITY, |(_, t)| t);
        self.scored_at = Some((entries.len(), best_time, polishing));
        self.model = Some((forest, mean, sd));
    }

    /// The last fitted model's predicted log-time of `p` (mean, standard deviation).
    pub(crate) fn predict_log_time(&self, p: &Point) -> Option<(f64, f64)> {
        let (forest, shift, scale) = self.model.as_ref()?;
        let (m, s) = forest.predict(&self.features.as_ref()?.row(p));
        Some((m * scale + shift, s * scale))
    }

    /// Results after which the model is refitted when the best time has not improved.
    fn batch(&self, seen: usize) -> usize {
        // A refit schedule of 0 refits after every result.
        seen.checked_div(self.refit).unwrap_or(1).max(1)
    }
}

impl Strategy for ForestSearch {
    fn name(&self) -> &str {
        "forest"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        let seen = ctx.history.len();
        let best_time = match ctx.history.best() {
            Some((_, t)) if seen >= initial_design(ctx.budget) => t,
            _ => return ctx.random_unseen(),
        };
        let polishing = (ctx.left() as f64) <= self.polish * ctx.budget as f64;
        let stale = match self.scored_at {
            None => true,
            Some((at, best, pol)) => {
                best_time < best || pol != polishing || seen >= at + self.batch(seen)
            }
        };
        if stale {
            self.rescore(ctx, polishing);
        }
        for attempt in 0..2 {
            while let Some(p) = self.queue.pop() {
                if !ctx.history.contains(&p) {
                    return Some(p);
                }
            }
            if attempt == 0 {
                self.rescore(ctx, polishing);
            }
        }
        ctx.random_unseen()
    }

    fn tell(&mut self, _ctx: &mut Ctx<'_>, _point: &Point, _time: Option<f64>) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Param;

    #[test]
    fn alignment_features_only_where_they_add_information() {
        let space = Space::builder()
            .param(Param::range("BX", 16, 256, 16).unwrap())
            .param(Param::powers_of_two("TS", 1, 64).unwrap())
            .param(Param::ints("U", [1, 3, 5]).unwrap())
            .param(Param::boolean("PAD").unwrap())
            .build()
            .unwrap();
        let f = Features::new(&space);
        // BX: 16, 32, 48, … have power-of-two factors 4, 5, 4, 6, …; TS follows its index; U is
        // odd throughout; PAD has two values.
        assert_eq!(f.alignment.len(), 1);
        assert_eq!(f.alignment[0].0, 0);
        assert_eq!(&f.alignment[0].1[..4], &[4, 5, 4, 6]);
        assert_eq!(f.sizes, vec![16, 7, 3, 2, 16]);
        assert_eq!(f.row(&[1, 2, 0, 1]), vec![1, 2, 0, 1, 5]);
    }
}
