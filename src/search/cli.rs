//! Command-line options shared by every search program (the examples, and embedders' own
//! tools): budget, seed, backend, output folder, verbosity, Ctrl-C handling and template seeds.

use std::path::PathBuf;
use std::time::Duration;

use kf_core::{KernelSource, Language, ParamValues, StopHandle};
use kf_eval::tasks::Sizes;
use kf_eval::BackendSpec;
use kf_mutate::TemplateLibrary;

use super::{SearchConfig, SearchError};

/// Options every search program shares; flatten them into a program's own `clap` parser.
///
/// ```
/// use clap::Parser;
/// use kernelfoundry::search::SearchArgs;
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
/// assert_eq!(args.search.language(), kernelfoundry::core::Language::Sycl);
/// ```
#[derive(Debug, Clone, clap::Args)]
#[command(about = None, long_about = None)]
pub struct SearchArgs {
    /// Candidates evaluated at most (seeds included).
    #[arg(long, default_value_t = 60)]
    pub evaluations: u64,
    /// Wall-clock limit, seconds (default: the program's).
    #[arg(long)]
    pub time: Option<u64>,
    /// Configurations tuned per new kernel (1 = no tuning).
    #[arg(long, default_value_t = 3)]
    pub tune_budget: usize,
    /// Run seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Backend: opencl, sycl or cuda.
    #[arg(long, default_value = "opencl")]
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
    /// More log output (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Steps in flight at once (default: 1 on this machine, 8 with --distributed).
    #[arg(long)]
    pub in_flight: Option<usize>,
    /// Distributed evaluation.
    #[command(flatten)]
    pub dist: DistArgs,
}

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
}

/// The NATS server `scripts/dist-servers.sh` starts.
pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:14222";
/// The PostgreSQL server `scripts/dist-servers.sh` starts.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:15432/postgres";

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

    /// The deployment settings.
    pub fn dist_config(&self) -> kf_dist::DistConfig {
        kf_dist::DistConfig::new(self.nats_url(), self.database_url())
            .namespace(self.namespace.clone())
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
}

impl SearchArgs {
    /// The search configuration for `task` at `sizes`; `default_wall` applies when `--time`
    /// is not given.
    pub fn config(&self, task: &str, sizes: Sizes, default_wall: Duration) -> SearchConfig {
        let mut config = SearchConfig::new(task, sizes);
        config.backend = BackendSpec {
            kind: self.backend.clone(),
            device: self.device.clone(),
        };
        config.evaluations = self.evaluations;
        config.wall = Some(self.time.map_or(default_wall, Duration::from_secs));
        config.tune_budget = self.tune_budget;
        config.seed = self.seed;
        if let Some(out) = &self.out {
            config.out = out.clone();
        }
        config.progress = !self.no_progress;
        let distributed = self.dist.distributed || self.dist.servers.given();
        if distributed {
            config.distributed = Some(super::Distributed {
                dist: self.dist.servers.dist_config(),
                device_kind: self.dist.device_kind.clone(),
                run: None,
            });
        }
        config.in_flight = self.in_flight.unwrap_or(if distributed { 8 } else { 1 });
        config
    }

    /// The kernel language of the chosen backend.
    pub fn language(&self) -> Language {
        crate::backends::language_of(&self.backend)
    }
}

/// A stop handle that Ctrl-C triggers: the engine stops, every completed step is already in
/// the run directory, and running the same command again resumes.
pub fn stop_on_ctrl_c() -> Result<StopHandle, SearchError> {
    let stop = StopHandle::new();
    let on_ctrl_c = stop.clone();
    ctrlc::set_handler(move || on_ctrl_c.stop())
        .map_err(|e| SearchError::Config(format!("installing the Ctrl-C handler: {e}")))?;
    Ok(stop)
}

/// The base variant of every template of `library` for `task`, with its manifest's first
/// parameter values: the seeds the structural mutator transforms.
pub fn template_seeds(
    library: &TemplateLibrary,
    task: &str,
) -> Result<Vec<(KernelSource, ParamValues)>, SearchError> {
    let mut seeds = Vec::new();
    for template in library.for_task(task) {
        let variant = template
            .instantiate(template.base())
            .map_err(|e| SearchError::Config(e.to_string()))?;
        let params = variant.manifest.default_params();
        seeds.push((variant.source, params));
    }
    Ok(seeds)
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
        let by_nats = config(&["--nats", "nats://q:4222", "--device-kind", "cuda-h200"]);
        let d = by_nats.distributed.expect("distributed");
        assert_eq!(d.dist.nats_url, "nats://q:4222");
        assert_eq!(d.device_kind.as_deref(), Some("cuda-h200"));
    }
}
