//! Structural facts about preprocessed kernel text that a single regular expression cannot
//! express: kernel entry points and their parameters, loops and their extents, private and
//! local arrays, atomics and group collectives. Each fact backs one [`Feature`](crate::Feature).

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use crate::source::Macros;

/// Facts about one preprocessed source.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// Number of kernel entry points (OpenCL `__kernel`, CUDA `__global__`, SYCL free-function
    /// kernels and `parallel_for` / `single_task` submissions).
    pub(crate) kernels: usize,
    /// Two or more non-nested loops sweep the same data-sized range.
    pub(crate) repeated_sweeps: Option<String>,
    /// Private arrays (more than one element) updated in place (`acc[i] += …`,
    /// `acc[i] = fma(…, acc[i])`).
    pub(crate) accumulator_arrays: Vec<String>,
    /// Private arrays (more than one element) loaded by plain copies from local arrays.
    pub(crate) registers_from_local: Vec<String>,
    /// Private values loaded from global memory in two places (prologue and loop) and stored
    /// into local arrays: software-pipelined prefetching through registers.
    pub(crate) register_prefetch: Vec<String>,
    /// A loop accumulates both `v` and `v * v`.
    pub(crate) single_sweep_moments: bool,
    /// A running sum is rescaled by `exp(a - b)` (online softmax).
    pub(crate) online_rescale: bool,
    /// Atomics whose target is not local memory.
    pub(crate) global_atomics: Vec<String>,
    /// SYCL group algorithms applied to a work-group.
    pub(crate) work_group_collectives: bool,
    /// SYCL group algorithms applied to a sub-group.
    pub(crate) sub_group_collectives: bool,
}

/// The fixed regular expressions of the analysis, compiled once.
struct Internal {
    opencl_head: Regex,
    cuda_head: Regex,
    sycl_head: Regex,
    sycl_submit: Regex,
    for_loop: Regex,
    assignment: Regex,
    runtime_size: Regex,
    ident: Regex,
    token: Regex,
    private_array: Regex,
    local_qualifiers: Regex,
    local_array: Regex,
    local_pointer: Regex,
    sycl_local: Regex,
    alias: Regex,
    element_assignment: Regex,
    indexed_read: Regex,
    local_store: Regex,
    sum_of_squares: Regex,
    plain_sum: Regex,
    exp_var: Regex,
    rescale: Regex,
    rescale_in_place: Regex,
    c_atomic: Regex,
    atomic_ref: Regex,
    sub_group_var: Regex,
    collective: Regex,
    trailing_ident: Regex,
}

const EXP: &str = r"(?:sycl::|std::)?(?:native_|half_|__)?exp2?f?\s*\(\s*[\w.]+\s*-\s*[\w.]+\s*\)";

