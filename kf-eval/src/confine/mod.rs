//! Confinement of untrusted processes: a kernel's build and launch (evaluation workers), a
//! task's Python reference, a KernelBench problem file run by the importer. Four layers, each
//! enforced by the kernel and inherited by every process the confined one starts:
//!
//! | layer | module | stops |
//! |---|---|---|
//! | Landlock file rules (any ABI) | [`landlock`](self) | opening any file outside the runtimes, the system's libraries, the process's own folders |
//! | Landlock network rules (ABI ≥ 4) and scopes (ABI ≥ 6) | | TCP bind and connect; signals to and abstract UNIX sockets of processes outside the domain |
//! | seccomp filter | `seccomp` | every socket (UDP, netlink, pathname UNIX sockets: a database's), io_uring, and, below Landlock ABI 6, signals to other processes |
//! | resource limits | `limits` | fork bombs (`RLIMIT_NPROC`, or a cgroup's `pids.max` under root, with every capability given up), huge files (`RLIMIT_FSIZE`), descriptor exhaustion (`RLIMIT_NOFILE`) |
//!
//! Beside them, the environment comes from an allowlist ([`untrusted_env`]), so a secret
//! whose name does not say so (`REDIS_URL`) stays behind.
//!
//! **Fail closed.** A process runs only where its confinement is complete: file rules,
//! the network and UNIX sockets closed, signals scoped, the limits in place
//! ([`Confinement::is_complete`]). Otherwise the caller gets [`IncompleteConfinement`], which
//! names what is missing; [`ConfinementPolicy::AllowUnconfined`] (`kf --allow-unconfined`,
//! [`crate::IsolatedEvaluatorBuilder::allow_unconfined`]) runs it anyway with a warning, and
//! the record ([`Confinement`]) says so in every report.
//!
//! What the file rules allow:
//!
//! * **read and execute**: the system's programs and libraries (`/usr`, `/lib*`, `/bin`,
//!   `/sbin`, `/opt`), the loader's and the OpenCL ICD configuration in `/etc` (named files
//!   only), `/sys`, a few `/proc` files the runtimes read and the process's own `/proc/<pid>`,
//!   the runtimes that `scripts/setup.sh` installed (never `.runtime/dist-secrets` or the LLM
//!   server's files), the folders the runtime variables name, the Python installation, the
//!   device characterisation (read only) and what the parent names in [`CONFINE_READ_ENV`];
//! * **read and write**: the process's private temporary folder (made by the parent and
//!   removed with it) and the device nodes of `/dev` a runtime uses. The compile caches and
//!   the device characterisation are read only: a worker's new cache entries travel to its
//!   parent, which stores them ([`kf_backend_common::cache_outbox`]).
//!
//! An evaluation worker applies its Landlock rules itself, once its backend is open (the
//! runtimes read files that no rule names while they start), and reports them in its first
//! answer; the other layers are applied by the parent between `fork` and `exec`, from the
//! first instruction on. Threads a runtime starts while the backend opens are outside the
//! Landlock domain; builds and references run in the serving thread, inside it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};

use serde::{Deserialize, Serialize};

mod env;
mod landlock;
mod layer;
#[cfg(target_os = "linux")]
mod limits;
#[cfg(target_os = "linux")]
mod seccomp;

pub use env::{env_allowed, untrusted_env};
pub use landlock::LANDLOCK_ABI_MAX_ENV;
pub use layer::LayerUnavailable;
#[cfg(target_os = "linux")]
pub use limits::{process_allowance, FILE_SIZE_BYTES, OPEN_FILES};

/// Environment variable through which the parent names further folders a worker may read
/// (a JSON list of paths): a task file's folder.
pub const CONFINE_READ_ENV: &str = "KF_WORKER_READ";

/// Environment variable through which the parent gives a worker its [`ConfinementPolicy`]
/// (`required`, `allow-unconfined` or `off`), for the processes the worker starts.
pub const CONFINE_ENV: &str = "KF_WORKER_CONFINE";

#[cfg(target_os = "linux")]
pub use limits::CONFINED_ENV;
/// Set by the parent in the environment of a process it confined.
#[cfg(not(target_os = "linux"))]
pub const CONFINED_ENV: &str = "KF_CONFINED";

