//! The parent side of isolation: [`IsolatedEvaluator`] runs every evaluation in a warm worker
//! process with a hard wall-clock timeout. A hang is killed and reported as `timeout`, a crash
//! as `runtime_error`, and the search goes on. Workers get an environment without secrets.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kf_core::{Candidate, DeviceFacts, Evaluation, Evaluator, KernelSource, ParamValues, Status};
use serde::{Deserialize, Serialize};

use crate::confine::{ConfinedCommand, Confinement, ConfinementPolicy, CONFINE_READ_ENV};
use crate::error::EvalError;
use crate::profile::EvalProfile;
use crate::protocol::CompileCheck;
use crate::protocol::EvalConfig;
use crate::task::{KernelTask, Sizes};
use crate::worker::{
    refuse_inside_worker, BackendSpec, Job, JobLimits, Reply, TaskFileJob, LINE_PREFIX, WORKER_ENV,
};

/// How long a new worker may take to say hello (it does so before opening its backend, so this
/// is process start-up only) before the parent decides it is not a worker.
pub const DEFAULT_HANDSHAKE_LIMIT: Duration = Duration::from_secs(20);

/// How long a worker may take to open its backend after its hello.
const BACKEND_OPEN_LIMIT: Duration = Duration::from_secs(120);

/// How to start a worker process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables removed from the worker's environment besides those that look like secrets.
    pub env_remove: Vec<String>,
}

impl WorkerCommand {
    /// Re-executes the current program; its `main` must call `kernelfoundry::init()` first (or,
    /// without the facade, [`crate::worker::serve_if_requested`] with its backend).
    ///
    /// Why re-execute rather than locate a dedicated worker binary: the worker must know the
    /// same tasks ([`crate::TaskRegistry`]) and backends as the program that asks for the
    /// evaluation, and only that program's own binary is sure to (a separately installed `kf`
    /// may be another version, and knows no embedder's tasks). A program that forgets the call
    /// is caught at its first evaluation: the child does not say hello, and is refused if it
    /// tries to start workers itself, so at most one extra process is started and the error
    /// ([`EvalError::WorkerNotServing`]) names `kernelfoundry::init()`. A dedicated binary whose
    /// `main` calls `init()` first (the `kf` binary does) can be named with a `WorkerCommand`
    /// built by hand.
    pub fn current_exe() -> Result<Self, EvalError> {
        Ok(WorkerCommand {
            program: std::env::current_exe()?,
            args: Vec::new(),
            env_remove: Vec::new(),
        })
    }

    /// Re-executes the current test binary, running only the test that
    /// [`crate::worker_test_entry!`] defines (ignored, so that it runs only as this child).
    pub fn test_harness() -> Result<Self, EvalError> {
        Ok(WorkerCommand {
            program: std::env::current_exe()?,
            args: [
                "kf_eval_worker_entry",
                "--ignored",
                "--exact",
                "--nocapture",
                "--quiet",
                "--test-threads=1",
            ]
            .map(String::from)
            .to_vec(),
            env_remove: Vec::new(),
        })
    }
}

/// The environment of every process that runs code the user did not write (evaluation
/// workers, task references, KernelBench problem files): an allowlist of this process's
/// variables ([`crate::confine::untrusted_env`]).
pub fn scrubbed_env() -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
    crate::confine::untrusted_env()
}

/// Whether a variable looks like a secret and must not reach a worker (see
/// [`kf_core::redact::is_secret_name`]).
///
/// ```
/// use kf_eval::is_secret;
/// assert!(is_secret("KF_LLM_API_KEY") && is_secret("KF_DATABASE_URL") && is_secret("https_proxy"));
/// assert!(!is_secret("PATH"));
/// ```
pub fn is_secret(name: &str) -> bool {
    kf_core::redact::is_secret_name(name)
}

/// How long an evaluation may take before its worker is killed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeoutPolicy {
    /// Upper bound, and the limit while no baseline time is known.
    pub max: Duration,
    /// Lower bound when scaling.
    pub min: Duration,
    /// Allowance for compilation and data preparation.
    pub allowance: Duration,
    /// Multiple of the baseline's kernel time allowed per launch.
    pub per_launch_factor: f64,
}

impl Default for TimeoutPolicy {
    fn default() -> Self {
        TimeoutPolicy {
            max: Duration::from_secs(60),
            min: Duration::from_secs(10),
            allowance: Duration::from_secs(15),
            per_launch_factor: 20.0,
        }
    }
}

impl TimeoutPolicy {
    /// A fixed limit.
    pub fn fixed(limit: Duration) -> Self {
        TimeoutPolicy {
            max: limit,
            min: limit,
            allowance: limit,
            per_launch_factor: 0.0,
        }
    }

