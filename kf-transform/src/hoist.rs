//! Hoisting of loop-invariant loads: a load `p[e]` from a global buffer the kernel only reads,
//! at an index the loop does not change, executed in every iteration of a counted `for` loop,
//! is read once before the loop into a `const` local (`kft_hN`), behind the tunable `HOIST`
//! (1 or 0, so the tuner can see whether it pays).
//!
//! Why this is the same computation: the buffer is never written by the kernel, and the
//! evaluator binds a distinct buffer to every pointer argument (the argument `restrict` rests
//! on, see [`crate::Transformation::Qualify`]), so every iteration reads the same value; the
//! value is read before the loop only when the loop's condition holds at its start (the load
//! runs in the first iteration anyway: it is on no branch of the body, and the body has no
//! `break`, `continue`, `return` or `goto` before which it could be skipped).

use std::collections::HashSet;

use kf_manifest::Manifest;
use tree_sitter::Node;

use crate::child::{NewParam, Rewrite};
use crate::parse::{apply_edits, descendants, line_start_if_first, subscript, words, Parsed};
use crate::qualify::read_only;

/// The tunable: 1 reads the invariant values once, 0 keeps the loads in the loop.
pub(crate) const HOIST: &str = "HOIST";

/// Hoists the invariant loads of `text`'s kernel `entry`, or `None` when it has none (or
/// already uses `HOIST` or the names this rewrite introduces).
pub(crate) fn hoist(text: &str, manifest: &Manifest) -> Option<Rewrite> {
    if words(text).any(|w| w == HOIST || w.starts_with("kft_h") || w.starts_with("KF_HOIST")) {
        return None;
    }
    let parsed = Parsed::opencl(text).ok()?;
    let kernel = parsed.function(&manifest.entry)?;
    let body = kernel.child_by_field_name("body")?;
    let params = parsed.params(kernel)?;
    let readable: Vec<(String, String)> = params
        .iter()
        .filter(|p| p.pointer && p.global && read_only(&parsed, body, &p.name))
        .filter_map(|p| {
            Some((
                p.name.clone(),
                pointee_type(&text[p.type_start..p.after_star])?,
            ))
        })
        .collect();
    if readable.is_empty() {
        return None;
    }
    let mut edits = Vec::new();
    let mut macros = String::new();
    let mut hoisted = 0;
    for for_loop in descendants(body)
        .into_iter()
        .filter(|n| n.kind() == "for_statement")
    {
        let Some(loop_edits) = hoist_from(&parsed, for_loop, &readable, &mut hoisted, &mut macros)
        else {
            continue;
        };
        edits.extend(loop_edits);
    }
    if hoisted == 0 {
        return None;
    }
    let header = format!("#ifndef {HOIST}\n#define {HOIST} 1\n#endif\n{macros}");
    Some(Rewrite {
        text: format!("{header}{}", apply_edits(text, edits)),
        params: vec![NewParam {
            name: HOIST.to_owned(),
            values: vec![1, 0],
            start: 1,
        }],
        global: None,
        local: None,
        note: format!("{hoisted} loop-invariant load(s) read once before their loop, behind HOIST"),
    })
}

/// The edits hoisting the invariant loads out of `for_loop` (those whose innermost loop it
/// is), numbering them from `*count` and defining their macros in `macros`.
fn hoist_from(
    parsed: &Parsed,
    for_loop: Node<'_>,
    readable: &[(String, String)],
    count: &mut usize,
    macros: &mut String,
) -> Option<Vec<(std::ops::Range<usize>, String)>> {
    let (var, start) = loop_start(parsed, for_loop)?;
    let condition = for_loop.child_by_field_name("condition")?;
    let body = for_loop.child_by_field_name("body")?;
    let exits = descendants(body).into_iter().any(|n| {
        matches!(
            n.kind(),
            "break_statement" | "continue_statement" | "return_statement" | "goto_statement"
        )
    });
    if exits || !pure(condition) || for_loop.parent()?.kind() != "compound_statement" {
        return None;
    }
    let line = line_start_if_first(&parsed.text, for_loop.start_byte())?;
    let varying = varying_names(parsed, for_loop, &var);
    let mut seen: Vec<String> = Vec::new();
    let mut declarations = String::new();
    let mut edits = Vec::new();
    for load in descendants(body) {
        let Some(ty) = invariant_load(parsed, load, for_loop, readable, &varying) else {
            continue;
        };
        let load_text = parsed.text_of(load).to_owned();
        let number = match seen.iter().position(|s| *s == load_text) {
            Some(i) => *count - seen.len() + i,
            None => {
                let n = *count;
                *count += 1;
                seen.push(load_text.clone());
                let at_start = substitute(parsed, condition, &var, parsed.text_of(start));
                declarations.push_str(&format!(
                    "const {ty} kft_h{n} = ({HOIST} && {at_start}) ? {load_text} : ({ty})0;\n"
                ));
                macros.push_str(&format!(
                    "#if {HOIST}\n#define KF_HOIST_{n} kft_h{n}\n#else\n#define KF_HOIST_{n} ({load_text})\n#endif\n"
                ));
                n
            }
        };
        edits.push((load.byte_range(), format!("KF_HOIST_{number}")));
    }
    if edits.is_empty() {
        return None;
    }
    edits.extend(in_a_block(parsed, for_loop, line, &declarations));
    Some(edits)
}

