//! [`FileTask`]: a task file at some sizes, as the evaluator's [`KernelTask`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use kf_core::{
    BufferAccess, BufferInterface, KernelInterface, KernelSource, Language, ScalarInterface, Task,
    Tolerance,
};
use rand::RngCore;

use super::error::TaskFileError;
use super::load::{ArgKind, TaskFile};
use super::python::{self, PythonCall};
use super::reference::{self, ReferenceInputs, ReferenceRegistry};
use super::schema::{BufferRole, Dtype, FamilySpec, ScalarValue};
use crate::element::Role;
use crate::error::EvalError;
use crate::task::host::HostBuffer;
use crate::task::spec::{sizes_text, Accumulation, ArgSpec, BufferSpec, KernelTask, Sizes};

/// Default seconds a Python reference may take per input set.
pub const DEFAULT_REFERENCE_TIMEOUT_S: f64 = 120.0;

/// A validated task file at concrete sizes, with the kernels it names loaded once.
#[derive(Clone)]
pub struct FileTask {
    file: Arc<TaskFile>,
    sizes: Sizes,
    shapes: Vec<Vec<usize>>,
    references: Arc<ReferenceRegistry>,
    kernels: Arc<NamedKernels>,
    cache_dir: Option<PathBuf>,
    /// The family traced from the reference, once known (shared by copies and other sizes).
    traced: Arc<std::sync::OnceLock<Option<FamilySpec>>>,
}

/// The baseline, seed and reference kernels a task file names, loaded at construction.
#[derive(Debug, Default)]
struct NamedKernels {
    baselines: Vec<KernelSource>,
    /// The `seeds`, in the file's order.
    seeds: Vec<KernelSource>,
    reference: Option<KernelSource>,
}

impl std::fmt::Debug for FileTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileTask")
            .field("file", &self.file.file)
            .field("sizes", &self.sizes)
            .finish_non_exhaustive()
    }
}

