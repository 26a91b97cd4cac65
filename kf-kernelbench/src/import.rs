//! `kf task import-kernelbench`: a KernelBench problem file becomes a task file.
//!
//! The problem is parsed (Python `ast`, no torch needed) for its module-level constants (int
//! constants become task sizes, float constants scalars, int tuples such as
//! `input_shape = (4096,)` one size per element), the tensors of `get_inputs()` (their shapes as
//! expressions over the sizes, their distributions) and the names of `forward()`'s arguments.
//! The reference is then run at three small probe settings of the sizes to learn the outputs'
//! shapes and dtypes (and, with torch, the model's parameters, which become input buffers); each
//! dimension is fitted to an expression over the sizes by the rule in `import_helper.py`
//! (`fit_dim`), or the import fails asking for the shape by hand.
//!
//! The reference is the unchanged problem file run with PyTorch on the CPU when torch imports
//! in the Python used; otherwise a NumPy script `<stem>_ref.py` beside the problem (or already
//! in the output folder), for which a template is written when there is none.
//!
//! The problem file travels unchanged with the task, in the task folder's `vendor/` (it is
//! third-party code: KernelBench, MIT), beside the project's own task file and reference.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;
use kf_eval::task::file::{
    BaselineSpec, BufferDecl, BufferRole, Dtype, ExprText, FamilySpec, OneOrMany, ReferenceSpec,
    ScalarDecl, ScalarValue, TaskBase, TaskFile, TaskSpec, ToleranceSpec, WorkSpec,
};
use serde::Deserialize;

use crate::error::KernelBenchError;
use crate::python::{default_python, run_python, torch_available};
use crate::size_constraints::SizeConstraints;

const HELPER: &str = include_str!("import_helper.py");

/// The folder inside a task folder that holds the unchanged KernelBench problem file.
pub(crate) const PROBLEM_FOLDER: &str = "vendor";

/// Where a task folder keeps the problem file `<stem>.py`, relative to the folder.
pub(crate) fn problem_in_task(stem: &str) -> PathBuf {
    Path::new(PROBLEM_FOLDER).join(format!("{stem}.py"))
}
const TORCH_ADAPTER: &str = include_str!("torch_adapter.py");
/// The NumPy stand-in for torch that generated references run problems with.
const NUMPY_TORCH: &str = include_str!("numpy_torch.py");
/// The generated NumPy reference (placeholders as in the torch adapter).
const NUMPY_REFERENCE: &str = include_str!("numpy_reference.py");
/// The stand-in's file name inside the task folder.
const NUMPY_TORCH_FILE: &str = "kf_numpy_torch.py";
/// The generated naive kernel's source beside [`BASELINE_FILE_NAME`].
const BASELINE_SOURCE_NAME: &str = "naive.cl";
/// The task file's name inside the output folder.
pub const TASK_FILE_NAME: &str = "task.toml";
/// The baseline manifest the importer links when the output folder has one.
pub const BASELINE_FILE_NAME: &str = "naive.toml";

/// Which reference the task file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReferenceKind {
    /// The unchanged problem file, run with PyTorch on the CPU.
    Torch,
    /// A NumPy script `<stem>_ref.py` written by the user.
    Numpy,
}

impl ReferenceKind {
    /// `torch` or `numpy`.
    pub fn name(self) -> &'static str {
        match self {
            ReferenceKind::Torch => "torch",
            ReferenceKind::Numpy => "numpy",
        }
    }

    /// Words for the import's summary.
    pub fn describe(self) -> &'static str {
        match self {
            ReferenceKind::Torch => "the unchanged problem file with PyTorch on the CPU",
            ReferenceKind::Numpy => "NumPy",
        }
    }
}

/// Which reference to prefer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReferencePreference {
    /// PyTorch when it imports, else NumPy.
    #[default]
    Auto,
    /// NumPy even when torch is installed.
    Numpy,
}

/// What to import and where.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The KernelBench problem file (`19_ReLU.py`).
    pub problem: PathBuf,
    /// The folder that receives the task file, a copy of the problem and the reference.
    pub out_dir: PathBuf,
    /// Default sizes to write instead of the problem's (they are meant for large GPUs).
    pub sizes: IndexMap<String, i64>,
    /// Every size the problem declares above this value is lowered to it, unless `sizes`
    /// gives it (KernelBench's sizes are meant for large GPUs; `None` keeps them).
    pub max_size: Option<i64>,
    /// The size rule: all of the problem's sizes (those in `sizes` excepted) scaled by one
    /// common factor until the problem fits the budget ([`SizeBudget`]); not with `max_size`.
    pub fit: Option<SizeBudget>,
    /// The Python interpreter; `None` for [`default_python`].
    pub python: Option<PathBuf>,
    /// Which reference to use.
    pub reference: ReferencePreference,
    /// The element-wise tolerance written into the task file, `|out - ref| <= atol + rtol *
    /// |ref|`; [`KERNELBENCH_TOLERANCE`] (KernelBench's own check) unless the importer is told
    /// otherwise.
    pub tolerance: ImportTolerance,
}

/// What the size rule fits a problem into (`kf task import-kernelbench --fit`): its inputs,
/// weights and outputs in bytes (4 an element) and its matrix products' and convolutions'
/// floating-point operations. Every size above 16 is scaled by one common factor, the largest
/// at most 1 that fits, rounded to the nearest multiple of the power of two (at most 32 and an
/// eighth of the size) that divides it, so that the divisibility a problem needs (channels by groups) is kept; sizes of 16 and
/// below (kernel sizes, strides, groups) stay. Scaled sizes stay above 16 unless no factor fits
/// that way; then a second pass lets them fall to 8, under the largest factor that leaves no
/// shape empty.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeBudget {
    /// Bytes of the inputs, weights and outputs together.
    pub max_bytes: u64,
    /// Floating-point operations of the matrix products and convolutions.
    pub max_flops: f64,
}

impl SizeBudget {
    /// The rule the whole-suite runs use (issue 60): 32 MiB and 2 GFLOP.
    pub const SUITE: SizeBudget = SizeBudget {
        max_bytes: 32 << 20,
        max_flops: 2e9,
    };
}

/// The element-wise tolerance of an imported task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImportTolerance {
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
}