/// What `for_loop` changes (assigned or updated variables, its variable `var`) and what it
/// declares: an index using any of them varies between iterations.
fn varying_names(parsed: &Parsed, for_loop: Node<'_>, var: &str) -> HashSet<String> {
    let mut varying: HashSet<String> = HashSet::from([var.to_owned()]);
    for n in descendants(for_loop) {
        match n.kind() {
            // Stores through pointers change no variable (and no read-only buffer).
            "assignment_expression" | "update_expression" => {
                let target = n
                    .child_by_field_name("left")
                    .or_else(|| n.child_by_field_name("argument"));
                let plain =
                    |t: &Node<'_>| matches!(t.kind(), "identifier" | "parenthesized_expression");
                if let Some(t) = target.filter(plain) {
                    varying.extend(words(parsed.text_of(t)).map(str::to_owned));
                }
            }
            "init_declarator" | "declaration" => {
                let mut c = n.walk();
                for mut d in n.children_by_field_name("declarator", &mut c) {
                    while d.kind() != "identifier" {
                        match d.child_by_field_name("declarator") {
                            Some(inner) => d = inner,
                            None => break,
                        }
                    }
                    varying.insert(parsed.text_of(d).to_owned());
                }
            }
            _ => {}
        }
    }
    varying
}

/// The pointee type of the buffer `node` loads from, when `node` is a load `p[e]` that
/// `for_loop` runs in every iteration, from a buffer of `readable`, at a pure index none of
/// whose names vary in the loop.
fn invariant_load<'r>(
    parsed: &Parsed,
    node: Node<'_>,
    for_loop: Node<'_>,
    readable: &'r [(String, String)],
    varying: &HashSet<String>,
) -> Option<&'r str> {
    let (pointer, index) = subscript(node)?;
    if !unconditional(node, for_loop) {
        return None;
    }
    let name = parsed.text_of(pointer);
    let (_, ty) = readable.iter().find(|(p, _)| p == name)?;
    let invariant = pointer.kind() == "identifier"
        && pure(index)
        && !words(parsed.text_of(index)).any(|w| varying.contains(w));
    invariant.then_some(ty.as_str())
}

/// The edits that put `for_loop` (whose line starts at `line`) in a block of its own,
/// after the hoisted values' `declarations`, indented like the loop.
fn in_a_block(
    parsed: &Parsed,
    for_loop: Node<'_>,
    line: usize,
    declarations: &str,
) -> [(std::ops::Range<usize>, String); 2] {
    let indent = &parsed.text[line..for_loop.start_byte()];
    let end = for_loop.end_byte();
    [
        (
            line..line,
            format!(
                "{indent}{{\n{}",
                declarations
                    .lines()
                    .map(|l| format!("{indent}{l}\n"))
                    .collect::<String>()
            ),
        ),
        (end..end, format!("\n{indent}}}")),
    ]
}

/// The loop variable and its start value: `for (int i = A; …)` or `for (i = A; …)`.
fn loop_start<'t>(parsed: &Parsed, for_loop: Node<'t>) -> Option<(String, Node<'t>)> {
    let init = for_loop.child_by_field_name("initializer")?;
    let (name, value) = match init.kind() {
        "declaration" => {
            let d = init.child_by_field_name("declarator")?;
            (
                d.child_by_field_name("declarator")?,
                d.child_by_field_name("value")?,
            )
        }
        "assignment_expression" => (
            init.child_by_field_name("left")?,
            init.child_by_field_name("right")?,
        ),
        _ => return None,
    };
    (name.kind() == "identifier" && pure(value)).then(|| (parsed.text_of(name).to_owned(), value))
}

/// Whether an expression only reads: no call, assignment or update inside.
pub(crate) fn pure(node: Node<'_>) -> bool {
    !descendants(node).into_iter().any(|n| {
        matches!(
            n.kind(),
            "call_expression" | "assignment_expression" | "update_expression" | "comma_expression"
        )
    })
}

/// Whether `node` runs in every iteration of `for_loop`: no branch, inner loop or
/// short-circuit between them.
pub(crate) fn unconditional(node: Node<'_>, for_loop: Node<'_>) -> bool {
    let mut current = node;
    while let Some(parent) = current.parent() {
        if parent.id() == for_loop.id() {
            // In the body, not in the header.
            return for_loop
                .child_by_field_name("body")
                .is_some_and(|b| b.id() == current.id());
        }
        let branching = match parent.kind() {
            "if_statement" => parent
                .child_by_field_name("condition")
                .is_none_or(|c| c.id() != current.id()),
            "conditional_expression" => parent
                .child_by_field_name("condition")
                .is_none_or(|c| c.id() != current.id()),
            "binary_expression" => parent.child_by_field_name("operator").is_some_and(|o| {
                matches!(o.kind(), "&&" | "||")
                    && parent
                        .child_by_field_name("left")
                        .is_none_or(|l| l.id() != current.id())
            }),
            "for_statement" | "while_statement" | "do_statement" | "switch_statement" => true,
            _ => false,
        };
        if branching {
            return false;
        }
        current = parent;
    }
    false
}

