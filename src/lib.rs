//! # KernelFoundry-rs
//!
//! Hardware-aware evolutionary GPU-kernel optimisation: MAP-Elites quality-diversity search over
//! kernel behaviour, meta-prompt co-evolution, and template parameter tuning, over pluggable
//! compilers and runtimes. This facade re-exports the crates of the family:
//!
//! | crate | what it owns |
//! |---|---|
//! | [`core`] (`kf-core`) | vocabulary, the traits (`Mutator`, `Evaluator`, `BehaviorClassifier`, `ParamSpace`, `Backend`, `Archive`), observers, checkpoints, the engine |
//! | [`archive`] (`kf-archive`) | the grid archive, parent selection, QD metrics, crash-safe run directories |
//! | [`manifest`] (`kf-manifest`) | kernel manifests: parameters, constraints, launch geometry |
//! | [`graph`] (`kf-graph`) | operator graphs: a NumPy reference traced, and the kernel family it is recognised as |
//! | [`eval`] (`kf-eval`) | the cheat-proof evaluator, built-in tasks, isolated workers |
//! | `opencl` (`kf-backend-opencl`, feature `opencl`) | the OpenCL backend |
//! | `cuda` (`kf-backend-cuda`, feature `cuda`) | the CUDA backend |
//! | `sycl` (`kf-backend-sycl`, feature `sycl`) | the SYCL backend (kernels compiled at run time by the SYCL runtime) |
//! | [`tune`] (`kf-tune`) | parameter spaces, tuning strategies, result caches, replay |
//! | [`classify`] (`kf-classify`) | static behaviour classifiers for OpenCL C, SYCL and CUDA |
//! | [`mutate`] (`kf-mutate`) | offline mutators and kernel templates |
//! | `prompt` (`kf-prompt`, feature `llm`) | LLM mutators: clients, meta-prompts and their co-evolution |
//! | `dist` (`kf-dist`, feature `dist`) | distributed evaluation: jobs on NATS JetStream, results in PostgreSQL, the worker loop |
//! | `distributed` (`kf-search`, feature `dist`) | a distributed search's evaluator and device names, as `kf search --distributed` uses them |
//! | [`search`] (`kf-search`) | the whole search as the examples run it, open through [`search::Search::builder`] |
//! | [`backends`] (`kf-search`) | the shipped backend factories and their registry by name ([`backends::shipped`]), device facts, and [`init`] |
//! | [`report`] (`kf-report`) | progress bar, logging, and the end-of-run report: per-cell table, best kernel files, `report.json`, heatmap and curve PNGs (feature `report`) |
//! | [`explorer`] (`kf-report`) | the run explorer page; served live with feature `report` |
//! | [`post_run`] (`kf-report`) | post-run hooks: the final selection, the reference comparison, the report files and the explorer page as the shipped search runs them, and one's own ([`search::SearchBuilder::post_run`]) |
//! | [`kernelbench`] (`kf-kernelbench`) | KernelBench problems as task files (levels 1 and 2), and the KernelBench benchmark |
//!
//! # Features
//!
//! | feature | what it adds |
//! |---|---|
//! | `opencl` | the OpenCL backend |
//! | `cuda` | the CUDA backend (cudarc) |
//! | `sycl` | the SYCL backend |
//! | `dist` | distributed evaluation (tokio, NATS, PostgreSQL) |
//! | `llm` | `kernelfoundry::prompt` (reqwest, tokio) |
//! | `report` | the report's pictures (plotters) and `explorer::serve` (axum, tokio) |
//! | `cli` | [`cli`] (kf-cli: `SearchArgs` and the other clap types) and the `kf` binary |
//!
//! All are on by default. `default-features = false, features = ["opencl"]` is the search on
//! the OpenCL backend with none of the heavy dependencies.
//!
//! [`init`] (or [`init_with`], with backend factories of one's own) must be the first call in
//! the `main` of any program that evaluates kernels in worker processes
//! ([`eval::IsolatedEvaluator`], which [`search`] uses): each worker is the program itself,
//! re-executed, and `init()` is where it turns into a worker. A program that forgets it
//! fails at its first evaluation with an error naming `init()`, having started one extra
//! process (see [`eval::WorkerCommand::current_exe`] for why workers re-execute the program).
//!
//! # Pointing at the OpenCL runtime
//!
//! The OpenCL backend loads the OpenCL library at run time. Inside a checkout of this
//! repository (or with a path dependency on it) it finds the runtime `scripts/setup.sh`
//! installed, `.runtime/opencl.json`, by walking up from the current directory, the executable
//! and the backend's source folder. A program that depends on the crates from crates.io has no
//! such folder: it sets `KF_OPENCL_ICD` to that `opencl.json` (or to a directory of `.icd`
//! files, an `.icd` file, or a driver library such as `libpocl.so.2`), or relies on a system
//! ICD loader (`/etc/OpenCL/vendors`). See `opencl`'s runtime notes.

pub mod explorer;

/// KernelBench problems as task files, and the KernelBench benchmark (`kf-kernelbench`).
pub use kf_kernelbench as kernelbench;

/// Command lines as clap types (`SearchArgs`, `TuneArgs`, `LlmArgs`, `ServerArgs`): kf-cli.
#[cfg(feature = "cli")]
pub use kf_cli as cli;
/// Post-run hooks: the shipped search's end, and one's own.
pub use kf_report::post_run;
/// Progress bar, logging and the end-of-run report.
pub use kf_report::report;
/// The shipped search as an open pipeline ([`search::Search::builder`]).
pub use kf_search as search;
/// The shipped backends as factories, their registry by name, device facts, and [`init`].
pub use kf_search::backends;
/// A distributed search's evaluator and device names.
#[cfg(feature = "dist")]
pub use kf_search::distributed;

/// Quality-diversity archives: the grid archive, parent selection, QD metrics, run directories.
pub use kf_archive as archive;
/// The CUDA backend (NVRTC and the CUDA driver, loaded at run time).
#[cfg(feature = "cuda")]
pub use kf_backend_cuda as cuda;
/// The OpenCL backend.
#[cfg(feature = "opencl")]
pub use kf_backend_opencl as opencl;
/// The SYCL backend.
#[cfg(feature = "sycl")]
pub use kf_backend_sycl as sycl;
/// Static behaviour classifiers.
pub use kf_classify as classify;
/// Vocabulary, traits and the search engine.
pub use kf_core as core;
/// Distributed evaluation: jobs on NATS JetStream, results in PostgreSQL.
#[cfg(feature = "dist")]
pub use kf_dist as dist;
/// The kernel evaluator.
pub use kf_eval as eval;
/// Operator graphs: a reference traced into operations, and the kernel family they are.
pub use kf_graph as graph;
/// Kernel manifests.
pub use kf_manifest as manifest;
/// Offline mutators: parameter moves and structural transformations of kernel templates.
pub use kf_mutate as mutate;
/// LLM mutators: model clients, meta-prompts and their co-evolution.
#[cfg(feature = "llm")]
pub use kf_prompt as prompt;
/// Parameter spaces, tuning strategies, result caches and replay.
pub use kf_tune as tune;

// Kept for code written against the crate name.
#[doc(hidden)]
pub use kf_archive;

pub use kf_search::{init, init_with};

/// The guide's chapter "Embedding in Rust", whose Rust examples CI compiles as doctests of this
/// crate: the example a reader copies is the one that builds.
#[cfg(all(doctest, feature = "opencl"))]
#[doc = include_str!("../docs/guide/07-embedding.md")]
pub struct GuideEmbeddingInRust;
