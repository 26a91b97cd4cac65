//! Finding a runtime's configuration (`<name>.json`, written by `scripts/setup.sh` into a
//! checkout's `.runtime` folder or by `kf setup` into the per-user folder, see
//! [`discover_config`] for the search order) and preparing the process for it: the pieces every backend's `runtime` module shares.
//!
//! Each backend keeps its own `prepare` (which variables it reads, what its JSON holds, what it
//! sets); this module gives them the discovery walk, the JSON reading, environment updates
//! that never override the caller, library preloading, and the one-line description.

use std::env;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// Why a runtime's configuration could not be read, or a library not preloaded; the message
/// names the file.
#[derive(Debug)]
#[non_exhaustive]
pub enum RuntimeConfigError {
    /// The configuration file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration file is not the JSON expected.
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A library could not be preloaded (the message is the loader's, which names the file).
    Preload {
        /// The library.
        path: PathBuf,
        /// The loader's error.
        source: libloading::Error,
    },
}

impl fmt::Display for RuntimeConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeConfigError::Read { path, source } => write!(f, "{}: {source}", path.display()),
            RuntimeConfigError::Parse { path, source } => {
                write!(f, "{}: {source}", path.display())
            }
            // The loader's message names the file.
            RuntimeConfigError::Preload { source, .. } => write!(f, "{source}"),
        }
    }
}

impl std::error::Error for RuntimeConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RuntimeConfigError::Read { source, .. } => Some(source),
            RuntimeConfigError::Parse { source, .. } => Some(source),
            RuntimeConfigError::Preload { source, .. } => Some(source),
        }
    }
}

/// The name of the folder, under the platform's per-user data directory, that `kf setup`
/// installs runtimes into.
pub const USER_RUNTIME_FOLDER: &str = "kernelfoundry";

/// The per-user runtime folder `kf setup` installs into and every backend looks in:
/// `$XDG_DATA_HOME/kernelfoundry`, or `~/.local/share/kernelfoundry` when `XDG_DATA_HOME` is
/// unset or empty (the XDG base-directory rule, written out as [`crate::cache`] does for the
/// compile cache, so that the backends need no directory crate). `None` without a home.
///
/// It has the layout of a checkout's `.runtime` folder: `opencl.json`, `cuda.json`,
/// `sycl.json` and `venv/` directly inside it.
///
/// ```
/// let dir = kf_backend_common::runtime::user_runtime_dir();
/// assert!(dir.map_or(true, |d| d.ends_with("kernelfoundry")));
/// ```
pub fn user_runtime_dir() -> Option<PathBuf> {
    let base = env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("share"))
        })?;
    Some(base.join(USER_RUNTIME_FOLDER))
}

/// Finds a runtime's configuration file `<file_name>` (`opencl.json`, …) with no variable
/// set by hand. Each backend checks its own variable (`KF_OPENCL_ICD`, …) first; then, in
/// this order:
///
/// 1. **a checkout's `.runtime/<file_name>`**, walking up from the current directory and from
///    the running executable's directory (what `scripts/setup.sh` installs into a clone, so
///    `cargo run` and `cargo test` there use it);
/// 2. **the per-user folder** [`user_runtime_dir`] (what `kf setup` installs, for a `kf`
///    installed with `cargo install` and run anywhere);
/// 3. **`.runtime/<file_name>` above `source_dir`**, the calling crate's `CARGO_MANIFEST_DIR`:
///    the checkout the binary was built from, for a binary run outside it (a test binary in a
///    target folder elsewhere). Last, so that an installed binary prefers what `kf setup`
///    installed for this user over the clone it happened to be built in.
///
/// A configuration file is written last, after the runtime it names is complete (by both
/// `scripts/setup.sh` and `kf setup`), so a file found here never names a half-installed
/// runtime.
///
/// ```
/// let found = kf_backend_common::runtime::discover_config("no-such-runtime.json", env!("CARGO_MANIFEST_DIR"));
/// assert!(found.is_none());
/// ```
pub fn discover_config(file_name: &str, source_dir: &str) -> Option<PathBuf> {
    let mut clone_starts: Vec<PathBuf> = Vec::new();
    if let Ok(dir) = env::current_dir() {
        clone_starts.push(dir);
    }
    if let Some(dir) = env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        clone_starts.push(dir);
    }
    discover_config_from(
        file_name,
        &clone_starts,
        user_runtime_dir().as_deref(),
        Path::new(source_dir),
    )
}

