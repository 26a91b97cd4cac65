//! Command-line options shared by every search program (the examples, and embedders' own
//! tools): budget, seed, backend, output folder, verbosity, Ctrl-C handling and template seeds.

use std::path::PathBuf;
use std::time::Duration;

use kf_eval::task::Sizes;

use kf_search::{
    backends, defaults, BackendError, Search, SearchBuilder, SearchConfig, ShippedArchive,
    ShippedScheduler,
};

/// Options every search program shares; flatten them into a program's own `clap` parser.
///
/// ```
/// use clap::Parser;
/// use kf_cli::SearchArgs;
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
    /// Wall-clock limit of the whole run, seconds (default: the program's): the search stops
    /// asking for kernels a tenth of it before the end, to leave the re-timing of the best
    /// ones room, and an evaluation still running at the end is stopped.
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
    #[arg(long, default_value_t = defaults::FINAL_ROUNDS)]
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
    pub dist: crate::dist_args::DistArgs,
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
                Some(kf_search::Distributed {
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
        assert_eq!(kf_search::ArchiveFactory::name(&args.archive()), "grid");
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
        assert_eq!(d.fan_out, defaults::FAN_OUT_DISTRIBUTED);
        let narrow = config(&["--distributed", "--fan-out", "2"]);
        assert_eq!(narrow.distributed.expect("distributed").fan_out, 2);
        assert!(Args::try_parse_from(["prog", "--distributed", "--fan-out", "0"]).is_err());
        let by_nats = config(&["--nats", "nats://q:4222", "--device-kind", "cuda-h200"]);
        let d = by_nats.distributed.expect("distributed");
        assert_eq!(d.dist.nats_url, "nats://q:4222");
        assert_eq!(d.device_kind.as_deref(), Some("cuda-h200"));
    }
}
