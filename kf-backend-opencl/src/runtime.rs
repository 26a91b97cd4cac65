//! Finding an OpenCL runtime without environment variables set by hand.
//!
//! `opencl3` loads the OpenCL library (`libOpenCL.so.1`, or the `;`-separated list in
//! `OPENCL_DYLIB_PATH`) on the first OpenCL call, and the ICD loader reads `OCL_ICD_VENDORS` /
//! `OCL_ICD_FILENAMES` at that moment too. [`prepare`] therefore runs once, before the first
//! OpenCL call of this crate, and decides, in this order:
//!
//! 1. **`OPENCL_DYLIB_PATH` is set**: the embedder chose the library; nothing is changed.
//! 2. **`KF_OPENCL_ICD` is set** (the one variable of this crate) to one of
//!    * an `opencl.json` written by `scripts/setup.sh`, or a directory holding one;
//!    * a directory of `.icd` files (becomes `OCL_ICD_VENDORS`);
//!    * an `.icd` file, or an OpenCL driver library (`libintelocl.so`, `libpocl.so.2`): it is
//!      added with `OCL_ICD_FILENAMES` and loaded through the system ICD loader, or directly
//!      when there is none.
//! 3. **An `opencl.json` is found** (`kf_backend_common::runtime::discover_config`): a
//!    checkout's `.runtime/opencl.json` above the current directory or the running executable
//!    (what `scripts/setup.sh` installed), else the per-user folder's
//!    (`$XDG_DATA_HOME/kernelfoundry/opencl.json`, what `kf setup` installed), else the one
//!    above this crate's source directory.
//! 4. Otherwise the system's `libOpenCL.so.1` and `/etc/OpenCL/vendors` are used as they are.
//!
//! Applying an `opencl.json` means: `dlopen` the support libraries it lists under `preload`
//! (the Intel wheel's ICD loader depends on `libsvml.so` & co. and has no `RUNPATH`, and
//! `LD_LIBRARY_PATH` cannot be changed for a running process), then set `OPENCL_DYLIB_PATH` to
//! `<loader>;<icd>` and, unless `OCL_ICD_VENDORS` or `OCL_ICD_FILENAMES` is already set,
//! `OCL_ICD_VENDORS` to its vendors directory.
//!
//! # Caveat: process environment
//!
//! The decisions reach the OpenCL loaders through the process environment
//! (`std::env::set_var`). Setting variables while another thread reads the environment is a
//! data race in glibc, so call [`prepare`] (or create the first backend) early in `main`,
//! before spawning threads, when the process reads its environment concurrently. The variables
//! are only set when not already present, and only once per process.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kf_backend_common::runtime::{
    self as common, Binding, NamedPath, RuntimeConfigError, RuntimeRecord, RuntimeSpec,
};
use serde::Deserialize;

/// The variable an embedder sets to point this crate at any OpenCL runtime (see the module
/// docs for what it may name).
pub const KF_OPENCL_ICD: &str = "KF_OPENCL_ICD";

/// How this backend finds its runtime (see the module docs).
const SPEC: RuntimeSpec = RuntimeSpec {
    config_file: "opencl.json",
    variable: KF_OPENCL_ICD,
    setup_command: "scripts/setup.sh",
    source_dir: env!("CARGO_MANIFEST_DIR"),
};

/// The variable opencl3 reads: a `;`-separated list of OpenCL libraries to try.
pub const OPENCL_DYLIB_PATH: &str = "OPENCL_DYLIB_PATH";

/// The sentence every "no runtime" error ends with.
pub const HOW_TO_GET_A_RUNTIME: &str = "To get an OpenCL runtime: run `kf setup` (Intel CPU \
OpenCL runtime from PyPI into the per-user folder, no root needed), or scripts/setup.sh in the \
KernelFoundry-rs checkout (the same into .runtime/), or install PoCL (sudo apt-get install pocl-opencl-icd ocl-icd-libopencl1), or set KF_OPENCL_ICD \
to an OpenCL driver library, an .icd file, or an opencl.json written by scripts/setup.sh.";

