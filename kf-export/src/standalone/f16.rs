//! `half::f16` as an element of the generated functions' buffers (OpenCL `half`). Written
//! into an exported crate (`src/kf_f16.rs`) only when one of its tasks has f16 buffers, so
//! that only those crates depend on `half`; also a module of `kf-export`, where it is
//! compiled and tested.

use crate::kf_runtime::{Dtype, Element};

/// The f16 type of f16 buffers.
pub use half::f16;

impl Element for f16 {
    const DTYPE: Dtype = Dtype::F16;
    /// The evaluator's f16 poison, a NaN with a payload.
    const POISON: Self = f16::from_bits(0x7E5D);
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_ne_bytes());
    }
    fn take(b: &[u8]) -> Self {
        f16::from_ne_bytes([
            b.first().copied().unwrap_or(0),
            b.get(1).copied().unwrap_or(0),
        ])
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
