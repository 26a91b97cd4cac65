//! The package index (PyPI's JSON simple API, PEP 691, the one pip reads): choosing the wheel
//! of a requirement for this platform, and downloading it with its sha256 checked.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::blocking::Client;
use reqwest::Url;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::description::{Requirement, VersionSpec};
use crate::error::{io_at, SetupError};

/// The index `kf setup` reads unless `PIP_INDEX_URL` names another (pip's own variable, so
/// that both installers read the same index).
pub const DEFAULT_INDEX: &str = "https://pypi.org/simple/";

/// The media type of PEP 691's JSON project pages.
const SIMPLE_JSON: &str = "application/vnd.pypi.simple.v1+json";

/// A wheel chosen for a requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelFile {
    /// Its file name (`intel_opencl_rt-2026.2.0-py2.py3-none-manylinux_2_28_x86_64.whl`).
    pub filename: String,
    /// Where to download it from.
    pub url: String,
    /// The release's version.
    pub version: String,
    /// The sha256 the index gives, lower-case hex (checked after download when present).
    pub sha256: Option<String>,
    /// Its size in bytes, when the index gives it.
    pub size: Option<u64>,
}

#[derive(Deserialize)]
struct ProjectPage {
    files: Vec<IndexFile>,
}

#[derive(Deserialize)]
struct IndexFile {
    filename: String,
    url: String,
    #[serde(default)]
    hashes: std::collections::HashMap<String, String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    yanked: serde_json::Value,
}

/// A package index to read project pages from and download wheels.
#[derive(Debug, Clone)]
pub struct PackageIndex {
    client: Client,
    base: Url,
}

impl PackageIndex {
    /// The index at `base` (a simple-API root such as [`DEFAULT_INDEX`]).
    pub fn new(base: &str) -> Result<Self, SetupError> {
        let with_slash = if base.ends_with('/') {
            base.to_owned()
        } else {
            format!("{base}/")
        };
        let base = Url::parse(&with_slash).map_err(|e| SetupError::Index {
            url: base.to_owned(),
            detail: format!("not a URL: {e}"),
        })?;
        let client = Client::builder()
            .user_agent(concat!("kf-setup/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30))
            // Whole wheels of a few hundred MB: a generous bound, not a hang.
            .timeout(Duration::from_secs(1800))
            .build()
            .map_err(|source| SetupError::Http {
                url: with_slash.clone(),
                source,
            })?;
        Ok(PackageIndex { client, base })
    }

    /// `PIP_INDEX_URL` when set, else [`DEFAULT_INDEX`].
    pub fn from_env() -> Result<Self, SetupError> {
        match std::env::var("PIP_INDEX_URL") {
            Ok(url) if !url.trim().is_empty() => Self::new(url.trim()),
            _ => Self::new(DEFAULT_INDEX),
        }
    }

    /// The newest release of `requirement` that has a wheel for this platform.
    pub fn find_wheel(&self, requirement: &Requirement) -> Result<WheelFile, SetupError> {
        let platform = Platform::current()?;
        let page_url = self
            .base
            .join(&format!("{}/", requirement.normalized_name()))
            .map_err(|e| SetupError::Index {
                url: self.base.to_string(),
                detail: e.to_string(),
            })?;
        let http = |source| SetupError::Http {
            url: page_url.to_string(),
            source,
        };
        let response = self
            .client
            .get(page_url.clone())
            .header(reqwest::header::ACCEPT, SIMPLE_JSON)
            .send()
            .and_then(|r| r.error_for_status())
            .map_err(http)?;
        let body = response.bytes().map_err(http)?;
        let page: ProjectPage = serde_json::from_slice(&body).map_err(|e| SetupError::Index {
            url: page_url.to_string(),
            detail: format!("not a PEP 691 JSON project page: {e}"),
        })?;
        choose_wheel(&page.files, requirement, &platform, &page_url).ok_or_else(|| {
            SetupError::NoWheel {
                requirement: requirement.to_string(),
                platform: platform.to_string(),
                url: page_url.to_string(),
            }
        })
    }

    /// Downloads `wheel` into `dir`, checking its sha256 while writing; returns the file.
    /// On a mismatch the file is removed and [`SetupError::HashMismatch`] returned.
    pub fn download(&self, wheel: &WheelFile, dir: &Path) -> Result<PathBuf, SetupError> {
        let dest = dir.join(&wheel.filename);
        let http = |source| SetupError::Http {
            url: wheel.url.clone(),
            source,
        };
        let response = self
            .client
            .get(&wheel.url)
            .send()
            .and_then(|r| r.error_for_status())
            .map_err(http)?;
        copy_verified(response, wheel.sha256.as_deref(), &dest)?;
        Ok(dest)
    }
}

/// Copies `reader` into a new file `dest`, hashing on the way; when `expected` (lower-case
/// hex sha256) is given and differs, removes `dest` and returns
/// [`SetupError::HashMismatch`].
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let dest = dir.path().join("x.whl");
/// let err = kf_setup::index::copy_verified(&b"not the wheel"[..], Some("00"), &dest);
/// assert!(matches!(err, Err(kf_setup::SetupError::HashMismatch { .. })));
/// assert!(!dest.exists());
/// ```
pub fn copy_verified(
    mut reader: impl Read,
    expected: Option<&str>,
    dest: &Path,
) -> Result<(), SetupError> {
    let file = File::create(dest).map_err(io_at(dest))?;
    let mut out = BufWriter::new(file);
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_at(dest)(e)),
        };
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io_at(dest))?;
    }
    out.flush().map_err(io_at(dest))?;
    drop(out);
    let actual: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    match expected {
        Some(expected) if !expected.eq_ignore_ascii_case(&actual) => {
            // Best effort: the caller's staging folder goes too.
            let _ = std::fs::remove_file(dest);
            Err(SetupError::HashMismatch {
                file: dest
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                expected: expected.to_ascii_lowercase(),
                actual,
            })
        }
        _ => Ok(()),
    }
}

