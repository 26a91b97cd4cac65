//! Softmax templates and strategies: the structural mutator's material for the `softmax` task
//! (row-wise softmax of a row-major `X[ROWS×COLS]` into `Y`), the second task of the offline
//! mutators besides SGEMM.
//!
//! Two templates (`templates/softmax_row.cl`, `templates/softmax_group.cl`) span the softmax
//! behaviour space:
//!
//! * `softmax_row`: one work-item per row at a time, `RPI` consecutive rows per work-item,
//!   `WG` work-items per work-group. Switches `VW` (1, 4, 8, 16: `vloadN` along the row) and
//!   `ALGO` (0 three sweeps, 1 three sweeps with the exponentials computed once and stored in
//!   Y, 2 online max and sum, 3 the exponentials computed once into a private buffer of
//!   `CHUNKS` vectors, the next row's maximum taken in the same sweep, 4 online by blocks of
//!   `ACC` vectors: one rescaling `exp` per block). Tunables besides `WG`: `EXP` (0 `exp`, 1
//!   `native_exp`, 2 `exp2` of the argument prescaled by log2 e, 3 a polynomial `exp2`),
//!   `ACC` (independent accumulators per sweep), `PREFETCH_ROW` (the next row fetched while
//!   this one is computed), `STREAM` (non-temporal stores of Y), `FAST_MATH`.
//! * `softmax_group`: `WG` work-items share a row, `RPG` rows per work-group. Switches `VW`,
//!   `ALGO` (as above, and 3: the row cached in `CHUNKS` registers per work-item, X read
//!   once), `REDUCE` (0 tree reduction in local memory with barriers, 1 sub-group reduction,
//!   2 sub-group reductions combined through local memory) and `PREFETCH`.
//!
//! # What is fast on the Intel CPU OpenCL runtime (2-core AMD EPYC, AVX-512)
//!
//! `kf eval --task softmax --size ROWS=4096,COLS=1024` (the whole protocol: three input sets
//! verified, one of them shifted by about 60 so that a kernel without the max subtraction
//! overflows; the naive baseline interleaved), three runs each on a shared machine with a load
//! average of 5–7, so the figures are noisy (the naive baseline itself ranged 27–120 ms over the
//! session); min and median kernel time of the three runs, and the median speedup over the
//! baseline measured in the same run:
//!
//! | kernel | params | ms (min / median) | × naive |
//! |---|---|---|---|
//! | task baseline `softmax_naive` | `WG=16` | 67.6 / 72.3 | 1.0 |
//! | `softmax_row`, scalar, three sweeps (the naive structure) | `VW=1 ALGO=0 WG=16` | 71.7 / 72.2 | 1.0 |
//! | `softmax_row`, `vload16`, three sweeps | `VW=16 ALGO=0 WG=1` | 2.63 / 2.81 | 23.9 |
//! | `softmax_row`, `vload16`, exp once | `VW=16 ALGO=1 WG=1` | 2.42 / 4.11 | 16.9 |
//! | `softmax_row`, `vload16`, exp once, 16 rows per group | `VW=16 ALGO=1 WG=16` (first values) | **1.96 / 1.96** | **27.1** |
//! | `softmax_row`, `vload8`, exp once | `VW=8 ALGO=1 WG=1` | 5.42 / 6.82 | 11.3 |
//! | `softmax_row`, `vload16`, online | `VW=16 ALGO=2 WG=1` | 2.72 / 3.21 | 15.8 |
//! | `softmax_group`, scalar, local-memory tree | `VW=1 ALGO=0 REDUCE=0 WG=16` | 9.88 / 9.90 | 5.6 |
//! | `softmax_group`, scalar, exp once, sub-group | `VW=1 ALGO=1 REDUCE=1 WG=16 RPG=4` | 4.97 / 8.72 | 8.7 |
//! | `softmax_group`, scalar, online, sub-group | `VW=1 ALGO=2 REDUCE=1 WG=16` | 12.8 / 13.5 | 5.8 |
//! | `softmax_group`, scalar, row in registers, sub-group | `VW=1 ALGO=3 REDUCE=1 WG=16 RPG=4 CHUNKS=64` | 4.02 / 4.36 | 16.5 |
//! | `softmax_group`, `vload16`, row in registers, sub-group | `VW=16 ALGO=3 REDUCE=1 WG=16 CHUNKS=4` (first values) | 3.80 / 5.32 (1.61 in a quieter run) | 12.2 |
//! | `softmax_group`, `vload16`, exp once, sub-group | `VW=16 ALGO=1 REDUCE=1 WG=16` | 5.71 / 7.48 | 10.2 |
//! | `softmax_group`, `vload16`, row in registers, one work-item per row | `VW=16 ALGO=3 REDUCE=0 WG=1 CHUNKS=64` | 2.79 / 4.36 | 14.2 |
//! | `softmax_group`, scalar, row in registers, hierarchical | `VW=1 ALGO=3 REDUCE=2 WG=64 SG=16 CHUNKS=16` | 13.8 / 14.0 | 5.5 |
//! | `softmax_group`, `vload16`, row in registers, hierarchical | `VW=16 ALGO=3 REDUCE=2 WG=32 SG=16 CHUNKS=2` | 9.48 / 13.8 | 5.6 |
//! | `softmax_group`, as the first values + `prefetch` | `… PREFETCH=1` | 4.69 / 5.39 | 12.2 |
//! | `softmax_group`, `vload16`, one vector per work-item (fused) | `VW=16 ALGO=3 REDUCE=0 WG=64 CHUNKS=1` | 18.8 / 20.2 | 3.8 |
//! | `softmax_group`, `vload4`, local-memory tree | `VW=4 ALGO=1 REDUCE=0 WG=16` | 15.4 / 19.0 | 3.9 |
//!
//! 4096 × 1024 floats in and out are 32 MiB, so 2 ms is about 17 GB/s: the best kernels are
//! close to what two cores stream. What the measurements say: the naive kernel is slow because
//! the runtime packs neighbouring work-items (rows, 4 KiB apart) into SIMD lanes, turning every
//! load into a gather; explicit `float16` along the row is worth 25–35×, and with
//! `vec_type_hint` (which `softmax_row` gives its vector variants) the work-group size no longer
//! matters. Computing each exponential once helps; the online rescaling costs an extra `exp`
//! per element and loses on a CPU, where the row is in L1 for the second sweep anyway. Barriers
//! (local-memory trees, the hierarchical reduction, many work-items per row) split the
//! work-group loop and cost 2–5×; a 16-wide sub-group per row is the reduction that pays.
//!
//! # Per byte: what bounds the row kernel (issue 50)
//!
//! Timed with this crate's `softmax_bench` example (the evaluator's timing: three rotated
//! copies of X, Y refilled from the host before each launch, device-event seconds, median of
//! 20–30 launches per kernel, all kernels round-robin in the same rounds) at 4096 × 1024 on a
//! 2-core AMD EPYC (family 26 model 2; L1d 48 KiB, L2 1 MiB per core, L3 32 MiB; Intel CPU
//! OpenCL runtime), shared with other builds (load average 7–8), against the cached roofline
//! for the 32 MiB working set (57.5 GB/s, the copy kernel timed the same way):
//!
//! | kernel | fraction of the roofline (two runs) |
//! |---|---|
//! | probe: copy `Y = X` (float16, one work-item per row) | 0.68–0.85 |
//! | probe: `Y = exp(X)`, one sweep | 0.62 |
//! | probe: row maximum, then `Y = X - max` | 0.57 |
//! | `VW=16 ALGO=1 WG=16 FAST_MATH=1` (the start before) | 0.38–0.47 |
//! | + `EXP=3 ACC=4 PREFETCH_ROW=1` | 0.51–0.54 |
//! | `VW=16 ALGO=4 ACC=8 EXP=3 PREFETCH_ROW=1`, ordinary stores | 0.49–0.56 |
//! | same with `STREAM=1` (the start now) | **0.55–0.61** |
//! | same with `ACC=16` | 0.49–0.58 |
//! | same with `EXP=0` (the runtime's relaxed `exp`) / `EXP=1` (`native_exp`) | 0.50–0.51 / 0.49–0.50 |
//! | same with `EXP=2` (`exp2`) | 0.55–0.58 |
//! | same without `FAST_MATH` | 0.16–0.32 |
//!
//! So `exp` is not what bounds the kernel (an `exp` per element costs little over a copy);
//! the sweeps are. Each row is one memory-bound sweep followed by sweeps that only compute
//! from L1, and a core does one after the other: prefetching the next row overlaps them
//! (+0.03–0.06), several accumulators break the max and sum dependency chains, a polynomial
//! `exp2` (an `fma`-only degree-6 polynomial and the exponent bits, 1e-6 relative error
//! against 1.6e-4 for the relaxed `exp`) is cheaper than the runtime's `exp`, and the blocked
//! online form reads X twice (the second time from L1) and writes Y once, where `ALGO=1`
//! writes Y and reads it back. On a shared machine a kernel's time grows with the CPU time it
//! needs, which is why the copy itself reaches only 0.7–0.85 of a roofline measured as the
//! best of ten launches.
//!
//! What is left is arithmetic that does not overlap the memory traffic. With the rows in cache
//! (`softmax_bench --rows 512`, 4 MiB in and out), the arithmetic alone of `ALGO=4` takes
//! 0.054 ms at best, 2.8 times the copy's 0.019: eight times that at 4096 rows is 0.43 ms, as
//! long as the copy's 0.31–0.42 ms from memory. `ALGO=4` computes two `exp` per element (the
//! sum sweep and the output sweep); `ALGO=3` keeps the exponentials in a private buffer of
//! `CHUNKS` vectors (a stack array, in L1 on a CPU) and computes one (0.043 ms in cache), with
//! no read-for-ownership of Y (the buffer, not Y, holds the exponentials, and Y is written
//! once with streaming stores). Its maximum sweep still reads a row from memory with nothing
//! to overlap; with `RPI` consecutive rows per work-item, the exponential sweep of one row
//! also reads the next row and takes its maximum, so each row comes from memory while the one
//! before it is computed, and only a work-item's first row has a maximum sweep of its own.
//! Round-robin beside the copy (ratio to the copy in the same run, 4–6 runs each, load 1.5–4):
//!
//! | kernel | / copy |
//! |---|---|
//! | `VW=16 ALGO=4 ACC=8 EXP=3 PREFETCH_ROW=1 STREAM=1 WG=16` (the start before) | 0.77–0.81 |
//! | `VW=16 ALGO=3 ACC=2 EXP=3 STREAM=1 WG=16 RPI=1` | 0.85 |
//! | same with `RPI=4` / `RPI=8` | 0.84 / 0.93–0.99 |
//! | same with `RPI=16` (the start now) | **1.01–1.12** |
//! | same with `RPI=16 WG=4` / `RPI=32 WG=4` | 1.01–1.02 / 1.03–1.07 |
//! | same with `RPI=8 ACC=8` / `ACC=4` | 0.83 / 0.88 |
//! | same with `RPI=8 EXP=2` / `EXP=0` | 0.96–1.00 / 0.84 |
//! | same with `RPI=8 PREFETCH_ROW=1` | 0.70 |
//!
//! The softmax beats the copy probe because the probe's ordinary stores read Y's lines before
//! writing them; `prefetch()` of the next row now costs more than it brings, since the
//! exponential sweep reads that row anyway.
//!
//! ```
//! use kf_mutate::{StrategyLibrary, StructuralMutator, Structure, TemplateLibrary};
//!
//! let library = TemplateLibrary::softmax().unwrap();
//! let group = library.get("softmax_group").unwrap();
//! let variant = group
//!     .instantiate(&Structure::new().with("REDUCE", 1).with("ALGO", 2).with("VW", 16))
//!     .unwrap();
//! assert!(variant.source.text.contains("sub_group_reduce_max"));
//! assert!(variant.source.text.contains("vload16"));
//! assert!(!variant.source.text.contains("barrier("));
//! assert!(StrategyLibrary::softmax().get("online-normalisation").is_some());
//! let mutator = StructuralMutator::softmax().unwrap();
//! # let _ = mutator;
//! ```