impl Internal {
    fn new() -> Result<Self, regex::Error> {
        let r = Regex::new;
        Ok(Internal {
            opencl_head: r(r"(?:\b__kernel\b|\bkernel\b)[^;{}]*?\bvoid\s+(\w+)\s*\(")?,
            cuda_head: r(
                r"\b__global__\b[^;{}]*?\bvoid\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(",
            )?,
            sycl_head: r(
                r"\bSYCL_EXT_ONEAPI_FUNCTION_PROPERTY\s*\([^;{}]*?\)\s*\)[^;{}]*?\bvoid\s+(\w+)\s*\(",
            )?,
            sycl_submit: r(r"\.\s*(?:parallel_for|single_task)\s*[<(]")?,
            for_loop: r(r"\bfor\s*\(")?,
            assignment: r(r"\b(\w+)\s*=\s*([^;=][^;]*);")?,
            runtime_size: r(
                r"\b(?:get_(?:global|local)_size|get_num_groups|get_(?:global|local|group)_range|get_max_sub_group_size|get_sub_group_size|get_num_sub_groups|blockDim|gridDim)\b",
            )?,
            ident: r(r"\b[A-Za-z_]\w*\b")?,
            token: r(r"\w+|\S")?,
            private_array: r(
                r"(?P<prefix>[^;{}()]*?)\b(?P<ty>[A-Za-z_][\w:]*(?:\s*<[^;<>]*>)?)\s+(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\[\];]+\]\s*)+)",
            )?,
            local_qualifiers: r(
                r"\b(?:__local|local|__shared__|__global|global|__constant|constant|__constant__|__device__|static|extern)\b",
            )?,
            local_array: r(r"(?:\b__local\b|\blocal\b|\b__shared__)[^;{}()]*?(\w+)\s*\[")?,
            local_pointer: r(
                r"(?:\b__local\b|\blocal\b)\s+[\w\s]*?\*\s*(?:(?:restrict|const|volatile)\s+)*(\w+)",
            )?,
            sycl_local: r(
                r"(?:\b(\w+)\s*=\s*\*?\s*[\w:]*(?:group_local_memory(?:_for_overwrite)?\s*<|get_work_group_scratch_memory\s*\()|\b(?:work_group_static|local_accessor)\s*<[^;]*?>\s*(\w+)\s*[;=({,)])",
            )?,
            alias: r(
                r"\b(\w+)\s*=\s*\*?\s*(\w+)\s*(?:\.\s*(?:get|get_pointer|get_multi_ptr)\s*(?:<[^;]*?>)?\s*\(\s*\)\s*)?;",
            )?,
            element_assignment: r(
                r"\b(\w+)\s*((?:\[[^\[\];]*\]\s*)+)(\+=|-=|\*=|==|=)\s*([^;]*);",
            )?,
            indexed_read: r(r"^(?:\(\s*\w+\s*\)\s*)?(\w+)((?:\s*\[[^\[\]]*\])+)$")?,
            local_store: r(r"\b(\w+)\s*(?:\[[^\[\];]*\]\s*)+=\s*(\w+)\s*(?:\[[^\[\];]*\]\s*)*;")?,
            sum_of_squares: r(r"\+=\s*([\w.]+(?:\[[^\]]*\])?)\s*\*\s*([\w.]+(?:\[[^\]]*\])?)\s*;")?,
            plain_sum: r(r"\+=\s*([\w.]+(?:\[[^\]]*\])?)\s*;")?,
            exp_var: r(&format!(r"\b(\w+)\s*=\s*{EXP}\s*;"))?,
            rescale: r(&format!(
                r"(?P<lhs>\b[\w.]+)\s*=\s*(?P<rhs>[\w.]+)\s*\*\s*(?:{EXP}|(?P<var>\w+)\b)"
            ))?,
            rescale_in_place: r(&format!(r"\b[\w.]+\s*\*=\s*(?:{EXP}|(?P<var>\w+)\s*;)"))?,
            c_atomic: r(
                r"\b(?:atomic_(?:add|sub|inc|dec|xchg|cmpxchg|min|max|and|or|xor|fetch_\w+|store\w*|exchange\w*|compare_exchange\w*)|atom_\w+|atomic(?:Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor)(?:_system)?)\s*\(\s*(?:\([^()]*\)\s*)?&?\s*(\w+)",
            )?,
            atomic_ref: r(r"\batomic_ref\s*<([^;]*?)>\s*(\w+)\s*[({]\s*\*?\s*(\w+)")?,
            sub_group_var: r(r"\b(\w+)\s*=\s*[^;]*\bget_sub_group\s*\(|\bsub_group\s+(\w+)\b")?,
            collective: r(
                r"\b(?:reduce_over_group|inclusive_scan_over_group|exclusive_scan_over_group|group_broadcast|any_of_group|all_of_group|none_of_group|group_barrier|joint_reduce|joint_any_of|joint_all_of|joint_none_of|joint_exclusive_scan|joint_inclusive_scan)\s*\(\s*([^,)]*)",
            )?,
            trailing_ident: r(r"(\w+)\s*(?:\[[^\]]*\]\s*)*$")?,
        })
    }
}

