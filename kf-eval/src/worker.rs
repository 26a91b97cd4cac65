//! The worker side of isolation: a process that opens a backend once, then evaluates jobs read
//! from its standard input and answers on its standard output, one JSON line each.
//!
//! Any binary that uses [`crate::IsolatedEvaluator`] with the default
//! [`crate::WorkerCommand::current_exe`] calls `kernelfoundry::init()` (the facade's entry
//! point, which calls [`serve_if_requested`] with every backend of the build) first thing in
//! `main`, the pattern of `procspawn::init`: in a normal run it returns at once; started as a
//! worker, it serves and exits. Test binaries use [`crate::worker_test_entry!`] instead.
//!
//! A worker answers a hello line before it opens its backend, so that the parent can tell a
//! worker from a program that ran its own `main` instead (a forgotten `init()`) within
//! seconds; such a program, being marked as a worker by [`WORKER_ENV`], is refused when it tries
//! to start workers of its own ([`crate::EvalError::InsideWorker`]) and tells its parent so.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use indexmap::IndexMap;
use kf_core::{Backend, DeviceFacts, Evaluation, KernelSource, ParamValues};
use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::profile::EvalProfile;
use crate::protocol::{EvalConfig, KernelEvaluator};
use crate::task::file::{FileTask, ReferenceRegistry, TaskBase, TaskFile, TaskSpec};
use crate::task::{builtin_task, KernelTask, Sizes};

/// Environment variable that puts a process in worker mode; its value is the
/// [`BackendSpec`] as JSON.
pub const WORKER_ENV: &str = "KF_EVAL_WORKER";

/// Prefix of every protocol line, so that stray output (a test harness banner) is ignored.
pub(crate) const LINE_PREFIX: &str = "KFEVAL ";

/// Which backend a worker opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendSpec {
    /// Backend name: `opencl`, `sycl`, `cuda`, or one an embedder registers.
    pub kind: String,
    /// Device selector (a name substring or an index), backend-specific.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Where the backend caches compiled kernels; `None`: its default place. A worker that
    /// receives binaries from compile workers gets a folder of its own, so that what it runs
    /// is what it was sent (or what it built itself), never what a neighbour left behind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_dir: Option<PathBuf>,
}

impl BackendSpec {
    /// A spec for the default device of `kind`.
    pub fn new(kind: impl Into<String>) -> Self {
        BackendSpec {
            kind: kind.into(),
            device: None,
            cache_dir: None,
        }
    }

    /// The spec on the device `device` selects (`None`: the backend's default device).
    pub fn with_device(mut self, device: Option<String>) -> Self {
        self.device = device;
        self
    }
}

/// One evaluation request.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    pub(crate) id: u64,
    pub(crate) task: String,
    /// A task file to judge against instead of the task named `task`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) task_file: Option<TaskFileJob>,
    pub(crate) sizes: Sizes,
    pub(crate) source: KernelSource,
    pub(crate) params: ParamValues,
    pub(crate) config: EvalConfig,
    /// Operating-system limits for this job.
    #[serde(default)]
    pub(crate) limits: JobLimits,
    /// Compile (and check) only, answered with [`Reply::Compiled`]: nothing runs on the device.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) compile_only: bool,
}

/// The resource limits a worker sets on itself for one job (see
/// [`crate::isolate::ResourceLimits`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobLimits {
    /// CPU seconds this job may use.
    pub(crate) cpu_seconds: Option<f64>,
    /// Address-space growth allowed beyond the worker's size once its backend was open.
    pub(crate) memory_growth_bytes: Option<u64>,
}

