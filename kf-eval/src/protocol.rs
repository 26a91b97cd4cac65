//! The evaluation protocol, in process: manifest → constraints → compile → verify on several
//! fresh input sets with poisoned outputs, guard regions and checked inputs → interleaved
//! timing against the task baseline → roofline check. Run it inside an isolated worker
//! ([`crate::IsolatedEvaluator`]) so that a hanging or crashing kernel costs one evaluation.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use kf_core::{
    Backend, CompileOptions, CorrectnessReport, Evaluation, KernelArg, KernelSource, Language,
    NdRange, ParamValues, Status, TimingStats,
};
use kf_manifest::{Manifest, ManifestError};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::EvalError;
use crate::guarded::{alloc_guarded, backend_failure, fill, read, Failure, Guarded};
use crate::profile::{since, take_transfer_seconds, EvalProfile};
use crate::sequence::{alloc_scratch, check_stage, poison_scratch, read_all, Plan};
use crate::task::{sizes_text, ArgSpec, BufferSpec, HostBuffer, KernelTask, Role, Sizes};
use crate::verify::{
    accumulation_allowance, compare_buffers_with, guard_violation, tolerance_for, Verdict,
};

/// Evaluations that reuse an input set in [`EvalConfig::for_tuning`].
pub const TUNING_REUSE_INPUTS: u32 = 32;

/// Configuration of the protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalConfig {
    /// Input sets checked per evaluation (at least 3): the first at the task's sizes, the others
    /// at other shapes where the kernel's manifest can launch them.
    pub input_sets: u32,
    /// Timing.
    pub timing: TimingConfig,
    /// Compiler options besides the parameter definitions.
    pub compile: CompileOptions,
    /// Reject timings faster than the device's roofline allows.
    pub check_roofline: bool,
    /// Seed of the input data; `None` draws a fresh one from the OS for every evaluation.
    pub data_seed: Option<u64>,
    /// Evaluations that may reuse an input set (with its reference) before fresh data is
    /// drawn; 0 draws fresh data for every evaluation. Reuse saves recomputing large host
    /// references (a 1024³ product per set) during a search; it is safe because outputs are
    /// poisoned before every launch and a worker's data is drawn from OS entropy, so a kernel
    /// can neither predict nor remember it.
    #[serde(default)]
    pub reuse_inputs: u32,
    /// Largest diagnostics text, bytes.
    pub max_diagnostics: usize,
    /// Refuse, before compilation, kernels that would make the compiler read host files
    /// (`#include` of anything but the runtime's headers, `#embed`, `__has_include`, …; see
    /// [`kf_source::host_access`]). Always on in a search; turned off only by tests of the
    /// worker confinement that stands behind it.
    #[serde(default = "host_file_check_default")]
    pub host_file_check: bool,
}

fn host_file_check_default() -> bool {
    true
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            input_sets: 3,
            timing: TimingConfig::default(),
            compile: CompileOptions::default(),
            check_roofline: true,
            data_seed: None,
            reuse_inputs: 0,
            max_diagnostics: 4000,
            host_file_check: true,
        }
    }
}

impl EvalConfig {
    /// The protocol for tuning one kernel's parameters (`kf tune`): every check of the
    /// default (three input sets, poisoned outputs before every launch, guards, timed outputs
    /// re-checked, roofline), with two costs shared across the run's evaluations: an input set
    /// and its reference serve up to [`TUNING_REUSE_INPUTS`] evaluations of one worker, and
    /// the baseline is re-measured every [`TUNING_BASELINE_EVERY`]-th evaluation (its rolling
    /// window's median stands in between), and the first evaluation stops adding baseline
    /// launches after [`TUNING_FIRST_BASELINE_SECONDS`]. One warm-up launch, as in a search: verification
    /// has just launched the kernel on the same data at the task's sizes. Add
    /// [`TimingConfig::early_stop`] per evaluation to stop timing clearly slower
    /// configurations.
    pub fn for_tuning() -> Self {
        let mut config = EvalConfig {
            reuse_inputs: TUNING_REUSE_INPUTS,
            ..EvalConfig::default()
        };
        config.timing.warmup = 1;
        config.timing.baseline_every = TUNING_BASELINE_EVERY;
        config.timing.first_baseline_seconds = TUNING_FIRST_BASELINE_SECONDS;
        config
    }
}

/// First characters of a kernel text that stands for a mutator's extraction failure (no usable
/// kernel in its output), followed by the reason on the same line: [`KernelEvaluator::evaluate`]
/// answers such a source with [`Status::ExtractionError`] and the reason as diagnostics. The
/// same constant as [`kf_core::EXTRACTION_FAILURE_MARKER`]; mutators write these with
/// [`kf_core::Offspring::extraction_failure`].
pub const EXTRACTION_ERROR_MARKER: &str = kf_core::EXTRACTION_FAILURE_MARKER;

mod timing;
mod timing_config;

pub(crate) use timing_config::first_baseline_trials;
pub use timing_config::{
    TimingConfig, FIRST_BASELINE_MIN_TRIALS, FIRST_BASELINE_SECONDS, FIRST_BASELINE_TRIALS,
    SLOW_BASELINE_EVERY, TUNING_BASELINE_EVERY, TUNING_FIRST_BASELINE_SECONDS,
};

/// Keeps the head and the tail of a long text, so a build log's first error and its summary
/// both survive.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let half = max / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!(
        "{}\n[… {} bytes omitted …]\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

/// Source constructs that would let a kernel escape its own timing or the checks.
const FORBIDDEN: [(&str, &str); 3] = [
    (
        "enqueue_kernel",
        "device-side enqueue runs work outside the timed launch",
    ),
    (
        "get_default_queue",
        "device-side enqueue runs work outside the timed launch",
    ),
    (
        "cudaLaunchDevice",
        "dynamic parallelism runs work outside the timed launch",
    ),
];

