//! The vocabulary shared by tasks, task files and output checks: element types, how a kernel
//! uses a buffer, and the poison pattern of outputs. Below `task`, `task::file` and `verify`
//! (each re-exports what it always has), so that none of them depends on another for these.

use serde::{Deserialize, Serialize};

/// Element type of a buffer or a scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// IEEE binary32 (`float`).
    F32,
    /// IEEE binary16 (`half`), compared in f32 after rounding the reference to f16.
    F16,
    /// Two's-complement 32-bit integer (`int`), compared exactly.
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

    /// The name used in task files (`f32`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::I32 => "i32",
        }
    }

    /// The NumPy dtype string of the `.npy` files exchanged with Python references.
    pub fn numpy(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::F16 => "float16",
            Dtype::I32 => "int32",
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a kernel uses a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Read only: must be unchanged after the launch.
    Input,
    /// Written only: poisoned before every launch and compared with the reference.
    Output,
    /// Read and written in place (rotary embedding): filled before every launch, compared
    /// with the reference after.
    InOut,
}

/// The bit pattern written into every output element before a launch: a quiet NaN with a
/// payload no arithmetic produces, so an element still holding it was never written.
pub const POISON_BITS: u32 = 0x7FC0_DEAD;
