//! Source preparation before pattern matching: comments and literals removed, conditional
//! compilation evaluated with the candidate's parameter values.
//!
//! # What the preprocessor supports
//!
//! * `#if EXPR`, `#elif EXPR`, `#ifdef NAME`, `#ifndef NAME`, `#elifdef NAME`,
//!   `#elifndef NAME`, `#else`, `#endif`, nested to any depth.
//! * Expressions: integer literals (decimal, hexadecimal, octal, with `u`/`l` suffixes),
//!   identifiers, `defined NAME` / `defined(NAME)`, parentheses, unary `! ~ - +`, binary
//!   `* / % + - << >> < <= > >= == != & ^ | && ||` and `?:`, with C precedence.
//! * Object-like `#define NAME body` and `#undef NAME`; bodies are evaluated lazily when a
//!   condition reads them (so `#define RTS (TS / WPT)` follows the parameters).
//! * Values come from, in order of precedence: the source's own `#define`s (as in C, where a
//!   definition in the source replaces a `-D`), the parameter values, then nothing.
//!
//! Conditions are evaluated in three-valued logic. A name that is neither defined nor a
//! parameter is `0`, as in C; but a parameter the kernel *declares* without a value, a
//! reserved name (`__CUDA_ARCH__`, `__OPENCL_VERSION__`, `_X…`), a function-like macro or a
//! body that is not an integer expression is *unknown*, and a branch whose condition is
//! unknown is kept (together with the branches after it that could also be taken), so that
//! the classifier sees every structure the kernel might have.
//!
//! Not supported: macro expansion in code (a `#define` line stays in the text, so a pattern
//! in a macro body is still seen), `#include`, raw string literals (`R"(…)"`), and token
//! pasting. Lines of inactive branches and conditional directives are blanked, so line
//! numbers are preserved.

use std::collections::HashMap;

use kf_core::{ParamValue, ParamValues};
use kf_source::{directive, expr, logical_line};

/// Replaces comments by a space and the contents of string and character literals by nothing
/// (`"abc"` becomes `""`), keeping every newline: [`kf_source::strip_comments_and_strings`],
/// the toolkit's lexer.
///
/// ```
/// use kf_classify::source::strip_comments_and_strings;
/// let s = strip_comments_and_strings("a /* __local */ b // barrier(\n\"__shared__\" c");
/// assert_eq!(s, "a   b  \n\"\" c");
/// ```
pub use kf_source::strip_comments_and_strings;

/// What a name is bound to when a condition reads it.
#[derive(Debug, Clone, PartialEq)]
enum Binding {
    /// A value (or `None`: defined, value not an integer).
    Value(Option<i64>),
    /// A `#define` body, evaluated when read.
    Body(String),
    /// Declared (for example a tunable parameter without a value): may or may not be defined.
    Unknown,
}

/// The macro table a condition is evaluated against.
#[derive(Debug, Clone, Default)]
pub(crate) struct Macros {
    bindings: HashMap<String, Binding>,
    /// Whether undefined names read as `0` (conditions) or as unknown (array sizes).
    pub(crate) undefined_is_zero: bool,
}