/// Refuses a kernel whose text would make its compiler read a host file (see
/// [`kf_source::host_access`]), in every branch of its `#if`s, whatever its parameters.
pub fn host_file_check(source: &KernelSource) -> Result<(), kf_source::host_access::HostAccess> {
    use kf_source::host_access::{check_host_access, HeaderPolicy};
    let policy = match source.language {
        Language::OpenCl => HeaderPolicy::OPENCL_C,
        Language::Sycl => HeaderPolicy::SYCL,
        Language::Cuda => HeaderPolicy::CUDA,
        // A language added to kf-core later: no headers until its policy is written.
        _ => HeaderPolicy::OPENCL_C,
    };
    check_host_access(&source.text, &policy)
}

/// A compiled baseline with its launch plan and a rolling window of timings.
struct Baseline<K> {
    /// One per [`Plan::entries`].
    kernels: Vec<K>,
    plan: Plan,
    samples: VecDeque<f64>,
    /// Evaluations that used it so far (for [`TimingConfig::baseline_every`]).
    evaluations: u64,
}

/// One input set: the task at some sizes, the kernels' launches, its data, reference and
/// buffers.
struct Prepared<'t, B> {
    task: &'t dyn KernelTask,
    sizes: Sizes,
    plan: Plan,
    /// The task's buffers in its order, then the plan's scratch buffers.
    buffers: Vec<Guarded<B>>,
    data: Arc<Vec<HostBuffer>>,
    reference: Arc<Vec<HostBuffer>>,
    /// Per buffer, the accumulation rule's extra absolute tolerance per element (empty when
    /// the task declares no accumulating output).
    allowance: Arc<Allowances>,
    /// Whether the data and reference were drawn for this evaluation (not reused).
    fresh: bool,
}

/// The input sets a kernel passed: the first (at the task's sizes) kept for timing, the
/// worst correctness report, and each set's sizes.
struct Verified<'t, B> {
    timed: Prepared<'t, B>,
    worst: Option<CorrectnessReport>,
    checked: Vec<String>,
}

/// An input set kept for reuse, with its reference and how often it was used.
struct CachedInputs {
    data: Arc<Vec<HostBuffer>>,
    reference: Arc<Vec<HostBuffer>>,
    allowance: Arc<Allowances>,
    uses: u32,
}

/// Per buffer, the extra absolute tolerance of each element (`None`: none).
type Allowances = Vec<Option<Vec<f64>>>;

/// The accumulation rule's allowances of `task` on `data` ([`accumulation_allowance`]).
fn allowances(task: &dyn KernelTask, data: &[HostBuffer]) -> Result<Allowances, EvalError> {
    let specs = task.buffers();
    Ok(task
        .accumulations(data)?
        .into_iter()
        .zip(&specs)
        .map(|(acc, spec)| acc.map(|a| accumulation_allowance(spec.dtype, &a)))
        .collect())
}

/// Writes the buffers of the given roles: inputs get the data, outputs the poison.
fn load<B: Backend>(
    backend: &B,
    task: &dyn KernelTask,
    data: &[HostBuffer],
    buffers: &mut [Guarded<B::Buffer>],
    roles: &[Role],
) -> Result<(), EvalError> {
    for ((spec, g), d) in task.buffers().iter().zip(buffers.iter_mut()).zip(data) {
        if !roles.contains(&spec.role) {
            continue;
        }
        fill(backend, g, &payload(spec, d))?;
    }
    Ok(())
}

/// What a buffer holds before a launch: the data for inputs and in-place buffers (refilled
/// before every launch), the dtype's poison for outputs.
fn payload(spec: &BufferSpec, data: &HostBuffer) -> Vec<u8> {
    match spec.role {
        Role::Input | Role::InOut => data.to_bytes(),
        Role::Output => HostBuffer::poison(spec.dtype, spec.elements).to_bytes(),
    }
}

/// One kernel argument that is not a buffer.
fn value_arg<'a, T>(arg: &ArgSpec, sizes: &Sizes) -> Option<KernelArg<'a, T>> {
    match arg {
        ArgSpec::Size(name) => Some(KernelArg::I32(
            i32::try_from(sizes.get(name).copied().unwrap_or(0)).unwrap_or(i32::MAX),
        )),
        ArgSpec::F32(v) => Some(KernelArg::F32(*v)),
        ArgSpec::I32(v) => Some(KernelArg::I32(*v)),
        ArgSpec::Buffer(_) => None,
    }
}

/// A guarded buffer as a kernel argument: the kernel's view starts past the front guard.
fn buffer_arg<T>(g: &Guarded<T>) -> KernelArg<'_, T> {
    KernelArg::Buffer {
        buffer: &g.buffer,
        offset: g.guard,
    }
}

/// The task's arguments in its order, then every buffer past the task's own (a sequence's
/// scratch, in declaration order).
fn kernel_args<'a, B: Backend>(
    task: &dyn KernelTask,
    sizes: &Sizes,
    buffers: &'a [Guarded<B::Buffer>],
) -> Vec<KernelArg<'a, B::Buffer>> {
    let scratch = buffers.iter().skip(task.buffers().len()).map(buffer_arg);
    task.args()
        .iter()
        .filter_map(|a| match a {
            ArgSpec::Buffer(i) => buffers.get(*i).map(buffer_arg),
            other => value_arg(other, sizes),
        })
        .chain(scratch)
        .collect()
}

