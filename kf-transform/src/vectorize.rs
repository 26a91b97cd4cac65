//! Vector loads and stores: an elementwise kernel (one work-item per index `i =
//! get_global_id(0)`, a guard `if (i >= E) return;`, then a body that accesses its buffers
//! at `p[i]`) becomes one in which each work-item handles `VEC` consecutive indices: where all
//! of them pass the guard, each buffer the body reads at `p[i]` is read with one `vloadN` into
//! a private array, the body runs for each index on the arrays, and each buffer it writes at
//! `p[i]` is written with one `vstoreN`; at the tail the body runs index by index as before.
//! The launch's global size is divided by `VEC` (rounded up to the work-group size).
//!
//! Why this is the same computation: the accesses replaced are at the index itself, so the
//! `VEC` indices of a work-item touch `VEC` consecutive elements nobody else touches (the
//! body's other accesses are kept as they are, and a buffer written at `p[i]` is accessed
//! nowhere else); a buffer written on a branch is read into its array first, so an element
//! the body does not write is written back unchanged.

use std::ops::Range;

use kf_manifest::Manifest;
use tree_sitter::Node;

use crate::child::{default_block, NewParam, Rewrite};
use crate::coarsen::{divided_global, expression_in_c, stays_in_its_work_item};
use crate::hoist::{pointee_type, pure};
use crate::parse::{apply_edits, callee, descendants, words, Parsed, GROUP_FUNCTIONS};

/// The tunable: indices (vector lanes) per work-item.
pub(crate) const VEC: &str = "VEC";
const VALUES: [i64; 4] = [2, 4, 8, 16];
const START: i64 = 4;

/// Vectorises `text`'s kernel `entry` (see the module docs), or `None` where it does not have
/// that shape.
pub(crate) fn vectorize(text: &str, manifest: &Manifest) -> Option<Rewrite> {
    if words(text).any(|w| w == VEC || w.starts_with("kft_") || w.starts_with("KF_V")) {
        return None;
    }
    if manifest.global.len() != 1 {
        return None;
    }
    let parsed = Parsed::opencl(text).ok()?;
    let kernel = parsed.function(&manifest.entry)?;
    let body = kernel.child_by_field_name("body")?;
    if !stays_in_its_work_item(&parsed, kernel, &manifest.entry) {
        return None;
    }
    let params = parsed.params(kernel)?;
    let mut cursor = body.walk();
    let statements: Vec<Node<'_>> = body
        .named_children(&mut cursor)
        .filter(|n| n.kind() != "comment")
        .collect();
    // `const T i = get_global_id(0);` then `if (i >= E) return;`.
    let [declaration, guard, rest @ ..] = statements.as_slice() else {
        return None;
    };
    let (index_type, var) = index_declaration(&parsed, *declaration)?;
    let bound = guard_bound(&parsed, *guard, &var)?;
    if rest.is_empty() {
        return None;
    }
    // From the end of the guard: a statement's node starts after OpenCL qualifiers (blanked
    // for the parser) such as `__global` in `__global const float* a = …;`.
    let (rest_start, rest_end) = (guard.end_byte(), rest.last()?.end_byte());
    if !body_is_per_index(&parsed, rest, &var) {
        return None;
    }
    let mut arrays: Vec<Array> = Vec::new();
    let mut edits = Vec::new();
    for p in params.iter().filter(|p| p.pointer && p.global) {
        let ty = pointee_type(&text[p.type_start..p.after_star])?;
        let uses = buffer_uses(&parsed, &p.name, ty, rest, &var, body);
        if uses.elsewhere_written || (uses.array.written && uses.other_uses > 0) {
            return None;
        }
        if !uses.edits.is_empty() {
            arrays.push(uses.array);
            edits.extend(uses.edits);
        }
    }
    if !arrays.iter().any(|a| a.read || a.written) || !arrays.iter().any(|a| a.written) {
        return None;
    }
    let g0 = manifest.global.first()?.text().to_owned();
    let loop_body = LoopBody {
        index_type,
        var,
        bound,
        g0_c: expression_in_c(&g0, manifest, &params)?,
        original: text[rest_start..rest_end].to_owned(),
        vector: with_edits_within(text, edits, rest_start..rest_end),
    };
    let rewritten = apply_edits(
        text,
        vec![(
            declaration.start_byte()..rest_end,
            loop_body.vectorized(&arrays),
        )],
    );
    let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
    Some(Rewrite {
        text: format!(
            "{}{}{rewritten}",
            default_block(VEC, START),
            vector_functions()
        ),
        params: vec![NewParam {
            name: VEC.to_owned(),
            values: VALUES.to_vec(),
            start: START,
        }],
        global: Some(vec![divided_global(manifest, &g0, VEC)]),
        local: None,
        note: format!(
            "VEC consecutive indices per work-item, {} accessed with vloadN/vstoreN, global size divided",
            names.join(", ")
        ),
    })
}