impl Macros {
    /// Parameter values (defined with their values) and declared parameters without values
    /// (unknown).
    pub(crate) fn from_params<'a>(
        values: &ParamValues,
        declared: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let mut bindings = HashMap::new();
        for name in declared {
            bindings.insert(name.to_owned(), Binding::Unknown);
        }
        for (name, value) in values.iter() {
            let v = match value {
                ParamValue::Int(v) => Some(*v),
                ParamValue::Bool(b) => Some(i64::from(*b)),
                ParamValue::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(*f as i64),
                ParamValue::Float(_) => None,
                ParamValue::Text(t) => expr::parse_int(t.trim()),
            };
            bindings.insert(name.to_owned(), Binding::Value(v));
        }
        Macros {
            bindings,
            undefined_is_zero: true,
        }
    }

    fn define(&mut self, name: &str, body: &str) {
        let body = body.trim();
        let binding = if body.is_empty() {
            Binding::Value(None)
        } else {
            Binding::Body(body.to_owned())
        };
        self.bindings.insert(name.to_owned(), binding);
    }

    fn define_function_like(&mut self, name: &str) {
        self.bindings.insert(name.to_owned(), Binding::Value(None));
    }

    fn undef(&mut self, name: &str) {
        self.bindings.remove(name);
    }

    /// The name may or may not be defined, with an unknown value.
    fn forget(&mut self, name: &str) {
        self.bindings.insert(name.to_owned(), Binding::Unknown);
    }

    /// `defined(NAME)`: `Some(true/false)`, or `None` when unknown.
    fn is_defined(&self, name: &str) -> Option<bool> {
        match self.bindings.get(name) {
            Some(Binding::Unknown) => None,
            Some(_) => Some(true),
            None if is_reserved(name) => None,
            None => Some(false),
        }
    }

    /// The integer value of a name, `None` when unknown.
    pub(crate) fn value(&self, name: &str, depth: u32) -> Option<i64> {
        match self.bindings.get(name) {
            Some(Binding::Value(v)) => *v,
            Some(Binding::Body(body)) if depth < 16 => eval_expr(body, self, depth + 1),
            Some(_) => None,
            None if is_reserved(name) || !self.undefined_is_zero => None,
            None => Some(0),
        }
    }

    /// Evaluates an expression (such as an array extent) against this table.
    pub(crate) fn eval(&self, expr: &str) -> Option<i64> {
        eval_expr(expr, self, 0)
    }
}

/// Names reserved to the implementation (`__X`, `_Upper`): predefined by compilers, so their
/// value is unknown here.
fn is_reserved(name: &str) -> bool {
    name.starts_with("__")
        || (name.starts_with('_') && name[1..].starts_with(|c: char| c.is_ascii_uppercase()))
}

/// Whether a branch is taken: definitely, possibly, or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Branch {
    Active,
    Maybe,
    Inactive,
}

/// One open `#if` group.
#[derive(Debug, Clone, Copy)]
struct Group {
    /// Whether the enclosing text is live at all.
    parent_live: bool,
    /// Whether the enclosing text is certainly live.
    parent_certain: bool,
    /// Some earlier branch was definitely taken.
    done: bool,
    /// Some earlier branch was possibly taken.
    maybe_taken: bool,
    /// The current branch is live.
    live: bool,
    /// The current branch is certainly live.
    certain: bool,
}

/// The result of preprocessing: the live text, and the macro table at the end of it (which
/// later analysis uses to evaluate array extents).
#[derive(Debug, Clone)]
pub(crate) struct Preprocessed {
    pub(crate) text: String,
    pub(crate) macros: Macros,
}

/// Strips comments and literals, then evaluates conditional compilation.
///
/// `values` are the parameter values the kernel is built with; `declared` are the names of
/// the kernel's declared parameters (a declared name without a value is *unknown*, see the
/// [module documentation](self)). Inactive lines come back blank. Unbalanced directives
/// never fail: a stray `#endif` is ignored and an unterminated `#if` ends with the text.
///
/// ```
/// use kf_classify::source::preprocess;
/// use kf_core::ParamValues;
///
/// let src = "#if USE_LOCAL\n__local float t[16];\n#else\nfloat t;\n#endif\n";
/// let off = preprocess(src, &ParamValues::new().with("USE_LOCAL", 0i64), ["USE_LOCAL"]);
/// assert!(!off.contains("__local") && off.contains("float t;"));
/// let on = preprocess(src, &ParamValues::new().with("USE_LOCAL", 1i64), ["USE_LOCAL"]);
/// assert!(on.contains("__local") && !on.contains("float t;"));
/// // Declared but without a value: both branches are kept.
/// let unknown = preprocess(src, &ParamValues::new(), ["USE_LOCAL"]);
/// assert!(unknown.contains("__local") && unknown.contains("float t;"));
/// ```
pub fn preprocess<'a>(
    text: &str,
    values: &ParamValues,
    declared: impl IntoIterator<Item = &'a str>,
) -> String {
    preprocess_with(text, Macros::from_params(values, declared)).text
}

