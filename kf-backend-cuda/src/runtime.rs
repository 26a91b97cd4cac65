//! Finding NVRTC (and the CUDA headers) without environment variables set by hand.
//!
//! `cudarc` opens NVRTC by library *name* (`libnvrtc.so`, `libnvrtc.so.12`, …) on its first
//! NVRTC call, so the library must be findable by the dynamic loader. A running process cannot
//! change its own `LD_LIBRARY_PATH`, but a library already loaded is found by its `SONAME`:
//! [`prepare`] therefore loads NVRTC by absolute path (`dlopen` with `RTLD_NOW | RTLD_GLOBAL`,
//! kept for the life of the process) before the first NVRTC call of this crate. It decides, in
//! this order:
//!
//! 1. **`KF_CUDA_NVRTC` is set** (the one variable of this crate) to one of
//!    * a `cuda.json` written by `scripts/setup.sh --cuda`, or a directory holding one (or
//!      holding `.runtime/cuda.json`);
//!    * an NVRTC library (`libnvrtc.so.12`), or a directory holding one (`lib64/` of a CUDA
//!      toolkit); a sibling `include/` with `cuda_fp16.h` is used for headers.
//! 2. **A `cuda.json` is found** (`kf_backend_common::runtime::discover_config`): a
//!    checkout's `.runtime/cuda.json` above the current directory or the running executable
//!    (what `scripts/setup.sh --cuda` installed), else the per-user folder's
//!    (`$XDG_DATA_HOME/kernelfoundry/cuda.json`, what `kf setup --cuda` installed), else the
//!    one above this crate's source directory.
//! 3. **A CUDA toolkit**: `$CUDA_HOME`, `$CUDA_PATH`, then `/usr/local/cuda`, when it holds
//!    `lib64/libnvrtc.so.12`.
//! 4. Otherwise nothing is preloaded and `cudarc` searches the system (`LD_LIBRARY_PATH`, the
//!    loader cache).
//!
//! The CUDA *driver* (`libcuda.so.1`) is never configured here: it comes with the GPU driver,
//! and its absence means "no device" (compile-only), never an error of this module.
//!
//! Nothing here sets environment variables, so, unlike the OpenCL backend, there is no
//! constraint on threads.

use std::env;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kf_backend_common::runtime::{
    self as common, Binding, NamedPath, RuntimeConfigError, RuntimeRecord, RuntimeSpec,
};
use serde::Deserialize;

/// The variable an embedder sets to point this crate at an NVRTC (see the module docs for what
/// it may name).
pub const KF_CUDA_NVRTC: &str = "KF_CUDA_NVRTC";

/// How this backend finds NVRTC (see the module docs).
const SPEC: RuntimeSpec = RuntimeSpec {
    config_file: "cuda.json",
    variable: KF_CUDA_NVRTC,
    setup_command: "scripts/setup.sh --cuda",
    source_dir: env!("CARGO_MANIFEST_DIR"),
};

/// The sentence every "no NVRTC" error ends with.
pub const HOW_TO_GET_NVRTC: &str = "To get NVRTC: run `kf setup --cuda` (into the per-user \
folder) or `scripts/setup.sh --cuda` in the KernelFoundry-rs checkout (NVRTC 12.9 and the CUDA headers from PyPI into .runtime/, about 95 MB, \
no root and no GPU needed), or install a CUDA 12 toolkit (found in $CUDA_HOME or /usr/local/cuda), \
or set KF_CUDA_NVRTC to libnvrtc.so.12 or to a cuda.json written by scripts/setup.sh.";

/// The NVRTC library name a CUDA 12 toolkit or wheel ships.
const NVRTC_SONAME: &str = "libnvrtc.so.12";

/// Where the NVRTC configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeSource {
    /// `KF_CUDA_NVRTC` named this path.
    KfCudaNvrtc(PathBuf),
    /// A `cuda.json` found by walking up from a directory.
    Discovered(PathBuf),
    /// A CUDA toolkit at this root.
    Toolkit(PathBuf),
    /// Nothing found: the system's loader search path.
    System,
}

