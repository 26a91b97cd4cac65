//! Input distributions of task-file buffers (`init = "uniform(-1, 1)"`), parsed once at load.

use kf_manifest::Expr;
use rand::{Rng, RngCore};

use super::error::InitError;
use super::schema::Dtype;

/// How a buffer's input values are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// Gaussian with this mean and standard deviation (`normal`, `normal(mean, std)`).
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// Uniform over `[lo, hi)` (`uniform(lo, hi)`).
    Uniform {
        /// Lower bound.
        lo: f64,
        /// Upper bound (exclusive).
        hi: f64,
    },
    /// Uniform integers over `[lo, hi]` (`int(lo, hi)`), also for float buffers.
    Int {
        /// Lower bound.
        lo: i64,
        /// Upper bound (inclusive).
        hi: i64,
    },
    /// All zero.
    Zeros,
    /// All one.
    Ones,
    /// `0, 1, 2, …`.
    Arange,
}

/// A buffer's input distribution as the task file gives it: fixed, or integer bounds that are
/// expressions over the sizes (`int(0, num_classes - 1)`: class indices that follow the task's
/// sizes, so that halving `num_classes` for another input set keeps every index in range).
#[derive(Debug, Clone)]
pub enum InitRule {
    /// The same distribution at every size.
    Fixed(Init),
    /// `int(lo, hi)` with `lo` and `hi` evaluated at the sizes of the input set drawn.
    IntAtSizes {
        /// Lower bound (inclusive).
        lo: Expr,
        /// Upper bound (inclusive).
        hi: Expr,
    },
}

impl InitRule {
    /// The bound expressions of `int(lo, hi)` when `text` is that form with at least one bound
    /// that is not a number (`None` otherwise: [`Init::parse`] reads it).
    pub fn int_bound_texts(text: &str) -> Option<(&str, &str)> {
        let inner = text.trim().strip_prefix("int(")?.strip_suffix(')')?;
        let (lo, hi) = inner.split_once(',')?;
        let (lo, hi) = (lo.trim(), hi.trim());
        let numeric = |t: &str| t.parse::<f64>().is_ok();
        let all_numbers = numeric(lo) && numeric(hi);
        (!all_numbers && !hi.contains(',')).then_some((lo, hi))
    }
}

impl Init {
    /// The default for a dtype: `normal` for floats, `int(-100, 100)` for integers.
    pub fn default_for(dtype: Dtype) -> Init {
        match dtype {
            Dtype::I32 => Init::Int { lo: -100, hi: 100 },
            Dtype::F32 | Dtype::F16 => Init::Normal {
                mean: 0.0,
                std: 1.0,
            },
        }
    }

    /// Parses `normal`, `normal(m, s)`, `uniform(lo, hi)`, `int(lo, hi)`, `zeros`, `ones`,
    /// `arange`; the error says what is accepted.
    pub fn parse(text: &str, dtype: Dtype) -> Result<Init, InitError> {
        let t = text.trim();
        let (name, args) = match t.split_once('(') {
            Some((n, rest)) => {
                let Some(inner) = rest.trim_end().strip_suffix(')') else {
                    return Err(InitError::MissingParenthesis { text: t.to_owned() });
                };
                let args: Vec<&str> = inner.split(',').map(str::trim).collect();
                (n.trim(), args)
            }
            None => (t, Vec::new()),
        };
        let floats = |n: usize| -> Result<Vec<f64>, InitError> {
            if args.len() != n {
                return Err(InitError::Arguments {
                    text: t.to_owned(),
                    name: name.to_owned(),
                    count: n,
                });
            }
            args.iter()
                .map(|a| {
                    a.parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite())
                        .ok_or_else(|| InitError::NotFinite {
                            text: t.to_owned(),
                            argument: (*a).to_owned(),
                        })
                })
                .collect()
        };
        let init = match name {
            "normal" if args.is_empty() => Init::Normal {
                mean: 0.0,
                std: 1.0,
            },
            "normal" => {
                let v = floats(2)?;
                if v[1] <= 0.0 {
                    return Err(InitError::NonPositiveStd { text: t.to_owned() });
                }
                Init::Normal {
                    mean: v[0],
                    std: v[1],
                }
            }
            "uniform" => {
                let v = floats(2)?;
                if v[0] >= v[1] {
                    return Err(InitError::EmptyRange { text: t.to_owned() });
                }
                Init::Uniform { lo: v[0], hi: v[1] }
            }
            "int" => {
                let v = floats(2)?;
                if v.iter()
                    .any(|x| x.fract() != 0.0 || x.abs() > f64::from(i32::MAX))
                {
                    return Err(InitError::NotI32Bounds { text: t.to_owned() });
                }
                if v[0] > v[1] {
                    return Err(InitError::ReversedBounds { text: t.to_owned() });
                }
                Init::Int {
                    lo: v[0] as i64,
                    hi: v[1] as i64,
                }
            }
            "zeros" if args.is_empty() => Init::Zeros,
            "ones" if args.is_empty() => Init::Ones,
            "arange" if args.is_empty() => Init::Arange,
            _ => return Err(InitError::Unknown { text: t.to_owned() }),
        };
        if dtype == Dtype::I32 && matches!(init, Init::Normal { .. } | Init::Uniform { .. }) {
            return Err(InitError::FloatForI32 { text: t.to_owned() });
        }
        Ok(init)
    }

    /// Draws `n` values as f64 (integers for `Int`, `Arange`).
    pub fn draw(&self, rng: &mut dyn RngCore, n: usize) -> Vec<f64> {
        match *self {
            Init::Normal { mean, std } => (0..n)
                .map(|_| {
                    // Box-Muller: rand's StandardNormal lives in rand_distr, not worth a crate.
                    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
                    let u2: f64 = rng.random();
                    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                    mean + std * z
                })
                .collect(),
            Init::Uniform { lo, hi } => (0..n).map(|_| rng.random_range(lo..hi)).collect(),
            Init::Int { lo, hi } => (0..n).map(|_| rng.random_range(lo..=hi) as f64).collect(),
            Init::Zeros => vec![0.0; n],
            Init::Ones => vec![1.0; n],
            Init::Arange => (0..n).map(|i| i as f64).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses_the_documented_forms_and_rejects_others() {
        assert_eq!(
            Init::parse("uniform(-1, 2.5)", Dtype::F32),
            Ok(Init::Uniform { lo: -1.0, hi: 2.5 })
        );
        assert_eq!(
            Init::parse("int(0, 9)", Dtype::I32),
            Ok(Init::Int { lo: 0, hi: 9 })
        );
        assert!(Init::parse("uniform(2, 1)", Dtype::F32).is_err());
        assert!(Init::parse("gauss", Dtype::F32).is_err());
        assert!(Init::parse("normal", Dtype::I32).is_err());
        assert!(Init::parse("uniform(0, 1", Dtype::F32).is_err());
    }

    #[test]
    fn draws_stay_in_range() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let v = Init::Int { lo: -2, hi: 2 }.draw(&mut rng, 1000);
        assert!(v
            .iter()
            .all(|x| (-2.0..=2.0).contains(x) && x.fract() == 0.0));
        assert!(v.contains(&2.0) && v.contains(&-2.0));
        let v = Init::Normal {
            mean: 5.0,
            std: 0.5,
        }
        .draw(&mut rng, 4000);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean - 5.0).abs() < 0.1, "{mean}");
    }
}
