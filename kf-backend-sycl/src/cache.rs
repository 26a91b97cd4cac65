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

use std::borrow::Cow;
use std::ops::Deref;
use std::path::PathBuf;

use kf_backend_common::cache::{frame, unframe, LengthPrefix};
use kf_backend_common::{CacheFormat, CompileCache, KeyHasher};
use kf_core::DeviceFacts;
use serde::{Deserialize, Serialize};

use crate::error::SyclError;

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

/// An entry of the SYCL compile cache: the length of a JSON metadata block, the metadata,
/// then the SYCLBIN.
#[derive(Debug)]
pub struct KernelBundle;

impl CacheFormat for KernelBundle {
    const MAGIC: &'static [u8; 8] = b"KFSYBIN1";
    const EXTENSION: &'static str = "syclbin";
    type Entry = (Vec<u8>, EntryMeta);

    fn encode((bundle, meta): &(Vec<u8>, EntryMeta)) -> std::io::Result<Cow<'_, [u8]>> {
        let meta = serde_json::to_vec(meta).unwrap_or_default();
        Ok(Cow::Owned(frame(&meta, bundle, LengthPrefix::U32)))
    }

    fn decode(payload: &[u8]) -> Option<(Vec<u8>, EntryMeta)> {
        let (meta, bundle) = unframe(payload, LengthPrefix::U32)?;
        let meta: EntryMeta = serde_json::from_slice(meta).ok()?;
        Some((bundle.to_vec(), meta))
    }
}

/// A directory of cached kernel bundles: a [`CompileCache`] (its `dir`, `path`, `get` and
/// `remove`) with this backend's keys and errors.
#[derive(Debug, Clone)]
pub struct BundleCache {
    files: CompileCache<KernelBundle>,
}

impl Deref for BundleCache {
    type Target = CompileCache<KernelBundle>;

    fn deref(&self) -> &CompileCache<KernelBundle> {
        &self.files
    }
}

impl BundleCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BundleCache {
            files: CompileCache::new(dir),
        }
    }

    /// The key of a bundle built from `source` with `options` for `entry` on `device`.
    pub fn key(source: &str, options: &[String], entry: &str, device: &DeviceFacts) -> String {
        let mut h = KeyHasher::new();
        h.part(KEY_VERSION);
        h.part(source.as_bytes());
        h.part(&(options.len() as u64).to_le_bytes());
        for option in options {
            h.part(option.as_bytes());
        }
        h.part(entry.as_bytes());
        for text in [
            &device.name,
            &device.vendor,
            &device.platform,
            &device.driver_version,
        ] {
            h.part(text.as_bytes());
        }
        for extra in ["platform_version", "sycl_backend", "sycl_runtime"] {
            h.part(device.extra.get(extra).map_or(&b""[..], |v| v.as_bytes()));
        }
        h.finish()
    }

    /// Stores `bundle` and `meta` under `key` atomically (temporary file + rename).
    pub fn put(&self, key: &str, bundle: &[u8], meta: &EntryMeta) -> Result<(), SyclError> {
        Ok(self.files.put(key, &(bundle.to_vec(), meta.clone()))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
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
        // A corrupt entry is rejected and removed: `ArtifactCache`'s test.
        cache.remove(&key);
        assert!(cache.get(&key).is_none());
    }

    #[test]
    fn runtime_version_changes_the_key() {
        let mut a = DeviceFacts::unknown("d");
        let k1 = BundleCache::key("s", &[], "k", &a);
        a.extra.insert("sycl_runtime".into(), "libsycl 9.1".into());
        assert_ne!(k1, BundleCache::key("s", &[], "k", &a));
    }
}