/// Whether an untrusted process may run where its confinement is not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ConfinementPolicy {
    /// Run only with complete confinement; otherwise [`IncompleteConfinement`].
    #[default]
    Required,
    /// Confine as far as this machine allows, warn about the rest, and run.
    AllowUnconfined,
    /// Do not confine at all (tests of the unconfined path; never the default).
    Off,
}

impl ConfinementPolicy {
    /// The value of [`CONFINE_ENV`] for this policy.
    pub fn as_str(self) -> &'static str {
        match self {
            ConfinementPolicy::Required => "required",
            ConfinementPolicy::AllowUnconfined => "allow-unconfined",
            ConfinementPolicy::Off => "off",
        }
    }

    /// The policy a [`CONFINE_ENV`] value names (an unknown value is the default).
    pub fn parse(value: &str) -> Self {
        match value {
            "allow-unconfined" => ConfinementPolicy::AllowUnconfined,
            "off" | "0" => ConfinementPolicy::Off,
            _ => ConfinementPolicy::Required,
        }
    }
}

/// The process-wide policy ([`set_process_policy`]).
static PROCESS_POLICY: AtomicU8 = AtomicU8::new(0);

/// Sets the policy for every untrusted process this process starts without being given one:
/// task references, KernelBench imports, and evaluators built without
/// [`crate::IsolatedEvaluatorBuilder::allow_unconfined`]. `kf --allow-unconfined` sets
/// [`ConfinementPolicy::AllowUnconfined`].
pub fn set_process_policy(policy: ConfinementPolicy) {
    let value = match policy {
        ConfinementPolicy::Required => 0,
        ConfinementPolicy::AllowUnconfined => 1,
        ConfinementPolicy::Off => 2,
    };
    PROCESS_POLICY.store(value, Ordering::SeqCst);
}

/// The process-wide policy (default [`ConfinementPolicy::Required`]).
pub fn process_policy() -> ConfinementPolicy {
    match PROCESS_POLICY.load(Ordering::SeqCst) {
        1 => ConfinementPolicy::AllowUnconfined,
        2 => ConfinementPolicy::Off,
        _ => ConfinementPolicy::Required,
    }
}

pub use kf_core::ConfinementLevel;

/// The confinement an untrusted process had: recorded in `report.json`, the run folder, the
/// cluster's evaluation rows and `kf devices`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Confinement {
    /// The summary: `complete`, `partial`, `unconfined` or `off`.
    pub level: ConfinementLevel,
    /// The Landlock ABI the file rules were made for (0: none).
    pub landlock_abi: u32,
    /// Files: Landlock rules.
    pub files: bool,
    /// Every socket family closed (seccomp); TCP also by Landlock from ABI 4.
    pub network: bool,
    /// UNIX sockets closed (seccomp); abstract ones also scoped by Landlock from ABI 6.
    pub unix_sockets: bool,
    /// Signals only within the process's own domain (Landlock ABI 6, or seccomp).
    pub signals: bool,
    /// The process count, file size and open-file limits, as applied (empty: none).
    pub limits: String,
    /// What is missing, and why (empty when complete).
    pub missing: Vec<String>,
}

impl Confinement {
    /// The record of a process started with confinement turned off.
    pub fn off() -> Self {
        Confinement {
            missing: vec!["confinement turned off".to_owned()],
            ..Confinement::default()
        }
    }

    /// Whether every layer was in place.
    pub fn is_complete(&self) -> bool {
        self.level == ConfinementLevel::Complete
    }

    /// Whether file access was confined (complete or partial).
    pub fn files_confined(&self) -> bool {
        self.files
    }

    /// The level the layers add up to.
    fn summarise(mut self, off: bool) -> Self {
        self.level = if off {
            ConfinementLevel::Off
        } else if !self.files {
            ConfinementLevel::Unconfined
        } else if self.network && self.unix_sockets && self.signals && self.missing.is_empty() {
            ConfinementLevel::Complete
        } else {
            ConfinementLevel::Partial
        };
        self
    }
}

