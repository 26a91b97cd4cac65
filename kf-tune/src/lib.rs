//! # kf-tune
//!
//! Template-parameter tuning for KernelFoundry-rs: kernels expose compile-time parameters (tile
//! sizes, work-group shape, unroll, vector width) and the right values depend on kernel, input
//! shape and device.
//!
//! * [`Space`]: typed parameters ([`Param`]), constraints as expressions over parameters,
//!   problem sizes and device facts, dependent domains; lazy enumeration, exact counting and
//!   uniform sampling without materialising the space; neighbourhoods. Implements kf-core's
//!   [`kf_core::ParamSpace`]. Built from a [`kf_manifest::Manifest`] with
//!   [`Space::from_manifest`], or from a FAIR T1 file with [`t1::T1Space`].
//! * [`strategy`]: exhaustive, random, simulated annealing, genetic algorithm, greedy iterated
//!   local search, Bayesian optimisation, random-forest search, a bandit over strategies, and the
//!   [`strategy::Auto`] default; all seeded (ChaCha8) and driven by a [`Tuner`] that counts the
//!   budget in distinct configurations evaluated.
//! * [`prior::RulePrior`]: user rules ("if the kernel is a matrix product, try BLOCK_SIZE in
//!   {64,128,256}") that weight the space from device facts.
//! * [`ResultCache`]: a kill-safe persistent cache (JSON lines); [`KtCache`] / [`KtWriter`]:
//!   Kernel Tuner's cache format, plain or gzip.
//! * [`Replay`]: measured landscapes as objectives, and [`cli`] for `kf tune replay`.
//! * [`t4`]: a run's results in the FAIR T4 format.
//! * [`synthetic`]: seeded synthetic landscapes with known structure (several peaks, a narrow
//!   peak, many failures, interactions, plateaus and noise), as Kernel Tuner caches.
//!
//! ```
//! use kf_tune::{strategy, Outcome, Param, Space, Tuner};
//! use kf_core::{ParamValue, ParamValues};
//!
//! let space = Space::builder()
//!     .param(Param::powers_of_two("TS", 4, 128).unwrap())
//!     .param(Param::powers_of_two("WPT", 1, 16).unwrap())
//!     .constraint("TS % WPT == 0 && TS * TS / WPT <= max_work_group_size")
//!     .symbol("max_work_group_size", 256)
//!     .build()
//!     .unwrap();
//! // A synthetic objective: fastest at TS = 32, WPT = 4.
//! let mut objective = |c: &ParamValues| {
//!     let g = |n: &str| c.get(n).and_then(ParamValue::as_f64).unwrap().log2();
//!     Ok(Outcome::Time(1.0 + (g("TS") - 5.0).powi(2) + (g("WPT") - 2.0).powi(2)))
//! };
//! let mut s = strategy::by_name("default").unwrap();
//! let result = Tuner::new(&space, 12).seed(3).run(s.as_mut(), &mut objective).unwrap();
//! assert!(result.evaluations <= 12);
//! assert!(result.best_time.is_some());
//! ```

mod cache;
pub mod cli;
mod ctx;
mod error;
pub mod kt;
mod objective;
mod param;
pub mod prior;
mod replay;
mod space;
pub mod strategy;
pub mod synthetic;
pub mod t1;
pub mod t4;
mod tuner;

pub use cache::{CacheKey, ResultCache};
pub use ctx::{Ctx, History};
pub use error::{Result, TuneError};
pub use kt::{KtCache, KtEntry, KtWriter};
pub use objective::{outcome_of, AsyncObjective, EvaluatorObjective, Failure, Objective, Outcome};
pub use param::{same_value, Param, ParamKind, MAX_VALUES};
pub use replay::{Replay, ReplayObjective};
pub use space::{Neighbourhood, Point, Space, SpaceBuilder, WeightedSampler};
pub use tuner::{Trial, TuneResult, Tuner};