/// Reads every buffer back and checks guards, inputs and outputs against the input set `p`'s
/// data and reference (`buffers`: its own, or a rotation copy's).
fn check_after_launch<B: Backend>(
    backend: &B,
    p: &Prepared<'_, B::Buffer>,
    buffers: &[Guarded<B::Buffer>],
    tolerance: &kf_core::Tolerance,
) -> Result<CorrectnessReport, Failure> {
    let (task, data, reference, allowance) = (p.task, &p.data, &p.reference, &p.allowance);
    let mut worst: Option<CorrectnessReport> = None;
    for (i, (spec, g)) in task.buffers().iter().zip(buffers).enumerate() {
        let bytes = read(backend, g)?;
        check_guards(spec, g, &bytes)?;
        let body = &bytes[g.guard..g.guard + g.bytes];
        match spec.role {
            Role::Input => {
                let original = data.get(i).map(HostBuffer::to_bytes).unwrap_or_default();
                check_input_unchanged(spec, body, &original)?;
            }
            Role::Output | Role::InOut => {
                let out = HostBuffer::from_bytes(spec.dtype, body);
                let Some(expected) = reference.get(i) else {
                    continue;
                };
                let tolerance = &tolerance_for(spec.dtype, tolerance);
                let extra = allowance.get(i).and_then(Option::as_deref);
                let verdict = compare_buffers_with(&out, expected, tolerance, extra);
                let r = judge_output(task, spec, verdict, tolerance)?;
                if worst.is_none_or(|w| r.fraction_within < w.fraction_within) {
                    worst = Some(r);
                }
            }
        }
    }
    Ok(worst.unwrap_or(CorrectnessReport {
        fraction_within: 1.0,
        cosine: 1.0,
        ..CorrectnessReport::default()
    }))
}

/// The guard regions around buffer `spec` (read back whole as `bytes`) must be untouched.
fn check_guards<T>(spec: &BufferSpec, g: &Guarded<T>, bytes: &[u8]) -> Result<(), Failure> {
    if let Some(at) = guard_violation(&bytes[..g.guard]) {
        return Err(Failure::new(
            Status::RuntimeError,
            format!(
                "wrote out of bounds: {} bytes before the start of buffer {}",
                g.guard - at,
                spec.name
            ),
        ));
    }
    if let Some(at) = guard_violation(&bytes[g.guard + g.bytes..]) {
        return Err(Failure::new(
            Status::RuntimeError,
            format!(
                "wrote out of bounds: {} bytes past the end of buffer {} ({} elements)",
                at + 1,
                spec.name,
                spec.elements
            ),
        ));
    }
    Ok(())
}

/// An input buffer must hold exactly the data it was given (`original`).
fn check_input_unchanged(spec: &BufferSpec, body: &[u8], original: &[u8]) -> Result<(), Failure> {
    if body == original {
        return Ok(());
    }
    let first = body
        .chunks_exact(spec.dtype.size())
        .zip(original.chunks_exact(spec.dtype.size()))
        .position(|(a, b)| a != b)
        .unwrap_or(0);
    Err(Failure::new(
        Status::RuntimeError,
        format!(
            "modified its input {} (first changed element {first}); inputs must stay unchanged",
            spec.name
        ),
    ))
}

/// An output's verdict against the reference: its report when close enough, else the
/// failure that says what is wrong (unwritten elements, NaN or Inf, a mismatch).
fn judge_output(
    task: &dyn KernelTask,
    spec: &BufferSpec,
    verdict: Verdict,
    tolerance: &kf_core::Tolerance,
) -> Result<CorrectnessReport, Failure> {
    match verdict {
        Verdict::Close(r) => Ok(r),
        Verdict::Unwritten {
            count,
            first,
            total,
        } => Err(Failure::new(
            Status::WrongShape,
            format!(
                "left {count} of {total} elements of {} unwritten (first unwritten index {first}, \
                 row {} if rows are {} wide)",
                spec.name,
                first / row_width(task).max(1),
                row_width(task)
            ),
        )),
        Verdict::NonFinite { count, first } => Err(Failure::new(
            Status::WrongValues,
            format!(
                "produced {count} NaN or infinite values in {} (first at index {first}); \
                 these are never accepted",
                spec.name
            ),
        )),
        Verdict::Mismatch(r) => {
            let mut f = Failure::new(
                Status::WrongValues,
                format!(
                    "{} differs from the reference: first mismatch at index {}, max abs error {:.3e}, \
                     max rel error {:.3e}, {:.2}% of elements within {:.0}% (need > {:.0}%), cosine {:.6} \
                     (need >= {})",
                    spec.name,
                    r.first_mismatch.map_or("-".into(), |i| i.to_string()),
                    r.max_abs_error,
                    r.max_rel_error,
                    100.0 * r.fraction_within,
                    100.0 * tolerance.relative_threshold,
                    100.0 * tolerance.min_fraction_within,
                    r.cosine,
                    tolerance.min_cosine
                ),
            );
            f.report = Some(r);
            Err(f)
        }
    }
}

/// The width of an output row, for diagnostics (`N` for GEMM, `COLS` for softmax).
fn row_width(task: &dyn KernelTask) -> usize {
    let sizes = task.sizes();
    ["N", "COLS"]
        .iter()
        .find_map(|k| sizes.get(*k))
        .and_then(|v| usize::try_from(*v).ok())
        .unwrap_or(1)
}

/// What compiling a kernel, without running it, found ([`KernelEvaluator::compile_only`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CompileCheck {
    /// It compiled, and its launch geometry fits the compiled kernel: what the compiler
    /// reported (with the backend's `cache_key`, and `cache_file` where the binary was cached).
    Compiled(kf_core::CompilerFacts),
    /// It cannot run: the evaluation the whole protocol gives it (an extraction or compile
    /// error, an invalid manifest or launch geometry).
    Failed(Box<Evaluation>),
}

/// Compiled kernels whose launch geometry fits them, with what led there.
struct Front<K> {
    manifest: Manifest,
    params: ParamValues,
    plan: Plan,
    /// One per [`Plan::entries`].
    kernels: Vec<K>,
    /// What the compiler reported of the kernel named by the manifest's `entry`.
    facts: kf_core::CompilerFacts,
}

