//! The KernelFoundry-rs fuzz targets: each target's harness (a function of one input, in
//! [`parsers`] for the parsers of files and model replies, [`chat`] for the chat-completion
//! wire decoders, [`dist`] for the distributed-evaluation queue's messages; [`TARGETS`] lists
//! them; [`oracle`] for the differential targets that need an outside tool as their oracle,
//! listed apart in [`ORACLE_TARGETS`]), which the binaries in `fuzz_targets/` hand to libFuzzer and this crate's tests run
//! on the committed seeds; and their shared pieces: input bounds, the splitting of one input
//! into several files, and the fixed context (device, sizes, parent kernel) the parsed inputs
//! are exercised against.
//!
//! Every target returns early on inputs longer than its bound, so that the work per input —
//! and what it may allocate — is bounded by the input size; libFuzzer's `-timeout` and
//! `-rss_limit_mb` (set by `scripts/fuzz.sh`) turn anything slower or bigger into a finding.

#![deny(missing_docs)]

use indexmap::IndexMap;
use kf_core::DeviceFacts;

pub mod chat;
pub mod dist;
pub mod oracle;
pub mod parsers;
#[cfg(test)]
mod seeds;

/// A target's harness: runs one input, panics on a finding.
pub type Harness = fn(&[u8]);

/// Every target by name (as `scripts/fuzz.sh` and `fuzz/corpus/` name them) with its harness.
pub const TARGETS: &[(&str, Harness)] = &[
    ("manifest", parsers::manifest::run),
    ("expr", parsers::expr::run),
    ("llm_reply", parsers::llm_reply::run),
    ("kt_cache", parsers::kt_cache::run),
    ("t1", parsers::t1::run),
    ("rundir", parsers::rundir::run),
    ("taskfile", parsers::taskfile::run),
    ("chat_reply", chat::chat_reply),
    ("chat_stream", chat::chat_stream),
    ("dist_job", dist::dist_job),
    ("dist_result", dist::dist_result),
    ("dist_question", dist::dist_question),
];

