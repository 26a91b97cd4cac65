//! What the three backends' test suites do alike, written once: the skip rule for a backend
//! whose runtime is not installed, the run of kf-core's conformance suite, and the kernel that
//! must not compile.
//!
//! Every backend runs the same conformance suite ([`kf_core::testing::conformance`]); this
//! module makes each crate's test of it one call, so that the three crates print and judge the
//! same things.
//!
//! ```no_run
//! # fn demo<B: kf_core::Backend>(backend: &B) {
//! use kf_backend_common::testing::run_conformance_suite;
//! run_conformance_suite(backend, "runtime described by the backend")
//!     .unwrap_or_else(|failure| panic!("{failure}"));
//! # }
//! ```

use std::fmt::Display;

use kf_core::testing::conformance::{self, ConformanceFailure, ConformanceReport};
use kf_core::testing::skip::{skip, SkipKind};
use kf_core::{Backend, BackendError, BackendErrorKind, KernelSource};

/// Applies the skip rule to the result of building a backend: `Some(backend)` when it was
/// built; `None` after printing and recording the skip ([`kf_core::testing::skip`], of `kind`,
/// saying `why_skipped(error)`) when the runtime is not installed (the error's kind is
/// [`BackendErrorKind::Unavailable`]) and not required.
///
/// # Panics
///
/// On any other error, naming `backend` (as in "creating the CUDA backend failed"), and on a
/// missing runtime whose kind is required: a test calling this is meant to fail then.
#[track_caller]
pub fn built_or_skip<B, E: BackendError>(
    built: Result<B, E>,
    backend: &str,
    kind: SkipKind,
    why_skipped: impl FnOnce(&E) -> String,
) -> Option<B> {
    match built {
        Ok(b) => Some(b),
        Err(e) if e.kind() == BackendErrorKind::Unavailable => {
            skip(kind, why_skipped(&e));
            None
        }
        Err(e) => panic!("creating the {backend} backend failed: {e}"),
    }
}

/// Runs every kf-core conformance check on `backend`, printing `runtime` (the backend's own
/// description of the runtime it loaded) before and the report after, so that a failing log
/// says where it ran. The report is the error when a check failed.
pub fn run_conformance_suite<B: Backend>(
    backend: &B,
    runtime: impl Display,
) -> Result<ConformanceReport, ConformanceFailure> {
    eprintln!("runtime: {runtime}");
    let report = conformance::run(backend);
    eprintln!("{report}");
    report.into_result()
}

/// `source` (one of kf-eval's shipped `gemm_tiled` kernels) with its accumulator reset
/// `acc[w] = 0.0f;` assigning `undeclared_name` instead: a kernel every backend's compiler
/// rejects with a log naming `undeclared_name`.
pub fn with_undeclared_name(source: &KernelSource) -> KernelSource {
    let mut broken = source.clone();
    broken.text = source
        .text
        .replace("acc[w] = 0.0f;", "acc[w] = undeclared_name;")
        .into();
    broken
}

/// The text of `error`, the error a backend returns when its runtime is not installed, after
/// checking that its kind is [`BackendErrorKind::Unavailable`] (what makes tests skip rather
/// than fail): the caller then checks that the text says how to install the runtime.
///
/// # Panics
///
/// When the kind is another: a test calling this is meant to fail then.
#[track_caller]
pub fn unavailable_text<E: BackendError>(error: &E) -> String {
    assert_eq!(error.kind(), BackendErrorKind::Unavailable, "{error}");
    error.to_string()
}
