//! Command-line options shared by every search program (the examples, and embedders' own
//! tools): budget, seed, backend, output folder, verbosity, Ctrl-C handling and template seeds.

use std::path::PathBuf;
use std::time::Duration;

use kf_eval::tasks::Sizes;

use crate::{
    backends, defaults, BackendError, Search, SearchBuilder, SearchConfig, ShippedArchive,
    ShippedScheduler,
};

/// Options every search program shares; flatten them into a program's own `clap` parser.
///
/// ```
/// use clap::Parser;
/// use kf_search::SearchArgs;
///
/// #[derive(Parser)]
/// struct Args {
///     #[arg(long, default_value = "1024")]
///     size: String,
///     #[command(flatten)]
///     search: SearchArgs,
/// }
///
/// let args = Args::parse_from(["prog", "--evaluations", "10", "--backend", "sycl"]);
/// assert_eq!(args.search.evaluations, 10);
/// assert_eq!(args.search.backend, "sycl");
/// ```
#[derive(Debug, Clone, clap::Args)]
#[command(about = None, long_about = None)]
pub struct SearchArgs {
    /// Candidates evaluated at most (seeds included).
    #[arg(long, default_value_t = defaults::EVALUATIONS)]
    pub evaluations: u64,
    /// Device evaluations at most: every configuration compiled and timed, tuning inside the
    /// search included (default: no limit beyond the candidates and the wall time).
    #[arg(long)]
    pub device_evaluations: Option<u64>,
    /// Wall-clock limit, seconds (default: the program's).
    #[arg(long)]
    pub time: Option<u64>,
    /// Configurations tuned per new kernel (1 = no tuning).
    #[arg(long, default_value_t = defaults::TUNE_BUDGET)]
    pub tune_budget: usize,
    /// Run seed.
    #[arg(long, default_value_t = defaults::SEED)]
    pub seed: u64,
    /// Backend: opencl, sycl or cuda.
    #[arg(long, default_value = backends::DEFAULT_BACKEND, value_parser = backends::shipped_name)]
    pub backend: String,
    /// Device (a name substring, an index, cpu or gpu).
    #[arg(long)]
    pub device: Option<String>,
    /// Output folder (default: `runs/<task>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// No progress bar (log lines instead).
    #[arg(long)]
    pub no_progress: bool,
    /// Do not measure the reference library (NumPy's OpenBLAS for gemm) after the search.
    #[arg(long)]
    pub no_reference: bool,
    /// Rounds in which the few fastest elites are re-timed after the search, alternating, to
    /// name the best kernel by its median rather than by one lucky measurement (0: no
    /// re-timing).
    #[arg(long, default_value_t = crate::defaults::FINAL_ROUNDS)]
    pub final_rounds: u32,
    /// Do not measure the device's roofline before the search when none is cached (roofline
    /// fractions are then against the backend's estimated peaks).
    #[arg(long)]
    pub no_characterise: bool,
    /// More log output (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Archive: grid (one elite per cell of the classifier's space) or cvt (one per centroid
    /// of continuous descriptors: the static labels, local memory, registers on CUDA).
    #[arg(long, default_value = "grid", value_parser = ShippedArchive::named)]
    pub archive: ShippedArchive,
    /// Archives evolving separately as islands, with migration of elites (1: one archive).
    #[arg(long, default_value_t = defaults::ISLANDS)]
    pub islands: usize,
    /// Parents and mutators: bandit (emitters picked by a bandit credited with what their
    /// children did for the archive) or mix (fixed mutator weights, the archive's parent
    /// selection).
    #[arg(long, default_value = "bandit", value_parser = ShippedScheduler::named)]
    pub scheduler: ShippedScheduler,
    /// Steps in flight at once (default: 1 on this machine, 8 with --distributed).
    #[arg(long)]
    pub in_flight: Option<usize>,
    /// Distributed evaluation.
    #[cfg(feature = "dist")]
    #[command(flatten)]
    pub dist: DistArgs,
}

#[cfg(feature = "dist")]
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

#[cfg(feature = "dist")]
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

#[cfg(feature = "dist")]
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

#[cfg(feature = "dist")]
/// The NATS server `scripts/dist-servers.sh` starts.
pub const DEFAULT_NATS_URL: &str = "tls://127.0.0.1:14222";
#[cfg(feature = "dist")]
/// The PostgreSQL server `scripts/dist-servers.sh` starts.
pub const DEFAULT_DATABASE_URL: &str = "postgres://127.0.0.1:15432/kf";

#[cfg(feature = "dist")]
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

#[cfg(feature = "dist")]
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
    #[arg(long, default_value_t = crate::defaults::FAN_OUT_DISTRIBUTED, value_parser = at_least_one)]
    pub fan_out: usize,
    /// Send every job to compile workers first (`kf worker --role compile`), which pass it on
    /// with its binary to the execute workers (`--role execute`).
    #[arg(long)]
    pub compile_first: bool,
}

/// Text that is not a whole number of at least 1.
#[cfg(feature = "dist")]
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a whole number of at least 1")]
struct NotAtLeastOne(String);

/// A whole number of at least 1.
#[cfg(feature = "dist")]
fn at_least_one(text: &str) -> Result<usize, NotAtLeastOne> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(NotAtLeastOne(text.to_owned())),
    }
}

impl SearchArgs {
    /// A builder for `config` ([`config`](Self::config)'s, perhaps changed) with the parts
    /// these options name: the backend `config` names, as its factory
    /// ([`backends::factory_for`]), the archive ([`archive`](Self::archive)) and the
    /// scheduler (`--scheduler`).
    pub fn builder(&self, config: SearchConfig) -> Result<SearchBuilder, BackendError> {
        let backend = backends::factory_for(&config.backend)?;
        let device = config.backend.device.clone();
        Ok(Search::builder()
            .config(config)
            .backend_shared(backend, device)
            .archive_factory(self.archive())
            .scheduler(self.scheduler.clone()))
    }

