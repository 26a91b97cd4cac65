//! # kf-core
//!
//! The vocabulary and the traits of KernelFoundry-rs, and the engine that composes them.
//!
//! * Vocabulary: [`KernelSource`] (language, entry point, text, declared parameters),
//!   [`Candidate`] (id, parents, source, parameter values, origin), [`Task`] (sizes,
//!   correctness rule, work for a roofline), [`Evaluation`] (the result ladder [`Status`],
//!   timing, speedup, compiler facts, diagnostics), [`Descriptor`] and [`Fitness`].
//! * Traits, each small and with its own error type: [`Mutator`], [`Evaluator`],
//!   [`BehaviorClassifier`], [`ParamSpace`], [`Backend`], [`Archive`], plus the hooks
//!   [`Observe`] and [`Checkpoint`].
//! * [`compose`]: boxed forms of the traits ([`BoxMutator`], [`BoxEvaluator`],
//!   [`BoxClassifier`]), [`Either`] of two implementations, and function adapters.
//! * The [`Engine`]: a consuming builder that runs the MAP-Elites loop with a bounded number of
//!   steps in flight, or hands it out step by step ([`Engine::start`]: a [`Stepper`] whose
//!   `ask` gives the next children and whose `tell` takes their evaluations). It depends on
//!   `futures` only and owns no async runtime.
//! * [`emitter`]: parent selection and the choice of mutator out of the archive: emitters, and
//!   a [`Scheduler`](emitter::Scheduler) that picks them with a bandit credited by archive
//!   improvement. [`Engine::new`] takes a scheduler or a single mutator (a scheduler of one).
//! * [`novelty`]: children that repeat an evaluated kernel are dropped before evaluation
//!   ([`Engine::novelty`]).
//! * [`testing`]: a synthetic problem with a known optimum per cell, for tests and examples.
//!
//! A custom behaviour classifier and a full run in a few lines:
//!
//! ```
//! use kf_core::prelude::*;
//! use kf_core::testing::{synthetic_seed, SyntheticEvaluator, SyntheticMutator, VecArchive};
//!
//! /// Two dimensions: how far X0 is from 0.5 (3 levels) and whether X3 exceeds X4.
//! struct MyClassifier(DescriptorSpace);
//!
//! impl BehaviorClassifier for MyClassifier {
//!     type Error = std::convert::Infallible;
//!     fn space(&self) -> &DescriptorSpace {
//!         &self.0
//!     }
//!     fn classify(&self, c: &Candidate, _e: &Evaluation) -> Result<Descriptor, Self::Error> {
//!         let x = |n: &str| c.params.get(n).and_then(ParamValue::as_f64).unwrap_or(0.0);
//!         let spread = (((x("X0") - 0.5).abs() * 6.0) as usize).min(2);
//!         Ok(Descriptor::new([spread, usize::from(x("X3") > x("X4"))], "my-classifier"))
//!     }
//! }
//!
//! let space = DescriptorSpace::new(vec![
//!     Dimension::new("spread", ["near", "mid", "far"]),
//!     Dimension::new("order", ["x3<=x4", "x3>x4"]),
//! ])
//! .unwrap();
//! let archive = VecArchive::new(space.clone());
//! let result = Engine::new(SyntheticMutator::new(0.15), SyntheticEvaluator::new(), MyClassifier(space), archive)
//!     .seeds(vec![synthetic_seed(6)])
//!     .seed(1)
//!     .budget(Budget::evaluations(300))
//!     .run_blocking()
//!     .unwrap();
//! assert_eq!(result.summary.metrics.filled, 6);
//! ```

pub mod candidate;
pub mod checkpoint;
pub mod compose;
pub mod descriptor;
pub mod device;
pub mod emitter;
pub mod engine;
mod error;
pub mod evaluation;
pub mod fitness;
pub mod kernel;
pub mod noise;
pub mod novelty;
pub mod observe;
pub mod redact;
pub mod run_baseline;
pub mod task;
#[cfg(test)]
mod test_support;
pub mod testing;
pub mod traits;

pub use async_trait::async_trait;
pub use candidate::{
    extraction_failure_in, Candidate, CandidateId, Offspring, Origin, EXTRACTION_FAILURE_MARKER,
};
pub use checkpoint::{Checkpoint, ChildRecord, StepRecord};
pub use compose::{BoxClassifier, BoxEvaluator, BoxMutator, DynError, Either};
pub use descriptor::{Descriptor, DescriptorSpace, Dimension};
pub use device::{CpuCaches, DeviceFacts, DeviceKind};
pub use engine::{
    Ask, Budget, Engine, EngineConfig, HistoryPoint, Proposal, RunResult, RunSummary, StepId,
    Stepper, StopHandle, StopReason,
};
pub use error::{BoxError, CoreError, StepFailure};
pub use evaluation::{
    CompilerFacts, ConfinementLevel, CorrectnessReport, Evaluation, Status, TimingStats,
};
pub use fitness::Fitness;
pub use kernel::{KernelSource, Language, ParamValue, ParamValues};
pub use observe::{EvaluationReport, Observe, ObserverMode, RunInfo};
pub use run_baseline::RunBaseline;
pub use task::{
    BufferAccess, BufferInterface, KernelInterface, ScalarInterface, Task, Tolerance, Work,
};
pub use traits::archive::{Archive, ArchiveHints, ArchiveMetrics, Elite, InsertOutcome};
pub use traits::backend::{
    Backend, BackendError, BackendErrorKind, CompileOptions, Compiled, KernelArg, LaunchTiming,
    NdRange, NdRangeError,
};
pub use traits::classifier::BehaviorClassifier;
pub use traits::evaluator::Evaluator;
pub use traits::mutator::{Mutation, MutationContext, Mutator, Needs, Usage};
pub use traits::param_space::ParamSpace;

/// Everything an embedder usually needs, in one import.
pub mod prelude {
    pub use crate::{
        Archive, ArchiveHints, ArchiveMetrics, Backend, BackendError, BackendErrorKind,
        BehaviorClassifier, BoxError, Budget, Candidate, CandidateId, Checkpoint, CompileOptions,
        Compiled, CompilerFacts, Descriptor, DescriptorSpace, DeviceFacts, Dimension, Elite,
        Engine, Evaluation, EvaluationReport, Evaluator, Fitness, InsertOutcome, KernelArg,
        KernelSource, Language, LaunchTiming, Mutation, MutationContext, Mutator, NdRange, Needs,
        Observe, ObserverMode, Offspring, Origin, ParamSpace, ParamValue, ParamValues, Status,
        StepRecord, Task, TimingStats, Usage,
    };
}
