//! `const` and `restrict` qualification of a kernel's `__global` pointer parameters: `const`
//! on the pointee of every pointer the kernel provably only reads, `restrict` (behind the
//! tunable `RESTRICT`, 1 or 0) on every `__global` pointer. `restrict` holds because the
//! evaluator binds a distinct buffer to every pointer argument, and a kernel's parameters
//! cannot be derived from one another; a kernel whose task binds one buffer twice gives wrong
//! values, which the evaluator reports.

use kf_manifest::Manifest;
use tree_sitter::Node;

use crate::child::{NewParam, Rewrite};
use crate::parse::{apply_edits, callee, descendants, words, Parsed};

/// The tunable: whether the pointers are `restrict`.
pub(crate) const RESTRICT: &str = "RESTRICT";
const MACRO: &str = "KF_RESTRICT";

/// Qualifies `text`'s kernel `entry`, or `None` when there is nothing to add.
pub(crate) fn qualify(text: &str, manifest: &Manifest) -> Option<Rewrite> {
    if words(text).any(|w| w == RESTRICT || w == MACRO) {
        return None;
    }
    let parsed = Parsed::opencl(text).ok()?;
    let kernel = parsed.function(&manifest.entry)?;
    let body = kernel.child_by_field_name("body")?;
    let params = parsed.params(kernel)?;
    let mut edits = Vec::new();
    let mut made_const = Vec::new();
    let mut made_restrict = 0;
    for p in params.iter().filter(|p| p.pointer && p.global) {
        if !p.const_pointee && read_only(&parsed, body, &p.name) {
            edits.push((p.type_start..p.type_start, "const ".to_owned()));
            made_const.push(p.name.clone());
        }
        if !p.restrict {
            edits.push((p.after_star..p.after_star, format!(" {MACRO}")));
            made_restrict += 1;
        }
    }
    if made_restrict == 0 && made_const.is_empty() {
        return None;
    }
    let header = format!(
        "#ifndef {RESTRICT}\n#define {RESTRICT} 1\n#endif\n#if {RESTRICT}\n#define {MACRO} restrict\n#else\n#define {MACRO}\n#endif\n"
    );
    let note = match made_const.len() {
        0 => format!("restrict on {made_restrict} pointer(s) behind RESTRICT"),
        _ => format!(
            "const on the read-only {}; restrict on {made_restrict} pointer(s) behind RESTRICT",
            made_const.join(", ")
        ),
    };
    let params = if made_restrict > 0 {
        vec![NewParam {
            name: RESTRICT.to_owned(),
            values: vec![1, 0],
            start: 1,
        }]
    } else {
        Vec::new()
    };
    Some(Rewrite {
        text: format!("{header}{}", apply_edits(text, edits)),
        params,
        global: None,
        local: None,
        note,
    })
}

/// Whether the kernel body only reads through the pointer `name`: every use is a subscript,
/// dereference or member access that is not assigned, incremented or has its address taken;
/// a `vloadN` argument; or the initialiser of a declared pointer whose pointee is `const`
/// (pointer arithmetic included). Anything else (a call, a store, a copy into a plain pointer,
/// a local of the same name) is taken as a possible write.
pub(crate) fn read_only(parsed: &Parsed, body: Node<'_>, name: &str) -> bool {
    for node in descendants(body) {
        if parsed.text_of(node) != name {
            continue;
        }
        match node.kind() {
            "identifier" => {}
            _ => continue,
        }
        if !use_is_read(parsed, node) {
            return false;
        }
    }
    true
}

fn use_is_read(parsed: &Parsed, ident: Node<'_>) -> bool {
    // Climb through the accesses that keep it an lvalue of the pointee.
    let mut top = ident;
    let mut accessed = false;
    while let Some(parent) = top.parent() {
        let through = match parent.kind() {
            "subscript_expression" => {
                parent.child_by_field_name("argument").map(|a| a.id()) == Some(top.id())
            }
            "field_expression" => accessed,
            "parenthesized_expression" => true,
            "pointer_expression" => parent
                .child_by_field_name("operator")
                .is_some_and(|o| parsed.text_of(o) == "*"),
            _ => false,
        };
        if !through {
            break;
        }
        if matches!(parent.kind(), "subscript_expression" | "pointer_expression") {
            accessed = true;
        }
        top = parent;
    }
    let parent = match top.parent() {
        Some(p) => p,
        None => return false,
    };
    if accessed {
        return match parent.kind() {
            "assignment_expression" => {
                parent.child_by_field_name("left").map(|l| l.id()) != Some(top.id())
            }
            "update_expression" => false,
            "pointer_expression" => parent
                .child_by_field_name("operator")
                .is_some_and(|o| parsed.text_of(o) != "&"),
            _ => true,
        };
    }
    // The pointer itself as a value: `vloadN(i, p)`, or `const T* q = p + k;`.
    if parent.kind() == "argument_list" {
        return parent
            .parent()
            .and_then(|call| callee(parsed, call))
            .is_some_and(|f| f.starts_with("vload") && !f.starts_with("vload_half"));
    }
    let mut up = Some(parent);
    while let Some(n) = up {
        match n.kind() {
            "binary_expression" | "parenthesized_expression" | "cast_expression" => up = n.parent(),
            "init_declarator" => {
                let Some(decl) = n.parent().filter(|d| d.kind() == "declaration") else {
                    return false;
                };
                let pointer = n
                    .child_by_field_name("declarator")
                    .is_some_and(|d| d.kind() == "pointer_declarator");
                let mut c = decl.walk();
                let constant = decl
                    .children(&mut c)
                    .any(|q| q.kind() == "type_qualifier" && parsed.text_of(q) == "const");
                return pointer && constant;
            }
            _ => return false,
        }
    }
    false
}
