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
//! | [`eval`] (`kf-eval`) | the cheat-proof evaluator, built-in tasks, isolated workers |
//! | [`opencl`] (`kf-backend-opencl`) | the OpenCL backend |
//! | [`cuda`] (`kf-backend-cuda`) | the CUDA backend |
//! | [`sycl`] (`kf-backend-sycl`) | the SYCL backend (kernels compiled at run time by the SYCL runtime) |
//! | [`tune`] (`kf-tune`) | parameter spaces, tuning strategies, result caches, replay |
//! | [`classify`] (`kf-classify`) | static behaviour classifiers for OpenCL C, SYCL and CUDA |
//! | [`mutate`] (`kf-mutate`) | offline mutators and kernel templates |
//! | [`search`] | the whole search as the examples run it |
//! | [`report`] | progress bar, logging, and the end-of-run report: per-cell table, best kernel files, `report.json`, heatmap and curve PNGs |
//!
//! [`backends`] opens a backend by name, and [`init`] must be the first call in the `main` of
//! any program that evaluates kernels in worker processes.

pub mod backends;
pub mod distributed;
pub mod explorer;
pub mod report;
pub mod search;

/// Quality-diversity archives: the grid archive, parent selection, QD metrics, run directories.
pub use kf_archive as archive;
/// The CUDA backend (NVRTC and the CUDA driver, loaded at run time).
pub use kf_backend_cuda as cuda;
/// The OpenCL backend.
pub use kf_backend_opencl as opencl;
/// The SYCL backend.
pub use kf_backend_sycl as sycl;
/// Static behaviour classifiers.
pub use kf_classify as classify;
/// Vocabulary, traits and the search engine.
pub use kf_core as core;
/// Distributed evaluation: jobs on NATS JetStream, results in PostgreSQL.
pub use kf_dist as dist;
/// The kernel evaluator.
pub use kf_eval as eval;
/// Kernel manifests.
pub use kf_manifest as manifest;
/// Offline mutators: parameter moves and structural transformations of kernel templates.
pub use kf_mutate as mutate;
/// Parameter spaces, tuning strategies, result caches and replay.
pub use kf_tune as tune;

// Kept for code written against the crate name.
#[doc(hidden)]
pub use kf_archive;

pub use backends::init;
