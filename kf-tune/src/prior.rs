//! Rule priors: user rules that weight (and so order) a parameter space from what is known about
//! the kernel and the device, as in the seed's rule engine ("if the kernel is a matrix product,
//! try BLOCK_SIZE in {64, 128, 256}; TILE_K a multiple of the SIMD width").
//!
//! A rule names one parameter and says which of its values it prefers, either as a list or as
//! an expression over the value, problem sizes and device facts (`TILE_K % sub_group_size ==
//! 0`). It applies when the kernel carries its tag (`matmul`) and its optional condition over
//! device facts and sizes holds. The prior's weight of a configuration is the product of the
//! weights of its values; the [`crate::Tuner`] samples by these weights and exhaustive search
//! visits heavier configurations first.

use indexmap::IndexMap;
use kf_core::{DeviceFacts, ParamValue};
use kf_manifest::Symbols;

use crate::error::{Result, TuneError};
use crate::param::same_value;
use crate::space::{parse_expr, Space};

/// Which values a rule prefers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Preference {
    /// These values.
    Values(Vec<ParamValue>),
    /// Values for which the expression holds (it refers to the parameter by its name).
    Expr(String),
}

/// One rule of a prior.
///
/// ```
/// use kf_tune::prior::Rule;
/// let r = Rule::new("BLOCK_SIZE").when_tag("matmul").prefer_values([64i64, 128, 256]).weight(4.0);
/// assert_eq!(r.param, "BLOCK_SIZE");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The parameter the rule weights.
    pub param: String,
    /// Kernel tag the rule needs (`None`: every kernel).
    pub tag: Option<String>,
    /// Condition over device facts and problem sizes (`None`: always).
    pub when: Option<String>,
    /// Preferred values.
    pub prefer: Preference,
    /// Factor applied to preferred values.
    pub factor: f64,
    /// Factor applied to values that are not preferred.
    pub otherwise: f64,
}

impl Rule {
    /// A rule on `param` that prefers nothing yet (factor 4).
    pub fn new(param: impl Into<String>) -> Self {
        Rule {
            param: param.into(),
            tag: None,
            when: None,
            prefer: Preference::Values(Vec::new()),
            factor: 4.0,
            otherwise: 1.0,
        }
    }

    /// Applies only to kernels tagged `tag`.
    pub fn when_tag(mut self, tag: impl Into<String>) -> Self {
        self.tag = Some(tag.into());
        self
    }

    /// Applies only when `condition` (over device facts and sizes) holds.
    pub fn when(mut self, condition: impl Into<String>) -> Self {
        self.when = Some(condition.into());
        self
    }

    /// Prefers these values.
    pub fn prefer_values<V: Into<ParamValue>>(
        mut self,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        self.prefer = Preference::Values(values.into_iter().map(Into::into).collect());
        self
    }

    /// Prefers values for which `expr` holds.
    pub fn prefer_expr(mut self, expr: impl Into<String>) -> Self {
        self.prefer = Preference::Expr(expr.into());
        self
    }

    /// Weight of preferred values (relative to others).
    pub fn weight(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }

    /// Weight of values that are not preferred (default 1).
    pub fn otherwise(mut self, factor: f64) -> Self {
        self.otherwise = factor;
        self
    }
}

/// What rules may refer to: the kernel's tags, the device and the problem sizes.
#[derive(Debug, Clone, Default)]
pub struct PriorContext {
    /// Tags of the kernel (`matmul`, `conv`, `reduction`, …).
    pub tags: Vec<String>,
    /// The device, when known.
    pub device: Option<DeviceFacts>,
    /// Problem sizes.
    pub sizes: IndexMap<String, i64>,
}

