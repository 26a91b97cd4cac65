//! The on-disk artifact cache every backend uses for compiled kernels, and where it lives.
//!
//! An entry is one file `<key>.<extension>` holding an 8-byte magic tag (one per backend and
//! format version), the BLAKE3 hash of the payload, and the payload, whose layout the backend
//! chooses ([`frame`] / [`unframe`] give it a length-prefixed JSON header when it needs one).
//! Files are written to a unique temporary name and renamed into place, so concurrent
//! processes (evaluation workers) never read half a file; a corrupt entry is deleted and
//! reported as absent. A backend changing its payload changes its magic tag (a version bump),
//! so old entries are rejected, never misread.
//!
//! Keys are BLAKE3 hashes of length-prefixed parts ([`KeyHasher`]), so that part boundaries
//! matter (`["-DA=1 -DB=2"]` is not `["-DA=1", "-DB=2"]`).

use std::fs;
use std::path::{Path, PathBuf};

/// Builds a cache key from length-prefixed parts.
///
/// ```
/// use kf_backend_common::cache::KeyHasher;
/// let mut a = KeyHasher::new();
/// a.part(b"source");
/// let mut b = KeyHasher::new();
/// b.part(b"sour");
/// b.part(b"ce");
/// assert_ne!(a.finish(), b.finish());
/// ```
#[derive(Debug, Clone, Default)]
pub struct KeyHasher(blake3::Hasher);

impl KeyHasher {
    /// An empty key.
    pub fn new() -> Self {
        KeyHasher(blake3::Hasher::new())
    }

    /// Adds one part: its length (8 bytes, little-endian), then its bytes.
    pub fn part(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    /// The key: the hash in hexadecimal.
    pub fn finish(&self) -> String {
        self.0.finalize().to_hex().to_string()
    }
}

pub use crate::cache_outbox::CacheWriteError;

/// A directory of cached artifacts of one backend.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
    magic: &'static [u8; 8],
    extension: &'static str,
}

impl ArtifactCache {
    /// A cache in `dir` (created on first write) whose files are `<key>.<extension>` and
    /// start with `magic`.
    pub fn new(dir: impl Into<PathBuf>, magic: &'static [u8; 8], extension: &'static str) -> Self {
        ArtifactCache {
            dir: dir.into(),
            magic,
            extension,
        }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `key`.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.{}", self.extension))
    }

    /// The payload stored under `key`, if present and intact (a corrupt entry is deleted).
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let bytes = fs::read(self.path(key)).ok()?;
        let payload = bytes
            .strip_prefix(&self.magic[..])
            .filter(|rest| rest.len() >= 32)
            .map(|rest| rest.split_at(32))
            .filter(|(hash, payload)| blake3::hash(payload).as_bytes() == *hash)
            .map(|(_, payload)| payload.to_vec());
        if payload.is_none() {
            self.remove(key);
        }
        payload
    }

    /// Stores `payload` under `key` atomically (temporary file, synced, renamed into place);
    /// in a process whose writes go through its parent
    /// ([`crate::cache_outbox::defer_writes_to_parent`]), keeps it for the parent instead.
    pub fn put(&self, key: &str, payload: &[u8]) -> Result<(), CacheWriteError> {
        let mut bytes = Vec::with_capacity(self.magic.len() + 32 + payload.len());
        bytes.extend_from_slice(self.magic);
        bytes.extend_from_slice(blake3::hash(payload).as_bytes());
        bytes.extend_from_slice(payload);
        let entry = crate::cache_outbox::CacheEntry {
            dir: self.dir.clone(),
            file: format!("{key}.{}", self.extension),
            bytes,
        };
        match crate::cache_outbox::defer(entry) {
            None => Ok(()),
            Some(entry) => {
                crate::cache_outbox::write_atomically(&entry.dir, &entry.file, &entry.bytes)
                    .map(|_| ())
            }
        }
    }

    /// Deletes the entry under `key` (missing entries are fine).
    pub fn remove(&self, key: &str) {
        let _ = fs::remove_file(self.path(key));
    }
}

/// Width of the length prefix of a framed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LengthPrefix {
    /// 4 bytes, little-endian.
    U32,
    /// 8 bytes, little-endian.
    U64,
}

/// `header`'s length, `header`, then `body`: a payload with a header (JSON metadata) the
/// runtime cannot report itself.
pub fn frame(header: &[u8], body: &[u8], prefix: LengthPrefix) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + header.len() + body.len());
    match prefix {
        LengthPrefix::U32 => out.extend_from_slice(&(header.len() as u32).to_le_bytes()),
        LengthPrefix::U64 => out.extend_from_slice(&(header.len() as u64).to_le_bytes()),
    }
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}

