//! The reference cases a generated crate's (and module's) test checks a task-file task
//! against: inputs drawn from the task's `init` distributions and the outputs its reference
//! computed for them at export time, stored beside the generated code as
//! `reference/<task>/index.json` and little-endian `.bin` files (`kf export` writes them; see
//! [`ReferenceCases`] for the layout). A generated test reads a case ([`Case::input`],
//! [`Case::output`]), calls the kernel, and checks each written buffer with [`Case::check`]:
//! the evaluator's own comparison (`kf_eval::verify::compare_buffers_with`) under the task's
//! `[tolerance]` for the buffer's dtype, plus the accumulation rule's per-element allowance
//! where the task file declares `accumulates`.

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use kf_core::Tolerance;
use kf_eval::tasks::HostBuffer;
use kf_eval::verify::{compare_buffers_with, Verdict};
use serde::{Deserialize, Serialize};

use crate::error::ExportError;
use crate::runtime::Element;
use crate::signature::Dtype;

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

/// A task's stored reference cases (`reference/<task>/` of a generated crate or module).
#[derive(Debug, Clone)]
pub struct ReferenceCases {
    dir: PathBuf,
    index: CaseIndex,
}

/// One case of [`ReferenceCases`], ready to read.
#[derive(Debug, Clone, Copy)]
pub struct Case<'a> {
    dir: &'a Path,
    task: &'a str,
    number: usize,
    entry: &'a CaseEntry,
}

fn dtype_name(d: Dtype) -> &'static str {
    d.eval().name()
}

impl ReferenceCases {
    /// Reads `dir/index.json`.
    ///
    /// # Errors
    ///
    /// [`ExportError::Io`] when it cannot be read, [`ExportError::BadRun`] when it is not an
    /// index of cases.
    pub fn read(dir: impl Into<PathBuf>) -> Result<Self, ExportError> {
        let dir = dir.into();
        let path = dir.join(INDEX_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| ExportError::io(&path, e))?;
        let index = serde_json::from_str(&text).map_err(|e| ExportError::BadRun {
            path: path.clone(),
            message: format!("not an index of reference cases: {e}"),
        })?;
        Ok(ReferenceCases { dir, index })
    }

    /// The index.
    pub fn index(&self) -> &CaseIndex {
        &self.index
    }

    /// The cases, smallest first.
    pub fn cases(&self) -> Vec<Case<'_>> {
        self.index
            .cases
            .iter()
            .enumerate()
            .map(|(number, entry)| Case {
                dir: &self.dir,
                task: &self.index.task,
                number,
                entry,
            })
            .collect()
    }
}

impl<'a> Case<'a> {
    fn error(&self, message: String) -> ExportError {
        ExportError::Reference {
            task: self.task.to_owned(),
            case: self.describe(),
            message,
        }
    }

    /// `case 0 (ROWS=32,COLS=32)`.
    pub fn describe(&self) -> String {
        format!(
            "case {} ({})",
            self.number,
            crate::sizes_text(self.entry.sizes.iter().map(|(k, v)| (k.as_str(), *v)))
        )
    }

