//! CUDA renderings of the templates for NVIDIA GPUs: `gemm_blocked` with shared-memory tiles,
//! register blocking, `float4` loads and warp-shuffle broadcasts (`templates/cuda/`). They
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

impl TemplateLibrary {
    /// The CUDA templates: `gemm_blocked` (switches `VW` 1 or 4, `LOCAL_B`, `LOCAL_A`,
    /// `SUBGROUP`) for the `gemm` task; base: scalar, global memory, one output per thread.
    ///
    /// ```
    /// use kf_mutate::{Structure, TemplateLibrary};
    ///
    /// let cuda = TemplateLibrary::cuda().unwrap();
    /// let v = cuda.get("gemm_blocked").unwrap()
    ///     .instantiate(&Structure::new().with("SUBGROUP", 1)).unwrap();
    /// assert!(v.source.text.contains("__shfl_sync"));
    /// assert!(!v.source.text.contains("__shared__"));
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
        Ok(TemplateLibrary::new().with(blocked))
    }
}
