//! Checking results against the reference cases `kf export` stored beside a generated crate
//! (`reference/<task>/index.json` and little-endian `.bin` files): inputs drawn from the
//! task's `init` distributions and what the task's reference computed for them.
//!
//! This file is written verbatim into every exported crate (`src/kf_check.rs`) and is also a
//! module of `kf-export` (`kf_export::standalone::check`), where it is tested against the
//! evaluator's comparison: [`compare`] applies the rule KernelFoundry's search applied, under
//! the task's `[tolerance]` for the buffer's dtype, plus the accumulation rule's per-element
//! allowance where the task declares `accumulates`.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::kf_runtime::{sizes_text, Element, Error};

/// The comparison's thresholds (the task's `[tolerance]` for one dtype).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Tolerance {
    /// Absolute tolerance per element.
    pub atol: f64,
    /// Relative tolerance per element.
    pub rtol: f64,
    /// Relative error under which an element counts as "within" for the aggregate rule.
    pub relative_threshold: f64,
    /// Fraction of elements that must be within `relative_threshold` (strictly more).
    pub min_fraction_within: f64,
    /// Minimum cosine similarity between output and reference.
    pub min_cosine: f64,
}

/// The aggregate numbers of a comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// Fraction of elements within `relative_threshold` (or `atol` plus the allowance).
    pub fraction_within: f64,
    /// Largest absolute error.
    pub max_abs_error: f64,
    /// Cosine similarity of output and reference.
    pub cosine: f64,
    /// The first element outside `atol + rtol·|ref|` (plus the allowance).
    pub first_mismatch: Option<usize>,
}

/// What [`compare`] found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Every rule holds.
    Close(Report),
    /// Elements still hold the poison value: the kernel never wrote them.
    Unwritten {
        /// How many.
        count: usize,
        /// The first.
        first: usize,
        /// Elements compared.
        total: usize,
    },
    /// Elements are NaN or infinite.
    NonFinite {
        /// How many.
        count: usize,
        /// The first.
        first: usize,
    },
    /// An element or the aggregate rule fails.
    Mismatch(Report),
}

/// Compares what a kernel wrote (`got`) with the reference's output (`want`): no element left
/// at [`Element::POISON`] (for `i32`, unless the reference holds that value there), none NaN
/// or infinite, every element within `atol + rtol·|ref|` plus `allowance[i]`, more than
/// `min_fraction_within` of them within `relative_threshold` (or `atol` plus the allowance),
/// and a cosine similarity of at least `min_cosine`.
pub fn compare<T: Element>(
    got: &[T],
    want: &[T],
    tol: &Tolerance,
    allowance: Option<&[f64]>,
) -> Verdict {
    let n = got.len().min(want.len());
    let is_float = T::POISON.to_f64().is_nan();
    let poisoned = |i: usize| {
        got[i].bits() == T::POISON.bits() && (is_float || want[i].bits() != T::POISON.bits())
    };
    let unwritten: Vec<usize> = (0..n).filter(|&i| poisoned(i)).collect();
    if let Some(&first) = unwritten.first() {
        return Verdict::Unwritten {
            count: unwritten.len(),
            first,
            total: n,
        };
    }
    let non_finite: Vec<usize> = (0..n).filter(|&i| !got[i].to_f64().is_finite()).collect();
    if let Some(&first) = non_finite.first() {
        return Verdict::NonFinite {
            count: non_finite.len(),
            first,
        };
    }
    let extra = |i: usize| allowance.and_then(|a| a.get(i)).copied().unwrap_or(0.0);
    let (mut within, mut max_abs, mut first_mismatch) = (0usize, 0.0f64, None);
    let (mut dot, mut no, mut nr) = (0.0f64, 0.0f64, 0.0f64);
    for i in 0..n {
        let (o, r) = (got[i].to_f64(), want[i].to_f64());
        let abs = (o - r).abs();
        max_abs = max_abs.max(abs);
        if abs > tol.atol + tol.rtol * r.abs() + extra(i) {
            first_mismatch.get_or_insert(i);
        }
        if abs <= tol.relative_threshold * r.abs() || abs <= tol.atol + extra(i) {
            within += 1;
        }
        dot += o * r;
        no += o * o;
        nr += r * r;
    }
    let cosine = if no == 0.0 && nr == 0.0 {
        1.0
    } else if no == 0.0 || nr == 0.0 {
        0.0
    } else {
        dot / (no.sqrt() * nr.sqrt())
    };
    let fraction_within = if n == 0 {
        1.0
    } else {
        within as f64 / n as f64
    };
    let report = Report {
        fraction_within,
        max_abs_error: max_abs,
        cosine,
        first_mismatch,
    };
    if first_mismatch.is_none()
        && fraction_within > tol.min_fraction_within
        && cosine >= tol.min_cosine
    {
        Verdict::Close(report)
    } else {
        Verdict::Mismatch(report)
    }
}

