//! Row loops turned into work-group loops: a kernel in which one work-item handles one row
//! (an output element with a loop over the elements it reduces, or a whole row it normalises)
//! becomes a kernel in which one work-group of `REDUCE_WG` work-items handles it. Each
//! counted loop of the row is split among the group's work-items (`i` from `A + lid` by
//! `REDUCE_WG`): a loop that is a recognisable reduction (`acc += f(…)`, `acc -= …`,
//! `acc *= …`, `acc = fmax(acc, …)` and `fmin`/`max`/`min`) is followed by a tree reduction
//! of the partial results in local memory, after which every work-item holds the row's value;
//! a loop whose iterations are independent (its stores go to `p[E + i]`, it assigns nothing
//! declared outside it) is split as it is. The rest of the row's code runs in every work-item
//! (it computes the same values in all of them), its stores in work-item 0 only. The launch's
//! global size is multiplied by `REDUCE_WG` (one group per former work-item) and its local
//! size is `REDUCE_WG`; `get_global_id(0)` becomes `get_group_id(0)`. Only kernels in which
//! some split loop walks memory contiguously (an access at `p[E + i]`) are rewritten: a loop
//! that strides through memory (a sum over a column) is faster one work-item per output.
//!
//! Why this is the same computation: before the rewrite no work-item communicated with
//! another, so everything a former work-item computed outside the split loops is a function of
//! its index, now the group's index, which all the group's work-items share: every branch
//! they take is taken by all of them (the barriers the rewrite inserts are reached by all or
//! none), and every value they hold is the same but inside the split loops. A reduction's
//! partial results combine to the sequential result up to the order of a floating-point sum
//! (which the evaluator's tolerance judges); a sum's or product's initial value is kept by
//! work-item 0 only, the others start from the operation's identity.

use std::collections::HashSet;

use kf_manifest::Manifest;
use tree_sitter::Node;

use crate::child::{default_block, NewParam, Rewrite};
use crate::parse::{
    apply_edits, callee, descendants, initialized, subscript, words, KernelParam, Parsed,
    GROUP_FUNCTIONS,
};

/// The tunable: work-items per row (a power of two, for the tree reduction).
pub(crate) const REDUCE_WG: &str = "REDUCE_WG";
const VALUES: [i64; 5] = [16, 32, 64, 128, 256];
const START: i64 = 64;
/// The local index the rewrite declares.
const LID: &str = "kft_lid";
/// Names the rewrite introduces; a kernel already using one is left alone.
const INTRODUCED: [&str; 4] = [REDUCE_WG, LID, "kft_red", "kft_s"];
/// Scalar types an accumulator may have (the local scratch array is of its type).
const SCALAR_TYPES: [&str; 8] = [
    "float", "double", "half", "int", "uint", "long", "ulong", "short",
];

/// How a reduction combines two partial results.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Combine {
    /// `+=` and `-=`: partials are added; work-items but the first start at 0.
    Sum,
    /// `*=`: partials are multiplied; work-items but the first start at 1.
    Product,
    /// `acc = f(acc, e)` with `f` one of `fmax`, `fmin`, `max`, `min`: idempotent.
    Call(&'static str),
}

/// One accumulator of a reduction loop.
#[derive(Debug, Clone)]
struct Accumulator {
    name: String,
    ty: String,
    combine: Combine,
}

/// What the rewrite does to one counted loop.
struct CountedLoop {
    var: String,
    /// The initial value's range (`A` in `int i = A`).
    start: std::ops::Range<usize>,
    /// The update's range (`++i`).
    update: std::ops::Range<usize>,
}

/// The rewrite in progress.
struct Rows<'p> {
    parsed: &'p Parsed,
    pointers: Vec<String>,
    edits: Vec<(std::ops::Range<usize>, String)>,
    /// Scalar types that need a local scratch array.
    scratch: Vec<String>,
    reductions: usize,
    parallel: usize,
    /// Split loops that walk memory contiguously (some access at `p[E + i]`).
    contiguous: usize,
    /// Declarations of each name in the kernel (an accumulator must have exactly one).
    declared_types: Vec<(String, String)>,
    /// Pointers the kernel declares once from one global pointer parameter and never
    /// reassigns (`__global float* y = out + r * n;`), with that parameter.
    derived: Vec<(String, String)>,
}

