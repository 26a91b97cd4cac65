//! One kernel, evaluated once (`kf eval`): compiled, verified on fresh inputs and timed
//! against the task's baseline, in a worker process ([`evaluate_kernel`]).

use std::path::PathBuf;
use std::time::Duration;

use kf_core::{Evaluation, ParamValue, ParamValues};
use kf_eval::{BackendSpec, EvalConfig, EvalError, TimeoutPolicy, WorkerCommand};
use kf_manifest::{Manifest, ManifestError};
use serde_json::{json, Value};

use crate::task::{ChosenTask, TaskChoiceError};
use crate::BackendError;

/// Why a kernel could not be evaluated (a kernel that fails its checks is an evaluation, not
/// an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelEvalError {
    /// The task could not be chosen.
    #[error(transparent)]
    Task(#[from] TaskChoiceError),
    /// The backend is unknown or not in this build.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The kernel's manifest could not be loaded.
    #[error(transparent)]
    InvalidManifest(ManifestError),
    /// A parameter override is unknown or not allowed.
    #[error(transparent)]
    Params(ManifestError),
    /// A parameter override is not `NAME=value`.
    #[error("--param `{0}` is not NAME=value")]
    BadParam(String),
    /// Fewer than three input sets.
    #[error("--input-sets must be at least 3")]
    TooFewInputSets,
    /// A time limit that is not a positive number of seconds.
    #[error("--timeout {0} is not a positive number of seconds")]
    BadTimeout(f64),
    /// The evaluator failed.
    #[error(transparent)]
    Eval(#[from] EvalError),
}

impl KernelEvalError {
    /// What `kf eval --json` prints for a manifest that could not be loaded, if that is the
    /// error.
    pub fn invalid_manifest_json(&self, kernel: &std::path::Path) -> Option<Value> {
        match self {
            KernelEvalError::InvalidManifest(e) => Some(
                json!({"status": "invalid_manifest", "error": e.to_string(), "kernel": kernel}),
            ),
            _ => None,
        }
    }
}

/// The kernel to evaluate, and where.
#[derive(Debug, Clone)]
pub struct KernelEvalRequest {
    /// Built-in task (exactly one of this and `task_file`).
    pub task: Option<String>,
    /// A task file.
    pub task_file: Option<PathBuf>,
    /// Problem sizes (missing ones take the task's defaults).
    pub size: String,
    /// The kernel's manifest.
    pub kernel: PathBuf,
    /// Parameter values, `NAME=value` (others take the manifest's first value).
    pub params: Vec<String>,
    /// The backend's name (a shipped backend's: [`crate::backends::factory_for`]).
    pub backend: String,
    /// Device selector.
    pub device: Option<String>,
    /// Hard limit on the evaluation, seconds (default: scaled from the baseline, at most 60).
    pub timeout: Option<f64>,
    /// Input sets to verify on (at least 3).
    pub input_sets: u32,
}

/// A kernel's evaluation and where it ran.
#[derive(Debug, Clone)]
pub struct KernelEvalOutcome {
    /// The evaluation.
    pub evaluation: Evaluation,
    /// The task's name.
    pub task: String,
    /// The task file, when the task came from one.
    pub task_file: Option<PathBuf>,
    /// The sizes.
    pub sizes: kf_eval::task::Sizes,
    /// The kernel's manifest.
    pub kernel: PathBuf,
    /// The device's name.
    pub device: String,
    /// The backend's name.
    pub backend: String,
    /// How the worker that evaluated it was confined.
    pub confinement: Option<kf_eval::confine::Confinement>,
}

/// Parses `NAME=value` into a typed parameter value (an integer, a float, a boolean, or text).
pub fn parse_param(text: &str) -> Result<(String, ParamValue), KernelEvalError> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(KernelEvalError::BadParam(text.to_owned()));
    };
    let value = value.trim();
    let parsed = if let Ok(i) = value.parse::<i64>() {
        ParamValue::Int(i)
    } else if let Ok(f) = value.parse::<f64>() {
        ParamValue::Float(f)
    } else if let Ok(b) = value.parse::<bool>() {
        ParamValue::Bool(b)
    } else {
        ParamValue::Text(value.to_owned())
    };
    Ok((name.trim().to_owned(), parsed))
}