static INTERNAL: LazyLock<Result<Internal, regex::Error>> = LazyLock::new(Internal::new);

/// The compiled internal expressions, or the (cloned) compile error.
fn internal() -> Result<&'static Internal, regex::Error> {
    INTERNAL.as_ref().map_err(Clone::clone)
}

/// Words that can precede `name[…]` without declaring an array.
const NOT_TYPES: [&str; 14] = [
    "return",
    "else",
    "case",
    "goto",
    "sizeof",
    "new",
    "delete",
    "throw",
    "do",
    "typedef",
    "using",
    "co_return",
    "co_yield",
    "operator",
];

/// A `for` loop: its normalised condition, whether it runs over a data-sized range, and the
/// byte range of its body.
#[derive(Debug, Clone)]
struct Loop {
    condition: String,
    data: bool,
    body: Range<usize>,
}

/// Index of the bracket matching the opening one at `open` (`(`/`)`, `{`/`}`), or the end.
fn matching(text: &[u8], open: usize) -> usize {
    let (o, c) = match text[open] {
        b'(' => (b'(', b')'),
        b'{' => (b'{', b'}'),
        _ => (b'[', b']'),
    };
    let mut depth = 0usize;
    for (i, &b) in text.iter().enumerate().skip(open) {
        if b == o {
            depth += 1;
        } else if b == c {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    text.len()
}

/// Splits `s` at top-level occurrences of `sep` (outside parentheses, brackets and braces,
/// and outside angle brackets when `angles`: template arguments in a parameter list).
fn split_top(s: &str, sep: u8, angles: bool) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'<' if angles => depth += 1,
            b'>' if angles => depth -= 1,
            _ if b == sep && depth <= 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// If `rhs` is a plain load of one array element — `X[i][j]`, `(float)X[i]`, or one call
/// wrapping it such as `VLOAD(&X[i])` / `vload4(0, &X[i])` — the array's name.
fn plain_load<'t>(re: &Internal, rhs: &'t str) -> Option<&'t str> {
    if let Some(c) = re.indexed_read.captures(rhs) {
        return c.get(1).map(|m| m.as_str());
    }
    // One call around the access: `f(…)` with no operator outside its parentheses.
    let open = rhs.find('(')?;
    let callee = rhs[..open].trim();
    if callee.is_empty()
        || !callee
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == ':')
    {
        return None;
    }
    if matching(rhs.as_bytes(), open) + 1 != rhs.len() {
        return None;
    }
    let args = &rhs[open + 1..rhs.len() - 1];
    let mut names = split_top(args, b',', false).into_iter().filter_map(|a| {
        let a = a.trim().trim_start_matches('&').trim_start();
        re.indexed_read
            .captures(a)
            .and_then(|c| c.get(1))
            .map(|m| m.as_str())
    });
    let first = names.next()?;
    names.next().is_none().then_some(first)
}

/// Analyses preprocessed text. `macros` evaluates array extents (undefined names unknown).
pub(crate) fn analyse(text: &str, macros: &Macros) -> Result<Facts, regex::Error> {
    let re = internal()?;
    let mut sizes = macros.clone();
    sizes.undefined_is_zero = false;

    let (heads, mut data_names) = kernel_heads(re, text);
    let kernels = heads + re.sycl_submit.find_iter(text).count();
    let raw_loops = raw_loops(re, text);
    // Without kernel heads (a SYCL submission) there are no parameters to tell sizes by:
    // the names loops compare against stand in for them.
    if heads == 0 {
        data_names.extend(loop_bound_names(re, &raw_loops, &sizes));
    }
    spread_data_names(re, text, &mut data_names);
    let loops = classify_loops(re, raw_loops, &data_names);
    let repeated_sweeps = repeated_sweep(&loops);

    let local_names = local_names(re, text);
    let private = private_arrays(re, text, &sizes);
    let uses = private_array_uses(re, text, &private, &local_names);
    let register_prefetch = register_prefetch(re, text, &local_names, &uses.global_loads);
    let (work_group_collectives, sub_group_collectives) = collectives(re, text);

    Ok(Facts {
        kernels,
        repeated_sweeps,
        accumulator_arrays: uses.accumulator_arrays,
        registers_from_local: uses.registers_from_local,
        register_prefetch,
        single_sweep_moments: single_sweep_moments(re, text, &loops),
        online_rescale: online_rescale(re, text),
        global_atomics: global_atomics(re, text, &local_names),
        work_group_collectives,
        sub_group_collectives,
    })
}

