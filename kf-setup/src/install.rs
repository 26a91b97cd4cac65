//! Installing runtimes into a folder: resolve, download, verify, unpack into a staging folder,
//! then move into place.
//!
//! # Atomicity
//!
//! A backend picks a runtime up only through its configuration file (`ROOT/opencl.json`, …;
//! see `kf_backend_common::runtime::discover_config`). An installation therefore builds
//! everything in `ROOT/.staging-XXXX/` (the downloads, the unpacked prefix, the
//! configuration naming the final paths), and commits in this order: remove the old
//! configuration (if any), move the old prefix aside, rename the new prefix to `ROOT/NAME`,
//! and last rename the new configuration to `ROOT/NAME.json` (a rename within one folder,
//! atomic). A crash or a failure at any point leaves either no configuration (nothing picked
//! up; the backend falls back as if nothing were installed) or a configuration naming a
//! complete runtime. Leftover staging folders are removed by the next run.
//!
//! # Concurrency
//!
//! One installation at a time per folder: an exclusive lock on `ROOT/.setup.lock` is held
//! for the whole run, so a second `kf setup` waits and then finds the runtime installed.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::configure::{self, Layout};
use crate::description::{Description, Runtime};
use crate::error::{io_at, SetupError};
use crate::index::PackageIndex;
use crate::wheel;

/// The prefix of staging folders inside the root.
const STAGING_PREFIX: &str = ".staging-";
/// The prefix of replaced installations being removed.
const OLD_PREFIX: &str = ".old-";

/// What [`Installer::install`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Installed now; the configuration file (or the virtual environment) it wrote.
    Installed(PathBuf),
    /// It was installed already, as the description asks; nothing was downloaded.
    AlreadyInstalled(PathBuf),
}

/// Installs the runtimes of a [`Description`] into one folder (the per-user folder by
/// default, see [`Installer::for_user`]).
///
/// ```no_run
/// use kf_setup::{Description, Installer, Outcome};
/// let description = Description::embedded()?;
/// let mut installer = Installer::for_user()?;
/// for outcome in installer.install_with_requirements(&description, "opencl")? {
///     if let Outcome::AlreadyInstalled(config) = outcome {
///         println!("already installed: {}", config.display());
///     }
/// }
/// # Ok::<(), kf_setup::SetupError>(())
/// ```
pub struct Installer {
    root: PathBuf,
    index: Option<PackageIndex>,
    python: PathBuf,
    progress: Box<dyn FnMut(&str) + Send>,
}

impl std::fmt::Debug for Installer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Installer")
            .field("root", &self.root)
            .field("python", &self.python)
            .finish_non_exhaustive()
    }
}

