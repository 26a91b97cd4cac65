//! [`StrategyName`]: the names of the built-in strategies, as a type. Below `strategy/mod.rs`
//! and the crate's error type, which both refer to it.

use std::fmt;
use std::str::FromStr;

/// Names accepted by [`crate::strategy::by_name`], in the order of [`StrategyName::ALL`].
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

/// A built-in tuning strategy, by name. It parses the names of [`STRATEGY_NAMES`] and a few
/// aliases (`auto`, `brute_force`, `random_sample`, `sa`, `ga`, `ils`, `bo`, `rf`, `smac`),
/// ignoring case and reading `-` as `_`; it displays as its name in [`STRATEGY_NAMES`].
/// [`StrategyName::build`] makes the strategy.
///
/// ```
/// use kf_tune::strategy::StrategyName;
///
/// let s: StrategyName = "Simulated-Annealing".parse().unwrap();
/// assert_eq!(s, StrategyName::SimulatedAnnealing);
/// assert_eq!(s.to_string(), "simulated_annealing");
/// assert_eq!("sa".parse::<StrategyName>().unwrap(), s);
/// let err = "nope".parse::<StrategyName>().unwrap_err();
/// assert!(err.to_string().starts_with("unknown strategy `nope` (known: default, exhaustive,"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StrategyName {
    /// `default`: [`crate::strategy::Auto`].
    Default,
    /// `exhaustive`: [`crate::strategy::Exhaustive`].
    Exhaustive,
    /// `random`: [`crate::strategy::RandomSearch`].
    Random,
    /// `simulated_annealing`: [`crate::strategy::SimulatedAnnealing`].
    SimulatedAnnealing,
    /// `genetic_algorithm`: [`crate::strategy::Genetic`].
    GeneticAlgorithm,
    /// `greedy_ils`: [`crate::strategy::GreedyIls`].
    GreedyIls,
    /// `bayes_opt`: [`crate::strategy::BayesOpt`].
    BayesOpt,
    /// `forest`: [`crate::strategy::ForestSearch`].
    Forest,
    /// `bandit`: [`crate::strategy::Bandit::standard`].
    Bandit,
}

impl StrategyName {
    /// Every built-in strategy, in the order of [`STRATEGY_NAMES`].
    pub const ALL: [StrategyName; 9] = [
        StrategyName::Default,
        StrategyName::Exhaustive,
        StrategyName::Random,
        StrategyName::SimulatedAnnealing,
        StrategyName::GeneticAlgorithm,
        StrategyName::GreedyIls,
        StrategyName::BayesOpt,
        StrategyName::Forest,
        StrategyName::Bandit,
    ];

    /// The name, as in [`STRATEGY_NAMES`] (and on the command line).
    pub fn as_str(self) -> &'static str {
        match self {
            StrategyName::Default => "default",
            StrategyName::Exhaustive => "exhaustive",
            StrategyName::Random => "random",
            StrategyName::SimulatedAnnealing => "simulated_annealing",
            StrategyName::GeneticAlgorithm => "genetic_algorithm",
            StrategyName::GreedyIls => "greedy_ils",
            StrategyName::BayesOpt => "bayes_opt",
            StrategyName::Forest => "forest",
            StrategyName::Bandit => "bandit",
        }
    }
}

impl fmt::Display for StrategyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A strategy name that names no built-in strategy; its message lists the valid names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{name}` (known: {known})", known = STRATEGY_NAMES.join(", "))]
pub struct UnknownStrategyName {
    /// The name as given.
    pub name: String,
}

impl FromStr for StrategyName {
    type Err = UnknownStrategyName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let lower = name.to_ascii_lowercase().replace('-', "_");
        Ok(match lower.as_str() {
            "default" | "auto" => StrategyName::Default,
            "exhaustive" | "brute_force" => StrategyName::Exhaustive,
            "random" | "random_sample" => StrategyName::Random,
            "simulated_annealing" | "sa" => StrategyName::SimulatedAnnealing,
            "genetic_algorithm" | "ga" => StrategyName::GeneticAlgorithm,
            "greedy_ils" | "ils" => StrategyName::GreedyIls,
            "bayes_opt" | "bo" => StrategyName::BayesOpt,
            "forest" | "rf" | "smac" => StrategyName::Forest,
            "bandit" => StrategyName::Bandit,
            _ => {
                return Err(UnknownStrategyName {
                    name: name.to_owned(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_the_list() {
        assert_eq!(StrategyName::ALL.len(), STRATEGY_NAMES.len());
        for (s, name) in StrategyName::ALL.iter().zip(STRATEGY_NAMES) {
            assert_eq!(s.as_str(), *name);
            assert_eq!(name.parse::<StrategyName>(), Ok(*s));
        }
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = "annealing".parse::<StrategyName>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown strategy `annealing` (known: default, exhaustive, random, \
             simulated_annealing, genetic_algorithm, greedy_ils, bayes_opt, forest, bandit)"
        );
    }
}
