//! How a reply with no usable kernel still becomes a child: a kernel source whose text is one
//! marker line with the reason. `kf-eval`'s evaluator recognises the marker and returns
//! [`kf_core::Status::ExtractionError`] with the reason as its diagnostics, so the failure
//! ranks at the bottom of the ladder, is recorded like any other child, and the next prompt
//! that sees this child shows the model why.
//!
//! Evaluators not built on `kf-eval` can check [`extraction_failure`] themselves.

use kf_core::{KernelSource, Language};

/// First characters of a kernel text that stands for an extraction failure. The same constant
/// is `kf_eval::EXTRACTION_ERROR_MARKER` (a test checks they agree).
pub const EXTRACTION_ERROR_MARKER: &str = "//! kf:extraction-error: ";

/// A kernel source standing for an extraction failure with `reason`.
pub fn extraction_failure_source(
    language: Language,
    entry: impl Into<String>,
    reason: &str,
) -> KernelSource {
    let one_line = reason.replace(['\n', '\r'], " ");
    KernelSource::new(
        language,
        entry,
        format!("{EXTRACTION_ERROR_MARKER}{one_line}\n"),
    )
}

/// The reason, when `source` stands for an extraction failure.
///
/// ```
/// use kf_core::Language;
/// use kf_prompt::{extraction_failure, extraction_failure_source};
///
/// let s = extraction_failure_source(Language::OpenCl, "gemm", "no code block\nin the reply");
/// assert_eq!(extraction_failure(&s), Some("no code block in the reply"));
/// ```
pub fn extraction_failure(source: &KernelSource) -> Option<&str> {
    source
        .text
        .strip_prefix(EXTRACTION_ERROR_MARKER)
        .map(|r| r.trim_end())
}
