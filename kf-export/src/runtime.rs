//! What a generated crate calls at run time: its table of tuned configurations, the choice of
//! one for the caller's device and sizes ([`Table::choose`], the rule of [`crate::dispatch`]),
//! and the launch through the OpenCL backend ([`Table::run`]): parameters as `-D` defines,
//! the manifest's compiler flags, launch geometry evaluated from the manifest at the caller's
//! sizes, constraints checked with an error that names the rule.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kf_backend_opencl::{OpenClBackend, OpenClBuffer, OpenClKernel};
use kf_core::{Backend, CompileOptions, DeviceFacts, KernelArg, NdRange, ParamValues};
use kf_manifest::Manifest;

use crate::dispatch::{self, Caller, Candidate};
use crate::error::ExportError;
use crate::signature::{ArgSig, Dtype, Signature};

/// One tuned configuration, as a generated crate embeds it.
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
    /// Its parameter values as JSON (`{"TS": 16}`).
    pub params_json: &'static str,
    /// The manifest text.
    pub manifest: &'static str,
    /// The kernel source.
    pub source: &'static str,
    /// Its throughput in the run, GFLOP/s.
    pub gflops: Option<f64>,
}

/// Host data of one buffer of a call.
#[derive(Debug)]
pub enum HostData<'a> {
    /// An input, read by the kernel.
    In(&'a [u8]),
    /// An output: written to the device first (for in-place kernels), read back after.
    Out(&'a mut [u8]),
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

impl From<f32> for ScalarArg {
    fn from(v: f32) -> Self {
        ScalarArg::F32(v)
    }
}

impl From<i32> for ScalarArg {
    fn from(v: i32) -> Self {
        ScalarArg::I32(v)
    }
}

/// An element type a generated function passes: its [`Dtype`] and its bytes.
pub trait Element: Copy + Send + Sync + 'static {
    /// The signature's name for it.
    const DTYPE: Dtype;
    /// Appends the value's native-order bytes.
    fn put(self, out: &mut Vec<u8>);
    /// The value of `DTYPE.size()` native-order bytes.
    fn take(bytes: &[u8]) -> Self;
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn take(b: &[u8]) -> Self {
        f32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Element for i32 {
    const DTYPE: Dtype = Dtype::I32;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn take(b: &[u8]) -> Self {
        i32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Element for half::f16 {
    const DTYPE: Dtype = Dtype::F16;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn take(b: &[u8]) -> Self {
        half::f16::from_ne_bytes([b[0], b[1]])
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

/// A task's signature and its tuned configurations.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// The task's kernel signature.
    pub signature: &'static Signature,
    /// The tuned configurations.
    pub configurations: &'static [Configuration],
}

/// A configuration ready to launch at some sizes.
struct Prepared {
    manifest: Manifest,
    params: ParamValues,
    range: NdRange,
}

impl Table {
    fn bad_call(&self, message: String) -> ExportError {
        ExportError::BadCall {
            task: self.signature.task.to_string(),
            message,
        }
    }

    fn configuration(&self, index: usize) -> Result<&'static Configuration, ExportError> {
        self.configurations
            .get(index)
            .ok_or_else(|| ExportError::NoSuchConfiguration {
                task: self.signature.task.to_string(),
                index,
                len: self.configurations.len(),
            })
    }

    /// The caller's sizes by name, in the signature's order; each must be positive and fit
    /// an OpenCL `int`.
    fn sizes(&self, values: &[i64]) -> Result<indexmap::IndexMap<String, i64>, ExportError> {
        if values.len() != self.signature.sizes.len() {
            return Err(self.bad_call(format!(
                "{} sizes given, the task has {} ({})",
                values.len(),
                self.signature.sizes.len(),
                self.signature.size_names().join(", ")
            )));
        }
        let mut out = indexmap::IndexMap::new();
        for (name, v) in self.signature.sizes.iter().zip(values) {
            if *v <= 0 || *v > i64::from(i32::MAX) {
                return Err(self.bad_call(format!("{name} = {v} is not a positive OpenCL int")));
            }
            out.insert(name.to_string(), *v);
        }
        Ok(out)
    }

    /// Whether configuration `index` can run at `sizes` on `device`: its manifest constraints
    /// hold and its launch geometry evaluates (local dividing global). `Err` carries the first
    /// rule that fails.
    fn prepare(
        &self,
        index: usize,
        device: &DeviceFacts,
        sizes: &indexmap::IndexMap<String, i64>,
    ) -> Result<Prepared, ExportError> {
        let c = self.configuration(index)?;
        let manifest = Manifest::parse(c.manifest, &format!("{}.toml", c.name), None)?;
        let params: ParamValues =
            serde_json::from_str(c.params_json).map_err(|e| ExportError::BadCall {
                task: self.signature.task.to_string(),
                message: format!("{}: parameters are not JSON: {e}", c.name),
            })?;
        let params = manifest.resolve_params(&params)?;
        let symbols = manifest.symbols(&params, sizes, device);
        manifest.check_constraints(&params, &symbols)?;
        let range = manifest.launch_range(&symbols)?;
        Ok(Prepared {
            manifest,
            params,
            range,
        })
    }

    /// Whether configuration `index` can run at `sizes` (in the signature's order) on
    /// `device`; the error names the constraint that fails.
    ///
    /// # Errors
    ///
    /// [`ExportError::Manifest`] naming the failing rule, [`ExportError::BadCall`] for sizes
    /// that do not fit the signature.
    pub fn check(
        &self,
        index: usize,
        device: &DeviceFacts,
        sizes: &[i64],
    ) -> Result<(), ExportError> {
        let sizes = self.sizes(sizes)?;
        self.prepare(index, device, &sizes).map(|_| ())
    }

    /// The configuration that serves a call at `sizes` (in the signature's order) on `device`:
    /// among those whose constraints hold, the caller's device's, tuned at the nearest sizes
    /// ([`crate::dispatch::choose`]).
    ///
    /// # Errors
    ///
    /// [`ExportError::NoConfiguration`], naming each configuration's failing rule, when none
    /// can run; [`ExportError::BadCall`] for sizes that do not fit the signature.
    pub fn choose(&self, device: &DeviceFacts, sizes: &[i64]) -> Result<usize, ExportError> {
        let named = self.sizes(sizes)?;
        let mut reasons = Vec::new();
        let valid: Vec<bool> = (0..self.configurations.len())
            .map(|i| match self.prepare(i, device, &named) {
                Ok(_) => true,
                Err(e) => {
                    reasons.push(format!("{}: {e}", self.configurations[i].name));
                    false
                }
            })
            .collect();
        let call_sizes: Vec<(&str, i64)> = named.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let candidates: Vec<Candidate<'_>> = self
            .configurations
            .iter()
            .zip(&valid)
            .map(|(c, valid)| Candidate {
                device: c.device,
                driver: c.driver,
                sizes: c.tuned_sizes,
                valid: *valid,
            })
            .collect();
        let caller = Caller {
            device: &device.name,
            driver: &device.driver_version,
            sizes: &call_sizes,
        };
        dispatch::choose(&candidates, &caller).ok_or_else(|| ExportError::NoConfiguration {
            task: self.signature.task.to_string(),
            sizes: crate::sizes_text(call_sizes.iter().copied()),
            device: device.name.clone(),
            reasons: reasons.join("; "),
        })
    }

    /// Runs configuration `index` at `sizes` (in the signature's order) on `backend`'s device,
    /// with one [`HostData`] per buffer of the signature (outputs are read back into theirs).
    ///
    /// # Errors
    ///
    /// [`ExportError::BadCall`] for buffers of the wrong length or role, the constraint errors
    /// of [`Table::check`], and [`ExportError::Backend`] when compiling or launching fails.
    pub fn run(
        &self,
        backend: &OpenClBackend,
        index: usize,
        sizes: &[i64],
        data: &mut [HostData<'_>],
    ) -> Result<(), ExportError> {
        self.run_cached(backend, &KernelCache::new(), index, sizes, data)
    }

    /// [`Table::run`] with the compiled kernel kept in `cache` (or taken from it): calls after
    /// the first skip the build. Use one cache per backend (a kernel belongs to its backend's
    /// OpenCL context); the generated crate's `Kernels` pairs them. For a task without
    /// scalars; [`Table::launch`] passes them.
    ///
    /// # Errors
    ///
    /// As [`Table::run`]'s.
    pub fn run_cached(
        &self,
        backend: &OpenClBackend,
        cache: &KernelCache,
        index: usize,
        sizes: &[i64],
        data: &mut [HostData<'_>],
    ) -> Result<(), ExportError> {
        self.launch(backend, cache, index, sizes, &[], data)
    }

    /// [`Table::run_cached`] with the values of the task's scalars, in [`Signature::scalars`]
    /// order (what the generated functions call).
    ///
    /// # Errors
    ///
    /// As [`Table::run`]'s, and [`ExportError::BadCall`] for scalars that do not match the
    /// signature's in number or type.
    pub fn launch(
        &self,
        backend: &OpenClBackend,
        cache: &KernelCache,
        index: usize,
        sizes: &[i64],
        scalars: &[ScalarArg],
        data: &mut [HostData<'_>],
    ) -> Result<(), ExportError> {
        let sig = self.signature;
        let named = self.sizes(sizes)?;
        if scalars.len() != sig.scalars.len() {
            return Err(self.bad_call(format!(
                "{} scalars given, the task has {}",
                scalars.len(),
                sig.scalars.len()
            )));
        }
        for (s, v) in sig.scalars.iter().zip(scalars) {
            if v.dtype() != s.dtype {
                return Err(self.bad_call(format!(
                    "scalar {} is {}, not {}",
                    s.name,
                    s.dtype.rust(),
                    v.dtype().rust()
                )));
            }
        }
        if data.len() != sig.buffers.len() {
            return Err(self.bad_call(format!(
                "{} buffers given, the task has {}",
                data.len(),
                sig.buffers.len()
            )));
        }
        let symbols = kf_manifest::Symbols::new().with_sizes(&named);
        for (i, (b, d)) in sig.buffers.iter().zip(data.iter()).enumerate() {
            let site = kf_manifest::ExprSite {
                file: format!("signature of {}", sig.task),
                field: format!("buffers[{i}]"),
            };
            let len = kf_manifest::Expr::parse(&b.len, &site)?.eval_i64(&symbols, &site)?;
            let want = usize::try_from(len).unwrap_or(0) * b.dtype.size();
            let (got, is_out) = match d {
                HostData::In(s) => (s.len(), false),
                HostData::Out(s) => (s.len(), true),
            };
            if is_out != b.access.writes() {
                let role = if b.access.writes() {
                    "written by the kernel (pass it as an output)"
                } else {
                    "an input"
                };
                return Err(self.bad_call(format!("buffer {} is {role}", b.name)));
            }
            if got != want {
                return Err(self.bad_call(format!(
                    "buffer {} has {} elements, {} = {len} at {}",
                    b.name,
                    got / b.dtype.size(),
                    b.len,
                    crate::sizes_text(named.iter().map(|(k, v)| (k.as_str(), *v)))
                )));
            }
        }
        let prepared = self.prepare(index, backend.device(), &named)?;
        let c = self.configuration(index)?;
        let backend_err = |source| ExportError::Backend {
            task: sig.task.to_string(),
            source,
        };
        let cached = cache.get(c.name);
        let kernel = match cached {
            Some(k) => k,
            None => {
                let source = prepared.manifest.kernel_source(c.source);
                let options = CompileOptions {
                    flags: prepared.manifest.compile_flags(&prepared.params)?,
                    arch: None,
                };
                let compiled = backend
                    .compile(&source, &prepared.params, &options)
                    .map_err(backend_err)?;
                cache.put(c.name, compiled.kernel)
            }
        };
        let mut buffers: Vec<OpenClBuffer> = Vec::with_capacity(data.len());
        for d in data.iter() {
            let bytes: &[u8] = match d {
                HostData::In(s) => s,
                HostData::Out(s) => s,
            };
            let mut buffer = backend.alloc(bytes.len().max(1)).map_err(backend_err)?;
            if !bytes.is_empty() {
                backend.write(&mut buffer, bytes).map_err(backend_err)?;
            }
            buffers.push(buffer);
        }
        let mut args: Vec<KernelArg<'_, OpenClBuffer>> = Vec::with_capacity(sig.args.len());
        for a in sig.args.iter() {
            args.push(match a {
                ArgSig::Size(name) => {
                    // Checked positive and within `int` by `sizes`.
                    let v = named.get(name.as_ref()).copied().unwrap_or(0);
                    KernelArg::I32(i32::try_from(v).unwrap_or(i32::MAX))
                }
                ArgSig::Scalar(i) => match scalars.get(*i) {
                    Some(ScalarArg::F32(v)) => KernelArg::F32(*v),
                    Some(ScalarArg::I32(v)) => KernelArg::I32(*v),
                    None => {
                        return Err(self.bad_call(format!(
                        "the signature's argument list names scalar {i}, which it does not declare"
                    )))
                    }
                },
                ArgSig::Buffer(i) => KernelArg::Buffer {
                    buffer: &buffers[*i],
                    offset: 0,
                },
            });
        }
        backend
            .launch(&kernel, &args, &prepared.range)
            .map_err(backend_err)?;
        for (d, buffer) in data.iter_mut().zip(&buffers) {
            if let HostData::Out(s) = d {
                backend.read(buffer, s).map_err(backend_err)?;
            }
        }
        Ok(())
    }
}

/// Compiled kernels by configuration name, for one backend ([`Table::run_cached`]).
#[derive(Default)]
pub struct KernelCache {
    kernels: Mutex<HashMap<&'static str, Arc<OpenClKernel>>>,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<&'static str, Arc<OpenClKernel>>> {
        // A panic elsewhere while holding the lock leaves the map intact.
        self.kernels.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, name: &'static str) -> Option<Arc<OpenClKernel>> {
        self.lock().get(name).cloned()
    }

    fn put(&self, name: &'static str, kernel: OpenClKernel) -> Arc<OpenClKernel> {
        Arc::clone(self.lock().entry(name).or_insert_with(|| Arc::new(kernel)))
    }
}

/// The bytes of `f32` values, in native order (for [`HostData`]).
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// The bytes of `i32` values, in native order (for [`HostData`]).
pub fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// Copies native-order bytes back into `f32` values.
pub fn f32_from_bytes(bytes: &[u8], out: &mut [f32]) {
    for (v, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *v = f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
    }
}

/// Copies native-order bytes back into `i32` values.
pub fn i32_from_bytes(bytes: &[u8], out: &mut [i32]) {
    for (v, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
        *v = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
    }
}
