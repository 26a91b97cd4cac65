//! [`by_name`] and [`StrategyName::build`]: the built-in strategies made from their names.
//! Its own file, below `strategy/mod.rs`, so that the strategy factories can use it.

use super::anneal::SimulatedAnnealing;
use super::auto::Auto;
use super::bandit::Bandit;
use super::base::Strategy;
use super::basic::{Exhaustive, RandomSearch};
use super::bayes::BayesOpt;
use super::forest_search::ForestSearch;
use super::genetic::Genetic;
use super::ils::GreedyIls;
use super::name::{StrategyName, UnknownStrategyName};
use crate::error::{Result, TuneError};

/// A strategy by name (see [`STRATEGY_NAMES`](super::STRATEGY_NAMES); a few aliases are
/// accepted: `auto`, `sa`, `ga`, `ils`, `bo`, `brute_force`). `bandit:NAME,NAME,…` (or `+`-separated) is a bandit over the named
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
