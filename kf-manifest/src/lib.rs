//! # kf-manifest
//!
//! A kernel is source text plus a small TOML manifest that says what can be tuned and how to
//! launch it (`source`, `entry`, `language`, `[params]`, `[constraints] rules`, `[launch]
//! global / local`, and optionally `[[flags]]`: compiler floating-point modes from a fixed list
//! per language, see [`allowed_flags`]). Constraints and launch sizes are expressions over parameters, problem sizes
//! and device facts, evaluated by the `evalexpr` crate. Every error is typed and names the file,
//! the field and the expression.

mod error;
mod expr;
mod flags;
mod manifest;
mod standalone;

pub use error::ManifestError;
pub use expr::{Expr, ExprSite, Symbols};
pub use flags::{allowed_flags, FlagRule};
pub use manifest::Manifest;
pub use standalone::standalone_manifest;
