//! Exhaustive and random search.

use super::base::Strategy;
use crate::ctx::Ctx;
use crate::space::Point;

/// Every configuration in the space's order (heaviest first under a prior), until the budget
/// is spent.
#[derive(Debug, Clone, Default)]
pub struct Exhaustive {
    last: Option<Point>,
    done: bool,
    /// With a prior: the whole space, heaviest first (spaces up to a million configurations).
    order: Option<Vec<Point>>,
    next: usize,
}

impl Exhaustive {
    /// A new exhaustive search.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Strategy for Exhaustive {
    fn name(&self) -> &str {
        "exhaustive"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        if self.done {
            return None;
        }
        if let Some(prior) = ctx.prior {
            if self.order.is_none() && ctx.space.len() <= 1_000_000 {
                let mut all: Vec<(Point, f64)> = ctx
                    .space
                    .iter_points()
                    .map(|p| {
                        let w = prior.weight_of(&p);
                        (p, w)
                    })
                    .collect();
                all.sort_by(|a, b| b.1.total_cmp(&a.1));
                self.order = Some(all.into_iter().map(|(p, _)| p).collect());
            }
        }
        if let Some(order) = &self.order {
            while let Some(p) = order.get(self.next) {
                self.next += 1;
                if !ctx.history.contains(p) {
                    return Some(p.clone());
                }
            }
            self.done = true;
            return None;
        }
        let next = ctx
            .space
            .iter_after(self.last.as_deref())
            .find(|p| !ctx.history.contains(p));
        match next {
            Some(p) => {
                self.last = Some(p.clone());
                Some(p)
            }
            None => {
                self.done = true;
                None
            }
        }
    }

    fn tell(&mut self, _ctx: &mut Ctx<'_>, _point: &Point, _time: Option<f64>) {}
}

/// Random sampling without repetition (prior-weighted when the tuner has a prior).
#[derive(Debug, Clone, Default)]
pub struct RandomSearch;

impl RandomSearch {
    /// A new random search.
    pub fn new() -> Self {
        RandomSearch
    }
}

impl Strategy for RandomSearch {
    fn name(&self) -> &str {
        "random"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        ctx.random_unseen()
    }

    fn tell(&mut self, _ctx: &mut Ctx<'_>, _point: &Point, _time: Option<f64>) {}
}
