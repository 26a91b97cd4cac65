//! For tests that need an OpenCL runtime: one rule for when they may skip.
//!
//! A test skips (prints `SKIPPED: …` and passes) only when the runtime is **not installed**
//! ([`OpenClError::Unavailable`]: no OpenCL library, no platform, no matching device) **and**
//! `KF_REQUIRE_OPENCL` is not `1` (the skip is recorded as kind `OPENCL` where
//! [`kf_core::testing::skip`] says). Any other error — a runtime that loads but fails to create
//! a context, a broken driver — fails the test, and so does a missing runtime under
//! `KF_REQUIRE_OPENCL=1` (which CI sets), so that a backend regression cannot turn the
//! OpenCL tests into passes.
//!
//! ```no_run
//! use kf_backend_opencl::testing::backend_or_skip;
//!
//! let Some(backend) = backend_or_skip() else {
//!     return; // printed `SKIPPED: …`
//! };
//! # let _ = backend;
//! ```

use crate::{OpenClBackend, OpenClError};

/// The variable that turns a missing OpenCL runtime from a skip into a failure.
pub const KF_REQUIRE_OPENCL: &str = "KF_REQUIRE_OPENCL";

/// Whether `KF_REQUIRE_OPENCL=1` is set.
pub fn opencl_required() -> bool {
    kf_core::testing::skip::required(kf_core::testing::skip::SkipKind::OpenCl)
}

/// Skips a test for a reason that means "the OpenCL runtime is not installed": prints
/// `SKIPPED: {reason}` and records it ([`kf_core::testing::skip`], kind `OPENCL`) unless
/// `KF_REQUIRE_OPENCL=1`, when it fails the test instead. The caller returns from the test
/// after this.
///
/// # Panics
///
/// When `KF_REQUIRE_OPENCL=1`.
#[track_caller]
pub fn skip_missing_runtime(reason: impl std::fmt::Display) {
    kf_core::testing::skip::skip(
        kf_core::testing::skip::SkipKind::OpenCl,
        format_args!("{reason} (run scripts/setup.sh)"),
    );
}

/// Applies the skip rule to the result of opening an OpenCL backend (or listing devices):
/// `Some(value)` when it worked; `None` after printing `SKIPPED: …` when the runtime is not
/// installed and not required.
///
/// # Panics
///
/// On any error other than [`OpenClError::Unavailable`], and on that one too when
/// `KF_REQUIRE_OPENCL=1`: a test calling this is meant to fail then.
#[track_caller]
pub fn skip_unless_installed<T>(result: Result<T, OpenClError>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e @ OpenClError::Unavailable { .. }) => {
            skip_missing_runtime(format_args!("no OpenCL runtime ({e})"));
            None
        }
        Err(e) => panic!("the OpenCL runtime is installed but failed: {e}"),
    }
}

/// The default OpenCL backend ([`OpenClBackend::new`]) under the skip rule of
/// [`skip_unless_installed`].
#[track_caller]
pub fn backend_or_skip() -> Option<OpenClBackend> {
    skip_unless_installed(OpenClBackend::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_runtime_may_skip() {
        assert_eq!(skip_unless_installed::<u8>(Ok(3)), Some(3));
        let other = std::panic::catch_unwind(|| {
            skip_unless_installed::<u8>(Err(OpenClError::InvalidArgument("bad".into())))
        });
        assert!(
            other.is_err(),
            "an installed but failing runtime must fail the test"
        );
        // A missing runtime skips unless KF_REQUIRE_OPENCL=1, which this test does not change
        // (the environment is shared by the tests of this binary). Without it, a skip would be
        // recorded for a runtime that is not missing, so only the required case is checked.
        if opencl_required() {
            let missing = std::panic::catch_unwind(|| {
                skip_unless_installed::<u8>(Err(OpenClError::Unavailable {
                    message: "no platform".into(),
                }))
            });
            assert!(
                missing.is_err(),
                "{KF_REQUIRE_OPENCL}=1 but a missing runtime skipped"
            );
        }
    }
}