/// [`discover_config`] with its starting points given: the walk-up starts of step 1, the
/// per-user folder of step 2 and the source directory of step 3.
pub fn discover_config_from(
    file_name: &str,
    clone_starts: &[PathBuf],
    user_dir: Option<&Path>,
    source_dir: &Path,
) -> Option<PathBuf> {
    let walk_up = |start: &Path| {
        start
            .ancestors()
            .map(|dir| dir.join(".runtime").join(file_name))
            .find(|candidate| candidate.is_file())
    };
    clone_starts
        .iter()
        .find_map(|start| walk_up(start))
        .or_else(|| {
            user_dir
                .map(|dir| dir.join(file_name))
                .filter(|candidate| candidate.is_file())
        })
        .or_else(|| walk_up(source_dir))
}

/// `dir/<file_name>`, else `dir/.runtime/<file_name>`, when either is a file (a directory
/// named by a backend's variable).
pub fn config_in_dir(dir: &Path, file_name: &str) -> Option<PathBuf> {
    [dir.join(file_name), dir.join(".runtime").join(file_name)]
        .into_iter()
        .find(|p| p.is_file())
}

/// Reads and parses a runtime JSON file; the error names the file.
pub fn read_config<T: DeserializeOwned>(path: &Path) -> Result<T, RuntimeConfigError> {
    let text = fs::read_to_string(path).map_err(|source| RuntimeConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| RuntimeConfigError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a runtime JSON file as [`read_config`] does; when it cannot, notes why and which
/// setup command writes it again (`scripts/setup.sh --cuda`), and returns `None`.
pub fn read_or_note<T: DeserializeOwned>(
    path: &Path,
    setup_command: &str,
    notes: &mut Vec<String>,
) -> Option<T> {
    match read_config(path) {
        Ok(config) => Some(config),
        Err(e) => {
            notes.push(format!(
                "unreadable runtime config {e}; run {setup_command} again"
            ));
            None
        }
    }
}

/// Sets `name` to `value` unless it is already set, recording what was set in `set_vars`.
///
/// Setting variables while another thread reads the environment is a data race in glibc:
/// backends call this once per process, before their runtime is loaded, and document that
/// their `prepare` belongs early in `main`.
pub fn set_var_if_unset(name: &str, value: &str, set_vars: &mut Vec<(String, String)>) {
    if env::var_os(name).is_none() {
        env::set_var(name, value);
        set_vars.push((name.to_owned(), value.to_owned()));
    }
}

/// Whether the caller already chose OpenCL drivers (`OCL_ICD_VENDORS` or `OCL_ICD_FILENAMES`).
pub fn icd_vars_set() -> bool {
    env::var_os("OCL_ICD_VENDORS").is_some() || env::var_os("OCL_ICD_FILENAMES").is_some()
}

/// How a preloaded library's symbols are bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// `RTLD_LAZY | RTLD_LOCAL`: only for later `dlopen`s whose `DT_NEEDED` names its soname.
    Local,
    /// `RTLD_NOW | RTLD_GLOBAL`: a later `dlopen` by soname resolves to it too.
    Global,
}

/// Loads a shared library for the rest of the process (it is never unloaded), so that
/// libraries loaded later find it. The error's message is the loader's.
pub fn preload(path: &Path, binding: Binding) -> Result<(), RuntimeConfigError> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_LAZY, RTLD_LOCAL, RTLD_NOW};
    let flags = match binding {
        Binding::Local => RTLD_LAZY | RTLD_LOCAL,
        Binding::Global => RTLD_NOW | RTLD_GLOBAL,
    };
    // SAFETY: loading a runtime's support library runs only its ELF initialisers, which have
    // no preconditions.
    let lib = unsafe { Library::open(Some(path), flags) }.map_err(|source| {
        RuntimeConfigError::Preload {
            path: path.to_path_buf(),
            source,
        }
    })?;
    // Keep it loaded for the life of the process: the runtime, loaded later, links to it.
    std::mem::forget(lib);
    Ok(())
}