impl std::fmt::Display for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.level {
            ConfinementLevel::Complete => write!(
                f,
                "confined (Landlock ABI {}, seccomp, {})",
                self.landlock_abi, self.limits
            ),
            ConfinementLevel::Off => write!(f, "not confined (turned off)"),
            ConfinementLevel::Unconfined => {
                write!(f, "not confined: missing {}", self.missing.join("; "))
            }
            ConfinementLevel::Partial => {
                write!(f, "partly confined: missing {}", self.missing.join("; "))
            }
        }
    }
}

/// An untrusted process that would have run without complete confinement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to run {what} without complete confinement: missing {}. Run on Linux 5.13 or \
     later with Landlock and seccomp enabled (as root, with a writable pids cgroup), or pass \
     --allow-unconfined (IsolatedEvaluatorBuilder::allow_unconfined) to run it anyway",
    missing.join("; ")
)]
pub struct IncompleteConfinement {
    /// The process: "an evaluation worker", "a task's Python reference", ….
    pub what: String,
    /// What is missing, and why.
    pub missing: Vec<String>,
}

/// A command prepared with its confinement: keep it until the process has exited (it holds
/// the process's cgroup, removed on drop).
#[derive(Debug)]
pub struct ConfinedCommand {
    /// What the process gets (for a worker, before its own Landlock rules:
    /// [`ConfinedCommand::with_worker_report`]).
    pub confinement: Confinement,
    policy: ConfinementPolicy,
    what: String,
    #[cfg(target_os = "linux")]
    _cgroup: Option<limits::ProcessCgroup>,
}

impl ConfinedCommand {
    /// The whole record of a worker, once it reported its Landlock rules; fails closed as
    /// [`confine_command`] does.
    pub fn with_worker_report(
        &mut self,
        report: &WorkerLandlock,
    ) -> Result<Confinement, IncompleteConfinement> {
        if self.policy == ConfinementPolicy::Off {
            return Ok(self.confinement.clone());
        }
        let mut record = self.confinement.clone();
        record.missing.retain(|m| !m.starts_with(PENDING));
        match report {
            WorkerLandlock::Enforced { abi } => {
                record.landlock_abi = *abi;
                record.files = true;
                // Signals: the seccomp rules stand in below ABI 6 (decided by the parent from
                // the same usable ABI); a worker reporting less gets neither.
                if *abi >= landlock::SCOPE_ABI {
                    record.signals = true;
                }
            }
            WorkerLandlock::NotEnforced { reason } => {
                record.files = false;
                record.missing.push(format!("file rules: {reason}"));
            }
            WorkerLandlock::Off => {
                record.files = false;
                record
                    .missing
                    .push("file rules: turned off in the worker".to_owned());
            }
        }
        if !record.signals && !record.missing.iter().any(|m| m.starts_with("signal")) {
            record
                .missing
                .push("signal scope: neither Landlock ABI 6 nor the seccomp rules".to_owned());
        }
        let record = record.summarise(false);
        self.confinement = record.clone();
        decide(record, self.policy, &self.what)
    }
}

/// Marks the file-rule entry a worker fills in.
const PENDING: &str = "file rules pending";

/// How a worker's serving thread was confined, as the worker reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkerLandlock {
    /// The rules, at this ABI.
    Enforced {
        /// The Landlock ABI the rules were made for.
        abi: u32,
    },
    /// Not enforced, and why.
    NotEnforced {
        /// Why.
        reason: String,
    },
    /// Turned off by the parent.
    Off,
}

/// Fails closed: `record` if complete or allowed, else the error (a warning when allowed).
fn decide(
    record: Confinement,
    policy: ConfinementPolicy,
    what: &str,
) -> Result<Confinement, IncompleteConfinement> {
    if record.is_complete() || policy == ConfinementPolicy::Off {
        return Ok(record);
    }
    if policy == ConfinementPolicy::AllowUnconfined {
        tracing::warn!(
            "running {what} with {record} (--allow-unconfined); its code may reach what this \
             user can"
        );
        return Ok(record);
    }
    Err(IncompleteConfinement {
        what: what.to_owned(),
        missing: record.missing,
    })
}

