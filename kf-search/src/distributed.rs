//! Distributed evaluation for the search and the `kf worker` command: what a search sends its
//! workers with every job (a [`TaskProfile`]), how a worker evaluates it (a [`TaskHandler`]:
//! the cheat-proof isolated evaluator on the worker's own device), and how devices are named
//! on the queue ([`device_kind`]).
//!
//! On a compile worker the handler runs the protocol up to compilation in an isolated worker
//! process ([`IsolatedEvaluator::compile_only_blocking`]) and ships the backend's compile-cache
//! entry (OpenCL program binaries, CUDA cubin/PTX; a file that checks its own integrity); on an
//! execute worker it puts the entry it was sent into its own compile cache before evaluating,
//! so the backend loads it instead of compiling, exactly when its device and driver are the
//! ones the binary was built for (the cache key covers them) and compiles the kernel itself
//! otherwise.
//!
//! The queue, the database and the fault handling are [`kf_dist`]'s.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use kf_core::{async_trait, BoxError, Candidate, DeviceFacts, Evaluation, Evaluator};
use kf_dist::{Binary, CompileOutcome, Hash, JobHandler, Profile};
use kf_eval::tasks::Sizes;
use kf_eval::{
    BackendSpec, CompileCheck, EvalConfig, IsolatedEvaluator, TimeoutPolicy, WorkerCommand,
};
use serde::{Deserialize, Serialize};

use crate::BackendKind;

/// The queue name of a device: backend and device name as one subject token, for example
/// `opencl-intel-r--xeon-r--platinum-8480c`. Workers and searches that agree on it share jobs.
pub fn device_kind(backend: BackendKind, device: &DeviceFacts) -> String {
    device_kind_named(backend, &device.name)
}

/// [`device_kind`] from a device name alone (as the backends' device lists give it).
pub fn device_kind_named(backend: BackendKind, device_name: &str) -> String {
    kf_dist::subject_token(&format!("{backend}-{device_name}"))
}

/// Everything but the kernel that decides an evaluation's result: the task, its sizes, the
/// backend kind and the protocol. Part of every job id, so results measured under another
/// protocol are never reused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskProfile {
    /// Built-in task name.
    pub task: String,
    /// Problem sizes.
    pub sizes: Sizes,
    /// Backend kind (`opencl`, `sycl`, `cuda`); the device is the worker's.
    pub backend: BackendKind,
    /// The evaluation protocol.
    pub eval: EvalConfig,
    /// Hard limits per evaluation.
    pub timeout: TimeoutSpec,
}

/// [`TimeoutPolicy`] in seconds, as it travels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimeoutSpec {
    /// Upper bound.
    pub max_s: f64,
    /// Lower bound when scaling.
    pub min_s: f64,
    /// Allowance for compilation and data preparation.
    pub allowance_s: f64,
    /// Multiple of the baseline's kernel time allowed per launch.
    pub per_launch_factor: f64,
}

impl From<TimeoutPolicy> for TimeoutSpec {
    fn from(t: TimeoutPolicy) -> Self {
        TimeoutSpec {
            max_s: t.max.as_secs_f64(),
            min_s: t.min.as_secs_f64(),
            allowance_s: t.allowance.as_secs_f64(),
            per_launch_factor: t.per_launch_factor,
        }
    }
}

impl TimeoutSpec {
    /// Back to a policy (negative or non-finite values become zero).
    pub fn policy(&self) -> TimeoutPolicy {
        let d = |s: f64| Duration::from_secs_f64(if s.is_finite() { s.max(0.0) } else { 0.0 });
        TimeoutPolicy {
            max: d(self.max_s),
            min: d(self.min_s),
            allowance: d(self.allowance_s),
            per_launch_factor: self.per_launch_factor,
        }
    }
}

/// Isolated evaluators kept warm per profile on a worker (each holds worker processes).
const WARM_PROFILES: usize = 4;

/// Evaluates jobs on a worker: one [`IsolatedEvaluator`] per profile, on the worker's device.
pub struct TaskHandler {
    backend: BackendSpec,
    command: WorkerCommand,
    evaluators: Mutex<Vec<(Hash, IsolatedEvaluator)>>,
    environment: serde_json::Value,
}

impl TaskHandler {
    /// A handler evaluating on `backend`'s device, starting evaluation processes with
    /// `command` (`WorkerCommand::current_exe()` in a program whose `main` calls
    /// [`crate::init`]).
    pub fn new(backend: BackendSpec, command: WorkerCommand) -> Self {
        TaskHandler {
            backend,
            command,
            evaluators: Mutex::new(Vec::new()),
            environment: serde_json::json!({"evaluator": env!("CARGO_PKG_VERSION")}),
        }
    }

