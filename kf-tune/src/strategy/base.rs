//! What every strategy builds on: the [`Strategy`] trait, and helpers several strategies
//! share. Below the strategies and `strategy/mod.rs`, so that none of them depends on another
//! through these.

use crate::ctx::{Ctx, History};
use crate::space::{Point, Space};

/// A tuning strategy (ask/tell).
///
/// ```
/// use kf_tune::strategy::Strategy;
/// use kf_tune::{Ctx, Point};
///
/// /// Proposes random configurations forever.
/// struct Dice;
/// impl Strategy for Dice {
///     fn name(&self) -> &str { "dice" }
///     fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> { ctx.random_unseen() }
///     fn tell(&mut self, _ctx: &mut Ctx<'_>, _point: &Point, _time: Option<f64>) {}
/// }
/// ```
pub trait Strategy: Send {
    /// The strategy's name.
    fn name(&self) -> &str;

    /// The next configuration to try; `None` ends the run. Proposing a configuration already
    /// seen is allowed (it is answered by [`Strategy::tell`] at no cost).
    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point>;

    /// The outcome of a configuration: its time, or `None` when it failed. Called for every
    /// configuration the tuner evaluates or answers, including ones this strategy did not
    /// propose (a substitute the tuner chose, or one another strategy of a bandit proposed).
    fn tell(&mut self, ctx: &mut Ctx<'_>, point: &Point, time: Option<f64>);
}

/// A strategy's own proposals whose outcomes are still to come, each with what the strategy
/// keeps about it until then (a prediction, the arm that proposed it). One at a time there is
/// at most one; when the tuner fans out ([`crate::Tuner::fan_out`]), a batch's worth.
#[derive(Debug, Clone)]
pub(crate) struct Proposals<T>(Vec<(Point, T)>);

impl<T> Default for Proposals<T> {
    fn default() -> Self {
        Proposals(Vec::new())
    }
}

impl<T> Proposals<T> {
    /// Forgets proposals the tuner is not measuring (it substituted another, or answered a
    /// repeat from the history). Called at the start of an ask: one at a time nothing is
    /// pending then, so only the proposal about to be made is kept, as a single slot would.
    pub(crate) fn forget_unmeasured(&mut self, history: &History) {
        self.0.retain(|(p, _)| history.is_pending(p));
    }

    /// Remembers a proposal.
    pub(crate) fn push(&mut self, point: Point, kept: T) {
        self.0.push((point, kept));
    }

    /// What was kept about `point`, when it was this strategy's proposal; it is no longer
    /// pending.
    pub(crate) fn take(&mut self, point: &Point) -> Option<T> {
        let i = self.0.iter().position(|(p, _)| p == point)?;
        Some(self.0.remove(i).1)
    }

    /// Whether no proposal is waiting for its outcome.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The proposals waiting for their outcomes, with what was kept about each.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(Point, T)> {
        self.0.iter()
    }
}

/// Log of a time, the scale strategies compare on (times are positive and skewed).
pub(crate) fn log_time(t: f64) -> f64 {
    t.max(1e-300).ln()
}

/// Default initial design size for a budget.
pub(crate) fn initial_design(budget: usize) -> usize {
    ((budget as f64).sqrt().ceil() as usize).clamp(3, 20)
}

/// A space-filling initial design: among a few random unseen configurations, the one farthest
/// from everything seen or pending.
pub(crate) fn space_filling(ctx: &mut Ctx<'_>) -> Option<Point> {
    let seen: Vec<Vec<f64>> = ctx
        .history
        .entries()
        .iter()
        .map(|(p, _)| p)
        .chain(ctx.history.pending())
        .map(|p| ctx.space.features(p))
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

/// Alignment features of a space: for each integer parameter with at least three values whose
/// power-of-two factors neither stay constant nor follow the value index, the factor (capped at
/// 15) of each of its values. GPU kernels often care more about whether a size is a multiple of
/// 32 or 64 than about its magnitude.
pub(crate) fn alignment(space: &Space) -> Vec<(usize, Vec<u16>)> {
    let mut out = Vec::new();
    for (d, p) in space.params().iter().enumerate() {
        let Some(values) = p
            .values()
            .iter()
            .map(|v| v.as_i64())
            .collect::<Option<Vec<i64>>>()
        else {
            continue;
        };
        if values.len() < 3 {
            continue;
        }
        let twos: Vec<u16> = values
            .iter()
            .map(|v| {
                if *v == 0 {
                    0
                } else {
                    v.trailing_zeros().min(15) as u16
                }
            })
            .collect();
        if twos.windows(2).all(|w| w[0] < w[1]) || twos.iter().all(|t| *t == twos[0]) {
            continue;
        }
        out.push((d, twos));
    }
    out
}