use kf_core::ParamValues;

use crate::error::MutateError;
use crate::strategy::{
    vector_width_strategies, Change, MutationStrategy, StrategyLibrary, ALGORITHM, COORDINATION,
    MEMORY, SCALAR_LANES,
};
use crate::structural::StructuralMutator;
use crate::template::{Structure, TemplateLibrary};

/// The task the softmax templates compute.
const TASK: &str = "softmax";

fn params<const N: usize>(values: [(&str, i64); N]) -> ParamValues {
    values.into_iter().collect()
}

impl TemplateLibrary {
    /// The softmax templates for the `softmax` task: `softmax_row` first (the structural
    /// mutator rewrites a kernel that is not one of its variants, such as the task's naive
    /// baseline, as this template's base: scalar, three sweeps, 16 rows per work-group, one
    /// row per work-item — the naive kernel's own structure), then `softmax_group` (base: scalar, three sweeps, 16
    /// work-items per row reducing through local memory).
    pub fn softmax() -> Result<Self, MutateError> {
        Self::softmax_for(kf_core::Language::OpenCl)
    }

    /// The softmax templates of [`TemplateLibrary::softmax`] rendered in `language` (OpenCL C
    /// or SYCL): the same names, switches, tunables and base structures; a language's own
    /// switches (SYCL: `SHUFFLE`, the sub-group reduction's shuffles) start at 0. For CUDA,
    /// the GPU rendering of `softmax_group` ([`TemplateLibrary::cuda_softmax`]: switches `VW`,
    /// `ALGO`, `REDUCE`).
    pub fn softmax_for(language: kf_core::Language) -> Result<Self, MutateError> {
        if language == kf_core::Language::Cuda {
            return Self::cuda_softmax();
        }
        let row = crate::languages::rendering("softmax_row", language)?.template(
            TASK,
            &["VW", "ALGO"],
            Structure::new(),
            params([("WG", 16), ("RPI", 1)]),
        )?;
        let group = crate::languages::rendering("softmax_group", language)?.template(
            TASK,
            &["VW", "ALGO", "REDUCE", "PREFETCH"],
            Structure::new().with("REDUCE", 0),
            params([("WG", 16), ("RPG", 1), ("SG", 16), ("CHUNKS", 64)]),
        )?;
        Ok(TemplateLibrary::new().with(row).with(group))
    }

