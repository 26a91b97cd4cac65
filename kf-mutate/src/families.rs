//! Templates and strategies of the operator families a task file declares (`[family]`) beyond
//! the matrix product and the softmax: the element-wise map (`templates/family/map.cl`), the
//! row normalisation (`templates/family/row_norm.cl`: layer, RMS, L1 and L2 norm; and
//! `row_norm_strided.cl` for rows along a dimension that is not the last), the strided row
//! reduction (`row_reduce_strided.cl`: sum, mean, max, min, argmax, argmin over such rows) and
//! the direct 1-D convolution (`templates/family/conv1d.cl`). Each is written against a small
//! kernel interface of its own and bound to a task's kernel with a
//! [`crate::TaskBinding`]: the map's per-element expression is a macro the binding defines
//! ([`crate::TaskBinding::define`]), the normalisation's operation and affine terms are macros
//! the binding fixes ([`crate::TaskBinding::fix`]).
//!
//! # What is fast on the Intel CPU OpenCL runtime (2-core AMD EPYC)
//!
//! `kf eval` of hand-bound variants against the shipped KernelBench tasks' naive kernels, on a
//! machine shared with other builds (load 3–5), median kernel times:
//!
//! | task | variant | ms | × naive (same run) |
//! |---|---|---|---|
//! | 26_GELU_ (64 × 4096) | `map`, `VW=16 CHUNK=16 WG=1` | 0.112 | 1.0–2.0 |
//! | 26_GELU_ | `map`, as above with `NATIVE=1` (erf through `native_exp`) | 0.064 | 3.6 |
//! | 26_GELU_ | `map`, `VW=1 WG=16 CHUNK=1` (the naive kernel's shape) | 0.234 | 0.5 |
//! | 19_ReLU (64 × 8192) | `map`, `VW=16 CHUNK=16 WG=1` | 0.049 | 4.7 |
//! | 40_LayerNorm (4 × 36864) | `row_norm`, `VW=16 WG=1` (before `RPG`, one accumulator) | 0.028 | 1.7 |
//! | 40_LayerNorm | `row_norm`, `VW=16 WG=16` (local-memory tree) | 0.052 | 0.9 |
//! | 40_LayerNorm | `row_norm`, `VW=16 WG=1 RPG=1` (two accumulators per row)¹ | 0.016 | 2.0–2.2 |
//! | 40_LayerNorm | `row_norm`, `VW=16 WG=1 RPG=2`¹ | 0.012–0.013 | 2.3–2.7 |
//! | 76_conv1d (dilated, strided) | `conv1d`, `INTERLEAVE=1 TT=1 OCT=16 WG=16` | 0.097 | 15 |
//! | 76_conv1d | `conv1d`, `INTERLEAVE=0 TT=8 OCT=4 WG=1` | 0.344 | 4.3 |
//! | 76_conv1d | `conv1d`, `INTERLEAVE=1 TT=2 OCT=16 WG=64` (the last search's best)² | 0.047–0.084 | 16 |
//! | 76_conv1d | `conv1d`, `INTERLEAVE=2 TT=16 OCT=16 WG=2` (float16 vectors, stride 3 by shuffles)² | 0.023–0.034 | 24 |
//! | 87_conv_pointwise_2D | `conv1d`, `INTERLEAVE=1 TT=1 OCT=32 WG=32` (the last search's best)² | 0.110–0.175 | 20 |
//! | 87_conv_pointwise_2D | `conv1d`, `INTERLEAVE=2 TT=16 OCT=16 WG=64`² | 0.028–0.046 | 72 |
//!
//! ¹ Median of 300–500 launches alternating with the naive kernel (and the template before
//! `RPG`, 1.65–1.8x) in one process, on the evaluator's three rotated input copies, load 1.5–3.
//! ² Minimum–median of 6–8 `kf eval` rounds alternating the two, load 3–3.5; the naive kernel
//! timed beside them varied 2x between calls, so the last column is a median. Per round the
//! float16 form took half the time of the interleaved one on 76 (0.49–0.50), a quarter on 87.
//!
//! The interleaved form's inputs at a run-time stride are gathers, one per 16 lanes and
//! channel block, and cost as much as the fused multiply-adds. Picking every third float out
//! of three contiguous vector loads with two `shuffle2` pays, once the choice of loads is
//! made outside the loops (a branch on the stride inside them took a third longer, and a
//! float16 form that gathers was 1.5x the interleaved one only).
//!
//! Explicit float16 vectors along contiguous memory (with `vec_type_hint`, so that the runtime
//! does not vectorise across work-items as well), large blocks per work-item and few
//! work-groups pay; for a transcendental map the `native_*` rewrite halves the time again.
//! Barriers between the work-items of a row cost more than they save at these row counts. A
//! LayerNorm's time is mostly its normalising sweep's reads (x, the weight and the bias) and
//! writes, not the launch (a no-op kernel of the same geometry takes 0.5 µs): two rows per
//! work-group read the weight and bias once per core instead of once per row. Non-temporal
//! stores of the output (up to twice as slow on a quiet machine), a prefetch of the weight and
//! bias during the first sweep, and a row split across work-groups that each recompute its
//! sums all measured slower. The
//! naive convolution spends its time in 64-bit divisions that find a work-item's output; the
//! template's three-dimensional launch has none.
//!
//! ```
//! use kf_mutate::{StructuralMutator, Structure, TemplateLibrary};
//!
//! let map = TemplateLibrary::map().unwrap();
//! let variant = map
//!     .get("map")
//!     .unwrap()
//!     .instantiate(&Structure::new().with("VW", 8).with("NATIVE", 1))
//!     .unwrap();
//! assert!(variant.source.text.contains("vload8"));
//! assert!(variant.source.text.contains("native_exp"));
//! let mutator = StructuralMutator::row_norm().unwrap();
//! assert!(mutator.strategies().get("sub-group-reduction").is_some());
//! ```

