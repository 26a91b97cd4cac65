//! The `.npy` format (version 1.0), for the three dtypes of task files. Written by hand: it is
//! a short header plus raw little-endian data, and the crates that read it either lack f16
//! (ndarray-npy) or bring a much larger API than these two functions need.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::schema::Dtype;
use crate::task::host::HostBuffer;

const MAGIC: &[u8] = b"\x93NUMPY";

fn descr(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::F32 => "<f4",
        Dtype::F16 => "<f2",
        Dtype::I32 => "<i4",
    }
}

fn little_endian(data: &HostBuffer) -> Vec<u8> {
    match data {
        HostBuffer::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostBuffer::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostBuffer::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// Writes `data` with `shape` as a C-order `.npy` file.
pub(crate) fn write(path: &Path, data: &HostBuffer, shape: &[usize]) -> std::io::Result<()> {
    let dims = match shape {
        [one] => format!("({one},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {dims}, }}",
        descr(data.dtype())
    );
    // Magic (6) + version (2) + length (2) + header + newline, padded to 64 bytes.
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(MAGIC)?;
    f.write_all(&[1, 0])?;
    f.write_all(
        &u16::try_from(header.len())
            .unwrap_or(u16::MAX)
            .to_le_bytes(),
    )?;
    f.write_all(header.as_bytes())?;
    f.write_all(&little_endian(data))?;
    f.flush()
}

/// Why a `.npy` file could not be read as a task buffer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NpyError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not a .npy file")]
    NotNpy,
    #[error("unsupported .npy version {0}")]
    Version(u8),
    #[error("truncated .npy header")]
    TruncatedHeader,
    #[error("no descr in the .npy header")]
    NoDescr,
    #[error(
        "dtype {descr} (numpy {}) is not float32, float16 or int32",
        numpy_name(descr)
    )]
    Dtype { descr: String },
    #[error("a Fortran-order array")]
    FortranOrder,
    #[error("no shape in the .npy header")]
    NoShape,
    #[error("bad shape `{0}`")]
    BadShape(String),
    #[error("{bytes} data bytes for shape {shape:?} of {dtype}")]
    DataLength {
        bytes: usize,
        shape: Vec<usize>,
        dtype: Dtype,
    },
}

/// Reads a `.npy` file, returning its dtype, shape and data; anything other than a C-order
/// array of `<f4`, `<f2` or `<i4` is an error that says what was found.
pub(crate) fn read(path: &Path) -> Result<(HostBuffer, Vec<usize>), NpyError> {
    let bytes = std::fs::read(path).map_err(|source| NpyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(NpyError::NotNpy);
    }
    let (len, start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(NpyError::Version(v)),
    };
    let header = bytes
        .get(start..start + len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or(NpyError::TruncatedHeader)?;
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}'"))? + key.len() + 2;
        let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
        Some(rest)
    };
    let descr_text = field("descr")
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.split('\'').next())
        .ok_or(NpyError::NoDescr)?;
    let dtype = match descr_text {
        "<f4" => Dtype::F32,
        "<f2" => Dtype::F16,
        "<i4" => Dtype::I32,
        other => {
            return Err(NpyError::Dtype {
                descr: other.to_owned(),
            })
        }
    };
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(NpyError::FortranOrder);
    }
    let shape_text = field("shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or(NpyError::NoShape)?;
    let shape = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| NpyError::BadShape(shape_text.to_owned()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let n: usize = shape.iter().product();
    let data = &bytes[start + len..];
    if data.len() != n * dtype.size() {
        return Err(NpyError::DataLength {
            bytes: data.len(),
            shape,
            dtype,
        });
    }
    // Little-endian data to host order.
    let host = match dtype {
        Dtype::F32 => HostBuffer::F32(
            data.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        Dtype::F16 => HostBuffer::F16(
            data.chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]))
                .collect(),
        ),
        Dtype::I32 => HostBuffer::I32(
            data.chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
    };
    Ok((host, shape))
}

fn numpy_name(descr: &str) -> &'static str {
    match descr.trim_start_matches(['<', '>', '|', '=']) {
        "f8" => "float64",
        "i8" => "int64",
        "b1" => "bool",
        "u1" => "uint8",
        "i2" => "int16",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_every_dtype() {
        let dir = tempfile::tempdir().unwrap();
        for (data, shape) in [
            (
                HostBuffer::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
                vec![2, 3],
            ),
            (HostBuffer::F16(vec![half::f16::from_f32(0.5); 4]), vec![4]),
            (HostBuffer::I32(vec![-1, 2]), vec![1, 2]),
        ] {
            let p = dir.path().join("a.npy");
            write(&p, &data, &shape).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            // The data starts on a 64-byte boundary, as numpy writes it.
            assert_eq!((bytes.len() - data.len() * data.dtype().size()) % 64, 0);
            assert_eq!(read(&p).unwrap(), (data, shape));
        }
    }
}
