//! Constrained parameter spaces: lazy enumeration, exact counting and uniform sampling without
//! materialising the space, and neighbourhoods for local search.
//!
//! A configuration is handled internally as a [`Point`]: one value index per parameter, in
//! declaration order. [`Space::to_values`] and [`Space::point_of`] convert to and from
//! [`ParamValues`].
//!
//! Constraints are compiled when the space is built: each one is checked as soon as the last of
//! the parameters it mentions is bound (so whole subtrees are pruned early), and a constraint over
//! a few parameters becomes a truth table over their value indices, so that checking it is one
//! array lookup. Counting is a depth-first search memoised on the values of the parameters that
//! later constraints still need; uniform sampling descends the same tree weighted by the counts.

use std::collections::HashMap;
use std::sync::OnceLock;

use indexmap::IndexMap;
use kf_core::{DeviceFacts, ParamSpace, ParamValues};
use kf_manifest::{Expr, ExprSite, Manifest, ManifestError, Symbols};
use rand::{Rng, RngCore};

use crate::error::{Result, TuneError};
use crate::param::{Param, ParamKind};

/// A configuration as value indices, one per parameter in declaration order.
pub type Point = Vec<u16>;

/// Largest truth table a constraint is compiled into (entries).
const TABLE_LIMIT: usize = 1 << 22;

/// Which configurations count as next to a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Neighbourhood {
    /// For each parameter, the nearest valid value below and above (ordered parameters; for
    /// categorical ones every other value).
    Adjacent,
    /// Every valid configuration that differs in exactly one parameter.
    Hamming,
}

#[derive(Debug, Clone)]
struct Constraint {
    text: String,
    expr: Expr,
    /// Parameter indices it mentions, ascending.
    vars: Vec<usize>,
    /// Row-major strides of `table` over `vars`.
    strides: Vec<usize>,
    /// Truth table over the value indices of `vars`.
    table: Option<Vec<bool>>,
}

/// Semiring of path weights for counting (`u128`) and prior-weighted sampling (`f64`).
trait Weight: Copy + Default + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    fn one() -> Self;
    fn as_f64(self) -> f64;
}
impl Weight for u128 {
    fn one() -> Self {
        1
    }
    fn as_f64(self) -> f64 {
        self as f64
    }
}
impl Weight for f64 {
    fn one() -> Self {
        1.0
    }
    fn as_f64(self) -> f64 {
        self
    }
}

/// Memoised completion weights: per depth, frontier key → total weight of the completions.
#[derive(Debug, Default)]
struct Memo<W> {
    levels: Vec<HashMap<Vec<u16>, W>>,
}

/// A constrained parameter space.
///
/// ```
/// use kf_tune::{Param, Space};
/// use rand::SeedableRng;
///
/// let space = Space::builder()
///     .param(Param::powers_of_two("TS", 4, 64).unwrap())
///     .param(Param::powers_of_two("WPT", 1, 16).unwrap())
///     .constraint("TS % WPT == 0")
///     .constraint("TS * TS / WPT <= max_work_group_size")
///     .symbol("max_work_group_size", 256)
///     .build()
///     .unwrap();
/// assert_eq!(space.len(), space.iter_points().count() as u128);
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
/// let p = space.sample_point(&mut rng).unwrap();
/// assert!(space.contains(&p));
/// ```
#[derive(Debug)]
pub struct Space {
    params: Vec<Param>,
    constraints: Vec<Constraint>,
    /// Constraints indexed by the depth (parameter index) at which they become checkable.
    at_depth: Vec<Vec<usize>>,
    /// Parameters whose values later constraints need, per depth (the memo key).
    live: Vec<Vec<usize>>,
    base: Symbols,
    /// Explicit members (a replayed cache); constraints are ignored when present.
    members: Option<Members>,
    counts: OnceLock<Memo<u128>>,
    always_false: bool,
}

#[derive(Debug)]
struct Members {
    list: Vec<Point>,
    index: HashMap<Point, usize>,
}

/// Builds a [`Space`]: parameters, constraints, and the symbols (problem sizes, device facts)
/// that constraints may refer to.
#[derive(Debug, Clone, Default)]
pub struct SpaceBuilder {
    params: Vec<Param>,
    constraints: Vec<(String, Option<Expr>)>,
    symbols: Symbols,
}

