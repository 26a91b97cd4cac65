//! What a task's kernel takes: its sizes, its scalars, its buffers (element type, length as an
//! expression over the sizes, how the kernel uses it) and its argument order. The built-in
//! tasks' signatures are constants ([`GEMM`], [`SOFTMAX`]); a task file's is read from the file
//! ([`Signature::from_task_file`]). Every text and list is a [`Cow`], so that the same type is
//! built at export time (owned) and embedded in a generated crate as a `static` (borrowed);
//! the runtime checks every call against it.

use std::borrow::Cow;
use std::fmt::Write as _;

use kf_eval::task::file::{ArgKind, BufferRole, TaskFile};

use crate::error::ExportError;

pub use crate::kf_runtime::{Access, ArgSig, BufferSig, Dtype, ScalarSig, Signature, Text};

impl Dtype {
    /// The task-file dtype this is.
    pub fn eval(self) -> kf_eval::task::file::Dtype {
        match self {
            Dtype::F32 => kf_eval::task::file::Dtype::F32,
            Dtype::F16 => kf_eval::task::file::Dtype::F16,
            Dtype::I32 => kf_eval::task::file::Dtype::I32,
        }
    }

    fn from_eval(d: kf_eval::task::file::Dtype) -> Self {
        match d {
            kf_eval::task::file::Dtype::F32 => Dtype::F32,
            kf_eval::task::file::Dtype::F16 => Dtype::F16,
            kf_eval::task::file::Dtype::I32 => Dtype::I32,
        }
    }
}

const fn buffer(name: &'static str, len: &'static str, access: Access) -> BufferSig {
    BufferSig {
        name: Cow::Borrowed(name),
        dtype: Dtype::F32,
        len: Cow::Borrowed(len),
        access,
    }
}

/// The built-in `gemm`: `(int M, int N, int K, const float* A, const float* B, float* C)`,
/// row-major `C = A · B`.
pub static GEMM: Signature = Signature {
    task: Cow::Borrowed("gemm"),
    sizes: Cow::Borrowed(&[Cow::Borrowed("M"), Cow::Borrowed("N"), Cow::Borrowed("K")]),
    scalars: Cow::Borrowed(&[]),
    buffers: Cow::Borrowed(&[
        buffer("A", "M * K", Access::Input),
        buffer("B", "K * N", Access::Input),
        buffer("C", "M * N", Access::Output),
    ]),
    args: Cow::Borrowed(&[
        ArgSig::Size(Cow::Borrowed("M")),
        ArgSig::Size(Cow::Borrowed("N")),
        ArgSig::Size(Cow::Borrowed("K")),
        ArgSig::Buffer(0),
        ArgSig::Buffer(1),
        ArgSig::Buffer(2),
    ]),
};

/// The built-in `softmax`: `(int ROWS, int COLS, const float* X, float* Y)`, row-wise.
pub static SOFTMAX: Signature = Signature {
    task: Cow::Borrowed("softmax"),
    sizes: Cow::Borrowed(&[Cow::Borrowed("ROWS"), Cow::Borrowed("COLS")]),
    scalars: Cow::Borrowed(&[]),
    buffers: Cow::Borrowed(&[
        buffer("X", "ROWS * COLS", Access::Input),
        buffer("Y", "ROWS * COLS", Access::Output),
    ]),
    args: Cow::Borrowed(&[
        ArgSig::Size(Cow::Borrowed("ROWS")),
        ArgSig::Size(Cow::Borrowed("COLS")),
        ArgSig::Buffer(0),
        ArgSig::Buffer(1),
    ]),
};

/// The signature of a built-in task by name (`gemm`, `softmax`).
pub fn builtin(task: &str) -> Option<&'static Signature> {
    match task {
        "gemm" => Some(&GEMM),
        "softmax" => Some(&SOFTMAX),
        _ => None,
    }
}

