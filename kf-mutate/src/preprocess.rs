//! Partial evaluation of C-preprocessor conditionals (`#if`, `#ifdef`, `#ifndef`, `#elif`,
//! `#else`, `#endif`) for a set of fixed macro values: the sections whose conditions depend only
//! on fixed macros are resolved (the branch taken is kept without its directives, the others
//! are dropped), the rest are kept as they are. This turns a kernel template with structural
//! switches into the concrete kernel text a reader (or a static classifier) sees.
//!
//! Expressions follow the C preprocessor: integers, identifiers, `defined NAME` /
//! `defined(NAME)`, unary `! ~ - +`, binary `* / % + - << >> < <= > >= == != & ^ | && ||` and
//! `?:`. An identifier that is not fixed makes the expression unknown (it may be defined on the
//! compiler's command line), except where `&&`, `||` or `?:` decide without it.

use indexmap::IndexMap;
use kf_source::directive;

use crate::error::MutateError;

/// Fixed macro values for [`resolve_conditionals`].
pub type Defines = IndexMap<String, i64>;

/// Evaluates a preprocessor expression; `None` when it depends on a macro that is not fixed.
///
/// A fixed macro counts as defined. Errors are syntax errors and division by zero.
///
/// ```
/// use kf_mutate::preprocess::{eval_condition, Defines};
///
/// let fixed: Defines = [("VW".to_string(), 4), ("LOCAL_B".to_string(), 0)].into_iter().collect();
/// assert_eq!(eval_condition("VW == 4 && !LOCAL_B", &fixed).unwrap(), Some(true));
/// assert_eq!(eval_condition("LOCAL_B && TM > 2", &fixed).unwrap(), Some(false));
/// assert_eq!(eval_condition("TM > 2", &fixed).unwrap(), None);
/// ```
pub fn eval_condition(expr: &str, defines: &Defines) -> Result<Option<bool>, MutateError> {
    eval(expr, defines, false)
}

/// Evaluates a preprocessor expression with C's rule for macros that are not defined: an
/// unknown identifier is 0 and `defined(NAME)` is false. Strategies use this for their
/// preconditions.
///
/// ```
/// use kf_mutate::preprocess::{eval_closed, Defines};
///
/// let fixed: Defines = [("TM".to_string(), 4)].into_iter().collect();
/// assert!(eval_closed("TM < 8 && !defined(KS)", &fixed).unwrap());
/// assert!(!eval_closed("LOCAL_B", &fixed).unwrap());
/// ```
pub fn eval_closed(expr: &str, defines: &Defines) -> Result<bool, MutateError> {
    Ok(eval(expr, defines, true)?.unwrap_or(false))
}

fn eval(expr: &str, defines: &Defines, closed: bool) -> Result<Option<bool>, MutateError> {
    let v = kf_source::expr::eval(expr, &Fixed { defines, closed }).map_err(|e| {
        MutateError::Preprocessor {
            expr: expr.to_owned(),
            message: e.to_string(),
        }
    })?;
    Ok(v.map(|v| v != 0))
}

/// Fixed macro values as the toolkit's evaluator sees them: a fixed macro is defined with its
/// value; any other name is unknown, or (closed, C's rule) not defined and 0.
struct Fixed<'a> {
    defines: &'a Defines,
    closed: bool,
}

impl kf_source::expr::Env for Fixed<'_> {
    fn value(&self, name: &str) -> Option<i64> {
        match self.defines.get(name) {
            Some(v) => Some(*v),
            None if self.closed => Some(0),
            None => None,
        }
    }

    fn is_defined(&self, name: &str) -> Option<bool> {
        match self.defines.get(name) {
            Some(_) => Some(true),
            None if self.closed => Some(false),
            None => None,
        }
    }

    /// Templates' conditions name values, never macro calls.
    fn call(&self, name: &str) -> Result<Option<i64>, kf_source::expr::ExprError> {
        Err(kf_source::expr::ExprError::Syntax(format!(
            "`{name}(…)`: function-like macros are not supported in conditions"
        )))
    }
}

/// One open conditional section while resolving.
struct Frame {
    /// The enclosing text is emitted.
    parent_active: bool,
    /// An `#if` for this section was written to the output (some branch was unknown).
    open: bool,
    /// A branch known to be taken was seen: later branches are dead.
    decided: bool,
    /// The current branch's lines are emitted.
    active: bool,
}

/// Replaces every identifier of `defines` in `expr` by its value (used for directives that
/// stay unresolved, so that they do not depend on macros no longer defined).
fn substitute(expr: &str, defines: &Defines) -> String {
    replace_identifiers(expr, |id| defines.get(id).map(ToString::to_string))
}

pub(crate) use kf_source::replace_identifiers;