impl SpaceBuilder {
    /// Adds a parameter (declaration order matters: it is the order of keys and of enumeration).
    pub fn param(mut self, param: Param) -> Self {
        self.params.push(param);
        self
    }

    /// Adds several parameters.
    pub fn params(mut self, params: impl IntoIterator<Item = Param>) -> Self {
        self.params.extend(params);
        self
    }

    /// Adds a constraint expression (evalexpr syntax: `&&`, `||`, `!`, `%`, C integer division).
    pub fn constraint(mut self, expr: impl Into<String>) -> Self {
        self.constraints.push((expr.into(), None));
        self
    }

    /// Adds an already parsed constraint (for example from a [`Manifest`]).
    pub fn constraint_expr(mut self, expr: Expr) -> Self {
        self.constraints.push((expr.text().to_owned(), Some(expr)));
        self
    }

    /// Defines an integer symbol (a problem size or any constant).
    pub fn symbol(mut self, name: &str, value: i64) -> Self {
        self.symbols.set_int(name, value);
        self
    }

    /// Defines problem sizes.
    pub fn sizes<'a>(mut self, sizes: impl IntoIterator<Item = (&'a String, &'a i64)>) -> Self {
        self.symbols = self.symbols.with_sizes(sizes);
        self
    }

    /// Defines the device facts under the names of [`DeviceFacts::symbols`].
    pub fn device(mut self, device: &DeviceFacts) -> Self {
        self.symbols = self.symbols.with_device(device);
        self
    }

    /// Compiles the constraints and returns the space.
    pub fn build(self) -> Result<Space> {
        let SpaceBuilder {
            params,
            constraints,
            symbols,
        } = self;
        for (i, p) in params.iter().enumerate() {
            if params[..i].iter().any(|q| q.name() == p.name()) {
                return Err(TuneError::Param {
                    name: p.name().to_owned(),
                    message: "is declared twice".into(),
                });
            }
        }
        let mut all: Vec<(String, Option<Expr>)> = constraints;
        for p in &params {
            if let Some(c) = p.condition() {
                all.push((c.to_owned(), None));
            }
        }
        let mut compiled = Vec::with_capacity(all.len());
        let mut always_false = false;
        for (text, expr) in all {
            let expr = match expr {
                Some(e) => e,
                None => parse_expr(&text)?,
            };
            match compile(&params, &symbols, text, expr)? {
                Some(c) => compiled.push(c),
                None => always_false = true,
            }
        }
        Ok(Space::assemble(
            params,
            compiled,
            symbols,
            None,
            always_false,
        ))
    }
}

fn site() -> ExprSite {
    ExprSite {
        file: "space".into(),
        field: "constraint".into(),
    }
}

pub(crate) fn parse_expr(text: &str) -> Result<Expr> {
    Expr::parse(text, &site()).map_err(|e| TuneError::Expression {
        expr: text.to_owned(),
        message: e.to_string(),
    })
}

/// Evaluates a constraint; division by zero makes it false, other failures are errors.
fn eval_constraint(expr: &Expr, symbols: &Symbols) -> Result<bool> {
    match expr.eval_bool(symbols, &site()) {
        Ok(b) => Ok(b),
        Err(ManifestError::DivisionByZero { .. }) => Ok(false),
        Err(ManifestError::UnknownSymbol { symbol, .. }) => Err(TuneError::UnknownSymbol {
            expr: expr.text().to_owned(),
            symbol,
        }),
        Err(e) => Err(TuneError::Expression {
            expr: expr.text().to_owned(),
            message: e.to_string(),
        }),
    }
}

