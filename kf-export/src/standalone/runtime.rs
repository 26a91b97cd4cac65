//! The run-time support of a crate written by `kf export --rust`: the tables of tuned
//! configurations, the dispatch rule, the constraint and launch-geometry evaluation at the
//! caller's sizes, the argument checks, and the launch through OpenCL (`opencl3`).
//!
//! This file is written verbatim into every exported crate (`src/kf_runtime.rs`) and is also a
//! module of `kf-export` (`kf_export::runtime`), where it is type-checked and tested: it uses
//! only `std`, `opencl3` and `evalexpr`.
//!
//! * [`Device::open`] finds the OpenCL runtime the way KernelFoundry's OpenCL backend does
//!   (`OPENCL_DYLIB_PATH` as set; else `KF_OPENCL_ICD`; else an `opencl.json` written by
//!   `kf setup` or `scripts/setup.sh`; else the system loader) and picks a device (a GPU, then
//!   an accelerator, then a CPU, PoCL last; `KF_OPENCL_DEVICE` picks by kind, `P:D` index or
//!   name part). No runtime or device is [`Error::Unavailable`], never a panic.
//! * [`Table::choose`] evaluates every configuration's manifest constraints and launch
//!   geometry at the caller's sizes on the caller's device (the manifests' expression language,
//!   `evalexpr`, with the symbols KernelFoundry's search used: device facts, then sizes, then
//!   parameters) and applies [`choose`]: the caller's device first, by name and driver; then
//!   the nearest tuned sizes by `Σ |ln(caller / tuned)|`; ties to the larger tuned sizes.
//! * [`Table::launch`] checks the arguments against the task's [`Signature`], builds the
//!   kernel with the options resolved at export time (`-D NAME=value` per parameter, then the
//!   manifest's flags), keeps it in a [`KernelCache`], launches it and reads the outputs back.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

use evalexpr::{
    build_operator_tree, ContextWithMutableVariables, DefaultNumericTypes, EvalexprError,
    HashMapContext, Value,
};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{
    Device as ClDevice, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU,
    CL_DEVICE_TYPE_GPU,
};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_device_id, CL_BLOCKING};

// ---------------------------------------------------------------------------------------------
// Errors

/// What can go wrong in a call of the generated crate.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No OpenCL runtime, no platform or no device (matching `KF_OPENCL_DEVICE`).
    Unavailable {
        /// What was tried, and how to get a runtime.
        message: String,
    },
    /// The call's arguments do not fit the task's signature.
    BadCall {
        /// The task.
        task: String,
        /// What is wrong.
        message: String,
    },
    /// There is no configuration with this index.
    NoSuchConfiguration {
        /// The task.
        task: String,
        /// The index asked for.
        index: usize,
        /// Configurations in the table.
        len: usize,
    },
    /// A manifest constraint does not hold at these sizes on this device.
    ConstraintViolated {
        /// The configuration.
        configuration: String,
        /// The rule, as the manifest writes it.
        rule: String,
    },
    /// A manifest expression (constraint or launch size) failed to evaluate, or gave a value
    /// of the wrong kind.
    Expression {
        /// The configuration (or `signature of TASK`).
        configuration: String,
        /// The manifest field (`launch.global[0]`).
        field: String,
        /// The expression.
        expr: String,
        /// Why.
        message: String,
    },
    /// The launch geometry evaluated but is not valid (a local size not dividing the global).
    Geometry {
        /// The configuration.
        configuration: String,
        /// Why.
        message: String,
    },
    /// No configuration can run at these sizes on this device.
    NoConfiguration {
        /// The task.
        task: String,
        /// The sizes (`M=64,N=64,K=64`).
        sizes: String,
        /// The device.
        device: String,
        /// Each configuration's failing rule.
        reasons: String,
    },
    /// The OpenCL compiler rejected the kernel.
    Compile {
        /// The configuration.
        configuration: String,
        /// The build log.
        log: String,
    },
    /// An OpenCL call failed.
    OpenCl {
        /// What was being done.
        what: String,
        /// The OpenCL error code.
        code: i32,
    },
    /// A stored reference case cannot be read, or a result does not match it.
    Reference {
        /// The case (`case 0 (ROWS=32,COLS=32)`).
        case: String,
        /// What is wrong.
        message: String,
    },
    /// A file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unavailable { message } => write!(f, "no OpenCL device: {message}"),
            Error::BadCall { task, message } => write!(f, "{task}: {message}"),
            Error::NoSuchConfiguration { task, index, len } => write!(
                f,
                "{task}: there is no configuration {index} (the table has {len})"
            ),
            Error::ConstraintViolated {
                configuration,
                rule,
            } => write!(f, "{configuration}: constraint `{rule}` does not hold"),
            Error::Expression {
                configuration,
                field,
                expr,
                message,
            } => write!(f, "{configuration}: {field} = `{expr}`: {message}"),
            Error::Geometry {
                configuration,
                message,
            } => write!(f, "{configuration}: launch: {message}"),
            Error::NoConfiguration {
                task,
                sizes,
                device,
                reasons,
            } => write!(
                f,
                "{task}: no exported configuration can run at {sizes} on {device}: {reasons}"
            ),
            Error::Compile { configuration, log } => {
                write!(f, "{configuration}: the kernel does not build: {log}")
            }
            Error::OpenCl { what, code } => write!(f, "{what} failed with OpenCL error {code}"),
            Error::Reference { case, message } => write!(f, "reference {case}: {message}"),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn cl_error(what: impl Into<String>) -> impl FnOnce(opencl3::error_codes::ClError) -> Error {
    let what = what.into();
    move |e| Error::OpenCl { what, code: e.0 }
}

// ---------------------------------------------------------------------------------------------
// Signatures

/// A name or an expression: borrowed in a generated crate's `static`, owned when built.
pub type Text = Cow<'static, str>;

/// Element type of a buffer or a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// 32-bit float (`f32`, OpenCL `float`).
    F32,
    /// 16-bit float (`half::f16`, OpenCL `half`; the kernel needs `cl_khr_fp16`). Buffers only.
    F16,
    /// 32-bit signed integer (`i32`, OpenCL `int`).
    I32,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 => 2,
        }
    }

    /// The Rust element type's name (`f16` is `half::f16`).
    pub fn rust(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::I32 => "i32",
        }
    }
}

