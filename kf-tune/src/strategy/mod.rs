//! Tuning strategies, driven by a [`crate::Tuner`] through ask/tell: the tuner asks for a
//! configuration, evaluates it if it is new (a configuration seen before is answered from the
//! history at no cost), and tells the strategy its time (`None` for a failure).
//!
//! Because strategies never call the objective themselves, the same strategy runs against a
//! synchronous objective, an asynchronous evaluator, or a replayed cache.
//!
//! | name | strategy |
//! |---|---|
//! | `exhaustive` | every configuration in order |
//! | `random` | uniform (or prior-weighted) random sampling without repetition |
//! | `simulated_annealing` | annealing over neighbourhoods with restarts |
//! | `genetic_algorithm` | a steady generational GA with uniform crossover and repair |
//! | `greedy_ils` | first-improvement local search with perturbation restarts |
//! | `bayes_opt` | Gaussian-process Bayesian optimisation (log-time model, categorical parameters one-hot, power-of-two alignment features, expected improvement) |
//! | `forest` | [`ForestSearch`]: SMAC-style search with a random-forest surrogate (expected improvement over random configurations, neighbourhoods of the best and crossovers of them) |
//! | `bandit` | a bandit choosing among the strategies above by their recent improvements |
//! | `default` | [`Auto`]: random start; then the forest or the GP proposes, whichever has predicted recent results better; then an exhaustive best-first search of the Hamming neighbourhoods of the best configurations |

mod anneal;
mod auto;
mod bandit;
mod basic;
mod bayes;
mod forest;
mod forest_search;
mod genetic;
mod gp;
mod ils;

pub use anneal::SimulatedAnnealing;
pub use auto::Auto;
pub use bandit::Bandit;
pub use basic::{Exhaustive, RandomSearch};
pub use bayes::BayesOpt;
pub use forest_search::ForestSearch;
pub use genetic::Genetic;
pub use ils::GreedyIls;

use crate::error::{Result, TuneError};
use crate::space::Point;
use crate::tuner::Ctx;

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

/// Names accepted by [`by_name`].
pub const STRATEGY_NAMES: &[&str] = &[
    "default",
    "exhaustive",
    "random",
    "simulated_annealing",
    "genetic_algorithm",
    "greedy_ils",
    "bayes_opt",
    "forest",
    "bandit",
];

/// A strategy by name (see [`STRATEGY_NAMES`]; a few aliases are accepted: `auto`, `sa`, `ga`,
/// `ils`, `bo`, `brute_force`). `bandit:NAME,NAME,…` (or `+`-separated) is a bandit over the named
/// strategies.
pub fn by_name(name: &str) -> Result<Box<dyn Strategy>> {
    let lower = name.to_ascii_lowercase().replace('-', "_");
    if let Some(list) = lower.strip_prefix("bandit:") {
        let arms = list
            .split([',', '+'])
            .filter(|s| !s.trim().is_empty())
            .map(|s| by_name(s.trim()))
            .collect::<Result<Vec<_>>>()?;
        if arms.is_empty() {
            return Err(TuneError::UnknownStrategy(name.to_owned()));
        }
        return Ok(Box::new(Bandit::new(arms)));
    }
    Ok(match lower.as_str() {
        "default" | "auto" => Box::new(Auto::new()),
        "exhaustive" | "brute_force" => Box::new(Exhaustive::new()),
        "random" | "random_sample" => Box::new(RandomSearch::new()),
        "simulated_annealing" | "sa" => Box::new(SimulatedAnnealing::new()),
        "genetic_algorithm" | "ga" => Box::new(Genetic::new()),
        "greedy_ils" | "ils" => Box::new(GreedyIls::new()),
        "bayes_opt" | "bo" => Box::new(BayesOpt::new()),
        "forest" | "rf" | "smac" => Box::new(ForestSearch::new()),
        "bandit" => Box::new(Bandit::standard()),
        _ => return Err(TuneError::UnknownStrategy(name.to_owned())),
    })
}

/// Log of a time, the scale strategies compare on (times are positive and skewed).
pub(crate) fn log_time(t: f64) -> f64 {
    t.max(1e-300).ln()
}
