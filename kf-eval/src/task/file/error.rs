//! Errors of task files: every variant names the file, and validation errors the field.

use super::structure::StructureError;
use std::path::PathBuf;

/// Why a task file cannot be used, or why its reference failed. A reference failure is a
/// fault of the task, never of the kernel under evaluation: the evaluation stops with it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskFileError {
    /// The reference would have run without complete confinement ([`crate::confine`]).
    #[error(transparent)]
    Unconfined(#[from] crate::confine::IncompleteConfinement),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, or fields of the wrong shape (unknown dtype, misspelt key).
    #[error("{file}: invalid task file: {message}")]
    Toml {
        /// The task file.
        file: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field has a value the schema does not allow.
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// The task file.
        file: String,
        /// The field, such as `buffer[2].shape[0]`.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The `[family]` table names a buffer the task does not declare, or one whose role or
    /// dtype the family cannot use.
    #[error("{file}: {field}: buffer `{buffer}` {problem}")]
    FamilyBuffer {
        /// The task file.
        file: String,
        /// The family's field, such as `family.c`.
        field: String,
        /// The buffer named.
        buffer: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A buffer's `structure` is unknown, on an output, or on a shape that is not a square
    /// matrix (or a batch of them) at the sizes.
    #[error("{file}: {field}: {source}")]
    Structure {
        /// The task file.
        file: String,
        /// The field, such as `buffer[0].structure (buffer `A`)`.
        field: String,
        /// What is wrong.
        #[source]
        source: StructureError,
    },
    /// An expression (shape, work) does not parse or evaluate; the message names the file,
    /// the field and the expression.
    #[error(transparent)]
    Expression(#[from] kf_manifest::ManifestError),
    /// The reference failed: it raised, timed out, returned a wrong shape, dtype, a missing
    /// output or a non-finite value. This is a task error, not a kernel failure.
    #[error("{file}: reference `{reference}` failed: {message}")]
    Reference {
        /// The task file.
        file: String,
        /// The reference (script, kernel or closure name).
        reference: String,
        /// What happened.
        message: String,
    },
    /// The reference could not be traced into an operator graph.
    #[error("{file}: tracing the reference: {source}")]
    Trace {
        /// The task file.
        file: String,
        /// Why there is no graph (the construct the tracer does not know, named).
        source: kf_graph::GraphError,
    },
    /// No usable Python (or no NumPy in it) for a Python reference.
    #[error("python reference: {0}")]
    Python(String),
}

impl TaskFileError {
    /// An `Invalid` error.
    pub(crate) fn invalid(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        TaskFileError::Invalid {
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Why a buffer's `init` is not a distribution ([`Init::parse`](super::Init::parse)); every
/// message starts with the text as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// An argument list without its closing parenthesis.
    #[error("`{text}`: missing `)`")]
    MissingParenthesis {
        /// The text.
        text: String,
    },
    /// The wrong number of arguments.
    #[error("`{text}`: `{name}` takes {count} numbers")]
    Arguments {
        /// The text.
        text: String,
        /// The distribution.
        name: String,
        /// How many numbers it takes.
        count: usize,
    },
    /// An argument that is not a finite number.
    #[error("`{text}`: `{argument}` is not a finite number")]
    NotFinite {
        /// The text.
        text: String,
        /// The argument.
        argument: String,
    },
    /// `normal(mean, std)` with `std <= 0`.
    #[error("`{text}`: the standard deviation must be positive")]
    NonPositiveStd {
        /// The text.
        text: String,
    },
    /// `uniform(lo, hi)` with `lo >= hi`.
    #[error("`{text}`: needs lo < hi")]
    EmptyRange {
        /// The text.
        text: String,
    },
    /// `int(lo, hi)` with bounds that are not 32-bit integers.
    #[error("`{text}`: bounds must be 32-bit integers")]
    NotI32Bounds {
        /// The text.
        text: String,
    },
    /// `int(lo, hi)` with `lo > hi`.
    #[error("`{text}`: needs lo <= hi")]
    ReversedBounds {
        /// The text.
        text: String,
    },
    /// Not a distribution this crate knows.
    #[error(
        "`{text}` is not a distribution (use normal, normal(mean, std), uniform(lo, hi), \
         int(lo, hi), zeros, ones or arange)"
    )]
    Unknown {
        /// The text.
        text: String,
    },
    /// A floating-point distribution for an i32 buffer.
    #[error("`{text}`: an i32 buffer takes int(lo, hi), zeros, ones or arange")]
    FloatForI32 {
        /// The text.
        text: String,
    },
}

/// Why a reference failed: an input it needs is missing or misshapen, its outputs fail the
/// checks every reference output passes (present, declared dtype and shape, finite), or the
/// reference itself failed ([`ReferenceError::Failed`], what a Rust reference returns for its
/// own reasons). The message is that of a [`TaskFileError::Reference`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReferenceError {
    /// No input (or inout) buffer of that name.
    #[error("no input buffer `{name}`")]
    NoInput {
        /// The buffer asked for.
        name: String,
    },
    /// No problem size of that name.
    #[error("no size `{name}`")]
    NoSize {
        /// The size asked for.
        name: String,
    },
    /// An input buffer of the wrong dimensionality for the reference.
    #[error("buffer `{name}` is not a matrix: {source}")]
    NotAMatrix {
        /// The buffer.
        name: String,
        /// ndarray's error.
        #[source]
        source: ndarray::ShapeError,
    },
    /// A declared output the reference did not return.
    #[error("returned no output `{name}` (expected {} of shape {shape:?})", dtype.numpy())]
    MissingOutput {
        /// The output.
        name: String,
        /// Its declared dtype.
        dtype: super::schema::Dtype,
        /// Its declared shape.
        shape: Vec<usize>,
    },
    /// An output of another dtype than the task file declares.
    #[error(
        "output `{name}` is {}, the task file declares {declared} ({}): convert it, e.g. \
         .astype(numpy.{})",
        got.numpy(), declared.numpy(), declared.numpy()
    )]
    WrongDtype {
        /// The output.
        name: String,
        /// The dtype returned.
        got: super::schema::Dtype,
        /// The dtype declared.
        declared: super::schema::Dtype,
    },
    /// An output of another shape than the task file declares.
    #[error("output `{name}` has shape {got:?}, the task file declares {declared:?}")]
    WrongShape {
        /// The output.
        name: String,
        /// The shape returned.
        got: Vec<usize>,
        /// The shape declared.
        declared: Vec<usize>,
    },
    /// An output holding NaN or Inf.
    #[error(
        "output `{name}` holds NaN or Inf (first at flat index {index}); a reference must be finite"
    )]
    NonFinite {
        /// The output.
        name: String,
        /// The flat index of the first non-finite element.
        index: usize,
    },
    /// The reference's own failure, as it reported it.
    #[error(transparent)]
    Failed(kf_core::BoxError),
}

impl ReferenceError {
    /// The reference's own failure, from any error (or message).
    pub fn failed(error: impl Into<kf_core::BoxError>) -> Self {
        ReferenceError::Failed(error.into())
    }
}

/// A message of the reference's own: [`ReferenceError::Failed`].
impl From<String> for ReferenceError {
    fn from(message: String) -> Self {
        ReferenceError::failed(message)
    }
}

/// A message of the reference's own: [`ReferenceError::Failed`].
impl From<&str> for ReferenceError {
    fn from(message: &str) -> Self {
        ReferenceError::failed(message)
    }
}
