//! How a reply with no usable kernel still becomes a child: [`kf_core::Offspring::extraction_failure`],
//! whose reason is a typed field of the child and whose kernel text is one marker line with
//! the reason. `kf-eval`'s evaluator recognises it and returns
//! [`kf_core::Status::ExtractionError`] with the reason as its diagnostics, so the failure
//! ranks at the bottom of the ladder, is recorded like any other child, and the next prompt
//! that sees this child shows the model why.
//!
//! The marker and its reading are `kf-core`'s ([`kf_core::EXTRACTION_FAILURE_MARKER`],
//! [`kf_core::extraction_failure_in`]); the items here are the names this crate has always
//! given them. Evaluators not built on `kf-eval` check
//! [`kf_core::Candidate::extraction_failure_reason`] themselves.

use kf_core::{KernelSource, Language, Offspring, Origin};

/// First characters of a kernel text that stands for an extraction failure: the same constant
/// as [`kf_core::EXTRACTION_FAILURE_MARKER`] and `kf_eval::EXTRACTION_ERROR_MARKER`.
pub const EXTRACTION_ERROR_MARKER: &str = kf_core::EXTRACTION_FAILURE_MARKER;

/// A kernel source standing for an extraction failure with `reason` (the source of
/// [`Offspring::extraction_failure`]).
pub fn extraction_failure_source(
    language: Language,
    entry: impl Into<String>,
    reason: &str,
) -> KernelSource {
    Offspring::extraction_failure(language, entry, reason, Origin::default()).source
}

/// The reason, when `source` stands for an extraction failure ([`kf_core::extraction_failure_in`]).
///
/// ```
/// use kf_core::Language;
/// use kf_prompt::{extraction_failure, extraction_failure_source};
///
/// let s = extraction_failure_source(Language::OpenCl, "gemm", "no code block\nin the reply");
/// assert_eq!(extraction_failure(&s), Some("no code block in the reply"));
/// ```
pub fn extraction_failure(source: &KernelSource) -> Option<&str> {
    kf_core::extraction_failure_in(source)
}