/// Preloads every library of `libraries` in order, noting the ones that fail.
pub fn preload_all(libraries: &[PathBuf], binding: Binding, notes: &mut Vec<String>) {
    for lib in libraries {
        if let Err(e) = preload(lib, binding) {
            notes.push(format!("could not preload {}: {e}", lib.display()));
        }
    }
}

/// `head` followed by `; note` for each note: the one line a `RuntimeInfo::describe` gives.
///
/// ```
/// let line = kf_backend_common::runtime::describe("runtime config x.json", &["stale".to_owned()]);
/// assert_eq!(line, "runtime config x.json; stale");
/// ```
pub fn describe(head: impl Into<String>, notes: &[String]) -> String {
    let mut s = head.into();
    for note in notes {
        s.push_str("; ");
        s.push_str(note);
    }
    s
}

/// A backend's runtime as its `prepare` looks for it: the names that differ between backends
/// (the configuration file, the variable that names a runtime by hand, the setup command
/// that writes the file), and the steps that do not.
///
/// ```
/// use kf_backend_common::runtime::{NamedPath, RuntimeSpec};
/// const SPEC: RuntimeSpec = RuntimeSpec {
///     config_file: "x.json",
///     variable: "KF_X_RUNTIME",
///     setup_command: "scripts/setup.sh --x",
///     source_dir: env!("CARGO_MANIFEST_DIR"),
/// };
/// assert_eq!(SPEC.classify("/no/such/x".as_ref()), NamedPath::Missing);
/// assert_eq!(SPEC.missing_note("/no/such/x".as_ref()), "KF_X_RUNTIME=/no/such/x does not exist");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RuntimeSpec {
    /// The configuration file's name (`opencl.json`).
    pub config_file: &'static str,
    /// The variable an embedder sets to point the backend at a runtime (`KF_OPENCL_ICD`).
    pub variable: &'static str,
    /// The command that writes the configuration file again (`scripts/setup.sh --cuda`).
    pub setup_command: &'static str,
    /// The backend crate's `CARGO_MANIFEST_DIR` (the last place [`discover_config`] looks).
    pub source_dir: &'static str,
}

/// What the path a backend's variable names is ([`RuntimeSpec::classify`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamedPath {
    /// A configuration file: the path itself (a `.json` file), or the one in the directory
    /// named (or in its `.runtime`).
    Config(PathBuf),
    /// A directory holding no configuration file.
    Dir,
    /// Another file (a library, an `.icd` file).
    File,
    /// Nothing is there.
    Missing,
}

/// A backend's `RuntimeInfo`, as far as the shared steps fill it in.
pub trait RuntimeRecord {
    /// Where it records the configuration file applied, its runtime folder and notes.
    fn record(&mut self) -> Record<'_>;
}

/// The parts of a backend's `RuntimeInfo` that every backend has ([`RuntimeRecord`]).
#[derive(Debug)]
pub struct Record<'a> {
    config: &'a mut Option<PathBuf>,
    runtime_dir: &'a mut Option<PathBuf>,
    notes: &'a mut Vec<String>,
}

impl<'a> Record<'a> {
    /// The configuration file applied, the runtime folder holding it (whose `cache/<backend>`
    /// is the default compile cache), and the notes.
    pub fn new(
        config: &'a mut Option<PathBuf>,
        runtime_dir: &'a mut Option<PathBuf>,
        notes: &'a mut Vec<String>,
    ) -> Self {
        Record {
            config,
            runtime_dir,
            notes,
        }
    }
}