/// How the kernel uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only.
    Input,
    /// Written only: the call reads it back.
    Output,
    /// Read and written in place: the caller's data goes to the device first and comes back.
    InOut,
}

impl Access {
    /// Whether the kernel writes the buffer (the call reads it back).
    pub fn writes(self) -> bool {
        self != Access::Input
    }

    /// Whether the kernel reads the caller's data.
    pub fn reads(self) -> bool {
        self != Access::Output
    }
}

/// One buffer of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferSig {
    /// The task's name for it (`A`).
    pub name: Text,
    /// Element type.
    pub dtype: Dtype,
    /// Number of elements, an expression over the size names (`M * K`).
    pub len: Text,
    /// How the kernel uses it.
    pub access: Access,
}

/// One scalar argument of a task: the caller passes its value; the task's own value is the
/// documented default.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarSig {
    /// The task's name for it (`alpha`).
    pub name: Text,
    /// `F32` or `I32`.
    pub dtype: Dtype,
    /// The value the task gives (the search measured with it).
    pub value: f64,
}

/// One kernel argument, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSig {
    /// A size, passed as `int`.
    Size(Text),
    /// The scalar with this index in [`Signature::scalars`].
    Scalar(usize),
    /// The buffer with this index in [`Signature::buffers`].
    Buffer(usize),
}

/// A task's kernel signature: the generated functions take the sizes, then the scalars, then
/// the buffers, each in the order given here; the kernel receives them in
/// [`Signature::args`] order.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    /// Task name.
    pub task: Text,
    /// Size names, in the order the generated function takes them.
    pub sizes: Cow<'static, [Text]>,
    /// Scalars, in the order the generated function takes them.
    pub scalars: Cow<'static, [ScalarSig]>,
    /// Buffers, in the order the generated function takes them.
    pub buffers: Cow<'static, [BufferSig]>,
    /// The kernel's arguments in order.
    pub args: Cow<'static, [ArgSig]>,
}

impl Signature {
    /// The size names as plain strings.
    pub fn size_names(&self) -> Vec<&str> {
        self.sizes.iter().map(|s| s.as_ref()).collect()
    }
}

/// Sizes as `M=64,N=64,K=64`.
pub fn sizes_text<'a>(sizes: impl IntoIterator<Item = (&'a str, i64)>) -> String {
    sizes
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

// ---------------------------------------------------------------------------------------------
// Host data

/// An element type a generated function passes: its [`Dtype`] and its bytes.
pub trait Element: Copy + Send + Sync + 'static {
    /// The signature's name for it.
    const DTYPE: Dtype;
    /// The value that marks an element the kernel never wrote (a NaN with a payload for the
    /// float types; `0x7FC0DEAD` for `i32`).
    const POISON: Self;
    /// Appends the value's native-order bytes.
    fn put(self, out: &mut Vec<u8>);
    /// The value of the first `DTYPE.size()` native-order bytes (zero where there are fewer).
    fn take(bytes: &[u8]) -> Self;
    /// The value as f64 (for comparisons).
    fn to_f64(self) -> f64;
    /// The value's bits, widened (to recognise [`Element::POISON`]).
    fn bits(self) -> u64;
}

/// The first `N` bytes of `b`, zero-padded.
fn array<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    for (o, v) in out.iter_mut().zip(b) {
        *o = *v;
    }
    out
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
    const POISON: Self = f32::from_bits(0x7FC0_DEAD);
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn take(b: &[u8]) -> Self {
        f32::from_ne_bytes(array(b))
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}

impl Element for i32 {
    const DTYPE: Dtype = Dtype::I32;
    const POISON: Self = 0x7FC0_DEAD;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn take(b: &[u8]) -> Self {
        i32::from_ne_bytes(array(b))
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn bits(self) -> u64 {
        u64::from(self as u32)
    }
}

/// The native-order bytes of `values` (for [`HostData`]).
pub fn to_bytes<T: Element>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * T::DTYPE.size());
    for v in values {
        v.put(&mut out);
    }
    out
}

/// Copies native-order bytes back into `out`.
pub fn from_bytes<T: Element>(bytes: &[u8], out: &mut [T]) {
    for (v, c) in out.iter_mut().zip(bytes.chunks_exact(T::DTYPE.size())) {
        *v = T::take(c);
    }
}

/// Host data of one buffer of a call.
#[derive(Debug)]
pub enum HostData<'a> {
    /// An input, read by the kernel.
    In(&'a [u8]),
    /// An output: written to the device first (for in-place kernels), read back after.
    Out(&'a mut [u8]),
}

impl HostData<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            HostData::In(s) => s,
            HostData::Out(s) => s,
        }
    }
}

/// The value of one scalar argument of a call, in [`Signature::scalars`] order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScalarArg {
    /// A `float` argument.
    F32(f32),
    /// An `int` argument.
    I32(i32),
}

impl ScalarArg {
    fn dtype(self) -> Dtype {
        match self {
            ScalarArg::F32(_) => Dtype::F32,
            ScalarArg::I32(_) => Dtype::I32,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The dispatch rule

/// One tuned configuration as the dispatch rule sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Device name the configuration was tuned on.
    pub device: &'a str,
    /// Driver version it was tuned with, when the run recorded it.
    pub driver: Option<&'a str>,
    /// Sizes it was tuned at, by name.
    pub sizes: &'a [(&'a str, i64)],
    /// Whether its manifest constraints hold at the caller's sizes on the caller's device.
    pub valid: bool,
}

/// The call: the caller's device and sizes.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The caller's device name.
    pub device: &'a str,
    /// The caller's driver version.
    pub driver: &'a str,
    /// The caller's sizes, by name.
    pub sizes: &'a [(&'a str, i64)],
}

