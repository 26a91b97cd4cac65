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
mod build;
mod factory;
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
pub use build::by_name;
pub use factory::{factory_by_name, FnStrategy, StrategyFactory};
pub use forest_search::ForestSearch;
pub use genetic::Genetic;
pub use ils::GreedyIls;
pub use name::{StrategyName, UnknownStrategyName, STRATEGY_NAMES};
