//! Kernel source text, its language, and the compile-time parameter values it is built with.

use std::fmt;
use std::sync::Arc;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// The language a kernel is written in; each backend accepts one or more of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Language {
    /// OpenCL C (`__kernel void f(__global float* a, …)`).
    OpenCl,
    /// SYCL 2020 free-function kernels, compiled at run time by the SYCL runtime.
    Sycl,
    /// CUDA C++ compiled by NVRTC.
    Cuda,
}

impl Language {
    /// The manifest spelling: `opencl`, `sycl` or `cuda`.
    pub fn as_str(self) -> &'static str {
        match self {
            Language::OpenCl => "opencl",
            Language::Sycl => "sycl",
            Language::Cuda => "cuda",
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Language {
    type Err = crate::CoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "opencl" | "opencl-c" | "cl" => Ok(Language::OpenCl),
            "sycl" => Ok(Language::Sycl),
            "cuda" | "cu" => Ok(Language::Cuda),
            other => Err(crate::CoreError::UnknownLanguage(other.to_owned())),
        }
    }
}

/// One value of a compile-time parameter, passed to the compiler as `-D NAME=value`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    /// A boolean flag, rendered as `1` / `0`.
    Bool(bool),
    /// An integer such as a tile size.
    Int(i64),
    /// A floating-point constant.
    Float(f64),
    /// A categorical value rendered verbatim (for example a type name such as `float4`).
    Text(String),
}

impl ParamValue {
    /// The integer value, if this is an integer or boolean.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            ParamValue::Int(v) => Some(*v),
            ParamValue::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The value as a float, if it is numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParamValue::Int(v) => Some(*v as f64),
            ParamValue::Float(v) => Some(*v),
            ParamValue::Bool(b) => Some(f64::from(u8::from(*b))),
            ParamValue::Text(_) => None,
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{}", u8::from(*b)),
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v:?}"),
            ParamValue::Text(s) => f.write_str(s),
        }
    }
}

impl From<i64> for ParamValue {
    fn from(v: i64) -> Self {
        ParamValue::Int(v)
    }
}
impl From<bool> for ParamValue {
    fn from(v: bool) -> Self {
        ParamValue::Bool(v)
    }
}
impl From<f64> for ParamValue {
    fn from(v: f64) -> Self {
        ParamValue::Float(v)
    }
}
impl From<&str> for ParamValue {
    fn from(v: &str) -> Self {
        ParamValue::Text(v.to_owned())
    }
}

/// An ordered assignment of parameter names to values (the order is the declaration order, which
/// is also the order of cache keys such as Kernel Tuner's comma-joined values).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ParamValues(pub IndexMap<String, ParamValue>);

impl ParamValues {
    /// No parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder-style insertion.
    pub fn with(mut self, name: impl Into<String>, value: impl Into<ParamValue>) -> Self {
        self.0.insert(name.into(), value.into());
        self
    }

    /// Sets one parameter, keeping its position if it already exists.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<ParamValue>) {
        self.0.insert(name.into(), value.into());
    }

    /// The value of one parameter.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.0.get(name)
    }

    /// Iterates in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamValue)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when no parameter is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `["-D", "TS=16", …]`-style definitions, one `NAME=value` string per parameter.
    pub fn definitions(&self) -> Vec<String> {
        self.0.iter().map(|(k, v)| format!("{k}={v}")).collect()
    }

    /// A canonical text key, `NAME=value,NAME=value` sorted by name, usable in hashes and caches
    /// independently of declaration order.
    pub fn canonical_key(&self) -> String {
        let mut pairs: Vec<_> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        pairs.sort();
        pairs.join(",")
    }
}

impl fmt::Display for ParamValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(" ")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl<K: Into<String>, V: Into<ParamValue>> FromIterator<(K, V)> for ParamValues {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        ParamValues(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

/// Kernel source: the text in one language, the entry point, and the tunable parameters it
/// declares (name → the values the manifest allows). The text is shared (`Arc`) so that candidates
/// and archive elites clone cheaply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelSource {
    /// Language of `text`.
    pub language: Language,
    /// Name of the kernel function to launch.
    pub entry: String,
    /// The source text.
    pub text: Arc<str>,
    /// Declared tunable parameters and their allowed values, in declaration order.
    #[serde(default)]
    pub params: IndexMap<String, Vec<ParamValue>>,
    /// Extra text the backend or evaluator needs to run it, such as a TOML launch manifest; kept
    /// verbatim so that a mutator can rewrite it alongside the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Arc<str>>,
}

impl KernelSource {
    /// Source text with no declared parameters.
    pub fn new(language: Language, entry: impl Into<String>, text: impl Into<Arc<str>>) -> Self {
        Self {
            language,
            entry: entry.into(),
            text: text.into(),
            params: IndexMap::new(),
            manifest: None,
        }
    }

    /// Declares one tunable parameter with its allowed values.
    pub fn with_param(
        mut self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<ParamValue>>,
    ) -> Self {
        self.params
            .insert(name.into(), values.into_iter().map(Into::into).collect());
        self
    }

    /// Attaches the manifest text.
    pub fn with_manifest(mut self, manifest: impl Into<Arc<str>>) -> Self {
        self.manifest = Some(manifest.into());
        self
    }

    /// A stable content hash (BLAKE3, hex) of language, entry, text and manifest: identical on
    /// every platform and release, so it can key persistent caches and distributed job ids.
    pub fn content_hash(&self) -> String {
        let mut h = blake3::Hasher::new();
        for part in [
            self.language.as_str().as_bytes(),
            self.entry.as_bytes(),
            self.text.as_bytes(),
            self.manifest.as_deref().unwrap_or("").as_bytes(),
        ] {
            // Length-prefix each part so that moving bytes between parts changes the hash.
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize().to_hex().to_string()
    }
}