/// How well a configuration's device matches the caller's: 0 same name and driver (or a driver
/// the run did not record), 1 same name and another driver, 2 another device.
pub fn device_tier(candidate: &Candidate<'_>, caller: &Caller<'_>) -> u8 {
    if candidate.device.trim() != caller.device.trim() {
        return 2;
    }
    match candidate.driver {
        Some(d) if d.trim() != caller.driver.trim() => 1,
        _ => 0,
    }
}

/// The distance between the caller's sizes and tuned sizes: the sum over the caller's size
/// names of `|ln(caller / tuned)|` (a name the configuration did not record adds nothing; a
/// size that is not positive makes the distance infinite).
pub fn distance(caller: &[(&str, i64)], tuned: &[(&str, i64)]) -> f64 {
    let mut total = 0.0;
    for (name, value) in caller {
        let Some((_, t)) = tuned.iter().find(|(n, _)| n == name) else {
            continue;
        };
        if *value <= 0 || *t <= 0 {
            return f64::INFINITY;
        }
        total += (*value as f64 / *t as f64).ln().abs();
    }
    total
}

/// The sum of the logarithms of tuned sizes: the tie-break prefers the larger.
fn log_volume(sizes: &[(&str, i64)]) -> f64 {
    sizes.iter().map(|(_, v)| (*v.max(&1) as f64).ln()).sum()
}

/// The index of the configuration that serves `caller`, or `None` when no candidate is valid:
/// among the valid candidates, the best [`device_tier`], then the smallest [`distance`]
/// (distances within rounding of each other tie), then the larger tuned sizes, then the
/// earlier candidate.
pub fn choose(candidates: &[Candidate<'_>], caller: &Caller<'_>) -> Option<usize> {
    let mut best: Option<(usize, u8, f64, f64)> = None;
    for (i, c) in candidates.iter().enumerate() {
        if !c.valid {
            continue;
        }
        let tier = device_tier(c, caller);
        let dist = distance(caller.sizes, c.sizes);
        let volume = log_volume(c.sizes);
        let better = match best {
            None => true,
            Some((_, bt, bd, bv)) => {
                let tol = 1e-9 * (1.0 + bd.abs());
                tier < bt
                    || (tier == bt
                        && (dist < bd - tol || ((dist - bd).abs() <= tol && volume > bv)))
            }
        };
        if better {
            best = Some((i, tier, dist, volume));
        }
    }
    best.map(|(i, ..)| i)
}

// ---------------------------------------------------------------------------------------------
// Device facts and expressions

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
struct Symbols(HashMapContext<DefaultNumericTypes>);

impl Symbols {
    fn new(device: Option<&DeviceFacts>, sizes: &[(&str, i64)], params: &[(&str, Param)]) -> Self {
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
struct Site<'a> {
    configuration: &'a str,
    field: String,
    expr: &'a str,
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
    fn eval_i64(&self, symbols: &Symbols) -> Result<i64, Error> {
        match self.eval(symbols)? {
            Value::Int(i) => Ok(i),
            Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                Ok(f as i64)
            }
            Value::Float(f) if !f.is_finite() => Err(self.error("division by zero".to_owned())),
            other => Err(self.error(format!("expected an integer, found {other}"))),
        }
    }

    fn eval_bool(&self, symbols: &Symbols) -> Result<bool, Error> {
        match self.eval(symbols)? {
            Value::Boolean(b) => Ok(b),
            other => Err(self.error(format!("expected true or false, found {other}"))),
        }
    }

    fn eval_positive(&self, symbols: &Symbols) -> Result<usize, Error> {
        let v = self.eval_i64(symbols)?;
        usize::try_from(v)
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| self.error(format!("is {v}, not a positive size")))
    }
}

// ---------------------------------------------------------------------------------------------
// Tables

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

/// A task's signature and its tuned configurations.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// The task's kernel signature.
    pub signature: &'static Signature,
    /// The tuned configurations.
    pub configurations: &'static [Configuration],
}

impl Table {
    fn bad_call(&self, message: String) -> Error {
        Error::BadCall {
            task: self.signature.task.to_string(),
            message,
        }
    }