    /// The limit for one evaluation, given the baseline's median kernel time when known.
    pub fn limit(&self, config: &EvalConfig, baseline_s: Option<f64>) -> Duration {
        let Some(b) = baseline_s.filter(|b| b.is_finite() && *b > 0.0) else {
            return self.max;
        };
        let t = &config.timing;
        // A restarted worker times the baseline FIRST_BASELINE_TRIALS times in its first job.
        let baseline_launches = crate::protocol::first_baseline_trials(t);
        let launches =
            f64::from(config.input_sets.max(3) + t.warmup + t.min_trials + baseline_launches + 2);
        let scaled =
            self.allowance.as_secs_f64() + t.max_seconds + launches * b * self.per_launch_factor;
        Duration::from_secs_f64(scaled.clamp(self.min.as_secs_f64(), self.max.as_secs_f64()))
    }
}

/// A running worker.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    device: DeviceFacts,
    /// The worker's private temporary folder (its `TMPDIR`), removed with the worker.
    _tmp: Option<tempfile::TempDir>,
    /// Its confinement (holding its cgroup, if any, until the worker is gone).
    _confined: ConfinedCommand,
}

impl Worker {
    fn kill(mut self) {
        kill_group(&mut self.child);
        let _ = self.child.wait();
    }

    fn stderr_tail(&self) -> String {
        bounded_tail(&self.stderr)
    }
}

/// Makes the process `cmd` starts the leader of a process group of its own, so that
/// [`kill_group`] reaches everything it starts: a kernel build's compiler, a task's Python
/// reference and whatever those fork.
fn lead_own_group(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    #[cfg(not(unix))]
    let _ = cmd;
}

/// Kills `child` and every process of the group it leads ([`lead_own_group`]): a timeout or a
/// failed start ends the whole evaluation, not only the worker, whose children would otherwise
/// outlive it (orphaned, still running a reference or a build). The child is not yet waited
/// for, so its pid (the group's id) cannot have been reused.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) has no memory effects; a negative pid names the process group.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// Waits for the next protocol line, skipping stray output.
fn next_reply(lines: &Receiver<String>, deadline: Instant) -> Result<Reply, RecvTimeoutError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines.recv_timeout(left)?;
        if let Some(json) = line.strip_prefix(LINE_PREFIX) {
            if let Ok(reply) = serde_json::from_str(json) {
                return Ok(reply);
            }
        }
    }
}

struct Slots {
    free: Mutex<usize>,
    cv: Condvar,
}

impl Slots {
    fn acquire(&self) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.cv.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
    }

    fn release(&self) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        *free += 1;
        self.cv.notify_one();
    }
}

struct Inner {
    spec: BackendSpec,
    task: String,
    task_file: Option<TaskFileJob>,
    sizes: Sizes,
    config: EvalConfig,
    command: WorkerCommand,
    timeout: TimeoutPolicy,
    /// When every evaluation must be over ([`IsolatedEvaluatorBuilder::deadline`]).
    deadline: Option<Instant>,
    handshake: Duration,
    limits: ResourceLimits,
    policy: ConfinementPolicy,
    /// How the last worker started was confined.
    confinement: Mutex<Option<Confinement>>,
    idle: Mutex<Vec<Worker>>,
    slots: Slots,
    baseline_s: Mutex<Option<f64>>,
    next_id: Mutex<u64>,
    spawned: Mutex<u64>,
}

/// The diagnostics of an evaluation asked for after the evaluator's deadline
/// ([`IsolatedEvaluatorBuilder::deadline`]): no worker ran it.
pub const DEADLINE_SPENT: &str = "not evaluated: the run's time limit was spent";

/// The start of the diagnostics of an evaluation the evaluator's deadline stopped.
pub const DEADLINE_CUT: &str = "stopped by the run's time limit";

/// Evaluates candidates in worker processes: warm, one job at a time each, killed on timeout.
/// Implements [`Evaluator`]; the blocking work runs on its own thread, so any executor can
/// drive it.
///
/// # Example
///
/// ```no_run
/// use kf_eval::{BackendSpec, IsolatedEvaluator, WorkerCommand};
///
/// // In `main`, before anything else: `kernelfoundry::init();` (with the facade), or
/// // kf_eval::worker::serve_if_requested(open_backend, &kf_eval::worker::TaskRegistry::builtin());
/// let sizes = kf_eval::task::parse_sizes("M=256,N=192,K=128")?;
/// let evaluator = IsolatedEvaluator::builder(BackendSpec::new("opencl"), "gemm", sizes)
///     .command(WorkerCommand::current_exe()?)
///     .build();
/// # Ok::<(), kf_eval::EvalError>(())
/// ```
#[derive(Clone)]
pub struct IsolatedEvaluator {
    inner: Arc<Inner>,
}

/// Builds an [`IsolatedEvaluator`].
pub struct IsolatedEvaluatorBuilder {
    spec: BackendSpec,
    task: String,
    task_file: Option<TaskFileJob>,
    sizes: Sizes,
    config: EvalConfig,
    command: Option<WorkerCommand>,
    timeout: TimeoutPolicy,
    deadline: Option<Instant>,
    handshake: Duration,
    workers: usize,
    limits: ResourceLimits,
    policy: ConfinementPolicy,
}

