//! Typed tunable parameters: integer lists and ranges, powers of two, floats, categories and
//! booleans, with an optional condition that makes the domain depend on other parameters.

use kf_core::ParamValue;

use crate::error::{Result, TuneError};

/// The most values one parameter may have (values are indexed by `u16`).
pub const MAX_VALUES: usize = u16::MAX as usize;

/// What kind of values a parameter takes; decides how neighbourhoods and models treat it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamKind {
    /// Integers in increasing order (tile sizes, unroll factors).
    Int,
    /// Powers of two in increasing order.
    PowerOfTwo,
    /// Floating-point values in increasing order.
    Float,
    /// Unordered categories (type names, algorithm variants).
    Categorical,
    /// `false` / `true`.
    Bool,
}

impl ParamKind {
    /// Whether the values have a meaningful order (adjacent values are similar).
    pub fn is_ordered(self) -> bool {
        !matches!(self, ParamKind::Categorical)
    }
}

/// One tunable parameter: a name, its allowed values, and optionally a condition over this and
/// earlier parameters that restricts its domain (a dependent domain, such as "`TILE_K` is a
/// multiple of `VW`": `Param::powers_of_two("TILE_K", 1, 64)?.when("TILE_K % VW == 0")`).
///
/// ```
/// use kf_tune::Param;
/// let ts = Param::powers_of_two("TS", 8, 64).unwrap();
/// assert_eq!(ts.len(), 4);
/// let unroll = Param::range("UNROLL", 1, 8, 1).unwrap();
/// assert_eq!(unroll.len(), 8);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    name: String,
    values: Vec<ParamValue>,
    kind: ParamKind,
    when: Option<String>,
}

/// Equality of parameter values across representations: `16`, `16.0` and, for 0/1, `false`/`true`
/// are the same value.
pub fn same_value(a: &ParamValue, b: &ParamValue) -> bool {
    match (a, b) {
        (ParamValue::Text(x), ParamValue::Text(y)) => x == y,
        (ParamValue::Text(_), _) | (_, ParamValue::Text(_)) => false,
        (x, y) => match (x.as_f64(), y.as_f64()) {
            (Some(p), Some(q)) => p == q,
            _ => false,
        },
    }
}

impl Param {
    fn checked(name: impl Into<String>, values: Vec<ParamValue>, kind: ParamKind) -> Result<Self> {
        let name = name.into();
        if values.is_empty() {
            return Err(TuneError::Param {
                name,
                message: "has no values".into(),
            });
        }
        if values.len() > MAX_VALUES {
            return Err(TuneError::Param {
                name,
                message: format!("has {} values (at most {MAX_VALUES})", values.len()),
            });
        }
        for (i, v) in values.iter().enumerate() {
            if values[..i].iter().any(|w| same_value(v, w)) {
                return Err(TuneError::Param {
                    name,
                    message: format!("value {v} is listed twice"),
                });
            }
            if let ParamValue::Float(f) = v {
                if !f.is_finite() {
                    return Err(TuneError::Param {
                        name,
                        message: format!("value {f} is not finite"),
                    });
                }
            }
        }
        Ok(Param {
            name,
            values,
            kind,
            when: None,
        })
    }

    /// Integers, in the order given (give them in increasing order for adjacency to mean
    /// "next larger").
    pub fn ints(name: impl Into<String>, values: impl IntoIterator<Item = i64>) -> Result<Self> {
        Self::checked(
            name,
            values.into_iter().map(ParamValue::Int).collect(),
            ParamKind::Int,
        )
    }

    /// `start, start + step, …` up to and including `end`.
    pub fn range(name: impl Into<String>, start: i64, end: i64, step: i64) -> Result<Self> {
        let name = name.into();
        if step <= 0 || end < start {
            return Err(TuneError::Param {
                name,
                message: format!("empty range {start}..={end} step {step}"),
            });
        }
        let n = (end - start) / step + 1;
        if n as u64 > MAX_VALUES as u64 {
            return Err(TuneError::Param {
                name,
                message: format!("range has {n} values (at most {MAX_VALUES})"),
            });
        }
        Self::checked(
            name,
            (0..n).map(|i| ParamValue::Int(start + i * step)).collect(),
            ParamKind::Int,
        )
    }

