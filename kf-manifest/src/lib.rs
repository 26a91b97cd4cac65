//! # kf-manifest
//!
//! A kernel is source text plus a small TOML manifest that says what can be tuned and how to
//! launch it (`source`, `entry`, `language`, `[params]`, `[constraints] rules`, `[launch]
//! global / local`, and optionally `[[flags]]`: compiler floating-point modes from a fixed list
//! per language, see [`allowed_flags`]). A candidate of several kernels lists them in order
//! under `[[kernels]]`, each with its launch and the buffers it writes, beside the
//! `[[scratch]]` buffers they share ([`sequence`]). Constraints and launch sizes are expressions over parameters, problem sizes
//! and device facts, evaluated by the `evalexpr` crate. Every error is typed and names the file,
//! the field and the expression.
//!
//! # Example
//!
//! A manifest read from text (a file is read with [`Manifest::load`], which also reads the
//! source it names): a kernel with one tunable parameter, launched over `N` work-items in groups
//! of `WG`.
//!
//! ```
//! use kf_manifest::Manifest;
//!
//! let manifest = Manifest::parse(
//!     r#"
//!     source = "scale.cl"
//!     entry = "scale"
//!     language = "opencl"
//!     [params]
//!     WG = [64, 128, 256]
//!     [constraints]
//!     rules = ["WG <= max_work_group_size"]
//!     [launch]
//!     global = ["N"]
//!     local = ["WG"]
//!     "#,
//!     "scale.toml",
//!     None,
//! )?;
//! assert_eq!(manifest.entry, "scale");
//! assert_eq!(manifest.params["WG"].len(), 3);
//! # Ok::<(), kf_manifest::ManifestError>(())
//! ```
//!
//! The main types: [`Manifest`] (the parsed file), [`ManifestError`] (what is wrong, and where),
//! the expressions of constraints and launch sizes, and [`allowed_flags`]. The guide's chapter
//! "Your own operator" (`docs/guide/02-your-own-operator.md` in the repository) shows manifests
//! in use.

mod error;
mod expr;
mod flags;
mod manifest;
mod raw;
pub mod sequence;
mod standalone;

pub use error::ManifestError;
pub use expr::{Expr, ExprSite, Symbols};
pub use flags::{allowed_flags, FlagRule};
pub use manifest::Manifest;
pub use sequence::{ScratchBuffer, ScratchElement, SequenceKernel};
pub use standalone::standalone_manifest;