impl IsolatedEvaluatorBuilder {
    /// Whether workers are confined at all ([`crate::confine`]; default on). `false` turns
    /// every layer off ([`ConfinementPolicy::Off`]), for tests of the unconfined path; the
    /// source check ([`crate::host_file_check`]) still applies.
    pub fn confine(mut self, on: bool) -> Self {
        self.policy = if on {
            match self.policy {
                ConfinementPolicy::Off => ConfinementPolicy::Required,
                kept => kept,
            }
        } else {
            ConfinementPolicy::Off
        };
        self
    }

    /// Whether workers may run where their confinement is not complete (default: the
    /// process-wide policy, [`crate::confine::process_policy`], which refuses). With `true`
    /// they are confined as far as the machine allows, a warning is logged, and the record
    /// ([`IsolatedEvaluator::confinement`]) says what was missing; `kf --allow-unconfined`.
    pub fn allow_unconfined(mut self, allow: bool) -> Self {
        self.policy = match (allow, self.policy) {
            (_, ConfinementPolicy::Off) => ConfinementPolicy::Off,
            (true, _) => ConfinementPolicy::AllowUnconfined,
            (false, _) => ConfinementPolicy::Required,
        };
        self
    }

    /// The worker processes' resource limits (default [`ResourceLimits::default`]).
    pub fn limits(mut self, limits: ResourceLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The protocol configuration.
    pub fn config(mut self, config: EvalConfig) -> Self {
        self.config = config;
        self
    }

    /// Judge against a task file instead of a built-in task: workers rebuild it from the
    /// serialised spec and its folder.
    pub fn task_file(mut self, job: TaskFileJob) -> Self {
        self.task = job.spec.name.clone();
        self.task_file = Some(job);
        self
    }

    /// How workers are started (default: re-execute the current program).
    pub fn command(mut self, command: WorkerCommand) -> Self {
        self.command = Some(command);
        self
    }

    /// The timeout policy.
    pub fn timeout(mut self, timeout: TimeoutPolicy) -> Self {
        self.timeout = timeout;
        self
    }

    /// The instant by which every evaluation must be over (a search's `--time`, counted from
    /// its start): each job's limit is cut to the time left, and a job asked for after it
    /// is not sent to a worker. Either way the evaluation is a [`Status::Timeout`] whose
    /// diagnostics say the deadline cut it, not the kernel's own time limit.
    pub fn deadline(mut self, at: Instant) -> Self {
        self.deadline = Some(at);
        self
    }

    /// How long a new worker may take to say hello before the program is judged not to enter
    /// worker mode (default [`DEFAULT_HANDSHAKE_LIMIT`]).
    pub fn handshake_timeout(mut self, limit: Duration) -> Self {
        self.handshake = limit;
        self
    }

    /// Evaluations running at once (default 1, so timings do not disturb each other).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n.max(1);
        self
    }

    /// The evaluator. Inside a process that was itself started as a worker this already tells
    /// the parent that its `main` did not enter worker mode, and every evaluation fails with
    /// [`EvalError::InsideWorker`] without starting a process.
    pub fn build(self) -> IsolatedEvaluator {
        // The error is returned again at the first evaluation; here only the parent is told.
        let _ = refuse_inside_worker();
        let command = self.command.unwrap_or_else(|| WorkerCommand {
            program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
            args: Vec::new(),
            env_remove: Vec::new(),
        });
        IsolatedEvaluator {
            inner: Arc::new(Inner {
                spec: self.spec,
                task: self.task,
                task_file: self.task_file,
                sizes: self.sizes,
                config: self.config,
                command,
                timeout: self.timeout,
                deadline: self.deadline,
                handshake: self.handshake,
                limits: self.limits,
                policy: self.policy,
                confinement: Mutex::new(None),
                idle: Mutex::new(Vec::new()),
                slots: Slots {
                    free: Mutex::new(self.workers),
                    cv: Condvar::new(),
                },
                baseline_s: Mutex::new(None),
                next_id: Mutex::new(0),
                spawned: Mutex::new(0),
            }),
        }
    }
}

impl IsolatedEvaluator {
    /// A builder for `task` at `sizes` on the backend `spec`.
    pub fn builder(
        spec: BackendSpec,
        task: impl Into<String>,
        sizes: Sizes,
    ) -> IsolatedEvaluatorBuilder {
        IsolatedEvaluatorBuilder {
            spec,
            task: task.into(),
            task_file: None,
            sizes,
            config: EvalConfig::default(),
            command: None,
            timeout: TimeoutPolicy::default(),
            deadline: None,
            handshake: DEFAULT_HANDSHAKE_LIMIT,
            limits: ResourceLimits::default(),
            workers: 1,
            policy: crate::confine::process_policy(),
        }
    }

