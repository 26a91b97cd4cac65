//! Local-memory staging of data a work-group reuses: a counted loop at the top level of the
//! kernel whose body reads `p[e]`, where `p` is a buffer the kernel only reads and `e` depends
//! only on the loop variable and on values every work-item of a group shares (the group's
//! index, a global index in a dimension whose work-group size is 1, scalar arguments, constants
//! and locals computed from them), reads the same elements in every work-item of the group: the
//! group copies them into `__local` memory once, `STAGE_TILE` iterations at a time, each
//! work-item copying every `get_local_size`-th element, between barriers, and the loop reads the
//! copy. A matrix-vector product's vector, a bias every row adds, the row of a 2-D kernel whose
//! rows are work-groups are such reads. A 2-D kernel that never asks for its group's shape
//! computes the same for any work-group size: where the group as launched shares no read, the
//! child's work-groups are one high in a dimension above 0 if that makes one shared (the row of
//! `A` in a matrix product; the child's `launch.local` says so).
//!
//! The loop `for (T k = A; k < B; ++k) BODY` becomes
//!
//! ```text
//! for (T kft_t0 = A; kft_t0 < B; kft_t0 += STAGE_TILE) {
//!     const int kft_tn = min(STAGE_TILE, B - kft_t0);
//!     barrier; kft_st0[j] = p[e(k = kft_t0 + j)] for j < kft_tn, split among the group; barrier;
//!     for (T k = kft_t0; k < kft_t0 + kft_tn; ++k) BODY with p[e] read as kft_st0[k - kft_t0]
//! }
//! ```
//!
//! Why this is the same computation: the loop visits the same `k` in the same order and the
//! body is unchanged but for its reads; `p` is never written by the kernel (and the evaluator
//! binds a distinct buffer to every pointer argument, the argument `restrict` and hoisting rest
//! on), so `kft_st0[k - kft_t0]` holds the value `p[e]` would read; `A`, `B` and `e` are the same
//! in every work-item of the group, so the elements copied are those each work-item reads. The
//! read is on no branch of the body, and the body has no `break`, `continue`, `return` or
//! `goto`, so the original reads every staged element: the copy reads nothing it would not.
//!
//! Barriers need every work-item of the group. A kernel whose work-items leave early
//! (`if (i >= n) return;` with `i` differing within a group) keeps them instead: the guard
//! sets a flag (`kft_active`), the statements after it run under the flag (a declaration whose initialiser
//! could fault, as a load or a division by a variable does, is computed only where the flag is
//! set), and the staged loop's copy runs in every work-item, its compute loop only where the
//! flag is set. The copy runs only when some work-item of the group is active (a local flag
//! set with `atomic_or`): that work-item reads the same elements in the original. A guard that
//! is the same in every work-item (`if (row >= rows) return;` with `row` the group's index)
//! stays: the whole group leaves. Refused: a kernel that already synchronises or uses local
//! memory or atomics, a staged loop after a statement that may return from inside it, a loop
//! whose bounds or reads differ within the group, a read on a branch.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use kf_manifest::Manifest;
use tree_sitter::Node;

use crate::child::{default_block, NewParam, Rewrite};
use crate::hoist::{pointee_type, substitute, unconditional};
use crate::parse::{
    apply_edits, callee, descendants, initialized, inside_loop_below, subscript, Parsed,
};
use crate::qualify::read_only;

/// The tunable: loop iterations staged at a time (elements per local array).
pub(crate) const STAGE_TILE: &str = "STAGE_TILE";
/// Its values, and the one a child starts at.
const VALUES: [i64; 5] = [32, 64, 128, 256, 512];
const START: i64 = 128;
/// The local memory the staged arrays may take at the largest tile, in bytes: half of the
/// 32 KiB every OpenCL device of the full profile has.
const LOCAL_BUDGET: i64 = 16 * 1024;
/// Names the rewrite introduces (the local arrays are `kft_st0`, `kft_st1`, …); a kernel
/// already using one is left alone.
const INTRODUCED: [&str; 8] = [
    STAGE_TILE,
    "kft_llid",
    "kft_lsize",
    "kft_active",
    "kft_any",
    "kft_t0",
    "kft_tn",
    "kft_j",
];
/// Work-item functions whose value is the same in every work-item of a group.
const GROUP_UNIFORM: [&str; 7] = [
    "get_group_id",
    "get_local_size",
    "get_enqueued_local_size",
    "get_num_groups",
    "get_global_size",
    "get_global_offset",
    "get_work_dim",
];
/// Built-in functions without side effects (besides the `convert_`, `as_`, `native_` and
/// `half_` families) that a uniform or side-effect-free expression may call.
const PURE: [&str; 28] = [
    "min", "max", "clamp", "abs", "abs_diff", "mad", "mad24", "mul24", "mad_hi", "mul_hi", "fma",
    "fmin", "fmax", "fabs", "sqrt", "rsqrt", "exp", "exp2", "log", "log2", "pow", "sin", "cos",
    "tanh", "floor", "ceil", "round", "trunc",
];

