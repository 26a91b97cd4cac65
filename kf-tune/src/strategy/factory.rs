//! [`StrategyFactory`]: makes a fresh tuning strategy for each kernel tuned. Strategies keep
//! state (their history, their model), so a search that tunes many kernels needs a factory,
//! not one strategy; the factory's [`name`](StrategyFactory::name) is what a run directory
//! records, so that a resumed run refuses a changed strategy.

use std::sync::Arc;

use super::base::Strategy;
use super::build::by_name;
use super::name::StrategyName;
use crate::error::Result;

/// Makes a fresh [`Strategy`] for each kernel tuned.
///
/// Implemented by [`StrategyName`] (each built-in strategy, a value to name in code), by what
/// [`factory_by_name`] gives for a name read as text (aliases and `bandit:…` lists included),
/// and by [`FnStrategy`] (a closure under a name).
///
/// # Example
///
/// ```
/// use kf_tune::strategy::{FnStrategy, RandomSearch, Strategy, StrategyFactory};
///
/// let factory = FnStrategy::new("my-random", || Box::new(RandomSearch::new()) as Box<dyn Strategy>);
/// assert_eq!(factory.name(), "my-random");
/// let fresh = factory.build().unwrap();
/// assert_eq!(fresh.name(), "random");
/// ```
pub trait StrategyFactory: Send + Sync {
    /// The stable name recorded in run directories and reports.
    fn name(&self) -> String;

    /// A fresh strategy.
    ///
    /// # Errors
    /// When the strategy cannot be made (an unknown name, say).
    fn build(&self) -> Result<Box<dyn Strategy>>;
}

impl StrategyFactory for StrategyName {
    fn name(&self) -> String {
        self.to_string()
    }

    fn build(&self) -> Result<Box<dyn Strategy>> {
        Ok(StrategyName::build(*self))
    }
}

impl<F: StrategyFactory + ?Sized> StrategyFactory for Arc<F> {
    fn name(&self) -> String {
        (**self).name()
    }

    fn build(&self) -> Result<Box<dyn Strategy>> {
        (**self).build()
    }
}

/// The strategies' registry for names read as text (`kf tune --strategy`, a run's files): the
/// factory of the strategy `name` as [`by_name`] reads it (aliases and `bandit:…` lists
/// included), checked now; its recorded name is the name as given.
///
/// ```
/// use kf_tune::strategy::factory_by_name;
///
/// let sa = factory_by_name("sa").unwrap();
/// assert_eq!(sa.name(), "sa");
/// assert_eq!(sa.build().unwrap().name(), "simulated_annealing");
/// assert!(factory_by_name("nope").is_err());
/// ```
///
/// # Errors
/// An unknown name ([`crate::TuneError::UnknownStrategy`]).
pub fn factory_by_name(name: impl Into<String>) -> Result<Arc<dyn StrategyFactory>> {
    let name = name.into();
    by_name(&name)?;
    Ok(Arc::new(ByName(name)))
}

/// A strategy by the name [`by_name`] reads, checked by [`factory_by_name`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct ByName(String);

impl StrategyFactory for ByName {
    fn name(&self) -> String {
        self.0.clone()
    }

    fn build(&self) -> Result<Box<dyn Strategy>> {
        by_name(&self.0)
    }
}

/// A closure that makes a strategy, under a name.
pub struct FnStrategy<F> {
    name: String,
    make: F,
}

impl<F> FnStrategy<F>
where
    F: Fn() -> Box<dyn Strategy> + Send + Sync,
{
    /// Makes a fresh strategy with `make`, recorded as `name`.
    pub fn new(name: impl Into<String>, make: F) -> Self {
        FnStrategy {
            name: name.into(),
            make,
        }
    }
}

impl<F> StrategyFactory for FnStrategy<F>
where
    F: Fn() -> Box<dyn Strategy> + Send + Sync,
{
    fn name(&self) -> String {
        self.name.clone()
    }

    fn build(&self) -> Result<Box<dyn Strategy>> {
        Ok((self.make)())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_strategies_are_checked_and_keep_the_name_given() {
        let f = factory_by_name("bandit:sa,random").unwrap();
        assert_eq!(f.name(), "bandit:sa,random");
        assert_eq!(f.build().unwrap().name(), "bandit");
        assert!(factory_by_name("nope").is_err());
        assert!(factory_by_name("bandit:").is_err());
        assert_eq!(StrategyFactory::name(&StrategyName::Forest), "forest");
    }
}
