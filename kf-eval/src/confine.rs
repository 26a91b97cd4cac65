//! Confinement of evaluation workers: what a worker process may open once its backend is
//! open, enforced by the kernel (Linux Landlock), so that neither a kernel's build nor a task's
//! Python reference can read host files outside what evaluation needs, whatever slips past the
//! source check ([`crate::host_file_check`]).
//!
//! A worker confines its serving thread right after opening its backend, before the first job:
//!
//! * **read and execute**: the system's programs and libraries (`/usr`, `/lib*`, `/bin`,
//!   `/sbin`, `/opt`), the loader's and the OpenCL ICD configuration in `/etc` (named files
//!   only: `/etc/shadow` and the rest of `/etc` stay closed), `/sys`, a few `/proc` files the
//!   runtimes read (`cpuinfo`, `meminfo`, `stat`) and the worker's own `/proc/<pid>`, the
//!   runtimes that `scripts/setup.sh` installed (`.runtime/venv`, `opencl`, `sycl`, `cuda` and
//!   their JSON descriptions; never `.runtime/dist-secrets` or the LLM server's files), the
//!   folders the runtime variables name (`KF_OPENCL_ICD`, `KF_SYCL_RUNTIME`, `KF_CUDA_NVRTC`,
//!   `CUDA_HOME`, `OCL_ICD_VENDORS`, `LD_LIBRARY_PATH`, …), the Python installation that
//!   references run with, the device characterisation cache (`KF_DEVICE_CACHE`), and what the
//!   parent names in [`CONFINE_READ_ENV`] (a task file's folder with its reference script);
//! * **read and write**: the compile caches (`.runtime/cache`, the backend's cache folder, the
//!   per-user cache), the worker's private temporary folder (`TMPDIR`, made by the parent and
//!   removed with the worker), `/dev/null`, `/dev/zero`, `/dev/urandom`, `/dev/shm`, and a
//!   GPU's device nodes (`/dev/nvidia*`, `/dev/dri`);
//! * **no network**: TCP bind and connect are refused (ABI 4 and later), and so are signals
//!   to processes outside the worker and abstract UNIX sockets (ABI 6 and later).
//!
//! Everything else (home folders, `~/.ssh`, the project's files, other processes'
//! `/proc/<pid>/environ`, `/tmp`) cannot be opened. Processes the worker starts (Python
//! references) inherit the confinement.
//!
//! What it does not cover: threads that a runtime started while the backend was opened
//! (Landlock confines the calling thread and what it starts afterwards). Kernels have no
//! system calls; builds and references run in the serving thread, which is confined. On a
//! kernel without Landlock (before Linux 5.13, or with the LSM off) and on other platforms,
//! workers run unconfined and say so ([`Confinement`]); the source check still applies.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Environment variable through which the parent names further folders a worker may read
/// (a JSON list of paths): a task file's folder.
pub const CONFINE_READ_ENV: &str = "KF_WORKER_READ";

/// Environment variable that turns the confinement off (`0`); set by the parent from
/// [`crate::IsolatedEvaluatorBuilder::confine`].
pub const CONFINE_ENV: &str = "KF_WORKER_CONFINE";

/// How a worker is confined, as it reports it to its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Confinement {
    /// Every rule is enforced (the Landlock ABI version).
    Enforced {
        /// The kernel's Landlock ABI.
        abi: u32,
    },
    /// Some rules are enforced: the kernel's Landlock lacks some access rights (file rights
    /// are always among those enforced when Landlock exists).
    Partial {
        /// The kernel's Landlock ABI.
        abi: u32,
    },
    /// Not confined, and why.
    NotEnforced {
        /// Why.
        reason: String,
    },
    /// Turned off by the parent.
    #[default]
    Off,
}

impl Confinement {
    /// Whether file access is confined.
    pub fn is_enforced(&self) -> bool {
        matches!(
            self,
            Confinement::Enforced { .. } | Confinement::Partial { .. }
        )
    }
}