/// Stages the work-group-uniform reads of `text`'s kernel `entry` (see the module docs), or
/// `None` where no loop has such reads or the rewrite is not provably the same computation.
///
/// A 2-D or 3-D kernel that never asks for its work-group's shape (no local or group index,
/// local size or group count) computes the same for any work-group size: where none of its
/// reads is shared by the group as launched, a work-group size of 1 in a dimension above 0
/// (the child's `launch.local`) makes the global index there the group's, and the reads that
/// depend on it shared (a row of `A` in a matrix product whose dimension 1 runs over rows).
pub(crate) fn stage(text: &str, manifest: &Manifest) -> Option<Rewrite> {
    let parsed = Parsed::opencl(text).ok()?;
    let code = code_words(&parsed);
    if refused(&code) {
        return None;
    }
    let local: Vec<String> = manifest.local.as_ref().map_or(Vec::new(), |l| {
        l.iter().map(|e| e.text().trim().to_owned()).collect()
    });
    let unit: Vec<bool> = local.iter().map(|l| l == "1").collect();
    if let Some(rewrite) = stage_with(&parsed, manifest, &unit) {
        return Some(rewrite);
    }
    let shape_free = !code.iter().any(|w| {
        matches!(
            w.as_str(),
            "get_local_id"
                | "get_group_id"
                | "get_local_size"
                | "get_enqueued_local_size"
                | "get_num_groups"
                | "get_local_linear_id"
        )
    });
    if !shape_free {
        return None;
    }
    (1..local.len()).filter(|d| !unit[*d]).find_map(|d| {
        let mut one = unit.clone();
        one[d] = true;
        let mut rewrite = stage_with(&parsed, manifest, &one)?;
        let mut shape = local.clone();
        shape[d] = "1".to_owned();
        rewrite.local = Some(shape);
        rewrite.note.push_str(&format!(
            "; work-group size 1 in dimension {d} (the global index there the group's)"
        ));
        Some(rewrite)
    })
}

/// Whether the source already synchronises, shares local memory, uses atomics or the names
/// this rewrite introduces.
fn refused(code: &[String]) -> bool {
    code.iter().any(|w| {
        INTRODUCED.contains(&w.as_str())
            || w.starts_with("kft_st")
            || matches!(
                w.as_str(),
                "barrier"
                    | "mem_fence"
                    | "read_mem_fence"
                    | "write_mem_fence"
                    | "__local"
                    | "local"
                    | "goto"
                    | "wait_group_events"
            )
            || w.starts_with("atomic_")
            || w.starts_with("atom_")
            || w.starts_with("work_group_")
            || w.starts_with("sub_group_")
            || w.starts_with("async_work_group")
    })
}

/// The rewrite with `unit_local[d]` telling whether the work-group size in dimension `d` is 1.
fn stage_with(parsed: &Parsed, manifest: &Manifest, unit_local: &[bool]) -> Option<Rewrite> {
    let text = parsed.text.as_str();
    let kernel = parsed.function(&manifest.entry)?;
    let body = kernel.child_by_field_name("body")?;
    let mut scope = Scope::new(parsed, unit_local.to_vec(), kernel, body)?;
    let mut plan = Plan::default();
    let mut cursor = body.walk();
    let statements: Vec<Node<'_>> = body.named_children(&mut cursor).collect();
    // Once a statement may return from inside, no later loop is staged: a work-item that
    // returned would miss its barriers.
    let mut blocked = false;
    let mut pragma: Option<Node<'_>> = None;
    for statement in statements {
        let before = pragma.take();
        let returns = descendants(statement)
            .into_iter()
            .any(|n| n.kind() == "return_statement");
        match statement.kind() {
            "comment" => pragma = before,
            // A pragma belongs to the statement after it (an unroll pragma to its loop).
            "preproc_call" if parsed.text_of(statement).starts_with("#pragma") => {
                pragma = Some(statement)
            }
            "preproc_call" | "preproc_def" | "preproc_function_def" => {}
            kind if kind.starts_with("preproc_") => return None,
            "declaration" => scope.declaration(statement, &mut plan)?,
            "if_statement" if is_guard(statement) => {
                let condition = statement.child_by_field_name("condition")?;
                if !(scope.uniform(condition, None) && scope.safe(condition)) {
                    // A guard that differs within the group: the flag.
                    plan.folded = true;
                    plan.edits.push((
                        statement.byte_range(),
                        format!("kft_active = kft_active && !{};", parsed.text_of(condition)),
                    ));
                }
            }
            "for_statement" if !blocked && !returns => match scope.staged_loop(statement) {
                Some(found) => plan.stage(parsed, statement, found, before),
                None => plan.wrap(parsed, statement, before),
            },
            _ => {
                blocked |= returns;
                plan.wrap(parsed, statement, before);
            }
        }
    }
    if plan.arrays.is_empty() {
        return None;
    }
    let bytes: i64 = plan.arrays.iter().map(|ty| size_of(ty)).sum();
    let values: Vec<i64> = VALUES
        .into_iter()
        .filter(|v| v * bytes <= LOCAL_BUDGET)
        .collect();
    let start = if values.contains(&START) {
        START
    } else {
        *values.last()?
    };
    let mut header = String::from("\n");
    for (i, ty) in plan.arrays.iter().enumerate() {
        header.push_str(&format!("    __local {ty} kft_st{i}[{STAGE_TILE}];\n"));
    }
    if plan.any_flag {
        header.push_str("    __local int kft_any;\n");
    }
    header.push_str("    const int kft_llid = (int)(get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2)));\n");
    header.push_str(
        "    const int kft_lsize = (int)(get_local_size(0) * get_local_size(1) * get_local_size(2));\n",
    );
    if plan.folded {
        header.push_str("    int kft_active = 1;\n");
    }
    let open = body.start_byte() + 1;
    plan.edits.push((open..open, header));
    let loops = plan.loops;
    let arrays = plan.arrays.len();
    Some(Rewrite {
        text: format!(
            "{}{}",
            default_block(STAGE_TILE, start),
            apply_edits(text, plan.edits)
        ),
        params: vec![NewParam {
            name: STAGE_TILE.to_owned(),
            values,
            start,
        }],
        global: None,
        local: None,
        note: format!(
            "{arrays} read(s) the work-group shares staged in local memory, STAGE_TILE elements at a time, in {loops} loop(s)"
        ),
    })
}