/// `index.json`: the task and its cases (what `kf export` writes; other fields are ignored).
#[derive(Debug, Clone, Deserialize)]
struct Index {
    #[serde(default)]
    task: String,
    cases: Vec<Entry>,
}

/// One case of `index.json`: sizes and scalars by name, in the task's order (serde_json's
/// `preserve_order`), and its buffers.
#[derive(Debug, Clone, Deserialize)]
struct Entry {
    #[serde(default)]
    sizes: Map<String, Value>,
    #[serde(default)]
    scalars: Map<String, Value>,
    #[serde(default)]
    buffers: Vec<BufferEntry>,
}

/// One buffer of a case: files relative to the cases' folder; `tolerance` for a buffer the
/// kernel writes, `input` for one it reads.
#[derive(Debug, Clone, Deserialize)]
struct BufferEntry {
    name: String,
    dtype: String,
    elements: usize,
    input: Option<String>,
    expected: Option<String>,
    allowance: Option<String>,
    tolerance: Option<Tolerance>,
}

/// A task's stored reference cases (`reference/<task>/`).
#[derive(Debug, Clone)]
pub struct ReferenceCases {
    dir: PathBuf,
    index: Index,
}

/// One case of [`ReferenceCases`].
#[derive(Debug, Clone, Copy)]
pub struct Case<'a> {
    dir: &'a Path,
    number: usize,
    entry: &'a Entry,
}

impl ReferenceCases {
    /// Reads `dir/index.json`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when it cannot be read, [`Error::Reference`] when it is not an index of
    /// cases.
    pub fn read(dir: impl Into<PathBuf>) -> Result<Self, Error> {
        let dir = dir.into();
        let path = dir.join("index.json");
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let index = serde_json::from_str(&text).map_err(|e| Error::Reference {
            case: path.display().to_string(),
            message: format!("not an index of reference cases: {e}"),
        })?;
        Ok(ReferenceCases { dir, index })
    }

    /// The task the cases are of.
    pub fn task(&self) -> &str {
        &self.index.task
    }

    /// The cases, smallest first.
    pub fn cases(&self) -> Vec<Case<'_>> {
        self.index
            .cases
            .iter()
            .enumerate()
            .map(|(number, entry)| Case {
                dir: &self.dir,
                number,
                entry,
            })
            .collect()
    }
}

impl<'a> Case<'a> {
    fn error(&self, message: String) -> Error {
        Error::Reference {
            case: self.describe(),
            message,
        }
    }

    /// `case 0 (ROWS=32,COLS=32)`.
    pub fn describe(&self) -> String {
        let sizes = self.entry.sizes.iter();
        let text = sizes_text(sizes.map(|(k, v)| (k.as_str(), v.as_i64().unwrap_or(0))));
        format!("case {} ({text})", self.number)
    }

    /// The sizes' values in the index's order (the task's).
    pub fn sizes(&self) -> Vec<i64> {
        let sizes = self.entry.sizes.values();
        sizes.map(|v| v.as_i64().unwrap_or(0)).collect()
    }

    /// The size `name`.
    ///
    /// # Errors
    ///
    /// [`Error::Reference`] when the case has no such size.
    pub fn size(&self, name: &str) -> Result<i64, Error> {
        let value = self.entry.sizes.get(name).and_then(Value::as_i64);
        value.ok_or_else(|| self.error(format!("no sizes entry `{name}`")))
    }

    /// The scalar `name` as f64 (exact for the task's f32 and i32 scalars).
    ///
    /// # Errors
    ///
    /// [`Error::Reference`] when the case has no such scalar.
    pub fn scalar(&self, name: &str) -> Result<f64, Error> {
        let value = self.entry.scalars.get(name).and_then(Value::as_f64);
        value.ok_or_else(|| self.error(format!("no scalars entry `{name}`")))
    }