impl RuntimeSpec {
    /// The path the backend's variable names, when it is set and not empty.
    pub fn named_by_variable(&self) -> Option<PathBuf> {
        env::var_os(self.variable)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    /// The configuration file found with no variable set ([`discover_config`]).
    pub fn discover(&self) -> Option<PathBuf> {
        discover_config(self.config_file, self.source_dir)
    }

    /// What `path` (named by the variable) is: a configuration file, a directory without
    /// one, another file, or nothing.
    pub fn classify(&self, path: &Path) -> NamedPath {
        if path.is_dir() {
            return match config_in_dir(path, self.config_file) {
                Some(config) => NamedPath::Config(config),
                None => NamedPath::Dir,
            };
        }
        if !path.is_file() {
            return NamedPath::Missing;
        }
        if path.extension().is_some_and(|e| e == "json") {
            NamedPath::Config(path.to_path_buf())
        } else {
            NamedPath::File
        }
    }

    /// The note for a variable naming nothing: `KF_X=<path> does not exist`.
    pub fn missing_note(&self, path: &Path) -> String {
        format!("{}={} does not exist", self.variable, path.display())
    }

    /// Records `path` as the configuration file applied (and its folder as the runtime
    /// folder) and reads it; `None`, noted with the setup command, when it cannot be read.
    pub fn open<T: DeserializeOwned>(
        &self,
        path: &Path,
        info: &mut impl RuntimeRecord,
    ) -> Option<T> {
        let record = info.record();
        *record.config = Some(path.to_path_buf());
        *record.runtime_dir = runtime_dir_of(path);
        read_or_note(path, self.setup_command, record.notes)
    }

    /// Whether `needed`, which the configuration file `config` names, is still there; when it
    /// is gone, notes that the `what` it names is gone and which command installs it again.
    pub fn require(
        &self,
        what: &str,
        config: &Path,
        needed: &Path,
        info: &mut impl RuntimeRecord,
    ) -> bool {
        if needed.is_file() {
            return true;
        }
        info.record().notes.push(format!(
            "the {what} named by {} is gone ({} is missing); run {} again",
            config.display(),
            needed.display(),
            self.setup_command
        ));
        false
    }
}

/// The folder holding a runtime config (the `.runtime` folder), whose `cache/<backend>` is
/// the default compile cache.
pub fn runtime_dir_of(config: &Path) -> Option<PathBuf> {
    config.parent().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_config_walking_up() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = dir.path().join(".runtime");
        fs::create_dir_all(&runtime).unwrap();
        fs::write(runtime.join("x.json"), "{}").unwrap();
        let deep = dir.path().join("a/b");
        fs::create_dir_all(&deep).unwrap();
        assert_eq!(
            discover_config("x.json", deep.to_str().unwrap()),
            Some(runtime.join("x.json"))
        );
        assert_eq!(
            config_in_dir(dir.path(), "x.json"),
            Some(runtime.join("x.json"))
        );
        let v: serde_json::Value = read_config(&runtime.join("x.json")).unwrap();
        assert!(v.is_object());
        assert!(read_config::<serde_json::Value>(&dir.path().join("none")).is_err());
        let mut notes = Vec::new();
        let none: Option<serde_json::Value> =
            read_or_note(&dir.path().join("none"), "scripts/setup.sh --x", &mut notes);
        assert!(none.is_none());
        assert!(
            notes[0].ends_with("; run scripts/setup.sh --x again"),
            "{notes:?}"
        );
    }

    /// The record a backend's `RuntimeInfo` keeps, for [`RuntimeSpec`]'s steps.
    #[derive(Default)]
    struct Info {
        config: Option<PathBuf>,
        runtime_dir: Option<PathBuf>,
        notes: Vec<String>,
    }

