//! The kernel-source toolkit: one implementation of what the classifier (`kf-classify`), the
//! mutators (`kf-mutate`) and the SYCL backend read in kernel text.
//!
//! * [`strip_comments`] / [`strip_comments_and_strings`]: one lexer for comments and string
//!   and character literals (line-preserving, robust to disabled text);
//! * [`expr`]: `#if` / `#elif` expressions in three-valued logic (a value, or unknown), with
//!   names valued by the caller's [`expr::Env`] (fixed values, parameters, lazy `#define`
//!   bodies);
//! * [`directive`] and [`logical_line`]: directive lines and backslash continuations, from
//!   which each caller builds its own `#if` walk (the classifier blanks inactive lines, the
//!   mutators resolve a template's switches);
//! * [`uses_identifier`], [`replace_identifiers`], [`is_identifier`]: identifier scanning;
//! * [`tokens`] and [`fold_whitespace`]: kernel text without its layout;
//! * [`host_access`]: the constructs through which kernel text would make a compiler read host
//!   files (`#include`, `#embed`, `__has_include`, …), refused before any compiler sees it.
//!
//! A tiny crate with no dependency on the rest of the family, so that `kf-classify`,
//! `kf-mutate` and the backends can all use it without a cycle.
//!
//! ```
//! use kf_source::{directive, expr, strip_comments};
//!
//! struct Params;
//! impl expr::Env for Params {
//!     fn value(&self, name: &str) -> Option<i64> {
//!         (name == "TS").then_some(16)
//!     }
//!     fn is_defined(&self, name: &str) -> Option<bool> {
//!         Some(name == "TS")
//!     }
//! }
//! let line = strip_comments("#if TS >= 16 // tiles");
//! let (name, condition) = directive(&line).unwrap();
//! assert_eq!((name, expr::eval(condition, &Params)), ("if", Ok(Some(1))));
//! ```

mod comments;
mod directive;
pub mod expr;
pub mod host_access;
mod ident;
mod tokens;

pub use comments::{strip_comments, strip_comments_and_strings};
pub use directive::{directive, logical_line};
pub use ident::{is_ident_char, is_identifier, replace_identifiers, uses_identifier};
pub use tokens::{fold_whitespace, tokens, Token, TokenKind};

/// OpenCL C's address-space, kernel and access qualifiers, with and without their
/// underscores: the words C's grammar and a C tokenizer read as plain identifiers (the
/// transformations blank them before parsing; the novelty signature keeps their spelling).
pub const OPENCL_QUALIFIERS: &[&str] = &[
    "__kernel",
    "kernel",
    "__global",
    "global",
    "__local",
    "local",
    "__constant",
    "constant",
    "__private",
    "private",
    "__read_only",
    "read_only",
    "__write_only",
    "write_only",
    "__read_write",
    "read_write",
];