    /// Configuration `index`.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchConfiguration`].
    pub fn configuration(&self, index: usize) -> Result<&'static Configuration, Error> {
        self.configurations
            .get(index)
            .ok_or_else(|| Error::NoSuchConfiguration {
                task: self.signature.task.to_string(),
                index,
                len: self.configurations.len(),
            })
    }

    /// The caller's sizes by name, in the signature's order; each must be positive and fit
    /// an OpenCL `int`.
    fn sizes(&self, values: &[i64]) -> Result<Vec<(&'static str, i64)>, Error> {
        let sig: &'static Signature = self.signature;
        if values.len() != sig.sizes.len() {
            return Err(self.bad_call(format!(
                "{} sizes given, the task has {} ({})",
                values.len(),
                sig.sizes.len(),
                sig.size_names().join(", ")
            )));
        }
        let mut out = Vec::with_capacity(values.len());
        for (name, v) in sig.sizes.iter().zip(values) {
            if *v <= 0 || *v > i64::from(i32::MAX) {
                return Err(self.bad_call(format!("{name} = {v} is not a positive OpenCL int")));
            }
            out.push((name.as_ref(), *v));
        }
        Ok(out)
    }

    /// Whether configuration `index` can run at `sizes` (in the signature's order) on
    /// `device`: its constraints hold and its launch geometry is valid.
    ///
    /// # Errors
    ///
    /// As [`Configuration::geometry`]'s, [`Error::BadCall`] for sizes that do not fit the
    /// signature, [`Error::NoSuchConfiguration`].
    pub fn check(&self, index: usize, device: &DeviceFacts, sizes: &[i64]) -> Result<(), Error> {
        let named = self.sizes(sizes)?;
        self.configuration(index)?
            .geometry(device, &named)
            .map(|_| ())
    }

    /// The configuration that serves a call at `sizes` (in the signature's order) on `device`:
    /// among those whose constraints hold, the one [`choose`] picks.
    ///
    /// # Errors
    ///
    /// [`Error::NoConfiguration`], naming each configuration's failing rule, when none can
    /// run; [`Error::BadCall`] for sizes that do not fit the signature.
    pub fn choose(&self, device: &DeviceFacts, sizes: &[i64]) -> Result<usize, Error> {
        let named = self.sizes(sizes)?;
        let mut reasons = Vec::new();
        let candidates: Vec<Candidate<'_>> = self
            .configurations
            .iter()
            .map(|c| {
                let valid = match c.geometry(device, &named) {
                    Ok(_) => true,
                    Err(e) => {
                        reasons.push(e.to_string());
                        false
                    }
                };
                Candidate {
                    device: c.device,
                    driver: c.driver,
                    sizes: c.tuned_sizes,
                    valid,
                }
            })
            .collect();
        let caller = Caller {
            device: &device.name,
            driver: &device.driver_version,
            sizes: &named,
        };
        choose(&candidates, &caller).ok_or_else(|| Error::NoConfiguration {
            task: self.signature.task.to_string(),
            sizes: sizes_text(named.iter().copied()),
            device: device.name.clone(),
            reasons: reasons.join("; "),
        })
    }

    /// Checks a call's scalars and buffers against the signature at `sizes`.
    fn check_args(
        &self,
        sizes: &[(&str, i64)],
        scalars: &[ScalarArg],
        data: &[HostData<'_>],
    ) -> Result<(), Error> {
        let sig = self.signature;
        if scalars.len() != sig.scalars.len() {
            return Err(self.bad_call(format!(
                "{} scalars given, the task has {}",
                scalars.len(),
                sig.scalars.len()
            )));
        }
        if let Some((s, v)) = sig
            .scalars
            .iter()
            .zip(scalars)
            .find(|(s, v)| v.dtype() != s.dtype)
        {
            return Err(self.bad_call(format!(
                "scalar {} is {}, not {}",
                s.name,
                s.dtype.rust(),
                v.dtype().rust()
            )));
        }
        if data.len() != sig.buffers.len() {
            return Err(self.bad_call(format!(
                "{} buffers given, the task has {}",
                data.len(),
                sig.buffers.len()
            )));
        }
        let symbols = Symbols::new(None, sizes, &[]);
        let context = format!("signature of {}", sig.task);
        for (i, (b, d)) in sig.buffers.iter().zip(data).enumerate() {
            let site = Site {
                configuration: &context,
                field: format!("buffers[{i}]"),
                expr: &b.len,
            };
            let len = site.eval_i64(&symbols)?;
            self.check_buffer(b, d, len, sizes)?;
        }
        Ok(())
    }

    fn check_buffer(
        &self,
        b: &BufferSig,
        d: &HostData<'_>,
        len: i64,
        sizes: &[(&str, i64)],
    ) -> Result<(), Error> {
        let is_out = matches!(d, HostData::Out(_));
        if is_out != b.access.writes() {
            let role = if b.access.writes() {
                "written by the kernel (pass it as an output)"
            } else {
                "an input"
            };
            return Err(self.bad_call(format!("buffer {} is {role}", b.name)));
        }
        let want = usize::try_from(len)
            .unwrap_or(0)
            .saturating_mul(b.dtype.size());
        let got = d.bytes().len();
        if got != want {
            return Err(self.bad_call(format!(
                "buffer {} has {} elements, {} = {len} at {}",
                b.name,
                got / b.dtype.size(),
                b.len,
                sizes_text(sizes.iter().copied())
            )));
        }
        Ok(())
    }

    /// Runs configuration `index` at `sizes` (in the signature's order) on `device`, with the
    /// values of the task's scalars (in [`Signature::scalars`] order) and one [`HostData`] per
    /// buffer of the signature (outputs are read back into theirs). The compiled kernel is
    /// kept in `cache` (or taken from it); use one cache per device.
    ///
    /// # Errors
    ///
    /// [`Error::BadCall`] for arguments that do not fit the signature, the errors of
    /// [`Table::check`], [`Error::Compile`], and [`Error::OpenCl`] when launching fails.
    pub fn launch(
        &self,
        device: &Device,
        cache: &KernelCache,
        index: usize,
        sizes: &[i64],
        scalars: &[ScalarArg],
        data: &mut [HostData<'_>],
    ) -> Result<(), Error> {
        let named = self.sizes(sizes)?;
        self.check_args(&named, scalars, data)?;
        let c = self.configuration(index)?;
        let geometry = c.geometry(&device.facts, &named)?;
        let mut kernels = cache.lock();
        if !kernels.contains_key(c.name) {
            kernels.insert(c.name, device.build(c)?);
        }
        let Some(kernel) = kernels.get(c.name) else {
            return Err(self.bad_call(format!("{}: the kernel cache lost it", c.name)));
        };
        let mut buffers = Vec::with_capacity(data.len());
        for d in data.iter() {
            buffers.push(device.upload(d.bytes())?);
        }
        let mut ints = Vec::with_capacity(self.signature.args.len());
        for a in self.signature.args.iter() {
            ints.push(match a {
                ArgSig::Size(name) => Arg::I32(
                    named
                        .iter()
                        .find(|(n, _)| *n == name.as_ref())
                        .and_then(|(_, v)| i32::try_from(*v).ok())
                        .unwrap_or(0),
                ),
                ArgSig::Scalar(i) => match scalars.get(*i) {
                    Some(ScalarArg::F32(v)) => Arg::F32(*v),
                    Some(ScalarArg::I32(v)) => Arg::I32(*v),
                    None => return Err(self.bad_call(format!("no scalar {i}"))),
                },
                ArgSig::Buffer(i) => Arg::Buffer(*i),
            });
        }
        device.run(kernel, &ints, &buffers, &geometry)?;
        for (d, buffer) in data.iter_mut().zip(&buffers) {
            if let HostData::Out(s) = d {
                device.download(buffer, s)?;
            }
        }
        Ok(())
    }
}

/// One kernel argument of a launch.
enum Arg {
    I32(i32),
    F32(f32),
    Buffer(usize),
}

/// Compiled kernels by configuration name, for one [`Device`] (a kernel belongs to its
/// device's OpenCL context).
#[derive(Default)]
pub struct KernelCache {
    kernels: Mutex<HashMap<&'static str, Kernel>>,
}

impl fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelCache")
            .field("kernels", &self.len())
            .finish()
    }
}