impl std::fmt::Display for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Confinement::Enforced { abi } => write!(f, "confined (Landlock ABI {abi})"),
            Confinement::Partial { abi } => {
                write!(
                    f,
                    "partly confined (Landlock ABI {abi}: some rights unsupported)"
                )
            }
            Confinement::NotEnforced { reason } => write!(f, "not confined: {reason}"),
            Confinement::Off => write!(f, "not confined (turned off)"),
        }
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
    /// (`taskfile::python::installation_dirs`) and the device characterisation cache are added
    /// by the callers that need them (this module depends on neither, so that both can use it).
    pub fn for_worker(cache_dir: Option<&Path>) -> Self {
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

    /// The runtimes of `.runtime` and of the runtime variables, the compile caches
    /// (`cache_dir` among them) and the program itself: what any confined process needs,
    /// without a temporary folder. A process started outside a worker (a reference under
    /// `kf task check`) gets this, not the caller's `TMPDIR`, which may be the shared `/tmp`.
    pub fn runtimes(cache_dir: Option<&Path>) -> Self {
        let mut read = Vec::new();
        let mut write = Vec::new();
        for runtime in runtime_dirs() {
            for child in ["venv", "opencl", "sycl", "cuda"] {
                read.push(runtime.join(child));
            }
            for config in ["opencl.json", "sycl.json", "cuda.json"] {
                read.push(runtime.join(config));
            }
            write.push(runtime.join("cache"));
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
        if let Some(base) = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        {
            write.push(base.join("kernelfoundry"));
        }
        if let Some(dir) = cache_dir {
            write.push(dir.to_path_buf());
        }
        // The program itself (a panic's backtrace reads it through /proc/self/exe).
        read.extend(std::env::current_exe().ok());
        AllowedPaths { read, write }
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

/// Files and folders of the system every worker may read.
const SYSTEM_READ: [&str; 20] = [
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/opt",
    "/sys",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/OpenCL",
    "/etc/alternatives",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
];

/// Device nodes every worker may read and write.
const SYSTEM_WRITE: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/urandom",
    "/dev/random",
    "/dev/shm",
    "/dev/dri",
    "/dev/nvidia-uvm",
];

/// The ruleset for `allowed` and the system's fixed paths (`own_proc`: the process's own
/// `/proc/<pid>` entry, when it is known before the rules are made).
#[cfg(target_os = "linux")]
fn ruleset(
    allowed: &AllowedPaths,
    own_proc: Option<u32>,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    use landlock::{
        path_beneath_rules, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr,
        Scope, ABI,
    };
    let abi = ABI::V6;
    let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    read.extend(allowed.read.iter().cloned());
    // The worker's own /proc entry: the runtimes read their maps and status there.
    read.extend(own_proc.map(|pid| PathBuf::from(format!("/proc/{pid}"))));
    let mut write: Vec<PathBuf> = SYSTEM_WRITE.iter().map(PathBuf::from).collect();
    // GPU device nodes: /dev/nvidia0, /dev/nvidiactl, …
    if let Ok(entries) = std::fs::read_dir("/dev") {
        write.extend(entries.flatten().map(|e| e.path()).filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("nvidia"))
        }));
    }
    for dir in &allowed.write {
        // A cache folder that does not exist yet is made now: a rule needs the folder.
        let _ = std::fs::create_dir_all(dir);
        write.push(dir.clone());
    }
    Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .handle_access(AccessNet::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(abi)))
}

/// What the kernel gives when there is no Landlock.
const NO_LANDLOCK: &str =
    "this kernel has no Landlock (Linux 5.13 or later, with the Landlock LSM enabled)";