/// Sets this process's CPU-time limit to what it used so far plus `seconds` (the soft limit
/// only, so that a later job can raise it again; exceeding it sends SIGXCPU, which ends the
/// process), and its address-space limit to `base + growth`.
#[cfg(target_os = "linux")]
fn apply_limits(limits: &JobLimits, base_address_space: Option<u64>) {
    // SAFETY: getrusage/getrlimit/setrlimit with valid pointers to initialised structs.
    unsafe {
        if let Some(seconds) = limits.cpu_seconds {
            let mut usage: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_SELF, &mut usage) == 0 {
                let used = usage.ru_utime.tv_sec as f64
                    + usage.ru_stime.tv_sec as f64
                    + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) as f64 / 1e6;
                let mut current: libc::rlimit = std::mem::zeroed();
                if libc::getrlimit(libc::RLIMIT_CPU, &mut current) == 0 {
                    let soft = (used + seconds).ceil() as libc::rlim_t;
                    let limit = libc::rlimit {
                        rlim_cur: soft.min(current.rlim_max),
                        rlim_max: current.rlim_max,
                    };
                    libc::setrlimit(libc::RLIMIT_CPU, &limit);
                }
            }
        }
        if let (Some(growth), Some(base)) = (limits.memory_growth_bytes, base_address_space) {
            let mut current: libc::rlimit = std::mem::zeroed();
            if libc::getrlimit(libc::RLIMIT_AS, &mut current) == 0 {
                let soft = base.saturating_add(growth) as libc::rlim_t;
                let limit = libc::rlimit {
                    rlim_cur: soft.min(current.rlim_max),
                    rlim_max: current.rlim_max,
                };
                libc::setrlimit(libc::RLIMIT_AS, &limit);
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn apply_limits(_limits: &JobLimits, _base_address_space: Option<u64>) {}

/// This process's mapped address space in bytes (Linux: `/proc/self/statm`).
fn address_space_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    (page > 0).then(|| pages * page as u64)
}

/// A worker's message.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Reply {
    /// The worker loop has started (sent before the backend is opened).
    Hello { pid: u32 },
    /// The process was started as a worker but is running its program's own `main`, which tried
    /// to start workers of its own (sent by the refusal in [`refuse_inside_worker`]).
    NotServing { pid: u32 },
    /// The backend is open.
    Ready {
        device: Box<DeviceFacts>,
        /// How the worker confined its serving thread once the backend was open (the
        /// other layers were applied by the parent).
        confinement: crate::confine::WorkerLandlock,
    },
    /// The backend could not be opened.
    Unavailable { message: String },
    /// One job is done.
    Done {
        id: u64,
        result: Result<Box<Evaluation>, String>,
        /// Where the evaluation's time went in the worker.
        #[serde(default)]
        profile: EvalProfile,
        /// Compile-cache entries the job made, for the parent to store (a confined worker
        /// writes no cache: `kf_backend_common::cache_outbox`).
        #[serde(default)]
        cache: Vec<kf_backend_common::cache_outbox::CacheEntry>,
    },
    /// One compile-only job is done.
    Compiled {
        id: u64,
        result: Result<Box<crate::protocol::CompileCheck>, String>,
        /// As for [`Reply::Done`].
        #[serde(default)]
        cache: Vec<kf_backend_common::cache_outbox::CacheEntry>,
    },
}

/// A task file as it travels to a worker: the spec, its name for errors and the folder its
/// relative names (reference script, kernels) resolve against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskFileJob {
    /// The spec.
    pub spec: TaskSpec,
    /// The file name used in errors.
    pub file: String,
    /// The task file's folder (absolute, so workers in any directory find the files).
    pub base_dir: PathBuf,
}

impl TaskFileJob {
    /// The job for a task file loaded from disk.
    pub fn from_task_file(task: &TaskFile) -> Result<Self, EvalError> {
        let dir = task.base.dir().ok_or_else(|| {
            EvalError::Worker(format!(
                "task `{}` is built in; workers build it by name",
                task.name()
            ))
        })?;
        Ok(TaskFileJob {
            spec: task.spec.clone(),
            file: task.file.clone(),
            base_dir: std::path::absolute(dir)?,
        })
    }

    /// Rebuilds the task at `sizes` (validating it again).
    pub fn build(
        &self,
        sizes: &Sizes,
        references: &ReferenceRegistry,
    ) -> Result<FileTask, EvalError> {
        let file = TaskFile::from_spec(
            self.spec.clone(),
            self.file.clone(),
            TaskBase::Dir(self.base_dir.clone()),
        )?;
        Ok(FileTask::with_references(
            Arc::new(file),
            sizes,
            Arc::new(references.clone()),
        )?)
    }
}

/// Constructors of tasks by name, for workers: the built-ins plus whatever an embedder adds.
#[derive(Default)]
pub struct TaskRegistry {
    custom: IndexMap<String, TaskConstructor>,
    references: ReferenceRegistry,
}

/// Builds a task at the given sizes.
pub type TaskConstructor =
    Box<dyn Fn(&Sizes) -> Result<Box<dyn KernelTask>, EvalError> + Send + Sync>;

impl TaskRegistry {
    /// The built-in tasks only (and their Rust references, which task files may name).
    pub fn builtin() -> Self {
        TaskRegistry {
            custom: IndexMap::new(),
            references: crate::task::builtin_references(),
        }
    }

