//! OpenCL C through tree-sitter's C grammar: the qualifiers C does not know are blanked out
//! first (replaced by as many spaces), so every node's byte range is also its range in the
//! original text, which the rewrites edit.

use std::ops::Range;

use tree_sitter::{Node, Parser, Tree};

use crate::error::TransformError;

/// The macro `Transformation::Qualify` writes after a pointer's `*` (`restrict` or nothing, by
/// its tunable): blanked like OpenCL's qualifiers ([`kf_source::OPENCL_QUALIFIERS`], which
/// C's grammar reads as identifiers and reports errors around), so a qualified kernel parses
/// and the other transformations still apply to it.
const RESTRICT_MACRO: &str = "KF_RESTRICT";

/// The work-item functions whose meaning changes when one work-item does the work of
/// several, or that synchronise the work-items of a group.
pub(crate) const GROUP_FUNCTIONS: &[&str] = &[
    "barrier",
    "work_group_barrier",
    "mem_fence",
    "read_mem_fence",
    "write_mem_fence",
    "get_local_id",
    "get_group_id",
    "get_local_size",
    "get_enqueued_local_size",
    "get_num_groups",
    "get_global_size",
    "get_global_offset",
    "get_global_linear_id",
    "get_local_linear_id",
];

/// `p[e]`: the array (or pointer) `p` and the index `e`, where `node` is a subscript.
pub(crate) fn subscript(node: Node<'_>) -> Option<(Node<'_>, Node<'_>)> {
    both_fields(node, "subscript_expression", "argument", "index")
}

/// `d = value` in a declaration: the declarator `d` and the value, where `node` is an
/// initialised declarator.
pub(crate) fn initialized(node: Node<'_>) -> Option<(Node<'_>, Node<'_>)> {
    both_fields(node, "init_declarator", "declarator", "value")
}

/// The children of `node` in the fields `first` and `second`, where it is a `kind` node that
/// has both.
fn both_fields<'t>(
    node: Node<'t>,
    kind: &str,
    first: &str,
    second: &str,
) -> Option<(Node<'t>, Node<'t>)> {
    if node.kind() != kind {
        return None;
    }
    Some((
        node.child_by_field_name(first)?,
        node.child_by_field_name(second)?,
    ))
}

/// A parsed OpenCL C source.
pub(crate) struct Parsed {
    /// The original text (edits apply to it).
    pub(crate) text: String,
    tree: Tree,
}

/// A pointer or scalar parameter of a kernel.
#[derive(Debug, Clone)]
pub(crate) struct KernelParam {
    /// Its name.
    pub(crate) name: String,
    /// Whether it is a pointer.
    pub(crate) pointer: bool,
    /// Whether it points into `__global` memory.
    pub(crate) global: bool,
    /// Whether the pointee is already `const`.
    pub(crate) const_pointee: bool,
    /// Whether the pointer is already `restrict`.
    pub(crate) restrict: bool,
    /// Where the parameter's type starts (where `const` goes).
    pub(crate) type_start: usize,
    /// Just past the pointer's `*` (where `restrict` goes).
    pub(crate) after_star: usize,
}

