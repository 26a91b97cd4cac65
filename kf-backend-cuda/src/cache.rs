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

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::CudaError;

const MAGIC: &[u8; 8] = b"KFCUBIN1";
const KEY_VERSION: &[u8] = b"kf-backend-cuda cache v1";

/// A directory of cached NVRTC outputs.
#[derive(Debug, Clone)]
pub struct BinaryCache {
    dir: PathBuf,
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
        BinaryCache { dir: dir.into() }
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key of `source` compiled with `options` by NVRTC `nvrtc_version`.
    pub fn key(source: &str, options: &[String], nvrtc_version: &str) -> String {
        let mut h = blake3::Hasher::new();
        let mut part = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(KEY_VERSION);
        part(nvrtc_version.as_bytes());
        part(source.as_bytes());
        for o in options {
            part(o.as_bytes());
        }
        h.finalize().to_hex().to_string()
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.kfcubin"))
    }

    /// The build stored under `key`, if present and intact.
    pub fn get(&self, key: &str) -> Option<CachedBuild> {
        let bytes = fs::read(self.path(key)).ok()?;
        let parsed = Self::parse(&bytes);
        if parsed.is_none() {
            self.remove(key);
        }
        parsed
    }

    fn parse(bytes: &[u8]) -> Option<CachedBuild> {
        if bytes.len() < MAGIC.len() + 32 + 8 || &bytes[..MAGIC.len()] != MAGIC {
            return None;
        }
        let (hash, payload) = bytes[MAGIC.len()..].split_at(32);
        if blake3::hash(payload).as_bytes() != hash {
            return None;
        }
        let (len, rest) = payload.split_at(8);
        let len = usize::try_from(u64::from_le_bytes(len.try_into().ok()?)).ok()?;
        if len > rest.len() {
            return None;
        }
        let (header, cubin) = rest.split_at(len);
        let header: Header = serde_json::from_slice(header).ok()?;
        Some(CachedBuild {
            log: header.log,
            ptx: header.ptx,
            cubin: cubin.to_vec(),
        })
    }

    /// Stores `build` under `key` atomically (temporary file + rename).
    pub fn put(&self, key: &str, build: &CachedBuild) -> Result<(), CudaError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CudaError::Cache { path, source }
        };
        fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let header = serde_json::to_vec(&Header {
            log: build.log.clone(),
            ptx: build.ptx.clone(),
        })
        .map_err(|e| CudaError::Cache {
            path: self.path(key),
            source: std::io::Error::other(e),
        })?;
        let mut payload = Vec::with_capacity(8 + header.len() + build.cubin.len());
        payload.extend_from_slice(&(header.len() as u64).to_le_bytes());
        payload.extend_from_slice(&header);
        payload.extend_from_slice(&build.cubin);
        let final_path = self.path(key);
        let tmp = self.dir.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> std::io::Result<()> {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(blake3::hash(&payload).as_bytes())?;
            f.write_all(&payload)?;
            f.sync_all()?;
            fs::rename(&tmp, &final_path)
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            CudaError::Cache {
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
        let path = cache.path(&key);
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(cache.get(&key).is_none());
        assert!(!path.exists());
    }

    #[test]
    fn option_boundaries_matter() {
        let a = BinaryCache::key("s", &["-DA=1".into(), "-DB=2".into()], "12.9");
        let b = BinaryCache::key("s", &["-DA=1-DB=2".into()], "12.9");
        assert_ne!(a, b);
    }
}