impl KernelCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Kernels held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it holds no kernel.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The map, locked for one launch (setting a kernel's arguments is not thread-safe).
    fn lock(&self) -> MutexGuard<'_, HashMap<&'static str, Kernel>> {
        // A panic elsewhere while holding the lock leaves the map intact.
        self.kernels.lock().unwrap_or_else(|e| e.into_inner())
    }
}

// ---------------------------------------------------------------------------------------------
// The device

/// An OpenCL device with its context and queue: what the generated functions run on.
pub struct Device {
    facts: DeviceFacts,
    context: Context,
    queue: CommandQueue,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("facts", &self.facts)
            .finish()
    }
}

/// The variable that picks the device: `cpu`, `gpu`, `accelerator`, `P:D` (platform and
/// device index) or a part of the device's or platform's name.
pub const KF_OPENCL_DEVICE: &str = "KF_OPENCL_DEVICE";

/// The variable that points at an OpenCL runtime: an `opencl.json` (or a folder holding one,
/// or a `.runtime` folder with one), a folder of `.icd` files, an `.icd` file or a driver
/// library.
pub const KF_OPENCL_ICD: &str = "KF_OPENCL_ICD";

/// The sentence every "no runtime" error ends with.
const HOW_TO_GET_A_RUNTIME: &str = "To get an OpenCL runtime: run `kf setup` (Intel CPU \
OpenCL runtime into the per-user folder, no root needed), or install PoCL (sudo apt-get \
install pocl-opencl-icd ocl-icd-libopencl1), or set KF_OPENCL_ICD to an OpenCL driver \
library, an .icd file, or an opencl.json.";

pub(crate) struct Listed {
    platform_index: usize,
    device_index: usize,
    platform: String,
    device: ClDevice,
    name: String,
    kind: u8,
}

impl Device {
    /// Opens the OpenCL device: finds the runtime (see the module docs), lists the devices and
    /// picks one (`KF_OPENCL_DEVICE`, else a GPU, an accelerator, then a CPU; PoCL last).
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when there is no OpenCL runtime, no device, or none matching
    /// `KF_OPENCL_DEVICE`; [`Error::OpenCl`] when the context or queue cannot be created.
    pub fn open() -> Result<Device, Error> {
        let how = prepare_runtime();
        let listed = list_devices(how)?;
        let wanted = std::env::var(KF_OPENCL_DEVICE).unwrap_or_default();
        let Some(chosen) = select(&listed, &wanted) else {
            let names: Vec<String> = listed
                .iter()
                .map(|d| format!("{}:{} {}", d.platform_index, d.device_index, d.name))
                .collect();
            return Err(Error::Unavailable {
                message: format!(
                    "no device matches {KF_OPENCL_DEVICE}={wanted}; there are {}",
                    names.join(", ")
                ),
            });
        };
        let facts = facts_of(chosen);
        let context = Context::from_device(&chosen.device)
            .map_err(cl_error(format!("creating a context on {}", chosen.name)))?;
        let queue = CommandQueue::create_default_with_properties(&context, 0, 0)
            .map_err(cl_error("creating a command queue"))?;
        Ok(Device {
            facts,
            context,
            queue,
        })
    }

    /// The device's facts (the dispatch's and the manifests' view of it).
    pub fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.facts.name
    }

    fn build(&self, c: &Configuration) -> Result<Kernel, Error> {
        let program =
            Program::create_and_build_from_source(&self.context, c.source, c.build_options)
                .map_err(|log| Error::Compile {
                    configuration: c.name.to_owned(),
                    log,
                })?;
        Kernel::create(&program, c.entry).map_err(cl_error(format!(
            "{}: creating the kernel `{}`",
            c.name, c.entry
        )))
    }

    fn upload(&self, bytes: &[u8]) -> Result<Buffer<u8>, Error> {
        // SAFETY: no host pointer is given; the buffer is at least one byte.
        let mut buffer = unsafe {
            Buffer::<u8>::create(
                &self.context,
                CL_MEM_READ_WRITE,
                bytes.len().max(1),
                std::ptr::null_mut(),
            )
        }
        .map_err(cl_error("allocating a buffer"))?;
        if !bytes.is_empty() {
            // SAFETY: a blocking write of `bytes.len()` bytes into a buffer at least that long.
            unsafe {
                self.queue
                    .enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, bytes, &[])
            }
            .map_err(cl_error("writing a buffer"))?;
        }
        Ok(buffer)
    }

    fn download(&self, buffer: &Buffer<u8>, out: &mut [u8]) -> Result<(), Error> {
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: a blocking read of `out.len()` bytes from a buffer allocated that long.
        unsafe {
            self.queue
                .enqueue_read_buffer(buffer, CL_BLOCKING, 0, out, &[])
        }
        .map_err(cl_error("reading a buffer"))?;
        Ok(())
    }

    fn run(
        &self,
        kernel: &Kernel,
        args: &[Arg],
        buffers: &[Buffer<u8>],
        geometry: &Geometry,
    ) -> Result<(), Error> {
        let mut exec = ExecuteKernel::new(kernel);
        for a in args {
            // SAFETY: the arguments follow the task's signature, which the kernel was
            // searched and checked with: `int`, `float` and global buffers, in order.
            unsafe {
                match a {
                    Arg::I32(v) => exec.set_arg(v),
                    Arg::F32(v) => exec.set_arg(v),
                    Arg::Buffer(i) => match buffers.get(*i) {
                        Some(b) => exec.set_arg(b),
                        None => {
                            return Err(cl_error("setting a buffer argument")(
                                opencl3::error_codes::ClError(-51),
                            ))
                        }
                    },
                };
            }
        }
        exec.set_global_work_sizes(&geometry.global);
        if let Some(local) = &geometry.local {
            exec.set_local_work_sizes(local);
        }
        // SAFETY: every argument is set; the buffers live until after `finish`.
        unsafe { exec.enqueue_nd_range(&self.queue) }.map_err(cl_error("launching the kernel"))?;
        self.queue
            .finish()
            .map_err(cl_error("waiting for the kernel"))
    }
}

