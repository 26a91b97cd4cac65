//! The manifests' expressions at a call: the device facts, the parameters, the symbol table
//! (device facts, then sizes, then parameters) and the evaluation of one constraint or
//! launch size with `evalexpr`, with typed errors naming the expression.

use evalexpr::{
    build_operator_tree, ContextWithMutableVariables, DefaultNumericTypes, EvalexprError,
    HashMapContext, Value,
};

use super::error::Error;

/// What the dispatch and the manifests' expressions know of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFacts {
    /// Device name (`CL_DEVICE_NAME`, trimmed).
    pub name: String,
    /// Driver version (`CL_DRIVER_VERSION`, trimmed).
    pub driver_version: String,
    /// Platform name.
    pub platform: String,
    /// The numbers the manifests' expressions may name (`compute_units`,
    /// `max_work_group_size`, `local_mem_bytes`, …), as KernelFoundry's search defines them.
    pub symbols: Vec<(&'static str, i64)>,
}

impl DeviceFacts {
    /// A device known only by name and driver (every symbol absent).
    pub fn new(name: impl Into<String>, driver_version: impl Into<String>) -> Self {
        DeviceFacts {
            name: name.into(),
            driver_version: driver_version.into(),
            platform: String::new(),
            symbols: Vec::new(),
        }
    }

    /// The value of a symbol, if known.
    pub fn symbol(&self, name: &str) -> Option<i64> {
        self.symbols
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }
}

/// A parameter's value, as a manifest's expressions see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Param {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A text.
    Text(&'static str),
}

/// The variables of the manifests' expressions for one configuration at one call: the device
/// facts, then the sizes, then the parameters (a later one replaces an earlier of the same
/// name), in a context of the expression language.
pub(super) struct Symbols(HashMapContext<DefaultNumericTypes>);

impl Symbols {
    pub(super) fn new(
        device: Option<&DeviceFacts>,
        sizes: &[(&str, i64)],
        params: &[(&str, Param)],
    ) -> Self {
        let mut all: Vec<(String, Value<DefaultNumericTypes>)> = Vec::new();
        let mut put = |name: &str, value: Value<DefaultNumericTypes>| {
            all.retain(|(k, _)| k != name);
            all.push((name.to_owned(), value));
        };
        for (k, v) in device.map(|d| d.symbols.as_slice()).unwrap_or_default() {
            put(k, Value::from_int(*v));
        }
        for (k, v) in sizes {
            put(k, Value::from_int(*v));
        }
        for (k, v) in params {
            put(
                k,
                match v {
                    Param::Int(i) => Value::from_int(*i),
                    Param::Float(f) => Value::from_float(*f),
                    Param::Bool(b) => Value::Boolean(*b),
                    Param::Text(t) => Value::String((*t).to_owned()),
                },
            );
        }
        let mut context = HashMapContext::<DefaultNumericTypes>::new();
        for (k, v) in all {
            // Each name once into a fresh context: `set_value` cannot fail on a type change.
            let _ = context.set_value(k, v);
        }
        Symbols(context)
    }
}

/// Where an expression is, for errors.
pub(super) struct Site<'a> {
    pub(super) configuration: &'a str,
    pub(super) field: String,
    pub(super) expr: &'a str,
}

impl Site<'_> {
    fn error(&self, message: String) -> Error {
        Error::Expression {
            configuration: self.configuration.to_owned(),
            field: self.field.clone(),
            expr: self.expr.to_owned(),
            message,
        }
    }

    fn eval(&self, symbols: &Symbols) -> Result<Value<DefaultNumericTypes>, Error> {
        let node = build_operator_tree::<DefaultNumericTypes>(self.expr)
            .map_err(|e| self.error(e.to_string()))?;
        node.eval_with_context(&symbols.0).map_err(|e| match e {
            EvalexprError::VariableIdentifierNotFound(s)
            | EvalexprError::FunctionIdentifierNotFound(s) => {
                self.error(format!("unknown symbol `{s}`"))
            }
            EvalexprError::DivisionError { .. } | EvalexprError::ModulationError { .. } => {
                self.error("division by zero".to_owned())
            }
            other => self.error(other.to_string()),
        })
    }

    /// An integer (an integral float is accepted), as kf-manifest's `Expr::eval_i64`.
    pub(super) fn eval_i64(&self, symbols: &Symbols) -> Result<i64, Error> {
        match self.eval(symbols)? {
            Value::Int(i) => Ok(i),
            Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                Ok(f as i64)
            }
            Value::Float(f) if !f.is_finite() => Err(self.error("division by zero".to_owned())),
            other => Err(self.error(format!("expected an integer, found {other}"))),
        }
    }

    pub(super) fn eval_bool(&self, symbols: &Symbols) -> Result<bool, Error> {
        match self.eval(symbols)? {
            Value::Boolean(b) => Ok(b),
            other => Err(self.error(format!("expected true or false, found {other}"))),
        }
    }

    pub(super) fn eval_positive(&self, symbols: &Symbols) -> Result<usize, Error> {
        let v = self.eval_i64(symbols)?;
        usize::try_from(v)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| self.error(format!("is {v}, not a positive size")))
    }
}
