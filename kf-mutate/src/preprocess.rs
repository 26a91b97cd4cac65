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
    let tokens = tokenize(expr)?;
    let mut p = Parser {
        tokens: &tokens,
        pos: 0,
        defines,
        expr,
        closed,
    };
    let v = p.conditional()?;
    if p.pos != tokens.len() {
        return Err(p.error("unexpected trailing tokens"));
    }
    Ok(v.map(|v| v != 0))
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Ident(String),
    Op(&'static str),
}

const OPS: [&str; 24] = [
    "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "!", "~", "-", "+", "*", "/", "%",
    "<", ">", "&", "^", "|", "?", ":",
];

fn tokenize(expr: &str) -> Result<Vec<Tok>, MutateError> {
    let bytes = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let text = &expr[start..i];
            let digits = text.trim_end_matches(['u', 'U', 'l', 'L']);
            let value = if let Some(hex) = digits
                .strip_prefix("0x")
                .or_else(|| digits.strip_prefix("0X"))
            {
                i64::from_str_radix(hex, 16).ok()
            } else if digits.len() > 1 && digits.starts_with('0') {
                i64::from_str_radix(&digits[1..], 8).ok()
            } else {
                digits.parse().ok()
            };
            let value = value.ok_or_else(|| MutateError::Preprocessor {
                expr: expr.to_owned(),
                message: format!("`{text}` is not an integer"),
            })?;
            out.push(Tok::Num(value));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(expr[start..i].to_owned()));
        } else {
            let rest = &expr[i..];
            let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) else {
                return Err(MutateError::Preprocessor {
                    expr: expr.to_owned(),
                    message: format!("unexpected character `{}`", c as char),
                });
            };
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: &'a [Tok],
    pos: usize,
    defines: &'a Defines,
    expr: &'a str,
    /// Unknown identifiers are 0 (C's rule) instead of unknown.
    closed: bool,
}

type V = Option<i64>;