fn list_devices(how: &str) -> Result<Vec<Listed>, Error> {
    let platforms = get_platforms().map_err(|e| Error::Unavailable {
        message: format!(
            "clGetPlatformIDs failed with {} using {how}. {HOW_TO_GET_A_RUNTIME}",
            e.0
        ),
    })?;
    let mut out = Vec::new();
    for (pi, platform) in platforms.iter().enumerate() {
        let pname = platform.name().unwrap_or_default().trim().to_owned();
        // A platform without devices answers CL_DEVICE_NOT_FOUND: skip it.
        let Ok(ids) = platform.get_devices(CL_DEVICE_TYPE_ALL) else {
            continue;
        };
        for (di, id) in ids.into_iter().enumerate() {
            let device = ClDevice::new(id as cl_device_id);
            let t = device.dev_type().unwrap_or(0);
            let kind = if t & CL_DEVICE_TYPE_GPU != 0 {
                0
            } else if t & CL_DEVICE_TYPE_ACCELERATOR != 0 {
                1
            } else if t & CL_DEVICE_TYPE_CPU != 0 {
                2
            } else {
                3
            };
            out.push(Listed {
                platform_index: pi,
                device_index: di,
                platform: pname.clone(),
                name: device.name().unwrap_or_default().trim().to_owned(),
                device,
                kind,
            });
        }
    }
    if out.is_empty() {
        return Err(Error::Unavailable {
            message: format!(
                "OpenCL loaded ({how}) but no platform offers a device. {HOW_TO_GET_A_RUNTIME}"
            ),
        });
    }
    Ok(out)
}

// Used by kf-export's tests only (an exported crate's unit tests do not call it).
#[cfg(test)]
#[allow(dead_code)]
impl Listed {
    /// A listed device that is never called into (for the selection's tests).
    pub(crate) fn fake(platform: (usize, &str), device: (usize, &str), kind: u8) -> Self {
        Listed {
            platform_index: platform.0,
            device_index: device.0,
            platform: platform.1.to_owned(),
            device: ClDevice::new(std::ptr::null_mut()),
            name: device.1.to_owned(),
            kind,
        }
    }

    /// `P:D`.
    pub(crate) fn index(&self) -> String {
        format!("{}:{}", self.platform_index, self.device_index)
    }
}

/// KernelFoundry's device selection: `wanted` as `KF_OPENCL_DEVICE` gives it.
pub(crate) fn select<'a>(listed: &'a [Listed], wanted: &str) -> Option<&'a Listed> {
    let best = |it: &mut dyn Iterator<Item = &'a Listed>| {
        // PoCL last; then GPU, accelerator, CPU; listing order breaks ties.
        it.min_by_key(|d| {
            (
                u8::from(d.platform.contains("Portable Computing Language")),
                d.kind,
            )
        })
    };
    let w = wanted.trim().to_lowercase();
    let kind = match w.as_str() {
        "" | "auto" | "default" => return best(&mut listed.iter()),
        "gpu" => Some(0),
        "accelerator" | "acc" => Some(1),
        "cpu" => Some(2),
        _ => None,
    };
    if let Some(k) = kind {
        return best(&mut listed.iter().filter(|d| d.kind == k));
    }
    if let Some((p, d)) = w.split_once(':') {
        if let (Ok(p), Ok(d)) = (p.trim().parse::<usize>(), d.trim().parse::<usize>()) {
            return listed
                .iter()
                .find(|x| x.platform_index == p && x.device_index == d);
        }
    }
    best(&mut listed.iter().filter(|d| d.name.to_lowercase() == w)).or_else(|| {
        best(&mut listed.iter().filter(|d| {
            d.name.to_lowercase().contains(&w) || d.platform.to_lowercase().contains(&w)
        }))
    })
}

fn facts_of(listed: &Listed) -> DeviceFacts {
    let d = &listed.device;
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let global_cache = d.global_mem_cache_size().unwrap_or(0);
    let (mut l1, mut l2, mut l3) = (0, 0, 0);
    if listed.kind == 2 {
        (l1, l2, l3) = cpu_caches(Path::new("/sys/devices/system/cpu/cpu0/cache"));
    } else if listed.kind == 0 {
        l2 = global_cache;
    }
    let items = d.max_work_item_sizes().unwrap_or_default();
    let item = |i: usize| clamp(items.get(i).map_or(1, |v| *v as u64));
    let sub_group = sub_group_size(d);
    let mut mhz = d.max_clock_frequency().unwrap_or(0);
    if mhz == 0 && listed.kind == 2 {
        mhz = host_max_mhz();
    }
    let symbols = vec![
        (
            "compute_units",
            i64::from(d.max_compute_units().unwrap_or(1).max(1)),
        ),
        (
            "max_work_group_size",
            clamp(d.max_work_group_size().unwrap_or(1).max(1) as u64),
        ),
        ("local_mem_bytes", clamp(d.local_mem_size().unwrap_or(0))),
        ("local_mem_size", clamp(d.local_mem_size().unwrap_or(0))),
        ("global_mem_bytes", clamp(d.global_mem_size().unwrap_or(0))),
        ("max_clock_mhz", i64::from(mhz)),
        (
            "preferred_vector_width",
            i64::from(d.max_preferred_vector_width_float().unwrap_or(1).max(1)),
        ),
        ("sub_group_size", sub_group),
        ("global_mem_cache_bytes", clamp(global_cache)),
        ("l1_cache_bytes", clamp(l1)),
        ("l2_cache_bytes", clamp(l2)),
        ("l3_cache_bytes", clamp(l3)),
        ("max_work_item_size_0", item(0)),
        ("max_work_item_size_1", item(1)),
        ("max_work_item_size_2", item(2)),
    ];
    DeviceFacts {
        name: listed.name.clone(),
        driver_version: d.driver_version().unwrap_or_default().trim().to_owned(),
        platform: listed.platform.clone(),
        symbols,
    }
}

