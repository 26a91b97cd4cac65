//! Finding the SYCL runtime and this crate's shim at run time, without environment variables
//! set by hand.
//!
//! The shim (`libkf_sycl_shim.so`) is compiled by this crate's build script when a SYCL
//! runtime is found at build time (see `build.rs`: `.runtime/sycl.json` written by
//! `scripts/setup.sh --sycl`, `KF_SYCL_RUNTIME`, or `$CMPLR_ROOT`); its `RUNPATH` names the
//! runtime's `lib` directory, so `libsycl.so` and its dependencies resolve with no
//! `LD_LIBRARY_PATH`. [`prepare`] runs once, before the shim is loaded, and:
//!
//! 1. picks the shim: `KF_SYCL_SHIM` (a path, for binaries moved away from their build
//!    directory) or the one the build script compiled;
//! 2. picks the runtime description (`sycl.json`): `KF_SYCL_RUNTIME` (a `sycl.json` or a
//!    directory holding one), the one the shim was built against, or one found as every
//!    backend finds its runtime ([`discover_config`]: a checkout's `.runtime`, the per-user
//!    folder of `kf setup --sycl`, the source checkout);
//! 3. applies it: unless `OCL_ICD_VENDORS` or `OCL_ICD_FILENAMES` is set, sets
//!    `OCL_ICD_VENDORS` to the OpenCL vendors directory `scripts/setup.sh` wrote (the SYCL
//!    runtime reaches Intel's CPU device through its OpenCL adapter, whose ICD loader reads
//!    that variable when the first SYCL call enumerates platforms).
//!
//! # Caveat: process environment
//!
//! As in `kf-backend-opencl`, the variable is set with `std::env::set_var`; call [`prepare`]
//! (or create the first backend) early in `main`, before spawning threads that read the
//! environment. Variables already set are left alone.

use std::env;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kf_backend_common::runtime::{
    self as common, NamedPath, RuntimeConfigError, RuntimeRecord, RuntimeSpec,
};
use serde::Deserialize;

/// The variable that points this crate at a runtime description at run time (a `sycl.json`
/// written by `scripts/setup.sh --sycl`, or a directory holding one). At build time the build
/// script reads it too, and then also accepts an installation prefix.
pub const KF_SYCL_RUNTIME: &str = "KF_SYCL_RUNTIME";

/// The variable that names the shim library to load instead of the one built with the crate.
pub const KF_SYCL_SHIM: &str = "KF_SYCL_SHIM";

/// How this backend finds the runtime's description (see the module docs).
const SPEC: RuntimeSpec = RuntimeSpec {
    config_file: "sycl.json",
    variable: KF_SYCL_RUNTIME,
    setup_command: "scripts/setup.sh --sycl",
    source_dir: env!("CARGO_MANIFEST_DIR"),
};

/// The sentence every "runtime not available" error ends with.
pub const HOW_TO_GET_A_RUNTIME: &str = "To install it: run `kf setup --sycl` (into the \
per-user folder) and build, or `cargo install`, kf again; or `scripts/setup.sh --sycl` in the \
KernelFoundry-rs checkout (intel-sycl-rt and the Intel CPU OpenCL runtime from PyPI into \
.runtime/, no root needed; a C++17 compiler such as g++ builds the shim), then build again \
(cargo rebuilds kf-backend-sycl by itself). Elsewhere, set KF_SYCL_RUNTIME when building to a \
sycl.json or to a prefix holding include/sycl/sycl.hpp and lib/libsycl.so (for example a \
oneAPI compiler directory).";

/// `sycl.json` as written by `scripts/setup.sh --sycl` (unknown fields are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct RuntimeConfig {
    /// Format version (1).
    #[serde(default)]
    pub schema: u32,
    /// The wheel's version (`2026.2.0`).
    #[serde(default)]
    pub version: Option<String>,
    /// The directory holding `sycl/sycl.hpp`.
    pub include_dir: PathBuf,
    /// The directory holding `libsycl.so`.
    pub lib_dir: PathBuf,
    /// A directory of OpenCL `.icd` files for `OCL_ICD_VENDORS` (the CPU device).
    #[serde(default)]
    pub opencl_vendors_dir: Option<PathBuf>,
}

impl RuntimeConfig {
    /// Reads and parses a `sycl.json`.
    pub fn read(path: &Path) -> Result<Self, RuntimeConfigError> {
        common::read_config(path)
    }
}

/// What [`prepare`] found and did, for diagnostics.
#[derive(Debug, Clone)]
pub struct RuntimeInfo {
    /// The shim library to load, if there is one.
    pub shim: Option<PathBuf>,
    /// Why the build script compiled no shim, when it did not.
    pub build_note: Option<String>,
    /// How the build script found the runtime the shim was compiled against.
    pub built_against: Option<String>,
    /// The `sycl.json` applied, if any.
    pub config: Option<PathBuf>,
    /// The runtime folder (`.runtime`) holding that `sycl.json`: its `cache/sycl` is the
    /// default compile cache.
    pub runtime_dir: Option<PathBuf>,
    /// The wheel's version from `sycl.json`.
    pub version: Option<String>,
    /// Environment variables set by [`prepare`], in order.
    pub set_vars: Vec<(String, String)>,
    /// Anything noteworthy.
    pub notes: Vec<String>,
}

