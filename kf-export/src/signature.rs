//! What a task's kernel takes: its sizes, its buffers (element type, length as an expression
//! over the sizes, whether the kernel writes it) and its argument order. The generated crate
//! embeds these as `static` values; the runtime checks every call against them.

/// Element type of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// 32-bit float (`f32`, OpenCL `float`).
    F32,
    /// 32-bit signed integer (`i32`, OpenCL `int`).
    I32,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        4
    }

    /// The Rust element type's name.
    pub fn rust(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::I32 => "i32",
        }
    }
}

/// One buffer of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSig {
    /// The task's name for it (`A`).
    pub name: &'static str,
    /// Element type.
    pub dtype: Dtype,
    /// Number of elements, an expression over the size names (`M * K`).
    pub len: &'static str,
    /// Whether the kernel writes it (the call reads it back).
    pub output: bool,
}

/// One kernel argument, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgSig {
    /// A size, passed as `int`.
    Size(&'static str),
    /// The buffer with this index in [`Signature::buffers`].
    Buffer(usize),
}

/// A task's kernel signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// Task name.
    pub task: &'static str,
    /// Size names, in the order the generated function takes them.
    pub sizes: &'static [&'static str],
    /// Buffers, in the order the generated function takes them.
    pub buffers: &'static [BufferSig],
    /// The kernel's arguments in order.
    pub args: &'static [ArgSig],
}

/// The built-in `gemm`: `(int M, int N, int K, const float* A, const float* B, float* C)`,
/// row-major `C = A · B`.
pub const GEMM: Signature = Signature {
    task: "gemm",
    sizes: &["M", "N", "K"],
    buffers: &[
        BufferSig {
            name: "A",
            dtype: Dtype::F32,
            len: "M * K",
            output: false,
        },
        BufferSig {
            name: "B",
            dtype: Dtype::F32,
            len: "K * N",
            output: false,
        },
        BufferSig {
            name: "C",
            dtype: Dtype::F32,
            len: "M * N",
            output: true,
        },
    ],
    args: &[
        ArgSig::Size("M"),
        ArgSig::Size("N"),
        ArgSig::Size("K"),
        ArgSig::Buffer(0),
        ArgSig::Buffer(1),
        ArgSig::Buffer(2),
    ],
};

/// The built-in `softmax`: `(int ROWS, int COLS, const float* X, float* Y)`, row-wise.
pub const SOFTMAX: Signature = Signature {
    task: "softmax",
    sizes: &["ROWS", "COLS"],
    buffers: &[
        BufferSig {
            name: "X",
            dtype: Dtype::F32,
            len: "ROWS * COLS",
            output: false,
        },
        BufferSig {
            name: "Y",
            dtype: Dtype::F32,
            len: "ROWS * COLS",
            output: true,
        },
    ],
    args: &[
        ArgSig::Size("ROWS"),
        ArgSig::Size("COLS"),
        ArgSig::Buffer(0),
        ArgSig::Buffer(1),
    ],
};

/// The signature of a task by name: the built-in `gemm` and `softmax` for now.
pub fn builtin(task: &str) -> Option<&'static Signature> {
    match task {
        "gemm" => Some(&GEMM),
        "softmax" => Some(&SOFTMAX),
        _ => None,
    }
}
