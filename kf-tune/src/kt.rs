//! Kernel Tuner's cache files: read and write, plain or gzip-compressed, including files that a
//! killed tuning run left unclosed.
//!
//! The layout is Kernel Tuner's own: a JSON header (`device_name`, `kernel_name`,
//! `problem_size`, `tune_params_keys`, `tune_params`, `objective`) and a `cache` object keyed by
//! the comma-joined parameter values, each entry holding the parameters, the objective (`time`,
//! or a failure string such as `CompilationFailedConfig`) and whatever else was measured. While
//! tuning, Kernel Tuner appends one entry per line and closes the object at the end;
//! [`KtWriter`] does the same, so a killed run leaves a file that both tools can read. Whole-file
//! rewrites go through a temporary file and a rename, and a [`KtWriter`] holds a lock on the
//! cache while it is open, so neither a kill nor a second writer loses an entry.

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
    /// temporary sibling (named after this process, so two writers never share one), flushed
    /// to disk and renamed over `path`, so a kill or a full disk leaves the old file or the new
    /// one, never half a file.
    ///
    /// This replaces the whole file and takes no lock: do not call it on a cache that a
    /// [`KtWriter`] is appending to, whose later entries would go to the replaced file.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text = self.to_json_string();
        replace_atomically(path, &unique_tmp_sibling(path), &text, is_gzip_path(path))
            .map_err(|e| TuneError::io(path, e))
    }
}

/// Whether a cache at `path` is stored gzip-compressed (its name ends in `.gz`).
fn is_gzip_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// `path` with `suffix` added to its file name (`c.json` → `c.json.lock`).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(suffix);
    path.with_file_name(name)
}

/// The temporary sibling a [`KtWriter`] replaces its cache through. One fixed name is enough:
/// only the holder of the cache's lock writes it, and a file a killed run left there is simply
/// overwritten by the next one.
fn tmp_sibling(path: &Path) -> PathBuf {
    sibling(path, ".tmp")
}

/// A temporary sibling of `path` that no other writer uses: [`KtCache::write`] takes no lock,
/// and two writers truncating and filling one temporary file could rename a mix of both.
fn unique_tmp_sibling(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    sibling(path, &format!(".{}-{n}.tmp", std::process::id()))
}

/// Replaces `path` with `text` (gzip-compressed when `gzip`) so that a kill or a full disk at
/// any moment leaves either the old file or the complete new one: `tmp` (in the same
/// directory, so the rename stays on one file system) is written and flushed to disk, renamed
/// over `path`, and the directory is flushed so that the rename itself survives a power loss.
/// The replaced file's permissions are kept. A failed attempt removes `tmp`.
fn replace_atomically(path: &Path, tmp: &Path, text: &str, gzip: bool) -> std::io::Result<()> {
    let result = (|| -> std::io::Result<()> {
        let file = File::create(tmp)?;
        if let Ok(meta) = std::fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        if gzip {
            let mut gz = GzEncoder::new(file, flate2::Compression::default());
            gz.write_all(text.as_bytes())?;
            gz.finish()?.sync_all()?;
        } else {
            let mut file = file;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
        }
        std::fs::rename(tmp, path)?;
        sync_parent(path)
    })();
    if result.is_err() {
        // A full disk must not also leave a partial temporary file behind.
        let _ = std::fs::remove_file(tmp);
    }
    result
}

