//! The matrix-product family's templates beyond the GEMM templates: the matrix-vector product
//! (`templates/family/matvec.cl`) and the SGEMM over a strided A with a row-major B
//! (`templates/family/gemm_strided_a.cl`, for a transposed A). Bound to a task's kernel with a
//! [`crate::TaskBinding`] like the other family templates.
//!
//! # What is fast on the Intel CPU OpenCL runtime (2-core AMD EPYC with AVX-512)
//!
//! `kf eval` of hand-bound variants against the shipped KernelBench tasks, on a machine shared
//! with other builds (load 3–5), median kernel times:
//!
//! | task | variant | µs |
//! |---|---|---|
//! | 4_Matrix_vector_multiplication_ (256 × 8192) | `matvec`, `VW=16 RPI=8` | 50–54 |
//! | 4_Matrix_vector_multiplication_ | `matvec`, `VW=16 RPI=8 SPLIT=4 WG=8 U=2` (the searches' best) | 42–51 |
//! | 4_Matrix_vector_multiplication_ | `matvec`, `VW=16 RPI=4` | 69 |
//! | 4_Matrix_vector_multiplication_ | `matvec`, `VW=16 RPI=1` | 160–300 |
//! | 4_Matrix_vector_multiplication_ | the GEMM templates (the best of a 16-evaluation search) | 153 |
//! | 16_Matmul_with_transposed_A (128 × 256 × 256) | `gemm_strided_a`, `VW=16 TM=8 TN=2` | 40–47 |
//! | 16_Matmul_with_transposed_A | `gemm_strided_a`, `VW=16 TM=4 TN=2` | 101 |
//! | 16_Matmul_with_transposed_A | `gemm_strided` (columns across work-items, the best of a search) | 148 |
//!
//! The matrix-vector times are bimodal on the shared machine (about 50 or about 105 µs for every
//! configuration): the 8 MiB matrix either stays in the L3 cache between launches or not.
//!
//! Both are limited by how many independent vector accumulators a work-item keeps: a row of
//! the matrix-vector product alone is one chain of dependent fused multiply-adds, eight rows
//! walked together are eight chains that share every load of the vector; the 8 × 32 block of
//! the product is sixteen float16 accumulators. Explicit float16 vectors with `vec_type_hint`
//! keep the runtime from packing work-items into SIMD lanes, which for these shapes would
//! turn contiguous loads into gathers.
//!
//! ```
//! use kf_mutate::{StructuralMutator, Structure, TemplateLibrary};
//!
//! let matvec = TemplateLibrary::matvec().unwrap();
//! let variant = matvec
//!     .get("matvec")
//!     .unwrap()
//!     .instantiate(&Structure::new().with("VW", 8))
//!     .unwrap();
//! assert!(variant.source.text.contains("vload8"));
//! let mutator = StructuralMutator::matvec().unwrap();
//! assert!(mutator.strategies().get("split-rows").is_some());
//! let gemm = TemplateLibrary::strided_a_gemm().unwrap();
//! assert!(gemm.get("gemm_strided_a").is_some());
//! ```

use crate::error::MutateError;
use crate::families::float16_template;
use crate::strategy::{
    vector_width_strategies, Change, MutationStrategy, StrategyLibrary, ALGORITHM, COORDINATION,
};
use crate::structural::StructuralMutator;
use crate::template::TemplateLibrary;

/// The matrix-vector product template's source (`templates/family/matvec.cl`).
const MATVEC_CL: &str = include_str!("../templates/family/matvec.cl");
/// Its manifest.
const MATVEC_TOML: &str = include_str!("../templates/family/matvec.toml");
/// The strided-A GEMM template's source (`templates/family/gemm_strided_a.cl`).
const GEMM_STRIDED_A_CL: &str = include_str!("../templates/family/gemm_strided_a.cl");
/// Its manifest.
const GEMM_STRIDED_A_TOML: &str = include_str!("../templates/family/gemm_strided_a.toml");
/// The transposed-B GEMM template's source (`templates/family/gemm_nt.cl`).
const GEMM_NT_CL: &str = include_str!("../templates/family/gemm_nt.cl");
/// Its manifest.
const GEMM_NT_TOML: &str = include_str!("../templates/family/gemm_nt.toml");

impl TemplateLibrary {
    /// `matvec` (OpenCL C), for the task `matvec`: `Y = A · X` with A row-major `M × K`
    /// (kernel parameters `M K A X Y`). Switch `VW` (1, 4, 8, 16); tunables `RPI` (rows per
    /// work-item), `SPLIT` (work-items per row block, reducing through local memory), `WG`
    /// (row blocks per work-group), `U` (accumulators per row). Base: float16, eight rows per
    /// work-item; a start with four work-items per block of eight rows, two accumulators per
    /// row and eight blocks per work-group (the best of two 16-evaluation searches on
    /// KernelBench's 256 × 8192 product).
    pub fn matvec() -> Result<TemplateLibrary, MutateError> {
        let template = float16_template("matvec", MATVEC_CL, MATVEC_TOML, &["VW"])?
            .with_start(
                crate::Structure::new().with("VW", 16),
                [("RPI", 8i64), ("SPLIT", 4), ("WG", 8), ("U", 2)]
                    .into_iter()
                    .collect(),
                "four work-items share each block of eight rows and reduce through local memory: for few long rows, and for GPUs",
            )?;
        Ok(TemplateLibrary::new().with(template))
    }