/// Tasks built from task files in this process ([`FileTask::builds_in_this_process`]).
static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl FileTask {
    /// The task at its default sizes with `overrides` applied, with no Rust references.
    pub fn new(file: TaskFile, overrides: &Sizes) -> Result<Self, TaskFileError> {
        Self::with_references(
            Arc::new(file),
            overrides,
            Arc::new(ReferenceRegistry::new()),
        )
    }

    /// How many tasks this process has built from task files ([`with_references`]; a clone
    /// or a copy at the same sizes is not a build): a program checks with it that it builds
    /// each task once (building one reads its files and checks its kernels and reference).
    ///
    /// [`with_references`]: Self::with_references
    pub fn builds_in_this_process() -> u64 {
        BUILDS.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The task with `references` available to `[reference] rust = "name"`.
    pub fn with_references(
        file: Arc<TaskFile>,
        overrides: &Sizes,
        references: Arc<ReferenceRegistry>,
    ) -> Result<Self, TaskFileError> {
        BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut kernels = NamedKernels::default();
        if let Some(b) = &file.spec.baseline {
            for rel in b.kernel.to_vec() {
                kernels
                    .baselines
                    .push(file.kernel_manifest(&rel, "baseline.kernel")?);
            }
        }
        for (i, rel) in file.spec.seeds.iter().enumerate() {
            kernels
                .seeds
                .push(file.kernel_manifest(rel, &format!("seeds[{i}]"))?);
        }
        if let Some(rel) = &file.spec.reference.kernel {
            kernels.reference = Some(file.kernel_manifest(rel, "reference.kernel")?);
        }
        if let Some(name) = &file.spec.reference.rust {
            if references.get(name).is_none() {
                return Err(TaskFileError::invalid(
                    &file.file,
                    "reference.rust",
                    format!(
                        "no Rust reference `{name}` is registered (registered: {})",
                        references.names().join(", ")
                    ),
                ));
            }
        }
        let sizes = file.complete_sizes(overrides)?;
        let shapes = file.buffer_shapes(&sizes)?;
        Ok(FileTask {
            file,
            sizes,
            shapes,
            references,
            kernels: Arc::new(kernels),
            cache_dir: reference::reference_cache_dir(),
            traced: Arc::default(),
        })
    }

    /// Caches Python references' outputs in `dir` (`None`: no cache).
    pub fn with_cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// The task file.
    pub fn file(&self) -> &TaskFile {
        &self.file
    }

    /// The same task at other sizes (missing ones keep the task file's defaults).
    pub fn at_sizes(&self, sizes: &Sizes) -> Result<FileTask, TaskFileError> {
        let sizes = self.file.complete_sizes(sizes)?;
        let shapes = self.file.buffer_shapes(&sizes)?;
        Ok(FileTask {
            sizes,
            shapes,
            ..self.clone()
        })
    }

    /// Each buffer's shape at these sizes.
    pub fn shapes(&self) -> &[Vec<usize>] {
        &self.shapes
    }

    /// Bytes every kernel moves at least: each input read and each output written once, an
    /// in-out buffer both.
    pub fn minimum_bytes(&self) -> f64 {
        self.file
            .spec
            .buffers
            .iter()
            .zip(&self.shapes)
            .map(|(b, dims)| {
                let bytes = dims.iter().product::<usize>() as f64 * b.dtype.size() as f64;
                match b.role {
                    BufferRole::Inout => 2.0 * bytes,
                    BufferRole::Input | BufferRole::Output => bytes,
                }
            })
            .sum()
    }

    /// The OpenCL-style signature: `(const int ROWS, const float alpha, __global const
    /// float* x, __global float* y)`.
    pub fn signature(&self) -> String {
        let ctype = |d: Dtype| match d {
            Dtype::F32 => "float",
            Dtype::F16 => "half",
            Dtype::I32 => "int",
        };
        let spec = &self.file.spec;
        let args: Vec<String> = spec
            .args
            .iter()
            .map(|a| match self.file.arg_kind(a) {
                Some(ArgKind::Size) => format!("const int {a}"),
                Some(ArgKind::Scalar(i)) => format!("const {} {a}", ctype(spec.scalars[i].dtype)),
                Some(ArgKind::Buffer(i)) => {
                    let b = &spec.buffers[i];
                    let constness = if b.role == BufferRole::Input {
                        "const "
                    } else {
                        ""
                    };
                    format!("__global {constness}{}* {a}", ctype(b.dtype))
                }
                None => a.clone(),
            })
            .collect();
        format!("({})", args.join(", "))
    }

    /// The kernel interface the task declares: the signature, the argument order, and each
    /// buffer (dtype, shape expressions, shape at the current sizes, access) and scalar.
    pub fn interface(&self) -> KernelInterface {
        let spec = &self.file.spec;
        let buffers = spec
            .buffers
            .iter()
            .zip(&self.shapes)
            .map(|(b, dims)| BufferInterface {
                name: b.name.clone(),
                dtype: b.dtype.to_string(),
                shape: b.shape.iter().map(|e| e.text()).collect(),
                dims: dims
                    .iter()
                    .map(|d| i64::try_from(*d).unwrap_or(i64::MAX))
                    .collect(),
                access: match b.role {
                    BufferRole::Input => BufferAccess::Input,
                    BufferRole::Output => BufferAccess::Output,
                    BufferRole::Inout => BufferAccess::Inout,
                },
            })
            .collect();
        let scalars = spec
            .scalars
            .iter()
            .map(|s| ScalarInterface {
                name: s.name.clone(),
                dtype: s.dtype.to_string(),
                value: s.value.as_f64(),
            })
            .collect();
        KernelInterface {
            signature: self.signature(),
            args: spec.args.clone(),
            buffers,
            scalars,
        }
    }

    fn scalar_values(&self) -> IndexMap<String, f64> {
        self.file
            .spec
            .scalars
            .iter()
            .map(|s| (s.name.clone(), s.value.as_f64()))
            .collect()
    }

    fn reference_error(&self, message: String) -> TaskFileError {
        let r = &self.file.spec.reference;
        TaskFileError::Reference {
            file: self.file.file.clone(),
            reference: r
                .python
                .clone()
                .or_else(|| r.rust.clone())
                .or_else(|| r.kernel.clone())
                .unwrap_or_default(),
            message,
        }
    }

    /// Computes the reference outputs (Python or Rust; a kernel reference runs in the
    /// evaluator) and checks them; returns every buffer (empty for pure inputs) and how long
    /// the reference took (zero on a cache hit).
    pub fn run_reference(
        &self,
        data: &[HostBuffer],
    ) -> Result<(Vec<HostBuffer>, Duration), TaskFileError> {
        let spec = &self.file.spec;
        if data.len() != spec.buffers.len() {
            return Err(self.reference_error(format!(
                "{} data buffers for {} declared buffers",
                data.len(),
                spec.buffers.len()
            )));
        }
        let started = Instant::now();
        let outputs = if let Some(name) = &spec.reference.rust {
            let Some(f) = self.references.get(name) else {
                return Err(self.reference_error(format!("no Rust reference `{name}`")));
            };
            let mut arrays = IndexMap::new();
            for ((b, d), shape) in spec.buffers.iter().zip(data).zip(&self.shapes) {
                if b.role != BufferRole::Output {
                    let v = reference::view(d, shape).ok_or_else(|| {
                        self.reference_error(format!("buffer `{}` has the wrong length", b.name))
                    })?;
                    arrays.insert(b.name.clone(), v);
                }
            }
            let inputs = ReferenceInputs {
                arrays,
                sizes: &self.sizes,
                scalars: self.scalar_values(),
            };
            reference::from_arrays(f(&inputs).map_err(|e| self.reference_error(e.to_string()))?)
        } else if let Some(script) = &spec.reference.python {
            self.python_reference(script, data)?
        } else {
            return Err(self.reference_error(
                "a kernel reference runs on the evaluator's backend, and this backend has none \
                 in the kernel's language"
                    .into(),
            ));
        };
        let elapsed = started.elapsed();
        let mut out = Vec::with_capacity(spec.buffers.len());
        for (b, shape) in spec.buffers.iter().zip(&self.shapes) {
            if b.role == BufferRole::Input {
                out.push(HostBuffer::empty(b.dtype));
                continue;
            }
            let got = outputs.get(&b.name);
            reference::check_output(&b.name, b.dtype, shape, got)
                .map_err(|e| self.reference_error(e.to_string()))?;
            if let Some((data, _)) = got {
                out.push(data.clone());
            }
        }
        Ok((out, elapsed))
    }

    /// The task's scalars by name, as the Python programs receive them.
    fn scalar_json(&self) -> IndexMap<String, serde_json::Value> {
        self.file
            .spec
            .scalars
            .iter()
            .map(|s| {
                let v = match s.value {
                    ScalarValue::Int(i) => serde_json::Value::from(i),
                    ScalarValue::Float(f) => serde_json::Value::from(f),
                };
                (s.name.clone(), v)
            })
            .collect()
    }

    fn reference_timeout(&self) -> Duration {
        Duration::from_secs_f64(
            self.file
                .spec
                .reference
                .timeout_s
                .unwrap_or(DEFAULT_REFERENCE_TIMEOUT_S),
        )
    }

    /// The operator graph of the task's NumPy reference: the reference is called once with
    /// traced arrays ([`kf_graph::NUMPY_TRACER`], in a process confined as the reference
    /// is), which record each operation with its shape as size expressions. An error for a
    /// task without a Python reference, and [`TaskFileError::Trace`] naming the construct
    /// where the reference does something the tracer does not know.
    pub fn trace(&self) -> Result<kf_graph::Graph, TaskFileError> {
        let spec = &self.file.spec;
        let (Some(script), Some(dir)) = (&spec.reference.python, self.file.base.dir()) else {
            return Err(TaskFileError::invalid(
                &self.file.file,
                "reference",
                "only a Python (NumPy) reference can be traced",
            ));
        };
        let inputs = spec
            .buffers
            .iter()
            .zip(&self.shapes)
            .filter(|(b, _)| b.role != BufferRole::Output)
            .map(|(b, shape)| {
                let dims = b.shape.iter().map(|d| d.text()).collect();
                let dtype = match b.dtype {
                    Dtype::F32 => "f32",
                    Dtype::F16 => "f16",
                    Dtype::I32 => "i32",
                };
                (b.name.as_str(), dims, shape.clone(), dtype)
            })
            .collect();
        let json = python::trace(&python::TraceCall {
            script: &dir.join(script),
            file: &self.file.file,
            inputs,
            sizes: &self.sizes,
            scalars: self.scalar_json(),
            timeout: self.reference_timeout(),
        })?;
        kf_graph::Graph::from_trace(&json).map_err(|source| TaskFileError::Trace {
            file: self.file.file.clone(),
            source,
        })
    }

    /// The family the task's reference computes, where the task file declares none: its
    /// [`trace`](Self::trace) recognised ([`kf_graph::recognise`]) and checked against the
    /// task like a declared `[family]`. `Ok(None)` where the graph is none of the families
    /// (the reason is logged); an error where there is no graph. Computed once per task (its
    /// copies and other sizes share it).
    pub fn traced_family(&self) -> Result<Option<FamilySpec>, TaskFileError> {
        if let Some(found) = self.traced.get() {
            return Ok(found.clone());
        }
        let graph = self.trace()?;
        let found = match kf_graph::recognise(&graph) {
            Ok(pattern) => {
                let family = FamilySpec::from_pattern(&pattern);
                match family.validate(&self.file.spec, &self.file.file) {
                    Ok(()) => Some(family),
                    Err(e) => {
                        tracing::info!(
                            "{}: the traced family does not fit the task: {e}",
                            self.file.file
                        );
                        None
                    }
                }
            }
            Err(reason) => {
                tracing::info!(
                    "{}: no family in the reference's graph: {reason}",
                    self.file.file
                );
                None
            }
        };
        Ok(self.traced.get_or_init(|| found).clone())
    }

    fn python_reference(
        &self,
        script: &str,
        data: &[HostBuffer],
    ) -> Result<IndexMap<String, (HostBuffer, Vec<usize>)>, TaskFileError> {
        let spec = &self.file.spec;
        let Some(dir) = self.file.base.dir() else {
            return Err(self.reference_error("built-in tasks cannot run Python".into()));
        };
        // The cache key covers the task file and every file it names, the sizes and the
        // input data itself (whatever seed drew it).
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.file.content_hash().as_bytes());
        hasher.update(sizes_text(&self.sizes).as_bytes());
        for (b, d) in spec.buffers.iter().zip(data) {
            if b.role != BufferRole::Output {
                hasher.update(b.name.as_bytes());
                hasher.update(&d.to_bytes());
            }
        }
        let key = hasher.finalize().to_hex().to_string();
        if let Some(cached) = self
            .cache_dir
            .as_deref()
            .and_then(|c| reference::cache_read(c, &key))
        {
            return Ok(cached);
        }
        let inputs = spec
            .buffers
            .iter()
            .zip(data)
            .zip(&self.shapes)
            .filter(|((b, _), _)| b.role != BufferRole::Output)
            .map(|((b, d), s)| (b.name.as_str(), d, s.clone()))
            .collect();
        let outputs = spec
            .buffers
            .iter()
            .filter(|b| b.role != BufferRole::Input)
            .map(|b| b.name.as_str())
            .collect();
        let scalars = self.scalar_json();
        let script_path = dir.join(script);
        let timeout = self.reference_timeout();
        let result = python::run(&PythonCall {
            script: &script_path,
            file: &self.file.file,
            inputs,
            outputs,
            sizes: &self.sizes,
            scalars,
            timeout,
        })?;
        // Only outputs that pass the checks are cached.
        let valid = spec
            .buffers
            .iter()
            .zip(&self.shapes)
            .filter(|(b, _)| b.role != BufferRole::Input)
            .all(|(b, s)| {
                reference::check_output(&b.name, b.dtype, s, result.get(&b.name)).is_ok()
            });
        if valid {
            if let Some(c) = &self.cache_dir {
                reference::cache_write(c, &key, &result);
            }
        }
        Ok(result)
    }

    /// Draws input set `variant` (its `init` distribution) from a ChaCha8 generator seeded
    /// with `seed`.
    pub fn inputs(&self, seed: u64, variant: u32) -> Vec<HostBuffer> {
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed);
        self.generate(&mut rng, variant)
    }
}