    /// The powers of two from `min` to `max` inclusive (both rounded into powers of two).
    pub fn powers_of_two(name: impl Into<String>, min: i64, max: i64) -> Result<Self> {
        let name = name.into();
        if min <= 0 || max < min {
            return Err(TuneError::Param {
                name,
                message: format!("no powers of two between {min} and {max}"),
            });
        }
        let mut v = 1i64;
        let mut values = Vec::new();
        while v <= max {
            if v >= min {
                values.push(ParamValue::Int(v));
            }
            match v.checked_mul(2) {
                Some(n) => v = n,
                None => break,
            }
        }
        Self::checked(name, values, ParamKind::PowerOfTwo)
    }

    /// Floating-point values, in increasing order.
    pub fn floats(name: impl Into<String>, values: impl IntoIterator<Item = f64>) -> Result<Self> {
        Self::checked(
            name,
            values.into_iter().map(ParamValue::Float).collect(),
            ParamKind::Float,
        )
    }

    /// Unordered categories, rendered verbatim.
    pub fn categorical(
        name: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self> {
        Self::checked(
            name,
            values
                .into_iter()
                .map(|s| ParamValue::Text(s.into()))
                .collect(),
            ParamKind::Categorical,
        )
    }

    /// `false` and `true`.
    pub fn boolean(name: impl Into<String>) -> Result<Self> {
        Self::checked(
            name,
            vec![ParamValue::Bool(false), ParamValue::Bool(true)],
            ParamKind::Bool,
        )
    }

    /// Any list of values; the kind is inferred (all integers: [`ParamKind::PowerOfTwo`] when
    /// every value is a positive power of two in increasing order, else [`ParamKind::Int`];
    /// numbers: [`ParamKind::Float`]; booleans: [`ParamKind::Bool`]; otherwise categorical).
    pub fn from_values(name: impl Into<String>, values: Vec<ParamValue>) -> Result<Self> {
        let all = |f: fn(&ParamValue) -> bool| values.iter().all(f);
        let kind = if all(|v| matches!(v, ParamValue::Bool(_))) {
            ParamKind::Bool
        } else if all(|v| matches!(v, ParamValue::Int(_))) {
            let ints: Vec<i64> = values.iter().filter_map(ParamValue::as_i64).collect();
            let pow2 = ints.iter().all(|v| *v > 0 && v.count_ones() == 1);
            let increasing = ints.windows(2).all(|w| w[0] < w[1]);
            if pow2 && increasing && ints.len() > 1 {
                ParamKind::PowerOfTwo
            } else {
                ParamKind::Int
            }
        } else if all(|v| v.as_f64().is_some()) {
            ParamKind::Float
        } else {
            ParamKind::Categorical
        };
        Self::checked(name, values, kind)
    }

    /// Makes the domain depend on other parameters: only values for which `condition` holds are
    /// valid. The condition may refer to this parameter, others, problem sizes and device facts.
    pub fn when(mut self, condition: impl Into<String>) -> Self {
        self.when = Some(condition.into());
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The allowed values, in order.
    pub fn values(&self) -> &[ParamValue] {
        &self.values
    }

    /// The kind.
    pub fn kind(&self) -> ParamKind {
        self.kind
    }

    /// The dependent-domain condition, if any.
    pub fn condition(&self) -> Option<&str> {
        self.when.as_deref()
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Always false: a parameter has at least one value.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The index of `value`, comparing across representations ([`same_value`]).
    pub fn position(&self, value: &ParamValue) -> Option<usize> {
        self.values.iter().position(|v| same_value(v, value))
    }

    /// The value at `index`.
    pub fn value(&self, index: usize) -> Option<&ParamValue> {
        self.values.get(index)
    }
}