/// Confines the calling thread (and every process and thread it starts afterwards) to
/// `allowed` and the system's fixed paths. Never fails: what could not be enforced is in the
/// answer.
#[cfg(target_os = "linux")]
pub fn confine_current_thread(allowed: &AllowedPaths) -> Confinement {
    use landlock::RulesetStatus;
    match ruleset(allowed, Some(std::process::id())).and_then(|r| r.restrict_self()) {
        Ok(s) => {
            let kernel_abi = kernel_abi();
            match s.ruleset {
                RulesetStatus::FullyEnforced => Confinement::Enforced { abi: kernel_abi },
                RulesetStatus::PartiallyEnforced => Confinement::Partial { abi: kernel_abi },
                RulesetStatus::NotEnforced => Confinement::NotEnforced {
                    reason: NO_LANDLOCK.to_owned(),
                },
            }
        }
        Err(e) => Confinement::NotEnforced {
            reason: format!("Landlock refused the rules: {e}"),
        },
    }
}

/// Confines the process `command` starts, from its first instruction, to `allowed` and the
/// system's fixed paths: for third-party code run outside a worker (a task's Python reference
/// checked by `kf task check`, the KernelBench importer's Python running a problem file). The
/// rules are made here; the child applies them between `fork` and `exec` and fails to start
/// when the kernel refuses them (never unconfined where confinement exists).
#[cfg(target_os = "linux")]
pub fn confine_command(command: &mut std::process::Command, allowed: &AllowedPaths) -> Confinement {
    use std::os::unix::process::CommandExt;
    let abi = kernel_abi();
    if abi == 0 {
        return Confinement::NotEnforced {
            reason: NO_LANDLOCK.to_owned(),
        };
    }
    let rules = match ruleset(allowed, None) {
        Ok(r) => r,
        Err(e) => {
            return Confinement::NotEnforced {
                reason: format!("Landlock refused the rules: {e}"),
            }
        }
    };
    let rules = std::sync::Mutex::new(Some(rules));
    // SAFETY: the closure runs in the child between fork and exec. It takes the ruleset out of
    // a mutex no other thread of the child can hold (the child has one thread) and makes the
    // two system calls of `restrict_self` (prctl and landlock_restrict_self), which allocate
    // nothing on success; on failure it returns the OS error, which also allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let taken = rules.lock().ok().and_then(|mut r| r.take());
            match taken.map(|r| r.restrict_self()) {
                Some(Err(_)) => Err(std::io::Error::from_raw_os_error(libc::EPERM)),
                _ => Ok(()),
            }
        });
    }
    Confinement::Enforced { abi }
}

/// On other platforms nothing is confined.
#[cfg(not(target_os = "linux"))]
pub fn confine_command(
    _command: &mut std::process::Command,
    _allowed: &AllowedPaths,
) -> Confinement {
    Confinement::NotEnforced {
        reason: "confinement uses Linux Landlock; this platform has none".to_owned(),
    }
}

/// On other platforms nothing is confined.
#[cfg(not(target_os = "linux"))]
pub fn confine_current_thread(_allowed: &AllowedPaths) -> Confinement {
    Confinement::NotEnforced {
        reason: "worker confinement uses Linux Landlock; this platform has none".to_owned(),
    }
}

/// The running kernel's Landlock ABI version (0: none).
#[cfg(target_os = "linux")]
fn kernel_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only
    // returns the ABI version (or an error); it creates nothing.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
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
        let (confinement, secret_read, ok_read) = std::thread::spawn(move || {
            let c = confine_current_thread(&allowed);
            (
                c,
                std::fs::read_to_string(&secret).is_ok(),
                std::fs::read_to_string(allowed_dir.join("ok.txt")).is_ok(),
            )
        })
        .join()
        .unwrap();
        if !confinement.is_enforced() {
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Landlock,
                format_args!("{confinement}"),
            );
            return;
        }
        assert!(ok_read, "an allowed file must stay readable");
        assert!(!secret_read, "a file outside the allowed folders was read");
        // This thread was never confined.
        assert!(std::fs::read_to_string(tmp.path().join("secret.txt")).is_ok());
    }
}
