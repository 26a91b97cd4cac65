//! Kernel Tuner's cache files: read and write, plain or gzip-compressed, including files that a
//! killed tuning run left unclosed.
//!
//! The layout is Kernel Tuner's own: a JSON header (`device_name`, `kernel_name`,
//! `problem_size`, `tune_params_keys`, `tune_params`, `objective`) and a `cache` object keyed by
//! the comma-joined parameter values, each entry holding the parameters, the objective (`time`,
//! or a failure string such as `CompilationFailedConfig`) and whatever else was measured. While
//! tuning, Kernel Tuner appends one entry per line and closes the object at the end;
//! [`KtWriter`] does the same, so a killed run leaves a file that both tools can read.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use indexmap::IndexMap;
use kf_core::{ParamValue, ParamValues};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Result, TuneError};
use crate::objective::{Failure, Outcome};
use crate::param::Param;
use crate::space::{Point, Space};

/// One measured configuration of a Kernel Tuner cache.
#[derive(Debug, Clone, PartialEq)]
pub struct KtEntry {
    /// Parameter values, in `tune_params_keys` order.
    pub params: ParamValues,
    /// The objective's value, or the failure.
    pub outcome: Outcome,
    /// Every other field (`times`, `compile_time`, `GFLOP/s`, `timestamp`, …), kept verbatim.
    pub extra: IndexMap<String, Value>,
}

/// A Kernel Tuner cache file in memory.
///
/// ```
/// use kf_tune::{KtCache, Outcome};
/// use kf_core::{ParamValue, ParamValues};
///
/// let mut cache = KtCache::new("my-gpu", "gemm", vec![1024, 1024], vec![
///     ("TS".to_string(), vec![ParamValue::Int(16), ParamValue::Int(32)]),
/// ]);
/// cache.insert(ParamValues::new().with("TS", 16i64), Outcome::Time(1.5));
/// let text = cache.to_json_string();
/// let back = KtCache::from_json_str(&text, "inline").unwrap();
/// assert_eq!(back.entries.len(), 1);
/// assert_eq!(back.entries["16"].outcome, Outcome::Time(1.5));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KtCache {
    /// Device the measurements were made on.
    pub device_name: String,
    /// Kernel name.
    pub kernel_name: String,
    /// Problem size as Kernel Tuner wrote it (a number or a list).
    pub problem_size: Value,
    /// Parameter names in key order.
    pub tune_params_keys: Vec<String>,
    /// Allowed values per parameter.
    pub tune_params: IndexMap<String, Vec<ParamValue>>,
    /// Name of the objective field (`time`).
    pub objective: String,
    /// Entries keyed by the comma-joined parameter values.
    pub entries: IndexMap<String, KtEntry>,
    /// Other top-level fields, kept verbatim.
    pub extra: IndexMap<String, Value>,
}

#[derive(Deserialize)]
struct RawKt {
    #[serde(default)]
    device_name: Option<String>,
    #[serde(default)]
    kernel_name: Option<String>,
    #[serde(default)]
    problem_size: Value,
    tune_params_keys: Vec<String>,
    tune_params: IndexMap<String, Vec<ParamValue>>,
    #[serde(default)]
    objective: Option<String>,
    #[serde(default)]
    cache: IndexMap<String, IndexMap<String, Value>>,
    #[serde(flatten)]
    extra: IndexMap<String, Value>,
}

/// Kernel Tuner's (Python's `str`) rendering of one value inside a cache key.
pub fn key_value(v: &ParamValue) -> String {
    match v {
        ParamValue::Bool(true) => "True".into(),
        ParamValue::Bool(false) => "False".into(),
        ParamValue::Int(i) => i.to_string(),
        ParamValue::Float(f) => {
            let s = format!("{f:?}");
            s.replace("e-", "e-0").replace("e-00", "e-0")
        }
        ParamValue::Text(s) => s.clone(),
    }
}

/// The cache key of a configuration: its values joined by commas, in `keys` order.
pub fn cache_key(keys: &[String], params: &ParamValues) -> String {
    keys.iter()
        .map(|k| params.get(k).map(key_value).unwrap_or_default())
        .collect::<Vec<_>>()
        .join(",")
}

fn to_json(v: &ParamValue) -> Value {
    match v {
        ParamValue::Bool(b) => Value::Bool(*b),
        ParamValue::Int(i) => Value::from(*i),
        ParamValue::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        ParamValue::Text(s) => Value::String(s.clone()),
    }
}

/// Reads a whole file, decompressing it when it starts with the gzip magic bytes.
pub(crate) fn read_maybe_gz(path: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| TuneError::io(path, e))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = String::new();
        GzDecoder::new(bytes.as_slice())
            .read_to_string(&mut out)
            .map_err(|e| TuneError::io(path, e))?;
        Ok(out)
    } else {
        String::from_utf8(bytes).map_err(|e| TuneError::format(path, e.to_string()))
    }
}

