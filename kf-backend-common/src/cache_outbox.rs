//! Compile-cache writes made by the parent, not by confined code.
//!
//! An evaluation worker builds untrusted kernels; were its compile caches writable, a build
//! gone wrong could plant an entry that a later evaluation (of another kernel, by another
//! worker) loads. So a confined worker reads the caches but does not write them: it calls
//! [`defer_writes_to_parent`] once, and from then on [`crate::ArtifactCache::put`] keeps each
//! entry, framed as on disk, in an outbox instead of writing it. After each job the worker
//! sends [`take_deferred`]'s entries with its answer, and the parent stores them with
//! [`store_from_child`]: only under a cache folder it chose, only under a file name that is a
//! content key, only with an intact hash, written to a temporary file, synced and renamed
//! into place, as the worker's own write would have been.

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// A write to the cache failed.
#[derive(Debug)]
pub struct CacheWriteError {
    /// The file (or directory) that could not be written.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// `compile cache <path>: <why>`: what each backend's cache error says.
impl std::fmt::Display for CacheWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "compile cache {}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for CacheWriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The largest entry the parent stores (a SYCL bundle is a few MiB).
pub const MAX_ENTRY_BYTES: usize = 256 << 20;

/// One cache file, as it would be on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The cache folder.
    pub dir: PathBuf,
    /// The file name: `<key>.<extension>`.
    pub file: String,
    /// The whole file: magic tag, BLAKE3 hash of the payload, payload (base64 in JSON).
    #[serde(with = "base64_bytes")]
    pub bytes: Vec<u8>,
}

/// The outbox: `Some` once writes are deferred.
static OUTBOX: Mutex<Option<Vec<CacheEntry>>> = Mutex::new(None);

/// From now on this process's cache writes go to the outbox ([`take_deferred`]).
pub fn defer_writes_to_parent() {
    if let Ok(mut outbox) = OUTBOX.lock() {
        outbox.get_or_insert_with(Vec::new);
    }
}

/// Keeps `entry` when writes are deferred; gives it back otherwise.
pub(crate) fn defer(entry: CacheEntry) -> Option<CacheEntry> {
    match OUTBOX.lock() {
        Ok(mut outbox) => match outbox.as_mut() {
            Some(kept) => {
                kept.push(entry);
                None
            }
            None => Some(entry),
        },
        Err(_) => Some(entry),
    }
}

/// The entries deferred since the last call.
pub fn take_deferred() -> Vec<CacheEntry> {
    OUTBOX
        .lock()
        .ok()
        .and_then(|mut o| o.as_mut().map(std::mem::take))
        .unwrap_or_default()
}

/// Why the parent did not store an entry from a child.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// The folder is not under one of the parent's cache folders.
    #[error("{0}: not one of this process's compile cache folders")]
    Folder(PathBuf),
    /// The file name is not `<hex key>.<extension>`.
    #[error("`{0}`: not a cache file name")]
    Name(String),
    /// Too large, or the payload does not match its hash.
    #[error("{file}: {why}")]
    Content {
        /// The file.
        file: String,
        /// What is wrong.
        why: &'static str,
    },
    /// Writing failed.
    #[error("writing {}: {}", .0.path.display(), .0.source)]
    Write(CacheWriteError),
}