    /// Adds (or replaces) a task.
    pub fn with(mut self, name: impl Into<String>, build: TaskConstructor) -> Self {
        self.custom.insert(name.into(), build);
        self
    }

    /// Adds the Rust references task files may name (`[reference] rust = "name"`).
    pub fn with_references(mut self, references: ReferenceRegistry) -> Self {
        self.references = references;
        self
    }

    /// The Rust references for task files.
    pub fn references(&self) -> &ReferenceRegistry {
        &self.references
    }

    /// Builds the task `name` at `sizes`.
    pub fn build(&self, name: &str, sizes: &Sizes) -> Result<Box<dyn KernelTask>, EvalError> {
        match self.custom.get(name) {
            Some(build) => build(sizes),
            None => builtin_task(name, sizes),
        }
    }
}

/// Serves as an evaluation worker when this process was started as one (the [`WORKER_ENV`]
/// variable is set), then exits; otherwise returns at once.
///
/// `open` turns a [`BackendSpec`] into a backend, or says why it cannot (any error: the
/// backend's own, or a message); the worker sends that message to its parent.
pub fn serve_if_requested<B, E, F>(open: F, tasks: &TaskRegistry)
where
    B: Backend,
    E: std::fmt::Display,
    F: FnOnce(&BackendSpec) -> Result<B, E>,
{
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return;
    };
    let code = match serve(&spec, open, tasks) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("kf-eval worker: {e}");
            2
        }
    };
    std::process::exit(code);
}

/// Moves the protocol channel off standard output: kernels may `printf`, and OpenCL runtimes
/// print to the process's standard output. Returns the protocol writer; standard output then
/// goes to standard error.
fn protocol_channel() -> Result<std::fs::File, EvalError> {
    use std::os::fd::FromRawFd;
    // SAFETY: dup/dup2 on the process's own standard descriptors; the duplicated descriptor is
    // owned by the returned File and nothing else closes it.
    unsafe {
        let fd = libc::dup(1);
        if fd < 0 {
            return Err(EvalError::Io(std::io::Error::last_os_error()));
        }
        if libc::dup2(2, 1) < 0 {
            return Err(EvalError::Io(std::io::Error::last_os_error()));
        }
        Ok(std::fs::File::from_raw_fd(fd))
    }
}

fn send(out: &mut std::fs::File, reply: &Reply) -> Result<(), EvalError> {
    let json = serde_json::to_string(reply).map_err(|e| EvalError::Worker(e.to_string()))?;
    writeln!(out, "{LINE_PREFIX}{json}")?;
    out.flush()?;
    Ok(())
}

fn serve<B, E, F>(spec: &str, open: F, tasks: &TaskRegistry) -> Result<(), EvalError>
where
    B: Backend,
    E: std::fmt::Display,
    F: FnOnce(&BackendSpec) -> Result<B, E>,
{
    let mut out = protocol_channel()?;
    send(
        &mut out,
        &Reply::Hello {
            pid: std::process::id(),
        },
    )?;
    let spec: BackendSpec = serde_json::from_str(spec)
        .map_err(|e| EvalError::Worker(format!("bad {WORKER_ENV} value: {e}")))?;
    let backend = match open(&spec) {
        Ok(b) => b,
        Err(e) => {
            send(
                &mut out,
                &Reply::Unavailable {
                    message: e.to_string(),
                },
            )?;
            return Ok(());
        }
    };
    let confinement = confine_this_worker(&spec);
    send(
        &mut out,
        &Reply::Ready {
            device: Box::new(backend.device().clone()),
            confinement,
        },
    )?;
    let mut evaluator = KernelEvaluator::new(backend, EvalConfig::default());
    // The runtime's own reservations (often many GiB of address space) are made by now; the
    // memory limit counts only what evaluations add.
    let base_address_space = address_space_bytes();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let job: Job =
            serde_json::from_str(&line).map_err(|e| EvalError::Worker(format!("bad job: {e}")))?;
        apply_limits(&job.limits, base_address_space);
        send(&mut out, &run_job(&mut evaluator, &job, tasks))?;
    }
    Ok(())
}