    /// How the most recently started worker confined itself ([`crate::confine`]); `None`
    /// before the first worker has opened its backend.
    pub fn confinement(&self) -> Option<Confinement> {
        self.inner.confinement.lock().ok().and_then(|c| c.clone())
    }

    /// The task this evaluator judges against, built in this process (for descriptions).
    pub fn task(&self) -> Result<Box<dyn KernelTask>, EvalError> {
        match &self.inner.task_file {
            Some(job) => Ok(Box::new(
                job.build(&self.inner.sizes, &crate::task::builtin_references())?,
            )),
            None => crate::task::builtin_task(&self.inner.task, &self.inner.sizes),
        }
    }

    /// Worker processes started so far.
    pub fn workers_started(&self) -> u64 {
        self.inner.spawned.lock().map(|n| *n).unwrap_or(0)
    }

    /// Process ids of the idle workers (for tests and monitoring).
    pub fn idle_worker_pids(&self) -> Vec<u32> {
        self.inner
            .idle
            .lock()
            .map(|w| w.iter().map(|w| w.child.id()).collect())
            .unwrap_or_default()
    }

    /// Facts of the device the workers use, starting a worker if none is running.
    pub fn device(&self) -> Result<DeviceFacts, EvalError> {
        let inner = &self.inner;
        inner.slots.acquire();
        let result = inner.take_worker().map(|w| {
            let facts = w.device.clone();
            inner.put_back(w);
            facts
        });
        inner.slots.release();
        result
    }

    /// Evaluates `source` with `params`, blocking the calling thread.
    pub fn evaluate_blocking(
        &self,
        source: &KernelSource,
        params: &ParamValues,
    ) -> Result<Evaluation, EvalError> {
        self.evaluate_blocking_profiled(source, params, None)
            .map(|(evaluation, _)| evaluation)
    }

    /// Evaluates `source` with `params`, blocking the calling thread, under `config` for this
    /// evaluation only (`None`: the builder's configuration; see [`IsolatedEvaluator::config`]),
    /// and says where its time went.
    pub fn evaluate_blocking_profiled(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        config: Option<&EvalConfig>,
    ) -> Result<(Evaluation, EvalProfile), EvalError> {
        self.inner.slots.acquire();
        let result = self
            .inner
            .run(source, params, config.unwrap_or(&self.inner.config));
        self.inner.slots.release();
        result
    }

    /// Compiles `source` with `params` in a worker process without running it
    /// ([`crate::KernelEvaluator::compile_only`]), blocking the calling thread: the binary lands
    /// in the worker backend's compile cache, and the compiler's facts name it. A compiler
    /// that crashes or hangs costs the worker process, as in an evaluation
    /// ([`CompileCheck::Failed`] with a runtime error or a timeout).
    pub fn compile_only_blocking(
        &self,
        source: &KernelSource,
        params: &ParamValues,
    ) -> Result<CompileCheck, EvalError> {
        self.inner.slots.acquire();
        let result = self
            .inner
            .exchange(source, params, &self.inner.config, true);
        self.inner.slots.release();
        match result? {
            (Answer::Compiled(check), _) => Ok(check),
            (Answer::Evaluated(failed), _) => Ok(CompileCheck::Failed(failed)),
        }
    }

    /// The protocol configuration every evaluation uses unless given another one.
    pub fn config(&self) -> &EvalConfig {
        &self.inner.config
    }

    /// Stops every idle worker.
    pub fn shutdown(&self) {
        if let Ok(mut idle) = self.inner.idle.lock() {
            for w in idle.drain(..) {
                w.kill();
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Ok(idle) = self.idle.get_mut() {
            for w in idle.drain(..) {
                w.kill();
            }
        }
    }
}

/// The bounded tail of a worker's standard error.
fn bounded_tail(tail: &Mutex<String>) -> String {
    let s = tail.lock().map(|s| s.clone()).unwrap_or_default();
    crate::protocol::bounded(s.trim(), 1500)
}

/// Forwards a worker's standard output line by line to the returned channel, from a thread
/// of its own, so that its replies can be awaited with a deadline.
fn forward_lines(stdout: ChildStdout) -> Receiver<String> {
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// Keeps the tail of a worker's standard error (between 32 and 64 KiB), read by a thread of
/// its own, for the errors that quote it.
fn keep_tail(mut stderr: ChildStderr) -> Arc<Mutex<String>> {
    let tail = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&tail);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut s) = sink.lock() {
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
                if s.len() > 64 * 1024 {
                    let cut = s.len() - 32 * 1024;
                    let cut = (cut..s.len()).find(|i| s.is_char_boundary(*i)).unwrap_or(0);
                    s.drain(..cut);
                }
            }
        }
    });
    tail
}

