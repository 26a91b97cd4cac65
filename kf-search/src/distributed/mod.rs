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
//! A search on a task file ships the task with its jobs: the task file, its reference script
//! (and the Python modules beside it) and its kernels travel as a [`TaskBundle`] inside the
//! profile, which every signed job names by hash. A worker refuses a job whose bundle does not
//! hash to what was signed ([`TaskHandler::check_profile`]), writes the files into a private
//! folder named by the bundle's hash ([`TaskHandler::task_dir`]) and evaluates against it in
//! its confined evaluation processes, which may read that folder (the Python reference runs
//! there, confined as on the search's machine).
//!
//! The queue, the database and the fault handling are [`kf_dist`]'s.

pub(crate) mod bundle;

pub use bundle::{BundledFile, TaskBundle, TaskBundleError, MAX_BUNDLE_BYTES, MAX_BUNDLE_FILES};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use kf_core::{async_trait, BoxError, Candidate, DeviceFacts, Evaluation, Evaluator};
use kf_dist::{Binary, CompileOutcome, Hash, JobHandler, Profile, Refusal};
use kf_eval::task::Sizes;
use kf_eval::{
    BackendSpec, CompileCheck, EvalConfig, IsolatedEvaluator, TimeoutPolicy, WorkerCommand,
};
use serde::{Deserialize, Serialize};

/// The queue name of a device: backend (any backend factory's name: `opencl`, `cuda`, `sycl` or one's own)
/// and device name as one subject token, for example `opencl-intel-r--xeon-r--platinum-8480c`.
/// Workers and searches that agree on it share jobs.
pub fn device_kind(backend: impl std::fmt::Display, device: &DeviceFacts) -> String {
    device_kind_named(backend, &device.name)
}