/// Rewrites `text`'s kernel `entry` (see the module docs), or `None` where that is not
/// provably the same computation or no loop of the row could be split.
pub(crate) fn group_reduce(text: &str, manifest: &Manifest) -> Option<Rewrite> {
    if words(text).any(|w| INTRODUCED.contains(&w)) || text.contains("__attribute__") {
        return None;
    }
    if manifest.global.len() != 1 || manifest.local.as_ref().is_some_and(|l| l.len() > 1) {
        return None;
    }
    let parsed = Parsed::opencl(text).ok()?;
    let kernel = parsed.function(&manifest.entry)?;
    let body = kernel.child_by_field_name("body")?;
    if !rows_stay_apart(&parsed, kernel, &manifest.entry) {
        return None;
    }
    let params = parsed.params(kernel)?;
    let mut rows = Rows {
        parsed: &parsed,
        pointers: params
            .iter()
            .filter(|p: &&KernelParam| p.pointer && p.global)
            .map(|p| p.name.clone())
            .collect(),
        edits: Vec::new(),
        scratch: Vec::new(),
        reductions: 0,
        parallel: 0,
        contiguous: 0,
        declared_types: declared_types(&parsed, body),
        derived: Vec::new(),
    };
    rows.derived = derived_pointers(&parsed, body, &rows.pointers, &rows.declared_types);
    rows.row_index_from_group(body)?;
    rows.block(body)?;
    // Only where the work-items of a group read neighbouring elements: a loop that strides
    // through memory (a reduction over a column) is faster one work-item per output.
    if rows.reductions + rows.parallel == 0 || rows.contiguous == 0 {
        return None;
    }
    let mut header = format!("\n    const int {LID} = (int)get_local_id(0);\n");
    for ty in &rows.scratch {
        header = format!("\n    __local {ty} kft_red_{ty}[{REDUCE_WG}];{header}");
    }
    let open = body.start_byte();
    rows.edits.push((open + 1..open + 1, header));
    let rewritten = apply_edits(text, rows.edits);
    let g0 = manifest.global.first()?.text().to_owned();
    Some(Rewrite {
        text: format!("{}{rewritten}", default_block(REDUCE_WG, START)),
        params: vec![NewParam {
            name: REDUCE_WG.to_owned(),
            values: VALUES.to_vec(),
            start: START,
        }],
        global: Some(vec![format!("({g0}) * {REDUCE_WG}")]),
        local: Some(vec![REDUCE_WG.to_owned()]),
        note: format!(
            "one work-group of REDUCE_WG work-items per former work-item: {} reduction loop(s) and {} independent loop(s) split among them",
            rows.reductions, rows.parallel
        ),
    })
}

/// Whether the kernel `entry` works on its rows apart from other work-items (no local memory,
/// `goto` or atomics), and its helper functions neither ask for work-item indices nor store.
fn rows_stay_apart(parsed: &Parsed, kernel: Node<'_>, entry: &str) -> bool {
    let kernel_words: Vec<&str> = words(parsed.text_of(kernel)).collect();
    if kernel_words.iter().any(|w| {
        matches!(*w, "__local" | "local" | "goto")
            || w.starts_with("atomic_")
            || w.starts_with("atom_")
    }) {
        return false;
    }
    !parsed.other_functions(entry).into_iter().any(|helper| {
        words(parsed.text_of(helper)).any(|w| w.starts_with("get_") && w.ends_with("_id"))
            || descendants(helper).into_iter().any(|n| is_store(parsed, n))
    })
}