/// Confines the process `command` starts, from its first instruction, to `allowed` and the
/// system's fixed paths, with the seccomp filter and the limits ([module docs](self)), under
/// the process-wide policy ([`process_policy`]). `what` names the process in errors. The
/// child fails to start where the kernel refuses a layer (never less confined than
/// recorded).
pub fn confine_command(
    command: &mut Command,
    allowed: &AllowedPaths,
    what: &str,
) -> Result<ConfinedCommand, IncompleteConfinement> {
    confine_command_with(command, Some(allowed), process_policy(), what)
}

/// [`confine_command`] with a policy; `allowed: None` leaves the Landlock rules to the
/// process itself (an evaluation worker: [`confine_worker_thread`]), and the record's file
/// rules pending until [`ConfinedCommand::with_worker_report`].
pub fn confine_command_with(
    command: &mut Command,
    allowed: Option<&AllowedPaths>,
    policy: ConfinementPolicy,
    what: &str,
) -> Result<ConfinedCommand, IncompleteConfinement> {
    command.env(CONFINE_ENV, policy.as_str());
    if policy == ConfinementPolicy::Off {
        return Ok(ConfinedCommand {
            confinement: Confinement::off().summarise(true),
            policy,
            what: what.to_owned(),
            #[cfg(target_os = "linux")]
            _cgroup: None,
        });
    }
    platform::confine(command, allowed, policy, what)
}

/// The confinement an untrusted process gets on this machine (`kf devices` prints it): a
/// trivial program (`true`) started with every layer, as a task's reference would be. A layer
/// the kernel refuses when the child applies it shows as a failed start, named in
/// [`Confinement::missing`].
pub fn probe() -> Confinement {
    let mut command = Command::new("true");
    command.env_clear().envs(untrusted_env());
    let allowed = AllowedPaths::for_reference();
    let mut record = match confine_command_with(
        &mut command,
        Some(&allowed),
        ConfinementPolicy::AllowUnconfined,
        "the probe",
    ) {
        Ok(c) => c,
        Err(e) => {
            return Confinement {
                missing: e.missing,
                ..Confinement::default()
            }
            .summarise(false)
        }
    };
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => record
            .confinement
            .missing
            .push(format!("the confined probe exited with {status}")),
        Err(e) => record.confinement.missing.push(format!(
            "the kernel refused a layer when it was applied: {e}"
        )),
    }
    record.confinement.clone().summarise(false)
}

/// Whether `what` may run on this machine under the process-wide policy: [`probe`]'s record
/// when complete or allowed, else the error naming what is missing. For a long-lived program
/// (`kf worker`) that should refuse at its start, not at its first job.
pub fn check_machine(what: &str) -> Result<Confinement, IncompleteConfinement> {
    match process_policy() {
        ConfinementPolicy::Off => Ok(Confinement::off().summarise(true)),
        policy => decide(probe(), policy, what),
    }
}

/// Confines the calling thread (and every process and thread it starts afterwards) with the
/// Landlock rules for `allowed`: an evaluation worker, once its backend is open. The other
/// layers were applied by its parent.
pub fn confine_worker_thread(allowed: &AllowedPaths) -> WorkerLandlock {
    match landlock::restrict_current_thread(&allowed.read, &allowed.write) {
        Ok(e) => WorkerLandlock::Enforced { abi: e.abi },
        Err(reason) => WorkerLandlock::NotEnforced {
            reason: reason.to_string(),
        },
    }
}

#[cfg(target_os = "linux")]
mod platform {
    use super::*;

