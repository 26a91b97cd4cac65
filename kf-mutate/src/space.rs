//! A manifest's parameter space at given problem sizes on a given device: which configurations
//! are feasible, which are neighbours, and how to repair an infeasible one.

use std::collections::HashSet;

use indexmap::IndexMap;
use kf_core::{DeviceFacts, ParamValue, ParamValues};
use kf_manifest::{ExprSite, Manifest, ManifestError, Symbols};
use rand::{Rng, RngCore};

/// Names of the device symbols manifest expressions may use, from [`DeviceFacts::symbols`].
fn device_symbol_names() -> Vec<&'static str> {
    DeviceFacts::unknown("")
        .symbols()
        .into_iter()
        .map(|(n, _)| n)
        .collect()
}

/// A manifest's parameter space evaluated at problem sizes on a device.
///
/// A configuration is feasible when every constraint holds, the launch geometry evaluates
/// (positive sizes, work-groups dividing the global size) and, when the device is known, the
/// work-group fits the device's limits. Without device facts, constraints that refer to device
/// symbols (`max_work_group_size`, `local_mem_bytes`, …) are skipped: the evaluator will judge
/// them on the real device.
///
/// # Example
///
/// ```
/// use kf_core::ParamValues;
/// use kf_manifest::Manifest;
/// use kf_mutate::Feasibility;
///
/// let manifest = Manifest::parse(
///     r#"
///     entry = "gemm"
///     language = "opencl"
///     [params]
///     TS = [8, 16, 32]
///     [constraints]
///     rules = ["M % TS == 0", "TS * TS <= max_work_group_size"]
///     [launch]
///     global = ["N", "M"]
///     local = ["TS", "TS"]
///     "#,
///     "inline.toml",
///     None,
/// )
/// .unwrap();
/// let sizes = [("M".to_string(), 48i64), ("N".to_string(), 64)].into_iter().collect();
/// let space = Feasibility::new(&manifest, &sizes, None);
/// assert!(space.is_feasible(&ParamValues::new().with("TS", 16i64)));
/// assert!(!space.is_feasible(&ParamValues::new().with("TS", 32i64))); // 48 % 32 != 0
/// ```
#[derive(Debug, Clone)]
pub struct Feasibility<'a> {
    manifest: &'a Manifest,
    sizes: &'a IndexMap<String, i64>,
    device: Option<&'a DeviceFacts>,
    device_names: Vec<&'static str>,
}

impl<'a> Feasibility<'a> {
    /// The space of `manifest` at `sizes` on `device` (`None`: device checks are skipped).
    pub fn new(
        manifest: &'a Manifest,
        sizes: &'a IndexMap<String, i64>,
        device: Option<&'a DeviceFacts>,
    ) -> Self {
        Feasibility {
            manifest,
            sizes,
            device,
            device_names: device_symbol_names(),
        }
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        self.manifest
    }

    fn symbols(&self, params: &ParamValues) -> Symbols {
        let mut s = Symbols::new();
        if let Some(device) = self.device {
            s = s.with_device(device);
        }
        s.with_sizes(self.sizes).with_params(params)
    }

    /// An error that only says a device symbol is missing while no device is known.
    fn skippable(&self, e: &ManifestError) -> bool {
        self.device.is_none()
            && matches!(e, ManifestError::UnknownSymbol { symbol, .. }
                if self.device_names.contains(&symbol.as_str()))
    }

