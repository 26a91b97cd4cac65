//! [`Error`], the crate's error: each module's own enum, and a hook's.

/// Why a post-run hook failed; each module's error is its own enum, kept as the source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The report files could not be written.
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// The run explorer page could not be read or written.
    #[error(transparent)]
    Explorer(#[from] crate::explorer::ExplorerError),
    /// The reference library could not be measured.
    #[error(transparent)]
    Reference(#[from] crate::reference::ReferenceError),
    /// An elite could not be re-timed.
    #[error(transparent)]
    Retime(#[from] crate::final_selection::RetimeError),
    /// A hook of one's own failed.
    #[error("post-run hook `{hook}`: {source}")]
    Hook {
        /// The hook's [`name`](crate::PostRun::name).
        hook: String,
        /// Its error.
        source: kf_core::BoxError,
    },
}