impl Parser<'_> {
    fn error(&self, message: &str) -> MutateError {
        MutateError::Preprocessor {
            expr: self.expr.to_owned(),
            message: message.to_owned(),
        }
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Tok::Op(op)) => Some(op),
            _ => None,
        }
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.peek_op() == Some(op) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn conditional(&mut self) -> Result<V, MutateError> {
        let cond = self.logical_or()?;
        if !self.eat("?") {
            return Ok(cond);
        }
        let a = self.conditional()?;
        if !self.eat(":") {
            return Err(self.error("`?` without `:`"));
        }
        let b = self.conditional()?;
        Ok(match cond {
            Some(c) if c != 0 => a,
            Some(_) => b,
            None if a.is_some() && a == b => a,
            None => None,
        })
    }

    fn logical_or(&mut self) -> Result<V, MutateError> {
        let mut v = self.logical_and()?;
        while self.eat("||") {
            let r = self.logical_and()?;
            v = match (v, r) {
                (Some(a), _) if a != 0 => Some(1),
                (_, Some(b)) if b != 0 => Some(1),
                (Some(_), Some(_)) => Some(0),
                _ => None,
            };
        }
        Ok(v)
    }

    fn logical_and(&mut self) -> Result<V, MutateError> {
        let mut v = self.binary(0)?;
        while self.eat("&&") {
            let r = self.binary(0)?;
            v = match (v, r) {
                (Some(0), _) | (_, Some(0)) => Some(0),
                (Some(_), Some(_)) => Some(1),
                _ => None,
            };
        }
        Ok(v)
    }

    /// Binary operators by precedence level, loosest first.
    fn binary(&mut self, level: usize) -> Result<V, MutateError> {
        const LEVELS: [&[&str]; 8] = [
            &["|"],
            &["^"],
            &["&"],
            &["==", "!="],
            &["<", "<=", ">", ">="],
            &["<<", ">>"],
            &["+", "-"],
            &["*", "/", "%"],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut v = self.binary(level + 1)?;
        while let Some(op) = self.peek_op().filter(|op| ops.contains(op)) {
            self.pos += 1;
            let r = self.binary(level + 1)?;
            v = match (v, r) {
                (Some(a), Some(b)) => Some(self.apply(op, a, b)?),
                _ => None,
            };
        }
        Ok(v)
    }

    fn apply(&self, op: &str, a: i64, b: i64) -> Result<i64, MutateError> {
        let bool_int = |c: bool| i64::from(c);
        Ok(match op {
            "|" => a | b,
            "^" => a ^ b,
            "&" => a & b,
            "==" => bool_int(a == b),
            "!=" => bool_int(a != b),
            "<" => bool_int(a < b),
            "<=" => bool_int(a <= b),
            ">" => bool_int(a > b),
            ">=" => bool_int(a >= b),
            "<<" => a
                .checked_shl(u32::try_from(b).unwrap_or(u32::MAX))
                .unwrap_or(0),
            ">>" => a
                .checked_shr(u32::try_from(b).unwrap_or(u32::MAX))
                .unwrap_or(0),
            "+" => a.wrapping_add(b),
            "-" => a.wrapping_sub(b),
            "*" => a.wrapping_mul(b),
            "/" | "%" if b == 0 => return Err(self.error("division by zero")),
            "/" => a.wrapping_div(b),
            "%" => a.wrapping_rem(b),
            _ => return Err(self.error("unknown operator")),
        })
    }

    fn unary(&mut self) -> Result<V, MutateError> {
        if self.eat("!") {
            return Ok(self.unary()?.map(|v| i64::from(v == 0)));
        }
        if self.eat("~") {
            return Ok(self.unary()?.map(|v| !v));
        }
        if self.eat("-") {
            return Ok(self.unary()?.map(i64::wrapping_neg));
        }
        if self.eat("+") {
            return self.unary();
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<V, MutateError> {
        match self.tokens.get(self.pos).cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(Some(n))
            }
            Some(Tok::Ident(name)) if name == "defined" => {
                self.pos += 1;
                let paren = self.eat("(");
                let Some(Tok::Ident(target)) = self.tokens.get(self.pos).cloned() else {
                    return Err(self.error("`defined` needs a macro name"));
                };
                self.pos += 1;
                if paren && !self.eat(")") {
                    return Err(self.error("missing `)` after `defined(`"));
                }
                Ok(match self.defines.get(&target) {
                    Some(_) => Some(1),
                    None if self.closed => Some(0),
                    None => None,
                })
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                Ok(match self.defines.get(&name) {
                    Some(v) => Some(*v),
                    None if self.closed => Some(0),
                    None => None,
                })
            }
            Some(Tok::Op("(")) => {
                self.pos += 1;
                let v = self.conditional()?;
                if !self.eat(")") {
                    return Err(self.error("missing `)`"));
                }
                Ok(v)
            }
            _ => Err(self.error("expected a value")),
        }
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

fn directive(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix('#')?.trim_start();
    let end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    let (name, arg) = rest.split_at(end);
    Some((name, strip_comment(arg).trim()))
}

fn strip_comment(text: &str) -> &str {
    let cut = [text.find("//"), text.find("/*")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(text.len());
    &text[..cut]
}

/// Replaces every identifier of `defines` in `expr` by its value (used for directives that
/// stay unresolved, so that they do not depend on macros no longer defined).
fn substitute(expr: &str, defines: &Defines) -> String {
    replace_identifiers(expr, |id| defines.get(id).map(ToString::to_string))
}

/// Rewrites the identifiers of `text` for which `f` returns a replacement.
pub(crate) fn replace_identifiers(text: &str, f: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut ident = String::new();
    let mut prev_ident_char = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            if ident.is_empty() && prev_ident_char {
                // Part of a number such as `0x1F`: copy through.
                out.push(c);
                continue;
            }
            if ident.is_empty() && c.is_ascii_digit() {
                out.push(c);
                prev_ident_char = true;
                continue;
            }
            ident.push(c);
        } else {
            if !ident.is_empty() {
                out.push_str(&f(&ident).unwrap_or_else(|| ident.clone()));
                ident.clear();
            }
            out.push(c);
            prev_ident_char = false;
            continue;
        }
        prev_ident_char = true;
    }
    if !ident.is_empty() {
        out.push_str(&f(&ident).unwrap_or(ident));
    }
    out
}

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
    let mut out = String::with_capacity(source.len());
    let mut stack: Vec<Frame> = Vec::new();
    let emitting = |stack: &[Frame]| stack.last().is_none_or(|f| f.parent_active && f.active);
    for (index, line) in source.lines().enumerate() {
        let line_no = index + 1;
        let located = |e: MutateError| match e {
            MutateError::Preprocessor { expr, message } => MutateError::Preprocessor {
                expr,
                message: format!("line {line_no}: {message}"),
            },
            other => other,
        };
        if line.trim_start().starts_with("//!") {
            continue;
        }
        let Some((name, arg)) = directive(line) else {
            if emitting(&stack) {
                out.push_str(line);
                out.push('\n');
            }
            continue;
        };
        match name {
            "if" | "ifdef" | "ifndef" => {
                let parent_active = emitting(&stack);
                let value = if !parent_active {
                    Some(false)
                } else {
                    match name {
                        "if" => eval_condition(arg, defines).map_err(located)?,
                        "ifdef" => defines.get(arg).map(|_| true),
                        _ => defines.get(arg).map(|_| false),
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
                            out.push_str(&format!("#if {}\n", substitute(arg, defines)));
                        } else {
                            out.push_str(line);
                            out.push('\n');
                        }
                    }
                }
                stack.push(frame);
            }
            "elif" | "else" => {
                let Some(frame) = stack.last_mut() else {
                    return Err(MutateError::Preprocessor {
                        expr: line.to_owned(),
                        message: format!("line {line_no}: #{name} without #if"),
                    });
                };
                if !frame.parent_active || frame.decided {
                    frame.active = false;
                    continue;
                }
                let value = if name == "else" {
                    Some(true)
                } else {
                    eval_condition(arg, defines).map_err(located)?
                };
                match value {
                    Some(true) => {
                        if frame.open {
                            out.push_str("#else\n");
                        }
                        frame.active = true;
                        frame.decided = true;
                    }
                    Some(false) => frame.active = false,
                    None => {
                        if frame.open {
                            out.push_str(&format!("#elif {}\n", substitute(arg, defines)));
                        } else {
                            out.push_str(&format!("#if {}\n", substitute(arg, defines)));
                            frame.open = true;
                        }
                        frame.active = true;
                    }
                }
            }
            "endif" => {
                let Some(frame) = stack.pop() else {
                    return Err(MutateError::Preprocessor {
                        expr: line.to_owned(),
                        message: format!("line {line_no}: #endif without #if"),
                    });
                };
                if frame.open {
                    out.push_str("#endif\n");
                }
            }
            _ => {
                if emitting(&stack) {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
    }
    if !stack.is_empty() {
        return Err(MutateError::Preprocessor {
            expr: String::new(),
            message: format!("{} unterminated #if section(s)", stack.len()),
        });
    }
    Ok(out)
}

/// Whether `name` occurs as an identifier in `text` (outside comments).
pub fn uses_identifier(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let code = strip_comments(text);
    let bytes = code.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut from = 0;
    while let Some(off) = code[from..].find(name) {
        let start = from + off;
        let end = start + name.len();
        let before = start == 0 || !is_ident(bytes[start - 1]);
        let after = end >= bytes.len() || !is_ident(bytes[end]);
        if before && after {
            return true;
        }
        from = end;
    }
    false
}

/// `text` with `//` and `/* */` comments replaced by spaces (string literals are not special:
/// kernels rarely hold them).
pub fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '/' && chars.peek() == Some(&'/') {
            for n in chars.by_ref() {
                if n == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else if c == '/' && chars.peek() == Some(&'*') {
            chars.next();
            let mut prev = ' ';
            for n in chars.by_ref() {
                if prev == '*' && n == '/' {
                    break;
                }
                if n == '\n' {
                    out.push('\n');
                }
                prev = n;
            }
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

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
