//! Finding the OpenCL runtime and configuring the process for it before the first OpenCL
//! call: `OPENCL_DYLIB_PATH`, `KF_OPENCL_ICD`, an `opencl.json` (`kf setup`,
//! `scripts/setup.sh`) and its `preload` libraries, else the system loader.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;

static PREPARED: OnceLock<String> = OnceLock::new();

/// The variable that points at an OpenCL runtime: an `opencl.json` (or a folder holding one,
/// or a `.runtime` folder with one), a folder of `.icd` files, an `.icd` file or a driver
/// library.
pub const KF_OPENCL_ICD: &str = "KF_OPENCL_ICD";

/// Configures the process for the OpenCL runtime once, before the first OpenCL call, and
/// returns what was used. `opencl3` loads the OpenCL library named by `OPENCL_DYLIB_PATH`
/// (else `libOpenCL.so.1`) and the ICD loader reads `OCL_ICD_VENDORS` / `OCL_ICD_FILENAMES`;
/// in this order:
///
/// 1. `OPENCL_DYLIB_PATH` set: nothing is changed.
/// 2. `KF_OPENCL_ICD` set: an `opencl.json`, a folder holding one (or `.runtime/opencl.json`),
///    a folder of `.icd` files, an `.icd` file or a driver library.
/// 3. An `opencl.json` found: `.runtime/opencl.json` above the current directory or the
///    executable (a KernelFoundry checkout after `scripts/setup.sh`), else the per-user
///    folder's (`$XDG_DATA_HOME/kernelfoundry/opencl.json`, what `kf setup` installs), else
///    one above this crate's source.
/// 4. The system's loader and drivers.
///
/// Applying an `opencl.json`: load the libraries listed under `preload` (the Intel runtime's
/// loader needs them and has no `RUNPATH`), then set `OPENCL_DYLIB_PATH` to `loader;icd` and,
/// unless set, `OCL_ICD_VENDORS` (or `OCL_ICD_FILENAMES`). Variables are set only when unset;
/// call [`Device::open`](super::Device::open) early in `main`, before other threads read the environment.
pub fn prepare_runtime() -> &'static str {
    PREPARED.get_or_init(prepare_now)
}

fn prepare_now() -> String {
    if let Some(v) = std::env::var_os("OPENCL_DYLIB_PATH") {
        return format!("OPENCL_DYLIB_PATH={}", v.to_string_lossy());
    }
    if let Some(v) = std::env::var_os(KF_OPENCL_ICD).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(v);
        apply_explicit(&path);
        return format!("{KF_OPENCL_ICD}={}", path.display());
    }
    match discover_config() {
        Some(config) => {
            let note = apply_config(&config);
            format!("runtime config {}{note}", config.display())
        }
        None => "the system OpenCL loader (libOpenCL.so.1)".to_owned(),
    }
}

fn discover_config() -> Option<PathBuf> {
    let walk_up = |start: &Path| {
        start
            .ancestors()
            .map(|d| d.join(".runtime").join("opencl.json"))
            .find(|c| c.is_file())
    };
    let mut starts: Vec<PathBuf> = std::env::current_dir().into_iter().collect();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    let user = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("share"))
        })
        .map(|d| d.join("kernelfoundry").join("opencl.json"));
    starts
        .iter()
        .find_map(|s| walk_up(s))
        .or_else(|| user.filter(|u| u.is_file()))
        .or_else(|| option_env!("CARGO_MANIFEST_DIR").and_then(|d| walk_up(Path::new(d))))
}

fn set_if_unset(name: &str, value: &str) {
    if std::env::var_os(name).is_none() {
        // Once per process, before the OpenCL library is loaded (see `prepare_runtime`).
        std::env::set_var(name, value);
    }
}

fn icd_vars_set() -> bool {
    std::env::var_os("OCL_ICD_VENDORS").is_some() || std::env::var_os("OCL_ICD_FILENAMES").is_some()
}

fn apply_explicit(path: &Path) {
    if path.is_dir() {
        let json = [path.join("opencl.json"), path.join(".runtime/opencl.json")]
            .into_iter()
            .find(|p| p.is_file());
        match json {
            Some(json) => {
                apply_config(&json);
            }
            None => set_if_unset("OCL_ICD_VENDORS", &path.to_string_lossy()),
        }
        return;
    }
    let name = path.to_string_lossy();
    if name.ends_with(".json") {
        apply_config(path);
        return;
    }
    let library = if name.ends_with(".icd") {
        match std::fs::read_to_string(path) {
            Ok(text) => text.trim().to_owned(),
            Err(_) => return,
        }
    } else {
        name.into_owned()
    };
    if !icd_vars_set() {
        set_if_unset("OCL_ICD_FILENAMES", &library);
    }
    set_if_unset("OPENCL_DYLIB_PATH", &format!("libOpenCL.so.1;{library}"));
}

/// The fields of an `opencl.json` (written by `kf setup` or `scripts/setup.sh`) that the run
/// time uses; others are ignored.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct RuntimeConfig {
    /// The OpenCL driver library (the ICD).
    pub(crate) icd: Option<PathBuf>,
    /// The ICD loader to load in place of the system's.
    pub(crate) loader: Option<PathBuf>,
    /// A folder of `.icd` files for the loader.
    pub(crate) vendors_dir: Option<PathBuf>,
    /// Support libraries to load first (the Intel runtime's loader has no `RUNPATH`).
    #[serde(default)]
    pub(crate) preload: Vec<String>,
}

/// Applies an `opencl.json`; returns a note when it could not (`; …`), else nothing.
fn apply_config(path: &Path) -> String {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return format!("; unreadable: {e}"),
    };
    let config: RuntimeConfig = match serde_json::from_str(&text) {
        Ok(c) => c,
        Err(e) => return format!("; not an opencl.json: {e}"),
    };
    let Some(icd) = config.icd.filter(|p| p.is_file()) else {
        return "; the runtime it names is gone (run `kf setup` again)".to_owned();
    };
    for lib in &config.preload {
        preload_library(lib);
    }
    if !icd_vars_set() {
        match config.vendors_dir.filter(|d| d.is_dir()) {
            Some(dir) => set_if_unset("OCL_ICD_VENDORS", &dir.to_string_lossy()),
            None => set_if_unset("OCL_ICD_FILENAMES", &icd.to_string_lossy()),
        }
    }
    let mut libraries: Vec<String> = config
        .loader
        .filter(|l| l.is_file())
        .map(|l| l.to_string_lossy().into_owned())
        .into_iter()
        .collect();
    libraries.push(icd.to_string_lossy().into_owned());
    set_if_unset("OPENCL_DYLIB_PATH", &libraries.join(";"));
    String::new()
}

/// Loads a shared library for the rest of the process (`RTLD_LAZY | RTLD_LOCAL`, never
/// unloaded), so that the OpenCL loader, loaded later, finds it. A library that does not load
/// is skipped: opening the device then reports what the loader says.
fn preload_library(path: &str) {
    let Ok(c_path) = std::ffi::CString::new(path) else {
        return;
    };
    // SAFETY: loading a runtime's support library runs only its ELF initialisers; the handle
    // is deliberately leaked so that the library stays loaded.
    let _ = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
}
