//! The task-file schema: public serde types, so that a Rust embedder can build in code exactly
//! what a TOML task file says. Field names are a contract; fields may be added.
//!
//! ```toml
//! name = "scaled_swish"
//! description = "y[r][c] = x[r][c] * sigmoid(alpha * x[r][c]) + bias[c]"
//! args = ["ROWS", "COLS", "alpha", "x", "bias", "y"]
//! [sizes]
//! ROWS = 512
//! COLS = 384
//! [[buffer]]
//! name = "x"
//! dtype = "f32"
//! shape = ["ROWS", "COLS"]
//! role = "input"
//! init = "normal"
//! [[scalar]]
//! name = "alpha"
//! dtype = "f32"
//! value = 1.5
//! [reference]
//! python = "scaled_swish_ref.py"
//! ```

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::element::Role;

pub use crate::element::Dtype;

/// How a buffer is used, as written in task files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferRole {
    /// Read only; must be unchanged after the launch.
    Input,
    /// Written only; poisoned before every launch.
    Output,
    /// Read and written in place; refilled before every launch.
    Inout,
}

impl From<BufferRole> for Role {
    fn from(r: BufferRole) -> Role {
        match r {
            BufferRole::Input => Role::Input,
            BufferRole::Output => Role::Output,
            BufferRole::Inout => Role::InOut,
        }
    }
}

/// One value or several (`init = "normal"` or `init = ["normal", "uniform(-4, 4)"]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// A list.
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    /// The values as a list.
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// An integer expression over sizes, written as text (`"4 * ROWS * COLS"`) or as a number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExprText {
    /// A literal integer.
    Int(i64),
    /// A literal float (work figures may be fractional).
    Float(f64),
    /// An expression over the task's sizes.
    Text(String),
}

impl ExprText {
    /// The expression as text, for the expression engine.
    pub fn text(&self) -> String {
        match self {
            ExprText::Int(i) => i.to_string(),
            ExprText::Float(f) => format!("{f:?}"),
            ExprText::Text(t) => t.clone(),
        }
    }
}

/// A `[[buffer]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferDecl {
    /// Name, used in `args` and as the key of reference inputs and outputs.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions, each an integer expression over the sizes (row-major).
    pub shape: Vec<ExprText>,
    /// How the kernel uses it.
    pub role: BufferRole,
    /// Input distributions (ignored for pure outputs): `normal`, `normal(mean, std)`,
    /// `uniform(lo, hi)`, `int(lo, hi)`, `zeros`, `ones`, `arange`. Several give one
    /// distribution per input set, in turn. Default: `normal` for floats, `int(-100, 100)`
    /// for i32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<OneOrMany<String>>,
    /// The structure of the drawn values (input and inout buffers), given after the `init`
    /// draw: `symmetric` (`(A + Aᵀ) / 2`), `lower` (zero above the diagonal, `torch.tril`) or
    /// `upper` (zero below it, `torch.triu`) to each trailing square matrix (at least two
    /// dimensions, the last two equal at every size used; leading dimensions are a batch;
    /// alternative sizes under which they differ are not used), or `softmax` to each row
    /// along the last dimension (probabilities, as `torch.randn(...).softmax(dim=-1)` draws).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structure: Option<String>,
    /// For an output whose every element sums many terms (a reduction, a scan, a matrix or
    /// convolution product): the most terms one element sums, an expression over the sizes
    /// (`accumulates = "n"`). The element-wise rule then also allows `γ_n · Σ|term|` per
    /// element (the accumulation rule, `kf_eval::verify::accumulation_allowance`), `Σ|term|`
    /// being the reference run on the inputs' absolute values. Outputs only; needs a Python
    /// or Rust reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accumulates: Option<ExprText>,
}

/// A scalar's value in a task file.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ScalarValue {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
}

impl ScalarValue {
    /// The value as f64.
    pub fn as_f64(self) -> f64 {
        match self {
            ScalarValue::Int(i) => i as f64,
            ScalarValue::Float(f) => f,
        }
    }
}

