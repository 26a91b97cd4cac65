//! Bayesian optimisation with a Gaussian process over the configuration features.

use std::collections::HashMap;

use rand::seq::IndexedRandom;

use crate::space::Point;
use crate::strategy::gp::{expected_improvement, fit, CandidateGp, Hyper};
use crate::strategy::{log_time, Strategy};
use crate::tuner::Ctx;

/// Spaces up to this size use every valid configuration as an acquisition candidate.
const FULL_CANDIDATES: u128 = 40_000;
/// Candidate pool size for larger spaces.
const POOL: usize = 4_000;

/// The surrogate model shared by [`BayesOpt`] and [`crate::strategy::Auto`]: a GP on log-time
/// over features scaled to `[0, 1]` (constant parameters dropped), failures imputed as slightly
/// worse than the worst time seen, hyperparameters refitted on a geometric schedule.
#[derive(Debug)]
pub(crate) struct Surrogate {
    /// Feature columns that vary.
    active: Vec<usize>,
    pub(crate) cands: Vec<Point>,
    pub(crate) cand_index: HashMap<Point, usize>,
    gp: Option<CandidateGp>,
    /// Observations in the order added to the GP.
    obs: Vec<(Point, Option<f64>)>,
    next_refit: usize,
    hyper: Hyper,
    cap: usize,
    /// Whether the candidate set is the whole space.
    full: bool,
    pool_age: usize,
}

/// Posterior over the candidates, on the standardised log-time scale.
#[derive(Debug)]
pub(crate) struct Posterior {
    pub(crate) mean: Vec<f64>,
    pub(crate) sd: Vec<f64>,
    /// Best (lowest) standardised observed value.
    pub(crate) best: f64,
}

impl Surrogate {
    pub(crate) fn new(ctx: &mut Ctx<'_>) -> Self {
        let params = ctx.space.params();
        let active: Vec<usize> = (0..params.len()).filter(|&d| params[d].len() > 1).collect();
        let full = ctx.space.len() <= FULL_CANDIDATES;
        let mut s = Surrogate {
            hyper: Hyper::initial(active.len().max(1)),
            active,
            cands: Vec::new(),
            cand_index: HashMap::new(),
            gp: None,
            obs: Vec::new(),
            next_refit: 0,
            cap: ctx.budget + ctx.history.len() + 8,
            full,
            pool_age: 0,
        };
        s.rebuild_candidates(ctx);
        s
    }

    fn features(&self, ctx: &Ctx<'_>, p: &[u16]) -> Vec<f64> {
        let f = ctx.space.features(p);
        if self.active.is_empty() {
            return vec![0.0];
        }
        self.active.iter().map(|&d| f[d]).collect()
    }

    fn rebuild_candidates(&mut self, ctx: &mut Ctx<'_>) {
        let cands: Vec<Point> = if self.full {
            ctx.space.iter_points().collect()
        } else {
            // Random pool plus the neighbourhoods of the best configurations seen.
            let mut pool: Vec<Point> = Vec::with_capacity(POOL + 512);
            for _ in 0..POOL {
                if let Some(p) = ctx.random_point() {
                    pool.push(p);
                }
            }
            let mut seen: Vec<(&Point, f64)> = ctx
                .history
                .entries()
                .iter()
                .filter_map(|(p, t)| t.map(|t| (p, t)))
                .collect();
            seen.sort_by(|a, b| a.1.total_cmp(&b.1));
            for (p, _) in seen.iter().take(8) {
                pool.extend(
                    ctx.space
                        .neighbours_of(p, crate::space::Neighbourhood::Hamming),
                );
            }
            pool.sort();
            pool.dedup();
            pool
        };
        self.cand_index = cands
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), i))
            .collect();
        self.cands = cands;
        self.gp = None;
        self.pool_age = 0;
    }

    /// Standardised targets for the observations (failures imputed).
    fn targets(&self) -> Vec<f64> {
        let ok: Vec<f64> = self
            .obs
            .iter()
            .filter_map(|(_, t)| t.map(log_time))
            .collect();
        if ok.is_empty() {
            return vec![0.0; self.obs.len()];
        }
        let lo = ok.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ok.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let fail = hi + 0.1 * (hi - lo).max(0.1);
        let raw: Vec<f64> = self
            .obs
            .iter()
            .map(|(_, t)| t.map_or(fail, log_time))
            .collect();
        let n = raw.len() as f64;
        let mean = raw.iter().sum::<f64>() / n;
        let var = raw.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        let sd = var.sqrt().max(1e-9);
        raw.iter().map(|v| (v - mean) / sd).collect()
    }

    /// Brings the GP up to date with the history; refits hyperparameters on schedule.
    pub(crate) fn update(&mut self, ctx: &mut Ctx<'_>) {
        if !self.full {
            self.pool_age += 1;
            if self.pool_age > 10 {
                self.rebuild_candidates(ctx);
            }
        }
        let known = self.obs.len();
        let fresh: Vec<(Point, Option<f64>)> =
            ctx.history.entries()[known.min(ctx.history.len())..].to_vec();
        self.obs.extend(fresh.iter().cloned());
        let n = self.obs.len();
        if n == 0 {
            return;
        }
        let need_refit = self.gp.is_none() || n >= self.next_refit;
        if need_refit {
            let xs: Vec<Vec<f64>> = self
                .obs
                .iter()
                .map(|(p, _)| self.features(ctx, p))
                .collect();
            let y = self.targets();
            let steps = if n < 40 {
                80
            } else if n < 150 {
                50
            } else {
                30
            };
            if n >= 3 {
                self.hyper = fit(&xs, &y, &self.hyper, steps);
            }
            self.cap = self.cap.max(ctx.budget + ctx.history.len() + 8);
            let cand_x: Vec<Vec<f64>> = self.cands.iter().map(|p| self.features(ctx, p)).collect();
            let mut gp = CandidateGp::new(self.hyper.clone(), cand_x, self.cap);
            for x in xs {
                gp.add(x);
            }
            self.gp = Some(gp);
            self.next_refit = if n < 20 {
                n + 2
            } else if n < 100 {
                (n as f64 * 1.25).ceil() as usize
            } else {
                n * 2
            };
        } else if let Some(gp) = self.gp.as_mut() {
            for (p, _) in &fresh {
                let f = ctx.space.features(p);
                let x = if self.active.is_empty() {
                    vec![0.0]
                } else {
                    self.active.iter().map(|&d| f[d]).collect()
                };
                gp.add(x);
            }
        }
    }

    /// The posterior over the candidates (after [`Surrogate::update`]).
    pub(crate) fn posterior(&self) -> Option<Posterior> {
        let gp = self.gp.as_ref()?;
        let y = self.targets();
        if gp.len() != y.len() {
            return None;
        }
        let (mean, sd) = gp.predict(&y);
        let best = self
            .obs
            .iter()
            .zip(&y)
            .filter(|((_, t), _)| t.is_some())
            .map(|(_, v)| *v)
            .fold(f64::INFINITY, f64::min);
        Some(Posterior { mean, sd, best })
    }

    /// Length scales of the fitted model, one per active parameter.
    #[allow(dead_code)]
    pub(crate) fn length_scales(&self) -> Vec<f64> {
        self.gp
            .as_ref()
            .map(|g| g.hyper().log_ls.iter().map(|l| l.exp()).collect())
            .unwrap_or_default()
    }
}