/// Evaluates the kernel `request` names once, as `kf eval` does.
pub fn evaluate_kernel(request: &KernelEvalRequest) -> Result<KernelEvalOutcome, KernelEvalError> {
    let chosen = ChosenTask::resolve(
        request.task.as_deref(),
        request.task_file.as_deref(),
        &request.size,
    )?;
    let spec = BackendSpec::new(&request.backend).with_device(request.device.clone());
    crate::backends::factory_for(&spec)?;
    let (manifest, source) =
        Manifest::load(&request.kernel).map_err(KernelEvalError::InvalidManifest)?;
    let mut overrides = ParamValues::new();
    for p in &request.params {
        let (name, value) = parse_param(p)?;
        overrides.set(name, value);
    }
    // Unknown or disallowed parameters are the user's mistake, not the kernel's: say so.
    let params = manifest
        .resolve_params(&overrides)
        .map_err(KernelEvalError::Params)?;
    if request.input_sets < 3 {
        return Err(KernelEvalError::TooFewInputSets);
    }
    let config = EvalConfig {
        input_sets: request.input_sets,
        ..EvalConfig::default()
    };
    let timeout = match request.timeout {
        Some(s) if s.is_finite() && s > 0.0 => TimeoutPolicy::fixed(Duration::from_secs_f64(s)),
        Some(s) => return Err(KernelEvalError::BadTimeout(s)),
        None => TimeoutPolicy::default(),
    };
    let evaluator = chosen
        .evaluator(spec)
        .command(WorkerCommand::current_exe()?)
        .config(config)
        .timeout(chosen.timeout(timeout))
        .build();
    let device = evaluator.device()?;
    let evaluation = evaluator.evaluate_blocking(&source, &params)?;
    let confinement = evaluator.confinement();
    evaluator.shutdown();
    Ok(KernelEvalOutcome {
        evaluation,
        task: chosen.name(),
        task_file: chosen.file.map(|(path, _)| path),
        sizes: chosen.task.sizes(),
        kernel: request.kernel.clone(),
        device: device.name,
        backend: request.backend.clone(),
        confinement,
    })
}

impl KernelEvalOutcome {
    /// The evaluation with where it ran (`kf eval --json`).
    pub fn to_json(&self) -> Result<Value, serde_json::Error> {
        let mut value = serde_json::to_value(&self.evaluation)?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("task".into(), json!(self.task));
            if let Some(path) = &self.task_file {
                obj.insert("task_file".into(), json!(path));
            }
            obj.insert("sizes".into(), json!(self.sizes));
            obj.insert("kernel".into(), json!(self.kernel));
            obj.insert("device".into(), json!(self.device));
            obj.insert("backend".into(), json!(self.backend));
            obj.insert("confinement".into(), json!(self.confinement));
            if let Some(t) = self.evaluation.timing {
                obj.insert("median_ms".into(), json!(t.median_s * 1e3));
            }
        }
        Ok(value)
    }

    /// The summary `kf eval` prints (lines ending in a newline).
    pub fn render_text(&self) -> String {
        let e = &self.evaluation;
        let mut out = format!(
            "kernel: {} on {} ({})\nstatus: {}\nparams: {}\n",
            self.kernel.display(),
            self.device,
            self.backend,
            e.status,
            e.params
        );
        if let Some(c) = &self.confinement {
            out += &format!("worker: {c}\n");
        }
        if let Some(t) = e.timing {
            out += &format!(
                "time: median {:.4} ms (min {:.4}, spread {:.1}%, {} trials)\n",
                t.median_s * 1e3,
                t.min_s * 1e3,
                100.0 * t.relative_spread(),
                t.trials
            );
        }
        if let Some(g) = e.gflops {
            out += &format!("throughput: {g:.2} GFLOP/s\n");
        }
        if let Some(s) = e.speedup {
            out += &format!("speedup over the task baseline: {s:.2}x\n");
        }
        out + &format!("diagnostics: {}\n", e.diagnostics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_parse_to_their_type() {
        assert_eq!(
            parse_param("TILE=16").unwrap(),
            ("TILE".into(), ParamValue::Int(16))
        );
        assert_eq!(
            parse_param(" A = 0.5").unwrap(),
            ("A".into(), ParamValue::Float(0.5))
        );
        assert_eq!(
            parse_param("B=true").unwrap(),
            ("B".into(), ParamValue::Bool(true))
        );
        assert_eq!(
            parse_param("C=x").unwrap(),
            ("C".into(), ParamValue::Text("x".into()))
        );
        let e = parse_param("TILE").unwrap_err();
        assert_eq!(e.to_string(), "--param `TILE` is not NAME=value");
    }
}