/// Resolves the conditional sections of `source` whose conditions depend only on `defines`.
///
/// Lines inside sections that stay unresolved are kept with their directives; fixed macros in
/// those directives are replaced by their values. Lines that start with `//!` are template
/// documentation and are dropped. The macro definitions themselves are not added: see
/// [`crate::Template::instantiate`], which defines the fixed macros the text still uses.
///
/// ```
/// use kf_mutate::preprocess::{resolve_conditionals, Defines};
///
/// let template = "#if LOCAL\n__local float tile[16];\n#else\nfloat x;\n#endif\n#ifndef TS\n#define TS 8\n#endif\n";
/// let fixed: Defines = [("LOCAL".to_string(), 0)].into_iter().collect();
/// let text = resolve_conditionals(template, &fixed).unwrap();
/// assert_eq!(text, "float x;\n#ifndef TS\n#define TS 8\n#endif\n");
/// ```
pub fn resolve_conditionals(source: &str, defines: &Defines) -> Result<String, MutateError> {
    let mut resolver = Resolver {
        defines,
        out: String::with_capacity(source.len()),
        stack: Vec::new(),
    };
    for (index, line) in source.lines().enumerate() {
        let line_no = index + 1;
        if line.trim_start().starts_with("//!") {
            continue;
        }
        let Some((name, arg)) = directive(line) else {
            resolver.emit(line);
            continue;
        };
        let at = DirectiveLine {
            name,
            arg,
            text: line,
            number: line_no,
        };
        match name {
            "if" | "ifdef" | "ifndef" => resolver.open_section(at)?,
            "elif" | "else" => resolver.next_branch(at)?,
            "endif" => resolver.close_section(at)?,
            // Other directives (`#define`, `#pragma`, …) are kept as they are.
            _ => resolver.emit(line),
        }
    }
    if !resolver.stack.is_empty() {
        return Err(MutateError::Preprocessor {
            expr: String::new(),
            message: format!("{} unterminated #if section(s)", resolver.stack.len()),
        });
    }
    Ok(resolver.out)
}

/// A preprocessor directive line of a template: `#name arg`, its text and its line number.
#[derive(Clone, Copy)]
struct DirectiveLine<'a> {
    /// The directive (`if`, `elif`, …).
    name: &'a str,
    /// What follows it.
    arg: &'a str,
    /// The whole line.
    text: &'a str,
    /// Its line number, from 1.
    number: usize,
}

/// The state of [`resolve_conditionals`] while it walks a source: the text so far and the
/// conditional sections open at the current line.
struct Resolver<'a> {
    /// The fixed macros.
    defines: &'a Defines,
    /// The resolved text so far.
    out: String,
    /// The open sections, innermost last.
    stack: Vec<Frame>,
}

impl Resolver<'_> {
    /// Whether the current line is kept: every enclosing section's current branch is active.
    fn emitting(&self) -> bool {
        self.stack
            .last()
            .is_none_or(|f| f.parent_active && f.active)
    }

    /// Keeps `line` when the current branch is emitted.
    fn emit(&mut self, line: &str) {
        if self.emitting() {
            self.out.push_str(line);
            self.out.push('\n');
        }
    }

    /// `#if`, `#ifdef` or `#ifndef`: a new section, decided by the fixed macros when they
    /// decide it (the directive goes), kept open with its macros substituted otherwise.
    fn open_section(&mut self, at: DirectiveLine<'_>) -> Result<(), MutateError> {
        let (name, arg) = (at.name, at.arg);
        let parent_active = self.emitting();
        let value = if !parent_active {
            Some(false)
        } else {
            match name {
                "if" => eval_condition(arg, self.defines).map_err(|e| at.located(e))?,
                "ifdef" => self.defines.get(arg).map(|_| true),
                _ => self.defines.get(arg).map(|_| false),
            }
        };
        let mut frame = Frame {
            parent_active,
            open: false,
            decided: false,
            active: false,
        };
        match value {
            Some(true) => {
                frame.active = true;
                frame.decided = true;
            }
            Some(false) => {}
            None => {
                frame.open = true;
                frame.active = true;
                if name == "if" {
                    self.out
                        .push_str(&format!("#if {}\n", substitute(arg, self.defines)));
                } else {
                    self.out.push_str(at.text);
                    self.out.push('\n');
                }
            }
        }
        self.stack.push(frame);
        Ok(())
    }

    /// `#elif` or `#else`: the innermost section's next branch. A branch after a decided one
    /// is dropped; an undecided one opens (or continues) the section kept in the text.
    fn next_branch(&mut self, at: DirectiveLine<'_>) -> Result<(), MutateError> {
        let (name, arg) = (at.name, at.arg);
        let defines = self.defines;
        let Some(frame) = self.stack.last_mut() else {
            return Err(at.without_if());
        };
        if !frame.parent_active || frame.decided {
            frame.active = false;
            return Ok(());
        }
        let value = if name == "else" {
            Some(true)
        } else {
            eval_condition(arg, defines).map_err(|e| at.located(e))?
        };
        match value {
            Some(true) => {
                if frame.open {
                    self.out.push_str("#else\n");
                }
                frame.active = true;
                frame.decided = true;
            }
            Some(false) => frame.active = false,
            None => {
                if frame.open {
                    self.out
                        .push_str(&format!("#elif {}\n", substitute(arg, defines)));
                } else {
                    self.out
                        .push_str(&format!("#if {}\n", substitute(arg, defines)));
                    frame.open = true;
                }
                frame.active = true;
            }
        }
        Ok(())
    }

    /// `#endif`: closes the innermost section (its directive stays when the section did).
    fn close_section(&mut self, at: DirectiveLine<'_>) -> Result<(), MutateError> {
        let Some(frame) = self.stack.pop() else {
            return Err(at.without_if());
        };
        if frame.open {
            self.out.push_str("#endif\n");
        }
        Ok(())
    }
}

