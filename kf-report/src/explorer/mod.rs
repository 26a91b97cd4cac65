//! The run explorer: one self-contained `report.html` per run (`kf report`), and the same page
//! served live while a search writes to its run directory (`kf serve`).
//!
//! The page shows the archive heatmap (each 2-D projection of the grid) where clicking a cell
//! opens its elite (source with highlighting, parameters, status, timing and its spread,
//! GFLOP/s, compiler facts, descriptor and the classifier's evidence), the lineage of any
//! candidate back to its seed, a diff against its parent, LLM exchanges and failure
//! diagnostics, progress curves and a sortable, filterable table of every candidate.
//!
//! Everything is read from the run directory without taking its lock
//! ([`kf_archive::read_run`]), so the explorer works while a search holds it; it never writes
//! into the run directory (`kf report` writes `report.html` next to it, in the folder named).
//!
//! ```no_run
//! let path = kf_report::explorer::write_report("runs/gemm")?;
//! println!("open {}", path.display());
//! # Ok::<(), kf_report::explorer::ExplorerError>(())
//! ```

mod data;
mod error;
mod page;

use std::path::{Path, PathBuf};

pub use data::{
    source_index, CandidateRow, CurvePoint, ExportNote, RunData, RunFiles, SourceIndex, StepError,
    DEFAULT_INLINE_LIMIT,
};
pub use error::ExplorerError;
pub use page::render_page;

/// The page's file name.
pub const REPORT_HTML: &str = "report.html";

/// Writes `report.html` for the run in `path` (a run directory, or the output folder of
/// `kf search` holding one in `run/`) into `path`, and returns the file's path.
pub fn write_report(path: impl AsRef<Path>) -> Result<PathBuf, ExplorerError> {
    write_report_with(path, None, DEFAULT_INLINE_LIMIT)
}

/// [`write_report`] with the archive's dimensions when the caller knows them and a limit on
/// inlined source bytes.
pub fn write_report_with(
    path: impl AsRef<Path>,
    dimensions: Option<Vec<kf_core::Dimension>>,
    inline_limit: usize,
) -> Result<PathBuf, ExplorerError> {
    let files = RunFiles::locate(path)?;
    let (data, _) = RunData::read(&files, dimensions, inline_limit)?;
    let html = render_page(&data);
    let out = files.out.join(REPORT_HTML);
    crate::report::write_atomic(&out, html.as_bytes())?;
    Ok(out)
}