/// [`device_kind`] from a device name alone (as the backends' device lists give it).
pub fn device_kind_named(backend: impl std::fmt::Display, device_name: &str) -> String {
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
    /// The backend's name (`opencl`, `sycl`, `cuda`, or a backend factory's of one's own); the
    /// device is the worker's.
    pub backend: String,
    /// The evaluation protocol.
    pub eval: EvalConfig,
    /// Hard limits per evaluation.
    pub timeout: TimeoutSpec,
    /// The task file and its files, for a search on a task file (`task` is then its name).
    /// Absent from the profiles of built-in tasks, whose JSON (and so whose hash and stored
    /// results) stays what it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_file: Option<TaskBundle>,
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
    /// Where shipped task files are written, one folder per bundle hash.
    task_dir: Option<PathBuf>,
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
            task_dir: None,
        }
    }

    /// The folder shipped task files are written into, one sub-folder per bundle hash (made
    /// owner-only). Default: [`default_task_dir`]. Keep it out of the folders evaluation
    /// processes may write (compile caches, temporary folders): they may only read the one
    /// task folder they evaluate against.
    pub fn task_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.task_dir = Some(dir.into());
        self
    }

    /// The folder shipped tasks go into.
    fn shipped_task_root(&self) -> Result<PathBuf, BoxError> {
        if let Some(dir) = &self.task_dir {
            return Ok(dir.clone());
        }
        default_task_dir().ok_or_else(|| {
            "no folder for shipped task files: no runtime folder, $XDG_CACHE_HOME or $HOME \
             (give the worker a --cache-dir)"
                .into()
        })
    }

    /// Refuses a task-file profile whose files do not hash to what the search signed (see
    /// [`TaskBundle::verify`]): what a worker checks before it evaluates a job. A profile that
    /// is not a task profile passes (its evaluation says what is wrong with it).
    pub fn check_profile(profile: &Profile) -> Result<(), Refusal> {
        let Ok(p) = serde_json::from_value::<TaskProfile>(profile.value.clone()) else {
            return Ok(());
        };
        match &p.task_file {
            Some(bundle) => bundle
                .verify()
                .map_err(|e| Refusal::Inconsistent(e.to_string())),
            None => Ok(()),
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
        if p.backend != self.backend.kind {
            return Err(format!(
                "the job is for the {} backend; this worker runs {}",
                p.backend, self.backend.kind
            )
            .into());
        }
        let mut builder = IsolatedEvaluator::builder(self.backend.clone(), p.task, p.sizes)
            .command(self.command.clone())
            .config(p.eval)
            .timeout(p.timeout.policy());
        if let Some(bundle) = &p.task_file {
            // Checked again here (a compile worker's and an execute worker's path both come
            // through): nothing is evaluated against files that are not the signed ones.
            let job = bundle.materialise(&self.shipped_task_root()?)?;
            builder = builder.task_file(job);
        }
        let evaluator = builder.build();
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

/// The default folder of shipped task files: `shipped-tasks/` in the runtime folder (a
/// checkout's `.runtime`, or the per-user one of `kf setup`), else in
/// `$XDG_CACHE_HOME/kernelfoundry` (`~/.cache/kernelfoundry`). Evaluation processes may not
/// write there, and read only the task folder they evaluate against.
pub fn default_task_dir() -> Option<PathBuf> {
    if let Some(runtime) = kf_eval::task::file::python::runtime_dir() {
        return Some(runtime.join("shipped-tasks"));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("kernelfoundry").join("shipped-tasks"))
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

    fn check_profile(&self, profile: &Profile) -> Result<(), Refusal> {
        TaskHandler::check_profile(profile)
    }

    fn environment(&self) -> serde_json::Value {
        self.environment.clone()
    }
}

/// A distributed evaluation worker on this machine's device: what `kf worker` runs, as a
/// library call, so that a worker program built with one's own backend factories serves the
/// jobs of searches that use them. Its evaluations run in isolated worker processes of this
/// program (`main` calls [`crate::init_with`] with the same factories first).
///
/// ```no_run
/// use kf_search::distributed::EvaluationWorker;
///
/// kf_search::init(); // first: evaluation processes are this program, re-executed
/// let dist = kf_dist::DistConfig::new("nats://127.0.0.1:4222", "postgres://kf@127.0.0.1/kf");
/// let worker = EvaluationWorker::new(
///     &kf_search::backends::shipped(),
///     kf_eval::BackendSpec::new("opencl"),
///     dist,
///     None,
///     |kind| kf_dist::WorkerConfig::new(kind),
/// )?;
/// println!("serving {} on {}", worker.device_kind(), worker.device().name);
/// let stats = worker.run_blocking(futures::future::pending())?;
/// # Ok::<(), kf_search::SearchError>(())
/// ```
pub struct EvaluationWorker {
    dist: kf_dist::DistConfig,
    config: kf_dist::WorkerConfig,
    kind: String,
    facts: DeviceFacts,
    handler: std::sync::Arc<TaskHandler>,
}

impl EvaluationWorker {
    /// Opens the backend `spec` names among `backends` (to learn its device), and prepares a
    /// worker for the queue `device_kind` (default: [`device_kind`] of the backend and
    /// device, as searches name it). `config` makes the worker's settings (name, jobs at once,
    /// role) for that queue name; the device's facts are added to them.
    pub fn new(
        backends: &kf_eval::BackendRegistry,
        spec: BackendSpec,
        dist: kf_dist::DistConfig,
        device_kind: Option<String>,
        config: impl FnOnce(&str) -> kf_dist::WorkerConfig,
    ) -> Result<Self, crate::SearchError> {
        // Refused before it takes a job, where untrusted code could not run fully confined
        // here (each job's worker process is checked again when it starts).
        kf_eval::confine::check_machine("a distributed evaluation worker's jobs")
            .map_err(kf_eval::EvalError::Unconfined)?;
        let factory = backends
            .require(&spec.kind)
            .map_err(|e| crate::SearchError::Backend(crate::BackendError::Open(e.to_string())))?;
        let facts = crate::backends::device_facts_with(factory.as_ref(), &spec)?;
        let kind = device_kind.unwrap_or_else(|| self::device_kind(&spec.kind, &facts));
        let mut config = config(&kind);
        config.device =
            Some(
                serde_json::to_value(&facts).map_err(|source| crate::SearchError::Json {
                    what: "the device facts",
                    source,
                })?,
            );
        let handler = TaskHandler::new(spec, WorkerCommand::current_exe()?).device(&facts);
        Ok(EvaluationWorker {
            dist,
            config,
            kind,
            facts,
            handler: std::sync::Arc::new(handler),
        })
    }

    /// Where the task files searches ship with their jobs are written (see
    /// [`TaskHandler::task_dir`]).
    pub fn task_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        match std::sync::Arc::get_mut(&mut self.handler) {
            Some(handler) => handler.task_dir = Some(dir),
            // Not shared before the worker runs; should it be, a new handler takes the folder.
            None => {
                let handler = TaskHandler {
                    backend: self.handler.backend.clone(),
                    command: self.handler.command.clone(),
                    evaluators: Mutex::new(Vec::new()),
                    environment: self.handler.environment.clone(),
                    task_dir: Some(dir),
                };
                self.handler = std::sync::Arc::new(handler);
            }
        }
        self
    }

    /// The queue name it serves.
    pub fn device_kind(&self) -> &str {
        &self.kind
    }

    /// The device it evaluates on.
    pub fn device(&self) -> &DeviceFacts {
        &self.facts
    }

    /// Its settings.
    pub fn config(&self) -> &kf_dist::WorkerConfig {
        &self.config
    }

    /// Serves jobs until `stop` completes (then finishes the jobs in hand), and stops its
    /// evaluation processes. The library installs no signal handler: `kf worker` completes
    /// `stop` on Ctrl-C.
    pub fn run_blocking(
        self,
        stop: impl std::future::Future<Output = ()> + Send,
    ) -> Result<kf_dist::WorkerStats, crate::SearchError> {
        let worker =
            kf_dist::Worker::new(self.dist, self.config, std::sync::Arc::clone(&self.handler));
        let stats = worker.run_blocking(stop);
        self.handler.shutdown();
        Ok(stats?)
    }
}