/// Compiles one constraint; `None` when it mentions no parameter and is false.
fn compile(
    params: &[Param],
    symbols: &Symbols,
    text: String,
    expr: Expr,
) -> Result<Option<Constraint>> {
    let mut vars: Vec<usize> = Vec::new();
    for name in expr.variables() {
        match params.iter().position(|p| p.name() == name) {
            Some(i) => {
                if !vars.contains(&i) {
                    vars.push(i);
                }
            }
            None if symbols.contains(name) => {}
            None => {
                return Err(TuneError::UnknownSymbol {
                    expr: text,
                    symbol: name.to_owned(),
                })
            }
        }
    }
    vars.sort_unstable();
    if vars.is_empty() {
        return if eval_constraint(&expr, symbols)? {
            // Always true: nothing to check.
            Ok(Some(Constraint {
                text,
                expr,
                vars,
                strides: Vec::new(),
                table: Some(vec![true]),
            }))
        } else {
            Ok(None)
        };
    }
    let mut strides = vec![0usize; vars.len()];
    let mut size = 1usize;
    for (k, &v) in vars.iter().enumerate().rev() {
        strides[k] = size;
        size = size.saturating_mul(params[v].len());
    }
    let table = if size <= TABLE_LIMIT {
        let mut table = vec![false; size];
        let mut sym = symbols.clone();
        let mut idx = vec![0usize; vars.len()];
        for entry in table.iter_mut() {
            for (k, &v) in vars.iter().enumerate() {
                if let Some(value) = params[v].value(idx[k]) {
                    sym.set_param(params[v].name(), value);
                }
            }
            *entry = eval_constraint(&expr, &sym)?;
            // Odometer increment, last variable fastest (row-major).
            for k in (0..vars.len()).rev() {
                idx[k] += 1;
                if idx[k] < params[vars[k]].len() {
                    break;
                }
                idx[k] = 0;
            }
        }
        Some(table)
    } else {
        None
    };
    Ok(Some(Constraint {
        text,
        expr,
        vars,
        strides,
        table,
    }))
}

impl Constraint {
    fn holds(&self, point: &[u16], params: &[Param], base: &Symbols) -> bool {
        match &self.table {
            Some(table) => {
                let mut i = 0usize;
                for (k, &v) in self.vars.iter().enumerate() {
                    i += usize::from(point[v]) * self.strides[k];
                }
                table.get(i).copied().unwrap_or(false)
            }
            None => {
                let mut sym = base.clone();
                for &v in &self.vars {
                    if let Some(value) = params[v].value(usize::from(point[v])) {
                        sym.set_param(params[v].name(), value);
                    }
                }
                eval_constraint(&self.expr, &sym).unwrap_or(false)
            }
        }
    }
}

impl Space {
    /// A builder.
    pub fn builder() -> SpaceBuilder {
        SpaceBuilder::default()
    }

    /// The space of a kernel manifest: its parameters (kinds inferred) and constraint rules, with
    /// the given problem sizes and device facts as symbols.
    pub fn from_manifest(
        manifest: &Manifest,
        sizes: &IndexMap<String, i64>,
        device: &DeviceFacts,
    ) -> Result<Space> {
        let mut b = Space::builder().device(device).sizes(sizes);
        for (name, values) in &manifest.params {
            b = b.param(Param::from_values(name.clone(), values.clone())?);
        }
        for c in &manifest.constraints {
            b = b.constraint_expr(c.clone());
        }
        b.build()
    }

    /// A space whose members are exactly `points` (for example every configuration of a replayed
    /// cache); duplicates and points outside the parameters' domains are dropped.
    pub fn from_points(
        params: Vec<Param>,
        points: impl IntoIterator<Item = Point>,
    ) -> Result<Space> {
        for (i, p) in params.iter().enumerate() {
            if params[..i].iter().any(|q| q.name() == p.name()) {
                return Err(TuneError::Param {
                    name: p.name().to_owned(),
                    message: "is declared twice".into(),
                });
            }
        }
        let mut list = Vec::new();
        let mut index = HashMap::new();
        for p in points {
            let ok = p.len() == params.len()
                && p.iter()
                    .zip(&params)
                    .all(|(i, param)| usize::from(*i) < param.len());
            if ok && !index.contains_key(&p) {
                index.insert(p.clone(), list.len());
                list.push(p);
            }
        }
        Ok(Space::assemble(
            params,
            Vec::new(),
            Symbols::new(),
            Some(Members { list, index }),
            false,
        ))
    }