impl Rows<'_> {
    /// Edits each `get_global_id(0)` of `body` into `get_group_id(0)`: the former work-item's
    /// row becomes its work-group's. `None` where the body asks for another dimension, the
    /// global size or a group function, or never for `get_global_id(0)`.
    fn row_index_from_group(&mut self, body: Node<'_>) -> Option<()> {
        let parsed = self.parsed;
        let mut ids = 0;
        for node in descendants(body) {
            if node.kind() != "call_expression" {
                continue;
            }
            let name = callee(parsed, node)?;
            if GROUP_FUNCTIONS.contains(&name)
                || name.starts_with("work_group_")
                || name.starts_with("sub_group_")
                || name == "get_global_size"
            {
                return None;
            }
            if name == "get_global_id" {
                let arg = node.child_by_field_name("arguments")?.named_child(0)?;
                if parsed.text_of(arg).trim() != "0" {
                    return None;
                }
                let function = node.child_by_field_name("function")?;
                self.edits
                    .push((function.byte_range(), "get_group_id".to_owned()));
                ids += 1;
            }
        }
        (ids > 0).then_some(())
    }
    /// Rewrites the statements of a block the whole group runs.
    fn block(&mut self, block: Node<'_>) -> Option<()> {
        let mut cursor = block.walk();
        let statements: Vec<Node<'_>> = block.named_children(&mut cursor).collect();
        for statement in statements {
            self.statement(statement)?;
        }
        Some(())
    }

    /// Rewrites one statement the whole group runs.
    fn statement(&mut self, statement: Node<'_>) -> Option<()> {
        let parsed = self.parsed;
        let stores = descendants(statement)
            .into_iter()
            .any(|n| is_store(parsed, n));
        match statement.kind() {
            "comment" | "return_statement" => Some(()),
            "declaration" => (!stores).then_some(()),
            "compound_statement" => self.block(statement),
            "if_statement" => {
                let condition = statement.child_by_field_name("condition")?;
                if descendants(condition)
                    .into_iter()
                    .any(|n| is_store(parsed, n))
                {
                    return None;
                }
                let consequence = statement.child_by_field_name("consequence")?;
                let alternative = statement
                    .child_by_field_name("alternative")
                    .and_then(|a| a.named_child(0));
                let branches_are_blocks = consequence.kind() == "compound_statement"
                    && alternative.is_none_or(|a| a.kind() == "compound_statement");
                if branches_are_blocks {
                    self.block(consequence)?;
                    if let Some(a) = alternative {
                        self.block(a)?;
                    }
                    Some(())
                } else if stores {
                    self.only_first(statement)
                } else {
                    Some(())
                }
            }
            "for_statement" => {
                if let Some(accumulators) = self.reduction(statement) {
                    self.split_reduction(statement, &accumulators)
                } else if self.independent(statement) {
                    self.split(statement)?;
                    self.parallel += 1;
                    if stores {
                        self.barrier_after(statement, "CLK_GLOBAL_MEM_FENCE");
                    }
                    Some(())
                } else if stores {
                    // A sequential loop that stores: work-item 0 runs it, unless it also
                    // carries values out (a scan), which the other work-items would miss.
                    let outer = assigned(parsed, statement);
                    let inner = declared(parsed, statement);
                    if outer.iter().any(|n| !inner.contains(n)) {
                        return None;
                    }
                    self.only_first(statement)
                } else {
                    no_exit(statement).then_some(())
                }
            }
            "expression_statement" => {
                if stores {
                    self.only_first(statement)
                } else {
                    Some(())
                }
            }
            _ => (!stores && no_exit(statement)).then_some(()),
        }
    }

    /// Runs `statement` in work-item 0 only, then synchronises the group's view of global
    /// memory. Only for stores to global buffers: a private array written in work-item 0
    /// alone would hold garbage in the others.
    fn only_first(&mut self, statement: Node<'_>) -> Option<()> {
        if !no_exit(statement) || !self.stores_only_global(statement) {
            return None;
        }
        let r = statement.byte_range();
        self.edits
            .push((r.start..r.start, format!("if ({LID} == 0) {{ ")));
        self.edits.push((r.end..r.end, " }".to_owned()));
        self.barrier_after(statement, "CLK_GLOBAL_MEM_FENCE");
        Some(())
    }

    /// Whether every store in `node` is `p[…] = …` (or `op=`, `++`) on a global pointer
    /// parameter or a pointer declared from one.
    fn stores_only_global(&self, node: Node<'_>) -> bool {
        let parsed = self.parsed;
        descendants(node)
            .into_iter()
            .filter(|n| is_store(parsed, *n))
            .all(|n| {
                let Some(target) = store_target(n).map(strip_parens) else {
                    return false;
                };
                let pointer = target
                    .child_by_field_name("argument")
                    .filter(|p| p.kind() == "identifier")
                    .map(|p| parsed.text_of(p));
                target.kind() == "subscript_expression"
                    && pointer.is_some_and(|p| {
                        self.pointers.iter().any(|g| g == p)
                            || self.derived.iter().any(|(d, _)| d == p)
                    })
            })
    }

    fn barrier_after(&mut self, statement: Node<'_>, fence: &str) {
        let end = statement.end_byte();
        self.edits
            .push((end..end, format!("\n    barrier({fence});")));
    }

    /// The accumulators of a counted loop whose body only declares locals and updates
    /// accumulators declared outside it, each once, with an expression that reads none of
    /// them.
    fn reduction(&self, for_loop: Node<'_>) -> Option<Vec<Accumulator>> {
        let parsed = self.parsed;
        let counted = counted_loop(parsed, for_loop)?;
        let body = for_loop.child_by_field_name("body")?;
        let statements: Vec<Node<'_>> = if body.kind() == "compound_statement" {
            let mut c = body.walk();
            body.named_children(&mut c).collect()
        } else {
            vec![body]
        };
        let mut accumulators: Vec<(Accumulator, Node<'_>)> = Vec::new();
        let locals = declared(parsed, body);
        for s in statements {
            match s.kind() {
                "comment" => {}
                "declaration" => {
                    if descendants(s).into_iter().any(|n| {
                        is_store(parsed, n)
                            || matches!(n.kind(), "assignment_expression" | "update_expression")
                    }) {
                        return None;
                    }
                }
                "expression_statement" => {
                    let e = s.named_child(0)?;
                    let (acc, operand, combine) = reduction_update(parsed, e)?;
                    if acc == counted.var || locals.contains(&acc) {
                        return None;
                    }
                    let ty = self.type_of(&acc)?;
                    accumulators.push((
                        Accumulator {
                            name: acc,
                            ty,
                            combine,
                        },
                        operand,
                    ));
                }
                _ => return None,
            }
        }
        if accumulators.is_empty() {
            return None;
        }
        let names: HashSet<&str> = accumulators.iter().map(|(a, _)| a.name.as_str()).collect();
        if names.len() != accumulators.len() {
            return None;
        }
        // No operand reads an accumulator; the loop assigns nothing else declared outside it.
        for (_, operand) in &accumulators {
            if descendants(*operand)
                .into_iter()
                .any(|n| n.kind() == "identifier" && names.contains(parsed.text_of(n)))
            {
                return None;
            }
        }
        let outer_assigned: Vec<String> = assigned(parsed, body)
            .into_iter()
            .filter(|n| !names.contains(n.as_str()) && !locals.contains(n))
            .collect();
        if !outer_assigned.is_empty() || !no_exit(body) {
            return None;
        }
        Some(accumulators.into_iter().map(|(a, _)| a).collect())
    }

    /// The type of the scalar `name`, declared once in the kernel body.
    fn type_of(&self, name: &str) -> Option<String> {
        let mut found = self.declared_types.iter().filter(|(n, _)| n == name);
        let (_, ty) = found.next()?;
        if found.next().is_some() || !SCALAR_TYPES.contains(&ty.as_str()) {
            return None;
        }
        Some(ty.clone())
    }

    /// Splits a reduction loop among the group and combines its accumulators.
    fn split_reduction(&mut self, for_loop: Node<'_>, accumulators: &[Accumulator]) -> Option<()> {
        let start = for_loop.start_byte();
        let mut before = String::new();
        for a in accumulators {
            match a.combine {
                Combine::Sum => before.push_str(&format!("if ({LID} != 0) {} = 0; ", a.name)),
                Combine::Product => before.push_str(&format!("if ({LID} != 0) {} = 1; ", a.name)),
                Combine::Call(_) => {}
            }
        }
        if !before.is_empty() {
            self.edits.push((start..start, format!("{before}\n    ")));
        }
        self.split(for_loop)?;
        let mut after = String::new();
        for a in accumulators {
            let scratch = format!("kft_red_{}", a.ty);
            if !self.scratch.contains(&a.ty) {
                self.scratch.push(a.ty.clone());
            }
            let combined = match a.combine {
                Combine::Sum => format!("{scratch}[{LID}] + {scratch}[{LID} + kft_s]"),
                Combine::Product => format!("{scratch}[{LID}] * {scratch}[{LID} + kft_s]"),
                Combine::Call(f) => format!("{f}({scratch}[{LID}], {scratch}[{LID} + kft_s])"),
            };
            after.push_str(&format!(
                "\n    {scratch}[{LID}] = {acc};\n    barrier(CLK_LOCAL_MEM_FENCE);\n    for (int kft_s = {REDUCE_WG} / 2; kft_s > 0; kft_s >>= 1) {{\n        if ({LID} < kft_s) {scratch}[{LID}] = {combined};\n        barrier(CLK_LOCAL_MEM_FENCE);\n    }}\n    {acc} = {scratch}[0];\n    barrier(CLK_LOCAL_MEM_FENCE);",
                acc = a.name
            ));
        }
        let end = for_loop.end_byte();
        self.edits.push((end..end, after));
        self.reductions += 1;
        Some(())
    }

    /// Whether a counted loop's iterations are independent: it assigns nothing declared
    /// outside it, does not leave early, and stores only to `p[i]`, `p[E + i]` or `p[i + E]`
    /// of global pointer parameters `p` that it accesses at no other index and that no
    /// declaration of the kernel copies.
    fn independent(&self, for_loop: Node<'_>) -> bool {
        let parsed = self.parsed;
        let Some(counted) = counted_loop(parsed, for_loop) else {
            return false;
        };
        let Some(body) = for_loop.child_by_field_name("body") else {
            return false;
        };
        let locals = declared(parsed, body);
        if assigned(parsed, body).iter().any(|n| !locals.contains(n)) || !no_exit(body) {
            return false;
        }
        let nodes = descendants(body);
        let mut stored: Vec<(String, String)> = Vec::new();
        for n in &nodes {
            if !is_store(parsed, *n) {
                continue;
            }
            let Some(target) = store_target(*n) else {
                return false;
            };
            let Some((pointer, index)) = subscript(strip_parens(target)) else {
                return false;
            };
            let name = parsed.text_of(pointer).to_owned();
            let derived = self.derived.iter().any(|(d, _)| *d == name);
            if pointer.kind() != "identifier"
                || !(self.pointers.contains(&name) || derived)
                || !injective_in(parsed, index, &counted.var, &locals)
            {
                return false;
            }
            stored.push((name, parsed.text_of(index).to_owned()));
        }
        // Every other access of a stored pointer in the loop is at the same index.
        for n in &nodes {
            if n.kind() != "identifier" {
                continue;
            }
            let name = parsed.text_of(*n);
            let Some((_, index)) = stored.iter().find(|(p, _)| p == name) else {
                continue;
            };
            let same = n.parent().is_some_and(|s| {
                s.kind() == "subscript_expression"
                    && s.child_by_field_name("argument").map(|a| a.id()) == Some(n.id())
                    && s.child_by_field_name("index")
                        .is_some_and(|i| parsed.text_of(i) == index)
            });
            if !same {
                return false;
            }
        }
        // No other pointer into the same buffer is used in the loop (it could read what
        // another iteration stores).
        for (name, _) in &stored {
            let group = self.alias_group(name);
            let other = nodes.iter().any(|n| {
                n.kind() == "identifier" && {
                    let w = parsed.text_of(*n);
                    w != name && group.contains(w)
                }
            });
            if other {
                return false;
            }
        }
        true
    }

    /// The pointers into the buffer `name` points into: its global parameter and every
    /// pointer the kernel declares from one of them.
    fn alias_group(&self, name: &str) -> HashSet<String> {
        let base = self
            .derived
            .iter()
            .find(|(d, _)| d == name)
            .map_or(name, |(_, b)| b.as_str());
        let mut group: HashSet<String> = HashSet::from([base.to_owned(), name.to_owned()]);
        for (d, b) in &self.derived {
            if b == base {
                group.insert(d.clone());
            }
        }
        group
    }

    /// `i` from `A + lid`, by `REDUCE_WG`.
    fn split(&mut self, for_loop: Node<'_>) -> Option<()> {
        let counted = counted_loop(self.parsed, for_loop)?;
        let body = for_loop.child_by_field_name("body")?;
        let locals = declared(self.parsed, body);
        let contiguous = descendants(body).into_iter().any(|n| {
            n.kind() == "subscript_expression"
                && n.child_by_field_name("index")
                    .is_some_and(|i| injective_in(self.parsed, i, &counted.var, &locals))
        });
        if contiguous {
            self.contiguous += 1;
        }
        // Insertions around the start value: a rewrite inside it (`get_global_id`) stays.
        let (from, to) = (counted.start.start, counted.start.end);
        self.edits.push((from..from, "(".to_owned()));
        self.edits.push((to..to, format!(") + {LID}")));
        self.edits.push((
            counted.update.clone(),
            format!("{} += {REDUCE_WG}", counted.var),
        ));
        Some(())
    }
}