/// Counts the kernel entry points with a head (OpenCL, CUDA, SYCL free functions) and
/// collects their scalar parameters' names, which hold run-time sizes.
fn kernel_heads(re: &Internal, text: &str) -> (usize, HashSet<String>) {
    let bytes = text.as_bytes();
    let mut kernels = 0;
    let mut data_names: HashSet<String> = HashSet::new();
    for head in [&re.opencl_head, &re.cuda_head, &re.sycl_head] {
        for m in head.find_iter(text) {
            kernels += 1;
            let open = m.end() - 1;
            let close = matching(bytes, open).min(text.len());
            let params = &text[(open + 1).min(close)..close];
            // Scalar parameters hold sizes; pointers, arrays and accessors hold the data.
            for p in split_top(params, b',', true) {
                if p.contains(['*', '[', '&']) || p.contains("accessor") {
                    continue;
                }
                if let Some(c) = re.trailing_ident.captures(p.trim()) {
                    data_names.insert(c[1].to_owned());
                }
            }
        }
    }
    (kernels, data_names)
}

/// A `for` loop as found, before its condition is judged: its variable, its condition and
/// the byte range of its body.
struct RawLoop {
    var: String,
    cond: String,
    body: Range<usize>,
}

/// Every well-formed `for` loop of the text (three header clauses, a closed header).
fn raw_loops(re: &Internal, text: &str) -> Vec<RawLoop> {
    let bytes = text.as_bytes();
    let mut raw_loops = Vec::new();
    for m in re.for_loop.find_iter(text) {
        let open = m.end() - 1;
        let close = matching(bytes, open);
        if close >= text.len() {
            continue;
        }
        let header = &text[open + 1..close];
        let parts = split_top(header, b';', false);
        if parts.len() != 3 {
            continue;
        }
        let (init, cond) = (parts[0], parts[1]);
        let var = re
            .assignment
            .captures(&format!("{init};"))
            .map(|c| c[1].to_owned())
            .or_else(|| re.ident.find(cond).map(|m| m.as_str().to_owned()))
            .unwrap_or_default();
        // Body: a braced block, or one statement.
        let mut start = close + 1;
        while start < bytes.len() && bytes[start].is_ascii_whitespace() {
            start += 1;
        }
        let end = if start < bytes.len() && bytes[start] == b'{' {
            matching(bytes, start)
        } else {
            statement_end(bytes, start)
        };
        raw_loops.push(RawLoop {
            var,
            cond: cond.to_owned(),
            body: start..end.min(text.len()),
        });
    }
    raw_loops
}

/// The end of the single statement starting at `start` (a loop body without braces): its
/// `;`, or the `}` closing the block it is in.
fn statement_end(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0i32;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        match b {
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => {
                depth -= 1;
                if depth == 0 && b == b'}' {
                    return i;
                }
            }
            b';' if depth <= 0 => return i,
            _ => {}
        }
    }
    bytes.len()
}

/// The names loop conditions compare against that are neither the loop's variable nor a
/// constant (a macro with a value, or an upper-case name): run-time sizes.
fn loop_bound_names(re: &Internal, raw_loops: &[RawLoop], sizes: &Macros) -> Vec<String> {
    let mut names = Vec::new();
    for l in raw_loops {
        for id in re.ident.find_iter(&l.cond) {
            let id = id.as_str();
            let constant = sizes.eval(id).is_some()
                || id
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if id != l.var && !constant {
                names.push(id.to_owned());
            }
        }
    }
    names
}