impl KernelTask for FileTask {
    fn name(&self) -> &str {
        &self.file.spec.name
    }

    /// The declared `[family]`, else the one a NumPy reference's trace shows
    /// ([`FileTask::traced_family`]; a reference the tracer cannot follow is logged with the
    /// construct it stopped at).
    fn family(&self) -> Option<FamilySpec> {
        if let Some(declared) = &self.file.spec.family {
            return Some(declared.clone());
        }
        self.file.spec.reference.python.as_ref()?;
        match self.traced_family() {
            Ok(found) => found,
            Err(e) => {
                tracing::info!("no family traced: {e}");
                // Once per task, not at every call.
                self.traced.get_or_init(|| None).clone()
            }
        }
    }

    fn sizes(&self) -> Sizes {
        self.sizes.clone()
    }

    fn describe(&self) -> Task {
        let spec = &self.file.spec;
        let mut t = Task::new(spec.name.clone());
        t.sizes = self.sizes.clone();
        let base = Tolerance::fp32();
        t.tolerance = match &spec.tolerance {
            Some(s) => Tolerance {
                atol: s.atol.unwrap_or(base.atol),
                rtol: s.rtol.unwrap_or(base.rtol),
                relative_threshold: s.relative_threshold.unwrap_or(base.relative_threshold),
                min_fraction_within: s.min_fraction_within.unwrap_or(base.min_fraction_within),
                min_cosine: s.min_cosine.unwrap_or(base.min_cosine),
            },
            None => base,
        };
        if let Ok(w) = self.file.work(&self.sizes) {
            t.work = w;
        }
        // Without `[work]`, the least traffic any kernel has: every input read and every
        // output written once (in-out buffers both), so that GB/s and the bandwidth roofline
        // are reported for every task file.
        if t.work.flops <= 0.0 && t.work.bytes <= 0.0 {
            t.work.bytes = self.minimum_bytes();
        }
        // The user's words go into the description; the interface is typed, and prompts
        // render it as a section of its own.
        t.description = spec.description.trim().to_owned();
        t.interface = Some(self.interface());
        t
    }