impl ImportTolerance {
    /// A tolerance from the command line's `--atol` / `--rtol`; each must be a finite,
    /// non-negative number.
    pub fn new(atol: f64, rtol: f64) -> Result<Self, KernelBenchError> {
        for (name, value) in [("atol", atol), ("rtol", rtol)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(KernelBenchError::BadTolerance { name, value });
            }
        }
        Ok(ImportTolerance { atol, rtol })
    }
}

/// Parses `--size` arguments, `NAME=VALUE` each (empty entries are skipped), in order.
pub fn parse_size_assignments<S: AsRef<str>>(
    texts: &[S],
) -> Result<IndexMap<String, i64>, KernelBenchError> {
    let mut sizes = IndexMap::new();
    for text in texts
        .iter()
        .map(AsRef::as_ref)
        .filter(|s| !s.trim().is_empty())
    {
        let bad = |reason: &str| KernelBenchError::BadSize {
            name: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (name, value) = text.split_once('=').ok_or_else(|| bad("not NAME=VALUE"))?;
        let value: i64 = value
            .trim()
            .parse()
            .map_err(|_| bad("the value is not an integer"))?;
        sizes.insert(name.trim().to_owned(), value);
    }
    Ok(sizes)
}

impl Default for ImportTolerance {
    fn default() -> Self {
        KERNELBENCH_TOLERANCE
    }
}

/// KernelBench's own correctness check: `torch.allclose(out, ref, atol=1e-02, rtol=1e-02)`.
/// Imported problems are judged by it by default, so that a kernel KernelBench accepts (an
/// honest f32 cumulative sum over long rows, whose error near a zero crossing of the prefix
/// exceeds 1e-4) is accepted here too; the aggregate rules (99% of elements within 1%, cosine
/// similarity) still apply on top.
pub const KERNELBENCH_TOLERANCE: ImportTolerance = ImportTolerance {
    atol: 1e-2,
    rtol: 1e-2,
};

/// What the import wrote.
#[derive(Debug, Clone)]
pub struct ImportReport {
    /// The task file.
    pub task_file: PathBuf,
    /// The reference used.
    pub reference: ReferenceKind,
    /// The reference script inside the output folder.
    pub reference_file: PathBuf,
    /// The task as written.
    pub spec: TaskSpec,
    /// Sizes that were varied while probing the reference (the others kept their values).
    pub varied_sizes: Vec<String>,
    /// Why the folder has no generated naive kernel (`None` when it has one, generated now or
    /// before, or the user's own).
    pub baseline_note: Option<String>,
    /// With the size rule: the bytes and floating-point operations at the fitted sizes.
    pub fitted: Option<(u64, f64)>,
}

impl ImportReport {
    /// What `kf task import-kernelbench` prints: the files written, the kernel's arguments,
    /// each buffer with its role, dtype and shape, the sizes, and what is missing.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "wrote {}\nreference: {} ({})\nkernel arguments: {}\n",
            self.task_file.display(),
            self.reference_file.display(),
            self.reference.describe(),
            self.spec.args.join(", ")
        );
        for b in &self.spec.buffers {
            let shape: Vec<String> = b.shape.iter().map(|e| e.text()).collect();
            text.push_str(&format!(
                "  {:<8} {:<24} {} [{}]\n",
                format!("{:?}", b.role).to_lowercase(),
                b.name,
                b.dtype,
                shape.join(", ")
            ));
        }
        let sizes: Vec<String> = self
            .spec
            .sizes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        text.push_str(&format!("sizes: {}\n", sizes.join(", ")));
        if let Some((bytes, flops)) = self.fitted {
            text.push_str(&format!(
                "sizes fitted by the size rule: {:.1} MiB of inputs, weights and outputs, \
                 {:.3} GFLOP\n",
                bytes as f64 / (1u64 << 20) as f64,
                flops / 1e9
            ));
        }
        if let Some(note) = &self.baseline_note {
            text.push_str(&format!("{note}\n"));
        }
        if self.spec.baseline.is_none() {
            text.push_str(
                "no baseline: write naive.toml (+ its .cl) beside the task file and add \
                 [baseline] kernel = \"naive.toml\"\n",
            );
        }
        text
    }
}

#[derive(Debug, Deserialize)]
struct HelperBuffer {
    name: String,
    dtype: Dtype,
    shape: Vec<String>,
    #[serde(default)]
    init: Option<String>,
    /// `symmetric`, `lower`, `upper` or `softmax` where get_inputs() gives the tensor that
    /// structure (`(A + A.T) / 2`, `torch.tril(A)`, `torch.triu(A)`, `x.softmax(dim=-1)`).
    #[serde(default)]
    structure: Option<String>,
}

