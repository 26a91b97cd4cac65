//! Errors of `kf-manifest`. Every variant names the file, and expression errors name the field
//! and the expression.

use std::path::PathBuf;

/// Why a manifest could not be loaded or evaluated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest is not valid TOML or has fields of the wrong shape.
    #[error("{file}: invalid manifest: {message}")]
    Toml {
        /// The manifest.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A field has a value the manifest format does not allow.
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// The manifest.
        file: String,
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// An expression does not parse.
    #[error("{file}: {field}: cannot parse `{expr}`: {message}")]
    Expression {
        /// The manifest.
        file: String,
        /// The field.
        field: String,
        /// The expression.
        expr: String,
        /// The parser's message.
        message: String,
    },
    /// An expression refers to a symbol that is neither a parameter, a problem size nor a
    /// device fact.
    #[error("{file}: {field}: `{expr}` uses unknown symbol `{symbol}`")]
    UnknownSymbol {
        /// The manifest.
        file: String,
        /// The field.
        field: String,
        /// The expression.
        expr: String,
        /// The unknown symbol.
        symbol: String,
    },
    /// An expression divides by zero.
    #[error("{file}: {field}: `{expr}` divides by zero")]
    DivisionByZero {
        /// The manifest.
        file: String,
        /// The field.
        field: String,
        /// The expression.
        expr: String,
    },
    /// An expression has the wrong type (a number where a condition is expected, …).
    #[error("{file}: {field}: `{expr}` must give {expected}, gave {found}")]
    WrongType {
        /// The manifest.
        file: String,
        /// The field.
        field: String,
        /// The expression.
        expr: String,
        /// What was expected.
        expected: &'static str,
        /// What it gave.
        found: String,
    },
    /// A launch size that is not a positive integer.
    #[error(
        "{file}: {field}: `{expr}` gives {value}, but a launch size must be a positive integer"
    )]
    NotPositive {
        /// The manifest.
        file: String,
        /// The field.
        field: String,
        /// The expression.
        expr: String,
        /// What it gave.
        value: i64,
    },
    /// Evaluation failed for another reason.
    #[error("{file}: {field}: cannot evaluate `{expr}`: {message}")]
    Evaluation {
        /// The manifest.
        file: String,
        /// The field.
        field: String,
        /// The expression.
        expr: String,
        /// The evaluator's message.
        message: String,
    },
    /// A configuration breaks a constraint.
    #[error("{file}: constraint `{rule}` does not hold for {params}")]
    ConstraintViolated {
        /// The manifest.
        file: String,
        /// The rule.
        rule: String,
        /// The configuration.
        params: String,
    },
}
