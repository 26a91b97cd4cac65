//! One tuned [`Configuration`] as a generated crate embeds it, the launch [`Geometry`] it
//! evaluates at the caller's sizes, and the kernel arguments of a launch.

use super::error::Error;
use super::symbols::{DeviceFacts, Param, Site, Symbols};

/// One tuned configuration, as a generated crate embeds it: what `kf export` resolved from
/// the run (parameters, build options) and what depends on the call (constraints, launch
/// geometry, as expressions).
#[derive(Debug, Clone, Copy)]
pub struct Configuration {
    /// Its name in the generated crate (`gemm_0`).
    pub name: &'static str,
    /// The run directory it was exported from.
    pub run: &'static str,
    /// The device it was tuned on.
    pub device: &'static str,
    /// The driver it was tuned with, when the run recorded it.
    pub driver: Option<&'static str>,
    /// The sizes it was tuned at.
    pub tuned_sizes: &'static [(&'static str, i64)],
    /// Its parameter values (every parameter of the manifest, defaults filled in).
    pub params: &'static [(&'static str, Param)],
    /// The OpenCL build options: `-D NAME=value` per parameter, then the manifest's flags.
    pub build_options: &'static str,
    /// The kernel function.
    pub entry: &'static str,
    /// The manifest's constraints, each a boolean expression.
    pub constraints: &'static [&'static str],
    /// The global size per dimension, as expressions.
    pub global: &'static [&'static str],
    /// The work-group size per dimension, as expressions (`None`: the runtime chooses).
    pub local: Option<&'static [&'static str]>,
    /// The kernel source.
    pub source: &'static str,
    /// Its throughput in the run, GFLOP/s.
    pub gflops: Option<f64>,
}

/// The launch geometry of a configuration at one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    /// Global size per dimension.
    pub global: Vec<usize>,
    /// Work-group size per dimension, if the manifest gives one.
    pub local: Option<Vec<usize>>,
}

impl Configuration {
    /// Checks the constraints at `sizes` (by name) on `device` and evaluates the launch
    /// geometry (every size positive, the local dividing the global).
    ///
    /// # Errors
    ///
    /// [`Error::ConstraintViolated`] naming the first rule that fails, [`Error::Expression`]
    /// for an expression that does not evaluate, [`Error::Geometry`].
    pub fn geometry(&self, device: &DeviceFacts, sizes: &[(&str, i64)]) -> Result<Geometry, Error> {
        let symbols = Symbols::new(Some(device), sizes, self.params);
        let site = |field: String, expr: &'static str| Site {
            configuration: self.name,
            field,
            expr,
        };
        for (i, rule) in self.constraints.iter().enumerate() {
            if !site(format!("constraints.rules[{i}]"), rule).eval_bool(&symbols)? {
                return Err(Error::ConstraintViolated {
                    configuration: self.name.to_owned(),
                    rule: (*rule).to_owned(),
                });
            }
        }
        let dims = |exprs: &[&'static str], name: &str| {
            exprs
                .iter()
                .enumerate()
                .map(|(i, e)| site(format!("launch.{name}[{i}]"), e).eval_positive(&symbols))
                .collect::<Result<Vec<_>, _>>()
        };
        let global = dims(self.global, "global")?;
        let local = self.local.map(|l| dims(l, "local")).transpose()?;
        let geometry_error = |message: String| Error::Geometry {
            configuration: self.name.to_owned(),
            message,
        };
        if global.is_empty() || global.len() > 3 {
            return Err(geometry_error(format!("{} dimensions", global.len())));
        }
        if let Some(l) = &local {
            if l.len() != global.len() {
                return Err(geometry_error(format!(
                    "local has {} dimensions, global {}",
                    l.len(),
                    global.len()
                )));
            }
            if let Some((g, l)) = global.iter().zip(l).find(|(g, l)| *g % *l != 0) {
                return Err(geometry_error(format!(
                    "local size {l} does not divide global size {g}"
                )));
            }
        }
        Ok(Geometry { global, local })
    }
}

/// One kernel argument of a launch.
pub(crate) enum Arg {
    I32(i32),
    F32(f32),
    Buffer(usize),
}