/// Adds the names assigned from run-time sizes (or from names already known to hold them),
/// a few rounds deep.
fn spread_data_names(re: &Internal, text: &str, data_names: &mut HashSet<String>) {
    for _ in 0..4 {
        let mut grew = false;
        for c in re.assignment.captures_iter(text) {
            let (name, rhs) = (&c[1], &c[2]);
            if data_names.contains(name) {
                continue;
            }
            let from_data = re.runtime_size.is_match(rhs)
                || re
                    .ident
                    .find_iter(rhs)
                    .any(|id| data_names.contains(id.as_str()));
            if from_data {
                data_names.insert(name.to_owned());
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
}

/// Judges each loop: data-sized when its condition involves a run-time size; its condition
/// normalised (tokens, the loop variable as `$`) so that sweeps of one range compare equal.
fn classify_loops(
    re: &Internal,
    raw_loops: Vec<RawLoop>,
    data_names: &HashSet<String>,
) -> Vec<Loop> {
    raw_loops
        .into_iter()
        .map(|RawLoop { var, cond, body }| {
            let data = re.runtime_size.is_match(&cond)
                || re
                    .ident
                    .find_iter(&cond)
                    .any(|id| id.as_str() != var && data_names.contains(id.as_str()));
            let condition = re
                .token
                .find_iter(&cond)
                .map(|t| if t.as_str() == var { "$" } else { t.as_str() })
                .collect::<Vec<_>>()
                .join(" ");
            Loop {
                condition,
                data,
                body,
            }
        })
        .collect()
}

/// The condition of two data-sized loops, neither inside the other, that sweep the same range.
fn repeated_sweep(loops: &[Loop]) -> Option<String> {
    let nested = |a: &Range<usize>, b: &Range<usize>| {
        (a.start <= b.start && b.end <= a.end) || (b.start <= a.start && a.end <= b.end)
    };
    for (i, a) in loops.iter().enumerate().filter(|(_, l)| l.data) {
        for b in loops[i + 1..].iter().filter(|l| l.data) {
            if a.condition == b.condition && !nested(&a.body, &b.body) {
                return Some(a.condition.clone());
            }
        }
    }
    None
}

/// The names of local arrays (OpenCL, CUDA and SYCL declarations) and of aliases of them.
fn local_names(re: &Internal, text: &str) -> HashSet<String> {
    let mut local_names: HashSet<String> = HashSet::new();
    for c in re.local_array.captures_iter(text) {
        local_names.insert(c[1].to_owned());
    }
    for c in re.local_pointer.captures_iter(text) {
        local_names.insert(c[1].to_owned());
    }
    for c in re.sycl_local.captures_iter(text) {
        if let Some(m) = c.get(1).or_else(|| c.get(2)) {
            local_names.insert(m.as_str().to_owned());
        }
    }
    for _ in 0..2 {
        for c in re.alias.captures_iter(text) {
            if local_names.contains(&c[2]) {
                local_names.insert(c[1].to_owned());
            }
        }
    }
    local_names
}

/// Private arrays with more than one element, by name, with their element count (`None`:
/// an extent that cannot be evaluated, which counts).
fn private_arrays(re: &Internal, text: &str, sizes: &Macros) -> HashMap<String, Option<i64>> {
    let mut private: HashMap<String, Option<i64>> = HashMap::new();
    for c in re.private_array.captures_iter(text) {
        if re.local_qualifiers.is_match(&c["prefix"]) || NOT_TYPES.contains(&&c["ty"]) {
            continue;
        }
        let mut size = Some(1i64);
        for dim in c["dims"].split('[').skip(1) {
            let expr = dim.split(']').next().unwrap_or("");
            size = match (size, sizes.eval(expr)) {
                (Some(a), Some(b)) => Some(a.saturating_mul(b)),
                _ => None,
            };
        }
        if size != Some(1) && size != Some(0) {
            private.insert(c["name"].to_owned(), size);
        }
    }
    private
}

/// How private names are assigned.
struct PrivateUses {
    /// Private arrays updated in place.
    accumulator_arrays: Vec<String>,
    /// Private arrays loaded by plain copies from local arrays.
    registers_from_local: Vec<String>,
    /// Private names (scalars or arrays) and how often each is loaded by a plain read of a
    /// non-local array.
    global_loads: HashMap<String, usize>,
}

/// Sorts the assignments to private names: in-place updates, copies from local arrays, and
/// plain loads from other (global) arrays.
fn private_array_uses(
    re: &Internal,
    text: &str,
    private: &HashMap<String, Option<i64>>,
    local_names: &HashSet<String>,
) -> PrivateUses {
    let mut accumulator_arrays = Vec::new();
    let mut registers_from_local = Vec::new();
    let mut global_loads: HashMap<String, usize> = HashMap::new();
    for c in re.assignment.captures_iter(text) {
        if let Some(src) = plain_load(re, c[2].trim()) {
            if !local_names.contains(src) {
                *global_loads.entry(c[1].to_owned()).or_default() += 1;
            }
        }
    }
    for c in re.element_assignment.captures_iter(text) {
        let (name, op, rhs) = (&c[1], &c[3], c[4].trim());
        if op == "==" {
            continue;
        }
        if op == "=" && private.contains_key(name) {
            if let Some(src) = plain_load(re, rhs) {
                if !local_names.contains(src) {
                    *global_loads.entry(name.to_owned()).or_default() += 1;
                }
            }
        }
        if !private.contains_key(name) {
            continue;
        }
        let self_update = op != "="
            || re
                .ident
                .find_iter(rhs)
                .any(|id| id.as_str() == name && rhs[id.end()..].trim_start().starts_with('['));
        if self_update {
            if !accumulator_arrays.iter().any(|a| a == name) {
                accumulator_arrays.push(name.to_owned());
            }
        } else if let Some(src) = plain_load(re, rhs) {
            if local_names.contains(src) && !registers_from_local.iter().any(|a| a == name) {
                registers_from_local.push(name.to_owned());
            }
        }
    }
    PrivateUses {
        accumulator_arrays,
        registers_from_local,
        global_loads,
    }
}

/// Private values loaded from global memory in two places or more and stored into local
/// arrays.
fn register_prefetch(
    re: &Internal,
    text: &str,
    local_names: &HashSet<String>,
    global_loads: &HashMap<String, usize>,
) -> Vec<String> {
    let mut register_prefetch = Vec::new();
    for c in re.local_store.captures_iter(text) {
        let (dst, src) = (&c[1], &c[2]);
        if local_names.contains(dst)
            && global_loads.get(src).is_some_and(|&n| n >= 2)
            && !register_prefetch.iter().any(|a| a == src)
        {
            register_prefetch.push(src.to_owned());
        }
    }
    register_prefetch
}

/// Several moments in one sweep: `s += v` and `ss += v * v` in the same loop.
fn single_sweep_moments(re: &Internal, text: &str, loops: &[Loop]) -> bool {
    loops.iter().any(|l| {
        let body = &text[l.body.clone()];
        let squared: HashSet<&str> = re
            .sum_of_squares
            .captures_iter(body)
            .filter(|c| c[1] == c[2])
            .filter_map(|c| c.get(1).map(|m| m.as_str()))
            .collect();
        re.plain_sum
            .captures_iter(body)
            .any(|c| squared.contains(&c[1]))
    })
}

/// Online rescaling of a running sum by `exp(a - b)` (directly or through a variable).
fn online_rescale(re: &Internal, text: &str) -> bool {
    let exp_vars: HashSet<&str> = re
        .exp_var
        .captures_iter(text)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect();
    let rescale_ok =
        |var: Option<regex::Match<'_>>| var.is_none_or(|v| exp_vars.contains(v.as_str()));
    re.rescale
        .captures_iter(text)
        .any(|c| c["lhs"] == c["rhs"] && rescale_ok(c.name("var")))
        || re
            .rescale_in_place
            .captures_iter(text)
            .any(|c| rescale_ok(c.name("var")))
}

/// The targets of atomics on anything but local memory.
fn global_atomics(re: &Internal, text: &str, local_names: &HashSet<String>) -> Vec<String> {
    let mut global_atomics = Vec::new();
    for c in re.c_atomic.captures_iter(text) {
        if !local_names.contains(&c[1]) {
            global_atomics.push(c[1].to_owned());
        }
    }
    for c in re.atomic_ref.captures_iter(text) {
        if !c[1].contains("local_space") && !local_names.contains(&c[3]) {
            global_atomics.push(c[3].to_owned());
        }
    }
    global_atomics
}

/// Whether SYCL group algorithms are applied over the work-group, and over a sub-group.
fn collectives(re: &Internal, text: &str) -> (bool, bool) {
    let sub_groups: HashSet<&str> = re
        .sub_group_var
        .captures_iter(text)
        .filter_map(|c| c.get(1).or_else(|| c.get(2)).map(|m| m.as_str()))
        .collect();
    let mut work_group_collectives = false;
    let mut sub_group_collectives = false;
    for c in re.collective.captures_iter(text) {
        let arg = c[1].trim();
        let on_sub_group = arg.contains("get_sub_group")
            || sub_groups.contains(arg)
            || matches!(arg, "sg" | "sub_group" | "subgroup" | "warp");
        if on_sub_group {
            sub_group_collectives = true;
        } else {
            work_group_collectives = true;
        }
    }
    (work_group_collectives, sub_group_collectives)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::preprocess_with;
    use kf_core::ParamValues;

    fn facts(src: &str, params: &[(&str, i64)]) -> Facts {
        let values: ParamValues = params.iter().map(|(k, v)| (*k, *v)).collect();
        let p = preprocess_with(src, Macros::from_params(&values, []));
        analyse(&p.text, &p.macros).unwrap()
    }

    #[test]
    fn the_internal_expressions_compile() {
        assert!(internal().is_ok());
    }

    #[test]
    fn kernels_are_counted_in_every_language() {
        assert_eq!(
            facts("__kernel void a(int n) {}\nkernel void b() {}", &[]).kernels,
            2
        );
        assert_eq!(
            facts(
                "extern \"C\" __global__ void __launch_bounds__(256) k(int n) {}",
                &[]
            )
            .kernels,
            1
        );
        let sycl =
            "SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))\nvoid k(float* a) {}";
        assert_eq!(facts(sycl, &[]).kernels, 1);
        assert_eq!(
            facts(
                "q.parallel_for(r, [=](auto i) {}); q.single_task([=] {});",
                &[]
            )
            .kernels,
            2
        );
    }

    #[test]
    fn repeated_sweeps_need_the_same_data_range_without_nesting() {
        let two = "__kernel void k(int n) { for (int i = 0; i < n; i++) a(); for (int j = 0; j < n; j++) b(); }";
        assert!(facts(two, &[]).repeated_sweeps.is_some());
        let nested = "__kernel void k(int n) { for (int i = 0; i < n; i++) { for (int j = 0; j < n; j++) b(); } }";
        assert!(facts(nested, &[]).repeated_sweeps.is_none());
        let consts = "#define T 4\n__kernel void k(int n) { for (int i = 0; i < T; i++) a(); for (int j = 0; j < T; j++) b(); }";
        assert!(facts(consts, &[]).repeated_sweeps.is_none());
        // Through a local computed from a parameter.
        let derived = "__kernel void k(int n) { const int m = n / 4; for (int i = 0; i < m; i++) a(); for (int i = 0; i < m; i++) b(); }";
        assert!(facts(derived, &[]).repeated_sweeps.is_some());
    }

    #[test]
    fn accumulator_arrays_respect_the_blocking_factor() {
        let src = "__kernel void k(int n) { float acc[WPT]; for (int k = 0; k < n; k++) for (int w = 0; w < WPT; w++) acc[w] += 1.0f; }";
        assert_eq!(facts(src, &[("WPT", 4)]).accumulator_arrays, vec!["acc"]);
        assert!(facts(src, &[("WPT", 1)]).accumulator_arrays.is_empty());
        let fma = "void k() { float c[4][4]; c[i][j] = fma(a, b, c[i][j]); }";
        assert_eq!(facts(fma, &[]).accumulator_arrays, vec!["c"]);
        let local = "__kernel void k() { __local float t[16]; t[0] += 1.0f; }";
        assert!(facts(local, &[]).accumulator_arrays.is_empty());
        let typedefd = "typedef float4 floatv;\nvoid k() { floatv acc[TM][TN]; acc[i][j] = fma(a, b[j], acc[i][j]); }";
        assert_eq!(
            facts(typedefd, &[("TM", 2), ("TN", 2)]).accumulator_arrays,
            vec!["acc"]
        );
        assert!(facts(typedefd, &[("TM", 1), ("TN", 1)])
            .accumulator_arrays
            .is_empty());
        let ret = "float k() { return acc[0] += 1.0f; }";
        assert!(facts(ret, &[]).accumulator_arrays.is_empty());
        let plain = "void k() { float q[8]; q[i] = x[i] * s; }";
        assert!(facts(plain, &[]).accumulator_arrays.is_empty());
    }

    #[test]
    fn registers_loaded_from_local_tiles() {
        let src =
            "__kernel void k() { __local float As[2][16][16]; float r[4]; r[i] = As[b][k][i]; }";
        assert_eq!(facts(src, &[]).registers_from_local, vec!["r"]);
        let sycl = "static syclexp::work_group_static<float[16][16]> tile;\nvoid k() { auto& T = tile.get(); float r[4]; r[i] = T[k][i]; }";
        assert_eq!(facts(sycl, &[]).registers_from_local, vec!["r"]);
        let global = "__kernel void k(__global float* A) { float r[4]; r[i] = A[i]; }";
        assert!(facts(global, &[]).registers_from_local.is_empty());
    }

    #[test]
    fn moments_rescaling_atomics_and_collectives() {
        let moments = "__kernel void k(int n) { for (int i = 0; i < n; i++) { float v = x[i]; s += v; ss += v * v; } }";
        assert!(facts(moments, &[]).single_sweep_moments);
        let online = "void k() { s = s * exp(m - m_new) + exp(v - m_new); }";
        assert!(facts(online, &[]).online_rescale);
        let indirect = "void k() { const float corr = sycl::exp(m - mn); l = l * corr + p; }";
        assert!(facts(indirect, &[]).online_rescale);
        let plain = "void k() { y[i] = inv * exp(v - m); }";
        assert!(!facts(plain, &[]).online_rescale);
        let atomics = "__kernel void k(__global int* g) { __local int h[4]; atomic_inc(&h[0]); atomic_add(g, 1); }";
        assert_eq!(facts(atomics, &[]).global_atomics, vec!["g"]);
        let local_only = "__kernel void k() { __local int h[4]; atomic_inc(&h[0]); }";
        assert!(facts(local_only, &[]).global_atomics.is_empty());
        let block_scope = "__global__ void k(float* o) { atomicAdd_block(o, 1.0f); }";
        assert!(facts(block_scope, &[]).global_atomics.is_empty());
        let sycl = "void k() { auto sg = it.get_sub_group(); x = reduce_over_group(sg, x, plus<>()); group_barrier(it.get_group()); }";
        let f = facts(sycl, &[]);
        assert!(f.sub_group_collectives && f.work_group_collectives);
    }
}
