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
//! epilogue = "fmax(acc + col_of(bias), 0.0f)"  # optional: what each element becomes
//! ```
//!
//! A matrix product's `epilogue` is one OpenCL C expression of `acc` (the element of the
//! product) and the task's input buffers (read through `col_of(b)`, `row_of(b)`, `at(b)`),
//! sizes and scalars: the element-wise
//! steps after the product (a bias, a scaling, a residual term, an activation), which the
//! GEMM templates then apply at their stores. `kf task import-kernelbench` writes it from
//! forward()'s trace.
//!
//! Row families (`row_reduce`, `row_norm`, `scan`) name their `input`, `output`, the number
//! of `rows` and the row `length` (and, optionally, the `op`: `softmax`, `layer_norm`, `sum`…).
//! A row normalisation may name its elementwise `weight` and `bias` (inputs of `length`
//! floats), its `eps`, and `inner` for rows along a dimension that is not the last (the
//! distance between a row's consecutive elements). `map` names its `input` and `output` and, so that a search can seed
//! the element-wise map template, its `expr`: one OpenCL C expression of an element, in which
//! the input's name stands for the element (`expr = "fmax(x, 0.0f)"`). `conv1d` names its
//! `input`, `weight`, `output` (and optional `bias`) and the sizes `batch`, `in_channels`,
//! `out_channels`, `length`, `kernel_size` (and optional `stride`, `dilation`, `padding`).
//!
//! The types are in [`super::schema`] with the rest of the file's shape; this module checks a
//! family against its task.

use super::error::TaskFileError;
use super::schema::{
    BufferRole, Dtype, ExprText, FamilySpec, MapFamily, MatmulFamily, RowFamily, TaskSpec,
};

impl FamilySpec {
    /// The family as the body of a `[family]` table (`kind = "row_norm"` and its fields).
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// The family of a pattern recognised in an operator graph ([`kf_graph::recognise`]): a map
    /// with its expression, a row normalisation (softmax, layer/RMS/L1/L2 norm), a reduction
    /// or a scan over contiguous rows. Check it with [`FamilySpec::validate`] before use.
    pub fn from_pattern(pattern: &kf_graph::Pattern) -> FamilySpec {
        match pattern {
            kf_graph::Pattern::Map(m) => FamilySpec::Map(MapFamily {
                input: m.input.clone(),
                output: m.output.clone(),
                op: None,
                expr: Some(m.expr.clone()),
            }),
            kf_graph::Pattern::Rows(r) => {
                let row = RowFamily {
                    input: r.input.clone(),
                    output: r.output.clone(),
                    rows: ExprText::Text(r.rows.clone()),
                    length: ExprText::Text(r.length.clone()),
                    op: Some(r.op.name().to_owned()),
                    weight: r.weight.clone(),
                    bias: r.bias.clone(),
                    eps: r.eps,
                    inner: None,
                };
                if r.op.reduces() {
                    FamilySpec::RowReduce(row)
                } else if r.op.scans() {
                    FamilySpec::Scan(row)
                } else {
                    FamilySpec::RowNorm(row)
                }
            }
            kf_graph::Pattern::Matmul(m) => FamilySpec::Matmul(MatmulFamily {
                a: m.a.clone(),
                b: m.b.clone(),
                c: m.c.clone(),
                m: ExprText::Text(m.m.clone()),
                n: ExprText::Text(m.n.clone()),
                k: ExprText::Text(m.k.clone()),
                transpose_a: m.transpose_a,
                transpose_b: m.transpose_b,
                epilogue: m.epilogue.clone(),
            }),
            // `Pattern` may grow: a pattern this version cannot name is an element-wise map of
            // nothing, which validation refuses.
            _ => FamilySpec::Map(MapFamily {
                input: String::new(),
                output: String::new(),
                op: None,
                expr: None,
            }),
        }
    }

    /// Checks the family against the task: every named buffer is an f32 buffer of the task
    /// (an argmax's or argmin's output i32; read buffers inputs, written ones outputs), every size expression is an integer
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
            // An argmax or argmin writes indices.
            let index_output = written
                && buffer.dtype == Dtype::I32
                && matches!(self, FamilySpec::RowReduce(r)
                    if matches!(r.op.as_deref(), Some("argmax" | "argmin")));
            let problem = if buffer.dtype != Dtype::F32 && !index_output {
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
        let expression = match self {
            FamilySpec::Map(map) => map.expr.as_ref().map(|e| ("family.expr", e)),
            FamilySpec::Matmul(m) => m.epilogue.as_ref().map(|e| ("family.epilogue", e)),
            _ => None,
        };
        if let Some((field, expr)) = expression {
            let problem = if expr.trim().is_empty() {
                Some("is empty".to_owned())
            } else if expr.contains(['\n', '\\', '#', ';', '{', '}']) {
                Some(
                    "is not one expression (it has a newline, `\\`, `#`, `;` or a brace)"
                        .to_owned(),
                )
            } else {
                // An epilogue reads f32 input buffers only: never the product it writes.
                identifiers(expr)
                    .filter_map(|id| spec.buffers.iter().find(|b| b.name == id))
                    .find(|b| b.role != BufferRole::Input || b.dtype != Dtype::F32)
                    .filter(|_| matches!(self, FamilySpec::Matmul(_)))
                    .map(|b| format!("reads `{}`, which is not an f32 input buffer", b.name))
            };
            if let Some(problem) = problem {
                return Err(TaskFileError::invalid(
                    file,
                    field,
                    format!("`{expr}` {problem}"),
                ));
            }
        }
        Ok(())
    }
}