/// The differential targets, by name (as `fuzz/corpus/` names them) with their harness: each
/// runs an outside tool as its oracle (clang's preprocessor), so they are listed apart, as
/// `scripts/fuzz.sh`'s `ORACLE_TARGETS` (its `--all` runs them where clang is installed); the
/// tests run them on their seeds where the tool is installed and skip (kind `CLANG`) elsewhere.
pub const ORACLE_TARGETS: &[(&str, Harness)] =
    &[("host_access_oracle", oracle::host_access_oracle)];

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
    use std::path::{Path, PathBuf};

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

    fn corpus() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
    }

    /// The committed seeds of `target`, by file name.
    fn seeds_of(target: &str) -> Vec<(String, Vec<u8>)> {
        let mut seeds: Vec<_> = std::fs::read_dir(corpus().join(target))
            .unwrap_or_else(|e| panic!("fuzz/corpus/{target}: {e}"))
            .map(|entry| {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&path).unwrap())
            })
            .collect();
        seeds.sort();
        seeds
    }

    /// `targets`, after checking that `scripts/fuzz.sh`'s array `var` lists the same names in
    /// the same order, that fuzz/Cargo.toml has a binary for each and fuzz/corpus seeds.
    fn listed_in_script(
        var: &str,
        targets: &'static [(&'static str, Harness)],
    ) -> &'static [(&'static str, Harness)] {
        let script = include_str!("../../scripts/fuzz.sh");
        let prefix = format!("{var}=(");
        let line = script
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("scripts/fuzz.sh's {var}"));
        let listed: Vec<&str> = line[prefix.len()..line.len() - 1].split(' ').collect();
        let names: Vec<&str> = targets.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            listed, names,
            "scripts/fuzz.sh's {var} and kf_fuzz's differ"
        );
        let manifest = include_str!("../Cargo.toml");
        for (target, _) in targets {
            assert!(
                manifest.contains(&format!("path = \"fuzz_targets/{target}.rs\"")),
                "fuzz/Cargo.toml has no binary {target}"
            );
            assert!(
                !seeds_of(target).is_empty(),
                "fuzz/corpus/{target} holds no seed"
            );
        }
        targets
    }

    /// Every target's harness runs on each of its committed seeds without a finding, as
    /// libFuzzer starts each run; scripts/fuzz.sh's TARGETS and the binaries are the same list.
    #[test]
    fn every_target_passes_its_seeds() {
        for (target, harness) in listed_in_script("TARGETS", TARGETS) {
            let seeds = seeds_of(target);
            for (name, bytes) in seeds {
                let run = std::panic::catch_unwind(|| harness(&bytes));
                assert!(run.is_ok(), "{target} fails on its seed {name}");
            }
        }
    }

    /// The differential targets pass their committed seeds where their oracle is installed;
    /// elsewhere the test skips (it would decide nothing).
    #[test]
    fn oracle_targets_pass_their_seeds() {
        for (target, harness) in listed_in_script("ORACLE_TARGETS", ORACLE_TARGETS) {
            let seeds = seeds_of(target);
            if oracle::clang().is_none() {
                kf_core::testing::skip::skip(
                    kf_core::testing::skip::SkipKind::Clang,
                    format_args!(
                        "no clang: {target}'s {} seeds need clang's preprocessor as their \
                         oracle (apt-get install clang, or KF_ORACLE_CLANG=/path/to/clang)",
                        seeds.len()
                    ),
                );
                return;
            }
            for (name, bytes) in seeds {
                let run = std::panic::catch_unwind(|| harness(&bytes));
                assert!(run.is_ok(), "{target} fails on its seed {name}");
            }
        }
    }

    /// The wire decoders' seeds are committed as the crates' encoders write them
    /// (`KF_FUZZ_WRITE_SEEDS=1` writes them again).
    #[test]
    fn wire_seeds_are_current() {
        let write = std::env::var_os("KF_FUZZ_WRITE_SEEDS").is_some();
        for seed in seeds::all() {
            let path = corpus().join(seed.target).join(seed.name);
            if write {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &seed.bytes).unwrap();
            }
            let committed = std::fs::read(&path).unwrap_or_default();
            assert!(
                committed == seed.bytes,
                "{} is not what fuzz/src/seeds.rs writes (KF_FUZZ_WRITE_SEEDS=1 cargo test \
                 --manifest-path fuzz/Cargo.toml wire_seeds writes it)",
                path.display()
            );
        }
    }

    /// The seeds are what they say: replies that decode, a signed job a worker accepts, a
    /// signed result a search trusts, answers an asker reads.
    #[test]
    fn wire_seeds_decode() {
        let request = chat::request();
        let reply = std::fs::read(corpus().join("chat_reply/completion.json")).unwrap();
        let reply = kf_prompt::decode_chat_reply(&reply, &request).unwrap();
        assert!(reply.content.contains("__kernel") && !reply.usage.estimated);
        let wire = std::fs::read(corpus().join("chat_stream/openai.sse")).unwrap();
        let streamed = chat::decode_stream(&wire[2..], &[5, 17], usize::MAX).unwrap();
        assert_eq!(streamed.finish_reason.as_deref(), Some("stop"));
        assert!(reply.content.starts_with(&streamed.content));
        let capped = chat::decode_stream(&wire[2..], &[], 24).unwrap();
        assert_eq!(capped.content.len(), 24);
        assert!(capped.hit_token_limit());

        let job = std::fs::read(corpus().join("dist_job/job.bin")).unwrap();
        let parts = split_parts(&job, 4);
        let (payload, signer, signature) =
            (parts[0].unwrap(), parts[1].unwrap(), parts[2].unwrap());
        let key = dist::signing_key();
        let signer = std::str::from_utf8(signer).unwrap();
        let signature = std::str::from_utf8(signature).unwrap();
        assert_eq!(key.public().verify(signer, payload, signature), Ok(()));
        let job: kf_dist::JobMessage = kf_dist::decode_message("job", payload).unwrap();
        let subject = std::str::from_utf8(parts[3].unwrap()).unwrap();
        assert_eq!(
            kf_dist::check_job(&job, &dist::kernel(), &dist::profile(), subject),
            Ok(())
        );

        let result = std::fs::read(corpus().join("dist_result/result.json")).unwrap();
        let result: kf_dist::ResultMessage = kf_dist::decode_message("result", &result).unwrap();
        assert_eq!(result.worker_key, key.id());
        assert!(result.evaluation.status.is_correct());

        let answered = std::fs::read(corpus().join("dist_question/answered.bin")).unwrap();
        let answer: kf_dist::AnswerMessage =
            kf_dist::decode_message("answer", split_parts(&answered, 2)[1].unwrap()).unwrap();
        assert!(kf_dist::decode_llm_answer(answer.answer).is_ok());
        let failed = std::fs::read(corpus().join("dist_question/failed.bin")).unwrap();
        let answer: kf_dist::AnswerMessage =
            kf_dist::decode_message("answer", split_parts(&failed, 2)[1].unwrap()).unwrap();
        let failure = kf_dist::decode_llm_answer(answer.answer).unwrap_err();
        assert_eq!(failure.kind, kf_prompt::FailureKind::BudgetExhausted);
    }
}
