//! CUDA renderings of the templates for NVIDIA GPUs (`templates/cuda/`): `gemm_blocked` with
//! shared-memory tiles, register blocking, `float4` loads and warp-shuffle broadcasts, and
//! `softmax_group` with `float4` loads, the four row algorithms of the OpenCL template and row
//! reductions in shared memory, by warp shuffles, or both. They
//! keep the OpenCL C template's switch names for the parts they render (so the dense linear
//! algebra strategies move them), with GPU-sized tunables. They are compiled and their
//! resources reported by NVRTC in `tests/cuda_templates.rs` (no GPU needed) and run and
//! verified there where a GPU is present (`scripts/gpu-check.sh`); the shipped search does not
//! use them yet, since no GPU here has verified them inside a search.

use crate::error::MutateError;
use crate::template::{Structure, Template, TemplateLibrary};

/// The CUDA register-blocked SGEMM template's source (`templates/cuda/gemm_blocked.cu`).
pub const CUDA_GEMM_BLOCKED_CU: &str = include_str!("../templates/cuda/gemm_blocked.cu");
/// The CUDA register-blocked SGEMM template's manifest (`templates/cuda/gemm_blocked.toml`).
pub const CUDA_GEMM_BLOCKED_TOML: &str = include_str!("../templates/cuda/gemm_blocked.toml");
/// The CUDA row-wise softmax template's source (`templates/cuda/softmax_group.cu`).
pub const CUDA_SOFTMAX_GROUP_CU: &str = include_str!("../templates/cuda/softmax_group.cu");
/// The CUDA row-wise softmax template's manifest (`templates/cuda/softmax_group.toml`).
pub const CUDA_SOFTMAX_GROUP_TOML: &str = include_str!("../templates/cuda/softmax_group.toml");

impl TemplateLibrary {
    /// The CUDA templates: `gemm_blocked` (switches `VW` 1 or 4, `LOCAL_B`, `LOCAL_A`,
    /// `SUBGROUP`) for the `gemm` task, base: scalar, global memory, one output per thread; and
    /// `softmax_group` (switches `VW` 1 or 4, `ALGO` 0–3, `REDUCE` 0–2) for the `softmax` task,
    /// base: scalar, three sweeps, a shared-memory tree over a warp-wide row.
    ///
    /// ```
    /// use kf_mutate::{Structure, TemplateLibrary};
    ///
    /// let cuda = TemplateLibrary::cuda().unwrap();
    /// let v = cuda.get("gemm_blocked").unwrap()
    ///     .instantiate(&Structure::new().with("SUBGROUP", 1)).unwrap();
    /// assert!(v.source.text.contains("__shfl_sync"));
    /// assert!(!v.source.text.contains("__shared__"));
    /// let softmax = cuda.get("softmax_group").unwrap()
    ///     .instantiate(&Structure::new().with("REDUCE", 1)).unwrap();
    /// assert!(softmax.source.text.contains("__shfl_xor_sync"));
    /// ```
    pub fn cuda() -> Result<Self, MutateError> {
        let blocked = Template::new(
            "gemm_blocked",
            "gemm",
            CUDA_GEMM_BLOCKED_CU,
            CUDA_GEMM_BLOCKED_TOML,
            ["VW", "LOCAL_B", "LOCAL_A", "SUBGROUP"],
        )?
        .with_base(
            Structure::new(),
            [
                ("TM", 1i64),
                ("TN", 1),
                ("WG0", 32),
                ("WG1", 1),
                ("TK", 32),
                ("PAD", 0),
            ]
            .into_iter()
            .collect(),
        )?;
        let softmax = Template::new(
            "softmax_group",
            "softmax",
            CUDA_SOFTMAX_GROUP_CU,
            CUDA_SOFTMAX_GROUP_TOML,
            ["VW", "ALGO", "REDUCE"],
        )?
        .with_base(
            Structure::new(),
            [("WG", 32i64), ("RPG", 1), ("CHUNKS", 1)]
                .into_iter()
                .collect(),
        )?;
        Ok(TemplateLibrary::new().with(blocked).with(softmax))
    }
}
