//! Expressions over parameters, problem sizes and device facts, evaluated by `evalexpr`.
//!
//! Integer arithmetic follows C (`7 / 2 == 3`), so launch sizes such as `N / WPT` mean what a
//! kernel author expects. Booleans are `true`/`false`, with `&&`, `||`, `!` and the usual
//! comparisons.

use std::fmt;

use evalexpr::{
    build_operator_tree, ContextWithMutableVariables, DefaultNumericTypes, EvalexprError,
    HashMapContext, Node, Value,
};
use kf_core::{DeviceFacts, ParamValue, ParamValues};

use crate::error::ManifestError;

/// Values that expressions may refer to: parameters, problem sizes, device facts.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    context: HashMapContext<DefaultNumericTypes>,
}

impl Symbols {
    /// No symbols.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets an integer symbol.
    pub fn set_int(&mut self, name: &str, value: i64) {
        self.set(name, Value::from_int(value));
    }

    /// Sets a float symbol.
    pub fn set_float(&mut self, name: &str, value: f64) {
        self.set(name, Value::from_float(value));
    }

    /// Sets a boolean symbol.
    pub fn set_bool(&mut self, name: &str, value: bool) {
        self.set(name, Value::Boolean(value));
    }

    /// Sets a symbol of any type.
    fn set(&mut self, name: &str, value: Value<DefaultNumericTypes>) {
        // `set_value` only fails when a variable changes type; fall back to replacing it.
        if self.context.set_value(name.into(), value.clone()).is_err() {
            self.replace(name, value);
        }
    }

    fn replace(&mut self, name: &str, value: Value<DefaultNumericTypes>) {
        let mut fresh = HashMapContext::<DefaultNumericTypes>::new();
        for (k, v) in evalexpr::IterateVariablesContext::iter_variables(&self.context) {
            if k != name {
                let _ = fresh.set_value(k, v);
            }
        }
        let _ = fresh.set_value(name.into(), value);
        self.context = fresh;
    }

    /// Sets a parameter value (text values become string symbols).
    pub fn set_param(&mut self, name: &str, value: &ParamValue) {
        match value {
            ParamValue::Int(v) => self.set_int(name, *v),
            ParamValue::Bool(b) => self.set_bool(name, *b),
            ParamValue::Float(f) => self.set_float(name, *f),
            ParamValue::Text(s) => {
                let v = Value::String(s.clone());
                if self.context.set_value(name.into(), v.clone()).is_err() {
                    self.replace(name, v);
                }
            }
        }
    }

    /// Adds every parameter.
    pub fn with_params(mut self, params: &ParamValues) -> Self {
        for (k, v) in params.iter() {
            self.set_param(k, v);
        }
        self
    }

    /// Adds problem sizes.
    pub fn with_sizes<'a>(
        mut self,
        sizes: impl IntoIterator<Item = (&'a String, &'a i64)>,
    ) -> Self {
        for (k, v) in sizes {
            self.set_int(k, *v);
        }
        self
    }

    /// Adds the device facts under the names of [`DeviceFacts::symbols`].
    pub fn with_device(mut self, device: &DeviceFacts) -> Self {
        for (k, v) in device.symbols() {
            self.set_int(k, v);
        }
        self
    }

    /// Whether a symbol is defined.
    pub fn contains(&self, name: &str) -> bool {
        evalexpr::Context::get_value(&self.context, name).is_some()
    }
}

/// A parsed expression with its text, for error messages.
#[derive(Debug, Clone)]
pub struct Expr {
    text: String,
    node: Node<DefaultNumericTypes>,
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Where an expression came from, for error messages: a file and a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprSite {
    /// The file (or another name for the text) the expression is in.
    pub file: String,
    /// The field, such as `launch.global[1]`.
    pub field: String,
}

impl Expr {
    /// Parses `text`; `site` names it in errors.
    pub fn parse(text: &str, site: &ExprSite) -> Result<Self, ManifestError> {
        let node = build_operator_tree::<DefaultNumericTypes>(text).map_err(|e| {
            ManifestError::Expression {
                file: site.file.clone(),
                field: site.field.clone(),
                expr: text.to_owned(),
                message: e.to_string(),
            }
        })?;
        Ok(Expr {
            text: text.to_owned(),
            node,
        })
    }

    /// The expression text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The variables the expression refers to.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.node.iter_variable_identifiers()
    }

    fn eval(
        &self,
        symbols: &Symbols,
        site: &ExprSite,
    ) -> Result<Value<DefaultNumericTypes>, ManifestError> {
        self.node
            .eval_with_context(&symbols.context)
            .map_err(|e| self.error(e, site))
    }

    fn error(&self, e: EvalexprError<DefaultNumericTypes>, site: &ExprSite) -> ManifestError {
        let (file, field, expr) = (site.file.clone(), site.field.clone(), self.text.clone());
        match e {
            EvalexprError::VariableIdentifierNotFound(symbol)
            | EvalexprError::FunctionIdentifierNotFound(symbol) => ManifestError::UnknownSymbol {
                file,
                field,
                expr,
                symbol,
            },
            EvalexprError::DivisionError { .. } | EvalexprError::ModulationError { .. } => {
                ManifestError::DivisionByZero { file, field, expr }
            }
            other => ManifestError::Evaluation {
                file,
                field,
                expr,
                message: other.to_string(),
            },
        }
    }

    /// Evaluates to an integer (an integral float is accepted).
    pub fn eval_i64(&self, symbols: &Symbols, site: &ExprSite) -> Result<i64, ManifestError> {
        let value = self.eval(symbols, site)?;
        match value {
            Value::Int(i) => Ok(i),
            Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                Ok(f as i64)
            }
            Value::Float(f) if !f.is_finite() => Err(ManifestError::DivisionByZero {
                file: site.file.clone(),
                field: site.field.clone(),
                expr: self.text.clone(),
            }),
            other => Err(ManifestError::WrongType {
                file: site.file.clone(),
                field: site.field.clone(),
                expr: self.text.clone(),
                expected: "an integer",
                found: other.to_string(),
            }),
        }
    }

    /// Evaluates to a boolean.
    pub fn eval_bool(&self, symbols: &Symbols, site: &ExprSite) -> Result<bool, ManifestError> {
        match self.eval(symbols, site)? {
            Value::Boolean(b) => Ok(b),
            other => Err(ManifestError::WrongType {
                file: site.file.clone(),
                field: site.field.clone(),
                expr: self.text.clone(),
                expected: "true or false",
                found: other.to_string(),
            }),
        }
    }

    /// Evaluates to a positive integer that fits a `usize` (a launch size).
    pub fn eval_positive(
        &self,
        symbols: &Symbols,
        site: &ExprSite,
    ) -> Result<usize, ManifestError> {
        let v = self.eval_i64(symbols, site)?;
        usize::try_from(v)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| ManifestError::NotPositive {
                file: site.file.clone(),
                field: site.field.clone(),
                expr: self.text.clone(),
                value: v,
            })
    }
}