/// A `[[scalar]]` entry: a constant kernel argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalarDecl {
    /// Name, used in `args` and passed to references.
    pub name: String,
    /// `f32` or `i32`.
    pub dtype: Dtype,
    /// The value.
    pub value: ScalarValue,
}

/// The `[reference]` table: exactly one of `python`, `kernel` or `rust`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceSpec {
    /// A Python script (relative to the task file) defining
    /// `reference(inputs, sizes, scalars) -> dict[str, numpy.ndarray]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// A trusted kernel manifest (relative to the task file), run through the same backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// The name of a reference closure registered in Rust
    /// (a `ReferenceRegistry`); the built-in tasks use this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rust: Option<String>,
    /// Seconds a Python reference may run per input set (default 120).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
}

/// The `[tolerance]` table. Missing fields take the defaults of the buffers' dtypes
/// (f32: `kf_core::Tolerance::fp32()`; f16: the f16 rule in the README).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToleranceSpec {
    /// Absolute tolerance of the element-wise rule `|o - r| <= atol + rtol * |r|`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    /// Relative tolerance of the element-wise rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// Relative threshold of the aggregate rule (fraction of elements within it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_threshold: Option<f64>,
    /// Fraction of elements that must be within `relative_threshold`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_fraction_within: Option<f64>,
    /// Minimum cosine similarity with the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cosine: Option<f64>,
}

/// The `[work]` table: expressions over sizes for GFLOP/s, GB/s and the roofline check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkSpec {
    /// Floating-point operations of one launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<ExprText>,
    /// Minimum bytes moved by one launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<ExprText>,
}

/// The `[baseline]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineSpec {
    /// Kernel manifest(s), relative to the task file: one per language at most (the
    /// evaluator uses the first whose language its backend compiles).
    pub kernel: OneOrMany<String>,
}

/// A whole task file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Task name.
    pub name: String,
    /// What the kernel computes; goes into LLM prompts with the signature and buffers.
    #[serde(default)]
    pub description: String,
    /// Kernel argument order: size names (passed as `int`), scalar names, buffer names.
    pub args: Vec<String>,
    /// Further kernel manifests (relative to the task file) a search starts from besides the
    /// baseline: the KernelBench importer writes here the kernels it generates from the
    /// operator's graph (a two-stage parallel reduction to a scalar, its choices as `[params]`).
    /// A seed is never the reference and never the baseline speedups are measured against;
    /// each is loaded and checked like the baseline (`seeds[i]` names it in errors). A plain
    /// array, so it comes before the tables when the spec is written out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<String>,
    /// Default problem sizes (`--size` overrides).
    #[serde(default)]
    pub sizes: IndexMap<String, i64>,
    /// Buffers.
    #[serde(default, rename = "buffer")]
    pub buffers: Vec<BufferDecl>,
    /// Scalars.
    #[serde(default, rename = "scalar", skip_serializing_if = "Vec::is_empty")]
    pub scalars: Vec<ScalarDecl>,
    /// How the expected outputs are computed.
    pub reference: ReferenceSpec,
    /// Closeness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<ToleranceSpec>,
    /// Work figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<WorkSpec>,
    /// The kernel speedups are measured against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineSpec>,
    /// Other sizes to check correctness on, best first: partial tables whose values are
    /// integers or expressions over the current sizes (`ROWS = "ROWS / 2"`); missing sizes
    /// keep their current values. Without any, the evaluator halves each size in turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternative_sizes: Vec<IndexMap<String, ExprText>>,
    /// The operator family (`[family]`: a matrix product, a row reduction…), so that a
    /// search seeds the family's fast structures; see [`crate::task::file::FamilySpec`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<FamilySpec>,
}

impl TaskSpec {
    /// Parses TOML text (no validation beyond the schema; see
    /// [`crate::task::file::TaskFile`]).
    pub fn from_toml(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// Renders the spec as TOML.
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string_pretty(self)
    }
}

