//! What a task is to the evaluator: its sizes, buffers and arguments, and the [`KernelTask`]
//! trait (re-exported by `tasks`).

use indexmap::IndexMap;
use kf_core::{KernelSource, Language, Task};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use super::host::HostBuffer;
use crate::element::{Dtype, Role};
use crate::error::EvalError;

/// Problem sizes by name.
pub type Sizes = IndexMap<String, i64>;

/// An output whose every element is a sum of many terms (a reduction, a scan, a dot product
/// of a matrix product or a convolution), for the accumulation rule of
/// [`crate::verify::accumulation_allowance`].
#[derive(Debug, Clone, PartialEq)]
pub struct Accumulation {
    /// The most terms one element sums (`n`): the reduced or scanned length, the inner
    /// dimension of a product.
    pub length: u64,
    /// Per element, `Σ|term_i|`: the reference evaluated on the inputs' absolute values, which
    /// is exactly that sum for any computation that adds products of inputs with non-negative
    /// coefficients (sums, means, scans, matrix products, convolutions).
    pub magnitude: Vec<f64>,
}

/// One buffer of a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferSpec {
    /// Name, for diagnostics (`A`, `B`, `C`).
    pub name: String,
    /// Number of elements.
    pub elements: usize,
    /// How the kernel uses it.
    pub role: Role,
    /// Element type.
    pub dtype: Dtype,
}

impl BufferSpec {
    /// An f32 buffer.
    pub fn f32(name: impl Into<String>, elements: usize, role: Role) -> Self {
        BufferSpec {
            name: name.into(),
            elements,
            role,
            dtype: Dtype::F32,
        }
    }

    /// Bytes of the buffer's data.
    pub fn bytes(&self) -> usize {
        self.elements * self.dtype.size()
    }
}

/// One kernel argument, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ArgSpec {
    /// A problem size passed as `int`.
    Size(String),
    /// The buffer with this index in [`KernelTask::buffers`].
    Buffer(usize),
    /// A constant `float` argument.
    F32(f32),
    /// A constant `int` argument.
    I32(i32),
}

/// A task as the evaluator sees it. Implement it to evaluate kernels for your own operator.
///
/// # Example
///
/// ```
/// use kf_eval::task::{Gemm, KernelTask, Role};
/// use rand::SeedableRng;
///
/// let gemm = Gemm::new(4, 3, 2).unwrap();
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
/// let data = gemm.generate(&mut rng, 0);
/// let reference = gemm.reference(&data).unwrap();
/// assert_eq!(gemm.buffers()[2].role, Role::Output);
/// assert_eq!(reference[2].len(), 4 * 3);
/// ```
pub trait KernelTask: Send + Sync {
    /// Task name (`gemm`).
    fn name(&self) -> &str;

    /// Problem sizes.
    fn sizes(&self) -> Sizes;

    /// The kf-core description: sizes, tolerance, work, and a paragraph for models.
    fn describe(&self) -> Task;

    /// The same task at other sizes.
    fn resized(&self, sizes: &Sizes) -> Result<Box<dyn KernelTask>, EvalError>;

    /// Other shapes worth checking correctness on (non-square where the task allows), best
    /// first; the evaluator uses the first one the kernel's manifest can launch.
    fn alternative_sizes(&self) -> Vec<Sizes>;

    /// The buffers.
    fn buffers(&self) -> Vec<BufferSpec>;

    /// Kernel arguments in order.
    fn args(&self) -> Vec<ArgSpec>;

    /// Fresh input data, one buffer per [`KernelTask::buffers`] entry, of its dtype (empty
    /// for pure outputs). `variant` selects a value distribution so that input sets differ in
    /// more than their seed.
    fn generate(&self, rng: &mut dyn RngCore, variant: u32) -> Vec<HostBuffer>;

    /// Expected contents of every buffer after a correct launch on `data` (pure inputs may be
    /// returned empty: they are checked against the data itself). `Err` is a fault of the
    /// task (a Python reference that raised), never of a kernel: the evaluation stops with it.
    /// Tasks with a [`KernelTask::reference_kernel`] return empty outputs here.
    fn reference(&self, data: &[HostBuffer]) -> Result<Vec<HostBuffer>, EvalError>;

    /// The outputs that accumulate many terms, for the verifier's accumulation rule
    /// ([`crate::verify::accumulation_allowance`]): one entry per buffer (`None` where the
    /// plain element-wise rule applies), or an empty vector when no output is declared so
    /// (the default). Called once per input set, after [`KernelTask::reference`].
    fn accumulations(&self, _data: &[HostBuffer]) -> Result<Vec<Option<Accumulation>>, EvalError> {
        Ok(Vec::new())
    }

    /// The baseline kernel (with its manifest) in `language`, if the task has one.
    fn baseline(&self, language: Language) -> Option<KernelSource>;

    /// Further kernels in `language` a search starts from besides the
    /// [`baseline`](KernelTask::baseline) (a task file's `seeds`: the KernelBench importer
    /// writes there the kernels it generates from the operator's graph), in the task's order.
    /// Never the reference and never the baseline speedups are measured against; empty (the
    /// default) for a task that names none.
    fn seed_kernels(&self, _language: Language) -> Vec<KernelSource> {
        Vec::new()
    }

    /// A trusted kernel that computes the reference on the evaluator's backend, in
    /// `language`; when given, the evaluator runs it on each input set instead of using
    /// [`KernelTask::reference`]'s outputs.
    fn reference_kernel(&self, _language: Language) -> Option<KernelSource> {
        None
    }

    /// The operator family the task declares (a task file's `[family]`), for searches that
    /// seed a family's fast structures; `None` (the default) for a task that declares none.
    fn family(&self) -> Option<crate::task::file::schema::FamilySpec> {
        None
    }
}

/// Parses `M=256,N=192,K=128`.
pub fn parse_sizes(text: &str) -> Result<Sizes, EvalError> {
    let mut out = Sizes::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = part.split_once('=') else {
            return Err(EvalError::BadSize(format!("`{part}` is not NAME=value")));
        };
        let v: i64 = v
            .trim()
            .parse()
            .map_err(|_| EvalError::BadSize(format!("`{part}`: `{v}` is not an integer")))?;
        out.insert(k.trim().to_owned(), v);
    }
    Ok(out)
}

/// Parses a `--size` argument that is either `NAME=value,…` ([`parse_sizes`]) or one number,
/// which `from_number` spells out as the sizes it stands for (for gemm, `n` is `M=n,N=n,K=n`).
pub fn parse_sizes_or_number(
    text: &str,
    from_number: impl FnOnce(i64) -> String,
) -> Result<Sizes, EvalError> {
    if text.contains('=') {
        return parse_sizes(text);
    }
    let n: i64 = text.parse().map_err(|_| {
        EvalError::BadSize(format!("`{text}` is neither NAME=value,… nor a number"))
    })?;
    parse_sizes(&from_number(n))
}

/// Renders sizes as `M=256,N=192,K=128` (the inverse of [`parse_sizes`]).
pub fn sizes_text(sizes: &Sizes) -> String {
    sizes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_argument_is_named_sizes_or_one_number() {
        let square = |n: i64| format!("M={n},N={n},K={n}");
        let named = parse_sizes_or_number("M=2,N=3,K=4", square).unwrap();
        assert_eq!(sizes_text(&named), "M=2,N=3,K=4");
        let number = parse_sizes_or_number("8", square).unwrap();
        assert_eq!(sizes_text(&number), "M=8,N=8,K=8");
        let err = parse_sizes_or_number("big", square)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`big` is neither"), "{err}");
    }
}
