//! KernelFoundry's command lines as `clap` types, for the `kf` binary, the examples and
//! programs' own parsers (`#[command(flatten)]`): the library crates (`kf-search` above all)
//! read no command lines and depend on no `clap`.
//!
//! | type | options | what it gives |
//! |---|---|---|
//! | [`SearchArgs`] | budget, seed, backend, device, output folder, archive, scheduler, … | a `SearchConfig` ([`SearchArgs::config`]) and a builder with the parts the names stand for ([`SearchArgs::builder`]) |
//! | [`LlmArgs`] (feature `llm`) | `--llm`, its endpoint, model and weight | `kf_search::llm::LlmOptions` |
//! | [`TuneArgs`], [`LiveTuneArgs`], [`ReplayCmdArgs`] | `kf tune` and `kf tune replay` | `kf_search::live_tune::LiveTuneOptions`, `kf_tune::cli::ReplayArgs` |
//! | [`ServerArgs`], [`SecurityArgs`], [`DistArgs`] (feature `dist`) | the servers, their security files, a distributed search's options | `kf_dist::DistConfig` |
//!
//! Names read from a command line become the library's parts here, at the edge: a backend's
//! name its factory (`kf_search::backends::factory_for`), `--archive` a
//! `kf_search::ShippedArchive`, `--scheduler` a `kf_search::ShippedScheduler`.
//!
//! ```
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Args {
//!     #[command(flatten)]
//!     search: kf_cli::SearchArgs,
//! }
//!
//! let args = Args::parse_from(["prog", "--evaluations", "10", "--archive", "cvt"]);
//! let config = args.search.config("softmax", Default::default(), std::time::Duration::from_secs(60));
//! assert_eq!(config.evaluations, 10);
//! assert!(args.search.archive().is_cvt());
//! ```

#[cfg(feature = "dist")]
mod dist_args;
#[cfg(feature = "llm")]
mod llm_args;
mod search_args;
mod tune_args;

#[cfg(feature = "dist")]
pub use dist_args::{DistArgs, SecurityArgs, ServerArgs, DEFAULT_DATABASE_URL, DEFAULT_NATS_URL};
#[cfg(feature = "llm")]
pub use llm_args::LlmArgs;
pub use search_args::SearchArgs;
pub use tune_args::{LiveTuneArgs, ReplayCmdArgs, TuneArgs, TuneCommand};