    /// These templates and the softmax templates ([`TemplateLibrary::softmax`]) together, so
    /// that one structural mutator serves several tasks (templates of the same name are
    /// replaced by the softmax ones).
    pub fn with_softmax(self) -> Result<Self, MutateError> {
        self.with_softmax_for(kf_core::Language::OpenCl)
    }

    /// These templates and the softmax templates rendered in `language`
    /// ([`TemplateLibrary::softmax_for`]) together.
    pub fn with_softmax_for(self, language: kf_core::Language) -> Result<Self, MutateError> {
        let mut out = self;
        for template in TemplateLibrary::softmax_for(language)?.templates() {
            out = out.with(template.clone());
        }
        Ok(out)
    }
}

impl StrategyLibrary {
    /// Strategies for row reductions such as softmax, over templates that follow the switch
    /// and parameter names of the shipped softmax templates: `VW` (vector width), `ALGO`
    /// (0 three sweeps, 1 exponentials stored once, 2 online, 3 row cached in registers in
    /// `softmax_group` and the exponentials in a private buffer in `softmax_row`, 4 online by
    /// blocks), `RPI` (rows per work-item in `softmax_row`),
    /// `REDUCE` (0 local memory, 1 sub-group, 2 both), `PREFETCH`, `WG` (work-items per row
    /// in `softmax_group`, rows per work-group in `softmax_row`), `RPG` (rows per work-group),
    /// `SG` (sub-group size), `CHUNKS` (registers per work-item). Strategies that need the
    /// work-group-per-row structure move the kernel to the `softmax_group` template; one moves
    /// it back to `softmax_row`. A strategy whose names a template lacks does not apply to it.
    ///
    /// | strategy | what it does |
    /// |---|---|
    /// | `online-normalisation` | running max and rescaled running sum in one sweep |
    /// | `blocked-online` | the same by blocks of vectors, one rescaling per block (`softmax_row`) |
    /// | `exp-once-private` | exponentials computed once into a private row buffer, Y written from it (`softmax_row`) |
    /// | `rows-per-work-item` | change how many consecutive rows a work-item handles (`RPI`) |
    /// | `exp-once` | exponentials computed once, stored to Y and scaled in place |
    /// | `cache-row-in-registers` | each work-item reads its part of the row once into registers |
    /// | `one-vector-per-item` | the cached row with one vector per work-item (no register array) |
    /// | `three-sweeps` | back to max / sum / normalise sweeps |
    /// | `local-memory-reduction` | a work-group per row, tree reduction in local memory with barriers |
    /// | `sub-group-reduction` | a sub-group per row, `sub_group_reduce_max/add` |
    /// | `hierarchical-reduction` | several sub-groups per row, partial results through local memory |
    /// | `vector-loads`, `wider-vectors`, `scalar-lanes` | the vector width: `vloadN` / `vstoreN` (4, 8 or 16 floats), doubled, or scalar code the runtime vectorises across work-items |
    /// | `rows-per-work-group` | several rows per work-group (`RPG`) |
    /// | `work-items-per-row` | change how many work-items share a row |
    /// | `rows-per-group-of-items` | change how many one-row work-items form a group (`softmax_row`) |
    /// | `prefetch-next-row` | `prefetch()` the row the next work-group reads |
    /// | `item-per-row` | one work-item per row, no reduction across work-items |
    pub fn softmax() -> Self {
        StrategyLibrary::new()
            .with_all(row_sweep_strategies())
            .with_all(row_reduction_strategies())
            .with_all(vector_width_strategies(
                "explicit vector loads and stores (vloadN / vstoreN) along the row",
                SCALAR_LANES,
            ))
            .with_all(row_work_shape_strategies())
    }
}