impl Inner {
    /// Keeps how a new worker is confined (the warning for an incomplete one that is allowed
    /// to run is logged where it is decided, [`crate::confine`]).
    fn note_confinement(&self, confinement: Confinement) {
        if let Ok(mut last) = self.confinement.lock() {
            *last = Some(confinement);
        }
    }

    fn spawn(&self) -> Result<Worker, EvalError> {
        refuse_inside_worker()?;
        let (mut cmd, tmp) = self.worker_command()?;
        // Seccomp and the limits from the first instruction; the worker adds its Landlock
        // rules once its backend is open and reports them with its `Ready`.
        let mut confined = crate::confine::confine_command_with(
            &mut cmd,
            None,
            self.policy,
            "an evaluation worker",
        )
        .map_err(EvalError::Unconfined)?;
        let mut child = cmd.spawn().map_err(|e| {
            EvalError::Worker(format!(
                "cannot start {}: {e}",
                self.command.program.display()
            ))
        })?;
        if let Ok(mut n) = self.spawned.lock() {
            *n += 1;
        }
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            kill_group(&mut child);
            return Err(EvalError::Worker("worker pipes missing".into()));
        };
        let lines = forward_lines(stdout);
        let tail = keep_tail(stderr);
        self.await_hello(&mut child, &lines, &tail)?;
        let device = self.await_ready(&mut child, &lines, &tail, &mut confined)?;
        Ok(Worker {
            child,
            stdin,
            lines,
            stderr: tail,
            device,
            _tmp: tmp,
            _confined: confined,
        })
    }

    /// The command that starts a worker, with the environment it needs and nothing secret,
    /// and the private temporary folder it is given: the only one a confined worker may write
    /// besides the compile caches (the shared /tmp may hold other programs' files).
    fn worker_command(&self) -> Result<(Command, Option<tempfile::TempDir>), EvalError> {
        let spec =
            serde_json::to_string(&self.spec).map_err(|e| EvalError::Worker(e.to_string()))?;
        let mut cmd = Command::new(&self.command.program);
        let tmp = tempfile::Builder::new().prefix("kf-worker-").tempdir().ok();
        let read: Vec<&std::path::Path> = self
            .task_file
            .iter()
            .map(|t| t.base_dir.as_path())
            .collect();
        cmd.args(&self.command.args)
            .env_clear()
            .envs(scrubbed_env().filter(|(k, _)| {
                !self
                    .command
                    .env_remove
                    .iter()
                    .any(|r| k.as_os_str() == r.as_str())
            }))
            .env(WORKER_ENV, spec)
            .envs(tmp.as_ref().map(|t| ("TMPDIR", t.path().as_os_str())))
            .env(
                CONFINE_READ_ENV,
                serde_json::to_string(&read).map_err(|e| EvalError::Worker(e.to_string()))?,
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        lead_own_group(&mut cmd);
        Ok((cmd, tmp))
    }

    /// Waits for a new worker, past its hello, to open its backend and report its device and
    /// its file rules: a worker less confined than the policy allows is stopped, as is one
    /// that answers anything else, exits or takes too long.
    fn await_ready(
        &self,
        child: &mut Child,
        lines: &Receiver<String>,
        tail: &Mutex<String>,
        confined: &mut ConfinedCommand,
    ) -> Result<DeviceFacts, EvalError> {
        let deadline = Instant::now() + BACKEND_OPEN_LIMIT;
        match next_reply(lines, deadline) {
            Ok(Reply::Ready {
                device,
                confinement,
            }) => {
                let record = match confined.with_worker_report(&confinement) {
                    Ok(record) => record,
                    Err(incomplete) => {
                        kill_group(child);
                        let _ = child.wait();
                        return Err(EvalError::Unconfined(incomplete));
                    }
                };
                self.note_confinement(record);
                Ok(*device)
            }
            Ok(Reply::Unavailable { message }) => {
                let _ = child.wait();
                Err(EvalError::Backend(message))
            }
            Ok(other) => {
                kill_group(child);
                let _ = child.wait();
                Err(EvalError::Worker(format!(
                    "the worker answered {other:?} before its backend was open"
                )))
            }
            Err(e) => {
                kill_group(child);
                let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                let what = match e {
                    RecvTimeoutError::Timeout => format!(
                        "did not open its backend within {} s",
                        BACKEND_OPEN_LIMIT.as_secs()
                    ),
                    RecvTimeoutError::Disconnected => "exited while opening its backend".into(),
                };
                Err(EvalError::Worker(format!(
                    "the worker {what} ({status}); stderr: {}",
                    bounded_tail(tail)
                )))
            }
        }
    }

    /// Waits for a new worker's hello. Anything else (the child exits, says nothing within the
    /// handshake limit, or reports that it is running its program's own `main`) means the
    /// program does not enter worker mode: the child is killed and the error names the missing
    /// `init()`. This bounds a forgotten `init()` to one extra process and a few seconds.
    fn await_hello(
        &self,
        child: &mut Child,
        lines: &Receiver<String>,
        tail: &Arc<Mutex<String>>,
    ) -> Result<(), EvalError> {
        let detail = match next_reply(lines, Instant::now() + self.handshake) {
            Ok(Reply::Hello { .. }) => return Ok(()),
            Ok(Reply::NotServing { pid }) => format!(
                "process {pid} ran the program's own `main` instead of serving, and reached an \
                 isolated evaluator, which starts no workers inside a worker"
            ),
            Ok(other) => format!("its first answer was {other:?} instead of a hello"),
            Err(RecvTimeoutError::Timeout) => format!(
                "it did not answer within {:.0} s",
                self.handshake.as_secs_f64()
            ),
            Err(RecvTimeoutError::Disconnected) => "it exited without answering".into(),
        };
        kill_group(child);
        let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
        // Give the standard-error reader a moment to drain what the child printed last.
        std::thread::sleep(Duration::from_millis(50));
        let stderr = bounded_tail(tail);
        Err(EvalError::WorkerNotServing {
            program: self.command.program.display().to_string(),
            detail: format!("{detail} ({status})"),
            stderr: if stderr.is_empty() {
                String::new()
            } else {
                format!("; stderr: {stderr}")
            },
        })
    }

    fn take_worker(&self) -> Result<Worker, EvalError> {
        let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
        match idle {
            Some(w) => Ok(w),
            None => self.spawn(),
        }
    }

    fn put_back(&self, w: Worker) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(w);
        }
    }

    fn run(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        config: &EvalConfig,
    ) -> Result<(Evaluation, EvalProfile), EvalError> {
        match self.exchange(source, params, config, false)? {
            (Answer::Evaluated(evaluation), profile) => Ok((*evaluation, profile)),
            (Answer::Compiled(_), _) => Err(EvalError::Worker(
                "the worker answered an evaluation with a compilation".into(),
            )),
        }
    }

    /// Sends one job to a worker and waits for its answer (a crashed or timed-out worker's is
    /// an evaluation saying so), with every secret this process knows taken out of its text:
    /// compiler logs and worker stderr leave this process in reports, records, prompts and
    /// databases.
    fn exchange(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        config: &EvalConfig,
        compile_only: bool,
    ) -> Result<(Answer, EvalProfile), EvalError> {
        let answer = self.exchange_unredacted(source, params, config, compile_only);
        // The confinement of the worker that answered (the last one started, perhaps for this
        // job: every worker of an evaluator is started the same way) goes with the evaluation.
        let confinement = self
            .confinement
            .lock()
            .ok()
            .and_then(|c| c.as_ref().map(|c| c.level));
        let redact_all = |mut e: Box<Evaluation>| {
            e.redact_secrets();
            e.confinement = e.confinement.or(confinement);
            e
        };
        match answer {
            Ok((Answer::Evaluated(e), p)) => Ok((Answer::Evaluated(redact_all(e)), p)),
            Ok((Answer::Compiled(CompileCheck::Failed(e)), p)) => {
                Ok((Answer::Compiled(CompileCheck::Failed(redact_all(e))), p))
            }
            Ok(other) => Ok(other),
            Err(EvalError::Worker(message)) => Err(EvalError::Worker(
                kf_core::redact::redact(&message).into_owned(),
            )),
            Err(e) => Err(e),
        }
    }

    fn exchange_unredacted(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        config: &EvalConfig,
        compile_only: bool,
    ) -> Result<(Answer, EvalProfile), EvalError> {
        let left = self
            .deadline
            .map(|at| at.saturating_duration_since(Instant::now()));
        if left.is_some_and(|left| left.is_zero()) {
            let mut e = Evaluation::failed(Status::Timeout, DEADLINE_SPENT);
            e.params = params.clone();
            return Ok((Answer::Evaluated(Box::new(e)), EvalProfile::default()));
        }
        let mut worker = self.take_worker()?;
        let (job, own_limit) = self.next_job(source, params, config, compile_only)?;
        // The run's deadline cuts the job's own limit; the diagnostics say which one ended it.
        let (limit, cut) = match left {
            Some(left) if left < own_limit => (left, true),
            _ => (own_limit, false),
        };
        let line = serde_json::to_string(&job).map_err(|e| EvalError::Worker(e.to_string()))?;
        let started = Instant::now();
        // A worker that did not answer: the whole round trip is the hop.
        let unanswered = |evaluation: Evaluation| {
            let profile = EvalProfile {
                hop_s: started.elapsed().as_secs_f64(),
                ..EvalProfile::default()
            };
            (Answer::Evaluated(Box::new(evaluation)), profile)
        };
        if writeln!(worker.stdin, "{line}")
            .and_then(|_| worker.stdin.flush())
            .is_err()
        {
            return Ok(unanswered(self.crashed(worker, params, started)));
        }
        match next_reply(&worker.lines, started + limit) {
            Ok(Reply::Done {
                id: got,
                result,
                profile,
                cache,
            }) if got == job.id => self.evaluated(worker, result, profile, &cache, started),
            Ok(Reply::Compiled {
                id: got,
                result,
                cache,
            }) if got == job.id && compile_only => {
                self.put_back(worker);
                self.store_cache(&cache);
                let profile = EvalProfile {
                    hop_s: started.elapsed().as_secs_f64(),
                    ..EvalProfile::default()
                };
                Ok((
                    Answer::Compiled(*result.map_err(EvalError::Worker)?),
                    profile,
                ))
            }
            Ok(_) => {
                worker.kill();
                Err(EvalError::Worker("worker answered out of turn".into()))
            }
            Err(RecvTimeoutError::Timeout) => {
                worker.kill();
                let why = if cut {
                    format!(
                        "{DEADLINE_CUT} after {:.1} s; the worker was killed",
                        limit.as_secs_f64()
                    )
                } else {
                    format!(
                        "did not finish within {:.1} s; the worker was killed",
                        limit.as_secs_f64()
                    )
                };
                let mut e = Evaluation::failed(Status::Timeout, why);
                e.params = params.clone();
                Ok(unanswered(e))
            }
            Err(RecvTimeoutError::Disconnected) => {
                Ok(unanswered(self.crashed(worker, params, started)))
            }
        }
    }

    /// The next job, with a fresh id, and the wall-clock limit it runs under (from the
    /// timeout policy and the last baseline median a worker reported).
    fn next_job(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        config: &EvalConfig,
        compile_only: bool,
    ) -> Result<(Job, Duration), EvalError> {
        let id = {
            let mut n = self
                .next_id
                .lock()
                .map_err(|_| EvalError::Worker("poisoned".into()))?;
            *n += 1;
            *n
        };
        let baseline = self.baseline_s.lock().ok().and_then(|b| *b);
        let limit = self.timeout.limit(config, baseline);
        let job = Job {
            id,
            task: self.task.clone(),
            task_file: self.task_file.clone(),
            sizes: self.sizes.clone(),
            source: source.clone(),
            params: params.clone(),
            config: config.clone(),
            limits: self.limits.for_job(limit),
            compile_only,
        };
        Ok((job, limit))
    }

    /// A worker's evaluation: the worker goes back to the idle ones, the compile-cache
    /// entries it made are stored, the hop is the round trip beyond the worker's own time, and
    /// the baseline's median is kept for the next job's time limit.
    fn evaluated(
        &self,
        worker: Worker,
        result: Result<Box<Evaluation>, String>,
        mut profile: EvalProfile,
        cache: &[kf_backend_common::cache_outbox::CacheEntry],
        started: Instant,
    ) -> Result<(Answer, EvalProfile), EvalError> {
        self.put_back(worker);
        self.store_cache(cache);
        profile.hop_s = (started.elapsed().as_secs_f64() - profile.total_s).max(0.0);
        let evaluation = *result.map_err(EvalError::Worker)?;
        if let (Some(b), Ok(mut slot)) = (evaluation.baseline, self.baseline_s.lock()) {
            *slot = Some(b.median_s);
        }
        Ok((Answer::Evaluated(Box::new(evaluation)), profile))
    }

    /// Stores the compile-cache entries a worker made, where this process's cache folders
    /// allow ([`kf_backend_common::cache_outbox::store_from_child`]); an entry refused is
    /// logged and skipped (the next build of that kernel compiles it again).
    fn store_cache(&self, entries: &[kf_backend_common::cache_outbox::CacheEntry]) {
        if entries.is_empty() {
            return;
        }
        let roots = crate::confine::AllowedPaths::cache_roots(self.spec.cache_dir.as_deref());
        for entry in entries {
            if let Err(e) = kf_backend_common::cache_outbox::store_from_child(entry, &roots) {
                tracing::warn!("a worker's compile-cache entry was not stored: {e}");
            }
        }
    }

    /// The evaluation of a kernel whose worker died.
    fn crashed(&self, mut worker: Worker, params: &ParamValues, started: Instant) -> Evaluation {
        let status = worker
            .child
            .wait()
            .map(|s| s.to_string())
            .unwrap_or_else(|e| e.to_string());
        // Give the stderr reader a moment to drain.
        std::thread::sleep(Duration::from_millis(50));
        let tail = worker.stderr_tail();
        let cause = crash_cause(&status, &tail, &self.limits);
        let mut e = Evaluation::failed(
            Status::RuntimeError,
            format!(
                "the worker crashed after {:.2} s ({status}){cause}{}",
                started.elapsed().as_secs_f64(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!("; stderr:\n{tail}")
                }
            ),
        );
        e.params = params.clone();
        e
    }
}