/// What the kernel's names hold, as the top-level statements are walked in order.
struct Scope<'p> {
    parsed: &'p Parsed,
    /// Per dimension, whether the work-group size is the literal 1 (a global index there is
    /// the group's).
    unit_local: Vec<bool>,
    /// Names assigned, incremented or whose address is taken anywhere in the kernel.
    assigned: HashSet<String>,
    /// How often each name is declared in the kernel, parameters included.
    declared: HashMap<String, usize>,
    /// Object-like macros the source defines: name, body.
    macros: HashMap<String, String>,
    /// Names whose value is the same in every work-item of a group.
    uniform: HashSet<String>,
    /// Pointers the kernel only reads through, uniform in the group: name, pointee type.
    readable: HashMap<String, String>,
}

/// The edits being made.
#[derive(Default)]
struct Plan {
    edits: Vec<(Range<usize>, String)>,
    /// The element type of each local array `kft_stN`.
    arrays: Vec<String>,
    /// Staged loops.
    loops: usize,
    /// Whether some guard was folded into `kft_active`.
    folded: bool,
    /// Whether a staged loop needs the group's `kft_any` flag.
    any_flag: bool,
}

/// A distinct staged read: the pointer, the index the copy reads at (the loop variable
/// replaced by the tile's element), the pointee type.
type StagedCopy = (String, String, String);

/// A loop whose reads are staged.
struct StagedLoop {
    /// The loop variable.
    var: String,
    /// Its type.
    ty: String,
    /// Its first value (`A`).
    start: String,
    /// The bound it stays below (`B`).
    bound: String,
    /// Each staged read: its range in the body and the local array (among `copies`) it reads.
    reads: Vec<(Range<usize>, usize)>,
    /// Distinct reads, each copied into a local array of its own.
    copies: Vec<StagedCopy>,
    /// The loop body's range.
    body: Range<usize>,
}

impl<'p> Scope<'p> {
    fn new(
        parsed: &'p Parsed,
        unit_local: Vec<bool>,
        kernel: Node<'_>,
        body: Node<'_>,
    ) -> Option<Self> {
        let params = parsed.params(kernel)?;
        let mut declared: HashMap<String, usize> = HashMap::new();
        let mut assigned = HashSet::new();
        for p in &params {
            *declared.entry(p.name.clone()).or_default() += 1;
        }
        for n in descendants(body) {
            match n.kind() {
                "init_declarator" | "declaration" | "parameter_declaration" => {
                    let mut c = n.walk();
                    for d in n.children_by_field_name("declarator", &mut c) {
                        if d.kind() == "init_declarator" {
                            continue;
                        }
                        if let Some(name) = declared_name(parsed, d) {
                            *declared.entry(name).or_default() += 1;
                        }
                    }
                }
                "assignment_expression" | "update_expression" => {
                    let target = n
                        .child_by_field_name("left")
                        .or_else(|| n.child_by_field_name("argument"));
                    if let Some(name) = target.and_then(|t| plain_name(parsed, t)) {
                        assigned.insert(name);
                    }
                }
                "pointer_expression" if operator(parsed, n) == Some("&") => {
                    if let Some(name) = n
                        .child_by_field_name("argument")
                        .and_then(|t| plain_name(parsed, t))
                    {
                        assigned.insert(name);
                    }
                }
                _ => {}
            }
        }
        let mut scope = Scope {
            parsed,
            unit_local,
            assigned,
            declared,
            macros: macros(&parsed.text),
            uniform: HashSet::new(),
            readable: HashMap::new(),
        };
        for p in &params {
            if scope.declared.get(&p.name) != Some(&1) || scope.assigned.contains(&p.name) {
                continue;
            }
            if !p.pointer {
                scope.uniform.insert(p.name.clone());
            } else if p.global && read_only(parsed, body, &p.name) {
                // A pointee this rewrite cannot declare a local array of stays in global memory.
                if let Some(ty) = pointee_type(&parsed.text[p.type_start..p.after_star]) {
                    scope.uniform.insert(p.name.clone());
                    scope.readable.insert(p.name.clone(), ty);
                }
            }
        }
        Some(scope)
    }

    /// A top-level declaration: under the flag, initialisers that could fault are computed
    /// only where it is set; names declared once, never assigned, from uniform values are
    /// uniform (pointers with a `const` pointee from readable ones are readable). `None` for
    /// one this rewrite cannot keep under the flag (an array or aggregate initialised with
    /// values that could fault).
    fn declaration(&mut self, decl: Node<'_>, plan: &mut Plan) -> Option<()> {
        let parsed = self.parsed;
        let ty = decl.child_by_field_name("type")?;
        let ty_text = parsed.text_of(ty).to_owned();
        let mut c = decl.walk();
        let const_pointee = decl
            .children(&mut c)
            .any(|n| n.kind() == "type_qualifier" && parsed.text_of(n) == "const");
        let mut c = decl.walk();
        let declarators: Vec<Node<'_>> =
            decl.children_by_field_name("declarator", &mut c).collect();
        for d in declarators {
            let Some((target, value)) = initialized(d) else {
                continue;
            };
            let name = declared_name(parsed, target)?;
            if plan.folded && !self.safe(value) {
                let zero = match target.kind() {
                    "pointer_declarator" => "0".to_owned(),
                    "identifier"
                        if !matches!(
                            ty.kind(),
                            "struct_specifier" | "union_specifier" | "enum_specifier"
                        ) && value.kind() != "initializer_list" =>
                    {
                        format!("({ty_text})0")
                    }
                    _ => return None,
                };
                plan.edits.push((
                    value.byte_range(),
                    format!("kft_active ? ({}) : {zero}", parsed.text_of(value)),
                ));
                continue;
            }
            if self.declared.get(&name) != Some(&1)
                || self.assigned.contains(&name)
                || !self.uniform(value, None)
            {
                continue;
            }
            match target.kind() {
                "identifier" => {
                    self.uniform.insert(name);
                }
                "pointer_declarator"
                    if const_pointee
                        && target
                            .child_by_field_name("declarator")
                            .is_some_and(|i| i.kind() == "identifier") =>
                {
                    // Uniform pointer arithmetic from a readable pointer (the only pointers
                    // a uniform expression may name are readable ones).
                    let from_readable = descendants(value)
                        .into_iter()
                        .filter(|n| n.kind() == "identifier")
                        .any(|n| self.readable.contains_key(parsed.text_of(n)));
                    if let Some(pointee) = pointee_type(&ty_text).filter(|_| from_readable) {
                        self.uniform.insert(name.clone());
                        self.readable.insert(name, pointee);
                    }
                }
                _ => {}
            }
        }
        Some(())
    }

