//! The persistent compile cache: serialised kernel bundles (SYCLBIN, from
//! `kernel_bundle::ext_oneapi_get_content`) keyed by everything that affects them.
//!
//! A key is the BLAKE3 hash of the source text, every build option (definitions and flags),
//! the entry point, the device's name, vendor, platform, backend and driver version, and the
//! SYCL runtime's version, so that a runtime or driver update or another device never reuses
//! a stale bundle. An entry is one file `<key>.syclbin` holding a magic tag, the BLAKE3 hash of
//! the rest, the length of a JSON metadata block (facts the runtime cannot report for a loaded
//! bundle, such as the kernel's argument count), the metadata and the SYCLBIN. Files are
//! written to a unique temporary name and renamed into place, so concurrent processes
//! (evaluation workers) never read half a file; a corrupt or unloadable entry is deleted and
//! rebuilt.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use kf_core::DeviceFacts;
use serde::{Deserialize, Serialize};

use crate::error::SyclError;

const MAGIC: &[u8; 8] = b"KFSYBIN1";
const KEY_VERSION: &[u8] = b"kf-backend-sycl cache v1";

/// Facts stored beside a cached bundle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EntryMeta {
    /// The kernel's argument count as the runtime counts it, if it said.
    #[serde(default)]
    pub num_args: Option<u32>,
    /// The build log.
    #[serde(default)]
    pub log: String,
    /// Seconds the original build took.
    #[serde(default)]
    pub build_seconds: Option<f64>,
}

/// A directory of cached kernel bundles.
#[derive(Debug, Clone)]
pub struct BundleCache {
    dir: PathBuf,
}

impl BundleCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BundleCache { dir: dir.into() }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of a bundle built from `source` with `options` for `entry` on `device`.
    pub fn key(source: &str, options: &[String], entry: &str, device: &DeviceFacts) -> String {
        let mut h = blake3::Hasher::new();
        let mut part = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(KEY_VERSION);
        part(source.as_bytes());
        part(&(options.len() as u64).to_le_bytes());
        for option in options {
            part(option.as_bytes());
        }
        part(entry.as_bytes());
        for text in [
            &device.name,
            &device.vendor,
            &device.platform,
            &device.driver_version,
        ] {
            part(text.as_bytes());
        }
        for extra in ["platform_version", "sycl_backend", "sycl_runtime"] {
            part(device.extra.get(extra).map_or(&b""[..], |v| v.as_bytes()));
        }
        h.finalize().to_hex().to_string()
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.syclbin"))
    }

    /// The bundle and metadata stored under `key`, if present and intact.
    pub fn get(&self, key: &str) -> Option<(Vec<u8>, EntryMeta)> {
        let bytes = fs::read(self.path(key)).ok()?;
        let parsed = (|| {
            let rest = bytes.strip_prefix(&MAGIC[..])?;
            if rest.len() < 32 + 4 {
                return None;
            }
            let (hash, body) = rest.split_at(32);
            if blake3::hash(body).as_bytes() != hash {
                return None;
            }
            let (len, body) = body.split_at(4);
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            if body.len() < len {
                return None;
            }
            let (meta, payload) = body.split_at(len);
            let meta: EntryMeta = serde_json::from_slice(meta).ok()?;
            Some((payload.to_vec(), meta))
        })();
        if parsed.is_none() {
            self.remove(key);
        }
        parsed
    }

    /// Stores `bundle` and `meta` under `key` atomically (temporary file + rename).
    pub fn put(&self, key: &str, bundle: &[u8], meta: &EntryMeta) -> Result<(), SyclError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SyclError::Cache { path, source }
        };
        fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let final_path = self.path(key);
        let tmp = self.dir.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let meta = serde_json::to_vec(meta).unwrap_or_default();
        let mut body = Vec::with_capacity(4 + meta.len() + bundle.len());
        body.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        body.extend_from_slice(&meta);
        body.extend_from_slice(bundle);
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(blake3::hash(&body).as_bytes())?;
            f.write_all(&body)?;
            f.sync_all()?;
            fs::rename(&tmp, &final_path)
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            SyclError::Cache {
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
        let cache = BundleCache::new(dir.path().join("c"));
        let dev = DeviceFacts::unknown("d");
        let opts = vec!["-DA=1".to_owned()];
        let key = BundleCache::key("src", &opts, "k", &dev);
        assert_ne!(
            key,
            BundleCache::key("src", &["-DA=2".to_owned()], "k", &dev)
        );
        assert_ne!(key, BundleCache::key("src", &opts, "k2", &dev));
        // Option boundaries matter: ["-DA=1 -DB=2"] is not ["-DA=1", "-DB=2"].
        assert_ne!(
            BundleCache::key("s", &["-DA=1 -DB=2".into()], "k", &dev),
            BundleCache::key("s", &["-DA=1".into(), "-DB=2".into()], "k", &dev)
        );
        assert!(cache.get(&key).is_none());
        let meta = EntryMeta {
            num_args: Some(4),
            log: "ok".into(),
            build_seconds: Some(3.5),
        };
        cache.put(&key, b"bundle", &meta).unwrap();
        let (bundle, back) = cache.get(&key).unwrap();
        assert_eq!(bundle, b"bundle");
        assert_eq!(back, meta);
        let path = cache.path(&key);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(cache.get(&key).is_none());
        assert!(!path.exists());
    }

    #[test]
    fn runtime_version_changes_the_key() {
        let mut a = DeviceFacts::unknown("d");
        let k1 = BundleCache::key("s", &[], "k", &a);
        a.extra.insert("sycl_runtime".into(), "libsycl 9.1".into());
        assert_ne!(k1, BundleCache::key("s", &[], "k", &a));
    }
}