pub(crate) fn preprocess_with(text: &str, mut macros: Macros) -> Preprocessed {
    let stripped = strip_comments_and_strings(text);
    let lines: Vec<&str> = stripped.split('\n').collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut stack: Vec<Group> = Vec::new();

    let mut i = 0;
    while i < lines.len() {
        let (logical, consumed) = logical_line(&lines, i);
        let keep = apply_line(directive(&logical), &mut stack, &mut macros);
        if keep {
            out.push(logical);
        } else {
            out.push(String::new());
        }
        for _ in 1..consumed {
            out.push(String::new());
        }
        i += consumed;
    }
    Preprocessed {
        text: out.join("\n"),
        macros,
    }
}

/// Whether the text at this point is live (every enclosing branch possibly taken).
fn live(stack: &[Group]) -> bool {
    stack.last().is_none_or(|g| g.live)
}

/// Whether the text at this point is certainly live (every enclosing branch surely taken).
fn certain(stack: &[Group]) -> bool {
    stack.last().is_none_or(|g| g.certain)
}

/// Applies one logical line (its directive, if any) to the open groups and the macro table;
/// returns whether the line's text is kept in the output.
fn apply_line(
    directive: Option<(&str, &str)>,
    stack: &mut Vec<Group>,
    macros: &mut Macros,
) -> bool {
    match directive {
        Some((kw @ ("if" | "ifdef" | "ifndef"), arg)) => {
            let group = open_group(stack, kw, arg, macros);
            stack.push(group);
        }
        Some((kw @ ("elif" | "elifdef" | "elifndef"), arg)) => {
            if let Some(g) = stack.last_mut() {
                next_branch(g, kw, arg, macros);
            }
        }
        Some(("else", _)) => {
            if let Some(g) = stack.last_mut() {
                g.live = g.parent_live && !g.done;
                g.certain = g.live && g.parent_certain && !g.maybe_taken;
                g.done = true;
            }
        }
        Some(("endif", _)) => {
            stack.pop();
        }
        Some(("define", arg)) if live(stack) => {
            define(arg, certain(stack), macros);
            return true;
        }
        Some(("undef", arg)) if live(stack) => {
            let name = arg.split_whitespace().next().unwrap_or("");
            if certain(stack) {
                macros.undef(name);
            } else {
                macros.forget(name);
            }
        }
        _ => return live(stack),
    }
    false
}

/// The group an `#if` / `#ifdef` / `#ifndef` opens inside the groups of `stack`; its
/// condition is evaluated only where the enclosing text is live.
fn open_group(stack: &[Group], kw: &str, arg: &str, macros: &Macros) -> Group {
    let parent_live = live(stack);
    let parent_certain = certain(stack);
    let branch = if parent_live {
        condition(kw, arg, macros)
    } else {
        Branch::Inactive
    };
    Group {
        parent_live,
        parent_certain,
        done: branch == Branch::Active,
        maybe_taken: branch == Branch::Maybe,
        live: branch != Branch::Inactive,
        certain: parent_certain && branch == Branch::Active,
    }
}

/// Moves group `g` on to an `#elif` / `#elifdef` / `#elifndef` branch, which is taken only
/// when no earlier branch surely was.
fn next_branch(g: &mut Group, kw: &str, arg: &str, macros: &Macros) {
    let branch = if g.parent_live && !g.done {
        let kw = match kw {
            "elifdef" => "ifdef",
            "elifndef" => "ifndef",
            _ => "if",
        };
        condition(kw, arg, macros)
    } else {
        Branch::Inactive
    };
    g.live = branch != Branch::Inactive;
    g.certain = g.parent_certain && branch == Branch::Active && !g.maybe_taken;
    g.done |= branch == Branch::Active;
    g.maybe_taken |= branch == Branch::Maybe;
}