impl RuntimeInfo {
    /// One line saying what is used, for messages.
    pub fn describe(&self) -> String {
        let mut s = match (&self.shim, &self.build_note) {
            (Some(shim), _) => format!("shim {}", shim.display()),
            (None, Some(note)) => format!("no shim: {note}"),
            (None, None) => "no shim".to_owned(),
        };
        if let Some(by) = &self.built_against {
            s.push_str(&format!(", built against {by}"));
        }
        if let Some(config) = &self.config {
            s.push_str(&format!(", runtime config {}", config.display()));
        }
        common::describe(s, &self.notes)
    }
}

impl RuntimeRecord for RuntimeInfo {
    fn record(&mut self) -> common::Record<'_> {
        common::Record::new(&mut self.config, &mut self.runtime_dir, &mut self.notes)
    }
}

static PREPARED: OnceLock<RuntimeInfo> = OnceLock::new();

/// Configures the process for the SYCL runtime once (see the module docs) and returns what was
/// found. Called before the shim is loaded; call it yourself early in `main` if other threads
/// may read the environment.
pub fn prepare() -> &'static RuntimeInfo {
    PREPARED.get_or_init(prepare_now)
}

fn non_empty(v: Option<&'static str>) -> Option<&'static str> {
    v.filter(|s| !s.is_empty())
}

fn prepare_now() -> RuntimeInfo {
    let mut info = RuntimeInfo {
        shim: None,
        build_note: non_empty(option_env!("KF_SYCL_BUILD_NOTE")).map(str::to_owned),
        built_against: non_empty(option_env!("KF_SYCL_BUILD_FOUND_BY")).map(str::to_owned),
        config: None,
        runtime_dir: None,
        version: None,
        set_vars: Vec::new(),
        notes: Vec::new(),
    };
    info.shim = match env::var_os(KF_SYCL_SHIM).filter(|v| !v.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None => non_empty(option_env!("KF_SYCL_SHIM_BUILT")).map(PathBuf::from),
    };
    let config = match SPEC.named_by_variable() {
        Some(path) => match SPEC.classify(&path) {
            NamedPath::Config(json) => Some(json),
            NamedPath::Dir => {
                info.notes.push(format!(
                    "{KF_SYCL_RUNTIME}={} holds no sycl.json",
                    path.display()
                ));
                None
            }
            // Taken for a sycl.json all the same: reading it says what is wrong with it.
            NamedPath::File | NamedPath::Missing => Some(path),
        },
        None => non_empty(option_env!("KF_SYCL_BUILD_CONFIG"))
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .or_else(discover_config),
    };
    if let Some(path) = config {
        apply_config(&path, &mut info);
    }
    info
}

/// Finds a `sycl.json` as every backend does (`kf_backend_common::runtime::discover_config`:
/// a checkout's `.runtime` above the current directory or the executable, the per-user
/// folder of `kf setup --sycl`, the source checkout).
pub fn discover_config() -> Option<PathBuf> {
    SPEC.discover()
}

fn apply_config(path: &Path, info: &mut RuntimeInfo) {
    let Some(config) = SPEC.open::<RuntimeConfig>(path, info) else {
        return;
    };
    info.version = config.version.clone();
    if !config.lib_dir.join("libsycl.so").exists() {
        info.notes.push(format!(
            "the runtime named by {} is gone ({} has no libsycl.so); run scripts/setup.sh \
             --sycl again",
            path.display(),
            config.lib_dir.display()
        ));
    }
    if let Some(dir) = config.opencl_vendors_dir.filter(|d| d.is_dir()) {
        if !common::icd_vars_set() {
            // See the module docs: once, before the SYCL runtime is loaded.
            common::set_var_if_unset(
                "OCL_ICD_VENDORS",
                &dir.to_string_lossy(),
                &mut info.set_vars,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_setup_script_config() {
        let json = r#"{"schema": 1, "version": "2026.2.0", "include_dir": "/v/include",
            "lib_dir": "/v/lib", "opencl_vendors_dir": "/r/opencl/vendors", "devices": []}"#;
        let c: RuntimeConfig = serde_json::from_str(json).unwrap();
        assert_eq!(c.lib_dir, PathBuf::from("/v/lib"));
        assert_eq!(c.version.as_deref(), Some("2026.2.0"));
    }

    #[test]
    fn describe_says_why_there_is_no_shim() {
        let info = RuntimeInfo {
            shim: None,
            build_note: Some("no SYCL runtime was found".into()),
            built_against: None,
            config: None,
            runtime_dir: None,
            version: None,
            set_vars: vec![],
            notes: vec!["stale".into()],
        };
        let d = info.describe();
        assert!(d.contains("no SYCL runtime") && d.contains("stale"), "{d}");
    }
}