    /// Whether `expr` has the same value in every work-item of a group, `var` (a loop
    /// variable the caller accounts for) aside: no memory read, no assignment, calls only to
    /// group-uniform work-item functions and pure built-ins, names only uniform ones,
    /// constants and macros that expand to neither work-item functions nor kernel variables.
    fn uniform(&self, expr: Node<'_>, var: Option<&str>) -> bool {
        descendants(expr).into_iter().all(|n| match n.kind() {
            "identifier" => {
                let name = self.parsed.text_of(n);
                is_callee(n) || Some(name) == var || self.uniform_name(name, 0)
            }
            "call_expression" => self.uniform_call(n),
            "field_expression" => !is_arrow(self.parsed, n),
            "assignment_expression"
            | "update_expression"
            | "comma_expression"
            | "subscript_expression"
            | "pointer_expression"
            | "string_literal" => false,
            _ => true,
        })
    }

    fn uniform_name(&self, name: &str, depth: usize) -> bool {
        if self.declared.contains_key(name) {
            return self.uniform.contains(name);
        }
        if self.assigned.contains(name) {
            // A program-scope variable the kernel writes.
            return false;
        }
        match self.macros.get(name) {
            // A constant of the backend (`-D` tunables) or of OpenCL C.
            None => true,
            Some(body) => {
                depth < 8
                    && crate::parse::words(body).all(|w| {
                        !w.starts_with("get_")
                            && (!self.declared.contains_key(w) || self.uniform.contains(w))
                            && (!self.macros.contains_key(w) || self.uniform_name(w, depth + 1))
                    })
            }
        }
    }

    fn uniform_call(&self, call: Node<'_>) -> bool {
        let Some(name) = callee(self.parsed, call) else {
            return false;
        };
        if GROUP_UNIFORM.contains(&name) {
            return true;
        }
        if name == "get_global_id" {
            let dim = call
                .child_by_field_name("arguments")
                .and_then(|a| a.named_child(0))
                .and_then(|a| self.parsed.text_of(a).trim().parse::<usize>().ok());
            return dim.is_some_and(|d| self.unit_local.get(d) == Some(&true));
        }
        pure_builtin(name)
    }

    /// Whether evaluating `expr` in a work-item the original would have stopped cannot fault
    /// or have an effect: no memory read, assignment or call but to work-item functions and
    /// pure built-ins, and divisions only by non-zero literals or constants.
    fn safe(&self, expr: Node<'_>) -> bool {
        descendants(expr).into_iter().all(|n| match n.kind() {
            "call_expression" => callee(self.parsed, n).is_some_and(|f| {
                (f.starts_with("get_") && f.ends_with("_id")) || self.uniform_call(n)
            }),
            "subscript_expression"
            | "assignment_expression"
            | "update_expression"
            | "comma_expression"
            | "pointer_expression"
            | "string_literal" => false,
            "field_expression" => !is_arrow(self.parsed, n),
            "binary_expression" if matches!(operator(self.parsed, n), Some("/" | "%")) => n
                .child_by_field_name("right")
                .is_some_and(|r| self.nonzero_constant(r)),
            _ => true,
        })
    }

    /// A non-zero number or a name the kernel does not declare (a constant).
    fn nonzero_constant(&self, node: Node<'_>) -> bool {
        let text = self.parsed.text_of(node).trim();
        match node.kind() {
            "number_literal" => text
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .parse::<f64>()
                .is_ok_and(|v| v != 0.0),
            "identifier" => !self.declared.contains_key(text),
            "parenthesized_expression" => node
                .named_child(0)
                .is_some_and(|inner| self.nonzero_constant(inner)),
            _ => false,
        }
    }

    /// The loop's staged reads, or `None` where it has none or is not a counted loop with
    /// uniform bounds whose every iteration runs its whole body.
    fn staged_loop(&self, for_loop: Node<'_>) -> Option<StagedLoop> {
        let parsed = self.parsed;
        let (var, ty, start, bound) = self.counted_loop(for_loop)?;
        let body = for_loop.child_by_field_name("body")?;
        if leaves_early(parsed, body, &var) {
            return None;
        }
        let (reads, copies) = self.shared_reads(for_loop, body, &var);
        if reads.is_empty() {
            return None;
        }
        Some(StagedLoop {
            var,
            ty,
            start: parsed.text_of(start).to_owned(),
            bound: parsed.text_of(bound).to_owned(),
            reads,
            copies,
            body: body.byte_range(),
        })
    }

