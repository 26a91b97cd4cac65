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
mod base;
mod basic;
mod bayes;
mod forest;
mod forest_search;
mod genetic;
mod gp;
mod ils;
pub(crate) mod name;

pub use anneal::SimulatedAnnealing;
pub use auto::Auto;
pub use bandit::Bandit;
pub use base::Strategy;
pub use basic::{Exhaustive, RandomSearch};
pub use bayes::BayesOpt;
pub use forest_search::ForestSearch;
pub use genetic::Genetic;
pub use ils::GreedyIls;
pub use name::{StrategyName, UnknownStrategyName, STRATEGY_NAMES};

use crate::error::{Result, TuneError};

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
            return Err(TuneError::UnknownStrategy(UnknownStrategyName {
                name: name.to_owned(),
            }));
        }
        return Ok(Box::new(Bandit::new(arms)));
    }
    Ok(name.parse::<StrategyName>()?.build())
}

impl StrategyName {
    /// A new strategy of this kind, with its default settings.
    ///
    /// ```
    /// use kf_tune::strategy::StrategyName;
    ///
    /// assert_eq!(StrategyName::GreedyIls.build().name(), "greedy_ils");
    /// ```
    pub fn build(self) -> Box<dyn Strategy> {
        match self {
            StrategyName::Default => Box::new(Auto::new()),
            StrategyName::Exhaustive => Box::new(Exhaustive::new()),
            StrategyName::Random => Box::new(RandomSearch::new()),
            StrategyName::SimulatedAnnealing => Box::new(SimulatedAnnealing::new()),
            StrategyName::GeneticAlgorithm => Box::new(Genetic::new()),
            StrategyName::GreedyIls => Box::new(GreedyIls::new()),
            StrategyName::BayesOpt => Box::new(BayesOpt::new()),
            StrategyName::Forest => Box::new(ForestSearch::new()),
            StrategyName::Bandit => Box::new(Bandit::standard()),
        }
    }
}