/// The in-process evaluator over one backend. It keeps each task's baseline compiled, with a
/// rolling window of baseline timings that every evaluation adds to by timing the baseline
/// interleaved with the candidate.
///
/// # Example
///
/// ```no_run
/// # fn demo<B: kf_core::Backend>(backend: B, kernel: kf_core::KernelSource) -> Result<(), kf_eval::EvalError> {
/// use kf_eval::{task::Gemm, EvalConfig, KernelEvaluator};
///
/// let mut evaluator = KernelEvaluator::new(backend, EvalConfig::default());
/// let task = Gemm::new(256, 192, 128)?;
/// let evaluation = evaluator.evaluate(&task, &kernel, &kf_core::ParamValues::new())?;
/// println!("{} {:?}", evaluation.status, evaluation.speedup);
/// # Ok(()) }
/// ```
pub struct KernelEvaluator<B: Backend> {
    backend: B,
    config: EvalConfig,
    baselines: HashMap<String, Baseline<B::Kernel>>,
    inputs: HashMap<String, CachedInputs>,
    reference_kernels: HashMap<String, B::Kernel>,
    peaks: Option<crate::characterise::Peaks>,
    profile: EvalProfile,
    /// The p-value with which the last timing stopped early ([`TimingConfig::early_stop`]).
    early_stop_p: Option<f64>,
}

impl<B: Backend> KernelEvaluator<B> {
    /// An evaluator over `backend`. The roofline it reports against and checks timings with
    /// is the device's cached characterisation when there is one
    /// ([`crate::characterise::Peaks::for_device`]), else the backend's estimated peaks.
    pub fn new(backend: B, config: EvalConfig) -> Self {
        let peaks = crate::characterise::Peaks::for_device(backend.name(), backend.device());
        KernelEvaluator {
            backend,
            config,
            baselines: HashMap::new(),
            inputs: HashMap::new(),
            reference_kernels: HashMap::new(),
            peaks,
            profile: EvalProfile::default(),
            early_stop_p: None,
        }
    }

    /// Replaces the peaks the roofline is computed against (`None`: no roofline figures and
    /// no roofline check).
    pub fn with_peaks(mut self, peaks: Option<crate::characterise::Peaks>) -> Self {
        self.peaks = peaks;
        self
    }