use crate::error::MutateError;
use crate::strategy::{
    vector_width_strategies, Change, MutationStrategy, StrategyLibrary, ALGORITHM, COORDINATION,
    MEMORY, SCALAR_LANES,
};
use crate::structural::StructuralMutator;
use crate::template::{Template, TemplateLibrary};

/// The element-wise map template's source (`templates/family/map.cl`).
const MAP_CL: &str = include_str!("../templates/family/map.cl");
/// Its manifest.
const MAP_TOML: &str = include_str!("../templates/family/map.toml");
/// The direct 1-D convolution template's source (`templates/family/conv1d.cl`).
const CONV1D_CL: &str = include_str!("../templates/family/conv1d.cl");
/// Its manifest.
const CONV1D_TOML: &str = include_str!("../templates/family/conv1d.toml");
/// The strided row normalisation template's source (`templates/family/row_norm_strided.cl`).
const ROW_NORM_STRIDED_CL: &str = include_str!("../templates/family/row_norm_strided.cl");
/// Its manifest.
const ROW_NORM_STRIDED_TOML: &str = include_str!("../templates/family/row_norm_strided.toml");
/// The strided row reduction template's source (`templates/family/row_reduce_strided.cl`).
const ROW_REDUCE_STRIDED_CL: &str = include_str!("../templates/family/row_reduce_strided.cl");
/// Its manifest.
const ROW_REDUCE_STRIDED_TOML: &str = include_str!("../templates/family/row_reduce_strided.toml");
/// The row normalisation template's source (`templates/family/row_norm.cl`).
const ROW_NORM_CL: &str = include_str!("../templates/family/row_norm.cl");
/// Its manifest.
const ROW_NORM_TOML: &str = include_str!("../templates/family/row_norm.toml");

