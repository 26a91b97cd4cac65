//! The seccomp layer: system calls an untrusted process never needs, refused with `EPERM`.
//!
//! * `socket`, every family: TCP and UDP, netlink, packet, and UNIX sockets (pathname and
//!   abstract). Landlock's network rules cover only TCP bind and connect, and no Landlock ABI
//!   yet covers connecting to a pathname UNIX socket (a database's, a desktop's), so this
//!   layer is what closes the network and the machine's local services. `socketpair` stays:
//!   its two ends reach nothing but each other.
//! * `io_uring_setup`, `io_uring_enter`, `io_uring_register`: io_uring opens sockets and
//!   files without the system calls this filter and Landlock see.
//! * Where the Landlock ABI has no signal scope (before ABI 6): signals to any process but
//!   the process itself (`kill` of pid 0 or its own pid; `tgkill`, `tkill`,
//!   `rt_sigqueueinfo`, `rt_tgsigqueueinfo` of its own pid) and `pidfd_send_signal`.
//!
//! A system call from another architecture's table (a 32-bit `socketcall` through `int 0x80`)
//! fails the filter's architecture check and kills the process; x86-64's x32 numbers of the
//! refused calls are refused as well. The filter is inherited by
//! every process the confined one starts and cannot be removed.

use std::collections::BTreeMap;

use super::layer::LayerUnavailable;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Stands for the confined process's own pid in the filter until the child, between `fork`
/// and `exec`, writes its pid in its place ([`patch_pid`]); above any pid Linux gives
/// (`pid_max` is at most 2²²).
const PID_PLACEHOLDER: u32 = 0x7FFF_F0F0;

/// The bit that numbers x86-64's x32 system calls.
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// The filter for an untrusted process; `scope_signals`: also the signal rules (where
/// Landlock's scope is missing). The pid in the signal rules is a placeholder for
/// [`patch_pid`].
pub(crate) fn program(scope_signals: bool) -> Result<BpfProgram, LayerUnavailable> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| LayerUnavailable(format!("no seccomp filter for this architecture: {e}")))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [
        libc::SYS_socket,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        // No condition: always refused.
        rules.insert(call, Vec::new());
    }
    if scope_signals {
        let not = |value: u32| {
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                u64::from(value),
            )
            .map_err(|e| LayerUnavailable(e.to_string()))
        };
        let rule = |conditions: Vec<SeccompCondition>| {
            SeccompRule::new(conditions).map_err(|e| LayerUnavailable(e.to_string()))
        };
        // kill(0, …) signals the process's own group; kill(pid, …) itself.
        rules.insert(
            libc::SYS_kill,
            vec![rule(vec![not(0)?, not(PID_PLACEHOLDER)?])?],
        );
        for call in [
            libc::SYS_tkill,
            libc::SYS_tgkill,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_rt_tgsigqueueinfo,
        ] {
            rules.insert(call, vec![rule(vec![not(PID_PLACEHOLDER)?])?]);
        }
        rules.insert(libc::SYS_pidfd_send_signal, Vec::new());
    }
    // x86-64's x32 ABI passes the architecture check with the same calls numbered from bit 30
    // (a kernel built with it and booted with `syscall.x32=y`): each refused call is refused
    // under that number too.
    if cfg!(target_arch = "x86_64") {
        let x32: Vec<(i64, Vec<SeccompRule>)> = rules
            .iter()
            .map(|(call, conditions)| (call | X32_SYSCALL_BIT, conditions.clone()))
            .collect();
        rules.extend(x32);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| LayerUnavailable(e.to_string()))?;
    BpfProgram::try_from(filter).map_err(|e| LayerUnavailable(e.to_string()))
}

/// Writes `pid` where the filter holds [`PID_PLACEHOLDER`]. Allocates nothing: it runs in a
/// child between `fork` and `exec`.
pub(crate) fn patch_pid(program: &mut BpfProgram, pid: u32) {
    for instruction in program.iter_mut() {
        if instruction.k == PID_PLACEHOLDER {
            instruction.k = pid;
        }
    }
}

/// Installs `program` on the calling thread (and what it starts). Allocates nothing.
pub(crate) fn install(program: &BpfProgram) -> std::io::Result<()> {
    seccompiler::apply_filter(program).map_err(|e| match e {
        seccompiler::Error::Prctl(io) | seccompiler::Error::Seccomp(io) => io,
        _ => std::io::Error::from_raw_os_error(libc::EINVAL),
    })
}

/// Whether this kernel has seccomp filters that can return an errno (`None`), or why not.
pub(crate) fn unavailable() -> Option<String> {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    let action: u32 = libc::SECCOMP_RET_ERRNO;
    // SAFETY: the operation reads the 32-bit action it is given a pointer to; nothing else.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0 as libc::c_uint,
            &action as *const u32,
        )
    };
    if rc == 0 {
        None
    } else {
        Some(format!(
            "this kernel has no seccomp filters ({})",
            std::io::Error::last_os_error()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The placeholder is in the signal rules, and patching replaces every use.
    #[test]
    fn the_pid_placeholder_is_patched_everywhere() {
        let mut p = program(true).unwrap();
        let uses = p.iter().filter(|i| i.k == PID_PLACEHOLDER).count();
        assert!(uses >= 5, "{uses}");
        patch_pid(&mut p, 4242);
        assert!(p.iter().all(|i| i.k != PID_PLACEHOLDER));
        assert_eq!(p.iter().filter(|i| i.k == 4242).count(), uses);
        let plain = program(false).unwrap();
        assert!(plain.iter().all(|i| i.k != PID_PLACEHOLDER));
    }

    /// On x86-64 the x32 numbers of the refused calls are refused too.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn x32_numbers_are_refused_too() {
        let p = program(false).unwrap();
        let socket = libc::SYS_socket as u32;
        assert!(p.iter().any(|i| i.k == socket));
        assert!(p.iter().any(|i| i.k == socket | X32_SYSCALL_BIT as u32));
    }
}
