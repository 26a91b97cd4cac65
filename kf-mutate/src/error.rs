//! The error type of `kf-mutate`.

use kf_core::BoxError;
use kf_manifest::ManifestError;

/// What can go wrong while mutating. Most of these are problems with templates or strategies
/// given by the embedder; a parent that cannot be mutated yields no children, not an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MutateError {
    /// A manifest (of a template or a generated variant) did not parse or evaluate.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A preprocessor expression in a template did not parse or evaluate.
    #[error("preprocessor expression `{expr}`: {message}")]
    Preprocessor {
        /// The expression (or directive line).
        expr: String,
        /// What is wrong with it.
        message: String,
    },
    /// A template is inconsistent (a switch its manifest does not declare, a non-integer
    /// switch value, a variant whose constraints can never hold).
    #[error("template `{template}`: {message}")]
    Template {
        /// Template name.
        template: String,
        /// What is wrong.
        message: String,
    },
    /// A strategy is inconsistent with the template it was applied to.
    #[error("strategy `{strategy}`: {message}")]
    Strategy {
        /// Strategy name.
        strategy: String,
        /// What is wrong.
        message: String,
    },
    /// A generated manifest could not be written as TOML.
    #[error("writing a manifest: {0}")]
    Serialize(String),
    /// A mutator combined by [`crate::MixMutator`] failed.
    #[error("mutator `{mutator}`: {source}")]
    Inner {
        /// The failing mutator's name.
        mutator: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// A shipped template has no rendering in the kernel language asked for.
    #[error("the template `{template}` has no {language} rendering")]
    NoTemplate {
        /// Template name.
        template: String,
        /// The language asked for.
        language: kf_core::Language,
    },
    /// A configuration that cannot work (no mutators to mix, a non-positive weight, …).
    #[error("invalid configuration: {0}")]
    Config(String),
}
