//! The whole search, as the examples and `kf search` run it: seeds → MAP-Elites over the
//! default 64-cell kernel space → each child tuned with a small kf-tune budget → judged by the
//! cheat-proof evaluator in worker processes → a report with a table, `report.json` and
//! pictures.
//!
//! [`Search::builder`] opens every part of that pipeline: the task, the behaviour
//! [`classifier`](SearchBuilder::classifier), the archive's
//! [settings](SearchBuilder::archive), the [mutator](SearchBuilder::mutator) and
//! [seeds](SearchBuilder::seeds), [layers](SearchBuilder::evaluator_layer) around the
//! evaluator, the budget and the tuning. What is not set is the shipped search ([`defaults`]
//! holds its numbers, the one place they are set). A run directory under the output folder
//! records every step, so an interrupted run resumes where it stopped when started again with
//! the same arguments. A search stops early when the `StopHandle` given to
//! [`SearchBuilder::stop_on`] is triggered: `kf` and the examples trigger it on Ctrl-C (the
//! library installs no signal handler and no logging subscriber; `kf_search::logging`, feature
//! `logging`, is the programs' set-up).
//!
//! # Your own behaviour descriptor
//!
//! A classifier that puts kernels in cells by two facts of their source, searched with
//! everything else as shipped (a tiny softmax, 6 evaluations, on the OpenCL backend):
//!
//! ```
//! use kf_core::{BehaviorClassifier, Candidate, Descriptor, DescriptorSpace, Dimension, Evaluation};
//!
//!
//! struct LoopsAndBarriers(DescriptorSpace);
//!
//! impl BehaviorClassifier for LoopsAndBarriers {
//!     type Error = std::convert::Infallible;
//!     fn space(&self) -> &DescriptorSpace {
//!         &self.0
//!     }
//!     fn classify(&self, c: &Candidate, _: &Evaluation) -> Result<Descriptor, Self::Error> {
//!         let text = &c.source.text;
//!         let loops = text.matches("for (").count().min(3);
//!         let barriers = usize::from(text.contains("barrier("));
//!         Ok(Descriptor::new(vec![loops, barriers], "loops-and-barriers"))
//!     }
//! }
//!
//! kf_search::init(); // evaluation workers re-execute this program: first call
//! # if !kf_search::doctest_backend_available() { return Ok(()); }
//! let space = DescriptorSpace::new(vec![Dimension::numbered("loops", 4), Dimension::numbered("barriers", 2)])?;
//! let out = tempfile::tempdir()?;
//! let outcome = kf_search::Search::builder()
//!     .task("softmax")
//!     .size("ROWS=64,COLS=256")?
//!     .classifier(LoopsAndBarriers(space))
//!     .evaluations(6)
//!     .tune_budget(1)
//!     .out(out.path())
//!     .progress(false)
//!     .build()?
//!     .run()?;
//! assert!(outcome.summary.evaluations >= 1);
//! println!("{}", outcome.summary_text());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod archive;
pub mod backends;
mod builder;
mod config;
mod device_evaluations;
pub mod devices;
#[cfg(feature = "dist")]
pub mod distributed;
mod error;
mod evaluator;
pub mod kernel_eval;
mod layer;
pub mod live_tune;
#[cfg(feature = "llm")]
pub mod llm;
#[cfg(feature = "logging")]
pub mod logging;
pub mod novelty;
mod outcome;
mod proposer;
mod run;
mod seeds;
pub mod task;
#[cfg(test)]
mod test_evaluator;
mod tuning_evaluator;
pub mod verify;

// The presentation lives in kf-report (issue 46); these paths stay for code written against
// them.
pub use kf_report::{explorer, final_selection, reference, report};
/// Post-run hooks ([`SearchBuilder::post_run`]): kf-report's.
pub use kf_report::{FinishedRun, PostRun, Retime};

pub use archive::{
    cvt_features, ArchiveFactory, ArchiveInput, SearchArchive, ShippedArchive, UnknownArchive,
    WithFacts,
};
pub use backends::{init, init_with, BackendError};
pub use builder::{PartNames, Search, SearchBuilder};
pub use device_evaluations::{DeviceEvaluationCounter, DeviceEvaluations};
pub use evaluator::{
    EvaluatorFactory, EvaluatorInput, RemoteError, RemoteEvaluator, SearchEvalError,
    SearchEvaluator, ShippedEvaluator, WorkersAfterRun,
};
pub use layer::{EvaluatorLayer, Named, NoLayer, Stack};
pub use novelty::SourceNovelty;
pub use proposer::{ShippedScheduler, UnknownScheduler};
pub use run::{SearchRun, SearchStepper};
pub use seeds::{
    family_templates, offline_search, offline_search_with, template_seeds, OfflineMutators,
};
pub use tuning_evaluator::{TunedEvaluator, CLOSE_CALL_MARGIN};

pub use builder::cell_predictor;
#[cfg(feature = "dist")]
pub use config::Distributed;
pub use config::{search_eval_config, SearchConfig, BASELINE_NOTE};
pub use error::SearchError;
#[cfg(feature = "dist")]
pub use evaluator::default_run_id;
pub use outcome::SearchOutcome;
pub use run::run_search;
pub use seeds::seeds_for;

pub mod defaults;

/// The classifier of the shipped search ([`defaults::classifier`]).
pub type DefaultClassifier = kf_classify::CompilerFactsClassifier<kf_classify::StaticClassifier>;

/// For this crate's doc example: whether the OpenCL runtime opens here. When it does not, it
/// prints why and the example skips, as `kf_backend_opencl::testing` does in tests (and, as
/// there, `KF_REQUIRE_OPENCL=1` makes a missing runtime a failure instead).
#[doc(hidden)]
#[track_caller]
pub fn doctest_backend_available() -> bool {
    #[cfg(feature = "opencl")]
    {
        kf_backend_opencl::testing::backend_or_skip().is_some()
    }
    #[cfg(not(feature = "opencl"))]
    {
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::OpenCl,
            "this build has no OpenCL backend (feature `opencl`)",
        );
        false
    }
}