impl TemplateLibrary {
    /// `map` (OpenCL C), for the task `map`: `Y[i] = MAP(X[i])` for `i < N`, the macro `MAP`
    /// defined by a task's binding ([`crate::TaskBinding::define`]; the template alone copies).
    /// Switches `VW` (1, 4, 8, 16) and `NATIVE` (0, 1); tunables `CHUNK`, `WG`, `FAST_MATH`.
    /// The base structure is the manifest's first values (float16, exact math); a start with
    /// `NATIVE=1` is seeded beside it, since a transcendental map gains most from it.
    pub fn map() -> Result<TemplateLibrary, MutateError> {
        let template = Template::new("map", "map", MAP_CL, MAP_TOML, ["VW", "NATIVE"])?;
        let vw16 = crate::Structure::new().with("VW", 16);
        let template = template
            .with_base(vw16.clone().with("NATIVE", 0), kf_core::ParamValues::new())?
            .with_start(
                vw16.with("NATIVE", 1),
                kf_core::ParamValues::new(),
                "native exp, log, sqrt; erf and tanh through native_exp: the transcendental maps' time halves",
            )?;
        Ok(TemplateLibrary::new().with(template))
    }

    /// `row_norm` (OpenCL C), for the task `row_norm`: rows normalised by their own sum and sum
    /// of squares, the operation fixed by a task's binding (`NORM_OP` 1 layer norm, 2 RMS
    /// norm, 3 L1 norm, 4 L2 norm; `HAS_W`, `HAS_B`). Switches `VW` (1, 4, 8, 16) and `REDUCE`
    /// (0 local-memory tree, 1 sub-groups); tunables `WG` (work-items per row) and `RPG` (rows
    /// per work-group: their sums gathered in one sweep, the weight and bias read once for
    /// them). Base: float16, one work-item per group, two rows per group; a start with 16
    /// work-items per row and sub-group reductions, one row per group.
    pub fn row_norm() -> Result<TemplateLibrary, MutateError> {
        let template = float16_template("row_norm", ROW_NORM_CL, ROW_NORM_TOML, &["VW", "REDUCE"])?
            .with_start(
            crate::Structure::new().with("VW", 16).with("REDUCE", 1),
            [("WG", 16i64), ("RPG", 1)].into_iter().collect(),
            "16 work-items share each row through sub-group reductions: for few long rows, and for GPUs",
        )?;
        Ok(TemplateLibrary::new().with(template))
    }
}

impl TemplateLibrary {
    /// `row_norm_strided` (OpenCL C), for the task `row_norm_strided`: rows along a dimension
    /// that is not the last (`OUTER` blocks of `LEN × INNER` floats, a row's elements `INNER`
    /// apart), each work-item normalising `CPW` vectors of `VW` neighbouring rows (independent
    /// accumulators, contiguous loads along the rows); the operation fixed by a task's binding
    /// as for [`TemplateLibrary::row_norm`]. Switch `VW` (1, 4, 8, 16); tunables `CPW`, `WG`.
    /// Base: float16, 4 vectors per work-item, 4 work-items per group.
    pub fn row_norm_strided() -> Result<TemplateLibrary, MutateError> {
        strided_rows(
            "row_norm_strided",
            ROW_NORM_STRIDED_CL,
            ROW_NORM_STRIDED_TOML,
        )
    }

    /// `row_reduce_strided` (OpenCL C), for the task `row_reduce_strided`: a sum, mean,
    /// maximum or minimum of rows along a dimension that is not the last (`OUTER` blocks of
    /// `LEN × INNER` floats, one result per row), each work-item reducing `CPW` vectors of
    /// `VW` neighbouring rows; the operation fixed by a task's binding (`REDUCE_OP` 1 sum,
    /// 2 mean, 3 max, 4 min, 5 argmax, 6 argmin, the last two writing int indices). Switch
    /// `VW`; tunables `CPW`, `WG`. Base: float16, 4 vectors per work-item; a scalar start.
    pub fn row_reduce_strided() -> Result<TemplateLibrary, MutateError> {
        strided_rows(
            "row_reduce_strided",
            ROW_REDUCE_STRIDED_CL,
            ROW_REDUCE_STRIDED_TOML,
        )
    }

