//! [`ReportError`] and the file names a report writes.

use std::path::PathBuf;

/// File names written into the report folder.
pub mod names {
    /// The report's JSON document.
    pub const REPORT_JSON: &str = "report.json";
    /// The best kernel's manifest.
    pub const BEST_MANIFEST: &str = "best_kernel.toml";
    /// The best kernel's parameter values.
    pub const BEST_PARAMS: &str = "best_params.json";
    /// The archive heatmap.
    pub const HEATMAP: &str = "archive_heatmap.png";
    /// The progress curve.
    pub const CURVE: &str = "progress.png";
    /// Stem of the best kernel's source file (`best_kernel.cl`, `.cpp` or `.cu`).
    pub const BEST_KERNEL_STEM: &str = "best_kernel";
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The output folder could not be created.
    #[error("cannot create the report folder {path}: {source}")]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A file could not be written or renamed into place.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A document could not be serialised.
    #[error("cannot serialise {what}: {source}")]
    Json {
        /// Which document.
        what: &'static str,
        /// What serde_json said.
        source: serde_json::Error,
    },
    /// The best kernel's manifest could not be made to stand on its own (it is written as
    /// the kernel carried it).
    #[error("the best kernel's manifest was kept as it was: {source}")]
    Manifest {
        /// What the manifest reader said.
        source: kf_manifest::ManifestError,
    },
    /// A picture could not be drawn.
    #[cfg(feature = "plot")]
    #[error("cannot draw {path}: {source}")]
    Plot {
        /// The picture.
        path: PathBuf,
        /// What went wrong.
        source: PlotError,
    },
    /// A picture could not be encoded as PNG.
    #[cfg(feature = "plot")]
    #[error("cannot encode {path} as PNG: {source}")]
    Png {
        /// The picture.
        path: PathBuf,
        /// What the encoder said.
        source: png::EncodingError,
    },
}

/// What plotters says when a drawing operation on a picture's bitmap fails.
#[cfg(feature = "plot")]
pub type DrawError = plotters::drawing::DrawingAreaErrorKind<
    <plotters::backend::BitMapBackend<'static> as plotters::backend::DrawingBackend>::ErrorType,
>;

/// Why a picture could not be drawn (feature `report`).
#[cfg(feature = "plot")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// The drawing library refused an operation.
    #[error(transparent)]
    Draw(#[from] DrawError),
    /// The drawing library panicked.
    #[error("the plotting library panicked")]
    Panicked,
}