    pub(super) fn confine(
        command: &mut Command,
        allowed: Option<&AllowedPaths>,
        policy: ConfinementPolicy,
        what: &str,
    ) -> Result<ConfinedCommand, IncompleteConfinement> {
        let mut record = Confinement::default();
        let abi = landlock::usable_abi();
        let rules = file_rules(allowed, abi, &mut record);
        // seccomp: always (no Landlock ABI covers UDP or pathname UNIX sockets), with the
        // signal rules where the Landlock scope is missing.
        let scope_by_seccomp = abi < landlock::SCOPE_ABI;
        let program = socket_filter(scope_by_seccomp, &mut record);
        if program.is_some() {
            record.network = true;
            record.unix_sockets = true;
            record.signals = scope_by_seccomp || rules.is_some();
        } else if abi >= landlock::SCOPE_ABI && rules.is_some() {
            record.signals = true;
        }
        if !record.signals && allowed.is_some() {
            record
                .missing
                .push("signal scope: neither Landlock ABI 6 nor the seccomp rules".to_owned());
        }
        let mut limits = resource_limits(&mut record);
        let cgroup = limits.take_cgroup();
        let record = if allowed.is_some() {
            decide(record.summarise(false), policy, what)?
        } else {
            // A worker: decided once it reports its file rules; what is missing already
            // stops it now.
            let pending_only = record.missing.iter().all(|m| m == PENDING);
            if !pending_only && policy == ConfinementPolicy::Required {
                return Err(IncompleteConfinement {
                    what: what.to_owned(),
                    missing: record.missing,
                });
            }
            record.summarise(false)
        };
        command.env(CONFINED_ENV, "1");
        apply_in_child(command, limits, rules, program);
        Ok(ConfinedCommand {
            confinement: record,
            policy,
            what: what.to_owned(),
            _cgroup: cgroup,
        })
    }

    /// Landlock: the ruleset for `allowed`, made here for a command (`None`: a worker, which
    /// makes its own once its backend is open); what is missing goes into `record`.
    fn file_rules(
        allowed: Option<&AllowedPaths>,
        abi: u32,
        record: &mut Confinement,
    ) -> Option<::landlock::RulesetCreated> {
        match allowed {
            Some(allowed) if abi > 0 => {
                match landlock::ruleset(&allowed.read, &allowed.write, None, abi) {
                    Ok(r) => {
                        record.files = true;
                        record.landlock_abi = abi;
                        return Some(r);
                    }
                    Err(e) => record
                        .missing
                        .push(format!("file rules: Landlock refused the rules: {e}")),
                }
            }
            Some(_) => record
                .missing
                .push(format!("file rules: {}", landlock::NO_LANDLOCK)),
            None if abi > 0 => {
                record.landlock_abi = abi;
                record.missing.push(PENDING.to_owned());
            }
            None => record
                .missing
                .push(format!("file rules: {}", landlock::NO_LANDLOCK)),
        }
        None
    }

    /// The seccomp filter of network and UNIX sockets (and, with `scope_signals`, of
    /// signals); `None`, noted in `record`, where this system cannot install one.
    fn socket_filter(
        scope_signals: bool,
        record: &mut Confinement,
    ) -> Option<seccompiler::BpfProgram> {
        let why = match seccomp::unavailable() {
            Some(why) => why,
            None => match seccomp::program(scope_signals) {
                Ok(p) => return Some(p),
                Err(why) => why.to_string(),
            },
        };
        record
            .missing
            .push(format!("network and UNIX sockets: {why}"));
        None
    }

    /// The resource limits (and cgroup) prepared for the child, described in `record`.
    fn resource_limits(record: &mut Confinement) -> limits::Prepared {
        let mut limits = limits::Prepared::new();
        if let Some(why) = limits.missing.take() {
            record.missing.push(why);
        }
        record.limits = format!(
            "{}, RLIMIT_FSIZE {} MiB, RLIMIT_NOFILE {}",
            limits.describe(),
            limits::FILE_SIZE_BYTES >> 20,
            limits::OPEN_FILES
        );
        limits
    }