/// The platform wheels are chosen for (Linux only: the runtimes' wheels are `manylinux`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// The machine (`x86_64`, `aarch64`).
    pub arch: String,
}

impl Platform {
    /// This machine, or [`SetupError::UnsupportedPlatform`] off Linux.
    pub fn current() -> Result<Self, SetupError> {
        if std::env::consts::OS != "linux" {
            return Err(SetupError::UnsupportedPlatform(
                std::env::consts::OS.to_owned(),
            ));
        }
        Ok(Platform {
            arch: std::env::consts::ARCH.to_owned(),
        })
    }

    /// Whether a wheel's platform tag (`manylinux_2_28_x86_64`, `manylinux2014_x86_64`,
    /// `linux_x86_64`, `any`) runs here.
    fn accepts(&self, tag: &str) -> bool {
        tag == "any"
            || ((tag.starts_with("manylinux") || tag.starts_with("linux_"))
                && tag.ends_with(&format!("_{}", self.arch)))
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "linux {}", self.arch)
    }
}

/// A wheel file name's parts: `{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`.
struct WheelName<'a> {
    version: &'a str,
    python: &'a str,
    abi: &'a str,
    platform: &'a str,
}

fn parse_wheel_name(filename: &str) -> Option<WheelName<'_>> {
    let stem = filename.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() != 5 && parts.len() != 6 {
        return None;
    }
    let n = parts.len();
    Some(WheelName {
        version: parts[1],
        python: parts[n - 3],
        abi: parts[n - 2],
        platform: parts[n - 1],
    })
}

/// A version's release segments as numbers for ordering; `None` for a pre-release, a
/// development or a local version (never chosen unless named exactly).
fn release_key(version: &str) -> Option<Vec<u64>> {
    version.split('.').map(|p| p.parse().ok()).collect()
}

