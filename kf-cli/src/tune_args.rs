//! `kf tune`'s command line, for programs' own parsers: live tuning ([`LiveTuneArgs`], the
//! options of [`tune_live`](kf_search::live_tune::tune_live)) and `kf tune replay`
//! ([`ReplayCmdArgs`]).

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use kf_search::backends;
use kf_search::live_tune::{LiveTuneOptions, TuneStart};
use kf_tune::cli::ReplayArgs;
use std::path::PathBuf;

/// Arguments of `kf tune`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TuneArgs {
    #[command(subcommand)]
    command: Option<TuneCommand>,
    #[command(flatten)]
    live: Option<LiveTuneArgs>,
}

impl TuneArgs {
    /// The subcommand (`replay`), or the live run's flags; neither when none was given.
    pub fn into_parts(self) -> (Option<TuneCommand>, Option<LiveTuneArgs>) {
        (self.command, self.live)
    }
}

/// The subcommands of `kf tune`.
#[derive(Subcommand)]
pub enum TuneCommand {
    /// Replay a Kernel Tuner cache: the space is every configuration in the file, and
    /// evaluating one returns its recorded time.
    Replay(ReplayCmdArgs),
}

/// Arguments of `kf tune replay` (kf-tune's [`ReplayArgs`], which has no command line).
#[derive(Debug, Clone, Args)]
pub struct ReplayCmdArgs {
    /// Kernel Tuner cache file (JSON, plain or gzip-compressed).
    #[arg(long)]
    pub cache: std::path::PathBuf,
    /// Strategy name (default, exhaustive, random, simulated_annealing, genetic_algorithm,
    /// greedy_ils, bayes_opt, forest, bandit).
    #[arg(long, default_value = "default")]
    pub strategy: String,
    /// Budget: distinct configurations evaluated (default: 2% of the valid configurations).
    #[arg(long)]
    pub budget: Option<usize>,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object (otherwise a short text summary).
    #[arg(long)]
    pub json: bool,
    /// Also write every configuration of the run to this file in the FAIR T4 results format.
    #[arg(long)]
    pub t4: Option<std::path::PathBuf>,
}

impl From<ReplayCmdArgs> for ReplayArgs {
    fn from(a: ReplayCmdArgs) -> Self {
        ReplayArgs {
            cache: a.cache,
            strategy: a.strategy,
            budget: a.budget,
            seed: a.seed,
            json: a.json,
            t4: a.t4,
        }
    }
}

/// Live tuning of one kernel on the default device.
#[derive(Args)]
pub struct LiveTuneArgs {
    /// Built-in task: gemm or softmax.
    #[arg(long, conflicts_with = "task_file")]
    pub task: Option<String>,
    /// A task file (TOML): your own operator with a Python, kernel or Rust reference.
    #[arg(long, value_name = "T.toml")]
    pub task_file: Option<PathBuf>,
    /// Problem sizes, such as M=1024,N=1024,K=1024.
    #[arg(long, default_value = "")]
    pub size: String,
    /// The kernel's TOML manifest; its `[params]` and `[constraints]` define the space.
    #[arg(long)]
    pub kernel: PathBuf,
    /// Strategy (default, exhaustive, random, simulated_annealing, genetic_algorithm,
    /// greedy_ils, bayes_opt, forest, bandit).
    #[arg(long, default_value = "default")]
    pub strategy: String,
    /// Distinct configurations to evaluate (cache hits are free).
    #[arg(long, default_value_t = 30)]
    pub budget: usize,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Kernel Tuner cache file to append to and resume from (default: `runs/tune/<kernel>_<task>_<sizes>.json`).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Backend: opencl, sycl or cuda.
    #[arg(long, default_value = backends::DEFAULT_BACKEND, value_parser = backends::shipped_name)]
    pub backend: String,
    /// Device: a name substring, an index, cpu or gpu.
    #[arg(long)]
    pub device: Option<String>,
    /// Print one JSON object at the end.
    #[arg(long)]
    pub json: bool,
    /// Print where the time went: per phase of a configuration's evaluation (compile, input
    /// sets, verification, baseline, timing, transfers, process hop) and around the loop.
    /// `--json` always carries the same figures under `profile`.
    #[arg(long)]
    pub profile_time: bool,
    /// Time every configuration in full and the baseline in every evaluation, as a search
    /// does (default: stop timing configurations that are clearly slower than the best so
    /// far, and re-measure the baseline every 64th evaluation; the checks are the same).
    #[arg(long)]
    pub full_timing: bool,
    /// Configurations compiled at once, one worker process each, before they are timed one
    /// after another (the tuner asks for this many at a time). 1 compiles each configuration
    /// just before timing it. Compiling while another configuration is timed would slow its
    /// trials on the CPU device, whose cores are the host's; compiling a batch first spreads
    /// the single-threaded compiler over the cores and leaves every timed trial alone. A
    /// batch is chosen with the outcomes of earlier batches only: the same seed and width
    /// give the same run.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub compile_ahead: u16,
    /// What is evaluated before the strategy proposes anything. `defaults`: the manifest's
    /// default configuration (each parameter's first value; the best kernel a search writes
    /// lists the values it was measured with first), so the tuned best is never slower than
    /// the kernel you had and the summary says how much faster it is; it costs one
    /// configuration of the budget. `none`: the strategy chooses every configuration (what a
    /// comparison of strategies wants). Defaults that break a constraint at these sizes are
    /// skipped, with a note.
    #[arg(long, default_value = "defaults", value_parser = start_parser())]
    pub start: TuneStart,
}

/// `--start`: `defaults` or `none` ([`TuneStart::name`]).
fn start_parser() -> impl TypedValueParser<Value = TuneStart> {
    PossibleValuesParser::new([TuneStart::Defaults.name(), TuneStart::None.name()]).map(|name| {
        if name == TuneStart::None.name() {
            TuneStart::None
        } else {
            TuneStart::Defaults
        }
    })
}

impl LiveTuneArgs {
    /// The run these flags ask for.
    pub fn options(&self) -> LiveTuneOptions {
        LiveTuneOptions {
            task: self.task.clone(),
            task_file: self.task_file.clone(),
            size: self.size.clone(),
            kernel: self.kernel.clone(),
            strategy: self.strategy.clone(),
            budget: self.budget,
            seed: self.seed,
            cache: self.cache.clone(),
            backend: self.backend.clone(),
            device: self.device.clone(),
            full_timing: self.full_timing,
            compile_ahead: usize::from(self.compile_ahead),
            start: self.start,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        tune: TuneArgs,
    }

    #[test]
    fn replay_args_parse() {
        let cli = Cli::try_parse_from([
            "kf",
            "replay",
            "--cache",
            "x.json",
            "--strategy",
            "random",
            "--budget",
            "9",
            "--seed",
            "4",
            "--json",
        ])
        .expect("parses");
        let (Some(TuneCommand::Replay(replay)), _) = cli.tune.into_parts() else {
            panic!("not a replay");
        };
        let replay = ReplayArgs::from(replay);
        assert_eq!(replay.budget, Some(9));
        assert_eq!(replay.seed, 4);
        assert_eq!(replay.strategy, "random");
        assert!(replay.json);
    }

    #[test]
    fn live_args_are_the_options() {
        let cli = Cli::try_parse_from([
            "kf", "--task", "gemm", "--kernel", "k.toml", "--start", "none",
        ])
        .expect("parses");
        let options = cli.tune.into_parts().1.expect("live").options();
        let mut expected = LiveTuneOptions::new("k.toml");
        expected.task = Some("gemm".into());
        expected.start = TuneStart::None;
        assert_eq!(options, expected);
    }
}
