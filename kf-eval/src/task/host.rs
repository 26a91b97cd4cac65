//! Typed host data: what the evaluator writes into device buffers and compares with the
//! reference. Each dtype has its own poison (an element still holding it was never written).

use half::f16;

use crate::element::{Dtype, POISON_BITS};

/// The f16 poison: a quiet NaN with a payload no arithmetic produces.
pub const POISON_F16_BITS: u16 = 0x7E5D;

/// The i32 poison: a sentinel pattern (the f32 poison's bits). An element holding it counts
/// as unwritten unless the reference holds the same value there.
pub const POISON_I32: i32 = POISON_BITS as i32;

/// One buffer's host data.
#[derive(Debug, Clone, PartialEq)]
pub enum HostBuffer {
    /// `float`.
    F32(Vec<f32>),
    /// `half`.
    F16(Vec<f16>),
    /// `int`.
    I32(Vec<i32>),
}

impl HostBuffer {
    /// An empty buffer of `dtype`.
    pub fn empty(dtype: Dtype) -> Self {
        match dtype {
            Dtype::F32 => HostBuffer::F32(Vec::new()),
            Dtype::F16 => HostBuffer::F16(Vec::new()),
            Dtype::I32 => HostBuffer::I32(Vec::new()),
        }
    }

    /// `n` elements of the dtype's poison.
    pub fn poison(dtype: Dtype, n: usize) -> Self {
        match dtype {
            Dtype::F32 => HostBuffer::F32(vec![f32::from_bits(POISON_BITS); n]),
            Dtype::F16 => HostBuffer::F16(vec![f16::from_bits(POISON_F16_BITS); n]),
            Dtype::I32 => HostBuffer::I32(vec![POISON_I32; n]),
        }
    }

    /// Values converted from f64: floats rounded to the dtype (f16 round-to-nearest-even),
    /// integers rounded and saturated.
    pub fn from_f64(dtype: Dtype, values: &[f64]) -> Self {
        match dtype {
            Dtype::F32 => HostBuffer::F32(values.iter().map(|v| *v as f32).collect()),
            Dtype::F16 => HostBuffer::F16(values.iter().map(|v| f16::from_f64(*v)).collect()),
            Dtype::I32 => HostBuffer::I32(values.iter().map(|v| v.round() as i32).collect()),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        match self {
            HostBuffer::F32(_) => Dtype::F32,
            HostBuffer::F16(_) => Dtype::F16,
            HostBuffer::I32(_) => Dtype::I32,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostBuffer::F32(v) => v.len(),
            HostBuffer::F16(v) => v.len(),
            HostBuffer::I32(v) => v.len(),
        }
    }

    /// Whether there are no elements (pure inputs in a reference are returned empty).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Native-endian bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            HostBuffer::F32(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            HostBuffer::F16(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            HostBuffer::I32(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
        }
    }

    /// Native-endian bytes as `dtype` (a trailing partial element is ignored).
    pub fn from_bytes(dtype: Dtype, b: &[u8]) -> Self {
        match dtype {
            Dtype::F32 => HostBuffer::F32(
                b.chunks_exact(4)
                    .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            Dtype::F16 => HostBuffer::F16(
                b.chunks_exact(2)
                    .map(|c| f16::from_ne_bytes([c[0], c[1]]))
                    .collect(),
            ),
            Dtype::I32 => HostBuffer::I32(
                b.chunks_exact(4)
                    .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
        }
    }

    /// Every element as f64 (exact for all three dtypes).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            HostBuffer::F32(v) => v.iter().map(|x| f64::from(*x)).collect(),
            HostBuffer::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            HostBuffer::I32(v) => v.iter().map(|x| f64::from(*x)).collect(),
        }
    }

    /// Which elements hold the dtype's poison (for i32: the sentinel where the reference,
    /// when given, holds something else).
    pub fn poisoned(&self, reference: Option<&HostBuffer>) -> Vec<bool> {
        match self {
            HostBuffer::F32(v) => v.iter().map(|x| x.to_bits() == POISON_BITS).collect(),
            HostBuffer::F16(v) => v.iter().map(|x| x.to_bits() == POISON_F16_BITS).collect(),
            HostBuffer::I32(v) => {
                let r = match reference {
                    Some(HostBuffer::I32(r)) => Some(r),
                    _ => None,
                };
                v.iter()
                    .enumerate()
                    .map(|(i, x)| *x == POISON_I32 && r.and_then(|r| r.get(i)) != Some(&POISON_I32))
                    .collect()
            }
        }
    }

    /// The f32 data, if this is an f32 buffer.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            HostBuffer::F32(v) => Some(v),
            _ => None,
        }
    }
}

impl From<Vec<f32>> for HostBuffer {
    fn from(v: Vec<f32>) -> Self {
        HostBuffer::F32(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_for_every_dtype() {
        for b in [
            HostBuffer::F32(vec![1.5, -2.0]),
            HostBuffer::F16(vec![f16::from_f32(0.5), f16::from_f32(-3.25)]),
            HostBuffer::I32(vec![7, -9, i32::MAX]),
        ] {
            assert_eq!(HostBuffer::from_bytes(b.dtype(), &b.to_bytes()), b);
        }
    }

    #[test]
    fn poison_is_recognised_per_dtype() {
        for d in [Dtype::F32, Dtype::F16, Dtype::I32] {
            let p = HostBuffer::poison(d, 3);
            assert_eq!(p.to_bytes().len(), 3 * d.size());
            assert_eq!(p.poisoned(None), vec![true; 3]);
        }
        // An i32 sentinel that the reference also holds was written.
        let r = HostBuffer::I32(vec![POISON_I32, 1]);
        let o = HostBuffer::I32(vec![POISON_I32, POISON_I32]);
        assert_eq!(o.poisoned(Some(&r)), vec![false, true]);
        // f16 rounding is to nearest.
        let h = HostBuffer::from_f64(Dtype::F16, &[1.0 + 1e-4]);
        assert_eq!(h.to_f64(), vec![1.0]);
    }
}
