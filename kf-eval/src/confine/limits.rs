//! The resource layer: open files (`RLIMIT_NOFILE`), file size (`RLIMIT_FSIZE`, with
//! `SIGXFSZ` ignored so that a too-large write fails with `EFBIG` instead of killing the
//! process), and the number of processes and threads.
//!
//! The process count is `RLIMIT_NPROC` for an ordinary user: the user's threads now plus a
//! margin for the runtime's thread pool. Root is exempt from `RLIMIT_NPROC`, and these
//! machines and CI run as root, so under root the untrusted process joins a cgroup of its own
//! with `pids.max` (the cgroup v1 `pids` hierarchy, or cgroup v2 where this process's cgroup
//! delegates the `pids` controller), and gives up every capability (bounding set, effective,
//! permitted and inheritable), so it can neither raise its limits again nor leave the cgroup.
//! A uid of its own was the other way; it would lose read access to files the user keeps
//! private (a task folder under `/root`), which the Landlock rules already bound.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::layer::LayerUnavailable;

/// Set by the parent in the environment of a process it confined: a process it starts
/// inherits the process count limit instead of making one of its own.
pub const CONFINED_ENV: &str = "KF_CONFINED";

/// Most files an untrusted process may hold open.
pub const OPEN_FILES: u64 = 4096;
/// Largest file an untrusted process may write (1 GiB): a compiled kernel, a reference's
/// outputs and a runtime's scratch files are far smaller.
pub const FILE_SIZE_BYTES: u64 = 1 << 30;

/// Processes and threads an untrusted process tree may add: the runtime's pool (a thread per
/// processor) and a compiler's children.
pub fn process_allowance() -> u64 {
    let cpus = std::thread::available_parallelism().map_or(8, |n| n.get() as u64);
    64 + 4 * cpus
}

/// Where the process count comes from.
#[derive(Debug)]
pub(crate) enum ProcessCount {
    /// `RLIMIT_NPROC` (not root).
    Rlimit(u64),
    /// A cgroup with `pids.max` (root).
    Cgroup(ProcessCgroup),
    /// This process is itself confined (an evaluation worker starting a reference): the
    /// child stays in its cgroup, or under its `RLIMIT_NPROC`.
    Inherited(String),
}

/// The limits prepared in the parent, applied in the child between `fork` and `exec`.
#[derive(Debug)]
pub(crate) struct Prepared {
    rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    cgroup_procs: Option<CString>,
    drop_capabilities: bool,
    last_capability: u32,
    /// The cgroup, removed with this value (after the child is gone).
    pub count: Option<ProcessCount>,
    /// What could not be limited, and why.
    pub missing: Option<String>,
}