    /// `for (T var = A; var < B; ++var)` with `var` declared once, not `const`, `A` and `B`
    /// the same in every work-item of a group, and a unit step: `var`, `T`, `A` and `B`.
    fn counted_loop<'t>(&self, for_loop: Node<'t>) -> Option<(String, String, Node<'t>, Node<'t>)> {
        let parsed = self.parsed;
        let init = for_loop
            .child_by_field_name("initializer")
            .filter(|i| i.kind() == "declaration")?;
        let mut c = init.walk();
        let declarators: Vec<Node<'_>> =
            init.children_by_field_name("declarator", &mut c).collect();
        let [declarator] = declarators.as_slice() else {
            return None;
        };
        let mut c = init.walk();
        if init.children(&mut c).any(|n| n.kind() == "type_qualifier") {
            return None;
        }
        let var_node = declarator
            .child_by_field_name("declarator")
            .filter(|d| d.kind() == "identifier")?;
        let var = parsed.text_of(var_node).to_owned();
        let start = declarator.child_by_field_name("value")?;
        let ty = parsed.text_of(init.child_by_field_name("type")?).to_owned();
        let condition = for_loop
            .child_by_field_name("condition")
            .filter(|c| c.kind() == "binary_expression" && operator(parsed, *c) == Some("<"))?;
        let left = condition.child_by_field_name("left")?;
        let bound = condition.child_by_field_name("right")?;
        if plain_name(parsed, left).as_deref() != Some(var.as_str())
            || self.declared.get(&var) != Some(&1)
            || !self.uniform(start, None)
            || !self.uniform(bound, None)
            || !self.unit_step(for_loop.child_by_field_name("update")?, &var)
        {
            return None;
        }
        Some((var, ty, start, bound))
    }

    /// The reads of `for_loop`'s `body` the group's work-items share (see
    /// [`StagedLoop::reads`] and [`StagedLoop::copies`]): loads from a readable buffer, on no
    /// branch, at an index that uses the loop variable `var` and is otherwise uniform.
    fn shared_reads(
        &self,
        for_loop: Node<'_>,
        body: Node<'_>,
        var: &str,
    ) -> (Vec<(Range<usize>, usize)>, Vec<StagedCopy>) {
        let parsed = self.parsed;
        let mut reads = Vec::new();
        let mut copies: Vec<StagedCopy> = Vec::new();
        let mut texts: Vec<String> = Vec::new();
        for load in descendants(body) {
            let Some((pointer, index)) = subscript(load) else {
                continue;
            };
            let Some(pointee) = (pointer.kind() == "identifier")
                .then(|| self.readable.get(parsed.text_of(pointer)))
                .flatten()
            else {
                continue;
            };
            let uses_var = descendants(index)
                .into_iter()
                .any(|n| n.kind() == "identifier" && parsed.text_of(n) == var);
            if !uses_var || !self.uniform(index, Some(var)) || !unconditional(load, for_loop) {
                continue;
            }
            let load_text: String = parsed.text_of(load).split_whitespace().collect();
            let slot = match texts.iter().position(|t| *t == load_text) {
                Some(i) => i,
                None => {
                    texts.push(load_text);
                    copies.push((
                        parsed.text_of(pointer).to_owned(),
                        substitute(parsed, index, var, "kft_t0 + kft_j"),
                        pointee.clone(),
                    ));
                    copies.len() - 1
                }
            };
            let local = load.start_byte() - body.start_byte()..load.end_byte() - body.start_byte();
            reads.push((local, slot));
        }
        (reads, copies)
    }

    /// `++var`, `var++` or `var += 1`.
    fn unit_step(&self, update: Node<'_>, var: &str) -> bool {
        let parsed = self.parsed;
        match update.kind() {
            "update_expression" => {
                operator(parsed, update) == Some("++")
                    && update
                        .child_by_field_name("argument")
                        .and_then(|a| plain_name(parsed, a))
                        .is_some_and(|a| a == var)
            }
            "assignment_expression" => {
                operator(parsed, update) == Some("+=")
                    && update
                        .child_by_field_name("left")
                        .and_then(|a| plain_name(parsed, a))
                        .is_some_and(|a| a == var)
                    && update
                        .child_by_field_name("right")
                        .is_some_and(|r| parsed.text_of(r).trim() == "1")
            }
            _ => false,
        }
    }
}

impl Plan {
    /// Under the flag, a statement runs only where it is set (a pragma before it stays
    /// before its statement).
    fn wrap(&mut self, parsed: &Parsed, statement: Node<'_>, pragma: Option<Node<'_>>) {
        if !self.folded {
            return;
        }
        let start = pragma.map_or(statement.start_byte(), |p| p.start_byte());
        let indent = indent_of(parsed, start);
        self.edits
            .push((start..start, format!("if (kft_active) {{\n{indent}")));
        let end = statement.end_byte();
        self.edits.push((end..end, format!("\n{indent}}}")));
    }

    /// Rewrites a staged loop (see the module docs); a pragma before it moves to the compute
    /// loop.
    fn stage(
        &mut self,
        parsed: &Parsed,
        for_loop: Node<'_>,
        found: StagedLoop,
        pragma: Option<Node<'_>>,
    ) {
        let first = self.arrays.len();
        let StagedLoop {
            var,
            ty,
            start,
            bound,
            reads,
            copies,
            body,
        } = found;
        let body_text = &parsed.text[body.clone()];
        let edits = reads
            .into_iter()
            .map(|(range, slot)| (range, format!("kft_st{}[{var} - kft_t0]", first + slot)))
            .collect();
        let new_body = apply_edits(body_text, edits);
        let mut copy = Vec::new();
        for (i, (pointer, index, pointee)) in copies.into_iter().enumerate() {
            copy.push(format!(
                "            kft_st{}[kft_j] = {pointer}[{index}];",
                first + i
            ));
            self.arrays.push(pointee);
        }
        let pragma_text = pragma.map(|p| parsed.text_of(p).trim().to_owned());
        if let Some(p) = pragma {
            self.edits.push((p.byte_range(), String::new()));
        }
        let mut lines = vec!["{".to_owned()];
        if self.folded {
            self.any_flag = true;
            lines.extend(
                [
                    "    barrier(CLK_LOCAL_MEM_FENCE);",
                    "    if (kft_llid == 0) kft_any = 0;",
                    "    barrier(CLK_LOCAL_MEM_FENCE);",
                    "    if (kft_active) atomic_or(&kft_any, 1);",
                    "    barrier(CLK_LOCAL_MEM_FENCE);",
                    "    if (kft_any)",
                ]
                .map(str::to_owned),
            );
        }
        lines.push(format!(
            "    for ({ty} kft_t0 = {start}; kft_t0 < {bound}; kft_t0 += {STAGE_TILE}) {{"
        ));
        lines.push(format!("        const int kft_tn = (int)(({bound}) - kft_t0 < ({ty}){STAGE_TILE} ? ({bound}) - kft_t0 : ({ty}){STAGE_TILE});"));
        lines.push("        barrier(CLK_LOCAL_MEM_FENCE);".to_owned());
        lines.push(
            "        for (int kft_j = kft_llid; kft_j < kft_tn; kft_j += kft_lsize) {".to_owned(),
        );
        lines.extend(copy);
        lines.push("        }".to_owned());
        lines.push("        barrier(CLK_LOCAL_MEM_FENCE);".to_owned());
        let compute =
            format!("for ({ty} {var} = kft_t0; {var} < kft_t0 + kft_tn; ++{var}) {new_body}");
        if self.folded {
            lines.push("        if (kft_active) {".to_owned());
            lines.extend(pragma_text);
            lines.push(format!("            {compute}"));
            lines.push("        }".to_owned());
        } else {
            lines.extend(pragma_text);
            lines.push(format!("        {compute}"));
        }
        lines.push("    }".to_owned());
        lines.push("}".to_owned());
        let indent = indent_of(parsed, for_loop.start_byte());
        // Preprocessor lines start their line; the first line follows the loop's indentation.
        let out = lines
            .iter()
            .enumerate()
            .map(|(i, l)| match (i, l.starts_with('#')) {
                (0, _) | (_, true) => l.clone(),
                _ => format!("{indent}{l}"),
            })
            .collect::<Vec<_>>()
            .join("\n");
        self.edits.push((for_loop.byte_range(), out));
        self.loops += 1;
    }
}

