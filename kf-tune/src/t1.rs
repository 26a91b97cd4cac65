//! Import of the FAIR "T1" tuning-space format used by Kernel Tuner, KTT and ATF:
//! `ConfigurationSpace.TuningParameters` (name, type, values as a Python list literal) and
//! `Conditions` (Python expressions), translated into a [`Space`].
//!
//! Python conditions are translated into the expression language of kf-manifest: `and`, `or`,
//! `not` become `&&`, `||`, `!`; chained comparisons (`32 <= a * b <= 1024`) are split;
//! `x in [a, b]` becomes a disjunction of equalities; `**` becomes `^`; `/` is true division;
//! `//` is integer division (exact for the non-negative operands of tuning spaces); `True`,
//! `False`, `min`, `max`, `abs` and `floor` are understood.

use std::path::Path;

use kf_core::ParamValue;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Result, TuneError};
use crate::kt::read_maybe_gz;
use crate::param::Param;
use crate::space::Space;

/// A T1 tuning space.
///
/// ```
/// use kf_tune::t1::T1Space;
/// let t1 = T1Space::from_json_str(r#"{
///   "ConfigurationSpace": {
///     "TuningParameters": [
///       {"Name": "bx", "Type": "int", "Values": "[16, 32, 64]"},
///       {"Name": "tx", "Type": "int", "Values": "[1, 2, 4]"}
///     ],
///     "Conditions": [{"Expression": "32 <= bx * tx <= 128 and not tx == 4", "Parameters": ["bx", "tx"]}]
///   }
/// }"#, "inline").unwrap();
/// assert_eq!(t1.space().unwrap().len(), 5);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct T1Space {
    /// `General.BenchmarkName`, when present.
    pub name: String,
    /// The tunable parameters, in file order.
    pub params: Vec<Param>,
    /// The conditions as written (Python).
    pub conditions: Vec<String>,
    /// The conditions translated into kf-manifest expressions.
    pub translated: Vec<String>,
    /// `KernelSpecification.KernelName`, when present.
    pub kernel_name: Option<String>,
    /// `KernelSpecification.ProblemSize`, when present.
    pub problem_size: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawT1 {
    #[serde(default)]
    general: Option<RawGeneral>,
    configuration_space: RawSpace,
    #[serde(default)]
    kernel_specification: Option<RawKernel>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawGeneral {
    #[serde(default)]
    benchmark_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawSpace {
    tuning_parameters: Vec<RawParam>,
    #[serde(default)]
    conditions: Vec<RawCondition>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawParam {
    name: String,
    #[serde(rename = "Type", default)]
    kind: Option<String>,
    values: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawCondition {
    expression: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RawKernel {
    #[serde(default)]
    kernel_name: Option<String>,
    #[serde(default)]
    problem_size: Option<Value>,
}

impl T1Space {
    /// Reads a T1 file (plain or gzip).
    pub fn read(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = read_maybe_gz(path)?;
        Self::from_json_str(&text, &path.display().to_string())
    }

    /// Parses T1 text; `name` identifies it in errors.
    pub fn from_json_str(text: &str, name: &str) -> Result<Self> {
        let raw: RawT1 =
            serde_json::from_str(text).map_err(|e| TuneError::format(name, e.to_string()))?;
        let mut params = Vec::new();
        for p in raw.configuration_space.tuning_parameters {
            let values = match &p.values {
                Value::String(s) => parse_list(s)
                    .map_err(|m| TuneError::format(name, format!("parameter `{}`: {m}", p.name)))?,
                Value::Array(a) => a
                    .iter()
                    .map(|v| serde_json::from_value::<ParamValue>(v.clone()))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| TuneError::format(name, format!("parameter `{}`: {e}", p.name)))?,
                other => {
                    return Err(TuneError::format(
                        name,
                        format!("parameter `{}`: values {other} are not a list", p.name),
                    ))
                }
            };
            let values = coerce(values, p.kind.as_deref());
            params.push(Param::from_values(p.name, values)?);
        }
        let conditions: Vec<String> = raw
            .configuration_space
            .conditions
            .into_iter()
            .map(|c| c.expression)
            .collect();
        let translated = conditions
            .iter()
            .map(|c| translate_python(c))
            .collect::<Result<Vec<_>>>()?;
        let (kernel_name, problem_size) = match raw.kernel_specification {
            Some(k) => (k.kernel_name, k.problem_size),
            None => (None, None),
        };
        Ok(T1Space {
            name: raw
                .general
                .and_then(|g| g.benchmark_name)
                .unwrap_or_default(),
            params,
            conditions,
            translated,
            kernel_name,
            problem_size,
        })
    }

    /// The space: the parameters and the translated conditions.
    pub fn space(&self) -> Result<Space> {
        let mut b = Space::builder().params(self.params.iter().cloned());
        for c in &self.translated {
            b = b.constraint(c.clone());
        }
        b.build()
    }
}

/// Applies the declared T1 type (`int`, `float`, `bool`, `string`) to parsed values.
fn coerce(values: Vec<ParamValue>, kind: Option<&str>) -> Vec<ParamValue> {
    let kind = kind.map(str::to_ascii_lowercase);
    values
        .into_iter()
        .map(|v| match (kind.as_deref(), v) {
            (Some("float" | "double"), ParamValue::Int(i)) => ParamValue::Float(i as f64),
            (Some("int"), ParamValue::Float(f)) if f.fract() == 0.0 => ParamValue::Int(f as i64),
            (Some("bool"), ParamValue::Int(i)) => ParamValue::Bool(i != 0),
            (Some("string"), ParamValue::Int(i)) => ParamValue::Text(i.to_string()),
            (Some("string"), ParamValue::Float(f)) => ParamValue::Text(f.to_string()),
            (_, v) => v,
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Name(String),
    Op(&'static str),
}

/// Why a Python literal or condition could not be read; the message of a
/// [`TuneError::Expression`] or a cache's [`TuneError::Format`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum SyntaxError {
    #[error("bad number `{0}`")]
    BadNumber(String),
    #[error("unterminated string")]
    UnterminatedString,
    #[error("unexpected character `{0}`")]
    UnexpectedCharacter(char),
    #[error("`{0}` is not a list literal")]
    NotAList(String),
    /// `found`: the token, as its debug text.
    #[error("unexpected {found} in list `{list}`")]
    UnexpectedInList { found: String, list: String },
    #[error("expected `{expected}`, found {found}")]
    Expected { expected: String, found: String },
    #[error("`in` needs a list literal")]
    InNeedsAList,
    #[error("unsupported function `{0}`")]
    UnsupportedFunction(String),
    #[error("unexpected {0}")]
    Unexpected(String),
}

fn tokenize(s: &str) -> std::result::Result<Vec<Tok>, SyntaxError> {
    const OPS: [&str; 20] = [
        "**", "//", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", "[",
        "]", "&", "|",
    ];
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || (c == '.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let start = i;
            while i < b.len()
                && ((b[i] as char).is_ascii_alphanumeric()
                    || b[i] == b'.'
                    || ((b[i] == b'+' || b[i] == b'-') && matches!(b[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            let t = &s[start..i];
            if let Ok(v) = t.parse::<i64>() {
                out.push(Tok::Int(v));
            } else if let Ok(v) = t.parse::<f64>() {
                out.push(Tok::Float(v));
            } else {
                return Err(SyntaxError::BadNumber(t.to_owned()));
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len()
                && ((b[i] as char).is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
            {
                i += 1;
            }
            out.push(Tok::Name(s[start..i].to_owned()));
        } else if c == '\'' || c == '"' {
            let end = s[i + 1..].find(c).ok_or(SyntaxError::UnterminatedString)?;
            out.push(Tok::Str(s[i + 1..i + 1 + end].to_owned()));
            i += end + 2;
        } else {
            let op = OPS
                .iter()
                .find(|op| s[i..].starts_with(**op))
                .ok_or(SyntaxError::UnexpectedCharacter(c))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Ok(out)
}

/// Parses a Python list literal of numbers, strings and booleans (`"[16, 32, 'float4', True]"`).
fn parse_list(s: &str) -> std::result::Result<Vec<ParamValue>, SyntaxError> {
    let toks = tokenize(s)?;
    let mut it = toks.into_iter().peekable();
    let open = it.next();
    let close = if open == Some(Tok::Op("[")) {
        "]"
    } else if open == Some(Tok::Op("(")) {
        ")"
    } else {
        return Err(SyntaxError::NotAList(s.to_owned()));
    };
    let mut out = Vec::new();
    loop {
        let neg = if it.peek() == Some(&Tok::Op("-")) {
            it.next();
            true
        } else {
            false
        };
        match it.next() {
            Some(Tok::Op(op)) if op == close && !neg => break,
            Some(Tok::Int(v)) => out.push(ParamValue::Int(if neg { -v } else { v })),
            Some(Tok::Float(v)) => out.push(ParamValue::Float(if neg { -v } else { v })),
            Some(Tok::Str(v)) if !neg => out.push(ParamValue::Text(v)),
            Some(Tok::Name(n)) if n == "True" && !neg => out.push(ParamValue::Bool(true)),
            Some(Tok::Name(n)) if n == "False" && !neg => out.push(ParamValue::Bool(false)),
            other => {
                return Err(SyntaxError::UnexpectedInList {
                    found: format!("{other:?}"),
                    list: s.to_owned(),
                })
            }
        }
        match it.next() {
            Some(Tok::Op(",")) => {
                if it.peek() == Some(&Tok::Op(close)) {
                    it.next();
                    break;
                }
            }
            Some(Tok::Op(op)) if op == close => break,
            other => {
                return Err(SyntaxError::UnexpectedInList {
                    found: format!("{other:?}"),
                    list: s.to_owned(),
                })
            }
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_name(&self, n: &str) -> bool {
        matches!(self.peek(), Some(Tok::Name(x)) if x == n)
    }

    fn peek_op(&self, o: &str) -> bool {
        matches!(self.peek(), Some(Tok::Op(x)) if *x == o)
    }

    fn expect_op(&mut self, o: &str) -> std::result::Result<(), SyntaxError> {
        if self.peek_op(o) {
            self.pos += 1;
            Ok(())
        } else {
            Err(SyntaxError::Expected {
                expected: o.to_owned(),
                found: format!("{:?}", self.peek()),
            })
        }
    }

    fn or(&mut self) -> std::result::Result<String, SyntaxError> {
        self.left_assoc(("or", "|", "||"), Self::and)
    }

    fn and(&mut self) -> std::result::Result<String, SyntaxError> {
        self.left_assoc(("and", "&", "&&"), Self::not)
    }

    /// A left-associative chain of `operand`s joined by `word` or `op`, each link rendered as
    /// `(left rendered right)`.
    fn left_assoc(
        &mut self,
        (word, op, rendered): (&str, &str, &str),
        operand: fn(&mut Self) -> std::result::Result<String, SyntaxError>,
    ) -> std::result::Result<String, SyntaxError> {
        let mut left = operand(self)?;
        while self.peek_name(word) || self.peek_op(op) {
            self.pos += 1;
            let right = operand(self)?;
            left = format!("({left} {rendered} {right})");
        }
        Ok(left)
    }

    fn not(&mut self) -> std::result::Result<String, SyntaxError> {
        if self.peek_name("not") {
            self.pos += 1;
            let inner = self.not()?;
            return Ok(format!("(!{inner})"));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> std::result::Result<String, SyntaxError> {
        let first = self.arith()?;
        let mut parts: Vec<String> = Vec::new();
        let mut left = first.clone();
        loop {
            let op = match self.peek() {
                Some(Tok::Op(o)) if matches!(*o, "==" | "!=" | "<" | ">" | "<=" | ">=") => {
                    o.to_string()
                }
                Some(Tok::Name(n)) if n == "in" => "in".into(),
                Some(Tok::Name(n))
                    if n == "not"
                        && matches!(self.toks.get(self.pos + 1), Some(Tok::Name(m)) if m == "in") =>
                {
                    self.pos += 1;
                    "not in".into()
                }
                _ => break,
            };
            self.pos += 1;
            if op == "in" || op == "not in" {
                let items = self.list()?;
                let ors: Vec<String> = items.iter().map(|i| format!("{left} == {i}")).collect();
                let any = if ors.is_empty() {
                    "false".to_owned()
                } else {
                    format!("({})", ors.join(" || "))
                };
                parts.push(if op == "in" { any } else { format!("(!{any})") });
                // `x in [...]` does not chain further in tuning conditions.
                break;
            }
            let right = self.arith()?;
            parts.push(format!("({left} {op} {right})"));
            left = right;
        }
        Ok(match parts.len() {
            0 => first,
            1 => parts.pop().unwrap_or_default(),
            _ => format!("({})", parts.join(" && ")),
        })
    }

    fn list(&mut self) -> std::result::Result<Vec<String>, SyntaxError> {
        let close = if self.peek_op("[") {
            "]"
        } else if self.peek_op("(") {
            ")"
        } else {
            return Err(SyntaxError::InNeedsAList);
        };
        self.pos += 1;
        let mut items = Vec::new();
        while !self.peek_op(close) {
            items.push(self.arith()?);
            if self.peek_op(",") {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.expect_op(close)?;
        Ok(items)
    }

    fn arith(&mut self) -> std::result::Result<String, SyntaxError> {
        let mut left = self.term()?;
        while self.peek_op("+") || self.peek_op("-") {
            let op = if self.peek_op("+") { "+" } else { "-" };
            self.pos += 1;
            let right = self.term()?;
            left = format!("({left} {op} {right})");
        }
        Ok(left)
    }

    fn term(&mut self) -> std::result::Result<String, SyntaxError> {
        let mut left = self.factor()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Op(o)) if matches!(*o, "*" | "/" | "//" | "%") => *o,
                _ => break,
            };
            self.pos += 1;
            let right = self.factor()?;
            left = match op {
                "/" => format!("(({left} * 1.0) / {right})"),
                "//" => format!("({left} / {right})"),
                _ => format!("({left} {op} {right})"),
            };
        }
        Ok(left)
    }

    fn factor(&mut self) -> std::result::Result<String, SyntaxError> {
        if self.peek_op("-") {
            self.pos += 1;
            let inner = self.factor()?;
            return Ok(format!("(-{inner})"));
        }
        if self.peek_op("+") {
            self.pos += 1;
            return self.factor();
        }
        let base = self.atom()?;
        if self.peek_op("**") {
            self.pos += 1;
            let exp = self.factor()?;
            return Ok(format!("({base} ^ {exp})"));
        }
        Ok(base)
    }

    fn atom(&mut self) -> std::result::Result<String, SyntaxError> {
        let tok = self.peek().cloned();
        self.pos += 1;
        match tok {
            Some(Tok::Int(v)) => Ok(v.to_string()),
            Some(Tok::Float(v)) => Ok(format!("{v:?}")),
            Some(Tok::Str(s)) => Ok(format!("\"{}\"", s.replace('"', "\\\""))),
            Some(Tok::Op("(")) => {
                let inner = self.or()?;
                self.expect_op(")")?;
                Ok(format!("({inner})"))
            }
            Some(Tok::Name(n)) => match n.as_str() {
                "True" => Ok("true".into()),
                "False" => Ok("false".into()),
                _ if self.peek_op("(") => {
                    self.pos += 1;
                    let mut args = Vec::new();
                    while !self.peek_op(")") {
                        args.push(self.or()?);
                        if self.peek_op(",") {
                            self.pos += 1;
                        } else {
                            break;
                        }
                    }
                    self.expect_op(")")?;
                    let f = match n.as_str() {
                        "abs" => "math::abs",
                        "min" | "max" | "floor" | "ceil" | "round" => n.as_str(),
                        "int" if args.len() == 1 => return Ok(format!("floor({})", args[0])),
                        "float" if args.len() == 1 => return Ok(format!("({} * 1.0)", args[0])),
                        other => return Err(SyntaxError::UnsupportedFunction(other.to_owned())),
                    };
                    Ok(format!("{f}({})", args.join(", ")))
                }
                _ => Ok(n),
            },
            other => Err(SyntaxError::Unexpected(format!("{other:?}"))),
        }
    }
}

/// Translates a Python condition into a kf-manifest (evalexpr) expression.
///
/// ```
/// use kf_tune::t1::translate_python;
/// assert_eq!(
///     translate_python("32 <= bx * by <= 1024").unwrap(),
///     "((32 <= (bx * by)) && ((bx * by) <= 1024))"
/// );
/// assert_eq!(translate_python("a == 0 or not b").unwrap(), "((a == 0) || (!b))");
/// ```
pub fn translate_python(expr: &str) -> Result<String> {
    let err = |e: SyntaxError| TuneError::Expression {
        expr: expr.to_owned(),
        message: e.to_string(),
    };
    let toks = tokenize(expr).map_err(err)?;
    let mut p = Parser { toks, pos: 0 };
    let out = p.or().map_err(err)?;
    if p.pos != p.toks.len() {
        return Err(err(SyntaxError::Unexpected(format!("{:?}", p.peek()))));
    }
    Ok(out)
}