/// What [`prepare`] found and did, for diagnostics and error messages.
#[derive(Debug, Clone)]
pub struct RuntimeInfo {
    /// Where the configuration came from.
    pub source: RuntimeSource,
    /// The `cuda.json` applied, if any.
    pub config: Option<PathBuf>,
    /// The runtime folder (`.runtime`) holding the `cuda.json` applied: its `cache/cuda` is the
    /// default compile cache.
    pub runtime_dir: Option<PathBuf>,
    /// The NVRTC library loaded by absolute path, if any.
    pub nvrtc_library: Option<PathBuf>,
    /// Include directories passed to every compilation (`--include-path`), for `cuda_fp16.h`
    /// and friends.
    pub include_dirs: Vec<PathBuf>,
    /// Anything noteworthy (a library that did not load, a stale config, …).
    pub notes: Vec<String>,
}

impl RuntimeInfo {
    /// One line saying what was used, for messages.
    pub fn describe(&self) -> String {
        let mut head = match &self.source {
            RuntimeSource::KfCudaNvrtc(p) => format!("{KF_CUDA_NVRTC}={}", p.display()),
            RuntimeSource::Discovered(p) => format!("runtime config {}", p.display()),
            RuntimeSource::Toolkit(p) => format!("CUDA toolkit {}", p.display()),
            RuntimeSource::System => {
                "the system's library search path (no project runtime or toolkit found)".to_owned()
            }
        };
        if let Some(lib) = &self.nvrtc_library {
            head.push_str(&format!(", NVRTC {}", lib.display()));
        }
        common::describe(head, &self.notes)
    }
}

impl RuntimeRecord for RuntimeInfo {
    fn record(&mut self) -> common::Record<'_> {
        common::Record::new(&mut self.config, &mut self.runtime_dir, &mut self.notes)
    }
}

/// `cuda.json` as written by `scripts/setup.sh --cuda` (unknown fields are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct RuntimeConfig {
    /// Format version (1).
    #[serde(default)]
    pub schema: u32,
    /// The NVRTC library (`libnvrtc.so.12`).
    pub nvrtc: PathBuf,
    /// The directory of the NVRTC libraries.
    #[serde(default)]
    pub lib_dir: Option<PathBuf>,
    /// Libraries to load first (NVRTC's builtins library).
    #[serde(default)]
    pub preload: Vec<PathBuf>,
    /// Include directories for every compilation (`nvidia/cuda_runtime/include`).
    #[serde(default)]
    pub include_dirs: Vec<PathBuf>,
    /// The NVRTC version the setup script probed (`12.9`).
    #[serde(default)]
    pub nvrtc_version: Option<String>,
}

impl RuntimeConfig {
    /// Reads and parses a `cuda.json`.
    pub fn read(path: &Path) -> Result<Self, RuntimeConfigError> {
        common::read_config(path)
    }
}

static PREPARED: OnceLock<RuntimeInfo> = OnceLock::new();

/// Finds NVRTC once (see the module docs), loads it by absolute path, and returns what was
/// done. Called by [`crate::CudaBackend`] and [`crate::nvrtc_info`] before any NVRTC call.
pub fn prepare() -> &'static RuntimeInfo {
    PREPARED.get_or_init(prepare_now)
}

fn prepare_now() -> RuntimeInfo {
    let mut info = RuntimeInfo {
        source: RuntimeSource::System,
        config: None,
        runtime_dir: None,
        nvrtc_library: None,
        include_dirs: Vec::new(),
        notes: Vec::new(),
    };
    if let Some(path) = SPEC.named_by_variable() {
        info.source = RuntimeSource::KfCudaNvrtc(path.clone());
        apply_explicit(&path, &mut info);
        return info;
    }
    if let Some(config) = discover_config() {
        info.source = RuntimeSource::Discovered(config.clone());
        apply_config_file(&config, &mut info);
        return info;
    }
    for root in toolkit_roots() {
        if let Some(lib) = library_in(&root) {
            info.source = RuntimeSource::Toolkit(root.clone());
            apply_library(&lib, &mut info);
            return info;
        }
    }
    info
}

/// Finds a `cuda.json` in the order of the module docs' step 2 (a checkout's `.runtime`, the
/// per-user folder, the source checkout).
pub fn discover_config() -> Option<PathBuf> {
    SPEC.discover()
}

/// CUDA toolkit roots to look in: `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda`.
fn toolkit_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| env::var_os(v).filter(|v| !v.is_empty()))
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots
}

/// The NVRTC library in `dir` or its `lib64/` / `lib/` (a toolkit root), if any.
fn library_in(dir: &Path) -> Option<PathBuf> {
    [
        dir.to_path_buf(),
        dir.join("lib64"),
        dir.join("lib"),
        dir.join("targets/x86_64-linux/lib"),
    ]
    .iter()
    .flat_map(|d| [d.join(NVRTC_SONAME), d.join("libnvrtc.so")])
    .find(|p| p.is_file())
}