    /// The peaks the roofline is computed against.
    pub fn peaks(&self) -> Option<&crate::characterise::Peaks> {
        self.peaks.as_ref()
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The configuration.
    pub fn config(&self) -> &EvalConfig {
        &self.config
    }

    /// Replaces the configuration (compiled baselines are kept).
    pub fn set_config(&mut self, config: EvalConfig) {
        self.config = config;
    }

    /// Where the time of the last [`KernelEvaluator::evaluate`] went.
    pub fn last_profile(&self) -> &EvalProfile {
        &self.profile
    }

    /// Evaluates `source` with `params` (missing parameters take the manifest's defaults) on
    /// `task`. A bad kernel gives an evaluation low on the ladder; `Err` means the evaluator
    /// itself could not work (for example the baseline does not compile).
    /// [`KernelEvaluator::last_profile`] says afterwards where its time went.
    pub fn evaluate(
        &mut self,
        task: &dyn KernelTask,
        source: &KernelSource,
        params: &ParamValues,
    ) -> Result<Evaluation, EvalError> {
        self.profile = EvalProfile::default();
        self.early_stop_p = None;
        let _ = take_transfer_seconds();
        let started = Instant::now();
        let result = self.evaluate_profiled(task, source, params);
        self.profile.total_s = since(started);
        self.profile.transfer_s = take_transfer_seconds();
        // Compiler logs quote whatever they read: no secret of this process leaves in them.
        result.map(|mut e| {
            e.redact_secrets();
            e
        })
    }

    /// Runs the protocol up to and including compilation, without the device running
    /// anything: the extraction, language and forbidden-construct checks, the manifest and
    /// its parameters, the launch geometry, compilation, and the compiled kernel's work-group
    /// limit. A compile worker uses it to build a kernel's binary (into the backend's compile
    /// cache) for an execute worker on another machine; [`CompileCheck::Failed`] holds the
    /// evaluation the full protocol would give a kernel that cannot run.
    pub fn compile_only(
        &mut self,
        task: &dyn KernelTask,
        source: &KernelSource,
        params: &ParamValues,
    ) -> Result<CompileCheck, EvalError> {
        self.profile = EvalProfile::default();
        let started = Instant::now();
        let front = self.compile_checked(task, source, params);
        self.profile.total_s = since(started);
        Ok(match front? {
            Ok(front) => CompileCheck::Compiled(front.facts),
            Err(failed) => CompileCheck::Failed(Box::new(failed)),
        })
    }

    /// The protocol up to a compiled kernel whose geometry fits it; `Ok(Err(_))`: the
    /// evaluation of a kernel that cannot run.
    fn compile_checked(
        &mut self,
        task: &dyn KernelTask,
        source: &KernelSource,
        params: &ParamValues,
    ) -> Result<Result<Front<B::Kernel>, Evaluation>, EvalError> {
        let max = self.config.max_diagnostics;
        let fail = |status: Status, message: String, params: &ParamValues| {
            let mut e = Evaluation::failed(status, bounded(&message, max));
            e.params = params.clone();
            Ok(Err(e))
        };
        // A mutator that could not draw a kernel from its output (an LLM reply with no code
        // block, edits that do not apply) hands over a marked source: rank it at the bottom
        // of the ladder with the mutator's reason, so that the next prompt can show it.
        if let Some(reason) = kf_core::extraction_failure_in(source) {
            return fail(Status::ExtractionError, reason.trim().to_owned(), params);
        }
        if !self.backend.languages().contains(&source.language) {
            let message = format!(
                "the {} backend cannot compile {} kernels",
                self.backend.name(),
                source.language
            );
            return fail(Status::CompileError, message, params);
        }
        for (pattern, why) in FORBIDDEN {
            if source.text.contains(pattern) {
                let message = format!("`{pattern}` is not allowed: {why}");
                return fail(Status::CompileError, message, params);
            }
        }
        if self.config.host_file_check {
            if let Err(refused) = host_file_check(source) {
                return fail(Status::CompileError, refused.to_string(), params);
            }
        }
        let manifest = match Manifest::from_kernel(source) {
            Ok(m) => m,
            Err(e) => {
                return fail(
                    Status::CompileError,
                    format!("invalid manifest: {e}"),
                    params,
                )
            }
        };
        let params = match manifest.resolve_params(params) {
            Ok(p) => p,
            Err(e) => {
                return fail(
                    Status::CompileError,
                    format!("invalid parameters: {e}"),
                    params,
                )
            }
        };
        let plan = match self.geometry(&manifest, &params, task) {
            Ok(p) => p,
            Err(e) => return fail(Status::CompileError, e.to_string(), &params),
        };
        let options = match self.compile_options(&manifest, &params) {
            Ok(o) => o,
            Err(e) => return fail(Status::CompileError, e.to_string(), &params),
        };
        let (kernels, facts) = match self.compile_plan(source, &manifest, &plan, &params, &options)
        {
            Ok(compiled) => compiled,
            Err(mut e) => {
                e.diagnostics = bounded(&e.diagnostics, max);
                e.params = params;
                return Ok(Err(*e));
            }
        };
        Ok(Ok(Front {
            manifest,
            params,
            plan,
            kernels,
            facts,
        }))
    }

    /// Compiles every kernel function of `plan` and checks each launch's work-group against
    /// the limit its compiled kernel reports; the kernels in [`Plan::entries`]' order and
    /// the compiler's facts of the manifest's `entry`, or the evaluation of a kernel that
    /// cannot run.
    fn compile_plan(
        &mut self,
        source: &KernelSource,
        manifest: &Manifest,
        plan: &Plan,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<(Vec<B::Kernel>, kf_core::CompilerFacts), Box<Evaluation>> {
        let mut kernels = Vec::with_capacity(plan.entries.len());
        let mut facts = None;
        for entry in &plan.entries {
            let stage_source;
            let one = if *entry == source.entry {
                source
            } else {
                stage_source = KernelSource {
                    entry: entry.clone(),
                    ..source.clone()
                };
                &stage_source
            };
            let compile_started = Instant::now();
            let compiled = self.backend.compile(one, params, options);
            self.profile.compile_s += since(compile_started);
            let compiled = compiled.map_err(|e| {
                let mut what = String::from("compilation failed");
                if plan.entries.len() > 1 {
                    what.push_str(&format!(" (kernel `{entry}`)"));
                }
                let f = backend_failure(&e, &what);
                Box::new(Evaluation::failed(f.status, f.message))
            })?;
            let max_wg = compiled.facts.max_work_group_size;
            for stage in plan.stages.iter().filter(|s| s.entry == *entry) {
                let (Some(local), Some(max_wg)) = (&stage.range.local, max_wg) else {
                    continue;
                };
                let wg: usize = local.iter().product();
                if wg as u64 > max_wg {
                    let message = format!(
                        "a work-group of {wg} work-items exceeds the {max_wg} this compiled kernel \
                         (`{entry}`) allows on {}",
                        self.backend.device().name
                    );
                    let mut e = Evaluation::failed(Status::RuntimeError, message);
                    e.compiler = compiled.facts;
                    return Err(Box::new(e));
                }
            }
            if *entry == manifest.entry || facts.is_none() {
                facts = Some(compiled.facts.clone());
            }
            kernels.push(compiled.kernel);
        }
        Ok((kernels, facts.unwrap_or_default()))
    }

    fn evaluate_profiled(
        &mut self,
        task: &dyn KernelTask,
        source: &KernelSource,
        params: &ParamValues,
    ) -> Result<Evaluation, EvalError> {
        let Front {
            manifest,
            params,
            plan,
            kernels,
            facts,
        } = match self.compile_checked(task, source, params)? {
            Ok(front) => front,
            Err(failed) => return Ok(failed),
        };
        let max = self.config.max_diagnostics;
        let fail = |status: Status, message: String, params: &ParamValues| {
            let mut e = Evaluation::failed(status, bounded(&message, max));
            e.params = params.clone();
            e
        };
        let finish = |mut e: Evaluation| {
            e.compiler = facts.clone();
            Ok(e)
        };

        let alternatives = self.alternative_shapes(task, &manifest, &params, 2);
        let Verified {
            mut timed,
            worst,
            checked,
        } = match self.verify_input_sets(task, &plan, &alternatives, &kernels)? {
            Ok(verified) => verified,
            Err(f) => {
                let mut e = fail(f.status, f.message, &params);
                e.correctness = f.report;
                return finish(e);
            }
        };

        let (samples, baseline_stats) =
            match self.time_beside_baseline(task, &kernels, &mut timed)? {
                Ok(t) => t,
                Err(f) => {
                    let mut e = fail(f.status, format!("during timing: {}", f.message), &params);
                    e.correctness = f.report.or(worst);
                    return finish(e);
                }
            };
        let Some(stats) = TimingStats::from_samples(&samples) else {
            let message = "the device reported no usable timing".to_owned();
            return finish(fail(Status::RuntimeError, message, &params));
        };
        let work = task.describe().work;
        if let Some(message) = self.roofline_refusal(&work, stats.median_s) {
            return finish(fail(Status::RuntimeError, message, &params));
        }
        let mut evaluation = Evaluation::correct(stats, baseline_stats);
        evaluation.samples = kf_core::noise::keep_samples(&samples);
        evaluation.params = params;
        evaluation.correctness = worst.map(|mut w| {
            w.input_sets = u32::try_from(checked.len()).unwrap_or(u32::MAX);
            w
        });
        self.add_throughput(&mut evaluation, &work, stats.median_s);
        evaluation.diagnostics = bounded(&self.correct_summary(&evaluation, &checked, &stats), max);
        finish(evaluation)
    }

    /// Correctness on several fresh input sets: the first at the task's own sizes (the one
    /// that is timed), the others at the `alternatives` shapes where the manifest can launch
    /// them, so that hard-coded sizes are caught and large problems are not checked three
    /// times at full size. `Ok(Err(_))`: the first input set the kernel failed on.
    fn verify_input_sets<'t>(
        &mut self,
        task: &'t dyn KernelTask,
        plan: &Plan,
        alternatives: &'t [(Box<dyn KernelTask>, Plan)],
        kernels: &[B::Kernel],
    ) -> Result<Result<Verified<'t, B::Buffer>, Failure>, EvalError> {
        let seed = self
            .config
            .data_seed
            .unwrap_or_else(|| rand::rng().next_u64());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let sets = self.config.input_sets.max(3);
        let mut worst: Option<CorrectnessReport> = None;
        let mut checked = Vec::new();
        let mut timed: Option<Prepared<'_, B::Buffer>> = None;
        for set in 0..sets {
            let alternative = match set {
                0 => None,
                n => alternatives.get((n as usize - 1) % alternatives.len().max(1)),
            };
            let (set_task, set_plan): (&dyn KernelTask, Plan) = match alternative {
                Some((t, p)) => (t.as_ref(), p.clone()),
                None => (task, plan.clone()),
            };
            let inputs_started = Instant::now();
            let mut prepared = self.prepare(set_task, set_plan, &mut rng, set)?;
            self.profile.inputs_s += since(inputs_started);
            if prepared.fresh {
                self.profile.inputs_generated += 1;
            } else {
                self.profile.inputs_reused += 1;
            }
            let verify_started = Instant::now();
            let verdict = self.launch_checked(kernels, &mut prepared);
            self.profile.verify_s += since(verify_started);
            match verdict {
                Ok(report) => {
                    if worst.is_none_or(|w| report.fraction_within < w.fraction_within) {
                        worst = Some(report);
                    }
                    checked.push(sizes_text(&prepared.sizes));
                }
                Err(mut f) => {
                    f.message = format!(
                        "input set {} of {sets} ({}): {}",
                        set + 1,
                        sizes_text(&prepared.sizes),
                        f.message
                    );
                    return Ok(Err(f));
                }
            }
            if set == 0 {
                timed = Some(prepared);
            }
        }
        let Some(timed) = timed else {
            return Err(EvalError::Backend("no input set was prepared".into()));
        };
        Ok(Ok(Verified {
            timed,
            worst,
            checked,
        }))
    }

