//! One rule for a test that cannot run here, shared by every crate's tests: it **skips** (prints
//! `SKIPPED: …` and returns) and records the skip where CI can list it, or, when
//! `KF_REQUIRE_<KIND>=1`, it **fails**.
//!
//! Every skip has a *kind*, a [`SkipKind`]: what was missing (`OPENCL`, `SYCL`, `NVRTC`,
//! `CUDA_DEVICE`, `LLM`, `DIST`, `PYTHON`, `TORCH`, `BROWSER`, `TUNING_SPACES`, …). Setting
//! `KF_REQUIRE_<KIND>=1` turns that kind of skip into a test failure, so a broken setup cannot
//! turn tests into passes. The kinds are one enum, so that a misspelt kind (`"pyopencl"` where
//! CI requires `PYOPENCL`) cannot compile, and CI's check of the log refuses any name that is
//! not one of [`SkipKind::ALL`]; a downstream crate's own kind is [`SkipKind::Other`], whose
//! name must be upper case.
//!
//! The test harness shows a passing test's stderr only with `--nocapture`, so the `SKIPPED:`
//! line alone is lost in a CI log. When [`KF_SKIP_LOG`] names a file, each skip also appends one
//! line `<kind>\t<test>\t<reason>` to it (one `write` on a file opened for appending, so the
//! lines of test binaries running at the same time do not interleave); CI's script lists that
//! file at the end and fails when a kind it requires appears there.
//!
//! ```no_run
//! use kf_core::testing::skip::{skip, SkipKind};
//!
//! fn runtime_here() -> bool { false }
//!
//! if !runtime_here() {
//!     skip(SkipKind::OpenCl, "no OpenCL runtime (run scripts/setup.sh)");
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

/// What a skipped test lacked. [`SkipKind::name`] is the name in `KF_REQUIRE_<NAME>` and in
/// the skip log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SkipKind {
    /// An OpenCL runtime and device (`OPENCL`).
    OpenCl,
    /// A SYCL runtime (`SYCL`).
    Sycl,
    /// NVRTC, CUDA's runtime compiler (`NVRTC`).
    Nvrtc,
    /// A CUDA device (`CUDA_DEVICE`).
    CudaDevice,
    /// A test that only makes sense where CUDA can compile but not run (`CUDA_COMPILE_ONLY`).
    CudaCompileOnly,
    /// The NATS and PostgreSQL servers of distributed evaluation (`DIST`).
    Dist,
    /// A Python with NumPy for task-file references (`PYTHON`).
    Python,
    /// A Python with pyopencl and pytest for exported modules (`PYOPENCL`).
    PyOpenCl,
    /// PyTorch (`TORCH`).
    Torch,
    /// An OpenAI-compatible LLM server (`LLM`).
    Llm,
    /// Linux Landlock (`LANDLOCK`).
    Landlock,
    /// Chromium for the explorer's browser tests (`BROWSER`).
    Browser,
    /// The shared folder's tuning spaces beside the clone (`TUNING_SPACES`).
    TuningSpaces,
    /// clang, the oracle of the differential fuzz targets (`CLANG`).
    Clang,
    /// An address of this machine that is not loopback (`NON_LOOPBACK_ADDRESS`).
    NonLoopbackAddress,
    /// A downstream crate's own kind (its backend's runtime, say): upper-case letters, digits
    /// and `_`. [`skip`] panics on any other name, as it would be unrequirable.
    Other(&'static str),
}

