//! The shared description of what to install (`runtimes.toml`): which runtimes exist and
//! which PyPI packages, at which versions, make each one. `scripts/setup.sh` reads the same
//! file (with pip); this crate embeds it ([`Description::embedded`]).

use std::fmt;

use indexmap::IndexMap;
use serde::Deserialize;

use crate::error::DescriptionError;

/// The description as shipped: `runtimes.toml` of this crate, embedded when it was built.
pub const EMBEDDED: &str = include_str!("../runtimes.toml");

/// Which releases of a package a requirement accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSpec {
    /// Any release (the newest is taken).
    Any,
    /// Exactly this version (`==2026.2.0`).
    Exact(String),
    /// Any version whose leading components are these (`==12.9.*`: `["12", "9"]`).
    Prefix(Vec<String>),
}

impl VersionSpec {
    /// Whether `version` satisfies the spec (release segments compared as text, as PEP 440's
    /// `==` does for the plain versions this file uses).
    ///
    /// ```
    /// use kf_setup::description::VersionSpec;
    /// let spec = VersionSpec::Prefix(vec!["12".into(), "9".into()]);
    /// assert!(spec.matches("12.9.86"));
    /// assert!(!spec.matches("12.10.1"));
    /// ```
    pub fn matches(&self, version: &str) -> bool {
        match self {
            VersionSpec::Any => true,
            VersionSpec::Exact(v) => v == version,
            VersionSpec::Prefix(parts) => {
                let have: Vec<&str> = version.split('.').collect();
                have.len() > parts.len() && parts.iter().zip(&have).all(|(a, b)| a == b)
            }
        }
    }
}

/// One package of a runtime: a pip requirement `name`, `name==version` or `name==X.Y.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The distribution's name as written (`intel-opencl-rt`).
    pub name: String,
    /// Which versions it accepts.
    pub version: VersionSpec,
}

impl Requirement {
    /// Parses a requirement of the forms this file uses.
    ///
    /// ```
    /// use kf_setup::description::{Requirement, VersionSpec};
    /// let r = Requirement::parse("tbb==2023.2.0").unwrap();
    /// assert_eq!(r.name, "tbb");
    /// assert_eq!(r.version, VersionSpec::Exact("2023.2.0".into()));
    /// ```
    pub fn parse(text: &str) -> Result<Self, DescriptionError> {
        let bad = || DescriptionError::BadRequirement(text.to_owned());
        let (name, version) = match text.split_once("==") {
            None => (text.trim(), VersionSpec::Any),
            Some((name, version)) => {
                let version = version.trim();
                let spec = match version.strip_suffix(".*") {
                    Some(prefix) => {
                        VersionSpec::Prefix(prefix.split('.').map(str::to_owned).collect())
                    }
                    None => VersionSpec::Exact(version.to_owned()),
                };
                (name.trim(), spec)
            }
        };
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let version_ok = match &version {
            VersionSpec::Any => true,
            VersionSpec::Exact(v) => plain(v),
            VersionSpec::Prefix(parts) => parts.iter().all(|p| plain(p)),
        };
        if !plain(name) || !version_ok {
            return Err(bad());
        }
        Ok(Requirement {
            name: name.to_owned(),
            version,
        })
    }

    /// The name as the package index spells it (PEP 503: lower case, runs of `-_.` as `-`).
    pub fn normalized_name(&self) -> String {
        let mut out = String::with_capacity(self.name.len());
        for c in self.name.chars() {
            let c = if matches!(c, '_' | '.') { '-' } else { c };
            if !(c == '-' && out.ends_with('-')) {
                out.push(c.to_ascii_lowercase());
            }
        }
        out
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.version {
            VersionSpec::Any => write!(f, "{}", self.name),
            VersionSpec::Exact(v) => write!(f, "{}=={v}", self.name),
            VersionSpec::Prefix(parts) => write!(f, "{}=={}.*", self.name, parts.join(".")),
        }
    }
}

/// One runtime of the description.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// Its name (`opencl`, `cuda`, `sycl`, `numpy`): the `[runtime.NAME]` table, the
    /// `--NAME` flag of both installers, and `NAME.json` of the configuration it gets.
    pub name: String,
    /// One line saying what it is.
    pub summary: String,
    /// Runtimes installed first (SYCL's CPU device is the OpenCL runtime's).
    pub requires: Vec<String>,
    /// Installed with pip into a Python virtual environment (NumPy), not unpacked from wheels.
    pub python: bool,
    /// Its packages, the whole closure.
    pub packages: Vec<Requirement>,
}

/// The parsed `runtimes.toml`.
#[derive(Debug, Clone)]
pub struct Description {
    runtimes: IndexMap<String, Runtime>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    schema: u32,
    runtime: IndexMap<String, RuntimeToml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeToml {
    summary: String,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default)]
    python: bool,
    packages: Vec<String>,
}

/// The format version this parser reads.
pub const SCHEMA: u32 = 1;