    fn assemble(
        params: Vec<Param>,
        constraints: Vec<Constraint>,
        base: Symbols,
        members: Option<Members>,
        always_false: bool,
    ) -> Space {
        let n = params.len();
        let mut at_depth = vec![Vec::new(); n.max(1)];
        for (ci, c) in constraints.iter().enumerate() {
            let d = c.vars.last().copied().unwrap_or(0);
            at_depth[d].push(ci);
        }
        // live[d]: parameters < d mentioned by a constraint checked at depth >= d.
        let mut live = vec![Vec::new(); n + 1];
        for (d, slot) in live.iter_mut().enumerate() {
            let mut vs: Vec<usize> = constraints
                .iter()
                .filter(|c| c.vars.last().is_some_and(|&last| last >= d))
                .flat_map(|c| c.vars.iter().copied().filter(|&v| v < d))
                .collect();
            vs.sort_unstable();
            vs.dedup();
            *slot = vs;
        }
        Space {
            params,
            constraints,
            at_depth,
            live,
            base,
            members,
            counts: OnceLock::new(),
            always_false,
        }
    }

    /// The parameters, in declaration order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// The constraint texts (including dependent-domain conditions).
    pub fn constraint_texts(&self) -> impl Iterator<Item = &str> {
        self.constraints.iter().map(|c| c.text.as_str())
    }

    /// Number of parameters.
    pub fn dims(&self) -> usize {
        self.params.len()
    }

    /// Number of raw combinations (product of domain sizes), saturating.
    pub fn raw_len(&self) -> u128 {
        self.params
            .iter()
            .fold(1u128, |a, p| a.saturating_mul(p.len() as u128))
    }

    /// Whether this space is an explicit list of members (a replayed cache).
    pub fn is_explicit(&self) -> bool {
        self.members.is_some()
    }

    /// The explicit members, when the space is a list.
    pub fn members(&self) -> Option<&[Point]> {
        self.members.as_ref().map(|m| m.list.as_slice())
    }

    /// Whether the constraints checked at depth `d` hold for the prefix `point[..=d]`.
    fn ok_at(&self, d: usize, point: &[u16]) -> bool {
        self.at_depth.get(d).is_none_or(|cs| {
            cs.iter()
                .all(|&ci| self.constraints[ci].holds(point, &self.params, &self.base))
        })
    }

    /// Whether `point` is a valid configuration.
    pub fn contains(&self, point: &[u16]) -> bool {
        if point.len() != self.params.len()
            || point
                .iter()
                .zip(&self.params)
                .any(|(i, p)| usize::from(*i) >= p.len())
        {
            return false;
        }
        if let Some(m) = &self.members {
            return m.index.contains_key(point);
        }
        !self.always_false && (0..self.params.len()).all(|d| self.ok_at(d, point))
    }

    /// The first constraint `point` violates, if any.
    pub fn violated(&self, point: &[u16]) -> Option<&str> {
        self.constraints
            .iter()
            .find(|c| !c.holds(point, &self.params, &self.base))
            .map(|c| c.text.as_str())
    }

    fn key(&self, d: usize, point: &[u16]) -> Vec<u16> {
        self.live[d].iter().map(|&v| point[v]).collect()
    }

    /// Total weight of the valid completions of `point[..d]`, memoised.
    fn fill<W: Weight>(
        &self,
        d: usize,
        point: &mut Vec<u16>,
        memo: &mut Memo<W>,
        weight: &dyn Fn(usize, usize) -> W,
    ) -> W {
        let n = self.params.len();
        if d == n {
            return W::one();
        }
        let key = self.key(d, point);
        if let Some(w) = memo.levels[d].get(&key) {
            return *w;
        }
        let mut total = W::default();
        for v in 0..self.params[d].len() {
            point[d] = v as u16;
            if self.ok_at(d, point) {
                let rest = self.fill(d + 1, point, memo, weight);
                total = total + weight(d, v) * rest;
            }
        }
        point[d] = 0;
        memo.levels[d].insert(key, total);
        total
    }

    fn memo<W: Weight>(&self, weight: &dyn Fn(usize, usize) -> W) -> Memo<W> {
        let n = self.params.len();
        let mut memo = Memo {
            levels: (0..=n).map(|_| HashMap::new()).collect(),
        };
        if !self.always_false && self.members.is_none() {
            let mut point = vec![0u16; n];
            self.fill(0, &mut point, &mut memo, weight);
        }
        memo
    }