/// Whether an iteration of the loop with variable `var` and body `body` may not run its whole
/// body: a `return`, `goto`, a `break` or `continue` of this loop, or a change of `var`.
fn leaves_early(parsed: &Parsed, body: Node<'_>, var: &str) -> bool {
    descendants(body).into_iter().any(|n| match n.kind() {
        "return_statement" | "goto_statement" => true,
        "break_statement" | "continue_statement" => !inside_loop_below(n, body),
        "assignment_expression" | "update_expression" => n
            .child_by_field_name("left")
            .or_else(|| n.child_by_field_name("argument"))
            .and_then(|t| plain_name(parsed, t))
            .is_some_and(|t| t == var),
        _ => false,
    })
}

/// The whitespace before byte `at` on its line (empty when code precedes it).
fn indent_of(parsed: &Parsed, at: usize) -> String {
    let start = parsed.text[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = &parsed.text[start..at];
    if before.trim().is_empty() {
        before.to_owned()
    } else {
        String::new()
    }
}

/// `if (c) return;` or `if (c) { return; }`, without `else`.
fn is_guard(statement: Node<'_>) -> bool {
    if statement.child_by_field_name("alternative").is_some() {
        return false;
    }
    let Some(consequence) = statement.child_by_field_name("consequence") else {
        return false;
    };
    let is_return = |n: Node<'_>| n.kind() == "return_statement" && n.named_child_count() == 0;
    match consequence.kind() {
        "return_statement" => is_return(consequence),
        "compound_statement" => {
            let mut c = consequence.walk();
            let inner: Vec<Node<'_>> = consequence
                .named_children(&mut c)
                .filter(|n| n.kind() != "comment")
                .collect();
            matches!(inner.as_slice(), [only] if is_return(*only))
        }
        _ => false,
    }
}

/// The name a declarator declares.
fn declared_name(parsed: &Parsed, mut declarator: Node<'_>) -> Option<String> {
    while declarator.kind() != "identifier" {
        declarator = declarator.child_by_field_name("declarator")?;
    }
    Some(parsed.text_of(declarator).to_owned())
}

/// The name an lvalue is, through parentheses (`x`, `(x)`).
fn plain_name(parsed: &Parsed, mut node: Node<'_>) -> Option<String> {
    while node.kind() == "parenthesized_expression" {
        node = node.named_child(0)?;
    }
    (node.kind() == "identifier").then(|| parsed.text_of(node).to_owned())
}

/// The operator of a binary, update, assignment or pointer expression.
fn operator<'a>(parsed: &'a Parsed, node: Node<'_>) -> Option<&'a str> {
    node.child_by_field_name("operator")
        .map(|o| parsed.text_of(o))
}

/// Whether a field access reads through a pointer (`p->x`).
fn is_arrow(parsed: &Parsed, field: Node<'_>) -> bool {
    let mut c = field.walk();
    let arrow = field.children(&mut c).any(|n| parsed.text_of(n) == "->");
    arrow
}

/// Whether an identifier is the function a call calls.
fn is_callee(node: Node<'_>) -> bool {
    node.parent().is_some_and(|p| {
        p.kind() == "call_expression"
            && p.child_by_field_name("function").map(|f| f.id()) == Some(node.id())
    })
}

fn pure_builtin(name: &str) -> bool {
    PURE.contains(&name)
        || ["convert_", "as_", "native_", "half_"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// The object-like macros `text` defines: name, body.
fn macros(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .filter_map(|l| l.trim_start().strip_prefix("define"))
        .filter(|l| l.starts_with([' ', '\t']))
        .filter_map(|l| {
            let l = l.trim_start();
            let end = l
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(l.len());
            let (name, rest) = l.split_at(end);
            (!name.is_empty() && !rest.starts_with('('))
                .then(|| (name.to_owned(), rest.trim().to_owned()))
        })
        .collect()
}

/// The words of the source outside comments (a comment that says "local" is no local memory).
fn code_words(parsed: &Parsed) -> Vec<String> {
    let comments = descendants(parsed.root())
        .into_iter()
        .filter(|n| n.kind() == "comment")
        .map(|n| (n.byte_range(), " ".to_owned()))
        .collect();
    let blanked = apply_edits(&parsed.text, comments);
    crate::parse::words(&blanked).map(str::to_owned).collect()
}

/// The size in bytes of a scalar or vector OpenCL type (4 for one it does not know).
fn size_of(ty: &str) -> i64 {
    let scalar = ty.trim_end_matches(|c: char| c.is_ascii_digit());
    let lanes = ty[scalar.len()..].parse::<i64>().unwrap_or(1);
    let lanes = if lanes == 3 { 4 } else { lanes };
    let bytes = match scalar {
        "double" | "long" | "ulong" => 8,
        "half" | "short" | "ushort" => 2,
        "char" | "uchar" => 1,
        _ => 4,
    };
    bytes * lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifest with these work-group sizes (as many global sizes).
    fn manifest(entry: &str, local: &str) -> Manifest {
        let global = ["\"n\"", "\"rows\""][..local.split(',').count()].join(", ");
        let text = format!(
            "entry = \"{entry}\"\nlanguage = \"opencl\"\n[params]\nWG = [16]\n[launch]\nglobal = [{global}]\nlocal = [{local}]\n"
        );
        Manifest::parse(&text, "<test>", None).unwrap()
    }

    fn parses(text: &str, entry: &str) -> bool {
        Parsed::opencl(text).unwrap().function(entry).is_some()
    }

    const MATVEC: &str = "__kernel void matvec(__global const float* A, __global const float* B, __global float* out, const int M, const int K) {\n    const int m = get_global_id(0);\n    if (m >= M) {\n        return;\n    }\n    __global const float* a = A + (long)m * K;\n    float s = 0.0f;\n    for (int k = 0; k < K; ++k) {\n        s += a[k] * B[k];\n    }\n    out[m] = s;\n}\n";

    /// A matrix-vector product: the vector every work-item reads is staged, the row only its
    /// own work-item reads is not; the early return becomes the flag, the copy waits for some
    /// active work-item, and the store after the loop runs under the flag.
    #[test]
    fn a_matrix_vector_product_stages_its_vector() {
        let rw = stage(MATVEC, &manifest("matvec", "\"WG\"")).unwrap();
        let text = &rw.text;
        assert!(text.starts_with("#ifndef STAGE_TILE\n#define STAGE_TILE 128\n"));
        assert!(
            text.contains("__local float kft_st0[STAGE_TILE];"),
            "{text}"
        );
        assert!(!text.contains("kft_st1"), "{text}");
        assert!(
            text.contains("kft_st0[kft_j] = B[((kft_t0 + kft_j))];"),
            "{text}"
        );
        assert!(text.contains("s += a[k] * kft_st0[k - kft_t0];"), "{text}");
        assert!(
            text.contains("kft_active = kft_active && !(m >= M);"),
            "{text}"
        );
        assert!(!text.contains("return"), "{text}");
        assert!(
            text.contains("if (kft_active) atomic_or(&kft_any, 1);"),
            "{text}"
        );
        assert!(
            text.contains("if (kft_active) {\n    out[m] = s;\n    }"),
            "{text}"
        );
        // Pointer arithmetic cannot fault: computed in every work-item, as it was.
        assert!(text.contains("__global const float* a = A + (long)m * K;"));
        assert!(parses(text, "matvec"), "{text}");
        assert_eq!(rw.params[0].name, STAGE_TILE);
        assert_eq!(rw.params[0].values, VALUES);
        assert!(rw.global.is_none() && rw.local.is_none());
        // Staged once only.
        assert!(stage(text, &manifest("matvec", "\"WG\"")).is_none());
    }

    /// A 2-D kernel whose rows are work-groups (local size 1 in dimension 1): the row every
    /// work-item of a group sums is staged; a declaration after the guard that could fault
    /// (a load, a division by a variable) is computed only under the flag. With a work-group
    /// of several rows, the row differs within the group: refused.
    #[test]
    fn a_row_per_group_is_staged_only_when_the_group_shares_it() {
        let text = "__kernel void center(__global const float* x, __global float* y, const int rows, const int n) {\n    const int c = get_global_id(0);\n    const int r = get_global_id(1);\n    if (r >= rows || c >= n) return;\n    const float own = x[r * n + c];\n    const int per = c / n;\n    __global const float* row = x + r * n;\n    float s = 0.0f;\n    for (int k = 0; k < n; ++k)\n        s += row[k] + x[(long)r * n + k];\n    y[r * n + c] = own - s / n + per;\n}\n";
        let rw = stage(text, &manifest("center", "\"WG\", \"1\"")).unwrap();
        let out = &rw.text;
        assert!(
            out.contains("kft_st0[kft_j] = row[((kft_t0 + kft_j))];"),
            "{out}"
        );
        assert!(
            out.contains("kft_st1[kft_j] = x[((long)r * n + (kft_t0 + kft_j))];"),
            "{out}"
        );
        assert!(
            out.contains("s += kft_st0[k - kft_t0] + kft_st1[k - kft_t0];"),
            "{out}"
        );
        assert!(
            out.contains("const float own = kft_active ? (x[r * n + c]) : (float)0;"),
            "{out}"
        );
        assert!(
            out.contains("const int per = kft_active ? (c / n) : (int)0;"),
            "{out}"
        );
        assert!(parses(out, "center"), "{out}");
        assert!(rw.local.is_none());
        // Launched in 1-D, the row differs within the group.
        assert!(stage(text, &manifest("center", "\"WG\"")).is_none());
    }

    /// A 2-D kernel with several rows per group that never asks for its group's shape: the
    /// child's work-groups are one row high, and the row of `A` every work-item of one reads
    /// is staged. One that asks for its local index keeps its shape: refused.
    #[test]
    fn a_matrix_product_gets_groups_one_row_high() {
        let text = "__kernel void matmul(__global const float* A, __global const float* B, __global float* out, const int N) {\n    const int j = get_global_id(0);\n    const int i = get_global_id(1);\n    if (i >= N || j >= N) {\n        return;\n    }\n    float s = 0.0f;\n    for (int k = 0; k < N; ++k) {\n        s += A[(long)i * N + k] * B[(long)k * N + j];\n    }\n    out[(long)i * N + j] = s;\n}\n";
        let rw = stage(text, &manifest("matmul", "\"WG0\", \"WG1\"")).unwrap();
        assert_eq!(rw.local, Some(vec!["WG0".to_owned(), "1".to_owned()]));
        assert!(rw.note.contains("dimension 1"), "{}", rw.note);
        let out = &rw.text;
        assert!(
            out.contains("kft_st0[kft_j] = A[((long)i * N + (kft_t0 + kft_j))];"),
            "{out}"
        );
        assert!(
            out.contains("s += kft_st0[k - kft_t0] * B[(long)k * N + j];"),
            "{out}"
        );
        assert!(parses(out, "matmul"), "{out}");
        let asks = text.replace("float s = 0.0f;", "float s = 0.0f * get_local_id(1);");
        assert!(stage(&asks, &manifest("matmul", "\"WG0\", \"WG1\"")).is_none());
    }

    /// A row read through the group's index, a guard the whole group takes alike: no flag
    /// (the group leaves together), and a pragma before the loop moves to the compute loop.
    #[test]
    fn a_uniform_guard_stays_and_a_pragma_moves_inside() {
        let text = "__kernel void rowsum(__global const float* x, __global float* y, const int rows, const int n) {\n    const int row = get_group_id(0);\n    if (row >= rows) return;\n    float s = 0.0f;\n#pragma unroll 4\n    for (int k = 0; k < n; k++) {\n        s += x[row * n + k] * (float)get_local_id(0);\n    }\n    y[get_global_id(0)] = s;\n}\n";
        let rw = stage(text, &manifest("rowsum", "\"WG\"")).unwrap();
        let out = &rw.text;
        assert!(out.contains("if (row >= rows) return;"), "{out}");
        assert!(
            !out.contains("kft_active") && !out.contains("kft_any"),
            "{out}"
        );
        assert!(
            out.contains(
                "barrier(CLK_LOCAL_MEM_FENCE);\n#pragma unroll 4\n            for (int k = kft_t0;"
            ),
            "{out}"
        );
        assert_eq!(out.matches("#pragma unroll").count(), 1, "{out}");
        assert!(parses(out, "rowsum"), "{out}");
    }

    /// Refused: reads that differ within the group, a read on a branch, a loop that may stop
    /// early or whose bound differs within the group, a buffer the kernel writes, a uniform
    /// name assigned later, a macro hiding the local index, a return from inside a statement
    /// before the loop, a kernel that already synchronises, a vector too large for the budget.
    #[test]
    fn work_item_dependent_or_unprovable_reads_are_left_alone() {
        let head = "__kernel void k(__global const float* B, __global float* out, const int M, const int K) {\n    const int m = get_global_id(0);\n";
        let cases = [
            "    float s = 0.0f;\n    for (int k = 0; k < K; ++k) s += B[m * K + k];\n    out[m] = s;\n}\n",
            "    float s = 0.0f;\n    for (int k = 0; k < K; ++k) { if (k > m) s += B[k]; }\n    out[m] = s;\n}\n",
            "    float s = 0.0f;\n    for (int k = 0; k < K; ++k) { s += B[k]; if (s > 1.0f) break; }\n    out[m] = s;\n}\n",
            "    float s = 0.0f;\n    for (int k = 0; k < m; ++k) s += B[k];\n    out[m] = s;\n}\n",
            "    float s = 0.0f;\n    for (int k = 0; k < K; k += 2) s += B[k];\n    out[m] = s;\n}\n",
            "    int off = get_group_id(0);\n    float s = 0.0f;\n    for (int k = 0; k < K; ++k) { s += B[off + k]; off += 1; }\n    out[m] = s;\n}\n",
            "    float s = 0.0f;\n    if (m < M) { s = 1.0f; } else { return; }\n    for (int k = 0; k < K; ++k) s += B[k];\n    out[m] = s;\n}\n",
            "    float s = 0.0f;\n    for (int k = 0; k < K; ++k) s += B[k];\n    barrier(CLK_GLOBAL_MEM_FENCE);\n    out[m] = s;\n}\n",
            "    float s = 0.0f;\n    for (int k = 0; k < K; ++k) s += B[k + LID];\n    out[m] = s;\n}\n",
        ];
        // The same kernel without what each case adds is staged.
        let control = format!("#define LID (get_local_id(0))\n{head}    float s = 0.0f;\n    for (int k = 0; k < K; ++k) s += B[k + M];\n    out[m] = s;\n}}\n");
        assert!(
            stage(&control, &manifest("k", "\"WG\"")).is_some(),
            "{control}"
        );
        for body in cases {
            let text = format!("#define LID (get_local_id(0))\n{head}{body}");
            assert!(stage(&text, &manifest("k", "\"WG\"")).is_none(), "{text}");
        }
        let written = "__kernel void k(__global float* B, __global float* out, const int K) {\n    float s = 0.0f;\n    for (int k = 0; k < K; ++k) s += B[k];\n    B[get_global_id(0)] = s;\n    out[get_global_id(0)] = s;\n}\n";
        assert!(stage(written, &manifest("k", "\"WG\"")).is_none());
        // Eight double16 arrays: 1 KiB per element of the tile, 32 KiB at the smallest.
        let loads: Vec<String> = (0..8).map(|i| format!("B[k + {i}]")).collect();
        let wide = format!(
            "__kernel void k(__global const double16* B, __global double16* out, const int K) {{\n    double16 s = 0;\n    for (int k = 0; k < K; ++k) s += {};\n    out[get_global_id(0)] = s;\n}}\n",
            loads.join(" + ")
        );
        assert!(stage(&wide, &manifest("k", "\"WG\"")).is_none());
    }
}