impl Installer {
    /// An installer into `root` (created when missing), reading the package index of
    /// `PIP_INDEX_URL` or PyPI, creating virtual environments with `$PYTHON` or `python3`,
    /// and printing progress to stderr.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let python = std::env::var_os("PYTHON")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("python3"));
        Installer {
            root: root.into(),
            index: None,
            python,
            progress: Box::new(|line| eprintln!("[setup] {line}")),
        }
    }

    /// An installer into the per-user folder every backend looks in
    /// (`kf_backend_common::runtime::user_runtime_dir`).
    pub fn for_user() -> Result<Self, SetupError> {
        kf_backend_common::runtime::user_runtime_dir()
            .map(Self::new)
            .ok_or(SetupError::NoUserDir)
    }

    /// Reads packages from this index instead.
    pub fn with_index(mut self, index: PackageIndex) -> Self {
        self.index = Some(index);
        self
    }

    /// Sends progress lines here instead of stderr.
    pub fn with_progress(mut self, progress: impl FnMut(&str) + Send + 'static) -> Self {
        self.progress = Box::new(progress);
        self
    }

    /// The folder installed into.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Installs `name` after the runtimes it requires, each unless already installed.
    pub fn install_with_requirements(
        &mut self,
        description: &Description,
        name: &str,
    ) -> Result<Vec<Outcome>, SetupError> {
        let runtime = description
            .runtime(name)
            .ok_or_else(|| SetupError::UnknownRuntime(name.to_owned()))?;
        let mut outcomes = Vec::new();
        for required in &runtime.requires {
            outcomes.extend(self.install_with_requirements(description, required)?);
        }
        outcomes.push(self.install(runtime)?);
        Ok(outcomes)
    }

    /// Installs one runtime (not the ones it requires) unless it is installed as described.
    pub fn install(&mut self, runtime: &Runtime) -> Result<Outcome, SetupError> {
        fs::create_dir_all(&self.root).map_err(io_at(&self.root))?;
        let _lock = self.lock()?;
        self.remove_leftovers();
        if runtime.python {
            return self.install_venv(runtime);
        }
        let config_path = self.root.join(format!("{}.json", runtime.name));
        if installed_as_described(&config_path, runtime) {
            return Ok(Outcome::AlreadyInstalled(config_path));
        }
        let index = match &self.index {
            Some(index) => index.clone(),
            None => PackageIndex::from_env()?,
        };
        let staging = self.staging()?;
        let prefix = staging.path().join("prefix");
        let downloads = staging.path().join("downloads");
        fs::create_dir_all(&downloads).map_err(io_at(&downloads))?;
        let mut packages = Vec::new();
        let mut versions = Vec::new();
        for requirement in &runtime.packages {
            let wheel = index.find_wheel(requirement)?;
            let size = wheel
                .size
                .map(|s| format!(", {:.0} MB", s as f64 / 1e6))
                .unwrap_or_default();
            (self.progress)(&format!(
                "{}: downloading {} {}{size}",
                runtime.name, requirement.name, wheel.version
            ));
            let file = index.download(&wheel, &downloads)?;
            wheel::unpack(&file, &prefix)?;
            // Unpacked: the wheel is not needed any more (they are large).
            fs::remove_file(&file).map_err(io_at(&file))?;
            packages.push(format!("{}=={}", requirement.name, wheel.version));
            versions.push(wheel.version);
        }
        let final_prefix = self.root.join(&runtime.name);
        let requirements: Vec<String> = runtime.packages.iter().map(|p| p.to_string()).collect();
        let layout = Layout {
            runtime: &runtime.name,
            staged: &prefix,
            final_prefix: &final_prefix,
            root: &self.root,
            packages: &packages,
            requirements: &requirements,
        };
        let first_version = versions.first().map(String::as_str).unwrap_or_default();
        let config = match runtime.name.as_str() {
            "opencl" => configure::opencl(&layout)?,
            "cuda" => {
                let series: Vec<&str> = first_version.split('.').take(2).collect();
                configure::cuda(&layout, &series.join("."))?
            }
            "sycl" => configure::sycl(&layout, first_version)?,
            other => return Err(SetupError::NotConfigurable(other.to_owned())),
        };
        let staged_config = staging.path().join("config.json");
        let text = serde_json::to_string_pretty(&config).map_err(|source| SetupError::Json {
            path: staged_config.clone(),
            source,
        })?;
        fs::write(&staged_config, text + "\n").map_err(io_at(&staged_config))?;
        self.commit(&prefix, &final_prefix, Some((&staged_config, &config_path)))?;
        (self.progress)(&format!(
            "{}: installed {} ({})",
            runtime.name,
            final_prefix.display(),
            packages.join(", ")
        ));
        Ok(Outcome::Installed(config_path))
    }

    /// NumPy & co.: a virtual environment `ROOT/venv` made with the Python at hand and pip
    /// (the wheel depends on that Python), staged and moved into place like the others.
    fn install_venv(&mut self, runtime: &Runtime) -> Result<Outcome, SetupError> {
        let venv = self.root.join("venv");
        let requirements: Vec<String> = runtime.packages.iter().map(|p| p.to_string()).collect();
        let marker = venv.join("kf-setup-requirements.txt");
        let python = venv.join("bin").join("python");
        let imports = runtime
            .packages
            .iter()
            .map(|p| p.normalized_name().replace('-', "_"))
            .collect::<Vec<_>>()
            .join(", ");
        if fs::read_to_string(&marker).is_ok_and(|m| m == requirements.join("\n"))
            && run(Command::new(&python).args(["-c", &format!("import {imports}")])).is_ok()
        {
            return Ok(Outcome::AlreadyInstalled(venv));
        }
        let staging = self.staging()?;
        let staged = staging.path().join("venv");
        (self.progress)(&format!(
            "{}: creating a virtual environment with {}",
            runtime.name,
            self.python.display()
        ));
        run(Command::new(&self.python)
            .arg("-m")
            .arg("venv")
            .arg(&staged))
        .map_err(|e| match e {
            SetupError::Command { command, detail } => SetupError::Command {
                command,
                detail: format!("{detail} (Debian: apt-get install python3-venv; or set PYTHON)"),
            },
            other => other,
        })?;
        (self.progress)(&format!(
            "{}: pip install {}",
            runtime.name,
            requirements.join(" ")
        ));
        let staged_python = staged.join("bin").join("python");
        run(Command::new(&staged_python)
            .args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
            .args(&requirements))?;
        run(Command::new(&staged_python).args(["-c", &format!("import {imports}")]))?;
        let staged_marker = staged.join("kf-setup-requirements.txt");
        fs::write(&staged_marker, requirements.join("\n")).map_err(io_at(&staged_marker))?;
        self.commit(&staged, &venv, None)?;
        (self.progress)(&format!("{}: installed {}", runtime.name, venv.display()));
        Ok(Outcome::Installed(venv))
    }

    /// Moves a staged installation into place (see the module docs for the order).
    fn commit(
        &self,
        staged: &Path,
        target: &Path,
        config: Option<(&Path, &Path)>,
    ) -> Result<(), SetupError> {
        if let Some((_, final_config)) = config {
            match fs::remove_file(final_config) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_at(final_config)(e))
                }
                _ => {}
            }
        }
        let old = self.root.join(format!(
            "{OLD_PREFIX}{}-{}",
            target
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            std::process::id()
        ));
        let replaced = target.exists();
        if replaced {
            fs::rename(target, &old).map_err(io_at(target))?;
        }
        fs::rename(staged, target).map_err(io_at(target))?;
        if let Some((staged_config, final_config)) = config {
            fs::rename(staged_config, final_config).map_err(io_at(final_config))?;
        }
        if replaced {
            let _ = fs::remove_dir_all(&old);
        }
        Ok(())
    }

    fn lock(&self) -> Result<File, SetupError> {
        let path = self.root.join(".setup.lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_at(&path))?;
        file.lock().map_err(io_at(&path))?;
        Ok(file)
    }

    fn staging(&self) -> Result<tempfile::TempDir, SetupError> {
        tempfile::Builder::new()
            .prefix(STAGING_PREFIX)
            .tempdir_in(&self.root)
            .map_err(io_at(&self.root))
    }

    /// Removes the staging folders and replaced installations of runs that stopped half-way
    /// (under the lock, no other run is using them).
    fn remove_leftovers(&self) {
        let Ok(entries) = fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(STAGING_PREFIX) || name.starts_with(OLD_PREFIX) {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// Whether `config` exists, was written for the description's requirements, and the file it
/// names is there.
fn installed_as_described(config: &Path, runtime: &Runtime) -> bool {
    let Ok(text) = fs::read_to_string(config) else {
        return false;
    };
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        return false;
    };
    let wanted: Vec<String> = runtime.packages.iter().map(|p| p.to_string()).collect();
    let recorded: Option<Vec<String>> = value
        .get("requirements")
        .and_then(|r| serde_json::from_value(r.clone()).ok());
    recorded.as_ref() == Some(&wanted) && configure::key_file(&value).is_some_and(|f| f.exists())
}

/// Runs a command quietly; its last lines of output make the error.
fn run(command: &mut Command) -> Result<(), SetupError> {
    let line = format!("{command:?}");
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| SetupError::Command {
            command: line.clone(),
            detail: e.to_string(),
        })?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    let tail: Vec<&str> = text.lines().rev().take(8).collect();
    Err(SetupError::Command {
        command: line,
        detail: format!(
            "{}: {}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::description::Requirement;

    fn runtime(name: &str) -> Runtime {
        Runtime {
            name: name.into(),
            summary: String::new(),
            requires: vec![],
            python: false,
            packages: vec![Requirement::parse("x==1.0").unwrap()],
        }
    }

    #[test]
    fn an_interrupted_install_leaves_nothing_a_backend_would_pick_up() {
        let root = tempfile::tempdir().unwrap();
        let installer = Installer::new(root.path());
        // A run that stopped after unpacking, before its commit: a staging folder with a
        // complete prefix and configuration, and nothing else.
        let staging = installer.staging().unwrap().keep();
        fs::create_dir_all(staging.join("prefix/lib")).unwrap();
        fs::write(staging.join("prefix/lib/libintelocl.so"), b"elf").unwrap();
        fs::write(staging.join("config.json"), "{}").unwrap();
        let found = kf_backend_common::runtime::discover_config_from(
            "opencl.json",
            &[],
            Some(root.path()),
            Path::new("/nonexistent"),
        );
        assert_eq!(found, None, "a staging folder must not be discovered");
        assert!(!installed_as_described(
            &root.path().join("opencl.json"),
            &runtime("opencl")
        ));
        // The next run removes it (under the lock).
        let _lock = installer.lock().unwrap();
        installer.remove_leftovers();
        assert!(!staging.exists());
    }

    #[test]
    fn commit_replaces_the_prefix_and_writes_the_configuration_last() {
        let root = tempfile::tempdir().unwrap();
        let installer = Installer::new(root.path());
        let target = root.path().join("opencl");
        let config = root.path().join("opencl.json");
        for generation in ["1", "2"] {
            let staging = installer.staging().unwrap();
            let prefix = staging.path().join("prefix");
            fs::create_dir_all(prefix.join("lib")).unwrap();
            fs::write(prefix.join("lib/libintelocl.so"), generation).unwrap();
            let staged_config = staging.path().join("config.json");
            let json = serde_json::json!({
                "requirements": ["x==1.0"],
                "icd": target.join("lib/libintelocl.so"),
            });
            fs::write(&staged_config, json.to_string()).unwrap();
            installer
                .commit(&prefix, &target, Some((&staged_config, &config)))
                .unwrap();
            assert_eq!(
                fs::read_to_string(target.join("lib/libintelocl.so")).unwrap(),
                generation
            );
        }
        assert!(installed_as_described(&config, &runtime("opencl")));
        // The description asks for other packages now: not installed as described.
        let mut other = runtime("opencl");
        other.packages = vec![Requirement::parse("x==2.0").unwrap()];
        assert!(!installed_as_described(&config, &other));
        // Nothing but the prefix, its configuration and the lock is left.
        let mut names: Vec<String> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["opencl", "opencl.json"]);
    }

    #[test]
    fn a_runtime_the_description_lacks_is_a_typed_error() {
        let root = tempfile::tempdir().unwrap();
        let mut installer = Installer::new(root.path());
        let description = Description::embedded().unwrap();
        assert!(matches!(
            installer.install_with_requirements(&description, "rocm"),
            Err(SetupError::UnknownRuntime(_))
        ));
    }
}