/// A space-filling initial design: among a few random unseen configurations, the one farthest
/// from everything seen.
pub(crate) fn space_filling(ctx: &mut Ctx<'_>) -> Option<Point> {
    let seen: Vec<Vec<f64>> = ctx
        .history
        .entries()
        .iter()
        .map(|(p, _)| ctx.space.features(p))
        .collect();
    let mut best: Option<(Point, f64)> = None;
    for _ in 0..24 {
        let Some(p) = ctx.random_unseen() else { break };
        let f = ctx.space.features(&p);
        let d = seen
            .iter()
            .map(|s| {
                s.iter()
                    .zip(&f)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum::<f64>()
            })
            .fold(f64::INFINITY, f64::min);
        if best.as_ref().is_none_or(|(_, bd)| d > *bd) {
            best = Some((p, d));
        }
    }
    best.map(|(p, _)| p)
}

/// Bayesian optimisation: a space-filling initial design, then the unseen candidate with the
/// largest expected improvement of a Gaussian-process model of log-time.
#[derive(Debug)]
pub struct BayesOpt {
    /// Initial design size (`None`: about √budget, between 3 and 20).
    pub initial: Option<usize>,
    /// Exploration margin of expected improvement (standardised units).
    pub xi: f64,
    model: Option<Surrogate>,
}

impl Default for BayesOpt {
    fn default() -> Self {
        Self::new()
    }
}

impl BayesOpt {
    /// Bayesian optimisation with default settings.
    pub fn new() -> Self {
        BayesOpt {
            initial: None,
            xi: 0.01,
            model: None,
        }
    }
}

/// Default initial design size for a budget.
pub(crate) fn initial_design(budget: usize) -> usize {
    ((budget as f64).sqrt().ceil() as usize).clamp(3, 20)
}

impl Strategy for BayesOpt {
    fn name(&self) -> &str {
        "bayes_opt"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        let n_init = self.initial.unwrap_or_else(|| initial_design(ctx.budget));
        if ctx.history.len() < n_init || ctx.history.best().is_none() {
            return space_filling(ctx);
        }
        let model = self.model.get_or_insert_with(|| Surrogate::new(ctx));
        model.update(ctx);
        let Some(post) = model.posterior() else {
            return ctx.random_unseen();
        };
        let mut best: Option<(usize, f64)> = None;
        for (i, p) in model.cands.iter().enumerate() {
            if ctx.history.contains(p) {
                continue;
            }
            let ei = expected_improvement(post.mean[i], post.sd[i], post.best, self.xi);
            if best.is_none_or(|(_, b)| ei > b) {
                best = Some((i, ei));
            }
        }
        match best {
            Some((i, _)) => Some(model.cands[i].clone()),
            None => {
                let unseen: Vec<&Point> = model
                    .cands
                    .iter()
                    .filter(|p| !ctx.history.contains(p))
                    .collect();
                unseen
                    .choose(ctx.rng)
                    .map(|p| (*p).clone())
                    .or_else(|| ctx.random_unseen())
            }
        }
    }

    fn tell(&mut self, _ctx: &mut Ctx<'_>, _point: &Point, _time: Option<f64>) {}
}