/// Closes a cache that a tuning run left open (Kernel Tuner's own repair, plus dropping a torn
/// last entry).
fn repair(text: &str) -> Option<String> {
    let t = text.trim_end();
    let t = t.strip_suffix(',').unwrap_or(t);
    let closed = format!("{t}}}\n}}");
    if serde_json::from_str::<serde::de::IgnoredAny>(&closed).is_ok() {
        return Some(closed);
    }
    // A torn last entry: cut back to the end of the last complete entry line.
    let cut = t.rfind("},\n\"")?;
    let closed = format!("{}}}\n}}", &t[..=cut]);
    Some(closed)
}

impl KtCache {
    /// An empty cache for the given header; `params` lists the parameters in key order.
    pub fn new(
        device_name: impl Into<String>,
        kernel_name: impl Into<String>,
        problem_size: impl Into<Value>,
        params: Vec<(String, Vec<ParamValue>)>,
    ) -> Self {
        KtCache {
            device_name: device_name.into(),
            kernel_name: kernel_name.into(),
            problem_size: problem_size.into(),
            tune_params_keys: params.iter().map(|(k, _)| k.clone()).collect(),
            tune_params: params.into_iter().collect(),
            objective: "time".into(),
            entries: IndexMap::new(),
            extra: IndexMap::new(),
        }
    }

    /// Parses cache text; `name` identifies it in errors. Unclosed files are repaired.
    pub fn from_json_str(text: &str, name: &str) -> Result<Self> {
        let raw: RawKt = match serde_json::from_str(text) {
            Ok(r) => r,
            Err(first) => match repair(text).and_then(|t| serde_json::from_str(&t).ok()) {
                Some(r) => r,
                None => return Err(TuneError::format(name, first.to_string())),
            },
        };
        let objective = raw.objective.unwrap_or_else(|| "time".into());
        let mut entries = IndexMap::with_capacity(raw.cache.len());
        for (key, mut fields) in raw.cache {
            let mut params = ParamValues::new();
            for k in &raw.tune_params_keys {
                let v = fields.shift_remove(k).ok_or_else(|| {
                    TuneError::format(name, format!("cache entry `{key}` lacks parameter `{k}`"))
                })?;
                let pv: ParamValue = serde_json::from_value(v).map_err(|e| {
                    TuneError::format(name, format!("cache entry `{key}`, `{k}`: {e}"))
                })?;
                params.set(k.clone(), pv);
            }
            let outcome = match fields.shift_remove(&objective) {
                Some(Value::Number(n)) => match n.as_f64() {
                    Some(t) if t.is_finite() => Outcome::Time(t),
                    _ => Outcome::Failed(Failure::Other(n.to_string())),
                },
                Some(Value::String(s)) => Outcome::Failed(Failure::from_kernel_tuner_name(&s)),
                Some(other) => Outcome::Failed(Failure::Other(other.to_string())),
                None => {
                    return Err(TuneError::format(
                        name,
                        format!("cache entry `{key}` lacks the objective `{objective}`"),
                    ))
                }
            };
            entries.insert(
                key,
                KtEntry {
                    params,
                    outcome,
                    extra: fields,
                },
            );
        }
        Ok(KtCache {
            device_name: raw.device_name.unwrap_or_default(),
            kernel_name: raw.kernel_name.unwrap_or_default(),
            problem_size: raw.problem_size,
            tune_params_keys: raw.tune_params_keys,
            tune_params: raw.tune_params,
            objective,
            entries,
            extra: raw.extra,
        })
    }