    /// Timing, interleaved with the baseline (compiled and verified first where this
    /// evaluator has not yet), with the time of each charged to the profile. `Ok(Err(_))`:
    /// what went wrong in a timed launch or in the re-check of its outputs.
    fn time_beside_baseline(
        &mut self,
        task: &dyn KernelTask,
        kernels: &[B::Kernel],
        timed: &mut Prepared<'_, B::Buffer>,
    ) -> Result<Result<timing_config::Timed, Failure>, EvalError> {
        let baseline_started = Instant::now();
        let baseline_key = self.ensure_baseline(task)?;
        self.profile.baseline_s += since(baseline_started);
        let timing_started = Instant::now();
        let baseline_before = self.profile.baseline_s;
        let timing = self.time(kernels, timed, baseline_key.as_deref());
        // time() charges its interleaved baseline launches to `baseline_s`.
        self.profile.timing_s = since(timing_started) - (self.profile.baseline_s - baseline_before);
        Ok(timing)
    }

    /// Why a median of `median_s` cannot be genuine: faster than this device's roofline
    /// allows for `work` (`None`: plausible, or the check is off or has no peaks).
    fn roofline_refusal(&self, work: &kf_core::Work, median_s: f64) -> Option<String> {
        if !self.config.check_roofline {
            return None;
        }
        let peaks = self.peaks.as_ref()?;
        let bound = peaks.anti_cheat_seconds(work);
        if !(bound > 0.0 && median_s < bound) {
            return None;
        }
        let what = if peaks.measured {
            format!(
                "{:.0} GFLOP/s, {:.0} GB/s: the measured peaks with a safety margin",
                peaks.check_gflops, peaks.check_gbs
            )
        } else {
            format!(
                "estimated peaks {:.0} GFLOP/s, {:.0} GB/s",
                peaks.gflops, peaks.gbs
            )
        };
        Some(format!(
            "measured {median_s:.3e} s is below the {bound:.3e} s this device's roofline allows \
             ({what}): the timing cannot be genuine"
        ))
    }

    /// A correct kernel's throughput at a median of `median_s`, and its place on the roofline
    /// where the peaks are known.
    fn add_throughput(&self, evaluation: &mut Evaluation, work: &kf_core::Work, median_s: f64) {
        if work.flops > 0.0 && median_s > 0.0 {
            evaluation.gflops = Some(work.flops / median_s / 1e9);
        }
        if work.bytes > 0.0 && median_s > 0.0 {
            evaluation.gbs = Some(work.bytes / median_s / 1e9);
        }
        if let Some(point) = self
            .peaks
            .as_ref()
            .and_then(|p| crate::characterise::roofline_point(work, median_s, p))
        {
            evaluation.roofline_fraction = Some(point.fraction);
            evaluation.memory_bound = Some(point.memory_bound);
        }
    }

