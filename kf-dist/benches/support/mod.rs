//! What kf-dist's benchmarks share: their command-line options, the servers with security on
//! or off, and CPU time from /proc.

#![allow(dead_code, unreachable_pub)]

use kf_core::{Candidate, CandidateId, KernelSource, Language, ParamValue, ParamValues};
use kf_dist::{Role, Security, SecurityFiles};

use crate::common::{Nats, Servers};

/// The value after `name` on the command line.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// A nats-server of the bench's own and the search's and workers' security settings: with
/// `secure`, TLS, the roles' credentials and signing keys (the servers' secrets); without,
/// plain text on loopback, a nats-server without users, nothing signed (PostgreSQL still asks
/// the role's password where the servers have secrets).
pub fn secured(servers: &Servers, secure: bool) -> (Nats, Security, Security) {
    match &servers.secrets {
        Some(dir) if secure => (
            Nats::start(servers),
            SecurityFiles::in_dir(dir, Role::Search)
                .load()
                .expect("search secrets"),
            SecurityFiles::in_dir(dir, Role::Worker)
                .load()
                .expect("worker secrets"),
        ),
        Some(dir) => {
            let plain = |role| Security {
                credentials: SecurityFiles::in_dir(dir, role)
                    .load()
                    .expect("secrets")
                    .credentials,
                ..Security::insecure()
            };
            (
                Nats::start_with(&servers.nats_server, None),
                plain(Role::Search),
                plain(Role::Worker),
            )
        }
        None => (
            Nats::start_with(&servers.nats_server, None),
            Security::insecure(),
            Security::insecure(),
        ),
    }
}

/// User + system CPU seconds of a process (`self`, a pid, or `self/task/<tid>`), from /proc.
pub fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line: 12 and 13 after the name; the clock
    // ticks 100 times a second on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

/// Job `i` of a benchmark: one tiny kernel, parameter `I = i` (so every job is its own), a
/// child (normal priority).
pub fn numbered_job(i: usize) -> Candidate {
    let kernel = KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}");
    let params: ParamValues = [("I".to_string(), ParamValue::Int(i as i64))]
        .into_iter()
        .collect();
    let mut c = Candidate::seed(kernel, params);
    c.id = CandidateId(i as u64);
    c.parents = vec![CandidateId(0)];
    c
}
