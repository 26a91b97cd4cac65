//! What a graph is, in the terms of the kernel families a search generates kernels for.

/// The kernel family a graph belongs to, with its buffers and sizes (see [`crate::recognise`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Pattern {
    /// One input mapped element by element to the output.
    Map(MapPattern),
    /// A computation along each row of the input's last dimension: a normalisation, a
    /// reduction to one value per row, or a prefix scan.
    Rows(RowPattern),
    /// A matrix product followed by element-wise steps (its epilogue).
    Matmul(MatmulPattern),
}

/// `c[m][n] = epilogue(Σ_k a[m][k] · b[k][n])`, either factor possibly stored transposed.
#[derive(Debug, Clone, PartialEq)]
pub struct MatmulPattern {
    /// The left factor's buffer (`M × K`, or `K × M` with `transpose_a`).
    pub a: String,
    /// The right factor's buffer (`K × N`, or `N × K` with `transpose_b`).
    pub b: String,
    /// The output buffer (`M × N`).
    pub c: String,
    /// Rows of the product: a size expression.
    pub m: String,
    /// Columns of the product.
    pub n: String,
    /// The inner dimension.
    pub k: String,
    /// A is stored `K × M`.
    pub transpose_a: bool,
    /// B is stored `N × K`.
    pub transpose_b: bool,
    /// What each element becomes: an OpenCL C expression of `acc` and the other inputs through
    /// `col_of(b)`, `row_of(b)`, `at(b)` (a task file's `[family] epilogue`); `None` for the
    /// bare product.
    pub epilogue: Option<String>,
}

/// An element-wise map: `output[i] = expr(input[i])`.
#[derive(Debug, Clone, PartialEq)]
pub struct MapPattern {
    /// The input buffer.
    pub input: String,
    /// The output buffer.
    pub output: String,
    /// One OpenCL C expression of an element, in which the input's name stands for the element
    /// and the task's scalars appear by name.
    pub expr: String,
}

/// A computation along rows: `rows` rows of `length` contiguous elements of `input`.
#[derive(Debug, Clone, PartialEq)]
pub struct RowPattern {
    /// What each row becomes.
    pub op: RowOp,
    /// The input buffer.
    pub input: String,
    /// The output buffer.
    pub output: String,
    /// How many rows: a size expression (the product of the leading dimensions).
    pub rows: String,
    /// Elements per row: the last dimension's size expression.
    pub length: String,
    /// A normalisation's element-wise weight (an input of `length` elements).
    pub weight: Option<String>,
    /// A normalisation's element-wise bias (an input of `length` elements).
    pub bias: Option<String>,
    /// A layer or RMS norm's epsilon.
    pub eps: Option<f64>,
}

/// The row computations the recogniser tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RowOp {
    /// `exp(x - max) / Σ exp(x - max)`.
    Softmax,
    /// `x - max - log Σ exp(x - max)`.
    LogSoftmax,
    /// `(x - mean) / sqrt(var + eps)` (population variance), then weight and bias.
    LayerNorm,
    /// `x / sqrt(mean(x²) + eps)`, then weight and bias.
    RmsNorm,
    /// `x / Σ|x|`.
    L1Norm,
    /// `x / sqrt(Σ x²)`.
    L2Norm,
    /// `Σ x` (one value per row).
    Sum,
    /// `Σ x / length` (one value per row).
    Mean,
    /// The row's maximum.
    Max,
    /// The row's minimum.
    Min,
    /// The prefix sums of the row.
    Cumsum,
}

impl RowOp {
    /// The operation's name in a task file's `[family] op` (`rms_norm`, `softmax`, `sum`…).
    pub fn name(self) -> &'static str {
        match self {
            RowOp::Softmax => "softmax",
            RowOp::LogSoftmax => "log_softmax",
            RowOp::LayerNorm => "layer_norm",
            RowOp::RmsNorm => "rms_norm",
            RowOp::L1Norm => "l1_norm",
            RowOp::L2Norm => "l2_norm",
            RowOp::Sum => "sum",
            RowOp::Mean => "mean",
            RowOp::Max => "max",
            RowOp::Min => "min",
            RowOp::Cumsum => "cumsum",
        }
    }

    /// Whether a row becomes one value (a reduction), not a row.
    pub fn reduces(self) -> bool {
        matches!(self, RowOp::Sum | RowOp::Mean | RowOp::Max | RowOp::Min)
    }

    /// Whether the operation is a prefix scan.
    pub fn scans(self) -> bool {
        self == RowOp::Cumsum
    }
}
