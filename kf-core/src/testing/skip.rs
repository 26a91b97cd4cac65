//! One rule for a test that cannot run here, shared by every crate's tests: it **skips** (prints
//! `SKIPPED: …` and returns) and records the skip where CI can list it, or, when
//! `KF_REQUIRE_<KIND>=1`, it **fails**.
//!
//! Every skip has a *kind*: what was missing, in capitals (`OPENCL`, `SYCL`, `NVRTC`,
//! `CUDA_DEVICE`, `LLM`, `DIST`, `PYTHON`, `TORCH`, `BROWSER`, `TUNING_SPACES`, …). Setting
//! `KF_REQUIRE_<KIND>=1` turns that kind of skip into a test failure, so a broken setup cannot
//! turn tests into passes.
//!
//! The test harness shows a passing test's stderr only with `--nocapture`, so the `SKIPPED:`
//! line alone is lost in a CI log. When [`KF_SKIP_LOG`] names a file, each skip also appends one
//! line `<kind>\t<test>\t<reason>` to it (one `write` on a file opened for appending, so the
//! lines of test binaries running at the same time do not interleave); CI's script lists that
//! file at the end and fails when a kind it requires appears there.
//!
//! ```no_run
//! fn runtime_here() -> bool { false }
//!
//! if !runtime_here() {
//!     kf_core::testing::skip::skip("OPENCL", "no OpenCL runtime (run scripts/setup.sh)");
//!     return; // printed `SKIPPED: …`, or panicked under KF_REQUIRE_OPENCL=1
//! }
//! ```

use std::fmt::Display;
use std::io::Write;
use std::panic::Location;
use std::path::Path;

/// The variable naming the file each skip is appended to (one line per skip:
/// `<kind>\t<test>\t<reason>`); unset, skips are only printed.
pub const KF_SKIP_LOG: &str = "KF_SKIP_LOG";

/// The variable that makes a skip of `kind` a failure: `KF_REQUIRE_<kind>`.
pub fn require_var(kind: &str) -> String {
    format!("KF_REQUIRE_{kind}")
}

/// Whether `KF_REQUIRE_<kind>` is set (to `1`, or any value but empty and `0`): a skip of
/// that kind fails the test instead.
pub fn required(kind: &str) -> bool {
    std::env::var(require_var(kind)).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Skips the calling test for `reason`, of `kind`: prints `SKIPPED: {reason}` to stderr and
/// appends it to [`KF_SKIP_LOG`] when that is set. The caller returns from the test after this.
///
/// # Panics
///
/// When `KF_REQUIRE_<kind>=1`: the test was meant to run, so it fails with `reason`. Also when
/// [`KF_SKIP_LOG`] is set and the line cannot be appended (an unrecorded skip is what the log
/// exists to prevent).
#[track_caller]
pub fn skip(kind: &str, reason: impl Display) {
    let log = std::env::var_os(KF_SKIP_LOG).filter(|p| !p.is_empty());
    skip_with(
        kind,
        &reason.to_string(),
        required(kind),
        log.as_deref().map(Path::new),
        Location::caller(),
    );
}

/// [`skip`], with the requirement and the log given.
fn skip_with(kind: &str, reason: &str, required: bool, log: Option<&Path>, at: &Location<'_>) {
    let var = require_var(kind);
    if required {
        panic!("{var}=1, but this test would skip: {reason}");
    }
    eprintln!("SKIPPED: {reason} ({var}=1 makes this a failure)");
    if let Some(log) = log {
        record(log, kind, reason, at);
    }
}

/// Appends the skip to `log`.
fn record(log: &Path, kind: &str, reason: &str, at: &Location<'_>) {
    let line = format!(
        "{}\t{} ({}:{})\t{}\n",
        one_field(kind),
        one_field(&test_name()),
        at.file(),
        at.line(),
        one_field(reason)
    );
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = appended {
        panic!("{KF_SKIP_LOG}={}: cannot record a skip: {e}", log.display());
    }
}

/// The test binary (its name without cargo's hash) and the test (libtest runs each test on a
/// thread named after it), as `binary::test`; the binary alone outside a test thread.
fn test_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            Some((name, hash))
                if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                name.to_owned()
            }
            _ => stem,
        })
        .unwrap_or_else(|| "?".to_owned());
    match std::thread::current().name() {
        Some(test) if test != "main" => format!("{binary}::{test}"),
        _ => binary,
    }
}

/// `text` on one line without tabs, so that it stays one field of one line.
fn one_field(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_one_line_without_tabs() {
        assert_eq!(one_field("a\tb\n  c "), "a b c");
    }

    #[test]
    fn a_required_kind_fails_without_recording() {
        let dir = scratch("required");
        let log = dir.join("skipped.tsv");
        let failed = std::panic::catch_unwind(|| {
            skip_with("SELF_TEST", "needed", true, Some(&log), Location::caller())
        });
        let message = failed.expect_err("a required kind must fail");
        let message = message.downcast_ref::<String>().expect("a formatted panic");
        assert!(
            message.contains("KF_REQUIRE_SELF_TEST=1") && message.contains("needed"),
            "{message}"
        );
        assert!(!log.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_skip_appends_one_line_naming_the_test() {
        let dir = scratch("appends");
        let log = dir.join("ci").join("skipped.tsv");
        skip_with(
            "SELF_TEST",
            "not\there\n",
            false,
            Some(&log),
            Location::caller(),
        );
        skip_with("OTHER", "again", false, Some(&log), Location::caller());
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0][0], "SELF_TEST");
        // libtest names the thread after the test; this binary is `kf_core-<hash>`.
        assert!(
            lines[0][1].starts_with(
                "kf_core::testing::skip::tests::each_skip_appends_one_line_naming_the_test ("
            ),
            "{text}"
        );
        assert!(lines[0][1].contains("skip.rs:"), "{text}");
        assert_eq!(lines[0][2], "not here");
        assert_eq!(lines[1][0], "OTHER");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A fresh folder of this test's own (kf-core has no tempfile dependency).
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("kf-core-skip-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