/// Confines this worker's thread before its first job: every build and every reference runs
/// in this thread or in processes it starts, which inherit the confinement. What it got goes
/// to the parent with the `Ready`.
fn confine_this_worker(spec: &BackendSpec) -> crate::confine::WorkerLandlock {
    let policy = crate::confine::ConfinementPolicy::parse(
        &std::env::var(crate::confine::CONFINE_ENV).unwrap_or_default(),
    );
    // The processes this worker starts (task references) follow its parent's policy.
    crate::confine::set_process_policy(policy);
    if policy == crate::confine::ConfinementPolicy::Off {
        return crate::confine::WorkerLandlock::Off;
    }
    // The compile caches are written by the parent (the rules below let this process read
    // them only).
    kf_backend_common::cache_outbox::defer_writes_to_parent();
    let mut allowed = crate::confine::AllowedPaths::for_worker(spec.cache_dir.as_deref());
    // The Python references run with, and the device's measured roofline (`KF_DEVICE_CACHE`
    // or devices.json beside the compile caches), which the protocol judges against.
    allowed
        .read
        .extend(crate::task::file::python::installation_dirs());
    allowed.read.extend(crate::characterise::cache_path());
    crate::confine::confine_worker_thread(&allowed)
}

/// Runs one job (an evaluation, or a compilation only) and says how it went, with the
/// compile-cache entries it made for the parent to store.
fn run_job<B: Backend>(
    evaluator: &mut KernelEvaluator<B>,
    job: &Job,
    tasks: &TaskRegistry,
) -> Reply {
    let task = match &job.task_file {
        Some(file) => file
            .build(&job.sizes, tasks.references())
            .map(|t| Box::new(t) as Box<dyn KernelTask>),
        None => tasks.build(&job.task, &job.sizes),
    };
    if job.compile_only {
        let result = with_task(evaluator, job, task, |evaluator, task| {
            evaluator.compile_only(task, &job.source, &job.params)
        })
        .map_err(|e| e.to_string());
        return Reply::Compiled {
            id: job.id,
            result,
            cache: kf_backend_common::cache_outbox::take_deferred(),
        };
    }
    let result = with_task(evaluator, job, task, |evaluator, task| {
        evaluator.evaluate(task, &job.source, &job.params)
    })
    .map_err(|e| e.to_string());
    let profile = *evaluator.last_profile();
    Reply::Done {
        id: job.id,
        result,
        profile,
        cache: kf_backend_common::cache_outbox::take_deferred(),
    }
}

/// Runs `step` on the job's task (when it could be built) under the job's configuration (an
/// error goes to the parent as its text).
fn with_task<B: Backend, T>(
    evaluator: &mut KernelEvaluator<B>,
    job: &Job,
    task: Result<Box<dyn KernelTask>, EvalError>,
    step: impl FnOnce(&mut KernelEvaluator<B>, &dyn KernelTask) -> Result<T, EvalError>,
) -> Result<Box<T>, EvalError> {
    task.and_then(|task| {
        evaluator.set_config(job.config.clone());
        step(evaluator, task.as_ref())
    })
    .map(Box::new)
}

/// Whether this process was started as an evaluation worker.
pub fn is_worker_process() -> bool {
    std::env::var_os(WORKER_ENV).is_some()
}

/// Refuses to start workers from a process that was itself started as one: its `main` did not
/// enter the worker loop first, and starting workers would re-execute the program again, without
/// end. Tells the parent at once (one protocol line on standard output, which is the parent's
/// pipe) so that it stops waiting and reports the missing `init()`.
pub(crate) fn refuse_inside_worker() -> Result<(), EvalError> {
    if !is_worker_process() {
        return Ok(());
    }
    static TOLD_PARENT: std::sync::Once = std::sync::Once::new();
    TOLD_PARENT.call_once(|| {
        let reply = Reply::NotServing {
            pid: std::process::id(),
        };
        if let Ok(json) = serde_json::to_string(&reply) {
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{LINE_PREFIX}{json}");
            let _ = stdout.flush();
        }
    });
    Err(EvalError::InsideWorker { env: WORKER_ENV })
}

/// Defines the test that serves as the evaluation worker inside a test binary (libtest owns
/// `main` there). Use it once per test binary that uses an isolated evaluator, with
/// [`crate::WorkerCommand::test_harness`]:
///
/// ```ignore
/// kf_eval::worker_test_entry!(|spec| open_my_backend(spec));
/// ```
#[macro_export]
macro_rules! worker_test_entry {
    ($open:expr) => {
        #[test]
        #[ignore = "the evaluation worker of this binary's tests: runs only as their child"]
        fn kf_eval_worker_entry() {
            if ::std::env::var($crate::worker::WORKER_ENV).is_ok() {
                $crate::worker::serve_if_requested($open, &$crate::worker::TaskRegistry::builtin());
            }
        }
    };
}