    /// The index entry.
    pub fn entry(&self) -> &'a CaseEntry {
        self.entry
    }

    /// The sizes' values in the index's order (the task's).
    pub fn sizes(&self) -> Vec<i64> {
        self.entry.sizes.values().copied().collect()
    }

    /// The size `name`.
    ///
    /// # Errors
    ///
    /// [`ExportError::Reference`] when the case has no such size.
    pub fn size(&self, name: &str) -> Result<i64, ExportError> {
        self.entry
            .sizes
            .get(name)
            .copied()
            .ok_or_else(|| self.error(format!("no size `{name}`")))
    }

    /// The scalar `name` as f64 (exact for the task's f32 and i32 scalars).
    ///
    /// # Errors
    ///
    /// [`ExportError::Reference`] when the case has no such scalar.
    pub fn scalar(&self, name: &str) -> Result<f64, ExportError> {
        self.entry
            .scalars
            .get(name)
            .copied()
            .ok_or_else(|| self.error(format!("no scalar `{name}`")))
    }

    fn buffer<T: Element>(&self, name: &str) -> Result<&'a CaseBuffer, ExportError> {
        let b = self
            .entry
            .buffers
            .iter()
            .find(|b| b.name == name)
            .ok_or_else(|| self.error(format!("no buffer `{name}`")))?;
        if b.dtype != dtype_name(T::DTYPE) {
            return Err(self.error(format!(
                "buffer `{name}` is {}, read as {}",
                b.dtype,
                dtype_name(T::DTYPE)
            )));
        }
        Ok(b)
    }

    fn read<T: Element>(&self, b: &CaseBuffer, file: &str) -> Result<Vec<T>, ExportError> {
        let path = self.dir.join(file);
        let bytes = std::fs::read(&path).map_err(|e| ExportError::io(&path, e))?;
        let size = T::DTYPE.size();
        if bytes.len() != b.elements * size {
            return Err(self.error(format!(
                "{} holds {} bytes, {} elements of {} need {}",
                path.display(),
                bytes.len(),
                b.elements,
                b.dtype,
                b.elements * size
            )));
        }
        // Stored little-endian; the element types take native order.
        Ok(bytes
            .chunks_exact(size)
            .map(|c| {
                let mut c = c.to_vec();
                if cfg!(target_endian = "big") {
                    c.reverse();
                }
                T::take(&c)
            })
            .collect())
    }

    /// The data the kernel reads for buffer `name` (an input or an in-place buffer).
    ///
    /// # Errors
    ///
    /// [`ExportError::Reference`] for an unknown buffer, another dtype, or an output;
    /// [`ExportError::Io`] when its file cannot be read.
    pub fn input<T: Element>(&self, name: &str) -> Result<Vec<T>, ExportError> {
        let b = self.buffer::<T>(name)?;
        let file = b
            .input
            .as_deref()
            .ok_or_else(|| self.error(format!("buffer `{name}` is not read by the kernel")))?;
        self.read(b, file)
    }

    /// The buffer the kernel writes `name` into: for an output, every element the dtype's
    /// poison (so that an element left unwritten is caught); for an in-place buffer, its
    /// input data.
    ///
    /// # Errors
    ///
    /// As [`Case::input`]'s.
    pub fn output<T: Element>(&self, name: &str) -> Result<Vec<T>, ExportError> {
        let b = self.buffer::<T>(name)?;
        match &b.input {
            Some(file) => self.read(b, file),
            None => {
                let poison = HostBuffer::poison(T::DTYPE.eval(), b.elements).to_bytes();
                Ok(poison.chunks_exact(T::DTYPE.size()).map(T::take).collect())
            }
        }
    }

    /// Checks what the kernel wrote into `name` against the reference's output, with the
    /// evaluator's comparison: no element left unwritten, none NaN or infinite, every element
    /// within `atol + rtol·|ref|` (plus the accumulation allowance), and the aggregate rule
    /// (fraction within `relative_threshold`, cosine similarity).
    ///
    /// # Errors
    ///
    /// [`ExportError::Reference`] naming the failing rule and the first element that breaks
    /// it; the errors of [`Case::input`] for the stored files.
    pub fn check<T: Element>(&self, name: &str, got: &[T]) -> Result<(), ExportError> {
        let b = self.buffer::<T>(name)?;
        let (Some(file), Some(tolerance)) = (&b.expected, &b.tolerance) else {
            return Err(self.error(format!("buffer `{name}` is not written by the kernel")));
        };
        let want: Vec<T> = self.read(b, file)?;
        if got.len() != want.len() {
            return Err(self.error(format!(
                "`{name}` has {} elements, the reference {}",
                got.len(),
                want.len()
            )));
        }
        let allowance = match &b.allowance {
            Some(file) => {
                let path = self.dir.join(file);
                let bytes = std::fs::read(&path).map_err(|e| ExportError::io(&path, e))?;
                Some(
                    bytes
                        .chunks_exact(8)
                        .map(|c| {
                            f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
                        })
                        .collect::<Vec<_>>(),
                )
            }
            None => None,
        };
        let host = |v: &[T]| HostBuffer::from_bytes(T::DTYPE.eval(), &crate::runtime::to_bytes(v));
        match compare_buffers_with(&host(got), &host(&want), tolerance, allowance.as_deref()) {
            Verdict::Close(_) => Ok(()),
            Verdict::Unwritten {
                count,
                first,
                total,
            } => Err(self.error(format!(
                "`{name}`: {count} of {total} elements were never written (the first at {first})"
            ))),
            Verdict::NonFinite { count, first } => Err(self.error(format!(
                "`{name}`: {count} elements are NaN or infinite (the first at {first})"
            ))),
            Verdict::Mismatch(r) => {
                let at = r.first_mismatch.map_or_else(
                    || "every element within atol + rtol·|ref|".to_owned(),
                    |i| {
                        let i = usize::try_from(i).unwrap_or(0);
                        let value = |v: &[T]| host(&v[i..=i]).to_f64()[0];
                        format!(
                            "element {i} is {}, the reference {} (atol {}, rtol {})",
                            value(got),
                            value(&want),
                            tolerance.atol,
                            tolerance.rtol
                        )
                    },
                );
                Err(self.error(format!(
                    "`{name}` does not match the reference: {at}; {:.4} of the elements within \
                     {} relative (needs more than {}), cosine {:.6} (needs {}), largest error {:e}",
                    r.fraction_within,
                    tolerance.relative_threshold,
                    tolerance.min_fraction_within,
                    r.cosine,
                    tolerance.min_cosine,
                    r.max_abs_error
                )))
            }
        }
    }
}
