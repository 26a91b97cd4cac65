//! [`ParamSpace`]: the compile-time parameters a kernel can be tuned over.

use rand::RngCore;

use crate::kernel::ParamValues;

/// A space of parameter configurations, with constraints: what tuners search.
///
/// Implementations must be lazy: a space of millions of raw combinations is counted and sampled
/// without materialising it.
///
/// # Example
///
/// ```
/// use kf_core::prelude::*;
/// use rand::{Rng, RngCore, SeedableRng};
///
/// /// Tile sizes 1, 2, 4, …, 2^(n-1).
/// struct Tiles(u32);
///
/// impl ParamSpace for Tiles {
///     type Error = String;
///     fn names(&self) -> Vec<String> {
///         vec!["TS".into()]
///     }
///     fn count(&self) -> Result<u64, String> {
///         Ok(u64::from(self.0))
///     }
///     fn enumerate(&self) -> Box<dyn Iterator<Item = ParamValues> + '_> {
///         Box::new((0..self.0).map(|e| ParamValues::new().with("TS", 1i64 << e)))
///     }
///     fn sample(&self, rng: &mut dyn RngCore) -> Result<Option<ParamValues>, String> {
///         let e = rng.random_range(0..self.0);
///         Ok(Some(ParamValues::new().with("TS", 1i64 << e)))
///     }
///     fn neighbours(&self, p: &ParamValues) -> Result<Vec<ParamValues>, String> {
///         self.validate(p)?;
///         let ts = p.get("TS").and_then(ParamValue::as_i64).unwrap_or(1);
///         let mut out = Vec::new();
///         if ts > 1 { out.push(ParamValues::new().with("TS", ts / 2)); }
///         if ts < 1i64 << (self.0 - 1) { out.push(ParamValues::new().with("TS", ts * 2)); }
///         Ok(out)
///     }
///     fn validate(&self, p: &ParamValues) -> Result<(), String> {
///         match p.get("TS").and_then(ParamValue::as_i64) {
///             Some(ts) if ts > 0 && ts.count_ones() == 1 && ts < 1i64 << self.0 => Ok(()),
///             other => Err(format!("TS={other:?} is not a power of two below 2^{}", self.0)),
///         }
///     }
/// }
///
/// let space = Tiles(6);
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
/// let p = space.sample(&mut rng).unwrap().unwrap();
/// assert!(space.validate(&p).is_ok());
/// assert_eq!(space.enumerate().count() as u64, space.count().unwrap());
/// ```
pub trait ParamSpace {
    /// Why a configuration is invalid or the space cannot be used.
    type Error: std::fmt::Debug + std::fmt::Display;

    /// Parameter names in declaration order.
    fn names(&self) -> Vec<String>;

    /// Number of valid configurations.
    fn count(&self) -> Result<u64, Self::Error>;

    /// Every valid configuration, lazily, in a fixed order.
    fn enumerate(&self) -> Box<dyn Iterator<Item = ParamValues> + '_>;

    /// One valid configuration drawn uniformly at random; `None` when the space is empty.
    fn sample(&self, rng: &mut dyn RngCore) -> Result<Option<ParamValues>, Self::Error>;

    /// Valid configurations next to `point` (adjacent values of one parameter).
    fn neighbours(&self, point: &ParamValues) -> Result<Vec<ParamValues>, Self::Error>;

    /// `Ok` when `point` is a valid configuration of this space.
    fn validate(&self, point: &ParamValues) -> Result<(), Self::Error>;
}