impl Prepared {
    /// The limits for a new untrusted process of this process's user.
    pub(crate) fn new() -> Self {
        // SAFETY: geteuid has no arguments and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let mut rlimits = vec![
            (libc::RLIMIT_NOFILE, OPEN_FILES),
            (libc::RLIMIT_FSIZE, FILE_SIZE_BYTES),
        ];
        let mut missing = None;
        let mut cgroup_procs = None;
        let count = if let Some(inherited) = inherited_count() {
            Some(ProcessCount::Inherited(inherited))
        } else if root {
            match ProcessCgroup::create(process_allowance()) {
                Ok(group) => {
                    cgroup_procs = CString::new(
                        group
                            .dir
                            .join("cgroup.procs")
                            .as_os_str()
                            .as_encoded_bytes(),
                    )
                    .ok();
                    Some(ProcessCount::Cgroup(group))
                }
                Err(why) => {
                    missing = Some(format!(
                        "the process count: kf runs as root, which RLIMIT_NPROC does not bind, \
                         and no pids cgroup could be made ({why})"
                    ));
                    None
                }
            }
        } else {
            let limit = user_threads().saturating_add(process_allowance());
            rlimits.push((libc::RLIMIT_NPROC, limit));
            Some(ProcessCount::Rlimit(limit))
        };
        Prepared {
            rlimits,
            cgroup_procs,
            drop_capabilities: has_capabilities(),
            last_capability: last_capability(),
            count,
            missing,
        }
    }

    /// Takes the cgroup out, for the parent to keep while the child lives.
    pub(crate) fn take_cgroup(&mut self) -> Option<ProcessCgroup> {
        match self.count.take() {
            Some(ProcessCount::Cgroup(g)) => {
                self.count = Some(ProcessCount::Inherited(format!(
                    "cgroup pids.max {}",
                    g.max
                )));
                Some(g)
            }
            other => {
                self.count = other;
                None
            }
        }
    }

    /// A description of the process count for the record.
    pub(crate) fn describe(&self) -> String {
        match &self.count {
            Some(ProcessCount::Rlimit(n)) => format!("RLIMIT_NPROC {n}"),
            Some(ProcessCount::Cgroup(g)) => format!("cgroup pids.max {}", g.max),
            Some(ProcessCount::Inherited(how)) => how.clone(),
            None => "no process limit".to_owned(),
        }
    }

    /// Applies the limits to the calling process. Allocates nothing: it runs between `fork`
    /// and `exec`. The cgroup is joined before the capabilities go.
    pub(crate) fn apply_in_child(&self) -> std::io::Result<()> {
        // SAFETY: every call below takes plain values or pointers to initialised stack values
        // and the prepared C string; none allocates.
        unsafe {
            if let Some(procs) = &self.cgroup_procs {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // "0": the writing process.
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if written != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for &(resource, value) in &self.rlimits {
                let mut current: libc::rlimit = std::mem::zeroed();
                if libc::getrlimit(resource, &mut current) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let value = (value as libc::rlim_t).min(current.rlim_max);
                let limit = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(resource, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if self.drop_capabilities {
                for cap in 0..=self.last_capability {
                    if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                drop_capabilities()?;
            }
        }
        Ok(())
    }
}

/// Clears the effective, permitted and inheritable capability sets of the calling thread.
/// Allocates nothing.
fn drop_capabilities() -> std::io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads the header and two data records, all initialised on the stack.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process holds any capability (then the child gives them all up: dropping the
/// bounding set needs `CAP_SETPCAP`, which a process that gave them up has no more).
fn has_capabilities() -> bool {
    status_field("CapEff:").is_some_and(|v| u64::from_str_radix(v.trim(), 16) != Ok(0))
        || status_field("CapPrm:").is_some_and(|v| u64::from_str_radix(v.trim(), 16) != Ok(0))
}

/// A field of `/proc/self/status`.
fn status_field(name: &str) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(|v| v.trim().to_owned())
}

/// How this process's own process count is bound, when it is itself a confined process: a
/// cgroup this crate made, or a finite `RLIMIT_NPROC` without the capabilities to raise it.
fn inherited_count() -> Option<String> {
    // Only a process its parent confined carries the mark, and runs under a seccomp filter
    // without new privileges (a mark set by hand in a shell is not enough); the checks below
    // then say how its process count is bound.
    std::env::var_os(CONFINED_ENV)?;
    if status_field("NoNewPrivs:").as_deref() != Some("1")
        || status_field("Seccomp:").as_deref() != Some("2")
    {
        return None;
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    if let Some(line) = own.lines().find(|l| l.contains("/kernelfoundry-")) {
        let path = line.rsplit(':').next().unwrap_or(line);
        return Some(format!("cgroup {path}"));
    }
    // SAFETY: getuid and getrlimit with a pointer to an initialised stack value.
    let (uid, limit) = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NPROC, &mut l);
        (libc::getuid(), l)
    };
    (uid != 0 && limit.rlim_max != libc::RLIM_INFINITY && !has_capabilities())
        .then(|| format!("RLIMIT_NPROC {}", limit.rlim_max))
}

/// The highest capability number this kernel knows.
fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// Threads of this process's real user now (`RLIMIT_NPROC` counts threads), from `/proc`.
fn user_threads() -> u64 {
    // SAFETY: getuid has no arguments and cannot fail.
    let uid = unsafe { libc::getuid() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0u64;
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        if field("Uid:") == Some(u64::from(uid)) {
            total += field("Threads:").unwrap_or(1);
        }
    }
    total
}

/// A cgroup of its own for one untrusted process tree, with `pids.max`; on drop, whatever is
/// left in it is killed and the cgroup removed.
#[derive(Debug)]
pub(crate) struct ProcessCgroup {
    dir: PathBuf,
    max: u64,
}

/// Numbers the cgroups this process makes.
static NEXT_CGROUP: AtomicU64 = AtomicU64::new(0);

impl ProcessCgroup {
    fn create(max: u64) -> Result<Self, LayerUnavailable> {
        let base = pids_cgroup_dir()?;
        let name = format!(
            "kernelfoundry-{}-{}",
            std::process::id(),
            NEXT_CGROUP.fetch_add(1, Ordering::Relaxed)
        );
        remove_stale_cgroups(&base);
        let dir = base.join(name);
        std::fs::create_dir(&dir)
            .map_err(|e| LayerUnavailable(format!("{}: {e}", dir.display())))?;
        let group = ProcessCgroup { dir, max };
        std::fs::write(group.dir.join("pids.max"), max.to_string()).map_err(|e| {
            LayerUnavailable(format!("{}: {e}", group.dir.join("pids.max").display()))
        })?;
        Ok(group)
    }
}

impl Drop for ProcessCgroup {
    fn drop(&mut self) {
        let procs = self.dir.join("cgroup.procs");
        // A few rounds: a process may fork while the list is read.
        for _ in 0..20 {
            let Ok(list) = std::fs::read_to_string(&procs) else {
                break;
            };
            let pids: Vec<i32> = list.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() && std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            for pid in pids {
                // SAFETY: kill(2) has no memory effects.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Removes the empty cgroups that processes no longer running made under `base` (a `kf` killed
/// before it could remove its own); a cgroup still in use cannot be removed.
fn remove_stale_cgroups(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(owner) = name
            .strip_prefix("kernelfoundry-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(owner.to_string()).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// The folder under which this process may make a cgroup with the `pids` controller.
fn pids_cgroup_dir() -> Result<PathBuf, LayerUnavailable> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| LayerUnavailable(format!("/proc/self/cgroup: {e}")))?;
    // cgroup v1: a line `N:pids:/path`.
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        if controllers.is_some_and(|c| c.split(',').any(|c| c == "pids")) {
            let dir =
                Path::new("/sys/fs/cgroup/pids").join(path.unwrap_or("/").trim_start_matches('/'));
            if dir.join("cgroup.procs").is_file() {
                return Ok(dir);
            }
        }
    }
    // cgroup v2: `0::/path`, where the controller is delegated to children.
    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        let dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
        let delegated = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"));
        if delegated {
            return Ok(dir);
        }
        return Err(LayerUnavailable(format!(
            "{} does not delegate the pids controller (cgroup.subtree_control)",
            dir.display()
        )));
    }
    Err(LayerUnavailable(
        "no pids cgroup hierarchy is mounted".to_owned(),
    ))
}
