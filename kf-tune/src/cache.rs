//! A persistent result cache keyed by (kernel source hash, device, problem size, parameter
//! values): one JSON line per result, appended and flushed as results arrive, so a kill at any
//! moment loses at most the line being written. Opening a cache ignores (and cuts off) a torn
//! last line; a re-run then answers every configuration already measured from the cache.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use kf_core::{DeviceFacts, KernelSource, ParamValues};
use serde::{Deserialize, Serialize};

use crate::error::{Result, TuneError};
use crate::objective::{Failure, Outcome};

/// What a measurement depends on besides the parameter values.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CacheKey {
    /// Content hash of the kernel source ([`KernelSource::content_hash`]).
    pub kernel: String,
    /// Device name (and driver version, when it matters).
    pub device: String,
    /// Problem size, canonically rendered (`M=1024,N=1024,K=1024`).
    pub problem: String,
}

impl CacheKey {
    /// A key from its parts.
    pub fn new(
        kernel: impl Into<String>,
        device: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        CacheKey {
            kernel: kernel.into(),
            device: device.into(),
            problem: problem.into(),
        }
    }

    /// The key of a kernel on a device for problem sizes (in declaration order).
    pub fn of(kernel: &KernelSource, device: &DeviceFacts, sizes: &IndexMap<String, i64>) -> Self {
        let device = if device.driver_version.is_empty() {
            device.name.clone()
        } else {
            format!("{} ({})", device.name, device.driver_version)
        };
        CacheKey {
            kernel: kernel.content_hash(),
            device,
            problem: sizes
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Line {
    kernel: String,
    device: String,
    problem: String,
    params: ParamValues,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure: Option<String>,
}

/// The persistent result cache (JSON lines). An in-memory cache ([`ResultCache::in_memory`])
/// behaves the same without a file.
///
/// ```
/// use kf_tune::{CacheKey, Outcome, ResultCache};
/// use kf_core::ParamValues;
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("results.jsonl");
/// let key = CacheKey::new("hash", "gpu", "M=64");
/// let cfg = ParamValues::new().with("TS", 16i64);
/// {
///     let mut cache = ResultCache::open(&path).unwrap();
///     cache.insert(&key, &cfg, &Outcome::Time(2.5)).unwrap();
/// }
/// let cache = ResultCache::open(&path).unwrap();
/// assert_eq!(cache.get(&key, &cfg), Some(&Outcome::Time(2.5)));
/// ```
#[derive(Debug)]
pub struct ResultCache {
    path: Option<PathBuf>,
    file: Option<File>,
    entries: HashMap<(CacheKey, String), Outcome>,
    skipped: usize,
    sync: bool,
}

impl ResultCache {
    /// A cache that lives only in memory.
    pub fn in_memory() -> Self {
        ResultCache {
            path: None,
            file: None,
            entries: HashMap::new(),
            skipped: 0,
            sync: false,
        }
    }

    /// Opens (or creates) the cache file at `path` and loads it. A torn last line (a write cut
    /// short by a kill) is ignored and removed; other unreadable lines are skipped and counted.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let mut file = OpenOptions::new()
            .read(true)
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| TuneError::io(&path, e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| TuneError::io(&path, e))?;
        let mut entries = HashMap::new();
        let mut skipped = 0;
        // Everything after the last newline is a torn write: cut it off.
        let good_len = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        for line in bytes[..good_len].split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Line>(line) {
                Ok(l) => {
                    let outcome = match (l.time, l.failure) {
                        (Some(t), _) => Outcome::Time(t),
                        (None, Some(f)) => Outcome::Failed(Failure::from_kernel_tuner_name(&f)),
                        (None, None) => {
                            skipped += 1;
                            continue;
                        }
                    };
                    let key = CacheKey {
                        kernel: l.kernel,
                        device: l.device,
                        problem: l.problem,
                    };
                    entries.insert((key, l.params.canonical_key()), outcome);
                }
                Err(_) => skipped += 1,
            }
        }
        if good_len < bytes.len() {
            file.set_len(good_len as u64)
                .and_then(|_| file.seek(SeekFrom::End(0)).map(|_| ()))
                .map_err(|e| TuneError::io(&path, e))?;
        }
        Ok(ResultCache {
            path: Some(path),
            file: Some(file),
            entries,
            skipped,
            sync: false,
        })
    }

    /// Also `fsync` every appended line (survives a power loss, not only a kill; slower).
    pub fn sync_every_write(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// The file, if persistent.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Number of cached results.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Unreadable lines skipped when the file was opened (a torn last line included).
    pub fn skipped_lines(&self) -> usize {
        self.skipped
    }

    /// The cached outcome of `params` under `key`.
    pub fn get(&self, key: &CacheKey, params: &ParamValues) -> Option<&Outcome> {
        self.entries.get(&(key.clone(), params.canonical_key()))
    }

    /// Records an outcome: appended to the file (one line, flushed) before it is kept in memory.
    pub fn insert(
        &mut self,
        key: &CacheKey,
        params: &ParamValues,
        outcome: &Outcome,
    ) -> Result<()> {
        if let (Some(file), Some(path)) = (self.file.as_mut(), self.path.as_ref()) {
            let (time, failure) = match outcome {
                Outcome::Time(t) => (Some(*t), None),
                Outcome::Failed(f) => (None, Some(f.kernel_tuner_name().to_owned())),
            };
            let line = Line {
                kernel: key.kernel.clone(),
                device: key.device.clone(),
                problem: key.problem.clone(),
                params: params.clone(),
                time: time.filter(|t| t.is_finite()),
                failure: failure.or_else(|| {
                    time.filter(|t| !t.is_finite())
                        .map(|_| Failure::Runtime.kernel_tuner_name().to_owned())
                }),
            };
            let mut text =
                serde_json::to_string(&line).map_err(|e| TuneError::format(path, e.to_string()))?;
            text.push('\n');
            file.write_all(text.as_bytes())
                .and_then(|_| file.flush())
                .map_err(|e| TuneError::io(path, e))?;
            if self.sync {
                file.sync_data().map_err(|e| TuneError::io(path, e))?;
            }
        }
        self.entries
            .insert((key.clone(), params.canonical_key()), outcome.clone());
        Ok(())
    }

    /// Every cached result under `key`, as (canonical parameter key, outcome).
    pub fn results_for<'a>(
        &'a self,
        key: &'a CacheKey,
    ) -> impl Iterator<Item = (&'a str, &'a Outcome)> + 'a {
        self.entries
            .iter()
            .filter(move |((k, _), _)| k == key)
            .map(|((_, p), o)| (p.as_str(), o))
    }
}
