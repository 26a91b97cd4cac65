//! The error type of `kf-classify`.

use kf_core::{BoxError, CoreError, Language};

/// Why a kernel could not be classified, or a rule could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClassifyError {
    /// A pattern's regular expression does not compile.
    #[error("pattern `{name}` does not compile: {source}")]
    Pattern {
        /// The pattern's name.
        name: String,
        /// What the regex compiler said.
        #[source]
        source: regex::Error,
    },
    /// The classifier's rule table could not be built (a default pattern failed to compile;
    /// the default patterns are tested, so this indicates a broken build of this crate).
    #[error("the classifier's rules are unusable: {0}")]
    Rules(String),
    /// A rule edit named a dimension the rule set does not have.
    #[error("the rule set has no dimension `{0}`")]
    UnknownDimension(String),
    /// A rule edit named a level beyond a dimension's levels.
    #[error("level {level} is beyond the {levels} levels of `{dimension}`")]
    UnknownLevel {
        /// The dimension.
        dimension: String,
        /// The requested level.
        level: usize,
        /// How many levels it has.
        levels: usize,
    },
    /// The rule set does not fit the classifier's descriptor space.
    #[error("the rule set does not match the descriptor space: {0}")]
    SpaceMismatch(String),
    /// The kernel's language has no patterns.
    #[error("the static classifier has no patterns for {0} kernels")]
    UnsupportedLanguage(Language),
    /// A wrapped classifier failed.
    #[error("the wrapped classifier failed: {0}")]
    Inner(#[source] BoxError),
    /// A classifier produced coordinates outside its space.
    #[error(transparent)]
    OutOfSpace(#[from] CoreError),
}
