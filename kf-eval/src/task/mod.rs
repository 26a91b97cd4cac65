//! Tasks the evaluator knows how to check: what buffers a kernel gets, in which argument order,
//! how inputs are drawn, and how the host computes the reference. The built-in tasks are task
//! files shipped in this crate; [`file`](mod@file) reads a user's own.

mod builtin;
pub mod file;
pub(crate) mod host;
pub(crate) mod spec;

pub use crate::element::Role;
pub use builtin::{
    builtin_references, builtin_task, builtin_task_file, Gemm, Softmax, BUILTIN_TASKS,
};
pub use host::{HostBuffer, POISON_F16_BITS, POISON_I32};
pub use spec::{
    parse_sizes, parse_sizes_or_number, sizes_text, Accumulation, ArgSpec, BufferSpec, KernelTask,
    Sizes,
};