    /// `gemm_strided_a` (OpenCL C), for the task `gemm_strided_a`: `C = A · B` with A read
    /// through strides and B row-major (a transposed A: `SAM = 1`, `SAK = M`), with the
    /// interface of [`TemplateLibrary::strided_gemm`] (`M N K SAM SAK SBK SBN A B C`, needing
    /// `SBN = 1`), so one binding serves both. Switch `VW` (1, 4, 8, 16); tunables `TM`, `TN`,
    /// `WG0`, `WG1`, `UNROLL`. Base: float16, an 8 × 32 register block per work-item.
    pub fn strided_a_gemm() -> Result<TemplateLibrary, MutateError> {
        let template = float16_template(
            "gemm_strided_a",
            GEMM_STRIDED_A_CL,
            GEMM_STRIDED_A_TOML,
            &["VW"],
        )?;
        Ok(TemplateLibrary::new().with(template))
    }

    /// `gemm_nt` (OpenCL C), for the task `gemm_nt`: `C = A · Bᵀ` with A row-major `M × K` and
    /// B stored `N × K` (a linear layer's weight), both read along K in vectors (kernel
    /// parameters `M N K A B C`). Switch `VW` (1, 4, 8, 16); tunables `TM`, `TN`, `WG0`, `WG1`,
    /// `UNROLL`. Base: float16 partial sums over a 4 × 4 block per work-item. Like every
    /// GEMM template, `HAS_EPILOGUE` with an `EPILOGUE(acc, row, col)` macro from the binding
    /// applies a task's element-wise steps at the store.
    pub fn nt_gemm() -> Result<TemplateLibrary, MutateError> {
        let template = float16_template("gemm_nt", GEMM_NT_CL, GEMM_NT_TOML, &["VW"])?;
        Ok(TemplateLibrary::new().with(template))
    }
}

impl StrategyLibrary {
    /// Strategies for the matrix-vector product template (switch `VW`; tunables `RPI`,
    /// `SPLIT`, `WG`, `U`):
    ///
    /// | strategy | what it does |
    /// |---|---|
    /// | `vector-loads`, `wider-vectors`, `scalar-lanes` | the vector width: `vloadN` along the rows (4, 8 or 16 floats), doubled, or scalar code the runtime vectorises across work-items |
    /// | `more-rows-per-item` | double the rows a work-item walks together |
    /// | `fewer-rows-per-item` | halve them (more parallelism) |
    /// | `split-rows` | several work-items per row block, a local-memory reduction |
    /// | `item-per-row-block` | one work-item per row block, no reduction |
    /// | `two-accumulators` | a second accumulator per row over alternate vectors |
    pub fn matvec() -> Self {
        let s = MutationStrategy::new;
        StrategyLibrary::new()
            .with_all(vector_width_strategies(
                "explicit vector loads (vloadN) along the rows of A and the vector",
                "scalar code: the runtime packs neighbouring work-items (rows) into SIMD lanes",
            ))
            .with(
                s("more-rows-per-item", "walk more rows together: each vector load of X serves them all, and their accumulators are independent chains")
                    .requires("RPI < 16")
                    .change("RPI", Change::Up)
                    .targets(ALGORITHM, 1),
            )
            .with(
                s("fewer-rows-per-item", "walk fewer rows together: more work-items, less register pressure")
                    .requires("RPI > 1")
                    .change("RPI", Change::Down)
                    .weight(0.5),
            )
            .with(
                s("split-rows", "several work-items share a block of rows, each a contiguous slice, and add their sums through local memory")
                    .requires("SPLIT == 1")
                    .change("SPLIT", Change::OneOf(vec![2, 4, 8, 16]))
                    .targets(COORDINATION, 1),
            )
            .with(
                s("item-per-row-block", "one work-item per block of rows: no reduction across work-items, no barrier")
                    .requires("SPLIT > 1")
                    .change("SPLIT", Change::Set(1))
                    .targets(COORDINATION, 0)
                    .weight(0.7),
            )
            .with(
                s("two-accumulators", "a second accumulator per row over alternate vectors: shorter dependency chains")
                    .requires("U == 1")
                    .change("U", Change::Set(2))
                    .weight(0.7),
            )
    }
}