    /// Records the device's driver with every result (a search reuses stored results only
    /// from workers of the same driver and evaluator versions).
    pub fn device(mut self, device: &DeviceFacts) -> Self {
        self.environment = serde_json::json!({
            "evaluator": env!("CARGO_PKG_VERSION"),
            "device": device.name,
            "driver": device.driver_version,
            "platform": device.platform,
        });
        self
    }

    fn evaluator(&self, profile: &Profile) -> Result<IsolatedEvaluator, BoxError> {
        let mut cache = self
            .evaluators
            .lock()
            .map_err(|_| "evaluator cache poisoned")?;
        if let Some((_, e)) = cache.iter().find(|(h, _)| *h == profile.hash) {
            return Ok(e.clone());
        }
        let p: TaskProfile = serde_json::from_value(profile.value.clone())
            .map_err(|e| format!("not a task profile: {e}"))?;
        if p.backend.name() != self.backend.kind {
            return Err(format!(
                "the job is for the {} backend; this worker runs {}",
                p.backend, self.backend.kind
            )
            .into());
        }
        let evaluator = IsolatedEvaluator::builder(self.backend.clone(), p.task, p.sizes)
            .command(self.command.clone())
            .config(p.eval)
            .timeout(p.timeout.policy())
            .build();
        if cache.len() >= WARM_PROFILES {
            let (_, old) = cache.remove(0);
            old.shutdown();
        }
        cache.push((profile.hash.clone(), evaluator.clone()));
        Ok(evaluator)
    }

    /// Stops the evaluation processes.
    pub fn shutdown(&self) {
        if let Ok(mut cache) = self.evaluators.lock() {
            for (_, e) in cache.drain(..) {
                e.shutdown();
            }
        }
    }
}

/// Writes `bytes` as `dir/name` atomically (a temporary file renamed into place), so that an
/// evaluation process never reads half a file.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}.shipped.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[async_trait]
impl JobHandler for TaskHandler {
    async fn evaluate(
        &self,
        profile: &Profile,
        candidate: &Candidate,
    ) -> Result<Evaluation, BoxError> {
        let evaluator = self.evaluator(profile)?;
        Ok(evaluator.evaluate(candidate).await?)
    }

    async fn compile(
        &self,
        profile: &Profile,
        candidate: &Candidate,
    ) -> Result<CompileOutcome, BoxError> {
        let evaluator = self.evaluator(profile)?;
        let check = evaluator.compile_only_blocking(&candidate.source, &candidate.params)?;
        let facts = match check {
            CompileCheck::Failed(evaluation) => return Ok(CompileOutcome::Answered(evaluation)),
            CompileCheck::Compiled(facts) => facts,
        };
        let Some(file) = facts.extra.get("cache_file").map(PathBuf::from) else {
            let why = facts.extra.get("cache_error").map_or_else(
                || format!("the {} backend cached no binary", self.backend.kind),
                |e| {
                    format!(
                        "the {} backend could not cache the binary: {e}",
                        self.backend.kind
                    )
                },
            );
            return Ok(CompileOutcome::CompileThere(why));
        };
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or("the compile cache file has no name")?
            .to_owned();
        let bytes = std::fs::read(&file)
            .map_err(|e| format!("reading the compiled binary {}: {e}", file.display()))?;
        Ok(CompileOutcome::Binary(Binary { name, bytes }))
    }

    async fn evaluate_built(
        &self,
        profile: &Profile,
        candidate: &Candidate,
        binary: &Binary,
    ) -> Result<Evaluation, BoxError> {
        // Into this worker's own compile cache: the backend loads it when the cache key (the
        // source, the options, the device and its driver) is the one it was built under.
        match &self.backend.cache_dir {
            Some(dir) if binary.has_plain_name() => {
                if let Err(e) = write_atomically(dir, &binary.name, &binary.bytes) {
                    tracing::warn!("putting a shipped binary into {}: {e}", dir.display());
                }
            }
            Some(_) => {
                tracing::warn!(name = %binary.name, "a shipped binary with an unusable name")
            }
            None => {
                tracing::debug!("no compile cache folder of its own: a shipped binary is not used")
            }
        }
        self.evaluate(profile, candidate).await
    }

    fn environment(&self) -> serde_json::Value {
        self.environment.clone()
    }
}