    /// Why `params` is infeasible, or `None` when it is feasible. `params` should name every
    /// parameter (see [`Feasibility::complete`]).
    pub fn violation(&self, params: &ParamValues) -> Option<String> {
        let symbols = self.symbols(params);
        for (i, rule) in self.manifest.constraints.iter().enumerate() {
            let site = ExprSite {
                file: self.manifest.file.clone(),
                field: format!("constraints.rules[{i}]"),
            };
            match rule.eval_bool(&symbols, &site) {
                Ok(true) => {}
                Ok(false) => return Some(format!("`{}` does not hold", rule.text())),
                Err(e) if self.skippable(&e) => {}
                Err(e) => return Some(e.to_string()),
            }
        }
        // Every kernel's launch: one for a manifest with `[launch]`, each of a sequence's.
        match self.manifest.launch_ranges(&symbols) {
            Ok(ranges) => ranges
                .iter()
                .find_map(|(entry, range)| self.exceeds_device(range, entry)),
            Err(e) if self.skippable(&e) => None,
            Err(e) => Some(e.to_string()),
        }
    }

    /// Why `range`'s work-group does not fit the device, if it does not; `entry` names the
    /// kernel in a sequence's message.
    fn exceeds_device(&self, range: &kf_core::NdRange, entry: &str) -> Option<String> {
        let (Some(device), Some(local)) = (self.device, &range.local) else {
            return None;
        };
        let of = match self.manifest.is_sequence() {
            true => format!(" (kernel `{entry}`)"),
            false => String::new(),
        };
        let items: u64 = local.iter().map(|l| *l as u64).product();
        if items > device.max_work_group_size {
            return Some(format!(
                "work-group of {items} work-items{of} exceeds the device's {}",
                device.max_work_group_size
            ));
        }
        for (i, l) in local.iter().enumerate() {
            if let Some(max) = device.max_work_item_sizes.get(i) {
                if *l as u64 > *max {
                    return Some(format!(
                        "work-group extent {l} in dimension {i}{of} exceeds the device's {max}"
                    ));
                }
            }
        }
        None
    }

    /// Whether `params` is feasible.
    pub fn is_feasible(&self, params: &ParamValues) -> bool {
        self.violation(&self.complete(params)).is_none()
    }

    /// The allowed values of a parameter in neighbourhood order: numbers ascending, other
    /// values in declaration order.
    pub fn ordered_values(&self, name: &str) -> Vec<ParamValue> {
        let Some(values) = self.manifest.params.get(name) else {
            return Vec::new();
        };
        let mut values = values.clone();
        if values.iter().all(|v| v.as_f64().is_some()) {
            values.sort_by(|a, b| {
                a.as_f64()
                    .unwrap_or(0.0)
                    .total_cmp(&b.as_f64().unwrap_or(0.0))
            });
            values.dedup_by(|a, b| a.as_f64() == b.as_f64());
        }
        values
    }

    /// `params` restricted to the manifest's parameters, each snapped to an allowed value
    /// (the nearest for numbers, the first otherwise), with missing ones at their first value.
    pub fn complete(&self, params: &ParamValues) -> ParamValues {
        let mut out = ParamValues::new();
        for (name, allowed) in &self.manifest.params {
            let Some(first) = allowed.first() else {
                continue;
            };
            let value = match params.get(name) {
                Some(v) if allowed.iter().any(|a| same(a, v)) => v.clone(),
                Some(v) => match v.as_f64() {
                    Some(x) => allowed
                        .iter()
                        .filter_map(|a| a.as_f64().map(|y| (a, (x - y).abs())))
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                        .map_or_else(|| first.clone(), |(a, _)| a.clone()),
                    None => first.clone(),
                },
                None => first.clone(),
            };
            out.set(name.clone(), value);
        }
        out
    }

    /// The configurations one step from `params` on one parameter (the previous and next value
    /// in [`Feasibility::ordered_values`]), feasible or not, each with a note such as `TM 4→8`.
    pub fn steps(&self, params: &ParamValues) -> Vec<(String, ParamValue, String)> {
        let mut out = Vec::new();
        for name in self.manifest.params.keys() {
            let values = self.ordered_values(name);
            if values.len() < 2 {
                continue;
            }
            let Some(current) = params.get(name) else {
                continue;
            };
            let Some(i) = values.iter().position(|v| same(v, current)) else {
                continue;
            };
            for j in [i.checked_sub(1), Some(i + 1)].into_iter().flatten() {
                if let Some(v) = values.get(j) {
                    out.push((name.clone(), v.clone(), format!("{name} {current}→{v}")));
                }
            }
        }
        out
    }

