//! The persistent compile cache: NVRTC outputs (cubin, PTX and log) keyed by everything that
//! affects them.
//!
//! A key is the BLAKE3 hash of the source text, the complete NVRTC options (architecture,
//! definitions, include paths, flags) and the NVRTC version, so that another architecture or
//! compiler never reuses a stale binary. An entry is one file `<key>.kfcubin` holding a magic
//! tag, the BLAKE3 hash of the payload, and the payload (a JSON header with the log and the PTX,
//! then the cubin). Files are written to a unique temporary name and renamed into place, so
//! concurrent processes (evaluation workers) never read half a file; a corrupt entry is deleted
//! and rebuilt.

use std::path::{Path, PathBuf};

use kf_backend_common::cache::{frame, unframe, LengthPrefix};
use kf_backend_common::{ArtifactCache, KeyHasher};
use serde::{Deserialize, Serialize};

use crate::error::CudaError;

const MAGIC: &[u8; 8] = b"KFCUBIN1";
const KEY_VERSION: &[u8] = b"kf-backend-cuda cache v1";

/// A directory of cached NVRTC outputs.
#[derive(Debug, Clone)]
pub struct BinaryCache {
    files: ArtifactCache,
}

/// One cached compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedBuild {
    /// NVRTC's log (with ptxas' resource report).
    pub log: String,
    /// The PTX.
    pub ptx: String,
    /// The cubin; empty when compiled for a virtual architecture.
    pub cubin: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct Header {
    log: String,
    ptx: String,
}

impl BinaryCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BinaryCache {
            files: ArtifactCache::new(dir, MAGIC, "kfcubin"),
        }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        self.files.dir()
    }

    /// The file an entry of `key` is (or would be) stored in: what a compile worker ships
    /// to an execute worker, byte for byte (the file checks its own integrity).
    pub fn path(&self, key: &str) -> std::path::PathBuf {
        self.files.path(key)
    }

    /// The key of `source` compiled with `options` by NVRTC `nvrtc_version`.
    pub fn key(source: &str, options: &[String], nvrtc_version: &str) -> String {
        let mut h = KeyHasher::new();
        h.part(KEY_VERSION);
        h.part(nvrtc_version.as_bytes());
        h.part(source.as_bytes());
        for o in options {
            h.part(o.as_bytes());
        }
        h.finish()
    }

    /// The build stored under `key`, if present and intact.
    pub fn get(&self, key: &str) -> Option<CachedBuild> {
        let payload = self.files.get(key)?;
        let parsed = unframe(&payload, LengthPrefix::U64).and_then(|(header, cubin)| {
            let header: Header = serde_json::from_slice(header).ok()?;
            Some(CachedBuild {
                log: header.log,
                ptx: header.ptx,
                cubin: cubin.to_vec(),
            })
        });
        if parsed.is_none() {
            self.remove(key);
        }
        parsed
    }

    /// Stores `build` under `key` atomically (temporary file + rename).
    pub fn put(&self, key: &str, build: &CachedBuild) -> Result<(), CudaError> {
        let header = serde_json::to_vec(&Header {
            log: build.log.clone(),
            ptx: build.ptx.clone(),
        })
        .map_err(|e| CudaError::Cache {
            path: self.files.path(key),
            source: std::io::Error::other(e),
        })?;
        self.files
            .put(key, &frame(&header, &build.cubin, LengthPrefix::U64))
            .map_err(|e| CudaError::Cache {
                path: e.path,
                source: e.source,
            })
    }

    /// Deletes the entry under `key` (missing entries are fine).
    pub fn remove(&self, key: &str) {
        self.files.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BinaryCache::new(dir.path().join("c"));
        let opts = |v: &str| vec!["--gpu-architecture=sm_90".to_owned(), format!("-DA={v}")];
        let key = BinaryCache::key("src", &opts("1"), "12.9");
        assert_ne!(key, BinaryCache::key("src", &opts("2"), "12.9"));
        assert_ne!(key, BinaryCache::key("src", &opts("1"), "12.8"));
        assert!(cache.get(&key).is_none());
        let build = CachedBuild {
            log: "ptxas info : Used 4 registers".into(),
            ptx: ".entry k()".into(),
            cubin: vec![1, 2, 3],
        };
        cache.put(&key, &build).unwrap();
        assert_eq!(cache.get(&key), Some(build));
        // A corrupt entry is rejected and removed: `ArtifactCache`'s test.
        cache.remove(&key);
        assert!(cache.get(&key).is_none());
    }

    #[test]
    fn option_boundaries_matter() {
        let a = BinaryCache::key("s", &["-DA=1".into(), "-DB=2".into()], "12.9");
        let b = BinaryCache::key("s", &["-DA=1-DB=2".into()], "12.9");
        assert_ne!(a, b);
    }
}
