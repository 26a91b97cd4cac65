//! The distributed-evaluation options: the servers and their security files
//! ([`ServerArgs`], [`SecurityArgs`], shared by `kf worker` and searches) and a search's
//! ([`DistArgs`]).

use kf_search::defaults;

/// Where the distributed-evaluation servers are (shared by `kf worker` and searches). Unset,
/// they come from `KF_NATS_URL` and `KF_DATABASE_URL`, else the servers
/// `scripts/dist-servers.sh start` runs on this machine.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// NATS server with JetStream (a search given it evaluates on workers).
    #[arg(long)]
    pub nats: Option<String>,
    /// PostgreSQL database (a search given it evaluates on workers).
    #[arg(long = "db")]
    pub db: Option<String>,
    /// Prefix of the queue's streams and subjects.
    #[arg(long, default_value = "kf")]
    pub namespace: String,
    /// Security: credentials, CA, keys.
    #[command(flatten)]
    pub security: SecurityArgs,
}

/// The files that secure a deployment (`scripts/dist-servers.sh` writes them into
/// `dist-secrets/`). Each defaults to its file in the secrets folder (`--secrets`,
/// `KF_DIST_SECRETS`, else `.runtime/dist-secrets` when present); files with secrets must be
/// owner-only.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SecurityArgs {
    /// Folder of the deployment's secrets (default .runtime/dist-secrets when present).
    #[arg(long, env = "KF_DIST_SECRETS")]
    pub secrets: Option<std::path::PathBuf>,
    /// This role's NATS and PostgreSQL users and passwords (search.cred or worker.cred).
    #[arg(long, env = "KF_DIST_CREDENTIALS")]
    pub credentials: Option<std::path::PathBuf>,
    /// The deployment's CA certificate: TLS to both servers, verified against it (ca.crt).
    #[arg(long, env = "KF_DIST_CA")]
    pub ca: Option<std::path::PathBuf>,
    /// Ed25519 key a search signs its jobs with, a worker its results (search.key, worker.key).
    #[arg(long, env = "KF_DIST_SIGNING_KEY")]
    pub signing_key: Option<std::path::PathBuf>,
    /// Public keys accepted: a worker's, the searches' (trusted-searches.pem); a search's, the
    /// workers' (trusted-workers.pem).
    #[arg(long, env = "KF_DIST_TRUSTED_KEYS")]
    pub trusted_keys: Option<std::path::PathBuf>,
    /// Allow plain-text connections beyond loopback and unsigned jobs.
    #[arg(long)]
    pub insecure: bool,
}

impl SecurityArgs {
    /// The files for `role`: each option, else its file in the secrets folder.
    pub fn files(&self, role: kf_dist::Role) -> kf_dist::SecurityFiles {
        let dir = self.secrets.clone().or_else(|| {
            Some(std::path::PathBuf::from(".runtime/dist-secrets")).filter(|d| d.is_dir())
        });
        let found = dir
            .map(|d| kf_dist::SecurityFiles::in_dir(&d, role))
            .unwrap_or_default();
        kf_dist::SecurityFiles {
            credentials: self.credentials.clone().or(found.credentials),
            ca: self.ca.clone().or(found.ca),
            signing_key: self.signing_key.clone().or(found.signing_key),
            trusted_keys: self.trusted_keys.clone().or(found.trusted_keys),
            insecure: self.insecure,
        }
    }
}

/// The NATS server `scripts/dist-servers.sh` starts.
pub const DEFAULT_NATS_URL: &str = "tls://127.0.0.1:14222";
/// The PostgreSQL server `scripts/dist-servers.sh` starts.
pub const DEFAULT_DATABASE_URL: &str = "postgres://127.0.0.1:15432/kf";

impl ServerArgs {
    /// Whether a server was named on the command line.
    pub fn given(&self) -> bool {
        self.nats.is_some() || self.db.is_some()
    }

    /// The NATS URL: the option, `KF_NATS_URL`, or the local default.
    pub fn nats_url(&self) -> String {
        self.nats
            .clone()
            .or_else(|| std::env::var("KF_NATS_URL").ok().filter(|v| !v.is_empty()))
            .unwrap_or_else(|| DEFAULT_NATS_URL.into())
    }

    /// The database URL: the option, `KF_DATABASE_URL`, or the local default.
    pub fn database_url(&self) -> String {
        self.db
            .clone()
            .or_else(|| {
                std::env::var("KF_DATABASE_URL")
                    .ok()
                    .filter(|v| !v.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_DATABASE_URL.into())
    }

    /// The deployment settings for `role` (the security files are read when connecting).
    pub fn dist_config(&self, role: kf_dist::Role) -> kf_dist::DistConfig {
        kf_dist::DistConfig::new(self.nats_url(), self.database_url())
            .namespace(self.namespace.clone())
            .security_files(self.security.files(role))
    }
}

/// Options of a search that evaluates on distributed workers (`kf worker`).
#[derive(Debug, Clone, clap::Args)]
pub struct DistArgs {
    /// Evaluate on workers through NATS JetStream and PostgreSQL instead of in this process
    /// (implied by --nats or --db).
    #[arg(long)]
    pub distributed: bool,
    /// Queue name of the workers' device (default: this machine's device for the backend, as
    /// `kf worker` names it).
    #[arg(long)]
    pub device_kind: Option<String>,
    /// Servers.
    #[command(flatten)]
    pub servers: ServerArgs,
    /// Evaluate every job again instead of answering it from a stored result.
    #[arg(long)]
    pub no_reuse: bool,
    /// Fraction (0–1) of stored results evaluated again anyway, to check them.
    #[arg(long, default_value_t = 0.0)]
    pub recheck: f64,
    /// Tuning configurations of one kernel sent out at once, as parallel jobs over as many
    /// workers (1: one after another).
    #[arg(long, default_value_t = defaults::FAN_OUT_DISTRIBUTED, value_parser = at_least_one)]
    pub fan_out: usize,
    /// Send every job to compile workers first (`kf worker --role compile`), which pass it on
    /// with its binary to the execute workers (`--role execute`).
    #[arg(long)]
    pub compile_first: bool,
}

/// Text that is not a whole number of at least 1.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a whole number of at least 1")]
struct NotAtLeastOne(String);

/// A whole number of at least 1.
fn at_least_one(text: &str) -> Result<usize, NotAtLeastOne> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(NotAtLeastOne(text.to_owned())),
    }
}
