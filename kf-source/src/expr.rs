//! C-preprocessor expressions (`#if` / `#elif` conditions) in three-valued logic: a value is
//! an integer, or unknown (`None`) when it depends on a name the caller cannot value.
//!
//! Supported: integer literals (decimal, `0x` hexadecimal, `0` octal, with `u`/`l`
//! suffixes), identifiers, `defined NAME` / `defined(NAME)`, parentheses, unary `! ~ - +`,
//! binary `* / % + - << >> < <= > >= == != & ^ | && ||` and `?:`, with C precedence. `&&`,
//! `||` and `?:` decide on a known operand even when the other is unknown. A function-like
//! macro call `NAME(…)` is valued by [`Env::call`] (unknown by default). A shift by a
//! negative or too large amount is unknown.

use std::fmt;

/// What names mean while an expression is evaluated.
///
/// ```
/// use kf_source::expr::{eval, Env};
///
/// struct Fixed;
/// impl Env for Fixed {
///     fn value(&self, name: &str) -> Option<i64> {
///         (name == "TS").then_some(16)
///     }
///     fn is_defined(&self, name: &str) -> Option<bool> {
///         Some(name == "TS")
///     }
/// }
/// assert_eq!(eval("defined(TS) && TS % 8 == 0", &Fixed), Ok(Some(1)));
/// assert_eq!(eval("WPT > 1", &Fixed), Ok(None));
/// ```
pub trait Env {
    /// The integer value of `name`; `None` when unknown.
    fn value(&self, name: &str) -> Option<i64>;
    /// `defined(name)`; `None` when unknown.
    fn is_defined(&self, name: &str) -> Option<bool>;
    /// The value of a function-like macro call `name(…)`; unknown by default. An error
    /// refuses the expression.
    fn call(&self, name: &str) -> Result<Option<i64>, ExprError> {
        let _ = name;
        Ok(None)
    }
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// Not an expression: the message says what is wrong.
    #[error("{0}")]
    Syntax(String),
    /// `/` or `%` by zero.
    #[error("division by zero")]
    DivisionByZero,
}

impl ExprError {
    fn syntax(message: impl fmt::Display) -> Self {
        ExprError::Syntax(message.to_string())
    }
}

/// Evaluates `expr` against `env`: `Ok(Some(v))`, `Ok(None)` when unknown, or why it is not
/// an expression.
pub fn eval(expr: &str, env: &dyn Env) -> Result<Option<i64>, ExprError> {
    let toks = tokenize(expr)?;
    let mut p = Parser {
        toks: &toks,
        pos: 0,
        env,
    };
    let v = p.conditional()?;
    if p.pos != toks.len() {
        return Err(ExprError::syntax("unexpected trailing tokens"));
    }
    Ok(v)
}

/// Parses a C integer literal (decimal, `0x` hexadecimal, `0` octal, with `u`/`l` suffixes).
///
/// ```
/// assert_eq!(kf_source::expr::parse_int("0x10u"), Some(16));
/// assert_eq!(kf_source::expr::parse_int("010"), Some(8));
/// assert_eq!(kf_source::expr::parse_int("x"), None);
/// ```
pub fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim_end_matches(['u', 'U', 'l', 'L']);
    if s.is_empty() {
        return None;
    }
    if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return i64::from_str_radix(hex, 16).ok();
    }
    if s.len() > 1 && s.starts_with('0') {
        return i64::from_str_radix(&s[1..], 8).ok();
    }
    s.parse().ok()
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Ident(String),
    Op(&'static str),
}

/// Operators and punctuation (`,` only separates a function-like macro's arguments).
const OPS: [&str; 25] = [
    "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "!", "~", "-", "+", "*", "/", "%",
    "<", ">", "&", "^", "|", "?", ":", ",",
];

