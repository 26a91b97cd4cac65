//! CUDA renderings of the templates for NVIDIA GPUs (`templates/cuda/`): `gemm_blocked` with
//! shared-memory tiles, register blocking, `float4` loads and warp-shuffle broadcasts, and
//! `softmax_group` with `float4` loads, the four row algorithms of the OpenCL template and row
//! reductions in shared memory, by warp shuffles, or both. They keep the OpenCL C template's
//! switch names for the parts they render, with GPU-sized tunables, so the shared strategies
//! (dense linear algebra, softmax) move them:
//! [`StructuralMutator::builtin_for`](crate::StructuralMutator::builtin_for) and
//! [`StructuralMutator::softmax_for`](crate::StructuralMutator::softmax_for) with
//! [`Language::Cuda`](kf_core::Language::Cuda) give the structural mutators a CUDA search
//! uses. Every structure and every strategy's child compiles through NVRTC in
//! `tests/cuda_templates.rs` (no GPU needed), which reports their registers, shared memory and
//! spills, and runs and verifies them where a GPU is present (`scripts/gpu-check.sh`).

use crate::error::MutateError;
use crate::strategy::{Change, MutationStrategy, StrategyLibrary, COORDINATION, MEMORY};
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
        Ok(TemplateLibrary::new()
            .with(cuda_gemm_blocked()?)
            .with(cuda_softmax_group()?))
    }

    /// The CUDA GEMM template alone (what [`TemplateLibrary::builtin_for`] gives for
    /// [`Language::Cuda`](kf_core::Language::Cuda)).
    pub fn cuda_gemm() -> Result<Self, MutateError> {
        Ok(TemplateLibrary::new().with(cuda_gemm_blocked()?))
    }

    /// The CUDA softmax template alone (what [`TemplateLibrary::softmax_for`] gives for
    /// [`Language::Cuda`](kf_core::Language::Cuda)).
    pub fn cuda_softmax() -> Result<Self, MutateError> {
        Ok(TemplateLibrary::new().with(cuda_softmax_group()?))
    }
}

/// `gemm_blocked` in CUDA; base: scalar, global memory, one output per thread.
fn cuda_gemm_blocked() -> Result<Template, MutateError> {
    Template::new(
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
    )
}

/// `softmax_group` in CUDA; base: scalar, three sweeps, a shared-memory tree over a warp-wide
/// row.
fn cuda_softmax_group() -> Result<Template, MutateError> {
    Template::new(
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
    )
}

impl StrategyLibrary {
    /// [`StrategyLibrary::dense_linear_algebra`] for GPU renderings: the two strategies that
    /// shape work-groups for a CPU's vectoriser are replaced.
    ///
    /// | strategy | CPU form | GPU form |
    /// |---|---|---|
    /// | `vector-loads` | `VW` 4–16, one work-item wide in dimension 0 | `VW` 4 (`float4`), the work-group keeps its width, so neighbouring threads still read neighbouring vectors (coalesced) |
    /// | `sub-group-broadcast` | 16-lane sub-groups | 32-lane warps (`WG0` 32), the width the warp shuffles need |
    ///
    /// ```
    /// use kf_mutate::{StrategyLibrary, StructuralMutator, Structure};
    /// use kf_core::Language;
    ///
    /// let gpu = StrategyLibrary::gpu_dense_linear_algebra();
    /// let cuda = StructuralMutator::builtin_for(Language::Cuda).unwrap();
    /// assert_eq!(cuda.strategies().get("vector-loads"), gpu.get("vector-loads"));
    /// ```
    pub fn gpu_dense_linear_algebra() -> Self {
        let s = MutationStrategy::new;
        StrategyLibrary::dense_linear_algebra()
            .with(
                s("vector-loads", "float4 loads of B and stores of C; the work-group keeps its width, so neighbouring threads read neighbouring vectors (coalesced)")
                    .requires("VW == 1 && !SUBGROUP")
                    .change("VW", Change::Set(4))
                    .targets(MEMORY, 1)
                    .weight(1.5),
            )
            .with(
                s("sub-group-broadcast", "each lane of a 32-lane warp loads one A value; warp shuffles share it")
                    .requires("!SUBGROUP && !LOCAL_A")
                    .change("SUBGROUP", Change::Set(1))
                    .change("VW", Change::Set(1))
                    .change("WG0", Change::Set(32))
                    .targets(COORDINATION, 2),
            )
    }
}