    fn counts(&self) -> &Memo<u128> {
        self.counts.get_or_init(|| self.memo(&|_, _| 1u128))
    }

    /// Number of valid configurations (exact; computed once and cached).
    pub fn len(&self) -> u128 {
        if let Some(m) = &self.members {
            return m.list.len() as u128;
        }
        if self.always_false {
            return 0;
        }
        if self.params.is_empty() {
            return 1;
        }
        self.counts().levels[0]
            .get(&Vec::new())
            .copied()
            .unwrap_or(0)
    }

    /// True when no configuration is valid.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lookup<W: Weight>(&self, memo: &Memo<W>, d: usize, point: &[u16]) -> W {
        if d == self.params.len() {
            return W::one();
        }
        memo.levels[d]
            .get(&self.key(d, point))
            .copied()
            .unwrap_or_default()
    }

    /// Descends the tree choosing each value with probability proportional to its completion
    /// weight; `None` when the total weight is zero.
    fn descend<W: Weight>(
        &self,
        memo: &Memo<W>,
        weight: &dyn Fn(usize, usize) -> W,
        rng: &mut dyn RngCore,
    ) -> Option<Point> {
        let n = self.params.len();
        let mut point = vec![0u16; n];
        let mut ws: Vec<f64> = Vec::new();
        for d in 0..n {
            ws.clear();
            for v in 0..self.params[d].len() {
                point[d] = v as u16;
                let w = if self.ok_at(d, &point) {
                    (weight(d, v) * self.lookup(memo, d + 1, &point)).as_f64()
                } else {
                    0.0
                };
                ws.push(w);
            }
            let total: f64 = ws.iter().sum();
            if total.is_nan() || total <= 0.0 {
                return None;
            }
            let mut r = rng.random::<f64>() * total;
            let mut chosen = None;
            for (v, w) in ws.iter().enumerate() {
                if *w > 0.0 {
                    chosen = Some(v);
                    if r < *w {
                        break;
                    }
                    r -= *w;
                }
            }
            point[d] = chosen? as u16;
        }
        Some(point)
    }

    /// One valid configuration drawn uniformly at random; `None` when the space is empty.
    pub fn sample_point(&self, rng: &mut dyn RngCore) -> Option<Point> {
        if let Some(m) = &self.members {
            if m.list.is_empty() {
                return None;
            }
            return Some(m.list[rng.random_range(0..m.list.len())].clone());
        }
        if self.always_false {
            return None;
        }
        let counts = self.counts();
        // Exact integer weights: convert each level's counts to f64 (relative precision is ample).
        self.descend(counts, &|_, _| 1u128, rng)
            .filter(|p| self.contains(p))
    }

    /// A sampler that draws valid configurations with probability proportional to the product of
    /// per-value weights `weight(param_index, value_index)` (for rule priors).
    pub fn weighted_sampler(&self, weight: Vec<Vec<f64>>) -> WeightedSampler<'_> {
        let w = weight.clone();
        let f = move |d: usize, v: usize| {
            w.get(d)
                .and_then(|row| row.get(v))
                .copied()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .unwrap_or(1.0)
        };
        let memo = if self.members.is_none() {
            Some(self.memo(&f))
        } else {
            None
        };
        WeightedSampler {
            space: self,
            weight,
            memo,
        }
    }

    /// Every valid configuration, lazily, in lexicographic order of value indices.
    pub fn iter_points(&self) -> Box<dyn Iterator<Item = Point> + '_> {
        if let Some(m) = &self.members {
            return Box::new(m.list.iter().cloned());
        }
        if self.always_false {
            return Box::new(std::iter::empty());
        }
        Box::new(PointIter::new(self))
    }

    /// Every valid configuration after `point` in the order of [`Space::iter_points`], lazily
    /// (from the start when `point` is `None`).
    pub fn iter_after(&self, point: Option<&[u16]>) -> Box<dyn Iterator<Item = Point> + '_> {
        let Some(point) = point else {
            return self.iter_points();
        };
        if let Some(m) = &self.members {
            let start = m.index.get(point).map_or(0, |i| i + 1);
            return Box::new(m.list[start.min(m.list.len())..].iter().cloned());
        }
        if self.always_false || point.len() != self.params.len() || self.params.is_empty() {
            return Box::new(std::iter::empty());
        }
        let n = self.params.len();
        Box::new(PointIter {
            space: self,
            point: point.to_vec(),
            next: point.iter().map(|&v| usize::from(v) + 1).collect(),
            depth: n - 1,
            done: false,
        })
    }

    /// Valid configurations next to `point`.
    pub fn neighbours_of(&self, point: &[u16], kind: Neighbourhood) -> Vec<Point> {
        let mut out = Vec::new();
        if point.len() != self.params.len() {
            return out;
        }
        let mut q = point.to_vec();
        for (d, p) in self.params.iter().enumerate() {
            let cur = usize::from(point[d]);
            let ordered = p.kind().is_ordered();
            if kind == Neighbourhood::Adjacent && ordered {
                for dir in [-1i64, 1] {
                    let mut i = cur as i64 + dir;
                    while i >= 0 && (i as usize) < p.len() {
                        q[d] = i as u16;
                        if self.contains(&q) {
                            out.push(q.clone());
                            break;
                        }
                        i += dir;
                    }
                }
            } else {
                for v in 0..p.len() {
                    if v != cur {
                        q[d] = v as u16;
                        if self.contains(&q) {
                            out.push(q.clone());
                        }
                    }
                }
            }
            q[d] = point[d];
        }
        out
    }

    /// The parameter values of `point`.
    pub fn to_values(&self, point: &[u16]) -> ParamValues {
        self.params
            .iter()
            .zip(point)
            .filter_map(|(p, &i)| {
                p.value(usize::from(i))
                    .map(|v| (p.name().to_owned(), v.clone()))
            })
            .collect()
    }

    /// The point of `values` (every parameter must be present with an allowed value; extra
    /// names are ignored). Does not check constraints.
    pub fn point_of(&self, values: &ParamValues) -> Result<Point> {
        let mut out = Vec::with_capacity(self.params.len());
        for p in &self.params {
            let v = values
                .get(p.name())
                .ok_or_else(|| TuneError::InvalidConfig {
                    config: values.to_string(),
                    reason: format!("missing parameter `{}`", p.name()),
                })?;
            let i = p.position(v).ok_or_else(|| TuneError::InvalidConfig {
                config: values.to_string(),
                reason: format!("{}={v} is not an allowed value", p.name()),
            })?;
            out.push(i as u16);
        }
        Ok(out)
    }

    /// Model features of `point` in `[0, 1]`: the value's position for ordered parameters, and
    /// for categorical parameters the index scaled likewise (models treat them as unordered).
    pub fn features(&self, point: &[u16]) -> Vec<f64> {
        self.params
            .iter()
            .zip(point)
            .map(|(p, &i)| {
                if p.len() <= 1 {
                    0.0
                } else {
                    f64::from(i) / (p.len() - 1) as f64
                }
            })
            .collect()
    }
}