    fn resized(&self, sizes: &Sizes) -> Result<Box<dyn KernelTask>, EvalError> {
        Ok(Box::new(self.at_sizes(sizes)?))
    }

    /// The task file's `[[alternative_sizes]]`, else each size halved in turn and then all of
    /// them; leaving out sizes that give a buffer an invalid shape, and sizes under which the
    /// last two dimensions of a buffer with a matrix structure differ (a structure is part of
    /// the problem: [`TaskFile::buffer_shapes`] refuses them; softmax rows suit any sizes).
    fn alternative_sizes(&self) -> Vec<Sizes> {
        let mut out: Vec<Sizes> = Vec::new();
        let mut push = |s: Sizes| {
            if s != self.sizes && !out.contains(&s) && self.file.buffer_shapes(&s).is_ok() {
                out.push(s);
            }
        };
        if self.file.alternative_count() > 0 {
            for i in 0..self.file.alternative_count() {
                if let Ok(s) = self.file.alternative(i, &self.sizes) {
                    push(s);
                }
            }
        } else {
            // Halve each size in turn, then all of them; an alternative that breaks a
            // divisibility the sizes have (channels by groups) is another problem, not the
            // task at other sizes.
            let mut push = |s: Sizes| {
                if keeps_divisibility(&self.sizes, &s) {
                    push(s);
                }
            };
            for k in self.sizes.keys() {
                let mut s = self.sizes.clone();
                if let Some(v) = s.get_mut(k) {
                    *v /= 2;
                }
                if s.values().all(|v| *v > 0) {
                    push(s);
                }
            }
            let all: Sizes = self
                .sizes
                .iter()
                .map(|(k, v)| (k.clone(), (v / 2).max(1)))
                .collect();
            push(all);
        }
        out
    }

