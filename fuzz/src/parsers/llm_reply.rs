//! LLM replies (`kf_prompt::parse`): fenced code blocks, SEARCH/REPLACE edit blocks, their
//! whitespace-tolerant application to the parent kernel and manifest, and the manifest of the
//! drafted child read as the mutator does next: the lenient reading of a model's manifest
//! (`lenient_manifest`: defaults from the parent, unknown keys dropped), whose result must
//! then get past the strict parser's key checks.
//!
//! Input: `reply`, or `reply NUL parent-kernel NUL parent-manifest` to fuzz the text being
//! edited too; the first byte of the reply chooses whether it was cut off at the token limit.
//! Bounded to 64 KiB: edits grow the text by at most their REPLACE parts, so the work is
//! quadratic in the input at worst.

use crate::{split_parts, MAX_INPUT, PARENT_KERNEL, PARENT_MANIFEST};
use kf_manifest::Manifest;
use kf_prompt::parse::{
    apply_edits, code_blocks, draft_from_reply, lenient_manifest, parse_edits, EditTarget,
};

/// A part of the input as text, or `default` when the input leaves it out.
fn text<'a>(part: Option<&'a [u8]>, default: &'static str) -> Option<&'a str> {
    match part {
        None => Some(default),
        Some(bytes) => std::str::from_utf8(bytes).ok(),
    }
}

/// The target: one input.
pub fn run(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let parts = split_parts(data, 3);
    let (Some(reply), Some(parent), Some(parent_manifest)) = (
        text(parts[0], ""),
        text(parts[1], PARENT_KERNEL),
        text(parts[2], PARENT_MANIFEST),
    ) else {
        return;
    };
    let cut_off = reply.len() % 2 == 1;

    for block in code_blocks(reply) {
        assert!(block.text.len() <= reply.len());
    }
    if let Ok(edits) = parse_edits(reply) {
        let _ = apply_edits(parent, &edits, EditTarget::Kernel);
        let _ = apply_edits(parent_manifest, &edits, EditTarget::Manifest);
    }
    match draft_from_reply(reply, "gemm", parent, Some(parent_manifest), cut_off) {
        Ok(draft) => {
            if let Some(manifest) = draft.manifest {
                let _ = Manifest::parse(&manifest, "reply.toml", None);
                if let Ok(lenient) = lenient_manifest(&manifest, "gemm", "opencl") {
                    // What the lenient reading writes is TOML again, with only known keys.
                    let table: toml::Table = lenient.text.parse().expect("lenient output is TOML");
                    assert!(table.contains_key("entry") && table.contains_key("language"));
                    let _ = Manifest::parse(&lenient.text, "reply.toml", None);
                }
            }
        }
        Err(unusable) => assert!(!unusable.reason.is_empty()),
    }
    let _ = draft_from_reply(reply, "gemm", parent, None, cut_off);
}
