//! # kf-eval
//!
//! The kernel evaluator: the part of KernelFoundry that must make reward hacking impossible.
//!
//! * [`task`]: what a kernel is checked against: the [`task::KernelTask`] trait, sizes, typed
//!   host buffers, and the built-in tasks (`gemm`, `softmax`), which are task files shipped in
//!   this crate (`tasks/*.toml`) with Rust closure references; [`task::file`] reads a user's
//!   own operator as a TOML task file with a Python, kernel or Rust reference.
//! * [`KernelEvaluator`]: the protocol over any [`kf_core::Backend`] — manifest and constraints,
//!   compile, at least three fresh input sets (one at another shape) with outputs poisoned with
//!   NaN before every launch, guard regions around every buffer, inputs checked unchanged,
//!   NaN/Inf never accepted, closeness by both KernelBench's and KernelFoundry's rules; then
//!   device-event timing after warm-up with rotated inputs, interleaved with the task baseline,
//!   every timed output re-checked, and a roofline bound on the result.
//! * [`IsolatedEvaluator`]: the same protocol in warm worker processes with a hard timeout (a
//!   hang becomes `timeout`, a crash `runtime_error`), with secrets kept out of their
//!   environment; [`worker`] is the worker side, [`confine`] what a worker may open (Linux
//!   Landlock) once its backend is open. Before any compiler sees a kernel,
//!   [`host_file_check`] refuses the constructs that would read host files (`#include` of
//!   anything but the runtime's headers, `#embed`, `__has_include`, …).
//! * [`characterise`]: the measured roofline of a device (peak GFLOP/s from an FMA kernel,
//!   GB/s from copy and triad), cached per device and driver.
//! * [`verify`]: the output checks on their own.
//! * [`kernels`]: the kernels this crate ships (baselines, a tiled GEMM) as manifest and source
//!   text.
//!
//! # Example
//!
//! A built-in task at a small size, as `kf eval --task gemm --size M=256,N=256,K=256` makes it;
//! [`KernelEvaluator`] and [`IsolatedEvaluator`] then judge kernels for it on a backend.
//!
//! ```
//! use kf_eval::task::{builtin_task, parse_sizes};
//!
//! let task = builtin_task("gemm", &parse_sizes("M=256,N=256,K=256")?)?;
//! assert_eq!(task.name(), "gemm");
//! # Ok::<(), kf_eval::EvalError>(())
//! ```
//!
//! The guide's chapter "How evaluation works, and why it cannot be fooled"
//! (`docs/guide/08-evaluation.md` in the repository) describes the protocol for users; task
//! files are in its chapter "Your own operator".

mod backend_factory;
pub mod characterise;
pub mod confine;
mod early_stop;
mod element;
mod error;
mod guarded;
mod isolate;
pub mod kernels;
mod profile;
mod protocol;
mod rotation;
mod sequence;
pub mod task;
pub mod verify;
pub mod worker;

pub use backend_factory::{
    BackendFactory, BackendFactoryError, BackendRegistry, DynBackendFactory,
};
pub use early_stop::{
    measures_baseline, EarlyStop, EARLY_STOP_ALPHA, EARLY_STOP_MIN_RATIO, EARLY_STOP_TRIALS,
};
pub use error::EvalError;
pub use isolate::{
    default_memory_growth, is_secret, scrubbed_env, IsolatedEvaluator, IsolatedEvaluatorBuilder,
    ResourceLimits, TimeoutPolicy, WorkerCommand, DEADLINE_CUT, DEADLINE_SPENT,
    DEFAULT_HANDSHAKE_LIMIT,
};
pub use profile::EvalProfile;
pub use protocol::{
    bounded, host_file_check, CompileCheck, EvalConfig, KernelEvaluator, TimingConfig,
    EXTRACTION_ERROR_MARKER, FIRST_BASELINE_MIN_TRIALS, FIRST_BASELINE_SECONDS,
    FIRST_BASELINE_TRIALS, SLOW_BASELINE_EVERY, TUNING_BASELINE_EVERY,
    TUNING_FIRST_BASELINE_SECONDS, TUNING_REUSE_INPUTS,
};
pub use worker::{BackendSpec, TaskFileJob, TaskRegistry};