/// A worker's answer to one job.
enum Answer {
    /// An evaluation (also the answer to a compile-only job whose worker crashed or hung).
    Evaluated(Box<Evaluation>),
    /// What a compile-only job found.
    Compiled(CompileCheck),
}

#[async_trait]
impl Evaluator for IsolatedEvaluator {
    type Error = EvalError;

    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, EvalError> {
        let (tx, rx) = futures::channel::oneshot::channel();
        let this = self.clone();
        let source = candidate.source.clone();
        let params = candidate.params.clone();
        std::thread::spawn(move || {
            let _ = tx.send(this.evaluate_blocking(&source, &params));
        });
        rx.await.map_err(|_| {
            EvalError::Worker("the evaluation thread ended without an answer".into())
        })?
    }
}

/// Limits on each evaluation worker process, besides the wall-clock timeout: a kernel that
/// burns CPU time outside its launches or asks for absurd amounts of memory is stopped by the
/// operating system, costs one evaluation and never the search. On Linux they are `setrlimit`
/// limits the worker sets on itself (`RLIMIT_CPU` per evaluation, `RLIMIT_AS` once its backend
/// is open); elsewhere they are not enforced.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ResourceLimits {
    /// CPU seconds one evaluation may use, counted over all the worker's threads. `None`
    /// derives it from the evaluation's wall-clock limit: that limit times the machine's
    /// hardware threads, plus 10 s.
    pub cpu_seconds: Option<f64>,
    /// Bytes of address space the worker may map beyond what it had once its backend was open
    /// (the runtime's own reservations are not counted). `None`: a quarter of the machine's
    /// physical memory ([`default_memory_growth`]), so that a kernel build, a launch or a
    /// reference that asks for far too much fails in its worker instead of pushing the
    /// search, another worker or a database on the same machine out of memory.
    pub memory_growth_bytes: Option<u64>,
    /// Whether to set the limits at all.
    pub enabled: bool,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            cpu_seconds: None,
            memory_growth_bytes: None,
            enabled: true,
        }
    }
}

