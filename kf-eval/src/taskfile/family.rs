//! Operator families: what a task file's `[family]` table says its operator is (a matrix
//! product, a row reduction, …), so that a search can seed it with the family's fast
//! structures instantiated for the task's buffers and sizes.
//!
//! ```toml
//! [family]
//! kind = "matmul"      # out[M][N] = A[M][K] · B[K][N]
//! a = "A"
//! b = "B"
//! c = "out"
//! m = "N"              # integer expressions over the sizes
//! n = "N"
//! k = "N"
//! transpose_a = false  # A stored K × M
//! transpose_b = false  # B stored N × K
//! ```
//!
//! Row families (`row_reduce`, `row_norm`, `scan`) name their `input`, `output`, the number
//! of `rows` and the row `length` (and, optionally, the `op`: `softmax`, `layer_norm`, `sum`…);
//! `map` names its `input` and `output`.

use serde::{Deserialize, Serialize};

use super::error::TaskFileError;
use super::schema::{BufferRole, Dtype, ExprText, TaskSpec};

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
    /// `layer_norm`, `rms_norm`, `l1_norm`, `sum`, `mean`, `max`, `argmax`, `cumsum`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
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
        }
    }

    /// The buffers the family names, with their field and whether the kernel writes them.
    fn buffers(&self) -> Vec<(&'static str, &str, bool)> {
        match self {
            FamilySpec::Matmul(m) => {
                vec![("a", &m.a, false), ("b", &m.b, false), ("c", &m.c, true)]
            }
            FamilySpec::RowReduce(r) | FamilySpec::RowNorm(r) | FamilySpec::Scan(r) => {
                vec![("input", &r.input, false), ("output", &r.output, true)]
            }
            FamilySpec::Map(m) => vec![("input", &m.input, false), ("output", &m.output, true)],
        }
    }

    /// The size expressions the family names, with their field.
    fn sizes(&self) -> Vec<(&'static str, &ExprText)> {
        match self {
            FamilySpec::Matmul(m) => vec![("m", &m.m), ("n", &m.n), ("k", &m.k)],
            FamilySpec::RowReduce(r) | FamilySpec::RowNorm(r) | FamilySpec::Scan(r) => {
                vec![("rows", &r.rows), ("length", &r.length)]
            }
            FamilySpec::Map(_) => Vec::new(),
        }
    }

    /// Checks the family against the task: every named buffer is an f32 buffer of the task
    /// (read buffers inputs, written ones outputs), every size expression is an integer
    /// expression over the task's sizes.
    pub fn validate(&self, spec: &TaskSpec, file: &str) -> Result<(), TaskFileError> {
        for (field, name, written) in self.buffers() {
            let declared = || {
                spec.buffers
                    .iter()
                    .map(|b| format!("`{}`", b.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let Some(buffer) = spec.buffers.iter().find(|b| b.name == name) else {
                return Err(TaskFileError::FamilyBuffer {
                    file: file.to_owned(),
                    field: format!("family.{field}"),
                    buffer: name.to_owned(),
                    problem: format!("is not a buffer of the task (buffers: {})", declared()),
                });
            };
            let role_ok = match buffer.role {
                BufferRole::Input => !written,
                BufferRole::Output => written,
                BufferRole::Inout => true,
            };
            let problem = if buffer.dtype != Dtype::F32 {
                Some(format!(
                    "is {}; the family's templates compute in f32",
                    buffer.dtype
                ))
            } else if !role_ok {
                Some(format!(
                    "has role {:?}, but the family {} it",
                    buffer.role,
                    if written { "writes" } else { "only reads" }
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(TaskFileError::FamilyBuffer {
                    file: file.to_owned(),
                    field: format!("family.{field}"),
                    buffer: name.to_owned(),
                    problem,
                });
            }
        }
        for (field, expr) in self.sizes() {
            let site = kf_manifest::ExprSite {
                file: file.to_owned(),
                field: format!("family.{field}"),
            };
            let parsed = kf_manifest::Expr::parse(&expr.text(), &site)?;
            let unknown = parsed
                .variables()
                .find(|v| !spec.sizes.contains_key(*v))
                .map(str::to_owned);
            if let Some(v) = unknown {
                return Err(TaskFileError::invalid(
                    file,
                    format!("family.{field}"),
                    format!("`{}` uses `{v}`, which is not a size", parsed.text()),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::taskfile::{TaskBase, TaskFile};

    const MATMUL: &str = r#"
name = "mm"
args = ["A", "B", "out", "N"]
[sizes]
N = 64
[[buffer]]
name = "A"
dtype = "f32"
shape = ["N", "N"]
role = "input"
[[buffer]]
name = "B"
dtype = "f32"
shape = ["N", "N"]
role = "input"
[[buffer]]
name = "out"
dtype = "f32"
shape = ["N", "N"]
role = "output"
[reference]
rust = "mm"
[family]
kind = "matmul"
a = "A"
b = "B"
c = "out"
m = "N"
n = "N"
k = "N"
"#;

    fn parse(text: &str) -> Result<TaskFile, TaskFileError> {
        TaskFile::parse(text, "mm.toml", TaskBase::Dir(".".into()))
    }

    /// The `[family]` table parses into its kind with its buffers and sizes; transposes
    /// default to false.
    #[test]
    fn a_matmul_family_parses() {
        let task = parse(MATMUL).unwrap();
        let Some(FamilySpec::Matmul(m)) = &task.spec.family else {
            panic!("{:?}", task.spec.family);
        };
        assert_eq!(
            (m.a.as_str(), m.b.as_str(), m.c.as_str()),
            ("A", "B", "out")
        );
        assert_eq!(m.k, ExprText::Text("N".into()));
        assert!(!m.transpose_a && !m.transpose_b);
        assert_eq!(
            task.spec.family.as_ref().map(FamilySpec::kind),
            Some("matmul")
        );
        // Round trip through the schema's TOML.
        let again = TaskSpec::from_toml(&task.spec.to_toml().unwrap()).unwrap();
        assert_eq!(again.family, task.spec.family);
    }

    /// A family naming a buffer the task does not declare, or reading its output, or a size
    /// that does not exist, is a typed error naming the field.
    #[test]
    fn a_family_with_unknown_buffers_or_sizes_is_rejected() {
        let err = parse(&MATMUL.replace("c = \"out\"", "c = \"C\"")).unwrap_err();
        match &err {
            TaskFileError::FamilyBuffer { field, buffer, .. } => {
                assert_eq!((field.as_str(), buffer.as_str()), ("family.c", "C"));
            }
            other => panic!("{other}"),
        }
        assert!(err.to_string().contains("`out`"), "{err}");
        let err = parse(&MATMUL.replace("a = \"A\"", "a = \"out\"")).unwrap_err();
        assert!(
            matches!(&err, TaskFileError::FamilyBuffer { field, .. } if field == "family.a"),
            "{err}"
        );
        let err = parse(&MATMUL.replace("k = \"N\"", "k = \"K\"")).unwrap_err();
        assert!(err.to_string().contains("family.k"), "{err}");
        let err = parse(&MATMUL.replace("kind = \"matmul\"", "kind = \"fft\"")).unwrap_err();
        assert!(matches!(err, TaskFileError::Toml { .. }), "{err}");
    }

    /// A row family names its input, output, rows and row length.
    #[test]
    fn a_row_family_parses() {
        let text = MATMUL.replace(
            "[family]\nkind = \"matmul\"\na = \"A\"\nb = \"B\"\nc = \"out\"\nm = \"N\"\nn = \"N\"\nk = \"N\"\n",
            "[family]\nkind = \"row_norm\"\ninput = \"A\"\noutput = \"out\"\nrows = \"N\"\nlength = \"N\"\nop = \"softmax\"\n",
        );
        let task = parse(&text).unwrap();
        let Some(FamilySpec::RowNorm(r)) = &task.spec.family else {
            panic!("{:?}", task.spec.family);
        };
        assert_eq!(r.op.as_deref(), Some("softmax"));
        assert_eq!(r.rows, ExprText::Text("N".into()));
    }
}