    /// `conv1d` (OpenCL C), for the task `conv1d`: a direct 1-D convolution with an `OCT × TT`
    /// register tile of outputs per work-item and a three-dimensional launch (no divisions),
    /// `HAS_BIAS` and `PADDED` fixed by a task's binding. Switch `INTERLEAVE` (1: a
    /// work-group's work-items take neighbouring positions; 0: each work-item `TT`
    /// consecutive ones; 2: `TT` consecutive ones as explicit float16 vectors, inputs at
    /// stride 2 or 3 picked from contiguous loads); tunables `TT`, `OCT`, `WG`. Base:
    /// interleaved, 16 output channels per work-item, 16 work-items per group; starts with
    /// eight consecutive positions of four channels, and with one float16 vector of
    /// positions for 16 channels.
    pub fn conv1d() -> Result<TemplateLibrary, MutateError> {
        let template = Template::new(
            "conv1d",
            "conv1d",
            CONV1D_CL,
            CONV1D_TOML,
            ["INTERLEAVE"],
        )?
        .with_base(
            crate::Structure::new().with("INTERLEAVE", 1),
            kf_core::ParamValues::new(),
        )?
        .with_start(
            crate::Structure::new().with("INTERLEAVE", 0),
            [("TT", 8i64), ("OCT", 4), ("WG", 1)].into_iter().collect(),
            "each work-item eight consecutive positions of four channels: the register tile a GPU or a wide core prefers",
        )?
        .with_start(
            crate::Structure::new().with("INTERLEAVE", 2),
            [("TT", 16i64), ("OCT", 16), ("WG", 2)].into_iter().collect(),
            "16 consecutive positions of 16 channels as float16 vectors: no gathers at strides 1 to 3 (about twice the interleaved form on a strided, dilated convolution)",
        )?;
        Ok(TemplateLibrary::new().with(template))
    }
}

impl StrategyLibrary {
    /// Strategies for the element-wise map template (switches `VW`, `NATIVE`; tunables
    /// `CHUNK`, `WG`):
    ///
    /// | strategy | what it does |
    /// |---|---|
    /// | `vector-loads`, `wider-vectors`, `scalar-lanes` | the vector width: `vloadN` / `vstoreN` (4, 8 or 16 floats) with the expression on vectors, doubled, or scalar code the runtime vectorises across work-items |
    /// | `native-math` | `native_*` functions, erf and tanh through `native_exp` |
    /// | `exact-math` | the expression's own functions |
    /// | `longer-blocks` | more vectors per work-item |
    pub fn map() -> Self {
        let s = MutationStrategy::new;
        StrategyLibrary::new()
            .with_all(contiguous_vector_width())
            .with(
                s("native-math", "native_exp, native_log, native_sqrt… in the expression; erf and tanh through native_exp (the evaluator judges the rounding)")
                    .requires("NATIVE == 0")
                    .change("NATIVE", Change::Set(1))
                    .weight(1.5),
            )
            .with(
                s("exact-math", "the expression's own math functions")
                    .requires("NATIVE == 1")
                    .change("NATIVE", Change::Set(0))
                    .weight(0.5),
            )
            .with(
                s("longer-blocks", "more vectors per work-item: fewer work-items, longer streams")
                    .change("CHUNK", Change::OneOf(vec![4, 8, 16, 32, 64]))
                    .weight(0.7),
            )
    }