impl ResourceLimits {
    /// No limits beyond the wall-clock timeout.
    pub fn none() -> Self {
        ResourceLimits {
            enabled: false,
            ..ResourceLimits::default()
        }
    }

    /// The limits of one job whose wall-clock limit is `wall`.
    fn for_job(&self, wall: Duration) -> JobLimits {
        if !self.enabled {
            return JobLimits::default();
        }
        let threads = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        JobLimits {
            cpu_seconds: Some(
                self.cpu_seconds
                    .unwrap_or(wall.as_secs_f64() * threads + 10.0),
            ),
            memory_growth_bytes: self.memory_growth_bytes.or_else(default_memory_growth),
        }
    }
}

/// The default growth limit of a worker's address space: a quarter of the machine's physical
/// memory (6 GiB on a 24 GiB machine), enough for the host buffers, references and rotated
/// input copies of problems far larger than the shipped ones, and leaving three quarters to
/// the rest of the machine when a worker runs away.
pub fn default_memory_growth() -> Option<u64> {
    physical_memory().map(|bytes| bytes / 4)
}

/// The machine's physical memory in bytes.
fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| pages as u64 * size as u64)
}

/// What a crashed worker's exit status and last words say about the limit it hit, if any.
fn crash_cause(status: &str, stderr: &str, limits: &ResourceLimits) -> String {
    if !limits.enabled {
        return String::new();
    }
    if status.contains("SIGXCPU") {
        "; it exceeded its CPU-time limit per evaluation".to_owned()
    } else if stderr.contains("memory allocation of") || status.contains("SIGABRT") {
        "; it ran out of memory (its address space may grow by at most the limit set by \
         ResourceLimits::memory_growth_bytes once its backend is open)"
            .to_owned()
    } else {
        String::new()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Whether process `pid` still runs (gone, or a zombie waiting to be reaped, is not).
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let state = stat
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .next()?
                    .to_owned();
                Some(state != "Z" && state != "X")
            })
            .unwrap_or(false)
    }

    /// A worker's children die with it: its process group is killed, not only the worker,
    /// whatever the children do (here a grandchild that ignores its parent's end).
    #[test]
    fn killing_a_worker_kills_what_it_started() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 600 </dev/null >/dev/null 2>&1 & echo $!; wait"])
            .stdout(Stdio::piped());
        lead_own_group(&mut cmd);
        let mut child = cmd.spawn().expect("sh starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("the grandchild's pid");
        let grandchild: u32 = line.trim().parse().expect("a pid");
        assert!(running(grandchild), "the grandchild runs before the kill");
        kill_group(&mut child);
        let _ = child.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        while running(grandchild) {
            if Instant::now() >= deadline {
                if let Ok(pid) = i32::try_from(grandchild) {
                    // SAFETY: kill(2) of the test's own grandchild, so that a failure leaves
                    // nothing behind.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
                panic!("process {grandchild} outlived its group's kill");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