/// Flushes the directory holding `path` to disk, which makes a rename into it durable.
#[cfg(unix)]
fn sync_parent(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Directories cannot be opened as files here; the rename is as durable as the platform makes
/// it.
#[cfg(not(unix))]
fn sync_parent(_path: &Path) -> std::io::Result<()> {
    Ok(())
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
/// first, then one `"key": {…},` line per entry, written to the operating system each time;
/// [`KtWriter::close`] closes the JSON object. A file left open by a kill is read back by
/// [`KtCache::read`] (and by Kernel Tuner), and [`KtWriter::open`] resumes appending to it.
///
/// Nothing is lost to a kill, a full disk or a second writer:
///
/// * A writer holds an exclusive lock from [`open`](KtWriter::open) until it is closed or
///   dropped, on a lock file beside the cache (`<cache>.lock`). The lock is not on the cache
///   itself because the cache is replaced by renames: a lock on the replaced file would not
///   guard the new one. The lock file is never removed (removing it would let a third writer
///   lock a new file while a second waits on the old one). A second writer waits for the lock
///   ([`open`](KtWriter::open)) or is told it is held ([`try_open`](KtWriter::try_open)), and
///   reads the cache only once it holds the lock, so it resumes from every entry the first one
///   wrote and appends after them. The operating system releases the lock of a killed process.
/// * Every rewrite of the whole file (the header of a new cache, the reopened form of an
///   existing one, the closed form at the end) goes to a temporary sibling (`<cache>.tmp`)
///   that is flushed to disk and renamed over the cache, so the cache is always either the
///   previous file or the complete new one. Entries themselves are appended, as the format
///   intends: a kill mid-line leaves a torn last entry that readers drop.
///
/// A cache whose name ends in `.gz` is appended to as plain text while the writer is open
/// (readers tell the two apart by their first bytes; gzip cannot be appended safely) and
/// compressed when it is closed.
#[derive(Debug)]
pub struct KtWriter {
    path: PathBuf,
    file: File,
    header: KtCache,
    /// The open lock file; the lock lasts as long as this handle.
    lock: File,
}

impl KtWriter {
    /// Opens `path` for appending, waiting for any other writer of the same cache (another
    /// `kf tune` run) to finish first: an existing cache (closed or not) is then read and
    /// reopened, a missing file is created with `header`'s header. Returns the writer and the
    /// entries already in the file. A second writer of one cache in the same process waits
    /// too: close (or drop) the first before opening another.
    pub fn open(path: impl AsRef<Path>, header: &KtCache) -> Result<(KtWriter, KtCache)> {
        let path = path.as_ref();
        let lock = lock(path, true)?;
        Self::open_locked(path, header, lock)
    }

    /// [`KtWriter::open`] without waiting: while another writer holds the cache, returns
    /// [`TuneError::CacheLocked`] (a caller can say so and then wait with
    /// [`KtWriter::open`]).
    pub fn try_open(path: impl AsRef<Path>, header: &KtCache) -> Result<(KtWriter, KtCache)> {
        let path = path.as_ref();
        let lock = lock(path, false)?;
        Self::open_locked(path, header, lock)
    }

    /// The lock file of the cache at `path`: `<path>.lock`.
    pub fn lock_path(path: impl AsRef<Path>) -> PathBuf {
        sibling(path.as_ref(), ".lock")
    }

    fn open_locked(path: &Path, header: &KtCache, lock: File) -> Result<(KtWriter, KtCache)> {
        let path = path.to_path_buf();
        // Read under the lock: the cache is now as the previous writer left it.
        let cache = if path.exists() {
            KtCache::read(&path)?
        } else {
            let mut c = header.clone();
            c.entries.clear();
            c
        };
        // Write the open form (a torn entry dropped, a closed file reopened, a gzip file
        // decompressed; a new file's header), then append.
        let mut text = cache.header_json();
        for (k, e) in &cache.entries {
            text.push_str(&cache.entry_json(k, e));
            text.push(',');
        }
        replace_atomically(&path, &tmp_sibling(&path), &text, false)
            .map_err(|e| TuneError::io(&path, e))?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| TuneError::io(&path, e))?;
        let mut header = cache.clone();
        header.entries.clear();
        Ok((
            KtWriter {
                path,
                file,
                header,
                lock,
            },
            cache,
        ))
    }

    /// Appends one entry and writes it to the operating system (a killed process loses none).
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

    /// Closes the JSON object (Kernel Tuner's `close_cache`): the closed file (gzip-compressed
    /// for a `.gz` name) replaces the open one in one rename, and the lock is released. On an
    /// error the open file is left as it was, every entry readable.
    pub fn close(self) -> Result<()> {
        let KtWriter {
            path, file, lock, ..
        } = self;
        drop(file);
        // Read back rather than kept in memory: the file is the record of what was appended
        // (a torn entry from a failed append is dropped here).
        let cache = KtCache::read(&path)?;
        replace_atomically(
            &path,
            &tmp_sibling(&path),
            &cache.to_json_string(),
            is_gzip_path(&path),
        )
        .map_err(|e| TuneError::io(&path, e))?;
        // Released only now, after the rename: the next writer reads the closed file.
        drop(lock);
        Ok(())
    }
}

/// Opens (creating it if needed) the lock file of the cache at `path` and takes its exclusive
/// lock, waiting for it when `wait`, or returning [`TuneError::CacheLocked`] when another
/// writer holds it.
fn lock(path: &Path, wait: bool) -> Result<File> {
    let lock_path = KtWriter::lock_path(path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| TuneError::io(&lock_path, e))?;
    if wait {
        file.lock().map_err(|e| TuneError::io(&lock_path, e))?;
    } else {
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(TuneError::CacheLocked {
                    path: path.to_path_buf(),
                    lock: lock_path,
                })
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(TuneError::io(&lock_path, e)),
        }
    }
    Ok(file)
}