/// Records a live `#define`; a definition on a path that may not be taken makes the name
/// unknown instead.
fn define(arg: &str, certain: bool, macros: &mut Macros) {
    let end = arg
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(arg.len());
    let (name, body) = arg.split_at(end);
    if name.is_empty() {
        return;
    }
    if !certain {
        // Defined only on a path that may not be taken.
        macros.forget(name);
    } else if body.starts_with('(') {
        macros.define_function_like(name);
    } else {
        macros.define(name, body);
    }
}

/// Evaluates one `#if` / `#ifdef` / `#ifndef` condition.
fn condition(kw: &str, arg: &str, macros: &Macros) -> Branch {
    let value = match kw {
        "ifdef" | "ifndef" => {
            let name = arg.split_whitespace().next().unwrap_or("");
            macros
                .is_defined(name)
                .map(|d| if kw == "ifdef" { d } else { !d })
        }
        _ => eval_expr(arg, macros, 0).map(|v| v != 0),
    };
    match value {
        Some(true) => Branch::Active,
        Some(false) => Branch::Inactive,
        None => Branch::Maybe,
    }
}

/// Evaluates a preprocessor expression with the toolkit's evaluator; `None` when it is
/// unknown or not an expression.
fn eval_expr(s: &str, macros: &Macros, depth: u32) -> Option<i64> {
    expr::eval(s, &Scope { macros, depth }).ok().flatten()
}

/// A macro table seen from a `#define` body `depth` levels deep (bodies are evaluated when
/// read, at most 16 levels, so that a cycle stays unknown).
struct Scope<'m> {
    macros: &'m Macros,
    depth: u32,
}

