//! # kf-export
//!
//! Turns the best kernels of KernelFoundry search runs into a small Rust crate a program calls
//! (`kf export --run DIR [--run DIR2 …] --rust OUT`).
//!
//! * [`TunedKernel::load`] reads a run directory: the best kernel's source, manifest and
//!   parameters (`report.json`, `best_kernel.*`), and the task, sizes, device and backend it
//!   was tuned for (`run/run.json`).
//! * [`export_rust`] writes the crate: the sources embedded (`include_str!` of `kernels/`), a
//!   typed function per task (`gemm(&device, m, n, k, &a, &b, &mut c)`, `gemm_with` for a
//!   given configuration, `gemm_choice` for the one a call would take), docs with a table of
//!   the configurations and which one serves which region, and a test against the task's
//!   reference at a small size.
//! * The generated crate is self-contained: it depends on no KernelFoundry crate, only on
//!   `opencl3`, `evalexpr`, `libc`, `serde`/`serde_json` (and `half` for f16 buffers), all on
//!   crates.io, so `cargo test` builds it anywhere. Its run time is [`standalone`]: Rust files this crate compiles
//!   and tests as its own modules ([`runtime`], [`standalone::check`]) and writes verbatim into
//!   the crate (`src/kf_runtime/`, one file per responsibility, and `src/kf_check.rs`). [`runtime::Table::choose`] evaluates
//!   every configuration's manifest constraints at the caller's sizes on the caller's device
//!   and applies the [`dispatch`] rule (the caller's device first, by name and driver; then the
//!   nearest tuned sizes by `Σ |ln(caller / tuned)|`; ties to the larger tuned sizes), and
//!   [`runtime::Table::launch`] builds the kernel with the options the search used (`-D
//!   NAME=value` per parameter plus the manifest's flags, resolved at export time), launches
//!   it with the launch geometry evaluated from the manifest at the caller's sizes, and reads
//!   the outputs back.
//!
//! What can be resolved at export time is: each configuration's parameters (defaults filled
//! in) and build options. What depends on the call is evaluated then, with the manifests' own
//! expression language (`evalexpr`, the engine of `kf-manifest`) and the variable names of
//! `kf_manifest::Symbols`: device facts, sizes, parameters. [`runtime::Device::open`] finds
//! the OpenCL runtime the way `kf-backend-opencl` does (`OPENCL_DYLIB_PATH`, `KF_OPENCL_ICD`,
//! `.runtime/opencl.json`, the per-user `opencl.json` of `kf setup`; `KF_OPENCL_DEVICE` picks
//! the device). OpenCL C kernels export; other runs are refused with
//! [`ExportError::Unsupported`], which says why.
//!
//! Runs of task files (`kf search --task-file`) export too: the search keeps a copy of its task
//! file in the output folder ([`TASK_COPY`]), from which the export reads the signature
//! ([`signature::Signature::from_task_file`]: sizes, then scalars as typed arguments, then
//! buffers, `f32`, `f16` and `i32`, inputs, outputs and in-place buffers) and draws the
//! reference cases the generated tests check against: inputs from the task's `init`
//! distributions at small sizes derived from the tuned ones, and what the task's reference
//! (Python or a built-in Rust one, run through the evaluator's own code path) computes for
//! them, stored as `reference/<task>/` beside the generated code ([`mod@reference`]) and compared
//! under the task's `[tolerance]` and accumulation rule ([`standalone::check`]).
//!
//! ```
//! use kf_export::dispatch::{choose, Caller, Candidate};
//!
//! // Two gemm runs on the same device, tuned at 64³ and 256³.
//! let (small, large) = ([("M", 64), ("N", 64), ("K", 64)], [("M", 256), ("N", 256), ("K", 256)]);
//! let table = [
//!     Candidate { device: "AMD EPYC", driver: None, sizes: &small, valid: true },
//!     Candidate { device: "AMD EPYC", driver: None, sizes: &large, valid: true },
//! ];
//! let at = |table: &[Candidate<'_>], n: i64| {
//!     let sizes = [("M", n), ("N", n), ("K", n)];
//!     choose(table, &Caller { device: "AMD EPYC", driver: "2024.18", sizes: &sizes })
//! };
//! assert_eq!(at(&table, 64), Some(0));
//! assert_eq!(at(&table, 200), Some(1));
//! // Where the nearer configuration's constraints fail, the other serves.
//! let mut table = table;
//! table[1].valid = false;
//! assert_eq!(at(&table, 200), Some(0));
//! ```

mod cases;
pub mod dispatch;
mod error;
mod generate;
mod group;
mod python;
pub mod reference;
mod run;
pub mod signature;
pub mod standalone;
mod test_code;

/// The run time every exported crate carries as `src/kf_runtime/` ([`standalone`]).
pub use standalone::runtime;
/// The path the standalone files name the runtime by (`crate::kf_runtime`), as in an exported
/// crate.
pub(crate) use standalone::runtime as kf_runtime;

use std::path::PathBuf;

pub use error::ExportError;
pub use python::{export_python, PythonExport};
pub use run::{TunedKernel, TASK_COPY};

/// What [`export_rust`] writes and where.
#[derive(Debug, Clone)]
pub struct RustExport {
    /// The run directories whose best kernels are exported, in table order (a folder of runs
    /// by size, `sizes.json`, stands for its runs: [`TunedKernel::load_all`]).
    pub runs: Vec<PathBuf>,
    /// The folder of the generated crate (created; files in it are overwritten).
    pub out: PathBuf,
    /// The generated crate's package name.
    pub crate_name: String,
}

impl RustExport {
    /// An export of `runs` into `out`, as the crate `kf-kernels`.
    pub fn new(runs: Vec<PathBuf>, out: impl Into<PathBuf>) -> Self {
        RustExport {
            runs,
            out: out.into(),
            crate_name: "kf-kernels".to_owned(),
        }
    }
}

/// What [`export_rust`] wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The configurations exported, one per run (and per size of a folder of runs by size).
    pub kernels: Vec<TunedKernel>,
    /// Every file written.
    pub files: Vec<PathBuf>,
}

/// Writes the crate of [`RustExport`]: reads every run, checks that each can be exported, and
/// writes `Cargo.toml`, `src/lib.rs`, the run time (`src/kf_runtime/`, `src/kf_check.rs`,
/// and `src/kf_f16.rs` for f16 buffers: [`standalone`]), `kernels/` and `tests/reference.rs`
/// under `out`.
///
/// # Errors
///
/// [`ExportError::NoRuns`], [`ExportError::BadCrateName`], the errors of [`TunedKernel::load`], [`ExportError::Unsupported`]
/// for a run of another backend, language or task, and [`ExportError::Io`] when writing fails.
pub fn export_rust(export: &RustExport) -> Result<Exported, ExportError> {
    if export.runs.is_empty() {
        return Err(ExportError::NoRuns);
    }
    let name = &export.crate_name;
    let valid_name = name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid_name {
        return Err(ExportError::BadCrateName { name: name.clone() });
    }
    let kernels = TunedKernel::load_runs(&export.runs)?;
    let files = generate::write_crate(export, &kernels)?;
    Ok(Exported { kernels, files })
}

pub(crate) use kf_runtime::sizes_text;

#[cfg(test)]
mod tests;
