//! The embedder's own tuning strategy: a random first configuration, then unseen neighbours
//! (one parameter changed) of the best so far; and its factory, since each kernel is tuned by
//! a fresh strategy.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kernelfoundry::tune::strategy::{Strategy, StrategyFactory};
use kernelfoundry::tune::{Ctx, Neighbourhood, Point};

/// Makes a [`BestNeighbour`] per kernel tuned, counting them.
#[derive(Default)]
pub struct BestNeighbourFactory {
    /// Strategies made (kernels tuned).
    pub made: Arc<AtomicU64>,
}

impl StrategyFactory for BestNeighbourFactory {
    fn name(&self) -> String {
        "best-neighbour".into()
    }

    fn build(&self) -> kernelfoundry::tune::Result<Box<dyn Strategy>> {
        self.made.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(BestNeighbour))
    }
}

/// Walks from the best configuration seen to an unseen neighbour of it.
pub struct BestNeighbour;

impl Strategy for BestNeighbour {
    fn name(&self) -> &str {
        "best-neighbour"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Option<Point> {
        let near_best = ctx.history.best().and_then(|(best, _)| {
            ctx.space
                .neighbours_of(best, Neighbourhood::Hamming)
                .into_iter()
                .find(|p| !ctx.history.contains(p))
        });
        near_best.or_else(|| ctx.random_unseen())
    }

    fn tell(&mut self, _ctx: &mut Ctx<'_>, _point: &Point, _time: Option<f64>) {}
}