impl StructuralMutator {
    /// The softmax templates with the softmax strategies ([`TemplateLibrary::softmax`],
    /// [`StrategyLibrary::softmax`]).
    pub fn softmax() -> Result<Self, MutateError> {
        Ok(Self::new(
            TemplateLibrary::softmax()?,
            StrategyLibrary::softmax(),
        ))
    }
}

/// How a row is swept: three sweeps, exponentials computed once (stored to Y, in a private
/// buffer or in registers), the online and blocked online forms, rows per work-item.
fn row_sweep_strategies() -> [MutationStrategy; 8] {
    let s = MutationStrategy::new;
    [
        s("online-normalisation", "one sweep keeps a running maximum and a running sum rescaled by exp(m - m_new), then a normalising sweep")
            .requires("ALGO != 2")
            .change("ALGO", Change::Set(2))
            .targets(ALGORITHM, 2)
            .weight(1.5),
        s("blocked-online", "one sweep in blocks of vectors: the running maximum moves once per block, so the running sum is rescaled by one exp per block; a second sweep writes Y once")
            .requires("ALGO != 4")
            .to_template("softmax_row")
            .change("ALGO", Change::Set(4))
            .targets(ALGORITHM, 2)
            .weight(1.5),
        s("exp-once-private", "compute each exponential once into a private row buffer while summing, then write Y from the buffer; with several rows per work-item the exponential sweep also takes the next row's maximum")
            .requires("ALGO != 3")
            .to_template("softmax_row")
            .change("ALGO", Change::Set(3))
            .change("RPI", Change::OneOf(vec![8, 16, 32]))
            .targets(ALGORITHM, 1)
            .weight(1.5),
        s("rows-per-work-item", "several consecutive rows per work-item (softmax_row): with the private buffer, each row's maximum is taken while the row before it is computed")
            .requires("defined(RPI)")
            .change("RPI", Change::OneOf(vec![1, 4, 8, 16, 32]))
            .weight(0.7),
        s("exp-once", "compute each exponential once: store it to Y while summing, then scale Y in place")
            .requires("ALGO != 1")
            .change("ALGO", Change::Set(1))
            .targets(ALGORITHM, 0),
        s("cache-row-in-registers", "read each work-item's part of the row once into registers, compute the exponentials in place, write Y from registers")
            .requires("ALGO != 3")
            .to_template("softmax_group")
            .change("ALGO", Change::Set(3))
            .targets(ALGORITHM, 3)
            .weight(2.5),
        s("one-vector-per-item", "the cached row with a single 16-float vector per work-item: enough work-items to cover the row once")
            .requires("defined(REDUCE) && ALGO == 3 && CHUNKS > 1")
            .change("CHUNKS", Change::Set(1))
            .change("VW", Change::Set(16))
            .targets(ALGORITHM, 1)
            .weight(0.5),
        s("three-sweeps", "separate sweeps for the maximum, the sum of exponentials and the normalisation")
            .requires("ALGO != 0")
            .change("ALGO", Change::Set(0))
            .targets(ALGORITHM, 0)
            .weight(0.3),
    ]
}