    /// Strategies for the row normalisation template (switches `VW`, `REDUCE`; tunables `WG`,
    /// `RPG`):
    ///
    /// | strategy | what it does |
    /// |---|---|
    /// | `vector-loads`, `wider-vectors`, `scalar-lanes` | the vector width: `vloadN` / `vstoreN` along the row, doubled, or scalar code the runtime vectorises across work-items |
    /// | `local-memory-reduction` | several work-items per row, a tree reduction in local memory |
    /// | `sub-group-reduction` | several work-items per row, sub-group reductions |
    /// | `item-per-row` | one work-item per row, no reduction across work-items |
    /// | `rows-per-group` | 2, 4 or 8 rows per work-group, the weight and bias read once for them |
    /// | `row-per-group` | one row per work-group |
    pub fn row_norm() -> Self {
        let s = MutationStrategy::new;
        StrategyLibrary::new()
            .with_all(contiguous_vector_width())
            .with(
                s("local-memory-reduction", "several work-items per row combine their sums by a tree reduction in local memory with barriers")
                    .requires("REDUCE != 0 || WG == 1")
                    .change("REDUCE", Change::Set(0))
                    .change("WG", Change::OneOf(vec![4, 8, 16, 32, 64]))
                    .targets(MEMORY, 2)
                    .targets(COORDINATION, 1),
            )
            .with(
                s("sub-group-reduction", "several work-items per row combine their sums by sub-group reductions, then through local memory")
                    .requires("REDUCE != 1 || WG == 1")
                    .change("REDUCE", Change::Set(1))
                    .change("WG", Change::OneOf(vec![8, 16, 32, 64]))
                    .targets(COORDINATION, 2),
            )
            .with(
                s("item-per-row", "one work-item per row: no reduction across work-items, no barriers")
                    .requires("WG > 1")
                    .change("WG", Change::Set(1))
                    .targets(COORDINATION, 0)
                    .weight(0.7),
            )
            .with(
                s("rows-per-group", "several rows per work-group: one sweep gathers their sums side by side, the weight and bias are read once for all of them")
                    .change("RPG", Change::OneOf(vec![2, 4, 8]))
                    .weight(0.7),
            )
            .with(
                s("row-per-group", "one row per work-group: as many work-groups as rows, for many cores")
                    .requires("RPG > 1")
                    .change("RPG", Change::Set(1))
                    .weight(0.5),
            )
    }
}

impl StrategyLibrary {
    /// Strategies for the direct 1-D convolution template (switch `INTERLEAVE`; tunables
    /// `TT`, `OCT`, `WG`):
    ///
    /// | strategy | what it does |
    /// |---|---|
    /// | `interleave-positions` | a work-group's work-items take neighbouring positions |
    /// | `consecutive-positions` | each work-item `TT` consecutive positions |
    /// | `position-vectors` | each work-item float16 vectors of consecutive positions (explicit vectors) |
    /// | `more-channels-per-item` | more output channels per work-item (each input read once for them) |
    /// | `more-positions-per-item` | more positions per work-item (each weight read once for them) |
    pub fn conv1d() -> Self {
        let s = MutationStrategy::new;
        StrategyLibrary::new()
            .with(
                s("interleave-positions", "a work-group's work-items take neighbouring output positions: the runtime vectorises across them")
                    .requires("INTERLEAVE == 0")
                    .change("INTERLEAVE", Change::Set(1))
                    .change("WG", Change::OneOf(vec![8, 16, 32]))
                    .targets(MEMORY, 0),
            )
            .with(
                s("consecutive-positions", "each work-item computes TT consecutive output positions")
                    .requires("INTERLEAVE == 1")
                    .change("INTERLEAVE", Change::Set(0))
                    .change("TT", Change::OneOf(vec![4, 8, 16]))
                    .targets(MEMORY, 1),
            )
            .with(
                s("position-vectors", "each work-item 16 consecutive output positions as a float16 vector: strided inputs from contiguous loads, no gathers")
                    .requires("INTERLEAVE != 2")
                    .change("INTERLEAVE", Change::Set(2))
                    .change("TT", Change::Set(16))
                    .targets(MEMORY, 1),
            )
            .with(
                s("more-channels-per-item", "a larger register tile over output channels: each input value is read once for all of them")
                    .change("OCT", Change::Up)
                    .targets(ALGORITHM, 1),
            )
            .with(
                s("more-positions-per-item", "a larger register tile over output positions: each weight is read once for all of them")
                    .change("TT", Change::Up)
                    .targets(ALGORITHM, 1),
            )
    }
}

/// The strided row templates' strategies: vector width, vectors per work-item and work-group
/// size.
fn strided_rows_strategies() -> StrategyLibrary {
    StrategyLibrary::new()
        .with_all(contiguous_vector_width())
        .with(
            MutationStrategy::new(
                "vectors-per-item",
                "more or fewer vectors of neighbouring rows per work-item: independent accumulators, contiguous loads along the rows",
            )
            .change("CPW", Change::OneOf(vec![1, 2, 4, 8]))
            .targets(ALGORITHM, 1),
        )
        .with(
            MutationStrategy::new(
                "work-group-size",
                "change how many work-items form a work-group",
            )
            .change("WG", Change::OneOf(vec![1, 4, 8, 16, 32, 64]))
            .weight(0.7),
        )
}