/// Where the runtime configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeSource {
    /// `OPENCL_DYLIB_PATH` was already set; left alone.
    OpenClDylibPath(String),
    /// `KF_OPENCL_ICD` named this path.
    KfOpenClIcd(PathBuf),
    /// An `opencl.json` found by walking up from a directory.
    Discovered(PathBuf),
    /// Nothing found: the system loader and its vendors directory.
    System,
}

/// What [`prepare`] found and did, for diagnostics (`devices` example, error messages).
#[derive(Debug, Clone)]
pub struct RuntimeInfo {
    /// Where the configuration came from.
    pub source: RuntimeSource,
    /// The `opencl.json` applied, if any.
    pub config: Option<PathBuf>,
    /// The runtime folder (`.runtime`) holding the `opencl.json` applied (or, when
    /// `OPENCL_DYLIB_PATH` was set, the one discovered): its `cache/opencl` is the default
    /// compile cache.
    pub runtime_dir: Option<PathBuf>,
    /// Environment variables set by [`prepare`], in order.
    pub set_vars: Vec<(String, String)>,
    /// Anything noteworthy (a library that did not preload, a stale config, …).
    pub notes: Vec<String>,
}

impl RuntimeInfo {
    /// One line saying what was used, for messages.
    pub fn describe(&self) -> String {
        let head = match &self.source {
            RuntimeSource::OpenClDylibPath(v) => format!("OPENCL_DYLIB_PATH={v} (set by caller)"),
            RuntimeSource::KfOpenClIcd(p) => format!("{KF_OPENCL_ICD}={}", p.display()),
            RuntimeSource::Discovered(p) => format!("runtime config {}", p.display()),
            RuntimeSource::System => "the system OpenCL loader (libOpenCL.so.1), no project \
                                      runtime found"
                .to_owned(),
        };
        common::describe(head, &self.notes)
    }
}

impl RuntimeRecord for RuntimeInfo {
    fn record(&mut self) -> common::Record<'_> {
        common::Record::new(&mut self.config, &mut self.runtime_dir, &mut self.notes)
    }
}

/// `opencl.json` as written by `scripts/setup.sh` (unknown fields are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct RuntimeConfig {
    /// Format version (1).
    #[serde(default)]
    pub schema: u32,
    /// The ICD loader shipped with the runtime (`libOpenCL.so.1`), if any.
    #[serde(default)]
    pub loader: Option<PathBuf>,
    /// The OpenCL driver library (`libintelocl.so`).
    pub icd: PathBuf,
    /// The directory of the runtime's libraries.
    #[serde(default)]
    pub lib_dir: Option<PathBuf>,
    /// A directory of `.icd` files for `OCL_ICD_VENDORS`.
    #[serde(default)]
    pub vendors_dir: Option<PathBuf>,
    /// Libraries to `dlopen` first, in order, so that the loader's dependencies resolve.
    #[serde(default)]
    pub preload: Vec<PathBuf>,
}

impl RuntimeConfig {
    /// Reads and parses an `opencl.json`.
    pub fn read(path: &Path) -> Result<Self, RuntimeConfigError> {
        common::read_config(path)
    }
}

static PREPARED: OnceLock<RuntimeInfo> = OnceLock::new();

/// Configures the process for the OpenCL runtime once (see the module docs) and returns what
/// was done. Called by [`crate::OpenClBackend`] and [`crate::list_devices`] before any OpenCL
/// call; call it yourself early in `main` if other threads may read the environment.
pub fn prepare() -> &'static RuntimeInfo {
    PREPARED.get_or_init(prepare_now)
}

fn prepare_now() -> RuntimeInfo {
    let mut info = RuntimeInfo {
        source: RuntimeSource::System,
        config: None,
        runtime_dir: None,
        set_vars: Vec::new(),
        notes: Vec::new(),
    };
    if let Some(v) = env::var_os(OPENCL_DYLIB_PATH) {
        info.source = RuntimeSource::OpenClDylibPath(v.to_string_lossy().into_owned());
        // Not applied, but its folder still holds the default compile cache (for example
        // after `source .runtime/env.sh`).
        info.runtime_dir = discover_config().and_then(|c| common::runtime_dir_of(&c));
        return info;
    }
    if let Some(path) = SPEC.named_by_variable() {
        info.source = RuntimeSource::KfOpenClIcd(path.clone());
        apply_explicit(&path, &mut info);
        return info;
    }
    if let Some(config) = discover_config() {
        info.source = RuntimeSource::Discovered(config.clone());
        apply_config_file(&config, &mut info);
    }
    info
}

