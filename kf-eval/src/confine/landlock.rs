//! The Landlock layer: file rules (any ABI), TCP bind and connect refused (ABI 4 and later),
//! signals and abstract UNIX sockets scoped to the process's own domain (ABI 6 and later).

use std::path::PathBuf;

use super::layer::LayerUnavailable;

/// Variable that caps the Landlock ABI used (a number): for testing the seccomp layer that
/// stands in for what older ABIs lack, and for kernels whose newer Landlock rights misbehave.
/// It can only lower what Landlock enforces; whether the confinement is complete is judged on
/// what was enforced (see [`super::Confinement`]).
pub const LANDLOCK_ABI_MAX_ENV: &str = "KF_LANDLOCK_ABI_MAX";

/// The first ABI with TCP rules.
pub(crate) const NETWORK_ABI: u32 = 4;
/// The first ABI with signal and abstract UNIX socket scopes.
pub(crate) const SCOPE_ABI: u32 = 6;

/// Files and folders of the system every confined process may read.
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

/// Device nodes every confined process may read and write.
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

/// What the kernel gives when there is no Landlock.
pub(crate) const NO_LANDLOCK: &str =
    "this kernel has no Landlock (Linux 5.13 or later, with the Landlock LSM enabled)";

/// The Landlock ABI to use: the kernel's, capped by [`LANDLOCK_ABI_MAX_ENV`] (0: none).
pub(crate) fn usable_abi() -> u32 {
    let kernel = kernel_abi();
    let cap = std::env::var(LANDLOCK_ABI_MAX_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(u32::MAX);
    kernel.min(cap)
}

/// The crate's ABI value for `abi` (the highest it knows at most).
#[cfg(target_os = "linux")]
fn abi_of(abi: u32) -> landlock::ABI {
    use landlock::ABI;
    match abi {
        0 | 1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        _ => ABI::V6,
    }
}

/// The ruleset for the folders `reads` and `writes` and the system's fixed paths at ABI `abi`
/// (`own_proc`: the process's own `/proc/<pid>` entry, when it is known before the rules are
/// made).
#[cfg(target_os = "linux")]
pub(crate) fn ruleset(
    reads: &[PathBuf],
    writes: &[PathBuf],
    own_proc: Option<u32>,
    abi: u32,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    use landlock::{
        path_beneath_rules, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr,
        Scope,
    };
    let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    read.extend(reads.iter().cloned());
    // The process's own /proc entry: the runtimes read their maps and status there.
    read.extend(own_proc.map(|pid| PathBuf::from(format!("/proc/{pid}"))));
    let mut write: Vec<PathBuf> = SYSTEM_WRITE.iter().map(PathBuf::from).collect();
    // GPU device nodes: /dev/nvidia0, /dev/nvidiactl, …
    if let Ok(entries) = std::fs::read_dir("/dev") {
        write.extend(entries.flatten().map(|e| e.path()).filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("nvidia"))
        }));
    }
    for dir in writes {
        // A folder that does not exist yet is made now: a rule needs the folder.
        let _ = std::fs::create_dir_all(dir);
        write.push(dir.clone());
    }
    let level = abi;
    let abi = abi_of(level);
    let mut rules = Ruleset::default().handle_access(AccessFs::from_all(abi))?;
    // An empty set of rights is an error, so the network and scope rights only from their ABI.
    if level >= NETWORK_ABI {
        rules = rules.handle_access(AccessNet::from_all(abi))?;
    }
    if level >= SCOPE_ABI {
        rules = rules.scope(Scope::from_all(abi))?;
    }
    rules
        .create()?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(abi)))?
        .add_rules(path_beneath_rules(&write, AccessFs::from_all(abi)))
}

/// What Landlock enforced on a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Enforced {
    /// The ABI the rules were made for.
    pub abi: u32,
}

/// Confines the calling thread (and every process and thread it starts afterwards) to
/// `reads`, `writes` and the system's fixed paths, at the usable ABI. `Err` says why nothing
/// was enforced.
#[cfg(target_os = "linux")]
pub(crate) fn restrict_current_thread(
    reads: &[PathBuf],
    writes: &[PathBuf],
) -> Result<Enforced, LayerUnavailable> {
    use landlock::RulesetStatus;
    let abi = usable_abi();
    if abi == 0 {
        return Err(LayerUnavailable(NO_LANDLOCK.to_owned()));
    }
    match ruleset(reads, writes, Some(std::process::id()), abi).and_then(|r| r.restrict_self()) {
        Ok(s) => match s.ruleset {
            RulesetStatus::FullyEnforced | RulesetStatus::PartiallyEnforced => Ok(Enforced { abi }),
            RulesetStatus::NotEnforced => Err(LayerUnavailable(NO_LANDLOCK.to_owned())),
        },
        Err(e) => Err(LayerUnavailable(format!("Landlock refused the rules: {e}"))),
    }
}

/// On other platforms nothing is confined.
#[cfg(not(target_os = "linux"))]
pub(crate) fn restrict_current_thread(
    _reads: &[PathBuf],
    _writes: &[PathBuf],
) -> Result<Enforced, LayerUnavailable> {
    Err(LayerUnavailable(
        "confinement uses Linux Landlock; this platform has none".to_owned(),
    ))
}

/// The running kernel's Landlock ABI version (0: none, or refused).
#[cfg(target_os = "linux")]
pub(crate) fn kernel_abi() -> u32 {
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

/// No Landlock outside Linux.
#[cfg(not(target_os = "linux"))]
pub(crate) fn kernel_abi() -> u32 {
    0
}