/// The vector-width strategies of the map and the row templates, whose vectors run along
/// contiguous memory.
fn contiguous_vector_width() -> [MutationStrategy; 3] {
    vector_width_strategies(
        "explicit vector loads and stores (vloadN / vstoreN) along contiguous memory",
        SCALAR_LANES,
    )
}

impl StructuralMutator {
    /// The element-wise map template with its strategies ([`TemplateLibrary::map`],
    /// [`StrategyLibrary::map`]); bind the templates to a task before searching.
    pub fn map() -> Result<Self, MutateError> {
        Ok(Self::new(TemplateLibrary::map()?, StrategyLibrary::map()))
    }

    /// The direct 1-D convolution template with its strategies ([`TemplateLibrary::conv1d`],
    /// [`StrategyLibrary::conv1d`]).
    pub fn conv1d() -> Result<Self, MutateError> {
        Ok(Self::new(
            TemplateLibrary::conv1d()?,
            StrategyLibrary::conv1d(),
        ))
    }

    /// The strided row normalisation template with the vector-width and work-group
    /// strategies ([`TemplateLibrary::row_norm_strided`]).
    pub fn row_norm_strided() -> Result<Self, MutateError> {
        Ok(Self::new(
            TemplateLibrary::row_norm_strided()?,
            strided_rows_strategies(),
        ))
    }

    /// The strided row reduction template with the vector-width and work-group strategies
    /// ([`TemplateLibrary::row_reduce_strided`]).
    pub fn row_reduce_strided() -> Result<Self, MutateError> {
        Ok(Self::new(
            TemplateLibrary::row_reduce_strided()?,
            strided_rows_strategies(),
        ))
    }

    /// The row normalisation template with its strategies ([`TemplateLibrary::row_norm`],
    /// [`StrategyLibrary::row_norm`]).
    pub fn row_norm() -> Result<Self, MutateError> {
        Ok(Self::new(
            TemplateLibrary::row_norm()?,
            StrategyLibrary::row_norm(),
        ))
    }
}

/// A family template for the task of its own name (the kernel named so too) whose switches
/// include the vector width `VW`, based on float16 vectors and the manifest's first values of
/// the other switches and tunables.
pub(crate) fn float16_template(
    name: &str,
    cl: &str,
    toml: &str,
    switches: &[&str],
) -> Result<Template, MutateError> {
    Template::new(name, name, cl, toml, switches)?.with_base(
        crate::Structure::new().with("VW", 16),
        kf_core::ParamValues::new(),
    )
}

