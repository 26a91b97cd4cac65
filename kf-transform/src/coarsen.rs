//! Work per work-item coarsening: each work-item runs the kernel's body for `COARSEN`
//! consecutive (blocked) or global-size-strided (strided) indices of dimension 0, the launch's
//! global size divided by `COARSEN` and rounded up to the work-group size, and a guard for the
//! tail past the original global size.

use std::ops::Range;

use kf_manifest::Manifest;
use tree_sitter::Node;

use crate::child::{default_block, NewParam, Rewrite};
use crate::parse::{
    apply_edits, callee, descendants, inside_loop_below, words, Parsed, GROUP_FUNCTIONS,
};

/// The tunable: how many indices one work-item handles.
pub(crate) const COARSEN: &str = "COARSEN";
/// Its values, and the one a child starts at.
const VALUES: [i64; 4] = [2, 4, 8, 16];
const START: i64 = 4;
/// Names the rewrite introduces; a kernel already using one is left alone.
const INTRODUCED: [&str; 4] = [COARSEN, "kft_gid", "kft_c", "kft_g0"];

/// Coarsens `text`'s kernel `entry` (see the module docs), or `None` where that is not
/// provably the same computation: the kernel synchronises or asks for its group, local or
/// global size, uses local memory, returns from inside a loop, or its original global size
/// cannot be written in C from its parameters and its scalar arguments.
pub(crate) fn coarsen(text: &str, manifest: &Manifest, strided: bool) -> Option<Rewrite> {
    let parsed = Parsed::opencl(text).ok()?;
    let kernel = parsed.function(&manifest.entry)?;
    if words(text).any(|w| INTRODUCED.contains(&w)) {
        return None;
    }
    let body = kernel.child_by_field_name("body")?;
    if !stays_in_its_work_item(&parsed, kernel, &manifest.entry) {
        return None;
    }
    let params = parsed.params(kernel)?;
    let mut edits = index_edits(&parsed, body)?;
    let g0 = manifest.global.first()?.text().to_owned();
    let g0_c = expression_in_c(&g0, manifest, &params)?;
    let index = if strided {
        "get_global_id(0) + (size_t)kft_c * get_global_size(0)"
    } else {
        "get_global_id(0) * COARSEN + (size_t)kft_c"
    };
    let open = body.start_byte();
    let close = body.end_byte() - 1;
    edits.push((
        open..open + 1,
        format!(
            "{{\n    const long kft_g0 = {g0_c};\n    for (int kft_c = 0; kft_c < COARSEN; ++kft_c) {{\n    const size_t kft_gid = {index};\n    if (kft_gid >= (size_t)kft_g0) break;\n    {{"
        ),
    ));
    edits.push((close..close + 1, "}\n    }\n}".to_owned()));
    let rewritten = apply_edits(text, edits);
    let mut global: Vec<String> = manifest
        .global
        .iter()
        .map(|e| e.text().to_owned())
        .collect();
    global[0] = divided_global(manifest, &g0, COARSEN);
    let kind = if strided { "strided" } else { "blocked" };
    Some(Rewrite {
        text: format!("{}{rewritten}", default_block(COARSEN, START)),
        params: vec![NewParam {
            name: COARSEN.to_owned(),
            values: VALUES.to_vec(),
            start: START,
        }],
        global: Some(global),
        local: None,
        note: format!(
            "{kind} coarsening: COARSEN indices of dimension 0 per work-item, global size divided"
        ),
    })
}

/// The edits that make `body` the body of one of a work-item's indices: `get_global_id(0)`
/// becomes `kft_gid`, a `return` (not inside a loop) `continue;`. `None` where that is not the
/// same computation (a group function, another dimension's index through a non-constant
/// argument, a `return` inside a loop) or the body never asks for `get_global_id(0)`.
fn index_edits(parsed: &Parsed, body: Node<'_>) -> Option<Vec<(Range<usize>, String)>> {
    let mut edits = Vec::new();
    let mut replaced = 0;
    for node in descendants(body) {
        match node.kind() {
            "call_expression" => {
                let name = callee(parsed, node)?;
                if GROUP_FUNCTIONS.contains(&name)
                    || name.starts_with("work_group_")
                    || name.starts_with("sub_group_")
                {
                    return None;
                }
                if name == "get_global_id" {
                    let args = node.child_by_field_name("arguments")?;
                    let arg = args.named_child(0)?;
                    match parsed.text_of(arg).trim() {
                        "0" => {
                            edits.push((node.byte_range(), "kft_gid".to_owned()));
                            replaced += 1;
                        }
                        a if a.chars().all(|c| c.is_ascii_digit()) => {}
                        _ => return None,
                    }
                }
            }
            "return_statement" => {
                if inside_loop_below(node, body) {
                    return None;
                }
                edits.push((node.byte_range(), "continue;".to_owned()));
            }
            _ => {}
        }
    }
    (replaced > 0).then_some(edits)
}

/// Whether the kernel `entry` neither shares data with other work-items (local memory) nor
/// jumps (`goto`), and no helper function asks for work-item indices (their meaning would
/// change when a work-item runs several indices).
pub(crate) fn stays_in_its_work_item(parsed: &Parsed, kernel: Node<'_>, entry: &str) -> bool {
    if words(parsed.text_of(kernel)).any(|w| matches!(w, "__local" | "local" | "goto")) {
        return false;
    }
    !parsed.other_functions(entry).into_iter().any(|helper| {
        words(parsed.text_of(helper)).any(|w| w.starts_with("get_") && w.ends_with("_id"))
    })
}

/// The launch's global size `g0` of dimension 0 divided by the tunable `per_item` (indices
/// per work-item), rounded up to the work-group size where the launch gives one.
pub(crate) fn divided_global(manifest: &Manifest, g0: &str, per_item: &str) -> String {
    let local0 = manifest
        .local
        .as_ref()
        .and_then(|l| l.first())
        .map(|e| e.text().to_owned());
    let divided = format!("(({g0}) + {per_item} - 1) / {per_item}");
    match local0 {
        Some(l) => format!("(({divided}) + ({l}) - 1) / ({l}) * ({l})"),
        None => divided,
    }
}

/// A launch-size expression of the manifest written in C over the kernel's scalar arguments
/// and the manifest's parameters (defines), each widened to `long`; `None` where it uses
/// another name, a function or an operator C reads otherwise (`^` is a power in manifests).
pub(crate) fn expression_in_c(
    expr: &str,
    manifest: &Manifest,
    params: &[crate::parse::KernelParam],
) -> Option<String> {
    let mut out = String::from("(");
    let mut chars = expr.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_ascii_alphabetic() || c == '_' {
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    name.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            let scalar_arg = params.iter().any(|p| !p.pointer && p.name == name);
            if !(scalar_arg || manifest.params.contains_key(&name)) {
                return None;
            }
            out.push_str(&format!("(long)({name})"));
        } else if c.is_ascii_digit() {
            while let Some(&c) = chars.peek() {
                if c.is_ascii_digit() {
                    out.push(c);
                    chars.next();
                } else if c.is_ascii_alphanumeric() || c == '.' {
                    return None;
                } else {
                    break;
                }
            }
        } else if "+-*/%() \t".contains(c) {
            out.push(c);
            chars.next();
        } else {
            return None;
        }
    }
    out.push(')');
    Some(out)
}