/// Finds an `opencl.json` in the order of the module docs' step 3 (a checkout's `.runtime`,
/// the per-user folder, the source checkout).
pub fn discover_config() -> Option<PathBuf> {
    SPEC.discover()
}

fn set_var_if_unset(name: &str, value: &str, info: &mut RuntimeInfo) {
    // See the module docs: called once, before the first OpenCL call.
    common::set_var_if_unset(name, value, &mut info.set_vars);
}

fn apply_explicit(path: &Path, info: &mut RuntimeInfo) {
    match SPEC.classify(path) {
        NamedPath::Config(json) => apply_config_file(&json, info),
        NamedPath::Dir => set_var_if_unset("OCL_ICD_VENDORS", &path.to_string_lossy(), info),
        NamedPath::Missing => info.notes.push(SPEC.missing_note(path)),
        NamedPath::File => apply_driver_file(path, info),
    }
}

/// Applies an `.icd` file or an OpenCL driver library named by `KF_OPENCL_ICD`.
fn apply_driver_file(path: &Path, info: &mut RuntimeInfo) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let library = if name.ends_with(".icd") {
        match fs::read_to_string(path) {
            Ok(text) => PathBuf::from(text.trim()),
            Err(e) => {
                info.notes
                    .push(format!("cannot read {}: {e}", path.display()));
                return;
            }
        }
    } else {
        path.to_path_buf()
    };
    let library = library.to_string_lossy().into_owned();
    if !common::icd_vars_set() {
        set_var_if_unset("OCL_ICD_FILENAMES", &library, info);
    }
    // The system loader when there is one (it then also sees the other installed drivers),
    // else the driver library itself (Intel's and PoCL's export the whole OpenCL API).
    set_var_if_unset(
        OPENCL_DYLIB_PATH,
        &format!("libOpenCL.so.1;{library}"),
        info,
    );
}

fn apply_config_file(path: &Path, info: &mut RuntimeInfo) {
    let Some(config) = SPEC.open::<RuntimeConfig>(path, info) else {
        return;
    };
    if !SPEC.require("runtime", path, &config.icd, info) {
        return;
    }
    common::preload_all(&config.preload, Binding::Local, &mut info.notes);
    if !common::icd_vars_set() {
        match &config.vendors_dir {
            Some(dir) if dir.is_dir() => {
                set_var_if_unset("OCL_ICD_VENDORS", &dir.to_string_lossy(), info);
            }
            _ => set_var_if_unset("OCL_ICD_FILENAMES", &config.icd.to_string_lossy(), info),
        }
    }
    let mut libraries = Vec::new();
    if let Some(loader) = config.loader.as_ref().filter(|l| l.is_file()) {
        libraries.push(loader.to_string_lossy().into_owned());
    }
    libraries.push(config.icd.to_string_lossy().into_owned());
    set_var_if_unset(OPENCL_DYLIB_PATH, &libraries.join(";"), info);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_setup_script_config() {
        let json = r#"{"schema": 1, "loader": "/x/libOpenCL.so.1", "icd": "/x/libintelocl.so",
            "vendors_dir": "/x/vendors", "preload": ["/x/libintlc.so.5"], "platforms": []}"#;
        let c: RuntimeConfig = serde_json::from_str(json).unwrap();
        assert_eq!(c.icd, PathBuf::from("/x/libintelocl.so"));
        assert_eq!(c.preload.len(), 1);
    }

    #[test]
    fn describe_mentions_notes() {
        let info = RuntimeInfo {
            source: RuntimeSource::System,
            config: None,
            runtime_dir: None,
            set_vars: vec![],
            notes: vec!["stale".into()],
        };
        assert!(info.describe().contains("stale"));
    }
}