fn tokenize(expr: &str) -> Result<Vec<Tok>, ExprError> {
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
            let value = parse_int(text)
                .ok_or_else(|| ExprError::syntax(format!("`{text}` is not an integer")))?;
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
                let c = rest.chars().next().unwrap_or(' ');
                return Err(ExprError::syntax(format!("unexpected character `{c}`")));
            };
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Ok(out)
}

type V = Option<i64>;

struct Parser<'a> {
    toks: &'a [Tok],
    pos: usize,
    env: &'a dyn Env,
}

impl Parser<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.pos) {
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

    fn conditional(&mut self) -> Result<V, ExprError> {
        let cond = self.binary(1)?;
        if !self.eat("?") {
            return Ok(cond);
        }
        let a = self.conditional()?;
        if !self.eat(":") {
            return Err(ExprError::syntax("`?` without `:`"));
        }
        let b = self.conditional()?;
        Ok(match cond {
            Some(c) if c != 0 => a,
            Some(_) => b,
            None if a.is_some() && a == b => a,
            None => None,
        })
    }

    /// Precedence climbing; `min_prec` 1 is `||`, 10 is `* / %`.
    fn binary(&mut self, min_prec: u8) -> Result<V, ExprError> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.peek_op() {
            let prec = match op {
                "||" => 1,
                "&&" => 2,
                "|" => 3,
                "^" => 4,
                "&" => 5,
                "==" | "!=" => 6,
                "<" | "<=" | ">" | ">=" => 7,
                "<<" | ">>" => 8,
                "+" | "-" => 9,
                "*" | "/" | "%" => 10,
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            // Left-associative: the right operand binds tighter.
            let rhs = self.binary(prec + 1)?;
            lhs = apply(op, lhs, rhs)?;
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<V, ExprError> {
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

    fn primary(&mut self) -> Result<V, ExprError> {
        match self.toks.get(self.pos).cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(Some(n))
            }
            Some(Tok::Ident(name)) if name == "defined" => {
                self.pos += 1;
                let paren = self.eat("(");
                let Some(Tok::Ident(target)) = self.toks.get(self.pos).cloned() else {
                    return Err(ExprError::syntax("`defined` needs a macro name"));
                };
                self.pos += 1;
                if paren && !self.eat(")") {
                    return Err(ExprError::syntax("missing `)` after `defined(`"));
                }
                Ok(self.env.is_defined(&target).map(i64::from))
            }
            Some(Tok::Ident(name)) => {
                self.pos += 1;
                if self.peek_op() == Some("(") {
                    // A function-like macro call: skip its arguments.
                    let mut depth = 0usize;
                    while let Some(tok) = self.toks.get(self.pos) {
                        self.pos += 1;
                        match tok {
                            Tok::Op("(") => depth += 1,
                            Tok::Op(")") => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    if depth != 0 {
                        return Err(ExprError::syntax("missing `)`"));
                    }
                    return self.env.call(&name);
                }
                Ok(self.env.value(&name))
            }
            Some(Tok::Op("(")) => {
                self.pos += 1;
                let v = self.conditional()?;
                if !self.eat(")") {
                    return Err(ExprError::syntax("missing `)`"));
                }
                Ok(v)
            }
            _ => Err(ExprError::syntax("expected a value")),
        }
    }
}

/// Applies a binary operator in three-valued logic (`&&` and `||` decide on a known operand
/// even when the other is unknown).
fn apply(op: &str, a: V, b: V) -> Result<V, ExprError> {
    Ok(match op {
        "&&" => match (a, b) {
            (Some(0), _) | (_, Some(0)) => Some(0),
            (Some(_), Some(_)) => Some(1),
            _ => None,
        },
        "||" => match (a, b) {
            (Some(x), _) if x != 0 => Some(1),
            (_, Some(y)) if y != 0 => Some(1),
            (Some(_), Some(_)) => Some(0),
            _ => None,
        },
        _ => {
            let (Some(a), Some(b)) = (a, b) else {
                return Ok(None);
            };
            match op {
                "|" => Some(a | b),
                "^" => Some(a ^ b),
                "&" => Some(a & b),
                "==" => Some(i64::from(a == b)),
                "!=" => Some(i64::from(a != b)),
                "<" => Some(i64::from(a < b)),
                "<=" => Some(i64::from(a <= b)),
                ">" => Some(i64::from(a > b)),
                ">=" => Some(i64::from(a >= b)),
                "<<" => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
                ">>" => u32::try_from(b).ok().and_then(|b| a.checked_shr(b)),
                "+" => Some(a.wrapping_add(b)),
                "-" => Some(a.wrapping_sub(b)),
                "*" => Some(a.wrapping_mul(b)),
                "/" | "%" if b == 0 => return Err(ExprError::DivisionByZero),
                "/" => Some(a.wrapping_div(b)),
                "%" => Some(a.wrapping_rem(b)),
                _ => return Err(ExprError::syntax(format!("unknown operator `{op}`"))),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vars(&'static [(&'static str, i64)]);
    impl Env for Vars {
        fn value(&self, name: &str) -> Option<i64> {
            self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
        }
        fn is_defined(&self, name: &str) -> Option<bool> {
            self.value(name).map(|_| true).or(Some(false))
        }
    }

    fn e(s: &str) -> Result<Option<i64>, ExprError> {
        eval(s, &Vars(&[("A", 2), ("B", 0), ("WPT", 4)]))
    }

    #[test]
    fn precedence_and_arithmetic() {
        assert_eq!(e("1 + 2 * 3"), Ok(Some(7)));
        assert_eq!(e("(1 + 2) * 3"), Ok(Some(9)));
        assert_eq!(e("10 - 4 - 3"), Ok(Some(3)));
        assert_eq!(e("1 << 4 >> 2"), Ok(Some(4)));
        assert_eq!(e("2 < 3 == 1"), Ok(Some(1)));
        assert_eq!(e("1 || 0 && 0"), Ok(Some(1)));
        assert_eq!(e("0x10 + 010 + 3u"), Ok(Some(27)));
        assert_eq!(e("-3 + !0 + ~0"), Ok(Some(-3)));
        assert_eq!(e("A * 3 + 1 == 7"), Ok(Some(1)));
        assert_eq!(e("WPT > 1 ? WPT : 0"), Ok(Some(4)));
    }

    #[test]
    fn defined_and_unknowns() {
        assert_eq!(e("defined(A) && defined C"), Ok(Some(0)));
        assert_eq!(e("defined A && !defined(C)"), Ok(Some(1)));
        assert_eq!(e("C > 1"), Ok(None));
        assert_eq!(e("0 && C"), Ok(Some(0)));
        assert_eq!(e("C || 1"), Ok(Some(1)));
        assert_eq!(e("C ? 3 : 3"), Ok(Some(3)));
        assert_eq!(e("C ? 3 : 4"), Ok(None));
        assert_eq!(e("MAX(1, (2))"), Ok(None));
        assert_eq!(e("1 << 64"), Ok(None));
    }

    #[test]
    fn errors() {
        assert_eq!(e("1 / 0"), Err(ExprError::DivisionByZero));
        assert_eq!(e("A % B"), Err(ExprError::DivisionByZero));
        assert!(matches!(e("(1"), Err(ExprError::Syntax(_))));
        assert!(matches!(e("1 +"), Err(ExprError::Syntax(_))));
        assert!(matches!(e("1 ? 2"), Err(ExprError::Syntax(_))));
        assert!(matches!(e("1 $ 2"), Err(ExprError::Syntax(_))));
        assert!(matches!(e("1x"), Err(ExprError::Syntax(_))));
        assert!(matches!(e("defined"), Err(ExprError::Syntax(_))));
        assert!(matches!(e("1, 2"), Err(ExprError::Syntax(_))));
        assert!(matches!(e("MAX(1, 2"), Err(ExprError::Syntax(_))));
    }
}