    impl RuntimeRecord for Info {
        fn record(&mut self) -> Record<'_> {
            Record::new(&mut self.config, &mut self.runtime_dir, &mut self.notes)
        }
    }

    #[test]
    fn a_spec_classifies_what_its_variable_names_and_opens_configs() {
        let dir = tempfile::tempdir().unwrap();
        let spec = RuntimeSpec {
            config_file: "x.json",
            variable: "KF_X_RUNTIME",
            setup_command: "scripts/setup.sh --x",
            source_dir: env!("CARGO_MANIFEST_DIR"),
        };
        let runtime = dir.path().join(".runtime");
        fs::create_dir_all(&runtime).unwrap();
        let config = runtime.join("x.json");
        fs::write(&config, r#"{"lib": "/gone/libx.so"}"#).unwrap();
        let library = dir.path().join("libx.so");
        fs::write(&library, b"").unwrap();
        let empty = dir.path().join("empty");
        fs::create_dir_all(&empty).unwrap();
        assert_eq!(spec.classify(dir.path()), NamedPath::Config(config.clone()));
        assert_eq!(spec.classify(&config), NamedPath::Config(config.clone()));
        assert_eq!(spec.classify(&empty), NamedPath::Dir);
        assert_eq!(spec.classify(&library), NamedPath::File);
        assert_eq!(spec.classify(&dir.path().join("none")), NamedPath::Missing);

        let mut info = Info::default();
        let read: Option<serde_json::Value> = spec.open(&config, &mut info);
        assert_eq!(read.unwrap()["lib"], "/gone/libx.so");
        assert_eq!(info.config.as_deref(), Some(config.as_path()));
        assert_eq!(info.runtime_dir.as_deref(), Some(runtime.as_path()));
        assert!(spec.require("runtime", &config, &library, &mut info));
        assert!(!spec.require("runtime", &config, Path::new("/gone/libx.so"), &mut info));
        assert_eq!(
            info.notes,
            [format!(
                "the runtime named by {} is gone (/gone/libx.so is missing); run \
                 scripts/setup.sh --x again",
                config.display()
            )]
        );
        let unreadable: Option<serde_json::Value> = spec.open(&library, &mut info);
        assert!(unreadable.is_none());
        assert!(info.notes[1].ends_with("; run scripts/setup.sh --x again"));
    }

    #[test]
    fn search_order_is_clone_then_user_folder_then_source_checkout() {
        let root = tempfile::tempdir().unwrap();
        let make = |dir: &Path| {
            fs::create_dir_all(dir).unwrap();
            fs::write(dir.join("x.json"), "{}").unwrap();
            dir.join("x.json")
        };
        let clone_config = make(&root.path().join("clone/.runtime"));
        let user_config = make(&root.path().join("user/kernelfoundry"));
        let source_config = make(&root.path().join("source/.runtime"));
        let clone_cwd = root.path().join("clone/sub");
        let elsewhere = root.path().join("elsewhere");
        fs::create_dir_all(&clone_cwd).unwrap();
        fs::create_dir_all(&elsewhere).unwrap();
        let user = root.path().join("user/kernelfoundry");
        let source = root.path().join("source/crate");
        // Run from a clone: its .runtime wins over the per-user folder.
        let found = discover_config_from(
            "x.json",
            std::slice::from_ref(&clone_cwd),
            Some(&user),
            &source,
        );
        assert_eq!(found, Some(clone_config));
        // Run elsewhere: the per-user folder wins over the checkout the binary was built in.
        let found = discover_config_from(
            "x.json",
            std::slice::from_ref(&elsewhere),
            Some(&user),
            &source,
        );
        assert_eq!(found, Some(user_config.clone()));
        // No per-user install (or no home): the source checkout, last.
        let empty_user = root.path().join("nobody/kernelfoundry");
        let found = discover_config_from(
            "x.json",
            std::slice::from_ref(&elsewhere),
            Some(&empty_user),
            &source,
        );
        assert_eq!(found, Some(source_config));
        let found = discover_config_from(
            "x.json",
            std::slice::from_ref(&elsewhere),
            None,
            &elsewhere.join("x"),
        );
        assert_eq!(found, None);
        // The per-user folder holds the file directly, not under .runtime/.
        assert_eq!(user_config.parent(), Some(user.as_path()));
    }

    #[test]
    fn preloading_a_missing_library_fails() {
        assert!(preload(Path::new("/nonexistent/libx.so"), Binding::Local).is_err());
        let mut notes = Vec::new();
        preload_all(
            &[PathBuf::from("/nonexistent/liby.so")],
            Binding::Global,
            &mut notes,
        );
        assert_eq!(notes.len(), 1);
    }
}
