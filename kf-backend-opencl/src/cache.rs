//! The persistent compile cache: program binaries keyed by everything that affects them.
//!
//! A key is the BLAKE3 hash of the source text, the complete build options (definitions and
//! flags), and the device's name, vendor, platform and driver version, so that a driver update
//! or another device never reuses a stale binary. An entry is one file `<key>.clbin` holding a
//! magic tag, the BLAKE3 hash of the payload and the payload (the `CL_PROGRAM_BINARIES` of the
//! device). Files are written to a unique temporary name and renamed into place, so concurrent
//! processes (evaluation workers) never read half a file; a corrupt or unloadable entry is
//! deleted and rebuilt.

use std::borrow::Cow;
use std::ops::Deref;
use std::path::PathBuf;

use kf_backend_common::{CacheFormat, CompileCache, KeyHasher};
use kf_core::DeviceFacts;

use crate::error::OpenClError;

const KEY_VERSION: &[u8] = b"kf-backend-opencl cache v1";

/// An entry of the OpenCL compile cache: the device's program binary, as it is.
#[derive(Debug)]
pub struct ProgramBinary;

impl CacheFormat for ProgramBinary {
    const MAGIC: &'static [u8; 8] = b"KFCLBIN1";
    const EXTENSION: &'static str = "clbin";
    type Entry = Vec<u8>;

    fn encode(binary: &Vec<u8>) -> std::io::Result<Cow<'_, [u8]>> {
        Ok(Cow::Borrowed(binary))
    }

    fn decode(payload: &[u8]) -> Option<Vec<u8>> {
        Some(payload.to_vec())
    }
}

/// A directory of cached program binaries: a [`CompileCache`] (its `dir`, `path`, `get` and
/// `remove`) with this backend's keys and errors.
#[derive(Debug, Clone)]
pub struct BinaryCache {
    files: CompileCache<ProgramBinary>,
}

impl Deref for BinaryCache {
    type Target = CompileCache<ProgramBinary>;

    fn deref(&self) -> &CompileCache<ProgramBinary> {
        &self.files
    }
}

impl BinaryCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BinaryCache {
            files: CompileCache::new(dir),
        }
    }

    /// The key of a program built from `source` with `options` for `device`.
    pub fn key(source: &str, options: &str, device: &DeviceFacts) -> String {
        let mut h = KeyHasher::new();
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
            h.part(part);
        }
        h.finish()
    }

    /// Stores `binary` under `key` atomically (temporary file + rename).
    pub fn put(&self, key: &str, binary: &[u8]) -> Result<(), OpenClError> {
        Ok(self.files.put(key, &binary.to_vec())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BinaryCache::new(dir.path().join("c"));
        let dev = DeviceFacts::unknown("d");
        let key = BinaryCache::key("src", "-D A=1", &dev);
        assert_ne!(key, BinaryCache::key("src", "-D A=2", &dev));
        assert!(cache.get(&key).is_none());
        cache.put(&key, b"binary").unwrap();
        assert_eq!(cache.get(&key).as_deref(), Some(&b"binary"[..]));
        // A corrupt entry is rejected and removed: `ArtifactCache`'s test.
        cache.remove(&key);
        assert!(cache.get(&key).is_none());
    }

    #[test]
    fn driver_version_changes_the_key() {
        let mut a = DeviceFacts::unknown("d");
        let k1 = BinaryCache::key("s", "", &a);
        a.driver_version = "2".into();
        assert_ne!(k1, BinaryCache::key("s", "", &a));
    }
}
