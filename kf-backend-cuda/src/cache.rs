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

use std::borrow::Cow;
use std::ops::Deref;
use std::path::PathBuf;

use kf_backend_common::cache::{frame, unframe, LengthPrefix};
use kf_backend_common::{CacheFormat, CompileCache, KeyHasher};
use serde::{Deserialize, Serialize};

use crate::error::CudaError;

const KEY_VERSION: &[u8] = b"kf-backend-cuda cache v1";

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

/// An entry of the CUDA compile cache: a JSON header with the log and the PTX, then the
/// cubin.
#[derive(Debug)]
pub struct NvrtcOutput;

impl CacheFormat for NvrtcOutput {
    const MAGIC: &'static [u8; 8] = b"KFCUBIN1";
    const EXTENSION: &'static str = "kfcubin";
    type Entry = CachedBuild;

    fn encode(build: &CachedBuild) -> std::io::Result<Cow<'_, [u8]>> {
        let header = serde_json::to_vec(&Header {
            log: build.log.clone(),
            ptx: build.ptx.clone(),
        })
        .map_err(std::io::Error::other)?;
        Ok(Cow::Owned(frame(&header, &build.cubin, LengthPrefix::U64)))
    }

    fn decode(payload: &[u8]) -> Option<CachedBuild> {
        let (header, cubin) = unframe(payload, LengthPrefix::U64)?;
        let header: Header = serde_json::from_slice(header).ok()?;
        Some(CachedBuild {
            log: header.log,
            ptx: header.ptx,
            cubin: cubin.to_vec(),
        })
    }
}

/// A directory of cached NVRTC outputs: a [`CompileCache`] (its `dir`, `path`, `get` and
/// `remove`) with this backend's keys and errors.
#[derive(Debug, Clone)]
pub struct BinaryCache {
    files: CompileCache<NvrtcOutput>,
}

impl Deref for BinaryCache {
    type Target = CompileCache<NvrtcOutput>;

    fn deref(&self) -> &CompileCache<NvrtcOutput> {
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

    /// Stores `build` under `key` atomically (temporary file + rename).
    pub fn put(&self, key: &str, build: &CachedBuild) -> Result<(), CudaError> {
        Ok(self.files.put(key, build)?)
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
