//! A task's signature (dtypes, buffers, scalars) and the host data of a call: the element
//! types and their little-endian byte conversion, borrowed buffers and scalar arguments.

use std::borrow::Cow;

/// A name or an expression: borrowed in a generated crate's `static`, owned when built.
pub type Text = Cow<'static, str>;

/// Element type of a buffer or a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// 32-bit float (`f32`, OpenCL `float`).
    F32,
    /// 16-bit float (`half::f16`, OpenCL `half`; the kernel needs `cl_khr_fp16`). Buffers only.
    F16,
    /// 32-bit signed integer (`i32`, OpenCL `int`).
    I32,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 => 2,
        }
    }

    /// The Rust element type's name (`f16` is `half::f16`).
    pub fn rust(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::I32 => "i32",
        }
    }
}

/// How the kernel uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only.
    Input,
    /// Written only: the call reads it back.
    Output,
    /// Read and written in place: the caller's data goes to the device first and comes back.
    InOut,
}

impl Access {
    /// Whether the kernel writes the buffer (the call reads it back).
    pub fn writes(self) -> bool {
        self != Access::Input
    }

    /// Whether the kernel reads the caller's data.
    pub fn reads(self) -> bool {
        self != Access::Output
    }
}

/// One buffer of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferSig {
    /// The task's name for it (`A`).
    pub name: Text,
    /// Element type.
    pub dtype: Dtype,
    /// Number of elements, an expression over the size names (`M * K`).
    pub len: Text,
    /// How the kernel uses it.
    pub access: Access,
}

/// One scalar argument of a task: the caller passes its value; the task's own value is the
/// documented default.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarSig {
    /// The task's name for it (`alpha`).
    pub name: Text,
    /// `F32` or `I32`.
    pub dtype: Dtype,
    /// The value the task gives (the search measured with it).
    pub value: f64,
}

/// One kernel argument, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgSig {
    /// A size, passed as `int`.
    Size(Text),
    /// The scalar with this index in [`Signature::scalars`].
    Scalar(usize),
    /// The buffer with this index in [`Signature::buffers`].
    Buffer(usize),
}

/// A task's kernel signature: the generated functions take the sizes, then the scalars, then
/// the buffers, each in the order given here; the kernel receives them in
/// [`Signature::args`] order.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    /// Task name.
    pub task: Text,
    /// Size names, in the order the generated function takes them.
    pub sizes: Cow<'static, [Text]>,
    /// Scalars, in the order the generated function takes them.
    pub scalars: Cow<'static, [ScalarSig]>,
    /// Buffers, in the order the generated function takes them.
    pub buffers: Cow<'static, [BufferSig]>,
    /// The kernel's arguments in order.
    pub args: Cow<'static, [ArgSig]>,
}

impl Signature {
    /// The size names as plain strings.
    pub fn size_names(&self) -> Vec<&str> {
        self.sizes.iter().map(|s| s.as_ref()).collect()
    }
}

/// Sizes as `M=64,N=64,K=64`.
pub fn sizes_text<'a>(sizes: impl IntoIterator<Item = (&'a str, i64)>) -> String {
    sizes
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

// ---------------------------------------------------------------------------------------------
// Host data

/// An element type a generated function passes: its [`Dtype`] and its bytes.
pub trait Element: Copy + Send + Sync + 'static {
    /// The signature's name for it.
    const DTYPE: Dtype;
    /// The value that marks an element the kernel never wrote (a NaN with a payload for the
    /// float types; `0x7FC0DEAD` for `i32`).
    const POISON: Self;
    /// Appends the value's native-order bytes.
    fn put(self, out: &mut Vec<u8>);
    /// The value of the first `DTYPE.size()` native-order bytes (zero where there are fewer).
    fn take(bytes: &[u8]) -> Self;
    /// The value as f64 (for comparisons).
    fn to_f64(self) -> f64;
    /// The value's bits, widened (to recognise [`Element::POISON`]).
    fn bits(self) -> u64;
}

/// The first `N` bytes of `b`, zero-padded.
pub(super) fn array<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    for (o, v) in out.iter_mut().zip(b) {
        *o = *v;
    }
    out
}

impl Element for f32 {
    const DTYPE: Dtype = Dtype::F32;
    const POISON: Self = f32::from_bits(0x7FC0_DEAD);
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn take(b: &[u8]) -> Self {
        f32::from_ne_bytes(array(b))
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}

impl Element for i32 {
    const DTYPE: Dtype = Dtype::I32;
    const POISON: Self = 0x7FC0_DEAD;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn take(b: &[u8]) -> Self {
        i32::from_ne_bytes(array(b))
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn bits(self) -> u64 {
        u64::from(self as u32)
    }
}

/// The native-order bytes of `values` (for [`HostData`]).
pub fn to_bytes<T: Element>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * T::DTYPE.size());
    for v in values {
        v.put(&mut out);
    }
    out
}

/// Copies native-order bytes back into `out`.
pub fn from_bytes<T: Element>(bytes: &[u8], out: &mut [T]) {
    for (v, c) in out.iter_mut().zip(bytes.chunks_exact(T::DTYPE.size())) {
        *v = T::take(c);
    }
}

/// Host data of one buffer of a call.
#[derive(Debug)]
pub enum HostData<'a> {
    /// An input, read by the kernel.
    In(&'a [u8]),
    /// An output: written to the device first (for in-place kernels), read back after.
    Out(&'a mut [u8]),
}

impl HostData<'_> {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            HostData::In(s) => s,
            HostData::Out(s) => s,
        }
    }
}

/// The value of one scalar argument of a call, in [`Signature::scalars`] order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ScalarArg {
    /// A `float` argument.
    F32(f32),
    /// An `int` argument.
    I32(i32),
}

impl ScalarArg {
    pub(super) fn dtype(self) -> Dtype {
        match self {
            ScalarArg::F32(_) => Dtype::F32,
            ScalarArg::I32(_) => Dtype::I32,
        }
    }
}