    fn buffers(&self) -> Vec<BufferSpec> {
        self.file
            .spec
            .buffers
            .iter()
            .zip(&self.shapes)
            .map(|(b, s)| BufferSpec {
                name: b.name.clone(),
                elements: s.iter().product(),
                role: Role::from(b.role),
                dtype: b.dtype,
            })
            .collect()
    }

    fn args(&self) -> Vec<ArgSpec> {
        let spec = &self.file.spec;
        spec.args
            .iter()
            .filter_map(|a| {
                Some(match self.file.arg_kind(a)? {
                    ArgKind::Size => ArgSpec::Size(a.clone()),
                    ArgKind::Buffer(i) => ArgSpec::Buffer(i),
                    ArgKind::Scalar(i) => {
                        let s = &spec.scalars[i];
                        match s.dtype {
                            Dtype::I32 => ArgSpec::I32(s.value.as_f64() as i32),
                            _ => ArgSpec::F32(s.value.as_f64() as f32),
                        }
                    }
                })
            })
            .collect()
    }

    fn generate(&self, rng: &mut dyn RngCore, variant: u32) -> Vec<HostBuffer> {
        self.file
            .spec
            .buffers
            .iter()
            .zip(&self.shapes)
            .enumerate()
            .map(|(i, (b, s))| {
                if b.role == BufferRole::Output {
                    return HostBuffer::empty(b.dtype);
                }
                let n: usize = s.iter().product();
                // `buffer_shapes` checked every distribution at these sizes before the task
                // was made, so an error here cannot happen; zeros would be no input set.
                let mut values = match self.file.init_at(i, variant as usize, &self.sizes) {
                    Ok(Some(init)) => init.draw(rng, n),
                    Ok(None) | Err(_) => vec![0.0; n],
                };
                // The problem's structure, on the f64 draw before conversion to the dtype.
                if let Some(structure) = self.file.structure(i) {
                    structure.apply(&mut values, s);
                }
                HostBuffer::from_f64(b.dtype, &values)
            })
            .collect()
    }