impl HelperBuffer {
    /// The task file's declaration of this buffer in `role`, drawn from `init`.
    fn decl(&self, role: BufferRole, init: Option<OneOrMany<String>>) -> BufferDecl {
        BufferDecl {
            name: self.name.clone(),
            dtype: self.dtype,
            shape: to_exprs(&self.shape),
            role,
            init,
            accumulates: None,
            structure: self.structure.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct HelperAnswer {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    sizes: IndexMap<String, i64>,
    #[serde(default)]
    tuples: IndexMap<String, Vec<String>>,
    #[serde(default)]
    scalars: IndexMap<String, f64>,
    #[serde(default)]
    inputs: Vec<HelperInput>,
    #[serde(default)]
    parameters: Vec<HelperBuffer>,
    #[serde(default)]
    outputs: Vec<HelperBuffer>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    varying: Vec<String>,
    /// The number of terms each output element sums, when forward() is a scan, a reduction
    /// over one dimension or a matrix product (the task file's `accumulates`).
    #[serde(default)]
    accumulates: Option<String>,
    /// The operator family forward() was recognised as (the task file's `[family]`), its
    /// output named `$out` (the importer names the outputs).
    #[serde(default)]
    family: Option<serde_json::Value>,
    /// With a generation request: the naive kernel's source and its global size.
    #[serde(default)]
    kernel: Option<String>,
    /// With a generation request: the naive kernel's launch plan, its kernels (one, or a
    /// sequence where operations whose work the output would repeat per element run first,
    /// into scratch) with their launches and scratch buffers.
    #[serde(default)]
    plan: Option<NaivePlan>,
    /// With a generation request: each parameter's initial distribution.
    #[serde(default)]
    parameter_inits: Vec<ParameterInit>,
    /// With a generation request: the family forward()'s trace shows (a matrix product and
    /// its element-wise epilogue), where the source's own recognition found none.
    #[serde(default)]
    trace_family: Option<serde_json::Value>,
    /// With a generation request: the floating-point operations of forward()'s matrix
    /// products and convolutions, an expression over the sizes (the task file's `[work]`).
    #[serde(default)]
    flops: Option<String>,
    /// With a fit request: the sizes the size rule chose, and the bytes and operations there.
    #[serde(default)]
    fitted: Option<Fitted>,
    /// With a generation request: kernels generated from the trace beside the naive one
    /// (a parallel two-stage reduction to one value), starting points of the search.
    #[serde(default)]
    seeds: Vec<GeneratedSeed>,
    /// With a generation request: the sizes forward() needs divisible or equal.
    #[serde(default)]
    constraints: SizeConstraints,
    /// With a generation request: the output's shape as expressions over the sizes, from
    /// forward()'s trace (exact where a size the probes keep fixed, a kernel size, shapes it).
    #[serde(default)]
    output_shape: Option<Vec<String>>,
    /// With a reference: the other input distributions under which its output is not finite
    /// at the task's sizes (left out of the input sets).
    #[serde(default)]
    unstable_inits: Vec<String>,
    /// forward()'s arguments in get_inputs() order: the inputs' buffers and the Python numbers
    /// among them (empty from an older helper: the buffers' order).
    #[serde(default)]
    input_order: Vec<String>,
    /// The forward() arguments get_inputs() gives as Python numbers (`s = 3.14`), by name:
    /// the task's scalars of the same names, passed to forward() as the numbers they are (an
    /// int stays an int) by the references.
    #[serde(default)]
    constants: IndexMap<String, serde_json::Number>,
}

impl HelperAnswer {
    /// forward()'s arguments in order (buffer names and constants' names).
    fn forward_inputs(&self) -> Vec<&str> {
        if self.input_order.is_empty() {
            self.inputs.iter().map(|i| i.buffer.name.as_str()).collect()
        } else {
            self.input_order.iter().map(String::as_str).collect()
        }
    }

    /// The constants as a Python dict literal.
    fn py_constants(&self) -> String {
        let entries: Vec<String> = self
            .constants
            .iter()
            .map(|(k, v)| format!("{}: {v}", py_repr(k)))
            .collect();
        format!("{{{}}}", entries.join(", "))
    }
}

/// A kernel the stand-in generated from forward()'s trace besides the naive kernel: its
/// file stem, OpenCL source and manifest (with its choices as `[params]`).
#[derive(Debug, Clone, Deserialize)]
struct GeneratedSeed {
    name: String,
    source: String,
    manifest: String,
}

/// How a generated naive kernel launches: one kernel, or a sequence of kernels with scratch
/// buffers (its manifest's `[launch]`, or `[[scratch]]` and `[[kernels]]`).
#[derive(Debug, Clone, Deserialize)]
struct NaivePlan {
    scratch: Vec<NaiveScratch>,
    kernels: Vec<NaiveKernel>,
}

/// A scratch buffer of a generated plan (f32, `elements` an expression over the sizes).
#[derive(Debug, Clone, Deserialize)]
struct NaiveScratch {
    name: String,
    elements: String,
}

/// A kernel of a generated plan: its entry, launch and the buffers it writes.
#[derive(Debug, Clone, Deserialize)]
struct NaiveKernel {
    entry: String,
    launch: NaiveLaunch,
    writes: Vec<String>,
}

/// A generated kernel's launch: global and local sizes, expressions over the sizes.
#[derive(Debug, Clone, Deserialize)]
struct NaiveLaunch {
    global: Vec<String>,
    local: Vec<String>,
}

/// TOML array of strings.
fn toml_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

impl NaivePlan {
    /// The manifest's launch tables: `[launch]` for one kernel without scratch, else
    /// `[[scratch]]` and `[[kernels]]`, the generator's output `out` written as the task's
    /// `output` (a user's reference names it).
    fn toml(&self, output: &str) -> String {
        if let ([one], true) = (&self.kernels[..], self.scratch.is_empty()) {
            return format!(
                "\n[launch]\nglobal = {}\nlocal = {}\n",
                toml_strings(&one.launch.global),
                toml_strings(&one.launch.local)
            );
        }
        let mut text = String::new();
        for s in &self.scratch {
            text.push_str(&format!(
                "\n[[scratch]]\nname = {:?}\ndtype = \"f32\"\nelements = {:?}\n",
                s.name, s.elements
            ));
        }
        for k in &self.kernels {
            let writes: Vec<String> = k
                .writes
                .iter()
                .map(|w| {
                    if w == "out" {
                        output.to_owned()
                    } else {
                        w.clone()
                    }
                })
                .collect();
            text.push_str(&format!(
                "\n[[kernels]]\nentry = {:?}\nwrites = {}\nlaunch = {{ global = {}, local = {} }}\n",
                k.entry,
                toml_strings(&writes),
                toml_strings(&k.launch.global),
                toml_strings(&k.launch.local)
            ));
        }
        text
    }
}

/// The size rule's answer.
#[derive(Debug, Deserialize)]
struct Fitted {
    sizes: IndexMap<String, i64>,
    bytes: u64,
    flops: f64,
}

/// A model parameter's initial distribution, as the model initialises it.
#[derive(Debug, Clone, Deserialize)]
struct ParameterInit {
    name: String,
    init: String,
    /// A magnitude for the second distribution: the largest bound or deviation, at least 0.5.
    scale: f64,
}

impl ParameterInit {
    /// The model's own distribution first, then another of similar magnitude (so that a
    /// kernel cannot rely on, say, a norm's weight being one).
    fn inits(&self) -> OneOrMany<String> {
        let other = if self.init.starts_with("uniform") {
            format!("normal(0, {})", self.scale)
        } else if self.init == "ones" {
            "uniform(0.5, 1.5)".to_owned()
        } else {
            format!("uniform(-{0}, {0})", self.scale)
        };
        OneOrMany::Many(vec![self.init.clone(), other])
    }
}

#[derive(Debug, Deserialize)]
struct HelperInput {
    #[serde(flatten)]
    buffer: HelperBuffer,
    #[serde(default)]
    bool: bool,
}

pub(crate) fn ask_helper(
    python: &Path,
    problem: &Path,
    reference: Option<&Path>,
    sizes: &IndexMap<String, i64>,
) -> Result<HelperAnswer, KernelBenchError> {
    ask_helper_with_trace(python, problem, reference, sizes, None)
}

/// [`ask_helper`] given what the stand-in's run of forward() knows: the probes of the
/// reference keep the sizes' needs (channels a multiple of their groups: a torch module refuses
/// others), and take the output's traced shape where it agrees with every probe (a fitted shape
/// only covers the sizes the probes vary, and the evaluator's other input sets halve every
/// size).
fn ask_helper_with_trace(
    python: &Path,
    problem: &Path,
    reference: Option<&Path>,
    sizes: &IndexMap<String, i64>,
    stand_in: Option<&StandIn>,
) -> Result<HelperAnswer, KernelBenchError> {
    let request = serde_json::json!({
        "problem": problem,
        "reference": reference,
        "sizes": sizes,
        "check_inits": OTHER_INITS,
        "traced_output": stand_in.and_then(|s| s.output_shape.as_deref()),
        "size_needs": stand_in.map(|s| &s.constraints),
    });
    helper_request(python, problem, reference, &request)
}

/// Runs the helper on `request`, letting it read the folders of `problem` and `reference`.
fn helper_request(
    python: &Path,
    problem: &Path,
    reference: Option<&Path>,
    request: &serde_json::Value,
) -> Result<HelperAnswer, KernelBenchError> {
    // Three probes of a torch model, each importing the problem: minutes at most.
    // The problem's folder and the reference's (the only files the helper reads), absolute:
    // a relative name's parent is the empty path, which names no folder.
    let folders: Vec<PathBuf> = [Some(problem), reference]
        .into_iter()
        .flatten()
        .filter_map(|p| std::path::absolute(p).ok()?.parent().map(Path::to_path_buf))
        .collect();
    let folders: Vec<&Path> = folders.iter().map(PathBuf::as_path).collect();
    let stdout = run_python(
        python,
        HELPER,
        &request.to_string(),
        Duration::from_secs(600),
        &folders,
    )?;
    let last = stdout.lines().last().unwrap_or_default();
    let answer: HelperAnswer =
        serde_json::from_str(last).map_err(|e| KernelBenchError::Python {
            python: python.display().to_string(),
            message: format!("unreadable answer from the import helper ({e}): {last}"),
        })?;
    if !answer.ok {
        return Err(KernelBenchError::Problem {
            problem: problem.to_path_buf(),
            message: answer.error.unwrap_or_else(|| "failed".into()),
        });
    }
    Ok(answer)
}

/// Writes `text` to `path` through a temporary file in the same folder and a rename.
pub(crate) fn write_atomic(path: &Path, text: &str) -> Result<(), KernelBenchError> {
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    fs::write(&tmp, text).map_err(|e| KernelBenchError::io(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| KernelBenchError::io(path, e))
}

fn copy_unless_same(from: &Path, to: &Path) -> Result<(), KernelBenchError> {
    let same = match (fs::canonicalize(from), fs::canonicalize(to)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same {
        let text = fs::read_to_string(from).map_err(|e| KernelBenchError::io(from, e))?;
        write_atomic(to, &text)?;
    }
    Ok(())
}

fn numpy_template(stem: &str, answer: &HelperAnswer) -> String {
    let mut inputs = String::new();
    for i in &answer.inputs {
        inputs.push_str(&format!(
            "#   inputs[{:?}]: {} of shape ({})\n",
            i.buffer.name,
            i.buffer.dtype.numpy(),
            i.buffer.shape.join(", ")
        ));
    }
    let sizes = answer
        .sizes
        .keys()
        .map(|k| format!("{k:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#""""NumPy reference for the KernelBench problem {stem}.py (PyTorch is not the reference here).

Write reference() so that it computes what the problem's Model.forward computes:
{inputs}#   sizes: {{{sizes}}} (the task's sizes, ints)
Return a dict of output arrays: {{"out": array}} (several outputs: "out0", "out1", ...).
Model weights (nn.Conv2d, nn.LayerNorm, ...) are inputs of the task: declare each one in
PARAMETERS as name -> shape expressions over the sizes, e.g. {{"conv1d_weight": ["out_channels",
"in_channels", "kernel_size"]}}, and read it from inputs[name].
"""
import numpy as np

PARAMETERS = {{}}


def reference(inputs, sizes, scalars):
    raise NotImplementedError("write the NumPy reference for {stem}.py")
"#
    )
}

fn to_exprs(shape: &[String]) -> Vec<ExprText> {
    shape
        .iter()
        .map(|s| match s.parse::<i64>() {
            Ok(i) => ExprText::Int(i),
            Err(_) => ExprText::Text(s.clone()),
        })
        .collect()
}

/// The distributions the evaluator's other input sets draw float inputs from, beside the
/// problem's own.
const OTHER_INITS: [&str; 2] = ["normal", "uniform(-3, 3)"];

/// The distributions of one input across the evaluator's input sets: the problem's own first,
/// then others, so that a kernel cannot depend on, say, positive inputs (robust-kbench's point);
/// leaving out those under which the reference's output is not finite (`unstable`: a product
/// of 2,048 values from uniform(-3, 3) overflows), which check no kernel.
fn input_inits(init: Option<&str>, dtype: Dtype, unstable: &[String]) -> Option<OneOrMany<String>> {
    let own = init?;
    if dtype == Dtype::I32 || own.starts_with("int(") {
        return Some(OneOrMany::One(own.to_owned()));
    }
    let mut all = vec![own.to_owned()];
    for other in OTHER_INITS {
        if other != own && !unstable.iter().any(|u| u == other) {
            all.push(other.to_owned());
        }
    }
    Some(OneOrMany::Many(all))
}

/// Imports a KernelBench problem: writes `<out>/task.toml`, a copy of the problem file and the
/// reference script; see the module documentation. An import that fails into a folder it
/// created removes that folder, so that no folder of kernels without a task file is left
/// (a folder that existed before, perhaps holding a naive kernel of the user's, is kept), except
/// where the failure is [`KernelBenchError::ReferenceTemplateWritten`]: the reference template
/// written there is for the user to complete.
pub fn import_kernelbench(options: &ImportOptions) -> Result<ImportReport, KernelBenchError> {
    let created = !options.out_dir.exists();
    let imported = import_into(options);
    let template = matches!(
        imported,
        Err(KernelBenchError::ReferenceTemplateWritten { .. })
    );
    if imported.is_err() && created && !template {
        if let Err(e) = fs::remove_dir_all(&options.out_dir) {
            tracing::warn!(
                "the failed import's folder {} was not removed: {e}",
                options.out_dir.display()
            );
        }
    }
    imported
}

fn import_into(options: &ImportOptions) -> Result<ImportReport, KernelBenchError> {
    let problem = &options.problem;
    let stem = problem_stem(problem)?;
    let python = options.python.clone().unwrap_or_else(default_python);

    // First the problem alone: sizes and inputs (also checks the sizes given).
    let analysis = ask_helper(&python, problem, None, &IndexMap::new())?;
    check_given_sizes(&options.sizes, &analysis, &stem)?;

    let out = &options.out_dir;
    let problem_dir = out.join(PROBLEM_FOLDER);
    fs::create_dir_all(&problem_dir).map_err(|e| KernelBenchError::io(&problem_dir, e))?;
    let problem_in_out = problem_in_task(&stem);
    let import = Import {
        options,
        problem_copy: out.join(&problem_in_out),
        problem_in_out,
        stem,
        python,
    };
    let (sizes, fitted) = import.task_sizes(&analysis)?;

    let use_torch =
        options.reference == ReferencePreference::Auto && torch_available(&import.python);
    copy_unless_same(problem, &import.problem_copy)?;
    let reference = if use_torch {
        import.torch_reference(&analysis, &sizes)?
    } else {
        import.numpy_reference(&analysis, &sizes)?
    };
    let (kind, reference_file) = (reference.kind, reference.file.clone());
    let answer = ask_helper_with_trace(
        &import.python,
        &import.problem_copy,
        Some(&reference_file),
        &sizes,
        reference.stand_in.as_ref().ok(),
    )?;
    // The generated kernels write the output by the name the reference gives it.
    let output = match &answer.outputs[..] {
        [one] => one.name.as_str(),
        _ => "out",
    };
    let baseline_note = baseline_note(out, &reference.stand_in, output)?;
    let trace = reference.trace_facts();
    let spec = build_spec(
        &import.stem,
        &reference_file,
        out,
        &answer,
        &sizes,
        options.tolerance,
        trace,
    )?;
    let task_file = import.write_task_file(&spec, kind, &reference_file, &answer.varying)?;
    Ok(ImportReport {
        task_file,
        reference: kind,
        reference_file,
        spec,
        varied_sizes: answer.varying,
        baseline_note,
        fitted,
    })
}

/// The problem file's stem (`19_ReLU`), once it is known to be an existing `.py` file.
fn problem_stem(problem: &Path) -> Result<String, KernelBenchError> {
    let bad_path = |reason: &str| KernelBenchError::BadProblemPath {
        path: problem.to_path_buf(),
        reason: reason.to_owned(),
    };
    if problem.extension().and_then(|e| e.to_str()) != Some("py") {
        return Err(bad_path("not a .py file"));
    }
    if !problem.is_file() {
        return Err(bad_path("no such file"));
    }
    Ok(problem
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| bad_path("the file name is not UTF-8"))?
        .to_owned())
}

/// Checks the sizes the user gives: each a positive size of the problem (`analysis`).
fn check_given_sizes(
    given: &IndexMap<String, i64>,
    analysis: &HelperAnswer,
    stem: &str,
) -> Result<(), KernelBenchError> {
    for (name, value) in given {
        if !analysis.sizes.contains_key(name) {
            return Err(KernelBenchError::BadSize {
                name: name.clone(),
                reason: format!(
                    "not a size of {stem}.py (its sizes: {})",
                    analysis
                        .sizes
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        if *value <= 0 {
            return Err(KernelBenchError::BadSize {
                name: name.clone(),
                reason: format!("{value} is not positive"),
            });
        }
    }
    Ok(())
}

/// The bytes and floating-point operations at the sizes the size rule fitted.
type FittedTotals = (u64, f64);

/// One import under way: what was asked, and where the problem goes in the output folder.
struct Import<'a> {
    options: &'a ImportOptions,
    /// The problem file's stem (`19_ReLU`).
    stem: String,
    python: PathBuf,
    /// The problem's copy, relative to the output folder (as the task file names it)...
    problem_in_out: PathBuf,
    /// ...and as a path.
    problem_copy: PathBuf,
}

/// The reference chosen for the task, and what the NumPy stand-in for torch made of
/// forward(): the naive kernel (the baseline, whichever reference runs) and the operator
/// family its trace shows.
struct PreparedReference {
    kind: ReferenceKind,
    file: PathBuf,
    stand_in: Result<StandIn, KernelBenchError>,
    /// The parameters' initial distributions, when the stand-in is the reference.
    parameter_inits: Vec<ParameterInit>,
}

impl PreparedReference {
    /// What the task file takes from the stand-in's trace (nothing when it could not run).
    fn trace_facts(self) -> TraceFacts {
        let parameter_inits = self.parameter_inits;
        match self.stand_in {
            Ok(s) => TraceFacts {
                parameter_inits,
                family: s.family,
                flops: s.flops,
                seeds: s.seeds.iter().map(|g| format!("{}.toml", g.name)).collect(),
                constraints: s.constraints,
            },
            Err(_) => TraceFacts {
                parameter_inits,
                family: None,
                flops: None,
                seeds: Vec::new(),
                constraints: SizeConstraints::default(),
            },
        }
    }
}

impl Import<'_> {
    /// The sizes the task is written with: the ones given, then the problem's, fitted by the
    /// size rule or lowered to --max-size; with the bytes and operations the rule fitted to.
    fn task_sizes(
        &self,
        analysis: &HelperAnswer,
    ) -> Result<(IndexMap<String, i64>, Option<FittedTotals>), KernelBenchError> {
        let options = self.options;
        let mut sizes = options.sizes.clone();
        let mut fitted = None;
        match (options.fit, options.max_size) {
            (Some(_), Some(_)) => {
                return Err(KernelBenchError::BadSize {
                    name: "--max-size".into(),
                    reason: "give either the size rule (--fit) or --max-size".into(),
                })
            }
            (Some(budget), None) => {
                copy_unless_same(&options.problem, &self.problem_copy)?;
                let answer = fit_sizes(
                    &self.python,
                    &options.out_dir,
                    &self.problem_copy,
                    &sizes,
                    budget,
                )?;
                sizes = answer.sizes;
                fitted = Some((answer.bytes, answer.flops));
            }
            (None, Some(max)) => {
                if max <= 0 {
                    return Err(KernelBenchError::BadSize {
                        name: "--max-size".into(),
                        reason: format!("{max} is not positive"),
                    });
                }
                for (name, value) in &analysis.sizes {
                    if *value > max && !sizes.contains_key(name) {
                        sizes.insert(name.clone(), max);
                    }
                }
            }
            (None, None) => {}
        }
        Ok((sizes, fitted))
    }

    /// The PyTorch reference: an adapter that runs the unchanged problem file.
    fn torch_reference(
        &self,
        analysis: &HelperAnswer,
        sizes: &IndexMap<String, i64>,
    ) -> Result<PreparedReference, KernelBenchError> {
        let out = &self.options.out_dir;
        let adapter = torch_adapter(analysis, &self.problem_in_out.to_string_lossy());
        let file = out.join(format!("{}_torch_ref.py", self.stem));
        write_atomic(&file, &adapter)?;
        let stand_in = run_stand_in(&self.python, out, &self.problem_copy, sizes, false);
        Ok(PreparedReference {
            kind: ReferenceKind::Torch,
            file,
            stand_in,
            parameter_inits: Vec::new(),
        })
    }

    /// The NumPy reference: the user's own (beside the problem, or written into the folder
    /// before), else one that runs the problem on the NumPy stand-in for torch. When the
    /// stand-in cannot run the problem either, a template to complete is written and the
    /// import fails saying so.
    fn numpy_reference(
        &self,
        analysis: &HelperAnswer,
        sizes: &IndexMap<String, i64>,
    ) -> Result<PreparedReference, KernelBenchError> {
        let (out, python) = (&self.options.out_dir, &self.python);
        let name = format!("{}_ref.py", self.stem);
        let beside = self.options.problem.with_file_name(&name);
        let file = out.join(&name);
        let generated_before =
            fs::read_to_string(&file).is_ok_and(|t| t.contains(NUMPY_TORCH_FILE));
        let mut parameter_inits = Vec::new();
        let stand_in = if beside.is_file() || (file.is_file() && !generated_before) {
            // The user's own reference: the stand-in only writes the naive kernel.
            if beside.is_file() {
                copy_unless_same(&beside, &file)?;
            }
            run_stand_in(python, out, &self.problem_copy, sizes, false)
        } else {
            // No reference of the user's: the problem runs on the NumPy stand-in for torch,
            // which also writes the naive kernel from forward()'s operations.
            match run_stand_in(python, out, &self.problem_copy, sizes, true) {
                Ok(generated) => {
                    write_numpy_reference(&self.stem, out, analysis)?;
                    parameter_inits = generated.parameter_inits.clone();
                    Ok(generated)
                }
                Err(e) => {
                    let why = stand_in_failure(&e);
                    write_atomic(&file, &numpy_template(&self.stem, analysis))?;
                    return Err(KernelBenchError::ReferenceTemplateWritten {
                        // Asked only here: importing torch takes seconds where it is installed.
                        torch: if torch_available(python) {
                            "the NumPy reference was asked for (PyTorch is installed)".to_owned()
                        } else {
                            format!("PyTorch is not installed in {}", python.display())
                        },
                        why,
                        template: file,
                    });
                }
            }
        };
        Ok(PreparedReference {
            kind: ReferenceKind::Numpy,
            file,
            stand_in,
            parameter_inits,
        })
    }

    /// Writes the task file of `spec` with a header saying where it came from, once it is
    /// known to load (a task file that does not load is never left behind); returns its path.
    fn write_task_file(
        &self,
        spec: &TaskSpec,
        kind: ReferenceKind,
        reference_file: &Path,
        varying: &[String],
    ) -> Result<PathBuf, KernelBenchError> {
        let out = &self.options.out_dir;
        let task_file = out.join(TASK_FILE_NAME);
        TaskFile::from_spec(
            spec.clone(),
            task_file.display().to_string(),
            TaskBase::Dir(out.clone()),
        )?;
        let text = spec.to_toml()?;
        let header = format!(
            "# Imported by `kf task import-kernelbench` from the KernelBench problem {}.\n\
             # Reference: {}\n#   ({}).\n\
             # Kernel arguments: the inputs (get_inputs() order, then the model's parameters),\n\
             # the outputs, then the sizes (int) and scalars.\n\
             # Output shapes were fitted from probe runs; sizes varied while probing: {}.\n\n",
            self.problem_in_out.display(),
            reference_file
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or_default(),
            match kind {
                ReferenceKind::Torch => "the unchanged problem file run with PyTorch on the CPU",
                ReferenceKind::Numpy => "a NumPy script, PyTorch not being installed",
            },
            if varying.is_empty() {
                "none".to_owned()
            } else {
                varying.join(", ")
            }
        );
        write_atomic(&task_file, &format!("{header}{text}"))?;
        Ok(task_file)
    }
}

/// Writes the stand-in's naive kernel as the folder's baseline; without one, the note that
/// says why (none when the folder has a baseline of its own).
fn baseline_note(
    out: &Path,
    stand_in: &Result<StandIn, KernelBenchError>,
    output: &str,
) -> Result<Option<String>, KernelBenchError> {
    Ok(match stand_in {
        Ok(generated) => {
            write_naive_kernel(out, generated, output)?;
            write_generated_seeds(out, generated, output)?;
            None
        }
        Err(_) if out.join(BASELINE_FILE_NAME).is_file() => None,
        Err(e) => Some(format!(
            "no naive kernel was generated: the NumPy stand-in for torch could not run \
             forward() ({})",
            stand_in_failure(e)
        )),
    })
}

/// The task's spec from the helper's answer (with the reference): the sizes (`overrides`
/// over the problem's), buffers, scalars, the reference, tolerance, work and baseline.
fn build_spec(
    stem: &str,
    reference_file: &Path,
    out: &Path,
    answer: &HelperAnswer,
    overrides: &IndexMap<String, i64>,
    tolerance: ImportTolerance,
    trace: TraceFacts,
) -> Result<TaskSpec, KernelBenchError> {
    let mut sizes = answer.sizes.clone();
    for (k, v) in overrides {
        sizes.insert(k.clone(), *v);
    }
    let buffers = task_buffers(answer, &trace.parameter_inits);
    let scalars: Vec<ScalarDecl> = answer
        .scalars
        .iter()
        .map(|(name, value)| ScalarDecl {
            name: name.clone(),
            dtype: Dtype::F32,
            value: ScalarValue::Float(*value),
        })
        .collect();
    let mut args: Vec<String> = buffers.iter().map(|b| b.name.clone()).collect();
    args.extend(sizes.keys().cloned());
    args.extend(scalars.iter().map(|s| s.name.clone()));
    let baseline = out
        .join(BASELINE_FILE_NAME)
        .is_file()
        .then(|| BaselineSpec {
            kernel: OneOrMany::One(BASELINE_FILE_NAME.into()),
        });
    let alternative_sizes = trace.constraints.alternatives(&sizes);
    let reference_name = reference_file
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or_default()
        .to_owned();
    Ok(with_family(
        TaskSpec {
            name: format!("kb_{stem}"),
            description: task_description(stem, answer),
            args,
            sizes,
            buffers,
            scalars,
            reference: ReferenceSpec {
                python: Some(reference_name),
                kernel: None,
                rust: None,
                timeout_s: None,
            },
            tolerance: Some(ToleranceSpec {
                atol: Some(tolerance.atol),
                rtol: Some(tolerance.rtol),
                ..ToleranceSpec::default()
            }),
            work: trace.flops.map(|flops| WorkSpec {
                flops: Some(ExprText::Text(flops)),
                bytes: None,
            }),
            baseline,
            alternative_sizes,
            family: None,
            seeds: trace.seeds,
        },
        answer.family.as_ref().or(trace.family.as_ref()),
        answer,
    ))
}

/// The task's buffers in argument order: the inputs (with distributions to vary over), the
/// model's parameters (initialised as the model does, else as weights), then the outputs.
fn task_buffers(answer: &HelperAnswer, parameter_inits: &[ParameterInit]) -> Vec<BufferDecl> {
    let weight_inits = || {
        Some(OneOrMany::Many(vec![
            "normal(0, 0.5)".into(),
            "uniform(-1, 1)".into(),
        ]))
    };
    answer
        .inputs
        .iter()
        .map(|input| {
            let b = &input.buffer;
            b.decl(
                BufferRole::Input,
                input_inits(b.init.as_deref(), b.dtype, &answer.unstable_inits),
            )
        })
        .chain(answer.parameters.iter().map(|p| {
            let own = parameter_inits.iter().find(|i| i.name == p.name);
            p.decl(
                BufferRole::Input,
                own.map(ParameterInit::inits).or_else(weight_inits),
            )
        }))
        .chain(answer.outputs.iter().map(|o| {
            BufferDecl {
                accumulates: answer
                    .accumulates
                    .as_ref()
                    .filter(|_| o.dtype != Dtype::I32)
                    .map(|a| ExprText::Text(a.clone())),
                ..o.decl(BufferRole::Output, None)
            }
        }))
        .collect()
}

/// The task's description: the problem's docstring and the kernel arguments' order.
fn task_description(stem: &str, answer: &HelperAnswer) -> String {
    format!(
        "KernelBench problem {stem}: {} Kernel arguments: inputs (the model's parameters after \
         get_inputs()' tensors), then outputs, then sizes as int, then scalars as float.",
        if answer.description.is_empty() {
            "(no docstring).".to_owned()
        } else {
            answer.description.clone()
        }
    )
}

/// `spec` with the family the helper recognised, its output placeholder replaced by the task's
/// single output; a family the task's buffers do not support is left out (the search then
/// keeps the parameter moves).
fn with_family(
    mut spec: TaskSpec,
    family: Option<&serde_json::Value>,
    answer: &HelperAnswer,
) -> TaskSpec {
    let (Some(family), [output]) = (family, &answer.outputs[..]) else {
        return spec;
    };
    let text = family
        .to_string()
        .replace("\"$out\"", &format!("{:?}", output.name));
    let Ok(family) = serde_json::from_str::<FamilySpec>(&text) else {
        return spec;
    };
    if family.validate(&spec, &spec.name).is_ok() {
        spec.family = Some(family);
    }
    spec
}

/// The size rule ([`SizeBudget`]) applied to the problem at `problem_copy` by the import
/// helper, on the NumPy stand-in for torch (written into `out` and removed again).
fn fit_sizes(
    python: &Path,
    out: &Path,
    problem_copy: &Path,
    given: &IndexMap<String, i64>,
    budget: SizeBudget,
) -> Result<Fitted, KernelBenchError> {
    let what = serde_json::json!({"max_bytes": budget.max_bytes, "max_flops": budget.max_flops});
    let answer = ask_with_stand_in(python, out, problem_copy, given, ("fit", what), false)?;
    answer.fitted.ok_or_else(|| KernelBenchError::Python {
        python: python.display().to_string(),
        message: "the import helper answered no sizes for the size rule".into(),
    })
}

/// Asks the import helper for `kind` (`generate`, `fit`: the request's object, to which the
/// stand-in's path is added as `shim`) at `sizes`, with the NumPy stand-in for torch written
/// into `out` as [`NUMPY_TORCH_FILE`]; removed after unless `keep_shim` and the answer is good.
fn ask_with_stand_in(
    python: &Path,
    out: &Path,
    problem_copy: &Path,
    sizes: &IndexMap<String, i64>,
    (kind, mut what): (&str, serde_json::Value),
    keep_shim: bool,
) -> Result<HelperAnswer, KernelBenchError> {
    let shim = out.join(NUMPY_TORCH_FILE);
    write_atomic(&shim, NUMPY_TORCH)?;
    what["shim"] = serde_json::json!(shim);
    let mut request = serde_json::json!({"problem": problem_copy, "sizes": sizes});
    request[kind] = what;
    let answer = helper_request(python, problem_copy, Some(&shim), &request);
    if answer.is_err() || !keep_shim {
        let _ = fs::remove_file(&shim);
    }
    answer
}

/// What the NumPy stand-in for torch made of a problem's forward() at the task's sizes.
struct StandIn {
    /// The naive OpenCL source (one work-item per output element) and how its kernels launch.
    kernel: String,
    plan: NaivePlan,
    /// Each parameter's initial distribution, as the model initialises it.
    parameter_inits: Vec<ParameterInit>,
    /// The operator family the trace shows (a matrix product with its element-wise
    /// epilogue), output named `$out`, where the problem's source did not name one.
    family: Option<serde_json::Value>,
    /// The matrix products' and convolutions' floating-point operations (a lower bound of
    /// the work: element-wise steps are not counted), an expression over the sizes.
    flops: Option<String>,
    /// Kernels generated from the trace beside the naive one.
    seeds: Vec<GeneratedSeed>,
    /// The sizes forward() needs divisible or equal.
    constraints: SizeConstraints,
    /// The output's shape as expressions over the sizes.
    output_shape: Option<Vec<String>>,
}

/// What the task file takes from the stand-in's run of forward(): the parameters' initial
/// distributions (when the stand-in is the reference), the family its trace shows and the
/// products' floating-point operations.
struct TraceFacts {
    parameter_inits: Vec<ParameterInit>,
    family: Option<serde_json::Value>,
    flops: Option<String>,
    /// The generated seeds' manifests, relative to the task file (`seeds = [...]`).
    seeds: Vec<String>,
    /// The sizes forward() needs divisible or equal (the task's other input sets keep them).
    constraints: SizeConstraints,
}

/// Runs forward() on the NumPy stand-in for torch (written into `out` as
/// [`NUMPY_TORCH_FILE`]; kept when `keep_shim`, for the NumPy reference that imports it).
/// `Err` says why the stand-in cannot run the problem (an operation it lacks, say; see
/// [`stand_in_failure`]).
fn run_stand_in(
    python: &Path,
    out: &Path,
    problem_copy: &Path,
    sizes: &IndexMap<String, i64>,
    keep_shim: bool,
) -> Result<StandIn, KernelBenchError> {
    let what = serde_json::json!({});
    let answer = ask_with_stand_in(
        python,
        out,
        problem_copy,
        sizes,
        ("generate", what),
        keep_shim,
    )?;
    let (Some(kernel), Some(plan)) = (answer.kernel, answer.plan) else {
        return Err(KernelBenchError::Python {
            python: python.display().to_string(),
            message: "the import helper wrote no kernel".into(),
        });
    };
    Ok(StandIn {
        kernel,
        plan,
        parameter_inits: answer.parameter_inits,
        family: answer.trace_family,
        flops: answer.flops,
        seeds: answer.seeds,
        constraints: answer.constraints,
        output_shape: answer.output_shape,
    })
}

/// Why the stand-in could not run a problem, in words: the helper's own message (it names the
/// construct the stand-in lacks), or the error.
fn stand_in_failure(e: &KernelBenchError) -> String {
    match e {
        KernelBenchError::Problem { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Writes the NumPy reference that runs the problem on the stand-in for torch.
fn write_numpy_reference(
    stem: &str,
    out: &Path,
    analysis: &HelperAnswer,
) -> Result<(), KernelBenchError> {
    let inputs = analysis.forward_inputs();
    let problem = problem_in_task(stem);
    let reference = NUMPY_REFERENCE
        .replace("@PROBLEM@", &py_repr(&problem.to_string_lossy()))
        .replace("@INPUTS@", &py_list(&inputs))
        .replace("@CONSTANTS@", &analysis.py_constants())
        .replace("@TUPLES@", &py_tuples(&analysis.tuples));
    write_atomic(&out.join(format!("{stem}_ref.py")), &reference)
}

/// Writes the stand-in's naive kernel as the folder's baseline unless the folder has one (the
/// user's, or an earlier import's).
fn write_naive_kernel(
    out: &Path,
    stand_in: &StandIn,
    output: &str,
) -> Result<(), KernelBenchError> {
    if out.join(BASELINE_FILE_NAME).is_file() {
        return Ok(());
    }
    write_atomic(&out.join(BASELINE_SOURCE_NAME), &stand_in.kernel)?;
    let head = format!(
        "# The naive kernel `kf task import-kernelbench` generated from the problem's \
         forward():\n# one work-item per output element.\nsource = \"{BASELINE_SOURCE_NAME}\"\n\
         entry = \"naive\"\nlanguage = \"opencl\"\n"
    );
    // One kernel, or a sequence where operations whose work every output element would repeat
    // run first, each into a scratch buffer of its own.
    let manifest = format!("{head}{}", stand_in.plan.toml(output));
    write_atomic(&out.join(BASELINE_FILE_NAME), &manifest)
}

/// Writes the kernels generated beside the naive one (`<name>.cl`, `<name>.toml`), each
/// manifest checked by kf-manifest before the task file names it.
fn write_generated_seeds(
    out: &Path,
    stand_in: &StandIn,
    output: &str,
) -> Result<(), KernelBenchError> {
    for seed in &stand_in.seeds {
        let name_ok = !seed.name.is_empty()
            && seed
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        let invalid = |message: String| KernelBenchError::Python {
            python: "the import helper".into(),
            message: format!("its generated kernel {} is not valid: {message}", seed.name),
        };
        if !name_ok {
            return Err(invalid("the name is not a file stem".into()));
        }
        let manifest_path = out.join(format!("{}.toml", seed.name));
        write_atomic(&out.join(format!("{}.cl", seed.name)), &seed.source)?;
        // `$out` stands for the task's output buffer (named by the reference).
        let manifest = seed.manifest.replace("\"$out\"", &format!("{output:?}"));
        write_atomic(&manifest_path, &manifest)?;
        kf_manifest::Manifest::load(&manifest_path).map_err(|e| invalid(e.to_string()))?;
    }
    Ok(())
}

/// The torch reference adapter for a problem file at `problem` (relative to the adapter's
/// folder, or absolute).
pub(crate) fn torch_adapter(analysis: &HelperAnswer, problem: &str) -> String {
    let inputs = analysis.forward_inputs();
    let bools: Vec<&str> = analysis
        .inputs
        .iter()
        .filter(|i| i.bool)
        .map(|i| i.buffer.name.as_str())
        .collect();
    TORCH_ADAPTER
        .replace("@PROBLEM@", &py_repr(problem))
        .replace("@INPUTS@", &py_list(&inputs))
        .replace("@TUPLES@", &py_tuples(&analysis.tuples))
        .replace("@BOOL_INPUTS@", &py_list(&bools))
        .replace("@CONSTANTS@", &analysis.py_constants())
}

fn py_repr(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

fn py_list(items: &[&str]) -> String {
    format!(
        "[{}]",
        items
            .iter()
            .map(|s| py_repr(s))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn py_tuples(tuples: &IndexMap<String, Vec<String>>) -> String {
    let entries: Vec<String> = tuples
        .iter()
        .map(|(k, v)| {
            let v: Vec<&str> = v.iter().map(String::as_str).collect();
            format!("{}: {}", py_repr(k), py_list(&v))
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}