    /// A feasible configuration close to `desired`: `desired` itself when feasible, else the
    /// nearest one found by changing parameters other than `pinned` (one, then two at a time,
    /// smallest moves first, ties broken by `rng`), then by random sampling. At most `budget`
    /// configurations are tried; `None` when none of them is feasible.
    pub fn repair(
        &self,
        desired: &ParamValues,
        pinned: &[&str],
        rng: &mut dyn RngCore,
        budget: usize,
    ) -> Option<ParamValues> {
        let desired = self.complete(desired);
        if self.violation(&desired).is_none() {
            return Some(desired);
        }
        let free: Vec<(String, Vec<ParamValue>, usize)> = self
            .manifest
            .params
            .keys()
            .filter(|n| !pinned.contains(&n.as_str()))
            .filter_map(|n| {
                let values = self.ordered_values(n);
                let current = desired.get(n)?;
                let i = values.iter().position(|v| same(v, current))?;
                (values.len() > 1).then(|| (n.clone(), values, i))
            })
            .collect();
        let mut tried = 0usize;
        // One parameter changed: every other value, nearest first.
        let mut singles: Vec<(usize, u64, usize, usize)> = Vec::new();
        for (p, (_, values, i)) in free.iter().enumerate() {
            for j in 0..values.len() {
                if j != *i {
                    singles.push((i.abs_diff(j), rng.next_u64(), p, j));
                }
            }
        }
        singles.sort_unstable();
        for (_, _, p, j) in &singles {
            tried += 1;
            if tried > budget {
                return None;
            }
            let mut c = desired.clone();
            c.set(free[*p].0.clone(), free[*p].1[*j].clone());
            if self.violation(&c).is_none() {
                return Some(c);
            }
        }
        // Two parameters changed.
        let mut pairs: Vec<(usize, u64, usize, usize, usize, usize)> = Vec::new();
        for (a, (_, va, ia)) in free.iter().enumerate() {
            for (b, (_, vb, ib)) in free.iter().enumerate().skip(a + 1) {
                for ja in (0..va.len()).filter(|j| j != ia) {
                    for jb in (0..vb.len()).filter(|j| j != ib) {
                        pairs.push((
                            ia.abs_diff(ja) + ib.abs_diff(jb),
                            rng.next_u64(),
                            a,
                            ja,
                            b,
                            jb,
                        ));
                    }
                }
            }
        }
        pairs.sort_unstable();
        for (_, _, a, ja, b, jb) in &pairs {
            tried += 1;
            if tried > budget {
                return None;
            }
            let mut c = desired.clone();
            c.set(free[*a].0.clone(), free[*a].1[*ja].clone());
            c.set(free[*b].0.clone(), free[*b].1[*jb].clone());
            if self.violation(&c).is_none() {
                return Some(c);
            }
        }
        // Anything goes for the free parameters.
        let mut seen = HashSet::new();
        while tried < budget && !free.is_empty() {
            tried += 1;
            let mut c = desired.clone();
            for (name, values, _) in &free {
                c.set(
                    name.clone(),
                    values[rng.random_range(0..values.len())].clone(),
                );
            }
            if seen.insert(c.canonical_key()) && self.violation(&c).is_none() {
                return Some(c);
            }
        }
        None
    }
}

/// Equality of parameter values across representations (`16` and `16.0` are the same value).
pub(crate) fn same(a: &ParamValue, b: &ParamValue) -> bool {
    match (a, b) {
        (ParamValue::Text(x), ParamValue::Text(y)) => x == y,
        (ParamValue::Text(_), _) | (_, ParamValue::Text(_)) => false,
        _ => a.as_f64() == b.as_f64(),
    }
}