impl Parsed {
    /// Parses `text` as OpenCL C.
    pub(crate) fn opencl(text: &str) -> Result<Self, TransformError> {
        let blanked = blank_qualifiers(text);
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_c::LANGUAGE.into())
            .map_err(|e| TransformError::Parser(e.to_string()))?;
        let tree = parser
            .parse(&blanked, None)
            .ok_or_else(|| TransformError::Parser("the parser returned no tree".into()))?;
        Ok(Parsed {
            text: text.to_owned(),
            tree,
        })
    }

    /// The root of the syntax tree (the whole source).
    pub(crate) fn root(&self) -> Node<'_> {
        self.tree.root_node()
    }

    /// The text of `node`.
    pub(crate) fn text_of(&self, node: Node<'_>) -> &str {
        &self.text[node.byte_range()]
    }

    /// The definition of the function `name`, when it parsed without errors.
    pub(crate) fn function(&self, name: &str) -> Option<Node<'_>> {
        let root = self.tree.root_node();
        let mut cursor = root.walk();
        let found = root
            .named_children(&mut cursor)
            .filter(|n| n.kind() == "function_definition")
            .find(|f| self.function_name(*f).as_deref() == Some(name));
        found.filter(|f| !f.has_error())
    }

    /// Every function definition but `name` that `name` may call: the other kernels of a
    /// sequence (kf-manifest's `[[kernels]]`) in the same source are left out unless `name`
    /// names them.
    pub(crate) fn other_functions(&self, name: &str) -> Vec<Node<'_>> {
        let root = self.tree.root_node();
        let mut cursor = root.walk();
        let called: Vec<&str> = self
            .function(name)
            .map(|f| words(self.text_of(f)).collect())
            .unwrap_or_default();
        root.named_children(&mut cursor)
            .filter(|n| n.kind() == "function_definition")
            .filter(|f| {
                let own = self.function_name(*f);
                own.as_deref() != Some(name)
                    && (!self.is_kernel(*f) || own.is_some_and(|o| called.contains(&o.as_str())))
            })
            .collect()
    }

    /// Whether a function definition is a kernel (`__kernel` or `kernel` before its body; the
    /// parse blanks the qualifier, so it lies between the previous definition and this one's
    /// body).
    fn is_kernel(&self, function: Node<'_>) -> bool {
        let from = function.prev_sibling().map_or(0, |p| p.end_byte());
        let to = function
            .child_by_field_name("body")
            .map_or(function.end_byte(), |b| b.start_byte());
        words(&self.text[from..to]).any(|w| w == "__kernel" || w == "kernel")
    }

    fn function_name(&self, function: Node<'_>) -> Option<String> {
        let mut declarator = function.child_by_field_name("declarator")?;
        while declarator.kind() != "function_declarator" {
            declarator = declarator.child_by_field_name("declarator")?;
        }
        let name = declarator.child_by_field_name("declarator")?;
        Some(self.text_of(name).to_owned())
    }

    /// The parameters of a function definition, or `None` for one this crate does not read
    /// (an array parameter, a function pointer).
    pub(crate) fn params(&self, function: Node<'_>) -> Option<Vec<KernelParam>> {
        let mut declarator = function.child_by_field_name("declarator")?;
        while declarator.kind() != "function_declarator" {
            declarator = declarator.child_by_field_name("declarator")?;
        }
        let list = declarator.child_by_field_name("parameters")?;
        let mut params = Vec::new();
        let mut cursor = list.walk();
        for decl in list.named_children(&mut cursor) {
            if decl.kind() == "comment" {
                continue;
            }
            if decl.kind() != "parameter_declaration" {
                return None;
            }
            let ty = decl.child_by_field_name("type")?;
            let d = decl.child_by_field_name("declarator")?;
            let mut c = decl.walk();
            let const_pointee = decl
                .children(&mut c)
                .any(|n| n.kind() == "type_qualifier" && self.text_of(n) == "const");
            // Blanked qualifiers before the declaration are outside its range: read from the
            // `(` or `,` before it.
            let from = decl
                .prev_sibling()
                .map_or(decl.start_byte(), |p| p.end_byte());
            let text = &self.text[from..decl.end_byte()];
            let global = words(text).any(|w| w == "__global" || w == "global");
            match d.kind() {
                "identifier" => params.push(KernelParam {
                    name: self.text_of(d).to_owned(),
                    pointer: false,
                    global: false,
                    const_pointee,
                    restrict: false,
                    type_start: ty.start_byte(),
                    after_star: d.start_byte(),
                }),
                "pointer_declarator" => {
                    let inner = d.child_by_field_name("declarator")?;
                    if inner.kind() != "identifier" {
                        return None;
                    }
                    let star = d.child(0).filter(|s| s.kind() == "*")?;
                    let restrict = words(self.text_of(d)).any(|w| {
                        matches!(
                            w,
                            "restrict" | "__restrict" | "__restrict__" | "KF_RESTRICT"
                        )
                    });
                    params.push(KernelParam {
                        name: self.text_of(inner).to_owned(),
                        pointer: true,
                        global,
                        const_pointee,
                        restrict,
                        type_start: ty.start_byte(),
                        after_star: star.end_byte(),
                    });
                }
                _ => return None,
            }
        }
        Some(params)
    }
}