/// Whether the statements after the guard are the body of one index: no work-item function
/// but the one index, no group or atomic function, no vector store of its own, no exit (a
/// `break` or `continue` only of an inner loop), and no change of the index variable `var`.
fn body_is_per_index(parsed: &Parsed, rest: &[Node<'_>], var: &str) -> bool {
    for s in rest {
        for n in descendants(*s) {
            match n.kind() {
                "call_expression" => {
                    let Some(name) = callee(parsed, n) else {
                        return false;
                    };
                    if GROUP_FUNCTIONS.contains(&name)
                        || name.starts_with("get_")
                        || name.starts_with("work_group_")
                        || name.starts_with("sub_group_")
                        || name.starts_with("atomic")
                        || name.starts_with("vstore")
                    {
                        return false;
                    }
                }
                "return_statement" => return false,
                "break_statement" | "continue_statement" if !inside_inner_loop(n, *s) => {
                    return false
                }
                "assignment_expression" | "update_expression" => {
                    let Some(target) = n
                        .child_by_field_name("left")
                        .or_else(|| n.child_by_field_name("argument"))
                    else {
                        return false;
                    };
                    if words(parsed.text_of(target)).next() == Some(var)
                        && target.kind() == "identifier"
                    {
                        return false;
                    }
                }
                _ => {}
            }
        }
    }
    true
}

/// How the body uses one buffer: its accesses at the index (as an [`Array`], and the edits
/// that make them accesses of the private array), and whether it is used otherwise.
struct BufferUses {
    /// The buffer as read or written at the index.
    array: Array,
    /// `p[i]` → `kft_a_p[kft_k]`, one per access at the index.
    edits: Vec<(Range<usize>, String)>,
    /// Written at another index.
    elsewhere_written: bool,
    /// Uses that are not accesses at the index (another index, the bare pointer).
    other_uses: usize,
}

/// How the statements `rest` use the buffer `name` (pointee type `ty`); `body` is the
/// kernel's body, whose top-level statements write unconditionally.
fn buffer_uses(
    parsed: &Parsed,
    name: &str,
    ty: String,
    rest: &[Node<'_>],
    var: &str,
    body: Node<'_>,
) -> BufferUses {
    let mut uses = BufferUses {
        array: Array {
            name: name.to_owned(),
            ty,
            read: false,
            written: false,
            written_on_branch: false,
        },
        edits: Vec::new(),
        elsewhere_written: false,
        other_uses: 0,
    };
    for s in rest {
        for n in descendants(*s) {
            if n.kind() != "identifier" || parsed.text_of(n) != name {
                continue;
            }
            let access = n.parent().filter(|a| {
                a.kind() == "subscript_expression"
                    && a.child_by_field_name("argument").map(|x| x.id()) == Some(n.id())
            });
            let Some(access) = access else {
                uses.other_uses += 1;
                continue;
            };
            let written = writes(access);
            let at_i = access
                .child_by_field_name("index")
                .is_some_and(|i| parsed.text_of(i).trim() == var);
            if !at_i {
                uses.elsewhere_written |= written;
                uses.other_uses += 1;
                continue;
            }
            uses.edits
                .push((access.byte_range(), format!("kft_a_{name}[kft_k]")));
            if written {
                note_write(parsed, access, body, &mut uses.array);
            } else {
                uses.array.read = true;
            }
        }
    }
    uses
}

/// Records a write of `array` at the index by `access`: whether it happens on a branch (not
/// a statement of the kernel's `body` itself), and whether it reads too (`p[i] += …`).
fn note_write(parsed: &Parsed, access: Node<'_>, body: Node<'_>, array: &mut Array) {
    array.written = true;
    let statement_level = access.parent().and_then(|a| a.parent()).is_some_and(|e| {
        e.kind() == "expression_statement" && e.parent().is_some_and(|b| b.id() == body.id())
    });
    array.written_on_branch |= !statement_level;
    // `p[i] += …` reads too.
    array.read |= access.parent().is_some_and(|a| {
        a.kind() == "update_expression"
            || a.child_by_field_name("operator")
                .is_some_and(|o| parsed.text_of(o) != "=")
    });
}

/// The text of `range` in `text` after those of `edits` that lie within it.
fn with_edits_within(
    text: &str,
    edits: Vec<(Range<usize>, String)>,
    range: Range<usize>,
) -> String {
    let edited = apply_edits(
        text,
        edits
            .into_iter()
            .filter(|(r, _)| r.start >= range.start && r.end <= range.end)
            .collect(),
    );
    let shift = edited.len() as isize - text.len() as isize;
    edited[range.start..(range.end as isize + shift) as usize].to_owned()
}

/// What the vectorised kernel is made of: the index, the guard's bound, the original global
/// size in C, and the body as written and with its accesses at the index on the arrays.
struct LoopBody {
    /// The index variable's type.
    index_type: String,
    /// The index variable.
    var: String,
    /// `E` of the guard `if (i >= E) return;`.
    bound: String,
    /// The original global size of dimension 0, in C.
    g0_c: String,
    /// The statements after the guard, as written (the tail runs them).
    original: String,
    /// The same with `p[i]` as `kft_a_p[kft_k]`.
    vector: String,
}

impl LoopBody {
    /// The code replacing the index declaration, the guard and the body: `VEC` indices per
    /// work-item, the arrays loaded and stored with vectors where all of them pass the guard,
    /// index by index at the tail.
    fn vectorized(&self, arrays: &[Array]) -> String {
        let LoopBody {
            index_type,
            var,
            bound,
            g0_c,
            original,
            vector,
        } = self;
        let mut before = String::new();
        let mut after = String::new();
        for a in arrays {
            before.push_str(&format!("        {} kft_a_{}[{VEC}];\n", a.ty, a.name));
            if a.read || a.written_on_branch {
                before.push_str(&format!(
                    "        KF_VSTORE(KF_VLOAD(0, {n} + kft_base), 0, kft_a_{n});\n",
                    n = a.name
                ));
            }
            if a.written {
                after.push_str(&format!(
                    "        KF_VSTORE(KF_VLOAD(0, kft_a_{n}), 0, {n} + kft_base);\n",
                    n = a.name
                ));
            }
        }
        format!(
            "const long kft_g0 = {g0_c};\n    const size_t kft_base = get_global_id(0) * {VEC};\n    if (kft_base + {VEC} <= (size_t)kft_g0 && ({index_type})(kft_base + {VEC} - 1) < ({bound})) {{\n{before}        #pragma unroll\n        for (int kft_k = 0; kft_k < {VEC}; ++kft_k) {{\n            const {index_type} {var} = ({index_type})(kft_base + kft_k);\n            {vector}\n        }}\n{after}    }} else {{\n        for (int kft_k = 0; kft_k < {VEC}; ++kft_k) {{\n            const {index_type} {var} = ({index_type})(kft_base + kft_k);\n            if (kft_base + kft_k >= (size_t)kft_g0 || {var} >= ({bound})) break;\n            {original}\n        }}\n    }}"
        )
    }
}

/// `KF_VLOAD` and `KF_VSTORE` as the `vloadN`/`vstoreN` of the tuned width, chosen by `#if`.
/// Not by token pasting (`vload ## VEC`): the source check refuses `##` where the kernel's
/// identifiers could be pasted into a refused name, and short names (`a`, `s`, `m`) can.
fn vector_functions() -> String {
    let mut out = String::new();
    for (i, width) in VALUES.iter().enumerate() {
        let directive = if i == 0 { "#if" } else { "#elif" };
        out.push_str(&format!(
            "{directive} {VEC} == {width}\n#define KF_VLOAD vload{width}\n#define KF_VSTORE vstore{width}\n"
        ));
    }
    let widths: Vec<String> = VALUES.iter().map(|w| w.to_string()).collect();
    out.push_str(&format!(
        "#else\n#error {VEC} must be one of {}\n#endif\n",
        widths.join(", ")
    ));
    out
}

/// A buffer the body accesses at the index.
struct Array {
    name: String,
    ty: String,
    read: bool,
    written: bool,
    written_on_branch: bool,
}

/// `const T i = get_global_id(0);` (or without `const`): the type and the name.
fn index_declaration(parsed: &Parsed, declaration: Node<'_>) -> Option<(String, String)> {
    if declaration.kind() != "declaration" {
        return None;
    }
    let ty = declaration.child_by_field_name("type")?;
    let d = declaration.child_by_field_name("declarator")?;
    let name = d.child_by_field_name("declarator")?;
    let value = d.child_by_field_name("value")?;
    let value = if value.kind() == "cast_expression" {
        value.child_by_field_name("value")?
    } else {
        value
    };
    let call_is_index = value.kind() == "call_expression"
        && callee(parsed, value) == Some("get_global_id")
        && value
            .child_by_field_name("arguments")
            .and_then(|a| a.named_child(0))
            .is_some_and(|a| parsed.text_of(a).trim() == "0");
    let ty = parsed.text_of(ty);
    let scalar = matches!(ty, "int" | "uint" | "long" | "ulong" | "size_t");
    (name.kind() == "identifier" && call_is_index && scalar)
        .then(|| (ty.to_owned(), parsed.text_of(name).to_owned()))
}

/// `if (i >= E) return;` (or `{ return; }`): `E`, free of `i` and of calls.
fn guard_bound(parsed: &Parsed, guard: Node<'_>, var: &str) -> Option<String> {
    if guard.kind() != "if_statement" || guard.child_by_field_name("alternative").is_some() {
        return None;
    }
    let consequence = guard.child_by_field_name("consequence")?;
    let returns = consequence.kind() == "return_statement"
        || (consequence.kind() == "compound_statement"
            && consequence.named_child_count() == 1
            && consequence
                .named_child(0)
                .is_some_and(|r| r.kind() == "return_statement"));
    let mut condition = guard.child_by_field_name("condition")?;
    while condition.kind() == "parenthesized_expression" {
        condition = condition.named_child(0)?;
    }
    let op = condition.child_by_field_name("operator")?;
    let left = condition.child_by_field_name("left")?;
    let right = condition.child_by_field_name("right")?;
    let bound = parsed.text_of(right);
    let ok = returns
        && condition.kind() == "binary_expression"
        && parsed.text_of(op) == ">="
        && parsed.text_of(left).trim() == var
        && pure(right)
        && words(bound).all(|w| w != var);
    ok.then(|| bound.to_owned())
}

/// Whether `access` is written: the left of an assignment or the argument of an update.
fn writes(access: Node<'_>) -> bool {
    access.parent().is_some_and(|p| match p.kind() {
        "assignment_expression" => {
            p.child_by_field_name("left").map(|l| l.id()) == Some(access.id())
        }
        "update_expression" => true,
        _ => false,
    })
}

/// Whether `node` lies inside a loop or switch below the statement `top`.
fn inside_inner_loop(node: Node<'_>, top: Node<'_>) -> bool {
    let mut current = node.parent();
    while let Some(n) = current {
        if matches!(
            n.kind(),
            "for_statement" | "while_statement" | "do_statement" | "switch_statement"
        ) {
            return true;
        }
        if n.id() == top.id() {
            return false;
        }
        current = n.parent();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(entry: &str) -> Manifest {
        let text = format!("entry = \"{entry}\"\nlanguage = \"opencl\"\n[params]\nWG = [64]\n[launch]\nglobal = [\"((n + WG - 1) / WG) * WG\"]\nlocal = [\"WG\"]\n");
        Manifest::parse(&text, "<test>", None).unwrap()
    }

    /// An ELU as a user writes it (KernelBench 31): `x` read with one vload, `out` written
    /// with one vstore (not read first: it is written on every path), the tail index by
    /// index, the launch divided by VEC.
    #[test]
    fn an_elementwise_kernel_gets_vector_loads_and_stores() {
        let text = "__kernel void elu(__global const float* x, __global float* out, const int n) {\n    const int i = get_global_id(0);\n    if (i >= n) return;\n    const float v = x[i];\n    out[i] = v > 0.0f ? v : (exp(v) - 1.0f);\n}\n";
        let r = vectorize(text, &manifest("elu")).unwrap();
        assert!(
            r.text
                .contains("KF_VSTORE(KF_VLOAD(0, x + kft_base), 0, kft_a_x)"),
            "{}",
            r.text
        );
        assert!(r.text.contains("const float v = kft_a_x[kft_k];"));
        assert!(r.text.contains("kft_a_out[kft_k] = v > 0.0f"));
        assert!(r
            .text
            .contains("KF_VSTORE(KF_VLOAD(0, kft_a_out), 0, out + kft_base)"));
        assert!(
            !r.text.contains("(0, out + kft_base), 0, kft_a_out)"),
            "out is not read"
        );
        assert!(
            r.text.contains("out[i] = v > 0.0f"),
            "the tail keeps the body"
        );
        assert!(r.global.unwrap()[0].contains("/ VEC"));
        assert!(Parsed::opencl(&r.text).unwrap().function("elu").is_some());
    }

    /// A row pointer declared after the guard keeps its address space in both paths.
    #[test]
    fn qualifiers_of_the_body_stay() {
        let text = "__kernel void k(__global const float* x, __global float* y, const int n) {\n    const int i = get_global_id(0);\n    if (i >= n) return;\n    __global const float* row = x + i;\n    y[i] = row[0];\n}\n";
        let r = vectorize(text, &manifest("k")).unwrap();
        assert_eq!(
            r.text.matches("__global const float* row = x + i;").count(),
            2,
            "{}",
            r.text
        );
    }

    /// Left alone: a kernel reading a neighbour of what it writes, one without the guard,
    /// and one storing at another index.
    #[test]
    fn other_shapes_are_left_alone() {
        let cases = [
            "__kernel void k(__global float* x, const int n) {\n    const int i = get_global_id(0);\n    if (i >= n) return;\n    x[i] = x[i + 1];\n}\n",
            "__kernel void k(__global const float* x, __global float* y, const int n) {\n    const int i = get_global_id(0);\n    y[i] = x[i];\n}\n",
            "__kernel void k(__global const float* x, __global float* y, const int n) {\n    const int i = get_global_id(0);\n    if (i >= n) return;\n    y[n - 1 - i] = x[i];\n}\n",
        ];
        for text in cases {
            assert!(vectorize(text, &manifest("k")).is_none(), "{text}");
        }
    }
}
