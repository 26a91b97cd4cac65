//! Loop unrolling: `#pragma unroll UNROLL` before each innermost counted `for` loop of the
//! kernel and of the helper functions it may call (a generated naive kernel's loops are all in
//! its helpers), `UNROLL` a tunable (1 leaves the loop rolled). Unrolling never changes what a
//! loop computes.

use kf_manifest::Manifest;

use crate::child::{default_block, NewParam, Rewrite};
use crate::parse::{apply_edits, descendants, line_start_if_first, words, Parsed};

/// The tunable: the unroll factor.
pub(crate) const UNROLL: &str = "UNROLL";
const VALUES: [i64; 4] = [1, 2, 4, 8];
const START: i64 = 4;

/// Unrolls the innermost counted loops of `text`'s kernel `entry` and its helper functions, or
/// `None` when they have none (or the text already uses `UNROLL` or an unroll pragma).
pub(crate) fn unroll(text: &str, manifest: &Manifest) -> Option<Rewrite> {
    if words(text).any(|w| w == UNROLL) || text.contains("opencl_unroll_hint") {
        return None;
    }
    let parsed = Parsed::opencl(text).ok()?;
    let kernel = parsed.function(&manifest.entry)?;
    let functions = std::iter::once(kernel).chain(parsed.other_functions(&manifest.entry));
    let mut edits = Vec::new();
    for node in functions.flat_map(descendants) {
        if node.kind() != "for_statement" || !counted(&parsed, node) {
            continue;
        }
        let nested = descendants(node).into_iter().skip(1).any(|n| {
            matches!(
                n.kind(),
                "for_statement" | "while_statement" | "do_statement"
            )
        });
        if nested || node.parent().map(|p| p.kind()) != Some("compound_statement") {
            continue;
        }
        let Some(line) = line_start_if_first(text, node.start_byte()) else {
            continue;
        };
        // A pragma already on the line before.
        let before = text[..line].trim_end();
        let previous_line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
        if previous_line.trim_start().starts_with("#pragma") {
            continue;
        }
        edits.push((line..line, format!("#pragma unroll {UNROLL}\n")));
    }
    if edits.is_empty() {
        return None;
    }
    let loops = edits.len();
    Some(Rewrite {
        text: format!(
            "{}{}",
            default_block(UNROLL, START),
            apply_edits(text, edits)
        ),
        params: vec![NewParam {
            name: UNROLL.to_owned(),
            values: VALUES.to_vec(),
            start: START,
        }],
        global: None,
        local: None,
        note: format!("#pragma unroll UNROLL on {loops} innermost counted loop(s)"),
    })
}

/// Whether a `for` loop has an initialiser, a comparison of its variable and an update.
fn counted(parsed: &Parsed, node: tree_sitter::Node<'_>) -> bool {
    let condition = node.child_by_field_name("condition");
    let comparison = condition.is_some_and(|c| {
        c.kind() == "binary_expression"
            && c.child_by_field_name("operator")
                .is_some_and(|o| matches!(parsed.text_of(o), "<" | "<=" | ">" | ">=" | "!="))
    });
    node.child_by_field_name("initializer").is_some()
        && comparison
        && node.child_by_field_name("update").is_some()
}