    /// The diagnostics of a correct kernel: the input sets it was checked on, its timing, its
    /// speedup over the baseline timed beside it, and whether the timing stopped early.
    fn correct_summary(
        &self,
        evaluation: &Evaluation,
        checked: &[String],
        stats: &TimingStats,
    ) -> String {
        let mut speed = match evaluation.speedup {
            Some(s) => format!(", {s:.2}x the baseline timed beside it"),
            None => String::new(),
        };
        if let Some(p) = self.early_stop_p {
            speed.push_str(&format!(
                "; timing stopped early: slower than the incumbent (one-sided Mann-Whitney p = {p:.4})"
            ));
        }
        format!(
            "correct on {} input sets ({}); median {:.4} ms over {} trials{speed}",
            checked.len(),
            checked.join("; "),
            stats.median_s * 1e3,
            stats.trials,
        )
    }

    /// The evaluator's compile options plus the compiler flags the kernel's manifest asks for
    /// at `params` (floating-point modes only: kf-manifest refuses any other flag, so what the
    /// checks read is what is compiled).
    fn compile_options(
        &self,
        manifest: &Manifest,
        params: &ParamValues,
    ) -> Result<CompileOptions, ManifestError> {
        let mut options = self.config.compile.clone();
        for flag in manifest.compile_flags(params)? {
            if !options.flags.contains(&flag) {
                options.flags.push(flag);
            }
        }
        Ok(options)
    }

    /// What is launched at `task`'s sizes (every kernel's geometry, the scratch sizes),
    /// after checking the constraints.
    fn geometry(
        &self,
        manifest: &Manifest,
        params: &ParamValues,
        task: &dyn KernelTask,
    ) -> Result<Plan, ManifestError> {
        let symbols = manifest.symbols(params, &task.sizes(), self.backend.device());
        manifest.check_constraints(params, &symbols)?;
        Plan::new(manifest, &symbols, &task.buffers())
    }

    /// The launch of a kernel that must be one kernel without scratch (a trusted reference
    /// kernel) at `task`'s sizes.
    fn single_geometry(
        &self,
        manifest: &Manifest,
        params: &ParamValues,
        task: &dyn KernelTask,
    ) -> Result<NdRange, ManifestError> {
        let plan = self.geometry(manifest, params, task)?;
        plan.single()
            .cloned()
            .ok_or_else(|| ManifestError::Invalid {
                file: manifest.file.clone(),
                field: "kernels".into(),
                message: "a reference kernel is one kernel: give [launch]".into(),
            })
    }

    /// Up to `n` alternative shapes the manifest can launch, in the task's order.
    fn alternative_shapes(
        &self,
        task: &dyn KernelTask,
        manifest: &Manifest,
        params: &ParamValues,
        n: usize,
    ) -> Vec<(Box<dyn KernelTask>, Plan)> {
        task.alternative_sizes()
            .into_iter()
            .filter_map(|sizes| {
                let t = task.resized(&sizes).ok()?;
                let plan = self.geometry(manifest, params, t.as_ref()).ok()?;
                Some((t, plan))
            })
            .take(n)
            .collect()
    }

