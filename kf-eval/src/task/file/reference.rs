//! References of task files other than kernels: Rust closures over `ndarray` arrays (the
//! built-in tasks use these) and the checks every reference's outputs pass before they are
//! trusted, plus the on-disk cache of Python references' outputs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use half::f16;
use indexmap::IndexMap;
use ndarray::{ArrayD, ArrayViewD, IxDyn};

use super::error::ReferenceError;
use super::schema::Dtype;
use crate::task::host::HostBuffer;
use crate::task::spec::Sizes;

/// A read-only input array of any task dtype.
#[derive(Debug, Clone)]
pub enum ArrayRef<'a> {
    /// f32 data.
    F32(ArrayViewD<'a, f32>),
    /// f16 data.
    F16(ArrayViewD<'a, f16>),
    /// i32 data.
    I32(ArrayViewD<'a, i32>),
}

impl<'a> ArrayRef<'a> {
    /// The f32 view, if the buffer is f32.
    pub fn f32(&self) -> Option<&ArrayViewD<'a, f32>> {
        match self {
            ArrayRef::F32(a) => Some(a),
            _ => None,
        }
    }

    /// Every element converted to f64, in the same shape.
    pub fn to_f64(&self) -> ArrayD<f64> {
        match self {
            ArrayRef::F32(a) => a.mapv(f64::from),
            ArrayRef::F16(a) => a.mapv(f16::to_f64),
            ArrayRef::I32(a) => a.mapv(f64::from),
        }
    }
}

/// An output array of any task dtype.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrayOut {
    /// f32 data.
    F32(ArrayD<f32>),
    /// f16 data.
    F16(ArrayD<f16>),
    /// i32 data.
    I32(ArrayD<i32>),
}

impl ArrayOut {
    /// An f64 array rounded to `dtype` (f16 and f32 round to nearest, i32 rounds and
    /// saturates): compute a reference in f64, return it in the buffer's type.
    pub fn from_f64(dtype: Dtype, a: &ArrayD<f64>) -> ArrayOut {
        match dtype {
            Dtype::F32 => ArrayOut::F32(a.mapv(|v| v as f32)),
            Dtype::F16 => ArrayOut::F16(a.mapv(f16::from_f64)),
            Dtype::I32 => ArrayOut::I32(a.mapv(|v| v.round() as i32)),
        }
    }

    fn into_host(self) -> (HostBuffer, Vec<usize>) {
        fn flat<T: Clone>(a: ArrayD<T>) -> (Vec<T>, Vec<usize>) {
            let shape = a.shape().to_vec();
            let v = if a.is_standard_layout() {
                a.into_raw_vec_and_offset().0
            } else {
                a.iter().cloned().collect()
            };
            (v, shape)
        }
        match self {
            ArrayOut::F32(a) => {
                let (v, s) = flat(a);
                (HostBuffer::F32(v), s)
            }
            ArrayOut::F16(a) => {
                let (v, s) = flat(a);
                (HostBuffer::F16(v), s)
            }
            ArrayOut::I32(a) => {
                let (v, s) = flat(a);
                (HostBuffer::I32(v), s)
            }
        }
    }
}

/// What a Rust reference receives: the input and in-place buffers by name as arrays of their
/// declared shapes, the sizes and the scalars.
#[derive(Debug)]
pub struct ReferenceInputs<'a> {
    /// Input and inout buffers by name.
    pub arrays: IndexMap<String, ArrayRef<'a>>,
    /// Problem sizes.
    pub sizes: &'a Sizes,
    /// Scalars by name.
    pub scalars: IndexMap<String, f64>,
}

impl<'a> ReferenceInputs<'a> {
    /// The array named `name`, or an error naming it.
    pub fn array(&self, name: &str) -> Result<&ArrayRef<'a>, ReferenceError> {
        self.arrays
            .get(name)
            .ok_or_else(|| ReferenceError::NoInput {
                name: name.to_owned(),
            })
    }

    /// A size, or an error naming it.
    pub fn size(&self, name: &str) -> Result<usize, ReferenceError> {
        self.sizes
            .get(name)
            .and_then(|v| usize::try_from(*v).ok())
            .ok_or_else(|| ReferenceError::NoSize {
                name: name.to_owned(),
            })
    }
}

/// A reference in Rust: outputs (and inout buffers) by name, or why not (its own reasons as
/// [`ReferenceError::Failed`]: `Err("message".into())` makes one).
pub type RustReference = Arc<
    dyn Fn(&ReferenceInputs<'_>) -> Result<IndexMap<String, ArrayOut>, ReferenceError>
        + Send
        + Sync,
>;

/// Rust references by the names task files give in `[reference] rust = "name"`.
#[derive(Clone, Default)]
pub struct ReferenceRegistry {
    closures: IndexMap<String, RustReference>,
}

impl std::fmt::Debug for ReferenceRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.closures.keys()).finish()
    }
}