impl DirectiveLine<'_> {
    /// A preprocessor error `e` found in this line, with the line's number.
    fn located(&self, e: MutateError) -> MutateError {
        match e {
            MutateError::Preprocessor { expr, message } => MutateError::Preprocessor {
                expr,
                message: format!("line {}: {message}", self.number),
            },
            other => other,
        }
    }

    /// The error for an `#elif`, `#else` or `#endif` outside any section.
    fn without_if(&self) -> MutateError {
        MutateError::Preprocessor {
            expr: self.text.to_owned(),
            message: format!("line {}: #{} without #if", self.number, self.name),
        }
    }
}

/// Whether `name` occurs as an identifier in `text` (outside comments): the toolkit's
/// [`kf_source::uses_identifier`].
pub use kf_source::uses_identifier;

/// `text` with `//` and `/* */` comments replaced by a space (and the newlines they spanned);
/// string literals are kept: the toolkit's [`kf_source::strip_comments`].
pub use kf_source::strip_comments;

#[cfg(test)]
mod tests {
    use super::*;

    fn defs(pairs: &[(&str, i64)]) -> Defines {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn expressions() {
        let d = defs(&[("A", 2), ("B", 0)]);
        let e = |s: &str| eval_condition(s, &d).unwrap();
        assert_eq!(e("A * 3 + 1 == 7"), Some(true));
        assert_eq!(e("A << 2 == 8 && (B | 1) == 1"), Some(true));
        assert_eq!(e("defined(A) && !defined B"), Some(false));
        assert_eq!(e("defined(A) && !defined C"), None);
        assert_eq!(e("defined(A) || X"), Some(true));
        assert_eq!(e("B && X"), Some(false));
        assert_eq!(e("X && B"), Some(false));
        assert_eq!(e("X || A"), Some(true));
        assert_eq!(e("X + 1"), None);
        assert_eq!(e("A > 1 ? 1 : X"), Some(true));
        assert_eq!(e("0x10 == 16 && 010 == 8 && 3u == 3"), Some(true));
        assert_eq!(
            e("-A < 0 && ~0 == -1 && 7 % 4 == 3 && 7 / 2 == 3"),
            Some(true)
        );
        assert!(eval_condition("A /", &d).is_err());
        assert!(eval_condition("A / B", &d).is_err());
        assert!(eval_condition("(A", &d).is_err());
        assert!(eval_condition("A $ 2", &d).is_err());
    }

    #[test]
    fn resolves_nested_and_mixed_sections() {
        let src = "\
a
#if L
b
#if V == 4
c
#elif V == 8
d
#else
e
#endif
#elif U
f
#else
g
#endif
#ifdef L
h
#endif
#if U && L
i
#elif L
j
#endif
//! template note
#if 0
#if garbage ((
#endif
#endif
";
        let out = resolve_conditionals(src, &defs(&[("L", 1), ("V", 8)])).unwrap();
        assert_eq!(out, "a\nb\nd\nh\n#if U && 1\ni\n#else\nj\n#endif\n");
        let out = resolve_conditionals(src, &defs(&[("L", 0)])).unwrap();
        assert_eq!(out, "a\n#if U\nf\n#else\ng\n#endif\nh\n");
    }

    #[test]
    fn unbalanced_sections_are_errors() {
        assert!(resolve_conditionals("#if 1\n", &Defines::new()).is_err());
        assert!(resolve_conditionals("#endif\n", &Defines::new()).is_err());
        assert!(resolve_conditionals("#else\n", &Defines::new()).is_err());
    }

    #[test]
    fn identifiers_and_comments() {
        assert!(uses_identifier("x = VW * 2;", "VW"));
        assert!(!uses_identifier("x = VWX * 2; // VW", "VW"));
        assert!(!uses_identifier("/* __local */ float a;", "__local"));
        assert_eq!(
            replace_identifiers("VW*2+0x1VW+AVW", |i| (i == "VW").then(|| "4".into())),
            "4*2+0x1VW+AVW"
        );
    }
}