/// `expr`'s text with every use of the variable `var` replaced by `(value)`.
pub(crate) fn substitute(parsed: &Parsed, expr: Node<'_>, var: &str, value: &str) -> String {
    let edits = descendants(expr)
        .into_iter()
        .filter(|n| n.kind() == "identifier" && parsed.text_of(*n) == var)
        .map(|n| {
            let r = n.start_byte() - expr.start_byte()..n.end_byte() - expr.start_byte();
            (r, format!("({value})"))
        })
        .collect();
    format!("({})", apply_edits(parsed.text_of(expr), edits))
}

/// The pointee type of a pointer parameter's type text (`__global const float*` → `float`):
/// `None` for anything but a scalar or vector type name.
pub(crate) fn pointee_type(text: &str) -> Option<String> {
    let kept: Vec<&str> = words(text)
        .filter(|w| {
            !matches!(
                *w,
                "const"
                    | "volatile"
                    | "restrict"
                    | "__restrict"
                    | "KF_RESTRICT"
                    | "__global"
                    | "global"
                    | "__constant"
                    | "constant"
            )
        })
        .collect();
    let ty = kept.join(" ");
    let known = kept.len() == 1
        && [
            "float", "double", "half", "int", "uint", "long", "ulong", "short", "ushort", "char",
            "uchar",
        ]
        .iter()
        .any(|t| {
            ty == *t
                || ty
                    .strip_prefix(t)
                    .is_some_and(|n| matches!(n, "2" | "3" | "4" | "8" | "16"))
        });
    (known || ty == "unsigned int").then_some(ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(entry: &str) -> Manifest {
        let text =
            format!("entry = \"{entry}\"\nlanguage = \"opencl\"\n[launch]\nglobal = [\"n\"]\n");
        Manifest::parse(&text, "<test>", None).unwrap()
    }

    /// A per-row affine map with a per-row scale and shift (a user's batch-norm-like
    /// kernel): both per-row loads leave the loop, the per-element loads stay, and the
    /// hoisted values are read only when the loop runs.
    #[test]
    fn per_row_loads_leave_the_loop() {
        let text = "__kernel void affine(__global const float* x, __global const float* scale, __global const float* shift, __global float* y, const int rows, const int cols) {\n    const int r = get_global_id(0);\n    if (r >= rows) return;\n    for (int c = 0; c < cols; ++c) {\n        y[r * cols + c] = x[r * cols + c] * scale[r] + shift[r] * scale[r];\n    }\n}\n";
        let rw = hoist(text, &manifest("affine")).unwrap();
        assert!(rw.note.starts_with("2 loop-invariant"), "{}", rw.note);
        assert!(
            rw.text
                .contains("const float kft_h0 = (HOIST && ((0) < cols)) ? scale[r] : (float)0;"),
            "{}",
            rw.text
        );
        assert!(rw
            .text
            .contains("x[r * cols + c] * KF_HOIST_0 + KF_HOIST_1 * KF_HOIST_0"));
        assert!(rw.text.contains("#define KF_HOIST_1 (shift[r])"));
        assert!(Parsed::opencl(&rw.text)
            .unwrap()
            .function("affine")
            .is_some());
        assert!(hoist(&rw.text, &manifest("affine")).is_none());
    }

    /// Not hoisted: a load from a buffer the kernel writes, one on a branch, one whose index
    /// the loop changes, one in a loop that may leave early.
    #[test]
    fn variant_or_conditional_loads_stay() {
        let cases = [
            "__kernel void k(__global float* w, __global float* y, const int n) {\n    for (int c = 0; c < n; ++c) {\n        y[c] = w[0];\n        w[c] = 1.0f;\n    }\n}\n",
            "__kernel void k(__global const float* w, __global float* y, const int n) {\n    for (int c = 0; c < n; ++c) {\n        if (c > 2) y[c] = w[0];\n    }\n}\n",
            "__kernel void k(__global const float* w, __global float* y, const int n) {\n    int j = 0;\n    for (int c = 0; c < n; ++c) {\n        y[c] = w[j];\n        j += 2;\n    }\n}\n",
            "__kernel void k(__global const float* w, __global float* y, const int n) {\n    for (int c = 0; c < n; ++c) {\n        if (y[c] > 0.0f) break;\n        y[c] = w[0];\n    }\n}\n",
        ];
        for text in cases {
            assert!(hoist(text, &manifest("k")).is_none(), "{text}");
        }
    }
}