/// `for (int i = A; i < B; ++i)` (or `i = A`, `<=`, `i++`, `i += 1`) whose body does not
/// assign `i`.
fn counted_loop(parsed: &Parsed, for_loop: Node<'_>) -> Option<CountedLoop> {
    let init = for_loop.child_by_field_name("initializer")?;
    let (var, start) = match init.kind() {
        "declaration" => {
            let d = init.child_by_field_name("declarator")?;
            let mut c = init.walk();
            let declarators = init.children_by_field_name("declarator", &mut c).count();
            if d.kind() != "init_declarator" || declarators != 1 {
                return None;
            }
            let name = d.child_by_field_name("declarator")?;
            let value = d.child_by_field_name("value")?;
            (
                (name.kind() == "identifier").then(|| parsed.text_of(name))?,
                value,
            )
        }
        "assignment_expression" => {
            let left = init.child_by_field_name("left")?;
            let op = init.child_by_field_name("operator")?;
            if left.kind() != "identifier" || parsed.text_of(op) != "=" {
                return None;
            }
            (parsed.text_of(left), init.child_by_field_name("right")?)
        }
        _ => return None,
    };
    let condition = for_loop.child_by_field_name("condition")?;
    let op = condition.child_by_field_name("operator")?;
    let left = condition.child_by_field_name("left")?;
    if condition.kind() != "binary_expression"
        || !matches!(parsed.text_of(op), "<" | "<=")
        || left.kind() != "identifier"
        || parsed.text_of(left) != var
    {
        return None;
    }
    let update = for_loop.child_by_field_name("update")?;
    let steps_by_one = match update.kind() {
        "update_expression" => {
            update
                .child_by_field_name("operator")
                .is_some_and(|o| parsed.text_of(o) == "++")
                && update
                    .child_by_field_name("argument")
                    .is_some_and(|a| parsed.text_of(a) == var)
        }
        "assignment_expression" => {
            update
                .child_by_field_name("left")
                .is_some_and(|l| parsed.text_of(l) == var)
                && update
                    .child_by_field_name("operator")
                    .is_some_and(|o| parsed.text_of(o) == "+=")
                && update
                    .child_by_field_name("right")
                    .is_some_and(|r| parsed.text_of(r).trim() == "1")
        }
        _ => false,
    };
    let body = for_loop.child_by_field_name("body")?;
    if !steps_by_one || assigned(parsed, body).contains(var) {
        return None;
    }
    // The bound is read every iteration: the loop must not change it.
    let right = condition.child_by_field_name("right")?;
    let changed = assigned(parsed, body);
    if words(parsed.text_of(right)).any(|w| changed.contains(w)) {
        return None;
    }
    Some(CountedLoop {
        var: var.to_owned(),
        start: start.byte_range(),
        update: update.byte_range(),
    })
}