/// How the work-items sharing a row combine its maximum and sum: local memory, sub-groups or
/// both (each moves the kernel to `softmax_group`).
fn row_reduction_strategies() -> [MutationStrategy; 3] {
    let s = MutationStrategy::new;
    [
        s("local-memory-reduction", "a work-group per row: work-items share the row and combine maxima and sums by a tree reduction in local memory with barriers")
            .requires("!defined(REDUCE) || REDUCE != 0")
            .to_template("softmax_group")
            .change("REDUCE", Change::Set(0))
            .change("WG", Change::OneOf(vec![8, 16, 32, 64]))
            .targets(MEMORY, 2)
            .targets(COORDINATION, 1)
            .weight(1.5),
        s("sub-group-reduction", "a sub-group per row: sub_group_reduce_max / sub_group_reduce_add combine the row in registers, no barriers")
            .requires("!defined(REDUCE) || REDUCE != 1")
            .to_template("softmax_group")
            .change("REDUCE", Change::Set(1))
            .change("WG", Change::OneOf(vec![8, 16, 32]))
            .targets(COORDINATION, 2)
            .weight(1.5),
        s("hierarchical-reduction", "several sub-groups per row: sub-group reductions, then the partial results through local memory after a barrier")
            .requires("!defined(REDUCE) || REDUCE != 2")
            .to_template("softmax_group")
            .change("REDUCE", Change::Set(2))
            .change("WG", Change::OneOf(vec![32, 64, 128]))
            .targets(COORDINATION, 3)
            .targets(MEMORY, 2),
    ]
}