    fn reference(&self, data: &[HostBuffer]) -> Result<Vec<HostBuffer>, EvalError> {
        Ok(self.run_reference(data)?.0)
    }

    /// For outputs declared `accumulates = "n"`: `n` at this task's sizes, and `Σ|term|` per
    /// element as the reference computes it on the float inputs' absolute values (integer
    /// inputs, such as indices, unchanged); see [`crate::verify::accumulation_allowance`].
    fn accumulations(&self, data: &[HostBuffer]) -> Result<Vec<Option<Accumulation>>, EvalError> {
        let lengths = self.file.accumulation_lengths(&self.sizes)?;
        if lengths.iter().all(Option::is_none) {
            return Ok(Vec::new());
        }
        let absolute: Vec<HostBuffer> = data
            .iter()
            .map(|b| match b {
                HostBuffer::I32(_) => b.clone(),
                _ if b.is_empty() => b.clone(),
                _ => {
                    let values: Vec<f64> = b.to_f64().iter().map(|v| v.abs()).collect();
                    HostBuffer::from_f64(b.dtype(), &values)
                }
            })
            .collect();
        let (magnitudes, _) = self.run_reference(&absolute)?;
        Ok(lengths
            .into_iter()
            .zip(magnitudes)
            .map(|(length, m)| {
                length.map(|length| Accumulation {
                    length,
                    magnitude: m.to_f64(),
                })
            })
            .collect())
    }

    fn baseline(&self, language: Language) -> Option<KernelSource> {
        self.kernels
            .baselines
            .iter()
            .find(|k| k.language == language)
            .cloned()
    }

    fn seed_kernels(&self, language: Language) -> Vec<KernelSource> {
        self.kernels
            .seeds
            .iter()
            .filter(|k| k.language == language)
            .cloned()
            .collect()
    }

    fn reference_kernel(&self, language: Language) -> Option<KernelSource> {
        self.kernels
            .reference
            .clone()
            .filter(|k| k.language == language)
    }
}