/// Splits a [`frame`]d payload into header and body; `None` when it is too short.
pub fn unframe(payload: &[u8], prefix: LengthPrefix) -> Option<(&[u8], &[u8])> {
    let (len, rest) = match prefix {
        LengthPrefix::U32 => {
            let (len, rest) = payload.split_at_checked(4)?;
            (u64::from(u32::from_le_bytes(len.try_into().ok()?)), rest)
        }
        LengthPrefix::U64 => {
            let (len, rest) = payload.split_at_checked(8)?;
            (u64::from_le_bytes(len.try_into().ok()?), rest)
        }
    };
    rest.split_at_checked(usize::try_from(len).ok()?)
}

/// Where a backend caches compiled kernels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CacheChoice {
    /// [`default_cache_dir`].
    #[default]
    Default,
    /// This directory.
    Dir(PathBuf),
    /// No persistent cache.
    Disabled,
}

impl CacheChoice {
    /// The directory chosen, given the runtime folder the backend's runtime came from and
    /// the backend's cache name (`opencl`, `cuda`, `sycl`); `None` when disabled or when no
    /// default place exists.
    pub fn dir(&self, runtime_dir: Option<&Path>, backend: &str) -> Option<PathBuf> {
        match self {
            CacheChoice::Default => default_cache_dir(runtime_dir, backend),
            CacheChoice::Dir(dir) => Some(dir.clone()),
            CacheChoice::Disabled => None,
        }
    }
}

/// `<.runtime>/cache/<backend>` when the runtime came from `scripts/setup.sh`, else
/// `$XDG_CACHE_HOME/kernelfoundry/<backend>` (or `~/.cache/kernelfoundry/<backend>`).
///
/// ```
/// use std::path::Path;
/// let dir = kf_backend_common::cache::default_cache_dir(Some(Path::new("/r/.runtime")), "opencl");
/// assert_eq!(dir.as_deref(), Some(Path::new("/r/.runtime/cache/opencl")));
/// ```
pub fn default_cache_dir(runtime_dir: Option<&Path>, backend: &str) -> Option<PathBuf> {
    if let Some(dir) = runtime_dir {
        return Some(dir.join("cache").join(backend));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kernelfoundry").join(backend))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::new(dir.path().join("c"), b"KFTEST01", "bin");
        let key = KeyHasher::new().part(b"k").finish();
        assert!(cache.get(&key).is_none());
        cache.put(&key, b"payload").unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(&b"payload"[..]));
        // Another magic (a format version bump) never reads the entry.
        let other = ArtifactCache::new(dir.path().join("c"), b"KFTEST02", "bin");
        assert!(other.get(&key).is_none());
        assert!(!cache.path(&key).exists());
        cache.put(&key, b"payload").unwrap();
        let path = cache.path(&key);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(cache.get(&key).is_none());
        assert!(!path.exists());
    }

    #[test]
    fn framing() {
        for prefix in [LengthPrefix::U32, LengthPrefix::U64] {
            let framed = frame(b"{}", b"body", prefix);
            assert_eq!(unframe(&framed, prefix), Some((&b"{}"[..], &b"body"[..])));
            assert!(unframe(&framed[..3], prefix).is_none());
        }
        assert!(unframe(&[9, 0, 0, 0, 1], LengthPrefix::U32).is_none());
    }

    #[test]
    fn cache_choice() {
        assert_eq!(CacheChoice::Disabled.dir(None, "x"), None);
        assert_eq!(
            CacheChoice::Dir("/d".into()).dir(None, "x"),
            Some(PathBuf::from("/d"))
        );
    }

    /// An entry a child framed (as `put` frames it) and its parent stored reads back.
    #[test]
    fn an_entry_stored_by_the_parent_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::new(dir.path().join("c"), b"KFTEST01", "bin");
        let key = "ab".repeat(32);
        let mut bytes = b"KFTEST01".to_vec();
        bytes.extend_from_slice(blake3::hash(b"payload").as_bytes());
        bytes.extend_from_slice(b"payload");
        let entry = crate::cache_outbox::CacheEntry {
            dir: cache.dir().to_path_buf(),
            file: format!("{key}.bin"),
            bytes,
        };
        crate::cache_outbox::store_from_child(&entry, &[dir.path().to_path_buf()]).unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(&b"payload"[..]));
    }
}
