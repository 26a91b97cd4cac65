//! Task files: a user's own operator as a TOML file with a reference (a Python/NumPy script,
//! a trusted kernel, or a Rust closure), evaluated with everything the built-in tasks get.
//!
//! * [`schema`]: the public serde types ([`TaskSpec`]); a Rust embedder can build the same
//!   thing in code and pass it to [`TaskFile::from_spec`].
//! * [`TaskFile`]: a loaded and validated task file (errors name the file and the field).
//! * [`FileTask`]: a task file at concrete sizes as the evaluator's
//!   [`crate::task::KernelTask`]: inputs drawn from the file's `init` distributions (one per
//!   input set in turn), [`KernelTask`](crate::task::KernelTask) alternative sizes from
//!   `[[alternative_sizes]]`, and the reference from Python ([`python`]), a Rust closure
//!   ([`ReferenceRegistry`]) or a trusted kernel. Every reference output is checked (present,
//!   declared dtype and shape, finite) before it is trusted; a failure is a
//!   [`TaskFileError::Reference`], never a kernel failure. Python outputs are cached on disk
//!   ([`reference_cache_dir`]) by task-file hash, sizes and input data.
//!
//! f16 buffers are compared in f64 after conversion with the reference rounded to f16 and the
//! element-wise tolerance floored at `atol = 2^-10`, `rtol = 2^-8`
//! ([`crate::verify::tolerance_for`]); i32 buffers are compared exactly.
//!
//! # Example
//!
//! ```
//! use kf_eval::task::file::{TaskBase, TaskFile};
//!
//! let text = r#"
//! name = "axpy"
//! args = ["N", "a", "x", "y"]
//! [sizes]
//! N = 1000
//! [[buffer]]
//! name = "x"
//! dtype = "f32"
//! shape = ["N"]
//! role = "input"
//! [[buffer]]
//! name = "y"
//! dtype = "f32"
//! shape = ["N"]
//! role = "inout"
//! [[scalar]]
//! name = "a"
//! dtype = "f32"
//! value = 2.0
//! [reference]
//! rust = "axpy"
//! "#;
//! let task = TaskFile::parse(text, "axpy.toml", TaskBase::Dir(".".into())).unwrap();
//! assert_eq!(task.buffer_elements(&task.spec.sizes).unwrap(), vec![1000, 1000]);
//!
//! let bad = text.replace(r#"shape = ["N"]
//! role = "input""#, r#"shape = ["M"]
//! role = "input""#);
//! let err = TaskFile::parse(&bad, "axpy.toml", TaskBase::Dir(".".into())).unwrap_err();
//! assert!(err.to_string().contains("buffer[0].shape[0]"), "{err}");
//! ```

pub(crate) mod error;
mod family;
mod file_task;
mod init;
mod load;
mod npy;
pub mod python;
mod reference;
pub mod schema;
mod structure;

pub use error::{InitError, ReferenceError, TaskFileError};
pub use file_task::{keeps_divisibility, FileTask, DEFAULT_REFERENCE_TIMEOUT_S};
pub use init::{Init, InitRule};
pub use load::{ArgKind, TaskBase, TaskFile, MAX_BUFFER_BYTES, MAX_ELEMENTS};
pub use reference::{
    reference_cache_dir, ArrayOut, ArrayRef, ReferenceInputs, ReferenceRegistry, RustReference,
};
pub use schema::{
    BaselineSpec, BufferDecl, BufferRole, Conv1dFamily, Dtype, ExprText, FamilySpec, MapFamily,
    MatmulFamily, OneOrMany, ReferenceSpec, RowFamily, ScalarDecl, ScalarValue, TaskSpec,
    ToleranceSpec, WorkSpec,
};
pub use structure::{Structure, StructureError};
