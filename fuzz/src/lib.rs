//! Shared pieces of the KernelFoundry-rs fuzz targets (`fuzz_targets/*.rs`): input bounds, the
//! splitting of one input into several files, and the fixed context (device, sizes, parent
//! kernel) the parsed inputs are exercised against.
//!
//! Every target returns early on inputs longer than its bound, so that the work per input —
//! and what it may allocate — is bounded by the input size; libFuzzer's `-timeout` and
//! `-rss_limit_mb` (set by `scripts/fuzz.sh`) turn anything slower or bigger into a finding.

#![deny(missing_docs)]

use indexmap::IndexMap;
use kf_core::DeviceFacts;

/// The largest input (bytes) any target accepts; larger inputs are ignored. The script passes
/// the same value to libFuzzer as `-max_len`.
pub const MAX_INPUT: usize = 64 * 1024;

/// Separates the files of a multi-file input (a run directory: `run.json`, `steps.jsonl`,
/// `snapshot.json`; a reply and the parent it edits). A NUL byte never occurs in the text
/// files themselves, so seeds are the real files joined with it.
pub const SEPARATOR: u8 = 0;

/// Splits `data` at [`SEPARATOR`] into at most `n` parts; missing parts are `None`, so an
/// input can leave a file out (the last part keeps any further separators).
pub fn split_parts(data: &[u8], n: usize) -> Vec<Option<&[u8]>> {
    let mut parts: Vec<Option<&[u8]>> = data.splitn(n, |b| *b == SEPARATOR).map(Some).collect();
    parts.resize(n, None);
    parts
}

/// The device the expressions are evaluated against: the facts a mid-range GPU reports.
pub fn device() -> DeviceFacts {
    let mut d = DeviceFacts::unknown("fuzz-device");
    d.max_work_group_size = 256;
    d.local_mem_bytes = 48 * 1024;
    d.compute_units = 16;
    d
}

/// Problem sizes for the expressions (`M`, `N`, `K`, `rows`, `cols`, `n`).
pub fn sizes() -> IndexMap<String, i64> {
    [
        ("M", 256),
        ("N", 128),
        ("K", 64),
        ("rows", 64),
        ("cols", 1024),
        ("n", 4096),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The parent kernel an LLM reply edits when the input names none: the repository's tiled
/// GEMM.
pub const PARENT_KERNEL: &str = include_str!("../../kf-eval/kernels/gemm_tiled.cl");

/// The parent kernel's manifest.
pub const PARENT_MANIFEST: &str = include_str!("../../kf-eval/kernels/gemm_tiled.toml");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_missing_parts_as_none() {
        let parts = split_parts(b"a\0b", 3);
        assert_eq!(parts, vec![Some(&b"a"[..]), Some(&b"b"[..]), None]);
        let parts = split_parts(b"a\0b\0c\0d", 3);
        assert_eq!(parts[2], Some(&b"c\0d"[..]));
    }

    #[test]
    fn parent_manifest_parses() {
        kf_manifest::Manifest::parse(PARENT_MANIFEST, "gemm_tiled.toml", None).unwrap();
    }
}