/// Draws configurations with prior weights (see [`Space::weighted_sampler`]).
#[derive(Debug)]
pub struct WeightedSampler<'s> {
    space: &'s Space,
    weight: Vec<Vec<f64>>,
    memo: Option<Memo<f64>>,
}

impl WeightedSampler<'_> {
    /// The weight of a configuration (product of its values' weights).
    pub fn weight_of(&self, point: &[u16]) -> f64 {
        point
            .iter()
            .enumerate()
            .map(|(d, &v)| self.w(d, usize::from(v)))
            .product()
    }

    fn w(&self, d: usize, v: usize) -> f64 {
        self.weight
            .get(d)
            .and_then(|row| row.get(v))
            .copied()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .unwrap_or(1.0)
    }

    /// One configuration, or `None` when every valid configuration has weight zero.
    pub fn sample(&self, rng: &mut dyn RngCore) -> Option<Point> {
        match (&self.memo, self.space.members()) {
            (_, Some(list)) => {
                let ws: Vec<f64> = list
                    .iter()
                    .map(|p| {
                        p.iter()
                            .enumerate()
                            .map(|(d, &v)| self.w(d, usize::from(v)))
                            .product()
                    })
                    .collect();
                let total: f64 = ws.iter().sum();
                if total.is_nan() || total <= 0.0 {
                    return None;
                }
                let mut r = rng.random::<f64>() * total;
                for (p, w) in list.iter().zip(&ws) {
                    if r < *w {
                        return Some(p.clone());
                    }
                    r -= *w;
                }
                list.iter()
                    .zip(&ws)
                    .rev()
                    .find(|(_, w)| **w > 0.0)
                    .map(|(p, _)| p.clone())
            }
            (Some(memo), None) => {
                let f = |d: usize, v: usize| self.w(d, v);
                self.space
                    .descend(memo, &f, rng)
                    .filter(|p| self.space.contains(p))
            }
            (None, None) => None,
        }
    }
}

