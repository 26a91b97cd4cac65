//! Manifest expressions (the `evalexpr` language kf-manifest evaluates) as Python expressions,
//! for the generated module: the parameters of one configuration become constants, sizes and
//! device facts are looked up in a dict `s` at call time.
//!
//! The translation keeps kf-manifest's semantics where Python's differ: integer division and
//! remainder truncate towards zero as in C (`_div`, `_mod` of the module's runtime), `^` is a
//! float power, and `floor`/`ceil`/`round` give floats. Every operator is parenthesised, so
//! Python's precedence never decides. Anything the runtime does not implement (assignments,
//! strings, `math::` functions other than `abs`) is refused with the construct named.

use evalexpr::{build_operator_tree, DefaultNumericTypes, Node, Operator, Value};
use kf_core::{ParamValue, ParamValues};

/// Why an expression cannot become Python.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Untranslatable {
    /// The expression as written.
    pub expr: String,
    /// What in it has no translation.
    pub what: String,
}

/// The construct of an expression that has no Python translation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Construct {
    #[error("a string constant")]
    StringConstant,
    #[error("a tuple constant")]
    TupleConstant,
    #[error("an empty value `()`")]
    EmptyValue,
    #[error("an empty expression")]
    Empty,
    #[error("several expressions")]
    Several,
    #[error("a tuple")]
    Tuple,
    #[error("`{0}` lacks an operand")]
    MissingOperand(String),
    #[error("`{0}` without arguments")]
    NoArguments(String),
    #[error("the function `{0}`")]
    Function(String),
    #[error("the operator `{0}`")]
    Operator(String),
}

/// `text` as a Python expression over `s` (sizes and device facts by name), with `params`
/// substituted as literals.
pub(crate) fn to_python(text: &str, params: &ParamValues) -> Result<String, Untranslatable> {
    let fail = |what: String| Untranslatable {
        expr: text.to_owned(),
        what,
    };
    let node = build_operator_tree::<DefaultNumericTypes>(text)
        .map_err(|e| fail(format!("it does not parse: {e}")))?;
    emit(&node, params).map_err(|c| fail(c.to_string()))
}

/// A Python literal for a parameter value.
pub(crate) fn param_literal(value: &ParamValue) -> String {
    match value {
        ParamValue::Int(v) => v.to_string(),
        ParamValue::Bool(b) => if *b { "True" } else { "False" }.to_owned(),
        ParamValue::Float(f) => float_literal(*f),
        ParamValue::Text(s) => string_literal(s),
    }
}