    /// Has the child apply the limits, the Landlock rules and the seccomp filter between
    /// `fork` and `exec`, in that order.
    fn apply_in_child(
        command: &mut Command,
        limits: limits::Prepared,
        rules: Option<::landlock::RulesetCreated>,
        program: Option<seccompiler::BpfProgram>,
    ) {
        use std::os::unix::process::CommandExt;
        let rules = std::sync::Mutex::new(rules);
        let mut program = program;
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe work is allowed. Each step allocates nothing: the limits are plain
        // system calls on prepared values; the ruleset is taken out of a mutex no other thread
        // of the child can hold (the child has one thread) and applied with two system calls
        // (prctl and landlock_restrict_self); the filter is patched in place with the child's
        // pid and installed with prctl and seccomp. A failure returns the OS error, which
        // makes the spawn fail: never less confined than recorded.
        unsafe {
            command.pre_exec(move || {
                limits.apply_in_child()?;
                let taken = rules.lock().ok().and_then(|mut r| r.take());
                if let Some(Err(_)) = taken.map(|r| r.restrict_self()) {
                    return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                }
                if let Some(program) = program.as_mut() {
                    seccomp::patch_pid(program, libc::getpid() as u32);
                    seccomp::install(program)?;
                }
                Ok(())
            });
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    use super::*;

    pub(super) fn confine(
        _command: &mut Command,
        _allowed: Option<&AllowedPaths>,
        policy: ConfinementPolicy,
        what: &str,
    ) -> Result<ConfinedCommand, IncompleteConfinement> {
        let record = Confinement {
            missing: vec![
                "every layer: confinement uses Linux Landlock and seccomp; this platform has neither"
                    .to_owned(),
            ],
            ..Confinement::default()
        }
        .summarise(false);
        let record = decide(record, policy, what)?;
        Ok(ConfinedCommand {
            confinement: record,
            policy,
            what: what.to_owned(),
        })
    }
}

/// The folders a worker may use, beside the fixed system ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedPaths {
    /// Read and execute.
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove.
    pub write: Vec<PathBuf>,
}

impl AllowedPaths {
    /// What a worker with the compile cache `cache_dir` (the backend's, when it names one)
    /// needs: [`AllowedPaths::runtimes`], its private temporary folder (`TMPDIR`, made by the
    /// parent) and the parent's additions ([`CONFINE_READ_ENV`]). The Python installation
    /// (`task::file::python::installation_dirs`) and the device characterisation cache are added
    /// by the callers that need them (this module depends on neither, so that both can use it).
    pub fn for_worker(cache_dir: Option<&Path>) -> Self {
        // A rule needs its folder: a cache folder the parent makes later would stay closed
        // to this worker for its whole life.
        for root in Self::cache_roots(cache_dir) {
            let _ = std::fs::create_dir_all(root);
        }
        let mut allowed = Self::runtimes(cache_dir);
        if let Some(tmp) = std::env::var_os("TMPDIR").filter(|v| !v.is_empty()) {
            allowed.write.push(PathBuf::from(tmp));
        }
        if let Some(extra) = std::env::var(CONFINE_READ_ENV)
            .ok()
            .and_then(|v| serde_json::from_str::<Vec<PathBuf>>(&v).ok())
        {
            allowed.read.extend(extra);
        }
        allowed
    }

    /// What a process that runs third-party Python needs (a task's reference, a KernelBench
    /// problem file): the runtimes and the program, read only. The Python installation and
    /// the process's own folders are added by the caller.
    pub fn for_reference() -> Self {
        Self::runtimes(None)
    }

    /// The runtimes of `.runtime` and of the runtime variables, the compile caches
    /// (`cache_dir` among them; read only: [`AllowedPaths::cache_roots`]) and the program
    /// itself: what any confined process needs, without a temporary folder. A process started
    /// outside a worker (a reference under `kf task check`) gets this, not the caller's
    /// `TMPDIR`, which may be the shared `/tmp`.
    pub fn runtimes(cache_dir: Option<&Path>) -> Self {
        let mut read = Vec::new();
        for runtime in runtime_dirs() {
            for child in ["venv", "opencl", "sycl", "cuda"] {
                read.push(runtime.join(child));
            }
            for config in ["opencl.json", "sycl.json", "cuda.json"] {
                read.push(runtime.join(config));
            }
        }
        for var in [
            "KF_OPENCL_ICD",
            "KF_SYCL_RUNTIME",
            "KF_SYCL_SHIM",
            "KF_CUDA_NVRTC",
            "CUDA_HOME",
            "CUDA_PATH",
            "OCL_ICD_VENDORS",
            "OCL_ICD_FILENAMES",
            "LD_LIBRARY_PATH",
        ] {
            if let Some(value) = std::env::var_os(var) {
                read.extend(std::env::split_paths(&value).filter(|p| p.is_absolute()));
            }
        }
        read.extend(Self::cache_roots(cache_dir));
        // The program itself (a panic's backtrace reads it through /proc/self/exe).
        read.extend(std::env::current_exe().ok());
        AllowedPaths {
            read,
            write: Vec::new(),
        }
    }

