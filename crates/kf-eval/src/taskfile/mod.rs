//! Task files: a user's own operator as a TOML file with a reference (a Python/NumPy script,
//! a trusted kernel, or a Rust closure), evaluated with everything the built-in tasks get.
//!
//! * [`schema`]: the public serde types ([`TaskSpec`]); a Rust embedder can build the same
//!   thing in code and pass it to [`TaskFile::from_spec`].
//! * [`TaskFile`]: a loaded and validated task file (errors name the file and the field).
//!
//! # Example
//!
//! ```
//! use kf_eval::taskfile::{TaskBase, TaskFile};
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

mod error;
mod init;
mod load;
pub mod schema;

pub use error::TaskFileError;
pub use init::Init;
pub use load::{ArgKind, TaskBase, TaskFile, MAX_BUFFER_BYTES, MAX_ELEMENTS};
pub use schema::{
    BaselineSpec, BufferDecl, BufferRole, Dtype, ExprText, OneOrMany, ReferenceSpec, ScalarDecl,
    ScalarValue, TaskSpec, ToleranceSpec, WorkSpec,
};