/// How rows and work-items map onto work-groups, and prefetching the next group's row.
fn row_work_shape_strategies() -> [MutationStrategy; 5] {
    let s = MutationStrategy::new;
    [
        s(
            "rows-per-work-group",
            "several rows per work-group (fewer, larger groups)",
        )
        .change("RPG", Change::OneOf(vec![1, 2, 4, 8]))
        .weight(0.7),
        s(
            "work-items-per-row",
            "change how many work-items share a row",
        )
        .requires("defined(REDUCE) && REDUCE != 1")
        .change("WG", Change::OneOf(vec![1, 4, 8, 16, 32, 64]))
        .weight(0.7),
        s(
            "rows-per-group-of-items",
            "change how many one-row work-items form a work-group",
        )
        .requires("!defined(REDUCE)")
        .change("WG", Change::OneOf(vec![1, 4, 16, 32]))
        .weight(0.7),
        s(
            "prefetch-next-row",
            "prefetch() the row the next work-group will read",
        )
        .requires("!PREFETCH")
        .to_template("softmax_group")
        .change("PREFETCH", Change::Set(1))
        .targets(MEMORY, 3)
        .weight(0.7),
        s(
            "item-per-row",
            "one work-item per row: no reduction across work-items, no barriers",
        )
        .requires("defined(REDUCE) && ALGO != 3")
        .to_template("softmax_row")
        .change("WG", Change::OneOf(vec![1, 4, 16]))
        .targets(COORDINATION, 0)
        .weight(0.5),
    ]
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::executor::block_on;
    use kf_core::prelude::*;
    use kf_core::Mutator;

    use super::*;
    use crate::{Feasibility, Template};

    fn sizes() -> indexmap::IndexMap<String, i64> {
        [("ROWS".to_string(), 4096i64), ("COLS".to_string(), 1024)]
            .into_iter()
            .collect()
    }

    fn device() -> DeviceFacts {
        let mut d = DeviceFacts::unknown("test cpu");
        d.max_work_group_size = 8192;
        d.local_mem_bytes = 262_144;
        d.max_work_item_sizes = vec![8192; 3];
        d.sub_group_sizes = vec![4, 8, 16, 32, 64];
        d
    }

    #[test]
    fn every_variant_instantiates_with_a_feasible_configuration() {
        let library = TemplateLibrary::softmax().unwrap();
        let sizes = sizes();
        let device = device();
        let mut count = 0;
        for template in library.templates() {
            assert_eq!(template.task(), "softmax");
            for structure in template.all_structures() {
                let variant = template.instantiate(&structure).unwrap();
                let text = &variant.source.text;
                assert!(
                    !text.contains("#if ") && !text.contains("#elif") && !text.contains("#else"),
                    "{structure}: unresolved section"
                );
                assert!(!text.contains("//!"), "{structure}: template docs left in");
                assert_eq!(
                    text.contains("vload"),
                    structure.get("VW") != Some(1),
                    "{structure}"
                );
                assert_eq!(
                    text.contains("barrier("),
                    matches!(structure.get("REDUCE"), Some(0 | 2)),
                    "{structure}"
                );
                assert_eq!(
                    text.contains("sub_group_reduce"),
                    matches!(structure.get("REDUCE"), Some(1 | 2)),
                    "{structure}"
                );
                let row = template.name() == "softmax_row";
                let online = if row {
                    text.contains("EXP_SHIFTED(m, m_new, ml_new)")
                } else {
                    text.contains("exp(m - m_new)")
                };
                assert_eq!(
                    online,
                    matches!(structure.get("ALGO"), Some(2))
                        || (row && structure.get("ALGO") == Some(4)),
                    "{structure}"
                );
                assert_eq!(
                    variant.manifest.params.contains_key("CHUNKS"),
                    structure.get("ALGO") == Some(3),
                    "{structure}"
                );
                let space = Feasibility::new(&variant.manifest, &sizes, Some(&device));
                let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
                let params = space.repair(template.base_params(), &[], &mut rng, 3000);
                assert!(params.is_some(), "{structure}: no feasible configuration");
                count += 1;
            }
        }
        assert_eq!(count, 4 * 5 + 4 * 4 * 3 * 2);
    }

    #[test]
    fn naive_seed_is_adopted_and_strategies_reach_every_switch() {
        let naive = KernelSource::new(Language::OpenCl, "softmax", "__kernel void softmax() {}");
        let eval = Evaluation::failed(Status::WrongValues, "");
        let parent = Elite {
            candidate: Candidate::seed(naive, ParamValues::new()),
            fitness: Fitness::of(&eval),
            evaluation: eval,
            descriptor: Descriptor::new([0, 0, 0], "test"),
        };
        let mutator = StructuralMutator::softmax().unwrap();
        let mut strategies = std::collections::BTreeSet::new();
        let mut templates = std::collections::BTreeSet::new();
        for seed in 0..60 {
            let ctx = MutationContext {
                step: 1,
                seed,
                task: Arc::new(
                    Task::new("softmax")
                        .with_size("ROWS", 4096)
                        .with_size("COLS", 1024),
                ),
                device: Some(Arc::new(device())),
                inspirations: Vec::new(),
                hints: ArchiveHints::default(),
            };
            let mutation = block_on(mutator.mutate(&parent, &ctx)).unwrap();
            for child in &mutation.children {
                assert!(child.source.manifest.is_some());
                let (template, _) = mutator.templates().identify(&child.source).unwrap();
                templates.insert(template.name().to_owned());
                let name = child.origin.note.split(':').next().unwrap_or("").to_owned();
                strategies.insert(name);
            }
        }
        assert!(templates.contains("softmax_row"), "{templates:?}");
        assert!(templates.contains("softmax_group"), "{templates:?}");
        for expected in [
            "online-normalisation",
            "blocked-online",
            "cache-row-in-registers",
            "local-memory-reduction",
            "sub-group-reduction",
            "hierarchical-reduction",
            "vector-loads",
        ] {
            assert!(strategies.contains(expected), "{expected}: {strategies:?}");
        }
    }

    #[test]
    fn combined_library_keeps_both_tasks() {
        let library = TemplateLibrary::builtin().unwrap().with_softmax().unwrap();
        assert!(library.for_task("gemm").count() >= 2);
        assert_eq!(library.for_task("softmax").count(), 2);
        assert_eq!(
            library.for_task("softmax").next().map(Template::name),
            Some("softmax_row")
        );
    }
}