/// A template over rows along a dimension that is not the last, `CPW` vectors of `VW`
/// neighbouring rows per work-item (the task and the kernel both named `name`): switch `VW`,
/// base float16, and a scalar start, one row per work-item, that leaves the vectorising to the
/// runtime.
fn strided_rows(name: &str, cl: &str, toml: &str) -> Result<TemplateLibrary, MutateError> {
    let template = float16_template(name, cl, toml, &["VW"])?.with_start(
        crate::Structure::new().with("VW", 1),
        // One row per work-item: neighbouring work-items in the lanes read neighbouring
        // floats (with several rows each, the lanes would gather).
        [("CPW", 1i64), ("WG", 16)].into_iter().collect(),
        "scalar rows: the runtime vectorises across work-items, neighbouring rows in the lanes",
    )?;
    Ok(TemplateLibrary::new().with(template))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Structure, TaskBinding};

    fn layer_norm() -> TaskBinding {
        TaskBinding::new("kb_ln", "layer_norm")
            .param("__global const float*", "x")
            .param("__global const float*", "w")
            .param("__global float*", "out")
            .param("const int", "rows")
            .param("const int", "n")
            .bind("ROWS", "rows")
            .bind("LEN", "n")
            .bind("EPS", "1e-5f")
            .bind("X", "x")
            .bind("Y", "out")
            .bind("W", "w")
            .bind("B", "0")
            .fix("NORM_OP", 1)
            .fix("HAS_W", 1)
            .fix("HAS_B", 0)
    }

    /// Every structure of the family templates instantiates, alone and bound (keeping every
    /// seed).
    #[test]
    fn every_structure_instantiates() {
        let map = TaskBinding::new("kb_gelu", "gelu")
            .param("__global const float*", "x")
            .param("__global float*", "out")
            .param("const int", "n")
            .bind("X", "x")
            .bind("Y", "out")
            .bind("N", "n")
            .define("MAP", ["x"], "0.5f * x * (1.0f + erf(x * 0.70710678f))");
        let conv = TaskBinding::new("kb_conv", "conv")
            .param("__global const float*", "x")
            .param("__global const float*", "w")
            .param("__global float*", "out")
            .param("const int", "n")
            .bind("B", "1")
            .bind("CI", "n")
            .bind("CO", "n")
            .bind("L", "n")
            .bind("K", "3")
            .bind("S", "1")
            .bind("D", "1")
            .bind("P", "0")
            .bind("LOUT", "n - 2")
            .bind("X", "x")
            .bind("W", "w")
            .bind("Y", "out")
            .bind("BIAS", "0")
            .fix("HAS_BIAS", 0)
            .fix("PADDED", 0);
        let strided = TaskBinding::new("kb_rms", "rms")
            .param("__global const float*", "x")
            .param("__global float*", "out")
            .param("const int", "n")
            .bind("OUTER", "2")
            .bind("LEN", "n")
            .bind("INNER", "n * n")
            .bind("EPS", "1e-5f")
            .bind("X", "x")
            .bind("Y", "out")
            .bind("W", "0")
            .bind("B", "0")
            .fix("NORM_OP", 2)
            .fix("HAS_W", 0)
            .fix("HAS_B", 0);
        let reduce = TaskBinding::new("kb_sum", "sum")
            .param("__global const float*", "x")
            .param("__global float*", "out")
            .param("const int", "n")
            .bind("OUTER", "2")
            .bind("LEN", "n")
            .bind("INNER", "n + 1")
            .bind("X", "x")
            .bind("Y", "out")
            .fix("REDUCE_OP", 1);
        for (library, binding) in [
            (TemplateLibrary::row_reduce_strided().unwrap(), reduce),
            (TemplateLibrary::map().unwrap(), map),
            (TemplateLibrary::row_norm().unwrap(), layer_norm()),
            (TemplateLibrary::row_norm_strided().unwrap(), strided),
            (TemplateLibrary::conv1d().unwrap(), conv),
        ] {
            crate::binding::assert_every_structure_binds(&library, &binding);
        }
    }

    /// A fixed macro resolves the template's sections: the bound layer norm without a bias
    /// has no bias term, and no other operation's code.
    #[test]
    fn fixed_macros_resolve_the_operation() {
        let bound = TemplateLibrary::row_norm()
            .unwrap()
            .bound_to(&layer_norm())
            .unwrap();
        let variant = bound
            .get("row_norm")
            .unwrap()
            .instantiate(&Structure::new().with("VW", 16))
            .unwrap();
        let text = &variant.source.text;
        assert!(text.contains("const VTYPE w = VLOAD(W, j);"), "{text}");
        assert!(text.contains("o *= w;"), "{text}");
        assert!(!text.contains("VLOAD(B, j)"), "{text}");
        assert!(!text.contains("fabs(a)"), "{text}");
        assert!(!text.contains("NORM_OP"), "{text}");
        assert!(text.contains("__global const float* W = (kf_w);"), "{text}");
    }

    /// A macro body that is more than one expression is refused.
    #[test]
    fn a_macro_body_must_be_one_expression() {
        let binding = TaskBinding::new("t", "t")
            .param("__global const float*", "x")
            .param("__global float*", "y")
            .param("const int", "n")
            .bind("X", "x")
            .bind("Y", "y")
            .bind("N", "n")
            .define("MAP", ["x"], "x; }");
        let err = TemplateLibrary::map()
            .unwrap()
            .bound_to(&binding)
            .unwrap_err();
        assert!(err.to_string().contains("not one expression"), "{err}");
    }
}