    /// The shipped archive `--archive` and `--islands` name.
    pub fn archive(&self) -> ShippedArchive {
        self.archive.clone().with_islands(self.islands)
    }

    /// The search configuration for `task` at `sizes`; `default_wall` applies when `--time`
    /// is not given.
    pub fn config(&self, task: &str, sizes: Sizes, default_wall: Duration) -> SearchConfig {
        let mut config = SearchConfig::new(task, sizes);
        config.backend = kf_eval::BackendSpec::new(&self.backend).with_device(self.device.clone());
        config.evaluations = self.evaluations;
        config.device_evaluations = self.device_evaluations;
        config.wall = Some(self.time.map_or(default_wall, Duration::from_secs));
        config.tune_budget = self.tune_budget;
        config.seed = self.seed;
        if let Some(out) = &self.out {
            config.out = out.clone();
        }
        config.progress = !self.no_progress;
        config.reference = !self.no_reference;
        config.final_rounds = self.final_rounds;
        config.characterise = !self.no_characterise;
        #[cfg(feature = "dist")]
        let distributed = self.dist.distributed || self.dist.servers.given();
        #[cfg(not(feature = "dist"))]
        let distributed = false;
        #[cfg(feature = "dist")]
        if distributed {
            config.distributed =
                Some(crate::Distributed {
                    dist: self.dist.servers.dist_config(kf_dist::Role::Search).reuse(
                        kf_dist::Reuse {
                            enabled: !self.dist.no_reuse,
                            recheck: self.dist.recheck,
                        },
                    ),
                    device_kind: self.dist.device_kind.clone(),
                    run: None,
                    fan_out: self.dist.fan_out,
                    compile_first: self.dist.compile_first,
                });
        }
        config.in_flight = self.in_flight.unwrap_or(if distributed {
            defaults::IN_FLIGHT_DISTRIBUTED
        } else {
            defaults::IN_FLIGHT
        });
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        search: SearchArgs,
    }

    fn config(args: &[&str]) -> SearchConfig {
        let args = Args::parse_from(std::iter::once("prog").chain(args.iter().copied()));
        args.search
            .config("gemm", Sizes::new(), Duration::from_secs(1))
    }

    #[test]
    fn defaults_are_the_shipped_search() {
        let c = config(&[]);
        let shipped = SearchConfig::new("gemm", Sizes::new());
        assert_eq!(c.evaluations, shipped.evaluations);
        assert_eq!(c.tune_budget, shipped.tune_budget);
        assert_eq!(c.seed, shipped.seed);
        assert_eq!(c.backend.kind, "opencl");
        assert_eq!(c.in_flight, shipped.in_flight);
        let args = Args::parse_from(["prog"]).search;
        assert_eq!(crate::ArchiveFactory::name(&args.archive()), "grid");
        assert_eq!(args.scheduler, ShippedScheduler::default());
    }

    #[test]
    fn the_scheduler_is_an_option_and_a_bad_one_is_an_error() {
        let scheduler = |name| {
            Args::parse_from(["prog", "--scheduler", name])
                .search
                .scheduler
        };
        assert_eq!(scheduler("mix"), ShippedScheduler::mix());
        assert_eq!(scheduler("bandit"), ShippedScheduler::bandit());
        let e = Args::try_parse_from(["prog", "--scheduler", "ucb"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("unknown scheduler `ucb`"), "{e}");
    }

    #[test]
    fn archive_and_islands_are_options_and_a_bad_archive_is_an_error() {
        let args = Args::parse_from(["prog", "--archive", "cvt", "--islands", "4"]).search;
        let archive = args.archive();
        assert!(archive.is_cvt());
        assert_eq!(archive.islands, 4);
        let built = args
            .builder(args.config("gemm", Sizes::new(), Duration::from_secs(1)))
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(built.part_names().archive, "cvt-islands");
        let e = Args::try_parse_from(["prog", "--archive", "hexagons"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("unknown archive `hexagons`"), "{e}");
        assert!(e.contains("grid, cvt"), "{e}");
    }

    #[test]
    fn a_bad_backend_lists_the_valid_names() {
        let e = Args::try_parse_from(["prog", "--backend", "vulkan"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("opencl, cuda, sycl"), "{e}");
    }

    #[cfg(feature = "dist")]
    #[test]
    fn naming_a_server_distributes_the_search() {
        let local = config(&[]);
        assert!(local.distributed.is_none());
        assert_eq!(local.in_flight, 1);
        let by_flag = config(&["--distributed"]);
        assert!(by_flag.distributed.is_some());
        assert_eq!(by_flag.in_flight, 8);
        let by_db = config(&["--db", "postgres://kf@db.internal/kf", "--in-flight", "3"]);
        let d = by_db.distributed.expect("distributed");
        assert_eq!(d.dist.database_url, "postgres://kf@db.internal/kf");
        assert_eq!(by_db.in_flight, 3);
        assert_eq!(d.fan_out, crate::defaults::FAN_OUT_DISTRIBUTED);
        let narrow = config(&["--distributed", "--fan-out", "2"]);
        assert_eq!(narrow.distributed.expect("distributed").fan_out, 2);
        assert!(Args::try_parse_from(["prog", "--distributed", "--fan-out", "0"]).is_err());
        let by_nats = config(&["--nats", "nats://q:4222", "--device-kind", "cuda-h200"]);
        let d = by_nats.distributed.expect("distributed");
        assert_eq!(d.dist.nats_url, "nats://q:4222");
        assert_eq!(d.device_kind.as_deref(), Some("cuda-h200"));
    }
}