/// `acc += e`, `acc -= e`, `acc *= e`, `acc = f(acc, e)` / `f(e, acc)`: the accumulator, the
/// operand and how partials combine.
fn reduction_update<'t>(parsed: &Parsed, e: Node<'t>) -> Option<(String, Node<'t>, Combine)> {
    if e.kind() != "assignment_expression" {
        return None;
    }
    let left = e.child_by_field_name("left")?;
    let right = e.child_by_field_name("right")?;
    if left.kind() != "identifier" {
        return None;
    }
    let acc = parsed.text_of(left).to_owned();
    let combine = match parsed.text_of(e.child_by_field_name("operator")?) {
        "+=" | "-=" => Combine::Sum,
        "*=" => Combine::Product,
        "=" => {
            let right = strip_parens(right);
            if right.kind() != "call_expression" {
                return None;
            }
            let f = match callee(parsed, right)? {
                "fmax" => "fmax",
                "fmin" => "fmin",
                "max" => "max",
                "min" => "min",
                _ => return None,
            };
            let args = right.child_by_field_name("arguments")?;
            if args.named_child_count() != 2 {
                return None;
            }
            let (a, b) = (args.named_child(0)?, args.named_child(1)?);
            let operand = if parsed.text_of(a).trim() == acc {
                b
            } else if parsed.text_of(b).trim() == acc {
                a
            } else {
                return None;
            };
            return Some((acc, operand, Combine::Call(f)));
        }
        _ => return None,
    };
    Some((acc, right, combine))
}