impl PriorContext {
    /// A context with these tags.
    pub fn tagged<S: Into<String>>(tags: impl IntoIterator<Item = S>) -> Self {
        PriorContext {
            tags: tags.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Adds the device.
    pub fn with_device(mut self, device: DeviceFacts) -> Self {
        self.device = Some(device);
        self
    }

    /// Adds a problem size.
    pub fn with_size(mut self, name: impl Into<String>, value: i64) -> Self {
        self.sizes.insert(name.into(), value);
        self
    }

    fn symbols(&self) -> Symbols {
        let mut s = Symbols::new().with_sizes(&self.sizes);
        if let Some(d) = &self.device {
            s = s.with_device(d);
        }
        s
    }
}

/// A set of rules.
///
/// ```
/// use kf_tune::prior::{PriorContext, Rule, RulePrior};
/// use kf_tune::{Param, Space};
/// use kf_core::DeviceFacts;
///
/// let space = Space::builder()
///     .param(Param::powers_of_two("BLOCK_SIZE", 16, 512).unwrap())
///     .param(Param::powers_of_two("TILE_K", 1, 64).unwrap())
///     .build()
///     .unwrap();
/// let mut device = DeviceFacts::unknown("gpu");
/// device.sub_group_sizes = vec![16, 32];
/// let ctx = PriorContext::tagged(["matmul"]).with_device(device);
/// let w = RulePrior::seed_rules().weights(&space, &ctx).unwrap();
/// assert_eq!(w[0][2], 4.0); // BLOCK_SIZE = 64
/// assert_eq!(w[1][5], 4.0); // TILE_K = 32, a multiple of the sub-group size
/// assert_eq!(w[1][0], 1.0);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RulePrior {
    /// The rules, applied in order (their factors multiply).
    pub rules: Vec<Rule>,
}

impl RulePrior {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The seed's examples: for matrix products, `BLOCK_SIZE` in {64, 128, 256} and `TILE_K` a
    /// multiple of the SIMD (sub-group) width; for every kernel, work-group sizes that are
    /// multiples of the sub-group size.
    pub fn seed_rules() -> Self {
        RulePrior::new()
            .rule(
                Rule::new("BLOCK_SIZE")
                    .when_tag("matmul")
                    .prefer_values([64i64, 128, 256]),
            )
            .rule(
                Rule::new("TILE_K")
                    .when_tag("matmul")
                    .prefer_expr("TILE_K % sub_group_size == 0"),
            )
    }

    /// The rules the search and `kf tune` apply by default: [`RulePrior::seed_rules`] and,
    /// for kernels tagged `matmul` (the GEMM templates bound to a matrix-product task carry
    /// the tag), the register blocks and K tiles measured fastest for the GEMM templates on
    /// CPUs and GPUs alike (`kf-mutate/templates/README.md`): `TM` in {4, 8}, `TN` in {2, 4},
    /// `TK` in {64, 128, 256}.
    ///
    /// ```
    /// use kf_tune::prior::{PriorContext, RulePrior};
    /// use kf_tune::{Param, Space};
    ///
    /// let space = Space::builder()
    ///     .param(Param::ints("TM", [1, 2, 4, 8, 16]).unwrap())
    ///     .build()
    ///     .unwrap();
    /// let rules = RulePrior::family_rules();
    /// let w = rules.applied(&space, &PriorContext::tagged(["matmul"])).unwrap().unwrap();
    /// assert_eq!(w[0], [1.0, 1.0, 4.0, 4.0, 1.0]);
    /// // No tag, no rule: the tuner runs without a prior.
    /// assert!(rules.applied(&space, &PriorContext::tagged(["map"])).unwrap().is_none());
    /// ```
    pub fn family_rules() -> Self {
        let mut prior = Self::seed_rules();
        for (param, values) in [
            ("TM", &[4i64, 8][..]),
            ("TN", &[2, 4]),
            ("TK", &[64, 128, 256]),
        ] {
            prior = prior.rule(
                Rule::new(param)
                    .when_tag("matmul")
                    .prefer_values(values.iter().copied()),
            );
        }
        prior
    }

    /// [`weights`](Self::weights) where at least one rule changes a weight, else `None` (a
    /// tuner then runs exactly as without a prior).
    pub fn applied(&self, space: &Space, ctx: &PriorContext) -> Result<Option<Vec<Vec<f64>>>> {
        let weights = self.weights(space, ctx)?;
        let changed = weights.iter().flatten().any(|w| *w != 1.0);
        Ok(changed.then_some(weights))
    }