/// A Python string literal (JSON's string syntax is a subset of Python's).
pub(crate) fn string_literal(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn float_literal(f: f64) -> String {
    if f.is_nan() {
        "float('nan')".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 {
            "float('inf')"
        } else {
            "float('-inf')"
        }
        .to_owned()
    } else {
        // `{:?}` always writes a decimal point or an exponent: Python reads a float.
        format!("{f:?}")
    }
}

fn value_literal(value: &Value<DefaultNumericTypes>) -> Result<String, Construct> {
    Ok(match value {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => float_literal(*f),
        Value::Boolean(b) => if *b { "True" } else { "False" }.to_owned(),
        Value::String(_) => return Err(Construct::StringConstant),
        Value::Tuple(_) => return Err(Construct::TupleConstant),
        Value::Empty => return Err(Construct::EmptyValue),
    })
}

/// The arguments of a function call: one expression, or the elements of a tuple.
fn call_args(node: &Node<DefaultNumericTypes>) -> Vec<&Node<DefaultNumericTypes>> {
    let mut n = node;
    // `f(a, b)` parses as the function over a root node (the parentheses) over a tuple.
    while matches!(n.operator(), Operator::RootNode) && n.children().len() == 1 {
        n = &n.children()[0];
    }
    match n.operator() {
        Operator::Tuple => n.children().iter().collect(),
        _ => vec![n],
    }
}

fn emit(node: &Node<DefaultNumericTypes>, params: &ParamValues) -> Result<String, Construct> {
    let kids = node.children();
    let arg = |i: usize| -> Result<String, Construct> {
        kids.get(i)
            .ok_or_else(|| Construct::MissingOperand(node.operator().to_string()))
            .and_then(|k| emit(k, params))
    };
    let binary =
        |op: &str| -> Result<String, Construct> { Ok(format!("({} {op} {})", arg(0)?, arg(1)?)) };
    let call =
        |f: &str| -> Result<String, Construct> { Ok(format!("{f}({}, {})", arg(0)?, arg(1)?)) };
    match node.operator() {
        Operator::RootNode => match kids.len() {
            1 => Ok(format!("({})", arg(0)?)),
            0 => Err(Construct::Empty),
            _ => Err(Construct::Several),
        },
        Operator::Add => binary("+"),
        Operator::Sub => binary("-"),
        Operator::Mul => binary("*"),
        Operator::Div => call("_div"),
        Operator::Mod => call("_mod"),
        Operator::Exp => call("_pow"),
        Operator::Neg => Ok(format!("(-{})", arg(0)?)),
        Operator::Eq => binary("=="),
        Operator::Neq => binary("!="),
        Operator::Gt => binary(">"),
        Operator::Lt => binary("<"),
        Operator::Geq => binary(">="),
        Operator::Leq => binary("<="),
        Operator::And => binary("and"),
        Operator::Or => binary("or"),
        Operator::Not => Ok(format!("(not {})", arg(0)?)),
        Operator::Const { value } => value_literal(value),
        Operator::VariableIdentifierRead { identifier } => Ok(match params.get(identifier) {
            Some(v) => param_literal(v),
            None => format!("s[{}]", string_literal(identifier)),
        }),
        Operator::FunctionIdentifier { identifier } => {
            let inner = kids
                .first()
                .ok_or_else(|| Construct::NoArguments(identifier.clone()))?;
            let args = call_args(inner)
                .into_iter()
                .map(|a| emit(a, params))
                .collect::<Result<Vec<_>, _>>()?;
            let runtime = match identifier.as_str() {
                "min" => "_min",
                "max" => "_max",
                "if" => "_if",
                "floor" => "_floor",
                "ceil" => "_ceil",
                "round" => "_round",
                "math::abs" => "abs",
                other => return Err(Construct::Function(other.to_owned())),
            };
            Ok(format!("{runtime}({})", args.join(", ")))
        }
        Operator::Tuple => Err(Construct::Tuple),
        other => Err(Construct::Operator(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ParamValues {
        [
            ("TS".to_owned(), ParamValue::Int(16)),
            ("FAST".to_owned(), ParamValue::Bool(true)),
            ("SCALE".to_owned(), ParamValue::Float(0.5)),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn parameters_become_literals_and_other_names_lookups() {
        let py = to_python("M % (TS * WG) == 0 && FAST", &params()).unwrap();
        assert_eq!(py, "(((_mod(s[\"M\"], ((16 * s[\"WG\"]))) == 0) and True))");
    }

    #[test]
    fn division_power_and_functions_use_the_runtime() {
        let py = to_python("max(N / 4, 1) + 2 ^ SCALE", &params()).unwrap();
        assert_eq!(py, "((_max((_div(s[\"N\"], 4)), (1)) + _pow(2, 0.5)))");
        let py = to_python("if(FAST, -TS, 1)", &params()).unwrap();
        assert_eq!(py, "(_if((True), ((-16)), (1)))");
    }

    #[test]
    fn constructs_without_a_translation_are_named() {
        let err = to_python("math::sin(M)", &params()).unwrap_err();
        assert!(err.what.contains("math::sin"), "{err:?}");
        let err = to_python("x = 3", &params()).unwrap_err();
        assert!(err.what.contains("operator"), "{err:?}");
        let err = to_python("M == \"a\"", &params()).unwrap_err();
        assert!(err.what.contains("string"), "{err:?}");
    }

    #[test]
    fn literals_are_python() {
        assert_eq!(param_literal(&ParamValue::Float(1.0)), "1.0");
        assert_eq!(
            param_literal(&ParamValue::Float(f64::INFINITY)),
            "float('inf')"
        );
        assert_eq!(
            param_literal(&ParamValue::Text("a\"b\\".into())),
            "\"a\\\"b\\\\\""
        );
    }

    /// The translation evaluates as kf-manifest does: the same expressions, evaluated by
    /// kf-manifest and by Python over the module runtime's helpers, give the same values.
    #[test]
    fn python_evaluates_as_kf_manifest_does() {
        let Ok(probe) = std::process::Command::new("python3")
            .arg("--version")
            .output()
        else {
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Python,
                "no python3 on PATH",
            );
            return;
        };
        assert!(probe.status.success());
        let runtime = super::super::RUNTIME;
        let start = runtime
            .find("# kf-manifest's expression semantics")
            .unwrap();
        let end = runtime.find("# `CL_DEVICE_SUB_GROUP_SIZES_INTEL`").unwrap();
        let helpers = &runtime[start..end];
        let exprs = [
            "M / TS",
            "-M / TS",
            "M / -4",
            "M % TS",
            "-M % TS",
            "M % -3",
            "M / 2.0",
            "M % 2.5",
            "2 ^ 3",
            "2 ^ 0.5",
            "min(M, TS, 7)",
            "max(M / 3, 2)",
            "if(FAST, M, TS)",
            "if(M > 100, 1, 2)",
            "floor(M / 3.0)",
            "ceil(M / 3.0)",
            "round(2.5)",
            "round(-2.5)",
            "M * TS + 3 - 1",
            "M % TS == 0 && FAST",
            "!(M < TS) || M != 13",
            "-(M - 20) * 2",
            "math::abs(TS - M)",
            "SCALE * M",
            "M >= 13 && M <= 13",
        ];
        // kf-manifest evaluates a tree over a `HashMapContext` with evalexpr's built-ins.
        use evalexpr::{ContextWithMutableVariables, HashMapContext};
        let mut context = HashMapContext::<DefaultNumericTypes>::new();
        for (name, value) in [
            ("M", Value::Int(13)),
            ("TS", Value::Int(16)),
            ("FAST", Value::Boolean(true)),
            ("SCALE", Value::Float(0.5)),
        ] {
            context.set_value(name.into(), value).unwrap();
        }
        let mut script = format!("import math\n{helpers}\ns = {{\"M\": 13}}\n");
        let mut want = Vec::new();
        for text in exprs {
            let value = build_operator_tree::<DefaultNumericTypes>(text)
                .and_then(|n| n.eval_with_context(&context))
                .unwrap();
            let v = match value {
                Value::Boolean(b) => if b { "True" } else { "False" }.to_owned(),
                Value::Int(i) => format!("{:.9}", i as f64),
                Value::Float(f) => format!("{f:.9}"),
                other => panic!("`{text}` gives {other:?}"),
            };
            want.push(v);
            let py = to_python(text, &params()).unwrap();
            script.push_str(&format!(
                "v = {py}\nprint(v if isinstance(v, bool) else format(float(v), '.9f'))\n"
            ));
        }
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        for ((text, w), g) in exprs.iter().zip(&want).zip(&got) {
            assert_eq!(w, g, "`{text}`: kf-manifest says {w}, Python {g}");
        }
        assert_eq!(got.len(), exprs.len());
    }
}