/// The operator family a task belongs to (the `[family]` table of a task file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FamilySpec {
    /// A matrix product `c[m][n] = Σ_k a[m][k] · b[k][n]` (transposes, matrix-vector with
    /// `n = 1`).
    Matmul(MatmulFamily),
    /// One value per row: a sum, a mean, a maximum, an argmax over the last dimension.
    RowReduce(RowFamily),
    /// A row normalisation: softmax, log-softmax, layer norm, RMS norm, L1/L2 norm.
    RowNorm(RowFamily),
    /// A prefix scan along each row.
    Scan(RowFamily),
    /// An element-wise map.
    Map(MapFamily),
    /// A direct 1-D convolution (PyTorch's `Conv1d` without groups).
    Conv1d(Conv1dFamily),
}

/// The buffers and sizes of a 1-D convolution:
/// `output[b][o][t] = bias[o] + Σ_{i,k} weight[o][i][k] · input[b][i][t·stride + k·dilation −
/// padding]` (zero outside the input), with `input` `batch × in_channels × length`, `weight`
/// `out_channels × in_channels × kernel_size` and `output` `batch × out_channels ×
/// ((length + 2·padding − dilation·(kernel_size − 1) − 1) / stride + 1)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conv1dFamily {
    /// The input signal.
    pub input: String,
    /// The weights.
    pub weight: String,
    /// The result.
    pub output: String,
    /// The per-output-channel bias, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<String>,
    /// The batch size: an integer expression over the sizes.
    pub batch: ExprText,
    /// Input channels.
    pub in_channels: ExprText,
    /// Output channels.
    pub out_channels: ExprText,
    /// The input's length.
    pub length: ExprText,
    /// The kernel's width.
    pub kernel_size: ExprText,
    /// The stride (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride: Option<ExprText>,
    /// The dilation (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dilation: Option<ExprText>,
    /// Zero padding on both ends (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<ExprText>,
}

/// The buffers and sizes of a matrix product.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatmulFamily {
    /// The left factor (`M × K`, or `K × M` with `transpose_a`).
    pub a: String,
    /// The right factor (`K × N`, or `N × K` with `transpose_b`).
    pub b: String,
    /// The product (`M × N`, row-major).
    pub c: String,
    /// Rows of the product: an integer expression over the sizes.
    pub m: ExprText,
    /// Columns of the product (`1` for a matrix-vector product).
    pub n: ExprText,
    /// The inner dimension.
    pub k: ExprText,
    /// A is stored transposed (`K × M`).
    #[serde(default)]
    pub transpose_a: bool,
    /// B is stored transposed (`N × K`).
    #[serde(default)]
    pub transpose_b: bool,
    /// What happens to each element of the product before it is stored: one OpenCL C
    /// expression of `acc` (the element of `A · B`) and the task's buffers, sizes and scalars
    /// by name, such as a bias, a scaling and an activation:
    /// `epilogue = "fmax(acc + col_of(bias), 0.0f)"`. Buffers are read through `col_of(b)`
    /// (`b[col]`), `row_of(b)` (`b[row]`) and `at(b)` (`b[row * n + col]`), which the
    /// templates turn into vector loads where they apply the epilogue to vectors; `row`, `col`
    /// and plain indexing work only where it runs element by element. The search then seeds the GEMM
    /// templates with the epilogue fused into their stores (the importer writes it from
    /// forward()'s trace). Without it, `c` is the product itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epilogue: Option<String>,
}

/// The buffers and sizes of a row family: `rows` rows of `length` contiguous elements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowFamily {
    /// The rows read.
    pub input: String,
    /// The result (one value per row for a reduction, a row per row otherwise).
    pub output: String,
    /// How many rows: an integer expression over the sizes.
    pub rows: ExprText,
    /// Elements per row.
    pub length: ExprText,
    /// The operation, for the templates that implement one (`softmax`, `log_softmax`,
    /// `layer_norm`, `rms_norm`, `l1_norm`, `l2_norm`, `sum`, `mean`, `max`, `argmax`,
    /// `cumsum`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// A normalisation's elementwise weight (one value per element of a row, `length`
    /// floats), multiplied after normalising.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<String>,
    /// A normalisation's elementwise bias (`length` floats), added last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bias: Option<String>,
    /// A normalisation's epsilon, added to the variance or mean square (`layer_norm`,
    /// `rms_norm`; default 1e-5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps: Option<f64>,
    /// Rows along a dimension that is not the last: the distance between consecutive elements
    /// of a row (the product of the dimensions after it, `dim1 * dim2` for the channels of an
    /// NCHW tensor). Element `f` of row `(o, p)`, `p < inner`, is then at
    /// `(o * length + f) * inner + p`. Default 1: contiguous rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner: Option<ExprText>,
}

