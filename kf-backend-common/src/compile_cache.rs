//! A backend's compile cache: typed entries over an [`ArtifactCache`] ([`CompileCache`]), and
//! the facts every backend records about one compile's use of it ([`CacheSlot`]).
//!
//! The backends differ only in what an entry holds (an OpenCL program binary, NVRTC's PTX,
//! cubin and log, a SYCL bundle with its metadata), which their [`CacheFormat`] says; how an
//! entry is looked up, dropped when the runtime refuses it, stored atomically (or deferred to
//! the parent, see [`crate::cache_outbox`]), and what `cache_hit`, `cache_file` and
//! `cache_error` say about it is the same for all of them, and lives here.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kf_core::CompilerFacts;

use crate::cache::{ArtifactCache, CacheWriteError};

/// What one backend stores in its compile cache, and how it is laid out in an entry's payload.
pub trait CacheFormat {
    /// The magic tag every entry starts with: one per backend and format version, so that a
    /// changed layout is a miss, never a misread.
    const MAGIC: &'static [u8; 8];
    /// The extension of an entry's file (`clbin`, `kfcubin`, `syclbin`).
    const EXTENSION: &'static str;
    /// What an entry holds.
    type Entry;

    /// The payload stored for `entry`.
    fn encode(entry: &Self::Entry) -> std::io::Result<Cow<'_, [u8]>>;

    /// The entry a payload holds; `None` when it holds none (the entry is then deleted).
    fn decode(payload: &[u8]) -> Option<Self::Entry>;
}

/// A directory of one backend's cached compile results, in its [`CacheFormat`] `F`.
///
/// ```
/// use std::borrow::{Borrow, Cow};
/// use kf_backend_common::compile_cache::{CacheFormat, CompileCache};
///
/// struct Text;
/// impl CacheFormat for Text {
///     const MAGIC: &'static [u8; 8] = b"KFTEXT01";
///     const EXTENSION: &'static str = "txt";
///     type Entry = String;
///     fn encode(entry: &String) -> std::io::Result<Cow<'_, [u8]>> {
///         Ok(Cow::Borrowed(entry.as_bytes()))
///     }
///     fn decode(payload: &[u8]) -> Option<String> {
///         String::from_utf8(payload.to_vec()).ok()
///     }
/// }
///
/// let dir = std::env::temp_dir().join(format!("kf-compile-cache-doc-{}", std::process::id()));
/// let cache = CompileCache::<Text>::new(&dir);
/// let key = "ab".repeat(32);
/// cache.put(&key, &"built".to_owned()).unwrap();
/// assert_eq!(cache.get(&key).as_deref(), Some("built"));
/// # std::fs::remove_dir_all(dir).unwrap();
/// ```
pub struct CompileCache<F: CacheFormat> {
    files: ArtifactCache,
    format: PhantomData<fn() -> F>,
}

impl<F: CacheFormat> fmt::Debug for CompileCache<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompileCache")
            .field("dir", &self.files.dir())
            .field("extension", &F::EXTENSION)
            .finish()
    }
}

impl<F: CacheFormat> Clone for CompileCache<F> {
    fn clone(&self) -> Self {
        CompileCache {
            files: self.files.clone(),
            format: PhantomData,
        }
    }
}

impl<F: CacheFormat> CompileCache<F> {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CompileCache {
            files: ArtifactCache::new(dir, F::MAGIC, F::EXTENSION),
            format: PhantomData,
        }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        self.files.dir()
    }

    /// The file an entry of `key` is (or would be) stored in: what a compile worker ships
    /// to an execute worker, byte for byte (the file checks its own integrity).
    pub fn path(&self, key: &str) -> PathBuf {
        self.files.path(key)
    }

    /// The entry stored under `key`, if present, intact and in this format (an entry that is
    /// not is deleted).
    pub fn get(&self, key: &str) -> Option<F::Entry> {
        let payload = self.files.get(key)?;
        let entry = F::decode(&payload);
        if entry.is_none() {
            self.remove(key);
        }
        entry
    }

    /// Stores `entry` under `key` atomically (temporary file, synced, renamed into place), or
    /// keeps it for the parent in a process whose writes go through it.
    pub fn put(&self, key: &str, entry: &F::Entry) -> Result<(), CacheWriteError> {
        let payload = F::encode(entry).map_err(|source| CacheWriteError {
            path: self.path(key),
            source,
        })?;
        self.files.put(key, &payload)
    }

    /// Deletes the entry under `key` (missing entries are fine).
    pub fn remove(&self, key: &str) {
        self.files.remove(key);
    }
}

/// One compile's place in a backend's compile cache (none when the cache is disabled): the
/// lookup, the write, and the facts both leave.
#[derive(Debug)]
pub struct CacheSlot<'a, F: CacheFormat> {
    cache: Option<&'a CompileCache<F>>,
    key: &'a str,
}