impl expr::Env for Scope<'_> {
    fn value(&self, name: &str) -> Option<i64> {
        self.macros.value(name, self.depth)
    }

    fn is_defined(&self, name: &str) -> Option<bool> {
        self.macros.is_defined(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(s: &str, params: &[(&str, i64)]) -> Option<i64> {
        let values: ParamValues = params.iter().map(|(k, v)| (*k, *v)).collect();
        Macros::from_params(&values, []).eval(s)
    }

    #[test]
    fn expressions_follow_c_precedence() {
        assert_eq!(eval("1 + 2 * 3", &[]), Some(7));
        assert_eq!(eval("(1 + 2) * 3", &[]), Some(9));
        assert_eq!(eval("10 - 4 - 3", &[]), Some(3));
        assert_eq!(eval("1 << 4 >> 2", &[]), Some(4));
        assert_eq!(eval("2 < 3 == 1", &[]), Some(1));
        assert_eq!(eval("1 || 0 && 0", &[]), Some(1));
        assert_eq!(eval("0x10 + 010 + 3u", &[]), Some(27));
        assert_eq!(eval("WPT > 1 ? WPT : 0", &[("WPT", 4)]), Some(4));
        assert_eq!(eval("-3 + !0 + ~0", &[]), Some(-3));
        assert_eq!(eval("defined(WPT) && defined TS", &[("WPT", 1)]), Some(0));
        assert_eq!(eval("UNSET", &[]), Some(0));
        assert_eq!(eval("__CUDA_ARCH__ >= 800", &[]), None);
        assert_eq!(eval("1 / 0", &[]), None);
        assert_eq!(eval("(1", &[]), None);
        assert_eq!(eval("1 +", &[]), None);
        assert_eq!(eval("MAX(1, 2)", &[]), None);
        // Short-circuits over unknowns.
        assert_eq!(eval("0 && __X", &[]), Some(0));
        assert_eq!(eval("__X || 1", &[]), Some(1));
    }

    #[test]
    fn defines_are_evaluated_lazily_and_sources_override_parameters() {
        let src = "#define RTS (TS / WPT)\n#if RTS == 4\nyes\n#endif\n";
        let v = ParamValues::new().with("TS", 16i64).with("WPT", 4i64);
        assert!(preprocess(src, &v, []).contains("yes"));
        let src = "#ifndef TS\n#define TS 8\n#endif\n#if TS == 8\neight\n#else\nother\n#endif";
        assert!(preprocess(src, &ParamValues::new(), []).contains("eight"));
        let v = ParamValues::new().with("TS", 16i64);
        let out = preprocess(src, &v, []);
        assert!(out.contains("other") && !out.contains("eight"));
        let src = "#define A 1\n#undef A\n#ifdef A\nno\n#endif";
        assert!(!preprocess(src, &ParamValues::new(), []).contains("no"));
    }

    #[test]
    fn elif_chains_and_nesting() {
        let src = "#if V == 1\none\n#elif V == 2\ntwo\n#else\nmany\n#endif\n\
                   #if 0\n#if 1\nhidden\n#endif\n#else\nshown\n#endif";
        let run = |v: i64| preprocess(src, &ParamValues::new().with("V", v), []);
        let one = run(1);
        assert!(one.contains("one") && !one.contains("two") && !one.contains("many"));
        let two = run(2);
        assert!(!two.contains("one") && two.contains("two") && !two.contains("many"));
        let many = run(7);
        assert!(many.contains("many") && !many.contains("two"));
        assert!(!one.contains("hidden") && one.contains("shown"));
        // Line structure is preserved.
        assert_eq!(one.split('\n').count(), src.split('\n').count());
    }

    #[test]
    fn unknown_conditions_keep_the_branches_that_may_be_taken() {
        let src = "#if X == 1\na\n#elif 1\nb\n#else\nc\n#endif";
        let out = preprocess(src, &ParamValues::new(), ["X"]);
        assert!(out.contains('a') && out.contains('b') && !out.contains('c'));
        let src = "#ifdef __SYCL_DEVICE_ONLY__\ndev\n#else\nhost\n#endif";
        let out = preprocess(src, &ParamValues::new(), []);
        assert!(out.contains("dev") && out.contains("host"));
    }

    #[test]
    fn definitions_on_uncertain_paths_are_unknown() {
        let src = "#ifndef WPT\n#define WPT 1\n#endif\n#if WPT > 1\nblocked\n#else\nscalar\n#endif";
        // Declared without a value: WPT may be anything.
        let out = preprocess(src, &ParamValues::new(), ["WPT"]);
        assert!(out.contains("blocked") && out.contains("scalar"));
        // Not declared: the default applies.
        let out = preprocess(src, &ParamValues::new(), []);
        assert!(!out.contains("blocked") && out.contains("scalar"));
        // Given: the value applies.
        let out = preprocess(src, &ParamValues::new().with("WPT", 4i64), ["WPT"]);
        assert!(out.contains("blocked") && !out.contains("scalar"));
        // An #else after a possible branch is itself only possible.
        let src = "#if X\n#else\n#define Y 1\n#endif\n#if Y\ny\n#else\nnot_y\n#endif";
        let out = preprocess(src, &ParamValues::new(), ["X"]);
        assert!(out.contains("not_y") && out.contains("\ny"));
    }

    #[test]
    fn stripping_keeps_lines_and_handles_odd_literals() {
        let src = "a = '\\''; b = \"x\\\"y /* not a comment */\"; // tail\nc = 1'000; /* multi\nline */ d";
        let out = strip_comments_and_strings(src);
        assert_eq!(out.lines().count(), 3);
        assert!(out.contains("c = 1'000;"));
        assert!(!out.contains("not a comment"));
        assert!(out.ends_with(" d"));
        // An unterminated apostrophe ends at the line.
        let out = strip_comments_and_strings("don't\n__local");
        assert!(out.contains("__local"));
    }

    #[test]
    fn continuations_join_directive_lines() {
        let src = "#if A && \\\n    B\nboth\n#endif\nafter";
        let v = ParamValues::new().with("A", 1i64).with("B", 0i64);
        let out = preprocess(src, &v, []);
        assert!(!out.contains("both") && out.contains("after"));
        assert_eq!(out.split('\n').count(), src.split('\n').count());
    }

    #[test]
    fn unbalanced_directives_do_not_fail() {
        let out = preprocess("#endif\nx\n#else\ny\n#if 0\nz", &ParamValues::new(), []);
        assert!(out.contains('x') && out.contains('y') && !out.contains('z'));
    }
}
