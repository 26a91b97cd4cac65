//! Operator graphs for KernelFoundry: what an operator computes, read from its reference, in
//! the terms a search generates kernels from.
//!
//! # Overview
//!
//! - [`Graph`]: the operator as operations ([`Op`]: element-wise functions, reductions, scans,
//!   matrix products, reshapes) over its named inputs, each node with its shape as size
//!   expressions (`"ROWS"`, `"1"`), so that the graph holds at every size of the task.
//! - [`NUMPY_TRACER`]: the Python program that makes one from a task file's NumPy reference,
//!   by calling `reference(inputs, sizes, scalars)` with traced arrays (NumPy's
//!   `__array_ufunc__` and `__array_function__` protocols) and sizes that remember their names.
//!   A construct it does not know ends the trace with its name ([`GraphError::Unsupported`]):
//!   no graph, never a wrong one.
//! - [`recognise`]: the kernel family of a graph ([`Pattern`]): an element-wise map with its
//!   OpenCL C expression, a matrix product with its element-wise epilogue, or a computation along rows ([`RowOp`]: softmax, layer/RMS/L1/L2
//!   norm, a sum, a prefix sum…), told apart by evaluating the graph on sample rows. kf-eval
//!   turns a pattern into a task's `[family]`, from which kf-search seeds its templates.
//!
//! The data flow: a task file without a `[family]` table → `kf_eval`'s confined Python process
//! runs [`NUMPY_TRACER`] → [`Graph::from_trace`] → [`recognise`] → the task's family → the
//! search's seeds. KernelBench problems are traced by kf-kernelbench's stand-in for `torch`.
//!
//! ```
//! use kf_graph::{recognise, Graph, Pattern};
//!
//! let graph = Graph::from_trace(r#"{"nodes": [
//!     {"op": "input", "name": "x", "dims": ["N"]},
//!     {"op": "constant", "value": 0.0, "dims": []},
//!     {"op": "binary", "func": "maximum", "args": [0, 1], "dims": ["N"]}],
//!   "outputs": {"y": 2}}"#)?;
//! let Ok(Pattern::Map(map)) = recognise(&graph) else { panic!("a map") };
//! assert_eq!(map.expr, "fmax(x, 0.0f)");
//! # Ok::<(), kf_graph::GraphError>(())
//! ```

mod error;
mod graph;
mod pattern;
mod recognise;

pub use error::GraphError;
pub use graph::{BinaryFn, CompareFn, Graph, Node, NodeId, Op, ReduceFn, ScanFn, UnaryFn};
pub use pattern::{MapPattern, MatmulPattern, Pattern, RowOp, RowPattern};
pub use recognise::{recognise, Unrecognised};

/// The NumPy tracer (a Python 3 program needing only NumPy): `python numpy_tracer.py SCRIPT
/// WORKDIR` reads `WORKDIR/meta.json` (`{"sizes": {name: int}, "scalars": {name: number},
/// "inputs": {name: {"dims": [expr…], "shape": [int…], "dtype": "f32"}}}`), calls the
/// script's `reference(inputs, sizes, scalars)` with traced arrays, and writes
/// `WORKDIR/graph.json` for [`Graph::from_trace`]. It computes nothing and reads no input
/// values; run it confined like the reference itself (third-party code runs in it).
pub const NUMPY_TRACER: &str = include_str!("numpy_tracer.py");