    /// Draws data, computes the reference and allocates guarded buffers for one input set.
    fn prepare<'t>(
        &mut self,
        task: &'t dyn KernelTask,
        plan: Plan,
        rng: &mut ChaCha8Rng,
        variant: u32,
    ) -> Result<Prepared<'t, B::Buffer>, EvalError> {
        let key = format!("{}:{}:{variant}", task.name(), sizes_text(&task.sizes()));
        let reuse = self.config.reuse_inputs;
        let (data, reference, allowance, fresh) = match self.inputs.get_mut(&key) {
            Some(c) if c.uses < reuse => {
                c.uses += 1;
                (
                    Arc::clone(&c.data),
                    Arc::clone(&c.reference),
                    Arc::clone(&c.allowance),
                    false,
                )
            }
            _ => {
                let data = task.generate(rng, variant);
                let reference = match self.reference_by_kernel(task, &data)? {
                    Some(r) => r,
                    None => task.reference(&data)?,
                };
                let allowance = Arc::new(allowances(task, &data)?);
                let (data, reference) = (Arc::new(data), Arc::new(reference));
                if reuse > 0 {
                    let cached = CachedInputs {
                        data: Arc::clone(&data),
                        reference: Arc::clone(&reference),
                        allowance: Arc::clone(&allowance),
                        uses: 1,
                    };
                    self.inputs.insert(key, cached);
                }
                (data, reference, allowance, true)
            }
        };
        let mut buffers = task
            .buffers()
            .iter()
            .map(|spec| alloc_guarded(&self.backend, spec.bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        buffers.extend(alloc_scratch(&self.backend, &plan)?);
        Ok(Prepared {
            task,
            sizes: task.sizes(),
            plan,
            buffers,
            data,
            reference,
            allowance,
            fresh,
        })
    }

    /// The kernel `source_in` gives in the first of the backend's languages that it has one
    /// in (a task's baseline or trusted reference kernel).
    fn in_backend_language(
        &self,
        source_in: impl Fn(Language) -> Option<KernelSource>,
    ) -> Option<KernelSource> {
        self.backend.languages().iter().find_map(|l| source_in(*l))
    }

    /// Runs the task's trusted reference kernel, when it has one in a language of this
    /// backend, on `data` and returns the buffers it leaves (empty for pure inputs). A
    /// reference kernel that fails, leaves elements unwritten, writes out of bounds or
    /// produces NaN/Inf is a task error.
    fn reference_by_kernel(
        &mut self,
        task: &dyn KernelTask,
        data: &[HostBuffer],
    ) -> Result<Option<Vec<HostBuffer>>, EvalError> {
        let Some(source) = self.in_backend_language(|l| task.reference_kernel(l)) else {
            return Ok(None);
        };
        let err = |message: String| {
            EvalError::TaskFile(crate::task::file::TaskFileError::Reference {
                file: task.name().to_owned(),
                reference: format!("kernel `{}`", source.entry),
                message,
            })
        };
        let manifest = Manifest::from_kernel(&source).map_err(|e| err(e.to_string()))?;
        let params = manifest.default_params();
        let sizes = task.sizes();
        let range = self
            .single_geometry(&manifest, &params, task)
            .map_err(|e| err(e.to_string()))?;
        let options = self
            .compile_options(&manifest, &params)
            .map_err(|e| err(e.to_string()))?;
        let key = source.content_hash();
        if !self.reference_kernels.contains_key(&key) {
            let compiled = self
                .backend
                .compile(&source, &params, &options)
                .map_err(|e| err(backend_failure(&e, "compilation failed").message))?;
            self.reference_kernels.insert(key.clone(), compiled.kernel);
        }
        let Some(kernel) = self.reference_kernels.get(&key) else {
            return Err(err("compiled kernel missing".into()));
        };
        let specs = task.buffers();
        let mut buffers = specs
            .iter()
            .map(|s| alloc_guarded(&self.backend, s.bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let all = [Role::Input, Role::Output, Role::InOut];
        load(&self.backend, task, data, &mut buffers, &all)?;
        let args = kernel_args::<B>(task, &sizes, &buffers);
        self.backend
            .launch(kernel, &args, &range)
            .map_err(|e| err(backend_failure(&e, "launch failed").message))?;
        let mut out = Vec::with_capacity(specs.len());
        for (spec, g) in specs.iter().zip(&buffers) {
            let bytes = read(&self.backend, g)?;
            if guard_violation(&bytes[..g.guard]).is_some()
                || guard_violation(&bytes[g.guard + g.bytes..]).is_some()
            {
                return Err(err(format!("wrote outside buffer {}", spec.name)));
            }
            if spec.role == Role::Input {
                out.push(HostBuffer::empty(spec.dtype));
                continue;
            }
            let body = HostBuffer::from_bytes(spec.dtype, &bytes[g.guard..g.guard + g.bytes]);
            if let Some(i) = body.poisoned(None).iter().position(|p| *p) {
                return Err(err(format!("left element {i} of {} unwritten", spec.name)));
            }
            if let Some(i) = body.to_f64().iter().position(|v| !v.is_finite()) {
                return Err(err(format!(
                    "produced a NaN or infinite value at element {i} of {}",
                    spec.name
                )));
            }
            out.push(body);
        }
        Ok(Some(out))
    }

    /// One verified launch: inputs and poison in, launch, then guards, inputs and outputs.
    /// A sequence's kernels are launched one by one with the checks between them
    /// ([`crate::sequence`]).
    fn launch_checked(
        &self,
        kernels: &[B::Kernel],
        p: &mut Prepared<'_, B::Buffer>,
    ) -> Result<CorrectnessReport, Failure> {
        let backend = &self.backend;
        let specs = p.task.buffers();
        load(
            backend,
            p.task,
            &p.data,
            &mut p.buffers,
            &[Role::Input, Role::Output, Role::InOut],
        )?;
        poison_scratch(backend, &p.plan, &mut p.buffers[specs.len()..])?;
        let mut before = match p.plan.sequence {
            true => Some(read_all(backend, &specs, &p.plan, &p.buffers, "loading")?),
            false => None,
        };
        let args = kernel_args::<B>(p.task, &p.sizes, &p.buffers);
        let count = p.plan.stages.len();
        for (k, stage) in p.plan.stages.iter().enumerate() {
            let Some(kernel) = kernels.get(stage.kernel) else {
                return Err(Failure::new(
                    Status::RuntimeError,
                    "a kernel of the plan was not compiled",
                ));
            };
            backend.launch(kernel, &args, &stage.range).map_err(|e| {
                let what = match count {
                    1 => format!("launch over {} failed", stage.range),
                    _ => format!("launch of `{}` over {} failed", stage.entry, stage.range),
                };
                backend_failure(&e, &what)
            })?;
            if let Some(previous) = before.as_mut() {
                let which = format!("kernel {} of {count} (`{}`)", k + 1, stage.entry);
                let after = read_all(backend, &specs, &p.plan, &p.buffers, &which)?;
                check_stage(&specs, &p.plan, k, previous, &after)?;
                *previous = after;
            }
        }
        let tolerance = p.task.describe().tolerance;
        check_after_launch(backend, p, &p.buffers, &tolerance)
    }

    /// Compiles and verifies the task's baseline once; returns its key, or `None` when the
    /// task has no baseline in a language of this backend.
    fn ensure_baseline(&mut self, task: &dyn KernelTask) -> Result<Option<String>, EvalError> {
        let Some(source) = self.in_backend_language(|l| task.baseline(l)) else {
            return Ok(None);
        };
        let key = format!(
            "{}:{}:{}",
            task.name(),
            sizes_text(&task.sizes()),
            source.content_hash()
        );
        if self.baselines.contains_key(&key) {
            return Ok(Some(key));
        }
        let baseline_error = |message: String| EvalError::Baseline {
            task: task.name().to_owned(),
            message,
        };
        let manifest = Manifest::from_kernel(&source).map_err(|e| baseline_error(e.to_string()))?;
        let params = manifest.default_params();
        let plan = self
            .geometry(&manifest, &params, task)
            .map_err(|e| baseline_error(e.to_string()))?;
        let options = self
            .compile_options(&manifest, &params)
            .map_err(|e| baseline_error(e.to_string()))?;
        let (kernels, _) = self
            .compile_plan(&source, &manifest, &plan, &params, &options)
            .map_err(|e| baseline_error(e.diagnostics))?;
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
        let mut prepared = self.prepare(task, plan.clone(), &mut rng, 0)?;
        // A baseline of several kernels passes the same checks between its kernels.
        self.launch_checked(&kernels, &mut prepared)
            .map_err(|f| baseline_error(f.message))?;
        self.baselines.insert(
            key.clone(),
            Baseline {
                kernels,
                plan,
                samples: VecDeque::new(),
                evaluations: 0,
            },
        );
        Ok(Some(key))
    }
}