/// Stores an entry a child sent, where `roots` (the parent's cache folders) allow it; returns
/// the file written.
pub fn store_from_child(entry: &CacheEntry, roots: &[PathBuf]) -> Result<PathBuf, OutboxError> {
    let plain = entry
        .dir
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain || !roots.iter().any(|r| entry.dir.starts_with(r)) {
        return Err(OutboxError::Folder(entry.dir.clone()));
    }
    let (key, extension) = entry
        .file
        .split_once('.')
        .ok_or_else(|| OutboxError::Name(entry.file.clone()))?;
    let key_ok = key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit());
    let extension_ok = !extension.is_empty()
        && extension.len() <= 16
        && extension.bytes().all(|b| b.is_ascii_alphanumeric());
    if !key_ok || !extension_ok {
        return Err(OutboxError::Name(entry.file.clone()));
    }
    let content = |why| OutboxError::Content {
        file: entry.file.clone(),
        why,
    };
    if entry.bytes.len() > MAX_ENTRY_BYTES {
        return Err(content("larger than the largest cache entry stored"));
    }
    let intact = entry
        .bytes
        .get(8..)
        .filter(|rest| rest.len() >= 32)
        .map(|rest| rest.split_at(32))
        .is_some_and(|(hash, payload)| blake3::hash(payload).as_bytes() == hash);
    if !intact {
        return Err(content("the payload does not match its hash"));
    }
    write_atomically(&entry.dir, &entry.file, &entry.bytes).map_err(OutboxError::Write)
}

/// Writes `bytes` to `dir/file` through a synced temporary file and a rename.
pub(crate) fn write_atomically(
    dir: &Path,
    file: &str,
    bytes: &[u8],
) -> Result<PathBuf, CacheWriteError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir).map_err(|source| CacheWriteError {
        path: dir.to_path_buf(),
        source,
    })?;
    let final_path = dir.join(file);
    let tmp = dir.join(format!(
        ".{file}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &final_path)
    };
    write().map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        CacheWriteError {
            path: final_path.clone(),
            source,
        }
    })?;
    Ok(final_path)
}

/// Bytes as base64 text in JSON: a third of the size of an array of numbers.
mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(dir: &Path, payload: &[u8]) -> CacheEntry {
        let mut bytes = b"KFTEST01".to_vec();
        bytes.extend_from_slice(blake3::hash(payload).as_bytes());
        bytes.extend_from_slice(payload);
        CacheEntry {
            dir: dir.to_path_buf(),
            file: format!("{}.bin", "ab".repeat(32)),
            bytes,
        }
    }

    /// What the parent stores reads back through the cache; an entry outside its folders,
    /// with a name that is not a key, or with a payload that does not match its hash is
    /// refused and writes nothing.
    #[test]
    fn the_parent_stores_only_intact_entries_under_its_own_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("cache");
        let dir = root.join("opencl");
        let good = entry(&dir, b"payload");
        let json = serde_json::to_string(&good).unwrap();
        let back: CacheEntry = serde_json::from_str(&json).unwrap();
        assert_eq!(back, good);
        let written = store_from_child(&back, std::slice::from_ref(&root)).unwrap();
        assert_eq!(written, dir.join(&good.file));
        assert_eq!(std::fs::read(&written).unwrap(), good.bytes);

        let outside = entry(&tmp.path().join("elsewhere"), b"x");
        assert!(matches!(
            store_from_child(&outside, std::slice::from_ref(&root)),
            Err(OutboxError::Folder(_))
        ));
        let climbing = entry(&root.join("../elsewhere"), b"x");
        assert!(matches!(
            store_from_child(&climbing, std::slice::from_ref(&root)),
            Err(OutboxError::Folder(_))
        ));
        for name in ["devices.json", "../x.bin", "abc.bin"] {
            let mut bad = entry(&dir, b"x");
            bad.file = name.to_owned();
            assert!(
                matches!(
                    store_from_child(&bad, std::slice::from_ref(&root)),
                    Err(OutboxError::Name(_))
                ),
                "{name}"
            );
        }
        let mut forged = entry(&dir, b"payload");
        let last = forged.bytes.len() - 1;
        forged.bytes[last] ^= 1;
        forged.file = format!("{}.bin", "cd".repeat(32));
        assert!(matches!(
            store_from_child(&forged, std::slice::from_ref(&root)),
            Err(OutboxError::Content { .. })
        ));
        assert!(!dir.join(&forged.file).exists());
        assert!(!tmp.path().join("elsewhere").exists());
    }
}
