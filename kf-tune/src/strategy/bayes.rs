//! Bayesian optimisation with a Gaussian process over the configuration features.

use std::collections::HashMap;

use rand::seq::IndexedRandom;

use super::base::{alignment, initial_design, log_time, space_filling, Strategy};
use super::gp::{expected_improvement, fit, CandidateGp, Hyper};
use crate::ctx::Ctx;
use crate::space::{Point, Space};

/// Spaces up to this size use every valid configuration as an acquisition candidate.
const FULL_CANDIDATES: u128 = 40_000;
/// Candidate pool size for larger spaces.
const POOL: usize = 4_000;

/// The surrogate model shared by [`BayesOpt`] and [`crate::strategy::Auto`]: a GP on log-time
/// over features scaled to `[0, 1]` (value indices of ordered parameters; one-hot codes of
/// categorical ones; the power-of-two factor of integer parameters whose alignment is not
/// implied by their order; constant parameters dropped), failures imputed as slightly worse than the
/// worst time seen, hyperparameters refitted on a geometric schedule.
#[derive(Debug)]
pub(crate) struct Surrogate {
    /// Feature columns that vary.
    active: Vec<usize>,
    /// Alignment features (see [`crate::strategy::forest_search`]).
    align: Vec<(usize, Vec<u16>)>,
    pub(crate) cands: Vec<Point>,
    pub(crate) cand_index: HashMap<Point, usize>,
    /// Features of each candidate.
    cand_x: Vec<Vec<f64>>,
    /// Whether each candidate was seen.
    pub(crate) seen: Vec<bool>,
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

/// Standardisation of the raw targets: `(raw − shift) / scale`, failures counting as `fail`.
#[derive(Debug, Clone, Copy)]
struct Scaling {
    shift: f64,
    scale: f64,
    fail: f64,
    best: f64,
}

/// Model features of a configuration: value indices of ordered parameters scaled to `[0, 1]`,
/// categorical parameters with more than two values one-hot (scaled so that two different
/// values are at distance 1), then the alignment features scaled to `[0, 1]` (kernels often care
/// whether a size is a multiple of 32 more than about its magnitude).
pub(crate) fn features_of(
    space: &Space,
    active: &[usize],
    align: &[(usize, Vec<u16>)],
    p: &[u16],
) -> Vec<f64> {
    if active.is_empty() {
        return vec![0.0];
    }
    let params = space.params();
    let mut out = Vec::with_capacity(active.len());
    for &d in active {
        let param = &params[d];
        let n = param.len();
        let i = usize::from(p[d]);
        if !param.kind().is_ordered() && n > 2 {
            for v in 0..n {
                out.push(if v == i {
                    std::f64::consts::FRAC_1_SQRT_2
                } else {
                    0.0
                });
            }
        } else {
            out.push(i as f64 / (n - 1) as f64);
        }
    }
    for (d, twos) in align {
        let hi = twos.iter().copied().max().unwrap_or(1).max(1);
        let t = twos.get(usize::from(p[*d])).copied().unwrap_or(0);
        out.push(f64::from(t) / f64::from(hi));
    }
    out
}

impl Surrogate {
    pub(crate) fn new(ctx: &mut Ctx<'_>) -> Self {
        let params = ctx.space.params();
        let active: Vec<usize> = (0..params.len()).filter(|&d| params[d].len() > 1).collect();
        let align = alignment(ctx.space);
        let dims = features_of(ctx.space, &active, &align, &vec![0; params.len()]).len();
        let full = ctx.space.len() <= FULL_CANDIDATES;
        let mut s = Surrogate {
            hyper: Hyper::initial(dims),
            active,
            align,
            cands: Vec::new(),
            cand_index: HashMap::new(),
            cand_x: Vec::new(),
            seen: Vec::new(),
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
        features_of(ctx.space, &self.active, &self.align, p)
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
        self.cand_x = cands.iter().map(|p| self.features(ctx, p)).collect();
        self.seen = cands.iter().map(|p| ctx.history.contains(p)).collect();
        self.cands = cands;
        self.gp = None;
        self.pool_age = 0;
    }

    fn scaling(&self) -> Scaling {
        let ok: Vec<f64> = self
            .obs
            .iter()
            .filter_map(|(_, t)| t.map(log_time))
            .collect();
        if ok.is_empty() {
            return Scaling {
                shift: 0.0,
                scale: 1.0,
                fail: 0.0,
                best: 0.0,
            };
        }
        let lo = ok.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ok.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let fail = hi + 0.1 * (hi - lo).max(0.1);
        let n = self.obs.len() as f64;
        let raw = |t: &Option<f64>| t.map_or(fail, log_time);
        let mean = self.obs.iter().map(|(_, t)| raw(t)).sum::<f64>() / n;
        let var = self
            .obs
            .iter()
            .map(|(_, t)| (raw(t) - mean) * (raw(t) - mean))
            .sum::<f64>()
            / n;
        let scale = var.sqrt().max(1e-9);
        Scaling {
            shift: mean,
            scale,
            fail,
            best: (lo - mean) / scale,
        }
    }

    /// Standardised targets for the observations (failures imputed).
    fn targets(&self) -> Vec<f64> {
        let s = self.scaling();
        self.obs
            .iter()
            .map(|(_, t)| (t.map_or(s.fail, log_time) - s.shift) / s.scale)
            .collect()
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
        for (p, _) in &fresh {
            if let Some(&i) = self.cand_index.get(p) {
                self.seen[i] = true;
            }
        }
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
            let mut gp = CandidateGp::new(self.hyper.clone(), self.cand_x.clone(), self.cap);
            for (x, (_, t)) in xs.into_iter().zip(&self.obs) {
                gp.add(x, t.map(log_time));
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
            for (p, t) in &fresh {
                let x = features_of(ctx.space, &self.active, &self.align, p);
                gp.add(x, t.map(log_time));
            }
        }
    }

    /// The posterior over the candidates (after [`Surrogate::update`]).
    pub(crate) fn posterior(&self) -> Option<Posterior> {
        let gp = self.gp.as_ref()?;
        if gp.len() != self.obs.len() {
            return None;
        }
        let s = self.scaling();
        Some(Posterior {
            mean: gp.mean(s.shift, s.scale, s.fail),
            sd: gp.sd(),
            best: s.best,
        })
    }

    /// Predicted log-time (mean, standard deviation) of a candidate configuration.
    pub(crate) fn predict_log_time(&self, p: &Point) -> Option<(f64, f64)> {
        let gp = self.gp.as_ref()?;
        let &i = self.cand_index.get(p)?;
        let s = self.scaling();
        let (m, sd) = gp.at(i, s.shift, s.scale, s.fail);
        Some((m * s.scale + s.shift, sd * s.scale))
    }

    /// Length scales of the fitted model, one per feature.
    #[allow(dead_code)]
    pub(crate) fn length_scales(&self) -> Vec<f64> {
        self.gp
            .as_ref()
            .map(|g| g.hyper().log_ls.iter().map(|l| l.exp()).collect())
            .unwrap_or_default()
    }
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

impl BayesOpt {
    /// The model's predicted log-time of `p` (mean, standard deviation), after bringing it up to
    /// date with the history.
    pub(crate) fn predict_log_time(&mut self, ctx: &mut Ctx<'_>, p: &Point) -> Option<(f64, f64)> {
        let model = self.model.get_or_insert_with(|| Surrogate::new(ctx));
        model.update(ctx);
        model.predict_log_time(p)
    }
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
        // When the tuner fans out, the configurations of the batch so far are pending: the
        // expected improvement near them is discounted by the model's correlation with them
        // (local penalisation), so that a batch spreads over several promising regions
        // instead of crowding one.
        let pending: Vec<Vec<f64>> = ctx
            .history
            .pending()
            .iter()
            .map(|p| model.features(ctx, p))
            .collect();
        let gp = model.gp.as_ref();
        let mut best: Option<(usize, f64)> = None;
        for i in 0..model.cands.len() {
            if model.seen[i] || ctx.history.is_pending(&model.cands[i]) {
                continue;
            }
            let mut ei = expected_improvement(post.mean[i], post.sd[i], post.best, self.xi);
            if let Some(gp) = gp {
                for x in &pending {
                    ei *= 1.0 - gp.correlation(i, x);
                }
            }
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