    fn buffer<T: Element>(&self, name: &str) -> Result<&'a BufferEntry, Error> {
        let b = self.entry.buffers.iter().find(|b| b.name == name);
        let b = b.ok_or_else(|| self.error(format!("no buffer `{name}`")))?;
        let dtype = &b.dtype;
        if dtype != T::DTYPE.rust() {
            return Err(self.error(format!(
                "buffer `{name}` is {dtype}, read as {}",
                T::DTYPE.rust()
            )));
        }
        Ok(b)
    }

    fn file(&self, rel: &str) -> Result<Vec<u8>, Error> {
        let path = self.dir.join(rel);
        std::fs::read(&path).map_err(|source| Error::Io { path, source })
    }

    /// Reads the file `rel` of buffer `b` (its `key` data).
    fn read<T: Element>(
        &self,
        b: &BufferEntry,
        rel: Option<&str>,
        key: &str,
    ) -> Result<Vec<T>, Error> {
        let name = &b.name;
        let Some(rel) = rel else {
            return Err(self.error(format!("buffer `{name}` has no `{key}` data")));
        };
        let bytes = self.file(rel)?;
        let elements = b.elements;
        let size = T::DTYPE.size();
        if bytes.len() != elements * size {
            return Err(self.error(format!(
                "{rel} holds {} bytes, {elements} elements need {}",
                bytes.len(),
                elements * size
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
    /// [`Error::Reference`] for an unknown buffer, another dtype, or an output; [`Error::Io`]
    /// when its file cannot be read.
    pub fn input<T: Element>(&self, name: &str) -> Result<Vec<T>, Error> {
        let b = self.buffer::<T>(name)?;
        self.read(b, b.input.as_deref(), "input")
    }

    /// The buffer the kernel writes `name` into: for an output, every element
    /// [`Element::POISON`] (so that an element left unwritten is caught); for an in-place
    /// buffer, its input data.
    ///
    /// # Errors
    ///
    /// As [`Case::input`]'s.
    pub fn output<T: Element>(&self, name: &str) -> Result<Vec<T>, Error> {
        let b = self.buffer::<T>(name)?;
        if b.input.is_some() {
            return self.read(b, b.input.as_deref(), "input");
        }
        Ok(vec![T::POISON; b.elements])
    }

    /// Checks what the kernel wrote into `name` against the reference's output with
    /// [`compare`], under the stored tolerance and allowance.
    ///
    /// # Errors
    ///
    /// [`Error::Reference`] naming the failing rule and the first element that breaks it; the
    /// errors of [`Case::input`] for the stored files.
    pub fn check<T: Element>(&self, name: &str, got: &[T]) -> Result<(), Error> {
        let b = self.buffer::<T>(name)?;
        let Some(tolerance) = b.tolerance else {
            return Err(self.error(format!("buffer `{name}` is not written by the kernel")));
        };
        let want: Vec<T> = self.read(b, b.expected.as_deref(), "expected")?;
        if got.len() != want.len() {
            return Err(self.error(format!(
                "`{name}` has {} elements, the reference {}",
                got.len(),
                want.len()
            )));
        }
        let allowance = match &b.allowance {
            Some(rel) => Some(
                self.file(rel)?
                    .chunks_exact(8)
                    .map(|c| {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(c);
                        f64::from_le_bytes(a)
                    })
                    .collect::<Vec<_>>(),
            ),
            None => None,
        };
        let verdict = compare(got, &want, &tolerance, allowance.as_deref());
        self.explain(name, verdict, got, &want, &tolerance)
    }

    fn explain<T: Element>(
        &self,
        name: &str,
        verdict: Verdict,
        got: &[T],
        want: &[T],
        tolerance: &Tolerance,
    ) -> Result<(), Error> {
        let r = match verdict {
            Verdict::Close(_) => return Ok(()),
            Verdict::Unwritten {
                count,
                first,
                total,
            } => {
                return Err(self.error(format!(
                "`{name}`: {count} of {total} elements were never written (the first at {first})"
            )))
            }
            Verdict::NonFinite { count, first } => {
                return Err(self.error(format!(
                    "`{name}`: {count} elements are NaN or infinite (the first at {first})"
                )))
            }
            Verdict::Mismatch(r) => r,
        };
        let at = r.first_mismatch.map_or_else(
            || "every element within atol + rtol·|ref|".to_owned(),
            |i| {
                format!(
                    "element {i} is {}, the reference {} (atol {}, rtol {})",
                    got[i].to_f64(),
                    want[i].to_f64(),
                    tolerance.atol,
                    tolerance.rtol
                )
            },
        );
        Err(self.error(format!(
            "`{name}` does not match the reference: {at}; {:.4} of the elements within {} \
             relative (needs more than {}), cosine {:.6} (needs {}), largest error {:e}",
            r.fraction_within,
            tolerance.relative_threshold,
            tolerance.min_fraction_within,
            r.cosine,
            tolerance.min_cosine,
            r.max_abs_error
        )))
    }
}

/// Whether the tests may skip for lack of an OpenCL device: the device, or `None` after
/// printing `SKIPPED: …` when there is no OpenCL runtime or device and `KF_REQUIRE_OPENCL` is
/// not `1`.
///
/// # Panics
///
/// When the runtime is installed but fails (any error but [`Error::Unavailable`]), and when
/// none is found under `KF_REQUIRE_OPENCL=1`: a test calling this is meant to fail then.
#[track_caller]
pub fn device_or_skip() -> Option<crate::kf_runtime::Device> {
    match crate::kf_runtime::Device::open() {
        Ok(device) => Some(device),
        Err(e @ Error::Unavailable { .. }) => {
            let required = std::env::var("KF_REQUIRE_OPENCL").is_ok_and(|v| v.trim() == "1");
            assert!(!required, "KF_REQUIRE_OPENCL=1 but {e}");
            println!("SKIPPED: {e}");
            None
        }
        Err(e) => panic!("the OpenCL runtime is installed but failed: {e}"),
    }
}