/// The newest matching, not yanked, pure-Python-ABI (`none`) wheel for `platform`, with its
/// URL resolved against the page it was listed on.
fn choose_wheel(
    files: &[IndexFile],
    requirement: &Requirement,
    platform: &Platform,
    page_url: &Url,
) -> Option<WheelFile> {
    let exact = matches!(requirement.version, VersionSpec::Exact(_));
    files
        .iter()
        .filter(|f| f.yanked == serde_json::Value::Bool(false) || f.yanked.is_null())
        .filter_map(|f| {
            let name = parse_wheel_name(&f.filename)?;
            let python_ok = name.python.split('.').any(|t| t == "py3");
            let platform_ok = name.platform.split('.').any(|t| platform.accepts(t));
            let version_ok = requirement.version.matches(name.version);
            let key = release_key(name.version);
            (python_ok
                && name.abi == "none"
                && platform_ok
                && version_ok
                && (exact || key.is_some()))
            .then(|| (key.unwrap_or_default(), f, name.version))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .and_then(|(_, f, version)| {
            Some(WheelFile {
                filename: f.filename.clone(),
                url: page_url.join(&f.url).ok()?.to_string(),
                version: version.to_owned(),
                sha256: f.hashes.get("sha256").map(|h| h.to_ascii_lowercase()),
                size: f.size,
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, url: &str) -> IndexFile {
        IndexFile {
            filename: name.to_owned(),
            url: url.to_owned(),
            hashes: [("sha256".to_owned(), "AB".to_owned())].into(),
            size: Some(3),
            yanked: serde_json::Value::Bool(false),
        }
    }

    #[test]
    fn chooses_the_newest_matching_wheel_for_the_platform() {
        let page = Url::parse("https://index.example/simple/nvidia-cuda-nvrtc-cu12/").unwrap();
        let files = vec![
            file("nvidia_cuda_nvrtc_cu12-12.9.41-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl", "a.whl"),
            file("nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl", "../../files/b.whl"),
            file("nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl", "c.whl"),
            file("nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-win_amd64.whl", "d.whl"),
            file("nvidia_cuda_nvrtc_cu12-13.0.48-py3-none-manylinux_2_27_x86_64.whl", "e.whl"),
            file("nvidia_cuda_nvrtc_cu12-12.9.99rc1-py3-none-manylinux_2_27_x86_64.whl", "f.whl"),
            file("nvidia-cuda-nvrtc-cu12-12.9.90.tar.gz", "g.tar.gz"),
        ];
        let req = Requirement::parse("nvidia-cuda-nvrtc-cu12==12.9.*").unwrap();
        let x86 = Platform {
            arch: "x86_64".into(),
        };
        let w = choose_wheel(&files, &req, &x86, &page).unwrap();
        assert_eq!(w.version, "12.9.86");
        // Relative URLs (a mirror's) resolve against the page.
        assert_eq!(w.url, "https://index.example/files/b.whl");
        assert_eq!(w.sha256.as_deref(), Some("ab"));
        let arm = Platform {
            arch: "aarch64".into(),
        };
        assert!(choose_wheel(&files, &req, &arm, &page)
            .unwrap()
            .filename
            .contains("aarch64"));
        let none = Requirement::parse("nvidia-cuda-nvrtc-cu12==12.8.*").unwrap();
        assert!(choose_wheel(&files, &none, &x86, &page).is_none());
    }

    #[test]
    fn yanked_and_binary_abi_wheels_are_skipped() {
        let page = Url::parse("https://index.example/simple/x/").unwrap();
        let mut yanked = file("x-2.0-py3-none-any.whl", "y.whl");
        yanked.yanked = serde_json::Value::String("broken".into());
        let files = vec![
            yanked,
            file("x-1.0-py3-none-any.whl", "ok.whl"),
            file("x-3.0-cp312-cp312-manylinux_2_28_x86_64.whl", "cp.whl"),
        ];
        let req = Requirement::parse("x").unwrap();
        let p = Platform {
            arch: "x86_64".into(),
        };
        assert_eq!(
            choose_wheel(&files, &req, &p, &page).unwrap().version,
            "1.0"
        );
    }

    #[test]
    fn a_download_whose_hash_differs_is_a_typed_error_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("w.whl");
        // sha256("abc")
        let good = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        copy_verified(&b"abc"[..], Some(good), &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"abc");
        let err = copy_verified(&b"abd"[..], Some(good), &dest).unwrap_err();
        match err {
            SetupError::HashMismatch {
                expected, actual, ..
            } => {
                assert_eq!(expected, good);
                assert_ne!(actual, good);
            }
            other => panic!("{other}"),
        }
        assert!(!dest.exists());
    }
}