/// Whether `index` is `i`, `E + i` or `i + E` with `E` free of `i` and of the loop's locals.
fn injective_in(parsed: &Parsed, index: Node<'_>, var: &str, locals: &HashSet<String>) -> bool {
    let index = strip_parens(index);
    if index.kind() == "identifier" {
        return parsed.text_of(index) == var;
    }
    if index.kind() != "binary_expression"
        || index
            .child_by_field_name("operator")
            .is_none_or(|o| parsed.text_of(o) != "+")
    {
        return false;
    }
    let (Some(l), Some(r)) = (
        index.child_by_field_name("left"),
        index.child_by_field_name("right"),
    ) else {
        return false;
    };
    let is_var = |n: Node<'_>| {
        let n = strip_parens(n);
        n.kind() == "identifier" && parsed.text_of(n) == var
    };
    let free = |n: Node<'_>| {
        words(parsed.text_of(n)).all(|w| w != var && !locals.contains(w))
            && !descendants(n).into_iter().any(|d| {
                matches!(
                    d.kind(),
                    "call_expression" | "assignment_expression" | "update_expression"
                )
            })
    };
    (is_var(l) && free(r)) || (is_var(r) && free(l))
}

fn strip_parens(mut n: Node<'_>) -> Node<'_> {
    while n.kind() == "parenthesized_expression" {
        match n.named_child(0) {
            Some(inner) => n = inner,
            None => break,
        }
    }
    n
}

/// The lvalue an assignment or update writes.
fn store_target(n: Node<'_>) -> Option<Node<'_>> {
    match n.kind() {
        "assignment_expression" => n.child_by_field_name("left"),
        "update_expression" => n.child_by_field_name("argument"),
        _ => None,
    }
}

/// Whether `n` writes memory: an assignment or update of anything but a plain variable, or
/// a call of a built-in that stores (`vstoreN`, `write_image…`).
fn is_store(parsed: &Parsed, n: Node<'_>) -> bool {
    if n.kind() == "call_expression" {
        return callee(parsed, n).is_none_or(|f| {
            f.starts_with("vstore") || f.starts_with("write_image") || f.starts_with("async_")
        });
    }
    store_target(n).is_some_and(|t| strip_parens(t).kind() != "identifier")
}

/// The plain variables `node` assigns or updates.
fn assigned(parsed: &Parsed, node: Node<'_>) -> HashSet<String> {
    descendants(node)
        .into_iter()
        .filter_map(store_target)
        .map(strip_parens)
        .filter(|t| t.kind() == "identifier")
        .map(|t| parsed.text_of(t).to_owned())
        .collect()
}

/// The variables declared inside `node` (its for-loop header included).
fn declared(parsed: &Parsed, node: Node<'_>) -> HashSet<String> {
    descendants(node)
        .into_iter()
        .filter(|n| n.kind() == "declaration")
        .flat_map(|d| declared_names(parsed, d))
        .collect()
}

fn declared_names(parsed: &Parsed, declaration: Node<'_>) -> Vec<String> {
    let mut c = declaration.walk();
    declaration
        .children_by_field_name("declarator", &mut c)
        .filter_map(|d| {
            let mut d = d;
            while d.kind() != "identifier" {
                d = d.child_by_field_name("declarator")?;
            }
            Some(parsed.text_of(d).to_owned())
        })
        .collect()
}

/// Every declared name in `body` with its declaration's type (`const` and other qualifiers
/// left out; pointers are not listed).
fn declared_types(parsed: &Parsed, body: Node<'_>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for d in descendants(body)
        .into_iter()
        .filter(|n| n.kind() == "declaration")
    {
        let Some(ty) = d.child_by_field_name("type") else {
            continue;
        };
        let ty = parsed
            .text_of(ty)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let mut c = d.walk();
        for declarator in d.children_by_field_name("declarator", &mut c) {
            let plain = match declarator.kind() {
                "identifier" => Some(declarator),
                "init_declarator" => declarator
                    .child_by_field_name("declarator")
                    .filter(|n| n.kind() == "identifier"),
                _ => None,
            };
            match plain {
                Some(name) => out.push((parsed.text_of(name).to_owned(), ty.clone())),
                // A pointer or array of the same name still counts as a declaration.
                None => out.extend(
                    declared_names(parsed, d)
                        .into_iter()
                        .map(|n| (n, "*".to_owned())),
                ),
            }
        }
    }
    out
}

/// The pointers declared in `body` from exactly one of the global pointer parameters
/// `pointers`, declared once and never assigned, with that parameter.
fn derived_pointers(
    parsed: &Parsed,
    body: Node<'_>,
    pointers: &[String],
    declared_types: &[(String, String)],
) -> Vec<(String, String)> {
    let changed = assigned(parsed, body);
    let mut out = Vec::new();
    for n in descendants(body) {
        let Some((d, value)) = initialized(n) else {
            continue;
        };
        let Some(inner) = d.child_by_field_name("declarator") else {
            continue;
        };
        if d.kind() != "pointer_declarator" || inner.kind() != "identifier" {
            continue;
        }
        let name = parsed.text_of(inner).to_owned();
        let bases: HashSet<&str> = words(parsed.text_of(value))
            .filter(|w| pointers.iter().any(|p| p == w))
            .collect();
        let once = declared_types.iter().filter(|(d, _)| *d == name).count() == 1;
        if bases.len() == 1 && once && !changed.contains(&name) {
            let base = bases.into_iter().next().unwrap_or_default();
            out.push((name, base.to_owned()));
        }
    }
    out
}

/// Whether `node` has no `return`, `break` or `goto` (a `break` of an inner loop or switch
/// included, for simplicity).
fn no_exit(node: Node<'_>) -> bool {
    !descendants(node).into_iter().any(|n| {
        matches!(
            n.kind(),
            "return_statement" | "break_statement" | "goto_statement"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(entry: &str, global: &str) -> Manifest {
        let text = format!(
            "entry = \"{entry}\"\nlanguage = \"opencl\"\n[params]\nWG = [64]\n[launch]\nglobal = [\"{global}\"]\nlocal = [\"WG\"]\n"
        );
        Manifest::parse(&text, "<test>", None).unwrap()
    }

    /// The statistics kernel of a sequence (two kernels in one source): the other kernel,
    /// which it does not call, is not taken for a helper (it asks for its work-item index and
    /// stores), so the statistics kernel becomes a group reduction.
    #[test]
    fn a_sequences_statistics_kernel_beside_another_kernel_becomes_a_group_reduction() {
        let stats = "__kernel void row_stats(const int ROWS, const int COLS, __global const float* X, __global float* Y, __global float* STATS) {\n    const int r = get_global_id(0);\n    if (r >= ROWS) {\n        return;\n    }\n    __global const float* x = X + (long)r * COLS;\n    float m = -INFINITY;\n    for (int c = 0; c < COLS; ++c) {\n        m = fmax(m, x[c]);\n    }\n    float s = 0.0f;\n    for (int c = 0; c < COLS; ++c) {\n        s += exp(x[c] - m);\n    }\n    STATS[2 * r] = m;\n    STATS[2 * r + 1] = s;\n}\n";
        let normalise = "__kernel void normalise(const int ROWS, const int COLS, __global const float* X, __global float* Y, __global float* STATS) {\n    const int c = get_global_id(0);\n    const int r = get_global_id(1);\n    if (r >= ROWS || c >= COLS) {\n        return;\n    }\n    Y[r * COLS + c] = exp(X[r * COLS + c] - STATS[2 * r]) / STATS[2 * r + 1];\n}\n";
        let m = manifest("row_stats", "((ROWS + WG - 1) / WG) * WG");
        assert!(group_reduce(stats, &m).is_some(), "alone");
        let both = format!("{stats}\n{normalise}");
        let r = group_reduce(&both, &m).unwrap();
        assert!(
            r.text.contains("const int r = get_group_id(0);"),
            "{}",
            r.text
        );
        assert!(
            r.text.contains("const int r = get_global_id(1);"),
            "the other kernel is unchanged"
        );
    }

    /// A per-row log-softmax (KernelBench 24 as a user writes it): the max and sum loops
    /// become split reductions with a tree combine, the output loop is split, nothing runs in
    /// work-item 0 only, and the launch is one group per row.
    #[test]
    fn log_softmax_rows_become_group_reductions() {
        let text = "__kernel void lsm(__global const float* x, __global float* out, const int rows, const int dim) {\n    const int row = get_global_id(0);\n    if (row >= rows) return;\n    float m = -INFINITY;\n    for (int i = 0; i < dim; ++i) {\n        m = fmax(m, x[row * dim + i]);\n    }\n    float sum = 0.0f;\n    for (int i = 0; i < dim; ++i) {\n        sum += exp(x[row * dim + i] - m);\n    }\n    const float lse = m + log(sum);\n    for (int i = 0; i < dim; ++i) {\n        out[row * dim + i] = x[row * dim + i] - lse;\n    }\n}\n";
        let r = group_reduce(text, &manifest("lsm", "((rows + WG - 1) / WG) * WG")).unwrap();
        assert!(
            r.note.contains("2 reduction loop(s) and 1 independent"),
            "{}",
            r.note
        );
        assert!(r.text.contains("__local float kft_red_float[REDUCE_WG];"));
        assert!(r.text.contains("const int row = get_group_id(0);"));
        assert!(r
            .text
            .contains("for (int i = (0) + kft_lid; i < dim; i += REDUCE_WG)"));
        assert!(r
            .text
            .contains("fmax(kft_red_float[kft_lid], kft_red_float[kft_lid + kft_s])"));
        assert!(r.text.contains("if (kft_lid != 0) sum = 0;"));
        assert!(
            !r.text.contains("if (kft_lid != 0) m ="),
            "max is idempotent"
        );
        assert!(!r.text.contains("if (kft_lid == 0)"), "{}", r.text);
        assert_eq!(
            r.global.unwrap(),
            ["(((rows + WG - 1) / WG) * WG) * REDUCE_WG"]
        );
        assert_eq!(r.local.unwrap(), ["REDUCE_WG"]);
        // The child parses, and is not transformed twice.
        let parsed = Parsed::opencl(&r.text).unwrap();
        assert!(parsed.function("lsm").is_some());
        assert!(group_reduce(&r.text, &manifest("lsm", "x")).is_none());
    }

    /// A row sum that stores its result at the top level: the store runs in work-item 0
    /// only, after the combine. The shipped KernelBench 47 (a sum over a middle dimension:
    /// its loop strides through memory) is left one work-item per output.
    #[test]
    fn a_reduction_stores_its_result_once() {
        let text = "__kernel void k(__global const float* x, __global float* out, const int n) {\n    const int o = get_global_id(0);\n    float s = 0.0f;\n    for (int i = 0; i < n; ++i) { s += x[o * n + i]; }\n    out[o] = s;\n}\n";
        let r = group_reduce(text, &manifest("k", "n")).unwrap();
        assert!(r.note.contains("1 reduction loop(s) and 0"), "{}", r.note);
        assert!(
            r.text.contains("if (kft_lid == 0) { out[o] = s; }"),
            "{}",
            r.text
        );
        let combine = r.text.find("s = kft_red_float[0];").unwrap();
        assert!(combine < r.text.find("out[o] = s").unwrap());
        let strided = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tasks/kernelbench/47_Sum_reduction_over_a_dimension/naive.cl"
        ))
        .unwrap();
        assert!(group_reduce(&strided, &manifest("sum_dim1", "n")).is_none());
    }

    /// Row pointers (KernelBench 23 as shipped: `y = out + r * dim`, stores `y[c]`): the
    /// output loop is split too; a second pointer into the output read in the loop keeps it
    /// sequential, in work-item 0.
    #[test]
    fn stores_through_a_row_pointer_are_split() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tasks/kernelbench/23_Softmax/naive.cl"
        ))
        .unwrap();
        let r = group_reduce(&text, &manifest("softmax_rows", "n")).unwrap();
        assert!(
            r.note.contains("2 reduction loop(s) and 1 independent"),
            "{}",
            r.note
        );
        assert!(!r.text.contains("if (kft_lid == 0)"), "{}", r.text);
        let aliased = text.replace("y[c] = exp(", "y[c] = out[c] + exp(");
        let r = group_reduce(&aliased, &manifest("softmax_rows", "n")).unwrap();
        assert!(
            r.note.contains("2 reduction loop(s) and 0 independent"),
            "{}",
            r.note
        );
        assert!(
            r.text.contains("if (kft_lid == 0) { for (int c = 0;"),
            "{}",
            r.text
        );
    }

    /// What is left alone: a sequential scan (its loop carries a value and stores), a loop
    /// whose stores are not one element per iteration, a kernel that synchronises already,
    /// a private array filled before the row (work-item 0 alone would fill it), and a
    /// two-dimensional launch.
    #[test]
    fn non_reductions_are_left_alone() {
        let scan = "__kernel void scan(__global const float* x, __global float* out, const int n) {\n    const int r = get_global_id(0);\n    float acc = 0.0f;\n    for (int i = 0; i < n; ++i) {\n        acc += x[r * n + i];\n        out[r * n + i] = acc;\n    }\n}\n";
        assert!(group_reduce(scan, &manifest("scan", "n")).is_none());
        let shifted = "__kernel void k(__global const float* x, __global float* out, const int n) {\n    const int r = get_global_id(0);\n    for (int i = 0; i < n; ++i) {\n        out[r + 2 * i] = x[i];\n    }\n}\n";
        assert!(group_reduce(shifted, &manifest("k", "n")).is_none());
        let neighbour = "__kernel void k(__global const float* x, __global float* out, const int n) {\n    const int r = get_global_id(0);\n    for (int i = 1; i < n; ++i) {\n        out[r * n + i] = out[r * n + i - 1] + x[i];\n    }\n}\n";
        assert!(group_reduce(neighbour, &manifest("k", "n")).is_none());
        let synced = "__kernel void k(__global const float* x, __global float* out, const int n) {\n    const int r = get_global_id(0);\n    float s = 0.0f;\n    for (int i = 0; i < n; ++i) { s += x[i]; }\n    barrier(CLK_GLOBAL_MEM_FENCE);\n    out[r] = s;\n}\n";
        assert!(group_reduce(synced, &manifest("k", "n")).is_none());
        let private = "__kernel void k(__global const float* x, __global float* out, const int n) {\n    const int r = get_global_id(0);\n    float w[4];\n    for (int j = 0; j < 4; ++j) { w[j] = x[j]; }\n    float s = 0.0f;\n    for (int i = 0; i < n; ++i) { s += w[i % 4] * x[r * n + i]; }\n    out[r] = s;\n}\n";
        assert!(group_reduce(private, &manifest("k", "n")).is_none());
        let sum = "__kernel void k(__global const float* x, __global float* out, const int n) {\n    const int r = get_global_id(0);\n    float s = 0.0f;\n    for (int i = 0; i < n; ++i) { s += x[r * n + i]; }\n    out[r] = s;\n}\n";
        assert!(group_reduce(sum, &manifest("k", "n")).is_some());
        let two_d = Manifest::parse(
            "entry = \"k\"\nlanguage = \"opencl\"\n[launch]\nglobal = [\"n\", \"n\"]\n",
            "<test>",
            None,
        )
        .unwrap();
        assert!(group_reduce(sum, &two_d).is_none());
    }
}