    /// Reads a cache file, plain or gzip-compressed, closed or left open by a killed run.
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = read_maybe_gz(path)?;
        Self::from_json_str(&text, &path.display().to_string())
    }

    /// Adds (or replaces) the entry of `params`.
    pub fn insert(&mut self, params: ParamValues, outcome: Outcome) {
        let key = cache_key(&self.tune_params_keys, &params);
        self.entries.insert(
            key,
            KtEntry {
                params,
                outcome,
                extra: IndexMap::new(),
            },
        );
    }

    /// The entry of `params`, if measured.
    pub fn get(&self, params: &ParamValues) -> Option<&KtEntry> {
        self.entries.get(&cache_key(&self.tune_params_keys, params))
    }

    /// The tunable parameters as [`Param`]s (kinds inferred), in key order.
    pub fn params(&self) -> Result<Vec<Param>> {
        self.tune_params_keys
            .iter()
            .map(|k| {
                let values = self
                    .tune_params
                    .get(k)
                    .cloned()
                    .ok_or_else(|| TuneError::Param {
                        name: k.clone(),
                        message: "is in tune_params_keys but not in tune_params".into(),
                    })?;
                Param::from_values(k.clone(), values)
            })
            .collect()
    }

    /// The replay space: every configuration in the cache (failed ones included; they are
    /// members that cost an evaluation and yield no time), with the outcome of each member.
    pub fn space(&self) -> Result<(Space, Vec<Outcome>)> {
        let params = self.params()?;
        let probe = Space::from_points(params.clone(), std::iter::empty())?;
        let mut points: Vec<Point> = Vec::with_capacity(self.entries.len());
        let mut outcomes = Vec::with_capacity(self.entries.len());
        for e in self.entries.values() {
            // Entries with values outside tune_params are skipped.
            if let Ok(p) = probe.point_of(&e.params) {
                points.push(p);
                outcomes.push(e.outcome.clone());
            }
        }
        let space = Space::from_points(params, points.clone())?;
        // `from_points` drops duplicates; keep outcomes aligned with the space's member list.
        let mut aligned = Vec::with_capacity(outcomes.len());
        if let Some(members) = space.members() {
            let mut by_point = std::collections::HashMap::with_capacity(points.len());
            for (p, o) in points.into_iter().zip(outcomes) {
                by_point.entry(p).or_insert(o);
            }
            for m in members {
                aligned.push(
                    by_point
                        .get(m)
                        .cloned()
                        .unwrap_or(Outcome::Failed(Failure::Invalid)),
                );
            }
        }
        Ok((space, aligned))
    }

    fn header_json(&self) -> String {
        let mut out = String::from("{\n");
        let mut push = |k: &str, v: &Value| {
            out.push_str(&serde_json::to_string(k).unwrap_or_default());
            out.push_str(": ");
            out.push_str(&indent_empty(v));
            out.push_str(",\n");
        };
        push("device_name", &Value::String(self.device_name.clone()));
        push("kernel_name", &Value::String(self.kernel_name.clone()));
        push("problem_size", &self.problem_size);
        push(
            "tune_params_keys",
            &Value::Array(
                self.tune_params_keys
                    .iter()
                    .cloned()
                    .map(Value::String)
                    .collect(),
            ),
        );
        let mut tp = String::from("{\n");
        let n = self.tune_params.len();
        for (i, (k, vs)) in self.tune_params.iter().enumerate() {
            tp.push_str(&serde_json::to_string(k).unwrap_or_default());
            tp.push_str(": ");
            tp.push_str(&indent_empty(&Value::Array(
                vs.iter().map(to_json).collect(),
            )));
            if i + 1 < n {
                tp.push(',');
            }
            tp.push('\n');
        }
        tp.push('}');
        out.push_str("\"tune_params\": ");
        out.push_str(&tp);
        out.push_str(",\n");
        for (k, v) in &self.extra {
            out.push_str(&serde_json::to_string(k).unwrap_or_default());
            out.push_str(": ");
            out.push_str(&indent_empty(v));
            out.push_str(",\n");
        }
        out.push_str("\"objective\": ");
        out.push_str(&serde_json::to_string(&self.objective).unwrap_or_default());
        out.push_str(",\n\"cache\": {");
        out
    }

    fn entry_json(&self, key: &str, e: &KtEntry) -> String {
        let mut m: IndexMap<String, Value> = IndexMap::new();
        for (k, v) in e.params.iter() {
            m.insert(k.to_owned(), to_json(v));
        }
        let objective = match &e.outcome {
            Outcome::Time(t) => serde_json::Number::from_f64(*t)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            Outcome::Failed(f) => Value::String(f.kernel_tuner_name().to_owned()),
        };
        m.insert(self.objective.clone(), objective);
        for (k, v) in &e.extra {
            m.insert(k.clone(), v.clone());
        }
        format!(
            "\n{}: {}",
            serde_json::to_string(key).unwrap_or_default(),
            python_json(&Value::Object(m.into_iter().collect()))
        )
    }

    /// The cache as Kernel Tuner writes it (closed).
    pub fn to_json_string(&self) -> String {
        let mut out = self.header_json();
        let n = self.entries.len();
        for (i, (k, e)) in self.entries.iter().enumerate() {
            out.push_str(&self.entry_json(k, e));
            if i + 1 < n {
                out.push(',');
            }
        }
        out.push_str("}\n}");
        out
    }

    /// Writes the cache; gzip-compressed when `path` ends in `.gz`. The file is written to a
    /// temporary sibling and renamed, so a kill never leaves half a file.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text = self.to_json_string();
        let tmp = tmp_sibling(path);
        let result = (|| -> std::io::Result<()> {
            let file = File::create(&tmp)?;
            if path.extension().is_some_and(|e| e == "gz") {
                let mut gz = GzEncoder::new(file, flate2::Compression::default());
                gz.write_all(text.as_bytes())?;
                gz.finish()?.sync_all()?;
            } else {
                let mut file = file;
                file.write_all(text.as_bytes())?;
                file.sync_all()?;
            }
            std::fs::rename(&tmp, path)
        })();
        result.map_err(|e| TuneError::io(path, e))
    }
}