/// The C identifiers of `expr` (names of buffers, sizes, scalars and functions).
fn identifiers(expr: &str) -> impl Iterator<Item = &str> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| {
            t.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::super::load::{TaskBase, TaskFile};
    use super::super::schema::ExprText;
    use super::*;

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

    /// A map's expression parses; one that is not a single expression is rejected.
    #[test]
    fn a_map_expression_is_one_expression() {
        let map = format!(
            "{}[family]\nkind = \"map\"\ninput = \"A\"\noutput = \"out\"\nexpr = \"fmax(A, 0.0f)\"\n",
            MATMUL.split("[family]").next().unwrap()
        );
        let task = parse(&map).unwrap();
        let Some(FamilySpec::Map(m)) = &task.spec.family else {
            panic!("{:?}", task.spec.family);
        };
        assert_eq!(m.expr.as_deref(), Some("fmax(A, 0.0f)"));
        let err = parse(&map.replace("fmax(A, 0.0f)", "A; }")).unwrap_err();
        assert!(err.to_string().contains("family.expr"), "{err}");
    }

    /// A matrix product's epilogue is one expression over `acc`, `row`, `col` and the task's
    /// input buffers; it survives the round trip through TOML. One that reads the product it
    /// writes, or is more than one expression, is a typed error naming `family.epilogue`.
    #[test]
    fn a_matmul_epilogue_is_one_expression_over_inputs() {
        let with = |epilogue: &str| {
            MATMUL.replace(
                "k = \"N\"\n",
                &format!("k = \"N\"\nepilogue = \"{epilogue}\"\n"),
            )
        };
        let task = parse(&with("fmax(acc + B[col], 0.0f)")).unwrap();
        let Some(FamilySpec::Matmul(m)) = &task.spec.family else {
            panic!("{:?}", task.spec.family);
        };
        assert_eq!(m.epilogue.as_deref(), Some("fmax(acc + B[col], 0.0f)"));
        let again = TaskSpec::from_toml(&task.spec.to_toml().unwrap()).unwrap();
        assert_eq!(again.family, task.spec.family);
        for (bad, says) in [
            ("acc + out[row * N + col]", "reads `out`"),
            ("acc; out[0] = 1.0f", "not one expression"),
            (" ", "is empty"),
        ] {
            let err = parse(&with(bad)).unwrap_err().to_string();
            assert!(
                err.contains("family.epilogue") && err.contains(says),
                "{bad}: {err}"
            );
        }
    }

    /// A 1-D convolution names its buffers and sizes; stride, dilation and padding may be
    /// left out, and each size must be an expression over the task's sizes.
    #[test]
    fn a_conv1d_family_parses() {
        let conv = format!(
            "{}[family]\nkind = \"conv1d\"\ninput = \"A\"\nweight = \"B\"\noutput = \"out\"\nbatch = 1\nin_channels = \"N\"\nout_channels = \"N\"\nlength = \"N\"\nkernel_size = 1\nstride = 2\n",
            MATMUL.split("[family]").next().unwrap()
        );
        let task = parse(&conv).unwrap();
        let Some(FamilySpec::Conv1d(c)) = &task.spec.family else {
            panic!("{:?}", task.spec.family);
        };
        assert_eq!(
            (c.stride.clone(), c.dilation.clone()),
            (Some(ExprText::Int(2)), None)
        );
        assert_eq!(
            task.spec.family.as_ref().map(FamilySpec::kind),
            Some("conv1d")
        );
        let again = TaskSpec::from_toml(&task.spec.to_toml().unwrap()).unwrap();
        assert_eq!(again.family, task.spec.family);
        let err = parse(&conv.replace("stride = 2", "stride = \"S\"")).unwrap_err();
        assert!(err.to_string().contains("family.stride"), "{err}");
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
        // A normalisation's weight must be an input of the task.
        let weighted = text.replace(
            "op = \"softmax\"",
            "op = \"layer_norm\"\nweight = \"B\"\neps = 1e-6",
        );
        let task = parse(&weighted).unwrap();
        let Some(FamilySpec::RowNorm(r)) = &task.spec.family else {
            panic!("{:?}", task.spec.family);
        };
        assert_eq!((r.weight.as_deref(), r.eps), (Some("B"), Some(1e-6)));
        let strided = parse(&weighted.replace("eps = 1e-6", "inner = \"N / 2\"")).unwrap();
        let Some(FamilySpec::RowNorm(r)) = &strided.spec.family else {
            panic!("{:?}", strided.spec.family);
        };
        assert_eq!(r.inner, Some(ExprText::Text("N / 2".into())));
        let err = parse(&weighted.replace("weight = \"B\"", "weight = \"out\"")).unwrap_err();
        assert!(
            matches!(&err, TaskFileError::FamilyBuffer { field, .. } if field == "family.weight"),
            "{err}"
        );
    }
}