/// `node` and all its descendants, in source order.
pub(crate) fn descendants(node: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        out.push(n);
        let mut cursor = n.walk();
        let children: Vec<Node<'_>> = n.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    out
}

/// The name of the function a call expression calls, if it is a plain identifier.
pub(crate) fn callee<'a>(parsed: &'a Parsed, call: Node<'_>) -> Option<&'a str> {
    let f = call.child_by_field_name("function")?;
    (f.kind() == "identifier").then(|| parsed.text_of(f))
}

/// Whether `node` lies inside a loop or `switch` below `top` (exclusive).
pub(crate) fn inside_loop_below(node: Node<'_>, top: Node<'_>) -> bool {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.id() == top.id() {
            return false;
        }
        if matches!(
            n.kind(),
            "for_statement" | "while_statement" | "do_statement" | "switch_statement"
        ) {
            return true;
        }
        current = n.parent();
    }
    false
}

/// The identifier-like words of `text`.
pub(crate) fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// `text` with OpenCL's qualifiers replaced by spaces.
fn blank_qualifiers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word == RESTRICT_MACRO || kf_source::OPENCL_QUALIFIERS.contains(&word.as_str()) {
            out.extend(std::iter::repeat_n(' ', word.len()));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Applies non-overlapping `(range, replacement)` edits to `text`.
pub(crate) fn apply_edits(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for (range, replacement) in edits {
        if range.start < at {
            continue;
        }
        out.push_str(&text[at..range.start]);
        out.push_str(&replacement);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The start of the line holding byte `at`, if only whitespace precedes `at` on it.
pub(crate) fn line_start_if_first(text: &str, at: usize) -> Option<usize> {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[start..at].trim().is_empty().then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAIVE: &str = "__kernel void add(__global const float* a, __global float4* b, const int n) {\n    int i = get_global_id(0);\n    if (i < n) b[i] = (float4)(a[i]);\n}\n";

    /// OpenCL's qualifiers, vector types and work-item functions parse without errors, and
    /// ranges are those of the original text.
    #[test]
    fn opencl_parses_with_original_ranges() {
        let parsed = Parsed::opencl(NAIVE).unwrap();
        let f = parsed.function("add").expect("the kernel");
        let params = parsed.params(f).unwrap();
        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "n"]);
        assert!(params[0].global && params[0].const_pointee && params[0].pointer);
        assert!(params[1].global && !params[1].const_pointee);
        assert!(!params[2].pointer);
        assert_eq!(
            &NAIVE[params[1].type_start..params[1].after_star],
            "float4*"
        );
        let calls: Vec<&str> = descendants(f)
            .into_iter()
            .filter(|n| n.kind() == "call_expression")
            .filter_map(|c| callee(&parsed, c))
            .collect();
        assert_eq!(calls, ["get_global_id"]);
    }

    /// A kernel `Transformation::Qualify` made (its `KF_RESTRICT` macro after each `*`) parses
    /// with its parameters, which count as `restrict`.
    #[test]
    fn a_qualified_kernel_parses_with_its_parameters() {
        let text = "__kernel void add(__global const float* KF_RESTRICT a, __global float* KF_RESTRICT b, const int n) {\n    int i = get_global_id(0);\n    if (i < n) b[i] = a[i];\n}\n";
        let parsed = Parsed::opencl(text).unwrap();
        assert!(!parsed.root().has_error());
        let f = parsed.function("add").expect("the kernel");
        let params = parsed.params(f).expect("the parameters");
        let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "n"]);
        assert!(params[0].restrict && params[1].restrict && !params[2].restrict);
    }
}