fn tmp_sibling(path: &Path) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".tmp");
    path.with_file_name(name)
}

/// JSON as Python's `json.dumps(indent="")` writes containers: one element per line.
fn indent_empty(v: &Value) -> String {
    python_dumps(v, ",\n", "\n")
}

/// JSON as Python's `json.dumps` writes it by default: `", "` and `": "` separators.
fn python_json(v: &Value) -> String {
    python_dumps(v, ", ", "")
}

/// JSON the way Python's `json.dumps` writes it with `": "` after keys: the elements of a
/// non-empty container joined by `separator`, with `pad` inside its brackets.
fn python_dumps(v: &Value, separator: &str, pad: &str) -> String {
    match v {
        Value::Array(a) if !a.is_empty() => {
            let items: Vec<String> = a.iter().map(|v| python_dumps(v, separator, pad)).collect();
            format!("[{pad}{}{pad}]", items.join(separator))
        }
        Value::Object(o) if !o.is_empty() => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}: {}",
                        serde_json::to_string(k).unwrap_or_default(),
                        python_dumps(v, separator, pad)
                    )
                })
                .collect();
            format!("{{{pad}{}{pad}}}", items.join(separator))
        }
        other => other.to_string(),
    }
}

/// Appends entries to a Kernel Tuner cache file as they arrive, as Kernel Tuner does: the header
/// first, then one `"key": {…},` line per entry, flushed each time; [`KtWriter::close`] closes the
/// JSON object. A file left open by a kill is read back by [`KtCache::read`] (and by Kernel
/// Tuner), and [`KtWriter::open`] resumes appending to it.
#[derive(Debug)]
pub struct KtWriter {
    path: PathBuf,
    file: File,
    header: KtCache,
}

impl KtWriter {
    /// Opens `path` for appending: an existing cache (closed or not) is read and reopened, a
    /// missing file is created with `header`'s header. Returns the writer and the entries
    /// already in the file. Plain files only (gzip cannot be appended safely).
    pub fn open(path: impl AsRef<Path>, header: &KtCache) -> Result<(KtWriter, KtCache)> {
        let path = path.as_ref().to_path_buf();
        let existing = if path.exists() {
            Some(KtCache::read(&path)?)
        } else {
            None
        };
        let cache = match existing {
            Some(c) => {
                // Rewrite in the open form (a torn entry dropped), then append.
                let mut text = c.header_json();
                for (k, e) in &c.entries {
                    text.push_str(&c.entry_json(k, e));
                    text.push(',');
                }
                let tmp = tmp_sibling(&path);
                std::fs::write(&tmp, text.as_bytes())
                    .and_then(|_| std::fs::rename(&tmp, &path))
                    .map_err(|e| TuneError::io(&path, e))?;
                c
            }
            None => {
                let mut c = header.clone();
                c.entries.clear();
                std::fs::write(&path, c.header_json().as_bytes())
                    .map_err(|e| TuneError::io(&path, e))?;
                c
            }
        };
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| TuneError::io(&path, e))?;
        let mut header = cache.clone();
        header.entries.clear();
        Ok((KtWriter { path, file, header }, cache))
    }

    /// Appends one entry and flushes it to the operating system.
    pub fn append(&mut self, params: &ParamValues, outcome: &Outcome) -> Result<()> {
        let key = cache_key(&self.header.tune_params_keys, params);
        let entry = KtEntry {
            params: params.clone(),
            outcome: outcome.clone(),
            extra: IndexMap::new(),
        };
        let mut line = self.header.entry_json(&key, &entry);
        line.push(',');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.flush())
            .map_err(|e| TuneError::io(&self.path, e))
    }

    /// Closes the JSON object (Kernel Tuner's `close_cache`).
    pub fn close(self) -> Result<()> {
        let KtWriter { path, file, .. } = self;
        drop(file);
        let mut text = std::fs::read_to_string(&path).map_err(|e| TuneError::io(&path, e))?;
        let trimmed = text.trim_end().to_owned();
        text = match trimmed.strip_suffix(',') {
            Some(t) => format!("{t}}}\n}}"),
            None if trimmed.ends_with('{') => format!("{trimmed}}}\n}}"),
            None => return Ok(()),
        };
        std::fs::write(&path, text).map_err(|e| TuneError::io(&path, e))
    }
}