/// The `include/` with `cuda_fp16.h` next to a library directory, if any.
fn include_near(lib: &Path) -> Option<PathBuf> {
    lib.ancestors()
        .skip(1)
        .take(3)
        .map(|d| d.join("include"))
        .find(|d| d.join("cuda_fp16.h").is_file())
}

fn apply_explicit(path: &Path, info: &mut RuntimeInfo) {
    match SPEC.classify(path) {
        NamedPath::Config(json) => apply_config_file(&json, info),
        NamedPath::Dir => match library_in(path) {
            Some(lib) => apply_library(&lib, info),
            None => info.notes.push(format!(
                "{KF_CUDA_NVRTC}={} holds no cuda.json and no {NVRTC_SONAME}",
                path.display()
            )),
        },
        NamedPath::Missing => info.notes.push(SPEC.missing_note(path)),
        NamedPath::File => apply_library(path, info),
    }
}

/// Loads the NVRTC library `lib` (the one a toolkit or the variable names) and uses the
/// headers beside it.
fn apply_library(lib: &Path, info: &mut RuntimeInfo) {
    load_nvrtc(lib, info);
    if let Some(include) = include_near(lib) {
        info.include_dirs.push(include);
    }
}

fn apply_config_file(path: &Path, info: &mut RuntimeInfo) {
    let Some(config) = SPEC.open::<RuntimeConfig>(path, info) else {
        return;
    };
    if !SPEC.require("NVRTC", path, &config.nvrtc, info) {
        return;
    }
    common::preload_all(&config.preload, Binding::Global, &mut info.notes);
    load_nvrtc(&config.nvrtc, info);
    for dir in &config.include_dirs {
        if dir.is_dir() {
            info.include_dirs.push(dir.clone());
        } else {
            info.notes.push(format!(
                "include directory {} is missing; run scripts/setup.sh --cuda again",
                dir.display()
            ));
        }
    }
}

/// Loads NVRTC from `lib` by absolute path, recording it, or noting why it did not load.
fn load_nvrtc(lib: &Path, info: &mut RuntimeInfo) {
    match preload(lib) {
        Ok(()) => info.nvrtc_library = Some(lib.to_path_buf()),
        Err(e) => info
            .notes
            .push(format!("could not load {}: {e}", lib.display())),
    }
}

/// Loads a shared library for the rest of the process (`RTLD_NOW | RTLD_GLOBAL`), so that a
/// later `dlopen` of its `SONAME` (cudarc's) resolves to it.
fn preload(path: &Path) -> Result<(), RuntimeConfigError> {
    common::preload(path, Binding::Global)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn parses_the_setup_script_config() {
        let json = r#"{"schema": 1, "nvrtc": "/x/libnvrtc.so.12", "lib_dir": "/x",
            "preload": ["/x/libnvrtc-builtins.so.12.9"], "include_dirs": ["/y/include"],
            "nvrtc_version": "12.9", "archs": ["sm_90"], "probe": {}}"#;
        let c: RuntimeConfig = serde_json::from_str(json).unwrap();
        assert_eq!(c.nvrtc, PathBuf::from("/x/libnvrtc.so.12"));
        assert_eq!(c.include_dirs.len(), 1);
        assert_eq!(c.nvrtc_version.as_deref(), Some("12.9"));
    }

    #[test]
    fn describe_mentions_notes() {
        let info = RuntimeInfo {
            source: RuntimeSource::System,
            config: None,
            runtime_dir: None,
            nvrtc_library: None,
            include_dirs: vec![],
            notes: vec!["stale".into()],
        };
        assert!(info.describe().contains("stale"));
    }

    #[test]
    fn finds_a_library_in_a_toolkit_layout() {
        let dir = tempfile::tempdir().unwrap();
        let lib64 = dir.path().join("lib64");
        fs::create_dir_all(&lib64).unwrap();
        assert!(library_in(dir.path()).is_none());
        fs::write(lib64.join(NVRTC_SONAME), b"").unwrap();
        assert_eq!(library_in(dir.path()), Some(lib64.join(NVRTC_SONAME)));
        let include = dir.path().join("include");
        fs::create_dir_all(&include).unwrap();
        fs::write(include.join("cuda_fp16.h"), b"").unwrap();
        assert_eq!(include_near(&lib64.join(NVRTC_SONAME)), Some(include));
    }
}