/// The buffers of an element-wise map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapFamily {
    /// The buffer read.
    pub input: String,
    /// The buffer written, element for element.
    pub output: String,
    /// The operation (`relu`, `sigmoid`, `gelu`…), informative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// The map as one OpenCL C expression of an element, in which the input buffer's name
    /// stands for one element of it and the task's scalars and sizes may appear by name
    /// (`expr = "0.5f * x * (1.0f + erf(x * 0.70710678f))"` for the input `x`). With it the
    /// search seeds the element-wise map template for the task; it should also be valid for
    /// float vectors (OpenCL's built-ins are), or only the template's scalar variants compile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
}

impl FamilySpec {
    /// The family's name as written in `kind` (`matmul`, `row_reduce`, …); rule priors select
    /// by it.
    pub fn kind(&self) -> &'static str {
        match self {
            FamilySpec::Matmul(_) => "matmul",
            FamilySpec::RowReduce(_) => "row_reduce",
            FamilySpec::RowNorm(_) => "row_norm",
            FamilySpec::Scan(_) => "scan",
            FamilySpec::Map(_) => "map",
            FamilySpec::Conv1d(_) => "conv1d",
        }
    }

    /// The buffers the family names, with their field and whether the kernel writes them.
    pub(crate) fn buffers(&self) -> Vec<(&'static str, &str, bool)> {
        match self {
            FamilySpec::Matmul(m) => {
                vec![("a", &m.a, false), ("b", &m.b, false), ("c", &m.c, true)]
            }
            FamilySpec::RowReduce(r) | FamilySpec::RowNorm(r) | FamilySpec::Scan(r) => {
                let mut buffers = vec![
                    ("input", r.input.as_str(), false),
                    ("output", &r.output, true),
                ];
                if let Some(weight) = &r.weight {
                    buffers.push(("weight", weight, false));
                }
                if let Some(bias) = &r.bias {
                    buffers.push(("bias", bias, false));
                }
                buffers
            }
            FamilySpec::Map(m) => vec![("input", &m.input, false), ("output", &m.output, true)],
            FamilySpec::Conv1d(c) => {
                let mut buffers = vec![
                    ("input", c.input.as_str(), false),
                    ("weight", &c.weight, false),
                    ("output", &c.output, true),
                ];
                if let Some(bias) = &c.bias {
                    buffers.push(("bias", bias, false));
                }
                buffers
            }
        }
    }

    /// The size expressions the family names, with their field.
    pub(crate) fn sizes(&self) -> Vec<(&'static str, &ExprText)> {
        match self {
            FamilySpec::Matmul(m) => vec![("m", &m.m), ("n", &m.n), ("k", &m.k)],
            FamilySpec::RowReduce(r) | FamilySpec::RowNorm(r) | FamilySpec::Scan(r) => {
                let mut sizes = vec![("rows", &r.rows), ("length", &r.length)];
                if let Some(inner) = &r.inner {
                    sizes.push(("inner", inner));
                }
                sizes
            }
            FamilySpec::Map(_) => Vec::new(),
            FamilySpec::Conv1d(c) => {
                let mut sizes = vec![
                    ("batch", &c.batch),
                    ("in_channels", &c.in_channels),
                    ("out_channels", &c.out_channels),
                    ("length", &c.length),
                    ("kernel_size", &c.kernel_size),
                ];
                for (field, expr) in [
                    ("stride", &c.stride),
                    ("dilation", &c.dilation),
                    ("padding", &c.padding),
                ] {
                    if let Some(expr) = expr {
                        sizes.push((field, expr));
                    }
                }
                sizes
            }
        }
    }
}
