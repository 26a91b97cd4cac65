//! What a person sees of a run: a progress bar and logs while it goes, and at the end a table of
//! the best kernel per cell, the best kernel's files, `report.json` and two pictures.
//!
//! While the engine runs:
//!
//! * [`ProgressObserver`]: an `indicatif` bar on stderr with evaluations / budget, best GFLOP/s,
//!   cells filled and ETA (feature `progress`). When stderr is not a terminal (CI logs, pipes),
//!   or without the feature, it draws nothing and logs a short `tracing` info line every few
//!   evaluations instead. It also records a [`ProgressTrace`] (best GFLOP/s and QD-score after
//!   every evaluation) for the curve picture.
//! * [`LogObserver`]: one `tracing` debug line per evaluation (status, cell, outcome) and an
//!   info line per new best.
//! * [`BarAwareStderr`]: the writer for a program's `tracing` subscriber, whose lines do not
//!   tear the progress bar; `kf_search::logging::init` (kf-search's feature `logging`) installs
//!   the shipped subscriber with it, filtered by a `-v` count ([`verbosity_filter`]) or `RUST_LOG`.
//!
//! At the end, [`Report`] (or the one-call [`write_report`]) writes into an output folder:
//!
//! | file | what |
//! |---|---|
//! | `report.json` | headline figures, the best kernel's files and parameters, the per-cell table ([`ReportJson`]); written first |
//! | `best_kernel.cl` / `.cpp` / `.cu` | the best correct kernel's source (extension by language) |
//! | `best_kernel.toml` | its manifest, headed by a comment with the parameter values it was measured with |
//! | `best_params.json` | those parameter values |
//! | `archive_heatmap.png` | the archive as 2-D projections of the grid, coloured by GFLOP/s (feature `report`) |
//! | `progress.png` | best GFLOP/s and QD-score against evaluations (feature `report`) |
//!
//! Every file is written atomically (a temporary file renamed into place). A picture that cannot
//! be drawn is a warning in [`ReportOutput::warnings`], never a lost run; without a usable font
//! the pictures are drawn without text.
//!
//! ```no_run
//! use kf_core::prelude::*;
//! use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive};
//! use kf_report::report::{LogObserver, ProgressObserver, Report};
//!
//! // A program sets up its own logging first (`kf_search::logging::init`, for one).
//! let classifier = SyntheticClassifier::new(4);
//! let space = classifier.space().clone();
//! let progress = ProgressObserver::new(&space);
//! let trace = progress.trace();
//! let result = Engine::new(SyntheticMutator::new(0.15), SyntheticEvaluator::new(), classifier, VecArchive::new(space.clone()))
//!     .seeds(vec![synthetic_seed(6)])
//!     .budget(Budget::evaluations(200))
//!     .add_observer(progress, ObserverMode::Always)
//!     .add_observer(LogObserver::new(&space), ObserverMode::Always)
//!     .run_blocking()
//!     .unwrap();
//! let out = Report::new(&space, &result.summary, result.archive.elites())
//!     .baseline_gflops(Some(4.0))
//!     .trace(trace.points())
//!     .write_and_print("runs/demo")
//!     .unwrap();
//! println!("wrote {}", out.report_json.display());
//! ```

mod build;
mod error;
mod files;
#[cfg(feature = "plot")]
mod plot;
mod progress;
mod table;

#[cfg(all(test, feature = "plot"))]
mod tests;

pub use build::{
    write_report, BestKernelJson, Report, ReportJson, ReportOutput, TERMINAL_COLUMNS, TERMINAL_ROWS,
};
pub use files::write_atomic;
#[cfg(feature = "plot")]
pub use plot::{fonts_available, heatmap_size, CURVE_SIZE, HEATMAP_SIZE};
pub use progress::{
    verbosity_filter, BarAwareStderr, LogObserver, ProgressObserver, ProgressTrace, TracePoint,
};
pub use table::{CellRow, KernelFigures};

pub use error::{names, ReportError};
#[cfg(feature = "plot")]
pub use error::{DrawError, PlotError};