impl StructuralMutator {
    /// The matrix-vector product template with its strategies ([`TemplateLibrary::matvec`],
    /// [`StrategyLibrary::matvec`]); bind the templates to a task before searching.
    pub fn matvec() -> Result<Self, MutateError> {
        Ok(Self::new(
            TemplateLibrary::matvec()?,
            StrategyLibrary::matvec(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Structure, TaskBinding};

    fn matvec_binding() -> TaskBinding {
        TaskBinding::new("kb_mv", "matvec")
            .param("__global const float*", "A")
            .param("__global const float*", "B")
            .param("__global float*", "out")
            .param("const int", "M")
            .param("const int", "K")
            .bind("M", "M")
            .bind("K", "K")
            .bind("A", "A")
            .bind("X", "B")
            .bind("Y", "out")
    }

    fn transposed_a_binding() -> TaskBinding {
        TaskBinding::new("kb_at", "matmul_at")
            .param("__global const float*", "A")
            .param("__global const float*", "B")
            .param("__global float*", "out")
            .param("const int", "M")
            .param("const int", "K")
            .param("const int", "N")
            .bind("M", "M")
            .bind("N", "N")
            .bind("K", "K")
            .bind("SAM", "1")
            .bind("SAK", "(M)")
            .bind("SBK", "(N)")
            .bind("SBN", "1")
            .bind("A", "A")
            .bind("B", "B")
            .bind("C", "out")
    }

    /// Every structure of both templates instantiates, alone and bound; the bound manifests
    /// name the task's sizes and the strided-A template's `SBN == 1` holds.
    #[test]
    fn every_structure_instantiates() {
        for (library, binding) in [
            (TemplateLibrary::matvec().unwrap(), matvec_binding()),
            (
                TemplateLibrary::strided_a_gemm().unwrap(),
                transposed_a_binding(),
            ),
        ] {
            crate::binding::assert_every_structure_binds(&library, &binding);
        }
        let gemm = TemplateLibrary::strided_a_gemm()
            .unwrap()
            .bound_to(&transposed_a_binding())
            .unwrap();
        let variant = gemm
            .get("gemm_strided_a")
            .unwrap()
            .instantiate(&Structure::new().with("VW", 16))
            .unwrap();
        // `SBN == 1` holds at the binding's stride and leaves the bound rules.
        assert!(
            !variant.manifest.text.contains("SBN"),
            "{}",
            variant.manifest.text
        );
        assert!(variant.source.text.contains("vload16"));
    }

    /// A linear layer's product `x · Wᵀ + bias` through the transposed-B template with the
    /// bias and a ReLU as its epilogue: every structure instantiates bound; the bound text
    /// defines `EPILOGUE` over the task's renamed bias, applies it at the store and keeps no
    /// `#if HAS_EPILOGUE` section; bound with the epilogue fixed off, the store is the bare sum.
    #[test]
    fn the_transposed_b_template_fuses_an_epilogue() {
        let binding = || {
            TaskBinding::new("kb_linear", "linear")
                .param("__global const float*", "x")
                .param("__global const float*", "weight")
                .param("__global const float*", "bias")
                .param("__global float*", "out")
                .param("const int", "batch")
                .param("const int", "features")
                .param("const int", "hidden")
                .bind("M", "batch")
                .bind("N", "hidden")
                .bind("K", "features")
                .bind("A", "x")
                .bind("B", "weight")
                .bind("C", "out")
        };
        let library = TemplateLibrary::nt_gemm().unwrap();
        let fused = library
            .bound_to(
                &binding()
                    .define(
                        "EPILOGUE",
                        ["acc", "row", "col"],
                        "fmax(acc + bias[col], 0.0f)",
                    )
                    .fix("HAS_EPILOGUE", 1),
            )
            .unwrap();
        let template = fused.get("gemm_nt").unwrap();
        for structure in template.all_structures() {
            let variant = template.instantiate(&structure).unwrap();
            let text = &variant.source.text;
            assert!(
                text.contains("#define EPILOGUE(acc, row, col) (fmax(acc + kf_bias[col], 0.0f))"),
                "{text}"
            );
            assert!(
                text.contains("EPILOGUE(HSUM(acc[i][j]), row, col)"),
                "{text}"
            );
            assert!(!text.contains("#if HAS_EPILOGUE"), "{text}");
        }
        let bare = library.bound_to(&binding().fix("HAS_EPILOGUE", 0)).unwrap();
        let variant = bare
            .get("gemm_nt")
            .unwrap()
            .instantiate(&Structure::new().with("VW", 16))
            .unwrap();
        assert!(variant.source.text.contains("= HSUM(acc[i][j]);"));
        assert!(!variant.source.text.contains("EPILOGUE(HSUM"));
    }

    /// The strategies apply to the base: more rows, a split, a second accumulator.
    #[test]
    fn matvec_strategies_apply_to_the_base() {
        let mutator = StructuralMutator::matvec().unwrap();
        for name in [
            "more-rows-per-item",
            "split-rows",
            "two-accumulators",
            "scalar-lanes",
        ] {
            assert!(mutator.strategies().get(name).is_some(), "{name}");
        }
        assert!(mutator.strategies().get("vector-loads").is_some());
    }
}
