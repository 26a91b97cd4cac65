//! The reference cases a generated crate's (and module's) test checks a task-file task
//! against: inputs drawn from the task's `init` distributions and the outputs its reference
//! computed for them at export time, stored beside the generated code as
//! `reference/<task>/index.json` and little-endian `.bin` files. `kf export` writes them with
//! these types ([`CaseIndex`] shows the layout); a generated crate reads and checks them with
//! [`crate::standalone::check`] (its `kf_check` module), whose comparison is the evaluator's
//! (`kf_eval::verify::compare_buffers_with`, which this crate's tests hold it to).

use indexmap::IndexMap;
use kf_core::Tolerance;
use serde::{Deserialize, Serialize};
/// The name of a case folder's index file.
pub const INDEX_FILE: &str = "index.json";

/// `index.json` of a task's reference cases.
///
/// ```json
/// {"task": "scaled_swish", "reference": "python scaled_swish_ref.py",
///  "cases": [{"sizes": {"ROWS": 32, "COLS": 32}, "scalars": {"alpha": 1.5},
///             "input_set": 0, "seed": 7,
///             "buffers": [{"name": "x", "dtype": "f32", "elements": 1024, "input": "0/x.bin"},
///                         {"name": "y", "dtype": "f32", "elements": 1024,
///                          "expected": "0/y.expected.bin", "tolerance": {…}}]}]}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseIndex {
    /// The task.
    pub task: String,
    /// What computed the expected outputs (`python scaled_swish_ref.py`).
    pub reference: String,
    /// The cases, smallest first.
    pub cases: Vec<CaseEntry>,
}

/// One case: sizes, scalars and every buffer's files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseEntry {
    /// The sizes, in the task's order.
    pub sizes: IndexMap<String, i64>,
    /// The scalars' values (the task file's).
    pub scalars: IndexMap<String, f64>,
    /// Which of the task's `init` distributions drew the inputs.
    pub input_set: u32,
    /// The seed of the evaluator's input generator (ChaCha8).
    pub seed: u64,
    /// Every buffer of the task, in its order.
    pub buffers: Vec<CaseBuffer>,
}

/// One buffer of a case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseBuffer {
    /// The task's name for it.
    pub name: String,
    /// `f32`, `f16` or `i32`.
    pub dtype: String,
    /// Elements.
    pub elements: usize,
    /// The data the kernel reads (inputs and in-place buffers), relative to the index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// What the reference computed (outputs and in-place buffers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// The accumulation rule's extra absolute allowance per element (f64), when the task
    /// declares `accumulates` for this output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowance: Option<String>,
    /// The tolerance for this buffer's dtype (the task's `[tolerance]` through
    /// `kf_eval::verify::tolerance_for`), for written buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<Tolerance>,
}
