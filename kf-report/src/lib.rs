//! What a person sees of a KernelFoundry search, apart from the search itself.
//!
//! * [`report`]: while the engine runs, the progress bar and log lines (kf-core observers);
//!   at the end, the per-cell table, `report.json`, the best kernel's files and two pictures
//!   (feature `plot`).
//! * [`explorer`]: the run explorer, one self-contained `report.html` per run directory.
//! * [`reference`](mod@reference): the reference library (NumPy's OpenBLAS, …) measured beside the best
//!   kernel, for the report's `reference_ratio`.
//! * [`final_selection`]: the fastest elites re-timed in alternating rounds, so the best kernel
//!   named is not the winner of one lucky measurement.
//! * [`post_run`]: how these attach to a finished search. A search hands each [`PostRun`] hook
//!   the assembled run ([`FinishedRun`]: its facts, the archive's elites, the device, the run's
//!   own evaluator for re-timing, the report being assembled); the shipped hooks
//!   ([`post_run::shipped`]) are the final selection, the reference comparison, the report
//!   files and the explorer page, in that order.
//!
//! This crate knows nothing of how a search is assembled (it depends on kf-core, kf-archive,
//! kf-eval and kf-manifest only), so kf-search runs these hooks after its engine, and any other
//! search loop over kf-core can too.
//!
//! # A hook of one's own
//!
//! A hook that records the best kernel's id after the shipped report is written:
//!
//! ```
//! use kf_report::{FinishedRun, PostRun};
//!
//! #[derive(Default)]
//! struct RememberBest(Option<kf_core::CandidateId>);
//!
//! impl PostRun for RememberBest {
//!     fn name(&self) -> &str {
//!         "remember-best"
//!     }
//!     fn after_run(&mut self, run: &mut FinishedRun<'_>) -> Result<(), kf_report::Error> {
//!         self.0 = run.report.best().map(|e| e.candidate.id);
//!         Ok(())
//!     }
//! }
//!
//! let hook: Box<dyn PostRun> = Box::new(RememberBest::default());
//! assert_eq!(hook.name(), "remember-best");
//! ```
//!
//! (`kf_search::SearchBuilder::post_run` adds it to the shipped search.)

mod error;
pub mod explorer;
pub mod final_selection;
pub mod post_run;
pub mod reference;
pub mod report;

pub use error::Error;
pub use post_run::{FinishedRun, PostRun, Retime};