    /// The compile caches: `.runtime/cache` of every runtime folder, the per-user cache and
    /// the backend's own (`cache_dir`). Confined processes read them; entries are written by
    /// the parent ([`kf_backend_common::cache_outbox`]), which stores a worker's entries only
    /// under these.
    pub fn cache_roots(cache_dir: Option<&Path>) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = runtime_dirs()
            .into_iter()
            .map(|r| r.join("cache"))
            .collect();
        if let Some(base) = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        {
            roots.push(base.join("kernelfoundry"));
        }
        roots.extend(cache_dir.map(Path::to_path_buf));
        roots
    }
}

/// Every `.runtime` folder above the current directory, the executable and this crate, and
/// the per-user folder of `kf setup` (the same layout), where they exist.
fn runtime_dirs() -> Vec<PathBuf> {
    let mut starts: Vec<PathBuf> = Vec::new();
    starts.extend(std::env::current_dir().ok());
    starts.extend(
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf)),
    );
    starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let mut out: Vec<PathBuf> = Vec::new();
    for start in starts {
        for dir in start.ancestors() {
            let runtime = dir.join(".runtime");
            if runtime.is_dir() && !out.contains(&runtime) {
                out.push(runtime);
            }
        }
    }
    out.extend(kf_backend_common::runtime::user_runtime_dir().filter(|d| d.is_dir()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confined_thread_opens_only_what_it_is_allowed() {
        let tmp = tempfile::tempdir().unwrap();
        let secret = tmp.path().join("secret.txt");
        std::fs::write(&secret, "s").unwrap();
        let allowed_dir = tmp.path().join("allowed");
        std::fs::create_dir_all(&allowed_dir).unwrap();
        std::fs::write(allowed_dir.join("ok.txt"), "ok").unwrap();
        let allowed = AllowedPaths {
            read: vec![allowed_dir.clone()],
            write: Vec::new(),
        };
        // A thread of its own: the confinement stays with it.
        let (report, secret_read, ok_read) = std::thread::spawn(move || {
            let r = confine_worker_thread(&allowed);
            (
                r,
                std::fs::read_to_string(&secret).is_ok(),
                std::fs::read_to_string(allowed_dir.join("ok.txt")).is_ok(),
            )
        })
        .join()
        .unwrap();
        if let WorkerLandlock::NotEnforced { reason } = &report {
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Landlock,
                format_args!("{reason}"),
            );
            return;
        }
        assert!(ok_read, "an allowed file must stay readable");
        assert!(!secret_read, "a file outside the allowed folders was read");
        // This thread was never confined.
        assert!(std::fs::read_to_string(tmp.path().join("secret.txt")).is_ok());
    }

    /// A worker's record adds its Landlock report to the parent's layers, and fails closed
    /// when the report says the file rules are missing.
    #[test]
    fn a_worker_without_file_rules_is_refused_unless_allowed() {
        let pending = || ConfinedCommand {
            confinement: Confinement {
                landlock_abi: 6,
                network: true,
                unix_sockets: true,
                limits: "RLIMIT_NPROC 80".into(),
                missing: vec![PENDING.to_owned()],
                ..Confinement::default()
            },
            policy: ConfinementPolicy::Required,
            what: "an evaluation worker".into(),
            #[cfg(target_os = "linux")]
            _cgroup: None,
        };
        let done = pending()
            .with_worker_report(&WorkerLandlock::Enforced { abi: 6 })
            .unwrap();
        assert_eq!(done.level, ConfinementLevel::Complete, "{done:?}");
        assert!(done.missing.is_empty() && done.signals);
        let err = pending()
            .with_worker_report(&WorkerLandlock::NotEnforced {
                reason: "no Landlock".into(),
            })
            .unwrap_err();
        assert!(err.to_string().contains("file rules: no Landlock"), "{err}");
        assert!(err.to_string().contains("--allow-unconfined"), "{err}");
        let mut allowed = pending();
        allowed.policy = ConfinementPolicy::AllowUnconfined;
        let record = allowed
            .with_worker_report(&WorkerLandlock::NotEnforced {
                reason: "no Landlock".into(),
            })
            .unwrap();
        assert_eq!(record.level, ConfinementLevel::Unconfined);
        assert_eq!(
            serde_json::to_value(record.level).unwrap(),
            serde_json::json!("unconfined")
        );
    }
}