/// The largest of `CL_DEVICE_SUB_GROUP_SIZES_INTEL`, else 1.
fn sub_group_size(d: &ClDevice) -> i64 {
    let Ok(bytes) = d.get_data(0x4108) else {
        return 1;
    };
    bytes
        .chunks_exact(std::mem::size_of::<usize>())
        .map(|c| usize::from_ne_bytes(array(c)))
        .filter_map(|s| i64::try_from(s).ok())
        .max()
        .unwrap_or(1)
        .max(1)
}

/// The host CPU's highest clock in MHz: the larger of the cpufreq maximum and the highest
/// `cpu MHz` of `/proc/cpuinfo` (0 where neither is known).
fn host_max_mhz() -> u32 {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpufreq = read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        .trim()
        .parse::<u64>()
        .map_or(0, |khz| u32::try_from(khz / 1000).unwrap_or(0));
    let cpuinfo = read("/proc/cpuinfo")
        .lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .fold(0.0f64, f64::max)
        .round() as u32;
    cpufreq.max(cpuinfo)
}

/// The host CPU's L1 (data or unified), L2 and L3 sizes in bytes from Linux sysfs (0 where
/// unknown).
fn cpu_caches(dir: &Path) -> (u64, u64, u64) {
    let mut out = (0, 0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        if !entry.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        let read = |n: &str| std::fs::read_to_string(entry.path().join(n)).unwrap_or_default();
        if read("type").trim() == "Instruction" {
            continue;
        }
        let size = read("size");
        let size = size.trim();
        let (digits, unit) = size.split_at(
            size.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(size.len()),
        );
        let Ok(n) = digits.parse::<u64>() else {
            continue;
        };
        let bytes = match unit.trim() {
            "K" | "KB" => n << 10,
            "M" | "MB" => n << 20,
            "G" | "GB" => n << 30,
            _ => n,
        };
        let slot = match read("level").trim() {
            "1" => &mut out.0,
            "2" => &mut out.1,
            "3" => &mut out.2,
            _ => continue,
        };
        *slot = (*slot).max(bytes);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Finding the OpenCL runtime

static PREPARED: OnceLock<String> = OnceLock::new();

/// Configures the process for the OpenCL runtime once, before the first OpenCL call, and
/// returns what was used. `opencl3` loads the OpenCL library named by `OPENCL_DYLIB_PATH`
/// (else `libOpenCL.so.1`) and the ICD loader reads `OCL_ICD_VENDORS` / `OCL_ICD_FILENAMES`;
/// in this order:
///
/// 1. `OPENCL_DYLIB_PATH` set: nothing is changed.
/// 2. `KF_OPENCL_ICD` set: an `opencl.json`, a folder holding one (or `.runtime/opencl.json`),
///    a folder of `.icd` files, an `.icd` file or a driver library.
/// 3. An `opencl.json` found: `.runtime/opencl.json` above the current directory or the
///    executable (a KernelFoundry checkout after `scripts/setup.sh`), else the per-user
///    folder's (`$XDG_DATA_HOME/kernelfoundry/opencl.json`, what `kf setup` installs), else
///    one above this crate's source.
/// 4. The system's loader and drivers.
///
/// Applying an `opencl.json`: load the libraries listed under `preload` (the Intel runtime's
/// loader needs them and has no `RUNPATH`), then set `OPENCL_DYLIB_PATH` to `loader;icd` and,
/// unless set, `OCL_ICD_VENDORS` (or `OCL_ICD_FILENAMES`). Variables are set only when unset;
/// call [`Device::open`] early in `main`, before other threads read the environment.
pub fn prepare_runtime() -> &'static str {
    PREPARED.get_or_init(prepare_now)
}

fn prepare_now() -> String {
    if let Some(v) = std::env::var_os("OPENCL_DYLIB_PATH") {
        return format!("OPENCL_DYLIB_PATH={}", v.to_string_lossy());
    }
    if let Some(v) = std::env::var_os(KF_OPENCL_ICD).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(v);
        apply_explicit(&path);
        return format!("{KF_OPENCL_ICD}={}", path.display());
    }
    match discover_config() {
        Some(config) => {
            let note = apply_config(&config);
            format!("runtime config {}{note}", config.display())
        }
        None => "the system OpenCL loader (libOpenCL.so.1)".to_owned(),
    }
}

fn discover_config() -> Option<PathBuf> {
    let walk_up = |start: &Path| {
        start
            .ancestors()
            .map(|d| d.join(".runtime").join("opencl.json"))
            .find(|c| c.is_file())
    };
    let mut starts: Vec<PathBuf> = std::env::current_dir().into_iter().collect();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    let user = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".local").join("share"))
        })
        .map(|d| d.join("kernelfoundry").join("opencl.json"));
    starts
        .iter()
        .find_map(|s| walk_up(s))
        .or_else(|| user.filter(|u| u.is_file()))
        .or_else(|| option_env!("CARGO_MANIFEST_DIR").and_then(|d| walk_up(Path::new(d))))
}

fn set_if_unset(name: &str, value: &str) {
    if std::env::var_os(name).is_none() {
        // Once per process, before the OpenCL library is loaded (see `prepare_runtime`).
        std::env::set_var(name, value);
    }
}

fn icd_vars_set() -> bool {
    std::env::var_os("OCL_ICD_VENDORS").is_some() || std::env::var_os("OCL_ICD_FILENAMES").is_some()
}

fn apply_explicit(path: &Path) {
    if path.is_dir() {
        let json = [path.join("opencl.json"), path.join(".runtime/opencl.json")]
            .into_iter()
            .find(|p| p.is_file());
        match json {
            Some(json) => {
                apply_config(&json);
            }
            None => set_if_unset("OCL_ICD_VENDORS", &path.to_string_lossy()),
        }
        return;
    }
    let name = path.to_string_lossy();
    if name.ends_with(".json") {
        apply_config(path);
        return;
    }
    let library = if name.ends_with(".icd") {
        match std::fs::read_to_string(path) {
            Ok(text) => text.trim().to_owned(),
            Err(_) => return,
        }
    } else {
        name.into_owned()
    };
    if !icd_vars_set() {
        set_if_unset("OCL_ICD_FILENAMES", &library);
    }
    set_if_unset("OPENCL_DYLIB_PATH", &format!("libOpenCL.so.1;{library}"));
}