impl SkipKind {
    /// Every kind of this workspace, by name (the skip check of `.ci/run` reads this table).
    pub const ALL: [(SkipKind, &'static str); 15] = [
        (SkipKind::OpenCl, "OPENCL"),
        (SkipKind::Sycl, "SYCL"),
        (SkipKind::Nvrtc, "NVRTC"),
        (SkipKind::CudaDevice, "CUDA_DEVICE"),
        (SkipKind::CudaCompileOnly, "CUDA_COMPILE_ONLY"),
        (SkipKind::Dist, "DIST"),
        (SkipKind::Python, "PYTHON"),
        (SkipKind::PyOpenCl, "PYOPENCL"),
        (SkipKind::Torch, "TORCH"),
        (SkipKind::Llm, "LLM"),
        (SkipKind::Landlock, "LANDLOCK"),
        (SkipKind::Browser, "BROWSER"),
        (SkipKind::TuningSpaces, "TUNING_SPACES"),
        (SkipKind::Clang, "CLANG"),
        (SkipKind::NonLoopbackAddress, "NON_LOOPBACK_ADDRESS"),
    ];

    /// The kind's name: `OPENCL`, `CUDA_DEVICE`, …, or an [`SkipKind::Other`]'s own.
    pub fn name(self) -> &'static str {
        if let SkipKind::Other(name) = self {
            return name;
        }
        Self::ALL
            .iter()
            .find(|(kind, _)| *kind == self)
            .map_or("UNKNOWN", |(_, name)| name)
    }

    /// Whether the name is one `KF_REQUIRE_<NAME>` can spell: upper-case ASCII letters,
    /// digits and `_`, starting with a letter.
    fn well_formed(name: &str) -> bool {
        name.starts_with(|c: char| c.is_ascii_uppercase())
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    }
}

impl std::fmt::Display for SkipKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The variable that makes a skip of `kind` a failure: `KF_REQUIRE_<NAME>`.
pub fn require_var(kind: SkipKind) -> String {
    format!("KF_REQUIRE_{}", kind.name())
}

/// Whether `KF_REQUIRE_<NAME>` is set (to `1`, or any value but empty and `0`): a skip of
/// that kind fails the test instead.
pub fn required(kind: SkipKind) -> bool {
    std::env::var(require_var(kind)).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Skips the calling test for `reason`, of `kind`: prints `SKIPPED: {reason}` to stderr and
/// appends it to [`KF_SKIP_LOG`] when that is set. The caller returns from the test after this.
///
/// # Panics
///
/// When `KF_REQUIRE_<NAME>=1`: the test was meant to run, so it fails with `reason`. When an
/// [`SkipKind::Other`] name is not upper case (no variable could require it). Also when
/// [`KF_SKIP_LOG`] is set and the line cannot be appended (an unrecorded skip is what the log
/// exists to prevent).
#[track_caller]
pub fn skip(kind: SkipKind, reason: impl Display) {
    assert!(
        SkipKind::well_formed(kind.name()),
        "skip kind {:?}: a kind is upper-case letters, digits and _",
        kind.name()
    );
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
fn skip_with(kind: SkipKind, reason: &str, required: bool, log: Option<&Path>, at: &Location<'_>) {
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
fn record(log: &Path, kind: SkipKind, reason: &str, at: &Location<'_>) {
    let line = format!(
        "{}\t{} ({}:{})\t{}\n",
        one_field(kind.name()),
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
            skip_with(
                SkipKind::Other("SELF_TEST"),
                "needed",
                true,
                Some(&log),
                Location::caller(),
            )
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
            SkipKind::Other("SELF_TEST"),
            "not\there\n",
            false,
            Some(&log),
            Location::caller(),
        );
        skip_with(
            SkipKind::Other("OTHER"),
            "again",
            false,
            Some(&log),
            Location::caller(),
        );
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

    #[test]
    fn kinds_have_distinct_well_formed_names() {
        let mut names: Vec<&str> = SkipKind::ALL.iter().map(|(_, n)| *n).collect();
        assert!(names.iter().all(|n| SkipKind::well_formed(n)), "{names:?}");
        for (kind, name) in SkipKind::ALL {
            assert_eq!(kind.name(), name);
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SkipKind::ALL.len());
    }

    #[test]
    fn a_lower_case_kind_fails() {
        for name in ["pyopencl", "Python", "", "1X"] {
            let failed = std::panic::catch_unwind(|| skip(SkipKind::Other(name), "no reason"));
            assert!(failed.is_err(), "{name:?} was accepted");
        }
    }

    /// A fresh folder of this test's own (kf-core has no tempfile dependency).
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("kf-core-skip-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
