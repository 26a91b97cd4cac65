//! The persistent compile cache: program binaries keyed by everything that affects them.
//!
//! A key is the BLAKE3 hash of the source text, the complete build options (definitions and
//! flags), and the device's name, vendor, platform and driver version, so that a driver update
//! or another device never reuses a stale binary. An entry is one file `<key>.clbin` holding a
//! magic tag, the BLAKE3 hash of the payload and the payload (the `CL_PROGRAM_BINARIES` of the
//! device). Files are written to a unique temporary name and renamed into place, so concurrent
//! processes (evaluation workers) never read half a file; a corrupt or unloadable entry is
//! deleted and rebuilt.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use kf_core::DeviceFacts;

use crate::error::OpenClError;

const MAGIC: &[u8; 8] = b"KFCLBIN1";
const KEY_VERSION: &[u8] = b"kf-backend-opencl cache v1";

/// A directory of cached program binaries.
#[derive(Debug, Clone)]
pub struct BinaryCache {
    dir: PathBuf,
}

impl BinaryCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BinaryCache { dir: dir.into() }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a program built from `source` with `options` for `device`.
    pub fn key(source: &str, options: &str, device: &DeviceFacts) -> String {
        let mut h = blake3::Hasher::new();
        for part in [
            KEY_VERSION,
            source.as_bytes(),
            options.as_bytes(),
            device.name.as_bytes(),
            device.vendor.as_bytes(),
            device.platform.as_bytes(),
            device.driver_version.as_bytes(),
            device
                .extra
                .get("platform_version")
                .map_or(&b""[..], |v| v.as_bytes()),
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize().to_hex().to_string()
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.clbin"))
    }

    /// The binary stored under `key`, if present and intact.
    pub fn get(&self, key: &str) -> Option<Vec<u8>> {
        let bytes = fs::read(self.path(key)).ok()?;
        if bytes.len() < MAGIC.len() + 32 || &bytes[..MAGIC.len()] != MAGIC {
            self.remove(key);
            return None;
        }
        let (hash, payload) = bytes[MAGIC.len()..].split_at(32);
        if blake3::hash(payload).as_bytes() != hash {
            self.remove(key);
            return None;
        }
        Some(payload.to_vec())
    }

    /// Stores `binary` under `key` atomically (temporary file + rename).
    pub fn put(&self, key: &str, binary: &[u8]) -> Result<(), OpenClError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| OpenClError::Cache { path, source }
        };
        fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let final_path = self.path(key);
        let tmp = self.dir.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(blake3::hash(binary).as_bytes())?;
            f.write_all(binary)?;
            f.sync_all()?;
            fs::rename(&tmp, &final_path)
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            OpenClError::Cache {
                path: final_path.clone(),
                source: e,
            }
        })
    }

    /// Deletes the entry under `key` (missing entries are fine).
    pub fn remove(&self, key: &str) {
        let _ = fs::remove_file(self.path(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BinaryCache::new(dir.path().join("c"));
        let dev = DeviceFacts::unknown("d");
        let key = BinaryCache::key("src", "-D A=1", &dev);
        assert_ne!(key, BinaryCache::key("src", "-D A=2", &dev));
        assert!(cache.get(&key).is_none());
        cache.put(&key, b"binary").unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(&b"binary"[..]));
        // Flip a payload byte: the entry is rejected and removed.
        let path = cache.path(&key);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(cache.get(&key).is_none());
        assert!(!path.exists());
    }

    #[test]
    fn driver_version_changes_the_key() {
        let mut a = DeviceFacts::unknown("d");
        let k1 = BinaryCache::key("s", "", &a);
        a.driver_version = "2".into();
        assert_ne!(k1, BinaryCache::key("s", "", &a));
    }
}
