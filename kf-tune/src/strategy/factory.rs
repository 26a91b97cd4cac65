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
/// Implemented by [`StrategyName`] and [`NamedStrategy`] (the built-in strategies by name, as
/// `--tune-strategy` gives them) and by [`FnStrategy`] (a closure under a name).
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

/// A strategy by the name [`by_name`] reads (aliases and `bandit:…` lists included), as the
/// command line gives it; its recorded name is the name as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedStrategy(String);

impl NamedStrategy {
    /// The strategy `name`, checked now.
    ///
    /// # Errors
    /// An unknown name ([`crate::TuneError::UnknownStrategy`]).
    pub fn new(name: impl Into<String>) -> Result<Self> {
        let name = name.into();
        by_name(&name)?;
        Ok(NamedStrategy(name))
    }

    /// The strategy `name`, unchecked: [`build`](StrategyFactory::build) says whether it
    /// exists.
    pub fn unchecked(name: impl Into<String>) -> Self {
        NamedStrategy(name.into())
    }
}

impl StrategyFactory for NamedStrategy {
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
        let f = NamedStrategy::new("sa").unwrap();
        assert_eq!(f.name(), "sa");
        assert_eq!(f.build().unwrap().name(), "simulated_annealing");
        assert!(NamedStrategy::new("nope").is_err());
        assert!(NamedStrategy::unchecked("nope").build().is_err());
        assert_eq!(StrategyFactory::name(&StrategyName::Forest), "forest");
    }
}