/// Lazy depth-first enumeration with pruning by constraints and by memoised counts.
struct PointIter<'s> {
    space: &'s Space,
    point: Vec<u16>,
    /// Next value index to try at each depth.
    next: Vec<usize>,
    depth: usize,
    done: bool,
}

impl<'s> PointIter<'s> {
    fn new(space: &'s Space) -> Self {
        let n = space.params.len();
        PointIter {
            space,
            point: vec![0; n],
            next: vec![0; n.max(1)],
            depth: 0,
            done: false,
        }
    }
}

impl Iterator for PointIter<'_> {
    type Item = Point;
    fn next(&mut self) -> Option<Point> {
        let n = self.space.params.len();
        if self.done {
            return None;
        }
        if n == 0 {
            self.done = true;
            return Some(Vec::new());
        }
        let counts = self.space.counts();
        loop {
            let d = self.depth;
            let v = self.next[d];
            if v >= self.space.params[d].len() {
                if d == 0 {
                    self.done = true;
                    return None;
                }
                self.depth -= 1;
                continue;
            }
            self.next[d] = v + 1;
            self.point[d] = v as u16;
            if !self.space.ok_at(d, &self.point) {
                continue;
            }
            if d + 1 == n {
                return Some(self.point.clone());
            }
            if self.space.lookup(counts, d + 1, &self.point) == 0 {
                continue;
            }
            self.depth = d + 1;
            self.next[d + 1] = 0;
        }
    }
}

impl ParamSpace for Space {
    type Error = TuneError;

    fn names(&self) -> Vec<String> {
        self.params.iter().map(|p| p.name().to_owned()).collect()
    }

    fn count(&self) -> Result<u64> {
        Ok(u64::try_from(self.len()).unwrap_or(u64::MAX))
    }

    fn enumerate(&self) -> Box<dyn Iterator<Item = ParamValues> + '_> {
        Box::new(self.iter_points().map(|p| self.to_values(&p)))
    }

    fn sample(&self, rng: &mut dyn RngCore) -> Result<Option<ParamValues>> {
        Ok(self.sample_point(rng).map(|p| self.to_values(&p)))
    }

    fn neighbours(&self, point: &ParamValues) -> Result<Vec<ParamValues>> {
        self.validate(point)?;
        let p = self.point_of(point)?;
        Ok(self
            .neighbours_of(&p, Neighbourhood::Adjacent)
            .iter()
            .map(|q| self.to_values(q))
            .collect())
    }

    fn validate(&self, point: &ParamValues) -> Result<()> {
        let p = self.point_of(point)?;
        if self.contains(&p) {
            return Ok(());
        }
        let reason = match self.violated(&p) {
            Some(rule) => format!("violates `{rule}`"),
            None => "is not a member of the space".to_owned(),
        };
        Err(TuneError::InvalidConfig {
            config: point.to_string(),
            reason,
        })
    }
}

impl ParamKind {
    /// A short lower-case name (`int`, `pow2`, `float`, `categorical`, `bool`).
    pub fn as_str(self) -> &'static str {
        match self {
            ParamKind::Int => "int",
            ParamKind::PowerOfTwo => "pow2",
            ParamKind::Float => "float",
            ParamKind::Categorical => "categorical",
            ParamKind::Bool => "bool",
        }
    }
}