    /// Weights per parameter and value of `space` (1 where no rule applies).
    pub fn weights(&self, space: &Space, ctx: &PriorContext) -> Result<Vec<Vec<f64>>> {
        let mut w: Vec<Vec<f64>> = space.params().iter().map(|p| vec![1.0; p.len()]).collect();
        let base = ctx.symbols();
        for rule in &self.rules {
            if let Some(tag) = &rule.tag {
                if !ctx.tags.iter().any(|t| t.eq_ignore_ascii_case(tag)) {
                    continue;
                }
            }
            if let Some(cond) = &rule.when {
                let e = parse_expr(cond)?;
                if !eval(&e, &base)? {
                    continue;
                }
            }
            let Some(d) = space.params().iter().position(|p| p.name() == rule.param) else {
                continue;
            };
            let param = &space.params()[d];
            let expr = match &rule.prefer {
                Preference::Expr(text) => Some(parse_expr(text)?),
                Preference::Values(_) => None,
            };
            for (i, value) in param.values().iter().enumerate() {
                let preferred = match (&rule.prefer, &expr) {
                    (Preference::Values(vs), _) => vs.iter().any(|v| same_value(v, value)),
                    (_, Some(e)) => {
                        let mut s = base.clone();
                        s.set_param(param.name(), value);
                        eval(e, &s)?
                    }
                    _ => false,
                };
                w[d][i] *= if preferred {
                    rule.factor
                } else {
                    rule.otherwise
                };
            }
        }
        Ok(w)
    }
}

fn eval(e: &kf_manifest::Expr, s: &Symbols) -> Result<bool> {
    let site = kf_manifest::ExprSite {
        file: "prior".into(),
        field: "rule".into(),
    };
    e.eval_bool(s, &site).map_err(|err| TuneError::Expression {
        expr: e.text().to_owned(),
        message: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use kf_core::ParamValues;

    use super::*;
    use crate::{strategy, Outcome, Param, Tuner};

    /// The GEMM template's register-block and K-tile parameters, as a manifest declares them.
    fn gemm_space() -> Space {
        Space::builder()
            .param(Param::ints("TM", [1, 2, 4, 8, 16]).unwrap())
            .param(Param::ints("TN", [1, 2, 4, 8]).unwrap())
            .param(Param::ints("TK", [16, 32, 64, 128, 256]).unwrap())
            .build()
            .unwrap()
    }

    /// The configurations a tuner proposes, in order, with and without the family rules.
    fn proposals(strategy: &str, tags: &[&str], seed: u64) -> Vec<ParamValues> {
        let space = gemm_space();
        let mut tuner = Tuner::new(&space, 12).seed(seed);
        if let Some(w) = RulePrior::family_rules()
            .applied(&space, &PriorContext::tagged(tags.iter().copied()))
            .unwrap()
        {
            tuner = tuner.prior(w);
        }
        let mut s = strategy::by_name(strategy).unwrap();
        let mut objective = |_: &ParamValues| Ok(Outcome::Time(1.0));
        let result = tuner.run(s.as_mut(), &mut objective).unwrap();
        result.trials.into_iter().map(|t| t.config).collect()
    }

    fn preferred(config: &ParamValues) -> bool {
        let int = |n: &str| config.get(n).and_then(ParamValue::as_i64).unwrap();
        [4, 8].contains(&int("TM")) && [2, 4].contains(&int("TN")) && int("TK") >= 64
    }

    /// A kernel tagged `matmul`: exhaustive search visits the configurations the rules prefer
    /// first, and random draws mostly land on them; untagged, the order is the space's own.
    #[test]
    fn matmul_rules_reorder_the_tuner_s_proposals() {
        let tagged = proposals("brute_force", &["matmul"], 3);
        let plain = proposals("brute_force", &[], 3);
        assert_ne!(tagged, plain);
        assert!(tagged.iter().all(preferred), "{tagged:?}");
        assert!(!plain.iter().any(preferred), "{plain:?}");
        // 12 of the 100 configurations are preferred; a draw picks each parameter's value by
        // its weight (4 against 1), so about half the draws are preferred against 12% without
        // (120 draws over ten seeds).
        let hits = |tags: &[&str]| {
            (0..10)
                .flat_map(|seed| proposals("random", tags, seed))
                .filter(preferred)
                .count()
        };
        let (tagged, uniform) = (hits(&["matmul"]), hits(&["row_norm"]));
        assert!(
            tagged >= 40 && tagged > 2 * uniform,
            "{tagged} of 120 tagged draws preferred, {uniform} untagged"
        );
    }
}
