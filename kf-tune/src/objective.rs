//! What tuners minimise: an [`Objective`] (synchronous) or [`AsyncObjective`] maps a
//! configuration to an [`Outcome`], a time or a failure.

use async_trait::async_trait;
use kf_core::{Candidate, Evaluator, KernelSource, ParamValues, Status};
use serde::{Deserialize, Serialize};

use crate::error::{Result, TuneError};

/// Why a configuration produced no time. Every failure still costs one evaluation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Failure {
    /// The kernel did not compile (Kernel Tuner: `CompilationFailedConfig`).
    Compilation,
    /// The kernel failed to launch or run, or timed out (`RuntimeFailedConfig`).
    Runtime,
    /// The configuration is invalid for the kernel or device (`InvalidConfig`).
    Invalid,
    /// The kernel ran but computed wrong results.
    Incorrect,
    /// Any other failure, by name.
    Other(String),
}

impl Failure {
    /// Kernel Tuner's spelling of the failure (`Incorrect` is written as `RuntimeFailedConfig`,
    /// which is how Kernel Tuner records a failed verification).
    pub fn kernel_tuner_name(&self) -> &str {
        match self {
            Failure::Compilation => "CompilationFailedConfig",
            Failure::Runtime | Failure::Incorrect => "RuntimeFailedConfig",
            Failure::Invalid => "InvalidConfig",
            Failure::Other(s) => s,
        }
    }

    /// Parses Kernel Tuner's spelling; unknown names become [`Failure::Other`].
    pub fn from_kernel_tuner_name(name: &str) -> Failure {
        match name {
            "CompilationFailedConfig" => Failure::Compilation,
            "RuntimeFailedConfig" => Failure::Runtime,
            "InvalidConfig" => Failure::Invalid,
            other => Failure::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Incorrect => f.write_str("IncorrectResult"),
            other => f.write_str(other.kernel_tuner_name()),
        }
    }
}

/// The result of evaluating one configuration: a time (lower is better; milliseconds by
/// convention, Kernel Tuner's unit) or a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Measured time.
    Time(f64),
    /// No time: the configuration failed.
    Failed(Failure),
}

impl Outcome {
    /// The time, when there is one and it is finite.
    pub fn time(&self) -> Option<f64> {
        match self {
            Outcome::Time(t) if t.is_finite() => Some(*t),
            _ => None,
        }
    }
}

/// A synchronous objective: evaluates one configuration.
///
/// `Err` is for failures of the objective itself (the tuner stops); a configuration that does not
/// compile or run is `Ok(Outcome::Failed(..))`.
///
/// ```
/// use kf_tune::{Objective, Outcome, TuneError};
/// use kf_core::{ParamValue, ParamValues};
///
/// /// Time is smallest at TS = 32.
/// struct Bowl;
/// impl Objective for Bowl {
///     fn evaluate(&mut self, config: &ParamValues) -> Result<Outcome, TuneError> {
///         let ts = config.get("TS").and_then(ParamValue::as_f64).unwrap_or(1.0);
///         Ok(Outcome::Time(1.0 + (ts.log2() - 5.0).powi(2)))
///     }
/// }
/// let t = Bowl.evaluate(&ParamValues::new().with("TS", 32i64)).unwrap();
/// assert_eq!(t.time(), Some(1.0));
/// ```
pub trait Objective {
    /// Evaluates `config`.
    fn evaluate(&mut self, config: &ParamValues) -> Result<Outcome>;

    /// Evaluates a batch the tuner asked for together ([`crate::Tuner::fan_out`]), answering
    /// in the order given; an error ends the batch (it is the last answer). The default
    /// evaluates one after the other. An objective overrides it to share work across the
    /// batch: `kf tune` compiles a batch's configurations at once on host threads, then times
    /// them one after another.
    fn evaluate_batch(&mut self, configs: &[ParamValues]) -> Vec<Result<Outcome>> {
        let mut outcomes = Vec::with_capacity(configs.len());
        for config in configs {
            let outcome = self.evaluate(config);
            let failed = outcome.is_err();
            outcomes.push(outcome);
            if failed {
                break;
            }
        }
        outcomes
    }
}

impl<F: FnMut(&ParamValues) -> Result<Outcome>> Objective for F {
    fn evaluate(&mut self, config: &ParamValues) -> Result<Outcome> {
        self(config)
    }
}

/// An asynchronous objective, for evaluators that compile and time on a device.
#[async_trait]
pub trait AsyncObjective: Send {
    /// Evaluates `config`.
    async fn evaluate(&mut self, config: &ParamValues) -> Result<Outcome>;

    /// Evaluates a batch the tuner asked for together ([`crate::Tuner::fan_out`]), answering
    /// in the order given. The default evaluates one after the other; an objective whose
    /// configurations can run at once on separate devices evaluates them concurrently.
    async fn evaluate_batch(&mut self, configs: &[ParamValues]) -> Vec<Result<Outcome>> {
        let mut outcomes = Vec::with_capacity(configs.len());
        for config in configs {
            outcomes.push(self.evaluate(config).await);
        }
        outcomes
    }
}

/// Adapts a kf-core [`Evaluator`] to an [`AsyncObjective`]: each configuration becomes a seed
/// candidate of `kernel` with those parameters; a correct evaluation yields its median time in
/// milliseconds, anything lower on the ladder a [`Failure`].
#[derive(Debug)]
pub struct EvaluatorObjective<E> {
    evaluator: E,
    kernel: KernelSource,
}

impl<E: Evaluator> EvaluatorObjective<E> {
    /// Wraps `evaluator` for tuning `kernel`.
    pub fn new(evaluator: E, kernel: KernelSource) -> Self {
        EvaluatorObjective { evaluator, kernel }
    }

    /// The wrapped evaluator.
    pub fn evaluator(&self) -> &E {
        &self.evaluator
    }
}

/// Maps an evaluation's status and timing to an outcome.
pub fn outcome_of(evaluation: &kf_core::Evaluation) -> Outcome {
    match evaluation.status {
        Status::Correct => match evaluation.timing {
            Some(t) if t.median_s.is_finite() && t.median_s > 0.0 => {
                Outcome::Time(t.median_s * 1e3)
            }
            _ => Outcome::Failed(Failure::Runtime),
        },
        Status::CompileError | Status::ExtractionError => Outcome::Failed(Failure::Compilation),
        Status::RuntimeError | Status::Timeout => Outcome::Failed(Failure::Runtime),
        Status::WrongShape | Status::WrongValues => Outcome::Failed(Failure::Incorrect),
    }
}

#[async_trait]
impl<E: Evaluator> AsyncObjective for EvaluatorObjective<E> {
    async fn evaluate(&mut self, config: &ParamValues) -> Result<Outcome> {
        let candidate = Candidate::seed(self.kernel.clone(), config.clone());
        match self.evaluator.evaluate(&candidate).await {
            Ok(e) => Ok(outcome_of(&e)),
            Err(e) => Err(TuneError::Objective(e.to_string())),
        }
    }
}