/// Whether `alternative` keeps every strict divisibility of `sizes`: where a size divides a
/// larger one (8 groups of 24 channels), it still divides it. Equal sizes are not a
/// divisibility (halving one of two equal sizes is the non-square check), nor is a size of 1.
/// The evaluator's rule for the alternative sizes it makes itself; an importer that writes a
/// task's `[[alternative_sizes]]` keeps it too.
///
/// ```
/// use kf_eval::task::file::keeps_divisibility;
/// use kf_eval::task::Sizes;
///
/// let sizes: Sizes = [("channels".to_owned(), 24), ("groups".to_owned(), 8)].into_iter().collect();
/// let mut halved = sizes.clone();
/// halved["channels"] = 12;
/// assert!(!keeps_divisibility(&sizes, &halved));
/// halved["groups"] = 4;
/// assert!(keeps_divisibility(&sizes, &halved));
/// ```
pub fn keeps_divisibility(sizes: &Sizes, alternative: &Sizes) -> bool {
    sizes.iter().all(|(a, &va)| {
        sizes.iter().all(|(b, &vb)| {
            let divides = va > 1 && vb > va && vb % va == 0;
            match (alternative.get(a), alternative.get(b)) {
                (Some(&na), Some(&nb)) if divides => na > 0 && nb % na == 0,
                _ => true,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::file::load::TaskBase;
    use crate::task::file::schema::TaskSpec;

    fn sizes(pairs: &[(&str, i64)]) -> Sizes {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn halved_sizes_keep_the_divisibilities_the_sizes_have() {
        let groups = sizes(&[("features", 24), ("num_groups", 8), ("dim", 64)]);
        // 12 channels in 8 groups is not a group norm.
        assert!(!keeps_divisibility(
            &groups,
            &sizes(&[("features", 12), ("num_groups", 8), ("dim", 64)])
        ));
        assert!(keeps_divisibility(
            &groups,
            &sizes(&[("features", 24), ("num_groups", 4), ("dim", 64)])
        ));
        assert!(keeps_divisibility(
            &groups,
            &sizes(&[("features", 12), ("num_groups", 4), ("dim", 32)])
        ));
        // Equal sizes may part: a non-square product is the point of halving one.
        let square = sizes(&[("M", 64), ("N", 64)]);
        assert!(keeps_divisibility(&square, &sizes(&[("M", 32), ("N", 64)])));
    }

    /// A task file at `M = m`, `N = n` with input `A` of `shape` carrying `structure`, an
    /// input `X` of `[M, N]`, an output `Y` of `[M, N]` and a Rust reference.
    fn structured_spec(shape: &str, structure: &str, m: i64, n: i64) -> TaskSpec {
        TaskSpec::from_toml(&format!(
            r#"
name = "structured"
args = ["M", "N", "A", "X", "Y"]
[sizes]
M = {m}
N = {n}
[[buffer]]
name = "A"
dtype = "f32"
shape = {shape}
role = "input"
structure = "{structure}"
[[buffer]]
name = "X"
dtype = "f32"
shape = ["M", "N"]
role = "input"
[[buffer]]
name = "Y"
dtype = "f32"
shape = ["M", "N"]
role = "output"
[reference]
rust = "r"
"#
        ))
        .unwrap()
    }

    /// The task of `spec` at its default sizes.
    fn task_of(spec: TaskSpec) -> FileTask {
        let file = TaskFile::from_spec(spec, "structured.toml", TaskBase::Embedded(&[])).unwrap();
        let references = ReferenceRegistry::new().with("r", |_| Ok(IndexMap::new()));
        FileTask::with_references(Arc::new(file), &Sizes::new(), Arc::new(references)).unwrap()
    }

    #[test]
    fn drawn_inputs_have_their_structure_in_every_matrix_of_a_batch() {
        let task = task_of(structured_spec(r#"["3", "M", "M"]"#, "symmetric", 5, 4));
        let n = 5;
        for variant in 0..2 {
            let a = task.inputs(7, variant)[0].to_f64();
            assert_eq!(a.len(), 3 * n * n);
            for (b, m) in a.chunks_exact(n * n).enumerate() {
                for i in 0..n {
                    for j in 0..n {
                        assert_eq!(m[i * n + j], m[j * n + i], "matrix {b} ({i}, {j})");
                    }
                }
            }
        }
        let task = task_of(structured_spec(r#"["M", "M"]"#, "lower", 6, 6));
        let a = task.inputs(7, 0)[0].to_f64();
        for i in 0..6 {
            for j in 0..6 {
                assert_eq!(a[i * 6 + j] == 0.0, j > i, "({i}, {j}) = {}", a[i * 6 + j]);
            }
        }
    }

    #[test]
    fn alternative_sizes_keep_structured_matrices_square() {
        // [M, M] stays square whatever M is: halving M is used.
        let task = task_of(structured_spec(r#"["M", "M"]"#, "symmetric", 64, 16));
        let alternatives = task.alternative_sizes();
        assert!(
            alternatives.contains(&sizes(&[("M", 32), ("N", 16)])),
            "{alternatives:?}"
        );
        assert_eq!(alternatives.len(), 3, "{alternatives:?}");
        // [M, N] is square only while M == N: halving one of them alone is another problem.
        let spec = structured_spec(r#"["M", "N"]"#, "upper", 64, 64);
        let task = task_of(spec.clone());
        assert_eq!(
            task.alternative_sizes(),
            vec![sizes(&[("M", 32), ("N", 32)])]
        );
        // Sizes asked for are checked as well.
        let err = task.at_sizes(&sizes(&[("M", 32)])).unwrap_err();
        assert!(matches!(err, TaskFileError::Structure { .. }), "{err}");
        // Without the structure, halving one alone is the non-square check.
        let mut plain = spec;
        plain.buffers[0].structure = None;
        assert_eq!(task_of(plain).alternative_sizes().len(), 3);
    }

    #[test]
    fn drawn_softmax_inputs_are_probability_rows_at_every_size() {
        // [3, 5, 7]: 15 rows of 7, drawn normal then each made softmax(row).
        let task = task_of(structured_spec(r#"["3", "M", "N"]"#, "softmax", 5, 7));
        for variant in 0..2 {
            let a = task.inputs(7, variant)[0].to_f64();
            assert_eq!(a.len(), 3 * 5 * 7);
            // f32 storage: each term is rounded to 2^-24 relative, the sum to about 7 of them.
            for (r, row) in a.chunks_exact(7).enumerate() {
                let sum: f64 = row.iter().sum();
                assert!(
                    (sum - 1.0).abs() <= 1e-6,
                    "variant {variant} row {r}: {sum}"
                );
                assert!(row.iter().all(|p| *p > 0.0), "row {r}: {row:?}");
            }
            // The unstructured input beside it is not made rows of probabilities.
            let x = task.inputs(7, variant)[1].to_f64();
            assert!(x.iter().any(|v| *v < 0.0), "{x:?}");
        }
        // Not square: halving either size alone is still the problem.
        let task = task_of(structured_spec(r#"["M", "N"]"#, "softmax", 64, 64));
        assert_eq!(task.alternative_sizes().len(), 3);
    }

    /// A task file `copy.toml` in a fresh folder whose `seeds` name `s.toml`, with the seed's
    /// manifest and source beside it unless `with_seed` is false.
    fn seeded_task_dir(with_seed: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let task = r#"
name = "copy"
args = ["N", "x", "y"]
seeds = ["s.toml"]
[sizes]
N = 256
[[buffer]]
name = "x"
dtype = "f32"
shape = ["N"]
role = "input"
[[buffer]]
name = "y"
dtype = "f32"
shape = ["N"]
role = "output"
[reference]
rust = "r"
"#;
        std::fs::write(dir.path().join("copy.toml"), task).unwrap();
        if with_seed {
            let manifest = r#"
source = "s.cl"
entry = "copy"
language = "opencl"
[params]
WG = [64, 128]
[launch]
global = ["(N + WG - 1) / WG * WG"]
local = ["WG"]
"#;
            let source = "__kernel void copy(int N, __global const float* x, \
                          __global float* y) {\n\
                          int i = get_global_id(0);\n\
                          if (i < N) y[i] = x[i];\n}\n";
            std::fs::write(dir.path().join("s.toml"), manifest).unwrap();
            std::fs::write(dir.path().join("s.cl"), source).unwrap();
        }
        dir
    }

    /// A task file's `seeds` are loaded with the task and offered in their language only;
    /// they are neither the baseline nor the reference.
    #[test]
    fn seeds_are_loaded_and_offered_in_their_language() {
        let dir = seeded_task_dir(true);
        let file = TaskFile::load(&dir.path().join("copy.toml")).unwrap();
        assert_eq!(file.spec.seeds, ["s.toml"]);
        let references = ReferenceRegistry::new().with("r", |_| Ok(IndexMap::new()));
        let task =
            FileTask::with_references(Arc::new(file), &Sizes::new(), Arc::new(references)).unwrap();
        let seeds = task.seed_kernels(Language::OpenCl);
        assert_eq!(seeds.len(), 1);
        assert_eq!(seeds[0].entry, "copy");
        assert!(seeds[0].text.contains("y[i] = x[i]"), "{}", seeds[0].text);
        assert!(task.seed_kernels(Language::Cuda).is_empty());
        assert!(task.baseline(Language::OpenCl).is_none());
        assert!(task.reference_kernel(Language::OpenCl).is_none());
    }

    /// A seed whose manifest is missing is a load error naming `seeds[0]`; so is one whose
    /// manifest is not valid.
    #[test]
    fn a_missing_or_bad_seed_is_a_load_error_naming_its_field() {
        let dir = seeded_task_dir(false);
        let err = TaskFile::load(&dir.path().join("copy.toml")).unwrap_err();
        match &err {
            TaskFileError::Invalid { field, message, .. } => {
                assert_eq!(field, "seeds[0]", "{err}");
                assert!(message.contains("s.toml"), "{err}");
            }
            other => panic!("not an Invalid error: {other}"),
        }
        std::fs::write(dir.path().join("s.toml"), "entry = 3\n").unwrap();
        let err = TaskFile::load(&dir.path().join("copy.toml")).unwrap_err();
        assert!(
            matches!(&err, TaskFileError::Invalid { field, .. } if field == "seeds[0]"),
            "{err}"
        );
    }

    /// `seeds` survives a round trip through TOML (written before the tables, as TOML wants of
    /// a plain array), and a spec without seeds writes no `seeds` key.
    #[test]
    fn seeds_round_trip_through_toml() {
        let mut spec = structured_spec(r#"["M", "N"]"#, "symmetric", 4, 4);
        assert!(!spec.to_toml().unwrap().contains("seeds"));
        spec.seeds = vec!["reduce_scalar.toml".into(), "other/b.toml".into()];
        let text = spec.to_toml().unwrap();
        let first_table = text.find("\n[").unwrap();
        assert!(text.find("\nseeds").unwrap() < first_table, "{text}");
        assert_eq!(TaskSpec::from_toml(&text).unwrap(), spec, "{text}");
    }
}
