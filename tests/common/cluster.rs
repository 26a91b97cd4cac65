//! What the tests that run `kf` on a cluster (tests/distributed_search.rs, tests/llm_queue.rs)
//! share beyond kf-dist's test servers; included by those two with `#[path]`, after kf-dist's
//! `common` module, which it builds on.

use crate::common::{Nats, Servers, TestDb};

/// The arguments that point a `kf search` or `kf worker` at the servers `nats` and `db`: their
/// URLs, and the secrets folder where the servers' security is on (`--insecure` otherwise).
pub(crate) fn server_args(servers: &Servers, nats: &Nats, db: &TestDb) -> Vec<String> {
    let mut args = vec![
        "--nats".to_string(),
        nats.url(),
        "--db".into(),
        db.url.clone(),
    ];
    match &servers.secrets {
        Some(dir) => args.extend(["--secrets".to_string(), dir.display().to_string()]),
        None => args.push("--insecure".into()),
    }
    args
}