impl Description {
    /// The description this crate was built with.
    ///
    /// ```
    /// let d = kf_setup::Description::embedded().unwrap();
    /// assert!(d.runtime("opencl").is_some());
    /// ```
    pub fn embedded() -> Result<Self, DescriptionError> {
        Self::parse(EMBEDDED)
    }

    /// Parses a description; every package must be a requirement of the forms above, and
    /// every `requires` a runtime of the file.
    pub fn parse(text: &str) -> Result<Self, DescriptionError> {
        let file: FileToml = toml::from_str(text)?;
        if file.schema != SCHEMA {
            return Err(DescriptionError::Schema {
                found: file.schema,
                expected: SCHEMA,
            });
        }
        let mut runtimes = IndexMap::new();
        for (name, raw) in &file.runtime {
            for required in &raw.requires {
                if !file.runtime.contains_key(required) || required == name {
                    return Err(DescriptionError::UnknownRequirement {
                        runtime: name.clone(),
                        requires: required.clone(),
                    });
                }
            }
            if raw.packages.is_empty() {
                return Err(DescriptionError::NoPackages(name.clone()));
            }
            let packages = raw
                .packages
                .iter()
                .map(|p| Requirement::parse(p))
                .collect::<Result<Vec<_>, _>>()?;
            runtimes.insert(
                name.clone(),
                Runtime {
                    name: name.clone(),
                    summary: raw.summary.clone(),
                    requires: raw.requires.clone(),
                    python: raw.python,
                    packages,
                },
            );
        }
        Ok(Description { runtimes })
    }

    /// The runtime called `name`, if the description has one.
    pub fn runtime(&self, name: &str) -> Option<&Runtime> {
        self.runtimes.get(name)
    }

    /// Every runtime, in the file's order.
    pub fn runtimes(&self) -> impl Iterator<Item = &Runtime> {
        self.runtimes.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_description_parses_and_names_what_the_backends_need() {
        let d = Description::embedded().unwrap();
        let names: Vec<&str> = d.runtimes().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["opencl", "cuda", "sycl", "numpy", "pyopencl"]);
        let opencl = d.runtime("opencl").unwrap();
        assert!(opencl
            .packages
            .iter()
            .any(|p| p.name == "intel-opencl-rt" && matches!(p.version, VersionSpec::Exact(_))));
        let cuda = d.runtime("cuda").unwrap();
        assert_eq!(
            cuda.packages[0].version,
            VersionSpec::Prefix(vec!["12".into(), "9".into()])
        );
        assert_eq!(d.runtime("sycl").unwrap().requires, ["opencl"]);
        assert!(d.runtime("numpy").unwrap().python);
    }

    #[test]
    fn requirements_round_trip_and_bad_ones_are_refused() {
        for text in ["numpy", "tbb==2023.2.0", "nvidia-cuda-nvrtc-cu12==12.9.*"] {
            assert_eq!(Requirement::parse(text).unwrap().to_string(), text);
        }
        for bad in ["", "numpy>=2", "a==", "a b==1", "x==1;rm"] {
            assert!(
                matches!(
                    Requirement::parse(bad),
                    Err(DescriptionError::BadRequirement(_))
                ),
                "{bad}"
            );
        }
        let r = Requirement::parse("Intel_CMPLR.lib-rt==1").unwrap();
        assert_eq!(r.normalized_name(), "intel-cmplr-lib-rt");
    }

    #[test]
    fn version_specs_match_as_pip_does() {
        let exact = VersionSpec::Exact("2026.2.0".into());
        assert!(exact.matches("2026.2.0") && !exact.matches("2026.2.1"));
        let prefix = VersionSpec::Prefix(vec!["12".into(), "9".into()]);
        assert!(prefix.matches("12.9.41") && prefix.matches("12.9.86"));
        assert!(!prefix.matches("12.9") && !prefix.matches("12.90.1") && !prefix.matches("13.9.1"));
        assert!(VersionSpec::Any.matches("1.0"));
    }

    #[test]
    fn malformed_descriptions_are_typed_errors() {
        let unknown =
            "schema = 1\n[runtime.a]\nsummary = \"a\"\nrequires = [\"b\"]\npackages = [\"x\"]\n";
        assert!(matches!(
            Description::parse(unknown),
            Err(DescriptionError::UnknownRequirement { .. })
        ));
        let schema = "schema = 2\n[runtime.a]\nsummary = \"a\"\npackages = [\"x\"]\n";
        assert!(matches!(
            Description::parse(schema),
            Err(DescriptionError::Schema { found: 2, .. })
        ));
        let empty = "schema = 1\n[runtime.a]\nsummary = \"a\"\npackages = []\n";
        assert!(matches!(
            Description::parse(empty),
            Err(DescriptionError::NoPackages(_))
        ));
        let typo = "schema = 1\n[runtime.a]\nsumary = \"a\"\npackages = [\"x\"]\n";
        assert!(matches!(
            Description::parse(typo),
            Err(DescriptionError::Toml(_))
        ));
    }
}