/// Applies an `opencl.json`; returns a note when it could not (`; …`), else nothing.
fn apply_config(path: &Path) -> String {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return format!("; unreadable: {e}"),
    };
    let Some(json) = json::parse(&text) else {
        return "; not JSON".to_owned();
    };
    let field = |k: &str| json.get(k).and_then(json::Json::as_str).map(PathBuf::from);
    let Some(icd) = field("icd").filter(|p| p.is_file()) else {
        return "; the runtime it names is gone (run `kf setup` again)".to_owned();
    };
    let preload: Vec<&str> = json
        .get("preload")
        .and_then(json::Json::as_array)
        .unwrap_or_default()
        .iter()
        .filter_map(json::Json::as_str)
        .collect();
    for lib in preload {
        preload_library(lib);
    }
    if !icd_vars_set() {
        match field("vendors_dir").filter(|d| d.is_dir()) {
            Some(dir) => set_if_unset("OCL_ICD_VENDORS", &dir.to_string_lossy()),
            None => set_if_unset("OCL_ICD_FILENAMES", &icd.to_string_lossy()),
        }
    }
    let mut libraries: Vec<String> = field("loader")
        .filter(|l| l.is_file())
        .map(|l| l.to_string_lossy().into_owned())
        .into_iter()
        .collect();
    libraries.push(icd.to_string_lossy().into_owned());
    set_if_unset("OPENCL_DYLIB_PATH", &libraries.join(";"));
    String::new()
}

/// Loads a shared library for the rest of the process (`RTLD_LAZY | RTLD_LOCAL`, never
/// unloaded), so that the OpenCL loader, loaded later, finds it. A library that does not load
/// is skipped: opening the device then reports what the loader says.
fn preload_library(path: &str) {
    let Ok(c_path) = std::ffi::CString::new(path) else {
        return;
    };
    // SAFETY: loading a runtime's support library runs only its ELF initialisers; the handle
    // is deliberately leaked so that the library stays loaded.
    let _ = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
}

/// Just enough JSON for `opencl.json` and the reference cases' `index.json`.
pub(crate) mod json {
    /// A JSON value; objects keep their order.
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) enum Json {
        Null,
        Bool(bool),
        Num(f64),
        Str(String),
        Arr(Vec<Json>),
        Obj(Vec<(String, Json)>),
    }

    impl Json {
        pub(crate) fn get(&self, key: &str) -> Option<&Json> {
            match self {
                Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                _ => None,
            }
        }

        pub(crate) fn as_str(&self) -> Option<&str> {
            match self {
                Json::Str(s) => Some(s),
                _ => None,
            }
        }

        pub(crate) fn as_f64(&self) -> Option<f64> {
            match self {
                Json::Num(n) => Some(*n),
                _ => None,
            }
        }

        pub(crate) fn as_array(&self) -> Option<&[Json]> {
            match self {
                Json::Arr(a) => Some(a),
                _ => None,
            }
        }

        pub(crate) fn as_object(&self) -> Option<&[(String, Json)]> {
            match self {
                Json::Obj(o) => Some(o),
                _ => None,
            }
        }
    }

    /// Parses a whole document; `None` when it is not JSON.
    pub(crate) fn parse(text: &str) -> Option<Json> {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value()?;
        p.ws();
        (p.i == p.s.len()).then_some(v)
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn ws(&mut self) {
            while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
                self.i += 1;
            }
        }

        fn eat(&mut self, c: u8) -> bool {
            self.ws();
            let hit = self.s.get(self.i) == Some(&c);
            self.i += usize::from(hit);
            hit
        }

        fn value(&mut self) -> Option<Json> {
            self.ws();
            let rest = self.s.get(self.i..)?;
            for (word, v) in [
                ("null", Json::Null),
                ("true", Json::Bool(true)),
                ("false", Json::Bool(false)),
            ] {
                if rest.starts_with(word.as_bytes()) {
                    self.i += word.len();
                    return Some(v);
                }
            }
            match rest.first()? {
                b'"' => self.string().map(Json::Str),
                b'[' => self.list(b']', |p| p.value()).map(Json::Arr),
                b'{' => self
                    .list(b'}', |p| {
                        let k = {
                            p.ws();
                            p.string()?
                        };
                        p.eat(b':').then_some(())?;
                        Some((k, p.value()?))
                    })
                    .map(Json::Obj),
                _ => self.number(),
            }
        }

        fn list<T>(
            &mut self,
            close: u8,
            mut item: impl FnMut(&mut Self) -> Option<T>,
        ) -> Option<Vec<T>> {
            self.i += 1;
            let mut out = Vec::new();
            if self.eat(close) {
                return Some(out);
            }
            loop {
                out.push(item(self)?);
                if self.eat(close) {
                    return Some(out);
                }
                self.eat(b',').then_some(())?;
            }
        }

        fn number(&mut self) -> Option<Json> {
            let start = self.i;
            while self
                .s
                .get(self.i)
                .is_some_and(|c| c.is_ascii_digit() || b"+-.eE".contains(c))
            {
                self.i += 1;
            }
            let text = std::str::from_utf8(self.s.get(start..self.i)?).ok()?;
            text.parse().ok().map(Json::Num)
        }

        fn string(&mut self) -> Option<String> {
            self.i += 1;
            let mut out = Vec::new();
            loop {
                let c = *self.s.get(self.i)?;
                self.i += 1;
                match c {
                    b'"' => return String::from_utf8(out).ok(),
                    b'\\' => {
                        let e = *self.s.get(self.i)?;
                        self.i += 1;
                        let ch = match e {
                            b'n' => '\n',
                            b't' => '\t',
                            b'r' => '\r',
                            b'b' => '\u{8}',
                            b'f' => '\u{c}',
                            b'u' => {
                                let hex =
                                    std::str::from_utf8(self.s.get(self.i..self.i + 4)?).ok()?;
                                self.i += 4;
                                char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                            }
                            other => char::from(other),
                        };
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                    other => out.push(other),
                }
            }
        }
    }
}