impl Signature {
    /// The signature a task file declares: its sizes (in `[sizes]` order), scalars and buffers
    /// (in declaration order; a buffer's length is the product of its shape), and `args`.
    ///
    /// ```
    /// use kf_eval::task::file::{TaskBase, TaskFile};
    /// use kf_export::signature::{Access, ArgSig, Signature};
    ///
    /// let text = r#"
    /// name = "axpy"
    /// args = ["N", "a", "x", "y"]
    /// [sizes]
    /// N = 1000
    /// [[buffer]]
    /// name = "x"
    /// dtype = "f32"
    /// shape = ["N"]
    /// role = "input"
    /// [[buffer]]
    /// name = "y"
    /// dtype = "f32"
    /// shape = ["N"]
    /// role = "inout"
    /// [[scalar]]
    /// name = "a"
    /// dtype = "f32"
    /// value = 2.0
    /// [reference]
    /// rust = "axpy"
    /// "#;
    /// let task = TaskFile::parse(text, "axpy.toml", TaskBase::Dir(".".into())).unwrap();
    /// let sig = Signature::from_task_file(&task).unwrap();
    /// assert_eq!(sig.buffers[1].access, Access::InOut);
    /// assert_eq!(sig.args[1], ArgSig::Scalar(0));
    /// assert_eq!(sig.scalars[0].value, 2.0);
    /// ```
    ///
    /// # Errors
    ///
    /// [`ExportError::Unsupported`] for a scalar whose type the OpenCL backend cannot pass (a
    /// task file allows `f32` and `i32` scalars, which it can; `f16` buffers are passed).
    pub fn from_task_file(file: &TaskFile) -> Result<Signature, ExportError> {
        let spec = &file.spec;
        let mut scalars = Vec::new();
        for s in &spec.scalars {
            let dtype = Dtype::from_eval(s.dtype);
            if dtype == Dtype::F16 {
                return Err(ExportError::Unsupported {
                    run: file.file.clone(),
                    what: format!("the f16 scalar `{}`", s.name),
                    why: "OpenCL kernel arguments of type half cannot be set from the host; \
                          declare the scalar f32 and convert it in the kernel"
                        .to_owned(),
                });
            }
            scalars.push(ScalarSig {
                name: Cow::Owned(s.name.clone()),
                dtype,
                value: s.value.as_f64(),
            });
        }
        let buffers = spec
            .buffers
            .iter()
            .map(|b| {
                let len = if b.shape.len() == 1 {
                    b.shape[0].text()
                } else {
                    b.shape
                        .iter()
                        .map(|d| format!("({})", d.text()))
                        .collect::<Vec<_>>()
                        .join(" * ")
                };
                BufferSig {
                    name: Cow::Owned(b.name.clone()),
                    dtype: Dtype::from_eval(b.dtype),
                    len: Cow::Owned(len),
                    access: match b.role {
                        BufferRole::Input => Access::Input,
                        BufferRole::Output => Access::Output,
                        BufferRole::Inout => Access::InOut,
                    },
                }
            })
            .collect::<Vec<_>>();
        // Validated by the task file's loader: every name in `args` is declared.
        let args = spec
            .args
            .iter()
            .filter_map(|a| {
                Some(match file.arg_kind(a)? {
                    ArgKind::Size => ArgSig::Size(Cow::Owned(a.clone())),
                    ArgKind::Scalar(i) => ArgSig::Scalar(i),
                    ArgKind::Buffer(i) => ArgSig::Buffer(i),
                })
            })
            .collect::<Vec<_>>();
        Ok(Signature {
            task: Cow::Owned(spec.name.clone()),
            sizes: spec.sizes.keys().map(|k| Cow::Owned(k.clone())).collect(),
            scalars: Cow::Owned(scalars),
            buffers: Cow::Owned(buffers),
            args: Cow::Owned(args),
        })
    }

    /// The signature as a Rust constant expression (`Signature { task: Cow::Borrowed(…), … }`),
    /// for a generated crate's `static`; `Cow` must be in scope there.
    pub fn to_rust(&self) -> String {
        let text = |t: &str| format!("Cow::Borrowed({t:?})");
        let dtype = |d: Dtype| match d {
            Dtype::F32 => "Dtype::F32",
            Dtype::F16 => "Dtype::F16",
            Dtype::I32 => "Dtype::I32",
        };
        let mut out = String::from("Signature {\n");
        let _ = writeln!(out, "    task: {},", text(&self.task));
        let sizes: Vec<String> = self.sizes.iter().map(|s| text(s)).collect();
        let _ = writeln!(out, "    sizes: Cow::Borrowed(&[{}]),", sizes.join(", "));
        out.push_str("    scalars: Cow::Borrowed(&[\n");
        for s in self.scalars.iter() {
            let _ = writeln!(
                out,
                "        ScalarSig {{ name: {}, dtype: {}, value: {:?} }},",
                text(&s.name),
                dtype(s.dtype),
                s.value
            );
        }
        out.push_str("    ]),\n    buffers: Cow::Borrowed(&[\n");
        for b in self.buffers.iter() {
            let _ = writeln!(
                out,
                "        BufferSig {{ name: {}, dtype: {}, len: {}, access: Access::{:?} }},",
                text(&b.name),
                dtype(b.dtype),
                text(&b.len),
                b.access
            );
        }
        out.push_str("    ]),\n    args: Cow::Borrowed(&[\n");
        for a in self.args.iter() {
            let _ = match a {
                ArgSig::Size(n) => writeln!(out, "        ArgSig::Size({}),", text(n)),
                ArgSig::Scalar(i) => writeln!(out, "        ArgSig::Scalar({i}),"),
                ArgSig::Buffer(i) => writeln!(out, "        ArgSig::Buffer({i}),"),
            };
        }
        out.push_str("    ]),\n}");
        out
    }
}