impl<'a, F: CacheFormat> CacheSlot<'a, F> {
    /// The entry of `key` in `cache`, if there is a cache.
    pub fn new(cache: Option<&'a CompileCache<F>>, key: &'a str) -> Self {
        CacheSlot { cache, key }
    }

    /// The entry cached under the key, if any.
    pub fn lookup(&self) -> Option<F::Entry> {
        self.cache?.get(self.key)
    }

    /// Drops the cached entry: the runtime refused it, so it is built again.
    pub fn discard(&self) {
        if let Some(cache) = self.cache {
            cache.remove(self.key);
        }
    }

    /// The entry's file as the facts give it (`cache_file`): what a compile worker ships.
    pub fn file(&self) -> Option<String> {
        self.cache
            .map(|cache| cache.path(self.key).display().to_string())
    }

    /// Marks `facts` as a cache hit: `cache_hit`, no compile time, and the entry's
    /// `cache_file`.
    pub fn record_hit(&self, facts: &mut CompilerFacts) {
        facts.cache_hit = true;
        facts.compile_seconds = Some(0.0);
        if let Some(file) = self.file() {
            facts.extra.insert("cache_file".into(), file);
        }
    }

    /// Stores what was built, when there is a cache: `built` gives the entry, or why the
    /// runtime gave none (it is only asked when there is a cache). `facts` get the entry's
    /// `cache_file`, or why it was not stored (`cache_error`).
    pub fn store<E: Borrow<F::Entry>, Why: std::fmt::Display>(
        &self,
        built: impl FnOnce() -> Result<E, Why>,
        facts: &mut CompilerFacts,
    ) {
        let Some(cache) = self.cache else {
            return;
        };
        let stored = built().map_err(|why| why.to_string()).and_then(|entry| {
            cache
                .put(self.key, entry.borrow())
                .map_err(|e| e.to_string())
        });
        match stored {
            Ok(()) => {
                facts.extra.insert(
                    "cache_file".into(),
                    cache.path(self.key).display().to_string(),
                );
            }
            Err(e) => {
                facts.extra.insert("cache_error".into(), e);
            }
        }
    }
}

/// Records the seconds since `started` as `load_seconds`: how long a kernel took to become
/// ready (a cache hit's load, or a module's load on the device).
pub fn record_load_seconds(facts: &mut CompilerFacts, started: Instant) {
    facts.extra.insert(
        "load_seconds".into(),
        format!("{:.6}", started.elapsed().as_secs_f64()),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes as they are, refusing an empty payload (as a runtime refuses a bad binary).
    struct Bytes;

    impl CacheFormat for Bytes {
        const MAGIC: &'static [u8; 8] = b"KFTEST01";
        const EXTENSION: &'static str = "bin";
        type Entry = Vec<u8>;

        fn encode(entry: &Vec<u8>) -> std::io::Result<Cow<'_, [u8]>> {
            Ok(Cow::Borrowed(entry))
        }

        fn decode(payload: &[u8]) -> Option<Vec<u8>> {
            (!payload.is_empty()).then(|| payload.to_vec())
        }
    }

    #[test]
    fn a_slot_records_hits_writes_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::<Bytes>::new(dir.path().join("c"));
        let key = "ab".repeat(32);
        let slot = CacheSlot::new(Some(&cache), &key);
        assert!(slot.lookup().is_none());
        let mut facts = CompilerFacts::default();
        slot.store(|| Ok::<_, String>(b"binary".to_vec()), &mut facts);
        let file = cache.path(&key).display().to_string();
        assert_eq!(facts.extra.get("cache_file"), Some(&file));
        assert_eq!(slot.lookup().as_deref(), Some(&b"binary"[..]));

        let mut hit = CompilerFacts::default();
        slot.record_hit(&mut hit);
        assert!(hit.cache_hit);
        assert_eq!(hit.compile_seconds, Some(0.0));
        assert_eq!(hit.extra.get("cache_file"), Some(&file));

        slot.discard();
        assert!(slot.lookup().is_none());
        let mut refused = CompilerFacts::default();
        slot.store(|| Err::<Vec<u8>, _>("no binary"), &mut refused);
        assert_eq!(
            refused.extra.get("cache_error").map(String::as_str),
            Some("no binary")
        );

        // An entry its format cannot read is deleted.
        cache.put(&key, &Vec::new()).unwrap();
        assert!(cache.get(&key).is_none());
        assert!(!cache.path(&key).exists());

        // Without a cache nothing is looked up or recorded.
        let none = CacheSlot::<Bytes>::new(None, &key);
        let mut facts = CompilerFacts::default();
        none.store(
            || -> Result<Vec<u8>, String> { panic!("asked without a cache") },
            &mut facts,
        );
        assert!(none.lookup().is_none() && facts.extra.is_empty());
    }
}