impl ReferenceRegistry {
    /// No references.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a reference.
    ///
    /// ```
    /// use indexmap::IndexMap;
    /// use kf_eval::task::file::{ArrayOut, ReferenceError, ReferenceRegistry};
    ///
    /// let registry = ReferenceRegistry::new().with("negate", |inputs| {
    ///     let x = inputs.array("X")?.to_f64();
    ///     if x.is_empty() {
    ///         return Err(ReferenceError::from("X is empty"));
    ///     }
    ///     let mut out = IndexMap::new();
    ///     out.insert("Y".to_owned(), ArrayOut::F32(x.mapv(|v| -v as f32)));
    ///     Ok(out)
    /// });
    /// assert_eq!(registry.names(), ["negate"]);
    /// ```
    pub fn with(
        mut self,
        name: impl Into<String>,
        reference: impl Fn(&ReferenceInputs<'_>) -> Result<IndexMap<String, ArrayOut>, ReferenceError>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.closures.insert(name.into(), Arc::new(reference));
        self
    }

    /// The reference named `name`.
    pub fn get(&self, name: &str) -> Option<&RustReference> {
        self.closures.get(name)
    }

    /// The registered names.
    pub fn names(&self) -> Vec<&str> {
        self.closures.keys().map(String::as_str).collect()
    }
}

/// Views host data as an array of `shape`.
pub(crate) fn view<'a>(data: &'a HostBuffer, shape: &[usize]) -> Option<ArrayRef<'a>> {
    let dim = IxDyn(shape);
    Some(match data {
        HostBuffer::F32(v) => ArrayRef::F32(ArrayViewD::from_shape(dim, v).ok()?),
        HostBuffer::F16(v) => ArrayRef::F16(ArrayViewD::from_shape(dim, v).ok()?),
        HostBuffer::I32(v) => ArrayRef::I32(ArrayViewD::from_shape(dim, v).ok()?),
    })
}

/// Turns Rust outputs into host data with shapes.
pub(crate) fn from_arrays(
    outputs: IndexMap<String, ArrayOut>,
) -> IndexMap<String, (HostBuffer, Vec<usize>)> {
    outputs
        .into_iter()
        .map(|(k, a)| (k, a.into_host()))
        .collect()
}

/// Checks one returned output against its declaration: present, same dtype, same shape,
/// every element finite.
pub(crate) fn check_output(
    name: &str,
    dtype: Dtype,
    shape: &[usize],
    got: Option<&(HostBuffer, Vec<usize>)>,
) -> Result<(), ReferenceError> {
    let Some((data, got_shape)) = got else {
        return Err(ReferenceError::MissingOutput {
            name: name.to_owned(),
            dtype,
            shape: shape.to_vec(),
        });
    };
    if data.dtype() != dtype {
        return Err(ReferenceError::WrongDtype {
            name: name.to_owned(),
            got: data.dtype(),
            declared: dtype,
        });
    }
    if got_shape.as_slice() != shape {
        return Err(ReferenceError::WrongShape {
            name: name.to_owned(),
            got: got_shape.clone(),
            declared: shape.to_vec(),
        });
    }
    if let Some(index) = data.to_f64().iter().position(|v| !v.is_finite()) {
        return Err(ReferenceError::NonFinite {
            name: name.to_owned(),
            index,
        });
    }
    Ok(())
}

/// The folder of cached reference outputs: `<.runtime>/cache/references` in a checkout set up
/// by `scripts/setup.sh`, else `$XDG_CACHE_HOME/kernelfoundry/references` (or
/// `~/.cache/kernelfoundry/references`).
pub fn reference_cache_dir() -> Option<PathBuf> {
    if let Some(r) = super::python::runtime_dir() {
        return Some(r.join("cache").join("references"));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kernelfoundry").join("references"))
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CacheHeader {
    buffers: Vec<(String, Dtype, Vec<usize>)>,
    payload_blake3: String,
}

/// Reads cached outputs; `None` when absent, truncated or altered (the payload hash is
/// checked), so the caller recomputes.
pub(crate) fn cache_read(
    dir: &Path,
    key: &str,
) -> Option<IndexMap<String, (HostBuffer, Vec<usize>)>> {
    let bytes = std::fs::read(dir.join(format!("{key}.bin"))).ok()?;
    let newline = bytes.iter().position(|b| *b == b'\n')?;
    let header: CacheHeader = serde_json::from_slice(&bytes[..newline]).ok()?;
    let payload = &bytes[newline + 1..];
    if blake3::hash(payload).to_hex().as_str() != header.payload_blake3 {
        return None;
    }
    let mut out = IndexMap::new();
    let mut at = 0usize;
    for (name, dtype, shape) in header.buffers {
        let len = shape.iter().product::<usize>() * dtype.size();
        let chunk = payload.get(at..at + len)?;
        at += len;
        out.insert(name, (HostBuffer::from_bytes(dtype, chunk), shape));
    }
    (at == payload.len()).then_some(out)
}

/// Writes outputs to the cache atomically (a temporary file renamed into place); failures
/// only cost a recomputation later, so they are logged, not returned.
pub(crate) fn cache_write(
    dir: &Path,
    key: &str,
    outputs: &IndexMap<String, (HostBuffer, Vec<usize>)>,
) {
    let mut payload = Vec::new();
    let mut buffers = Vec::new();
    for (name, (data, shape)) in outputs {
        payload.extend_from_slice(&data.to_bytes());
        buffers.push((name.clone(), data.dtype(), shape.clone()));
    }
    let header = CacheHeader {
        buffers,
        payload_blake3: blake3::hash(&payload).to_hex().to_string(),
    };
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        use std::io::Write;
        let json = serde_json::to_vec(&header).map_err(std::io::Error::other)?;
        tmp.write_all(&json)?;
        tmp.write_all(b"\n")?;
        tmp.write_all(&payload)?;
        tmp.as_file().sync_all()?;
        tmp.persist(dir.join(format!("{key}.bin")))
            .map_err(|e| e.error)?;
        Ok(())
    };
    if let Err(e) = write() {
        tracing::warn!(
            "could not cache reference outputs in {}: {e}",
            dir.display()
        );
    }
}
