//! Weighted evidence patterns, grouped by dimension and level.

use std::fmt;
use std::ops::BitOr;

use kf_core::Language;
use regex::Regex;

use crate::error::ClassifyError;

/// A set of kernel languages a pattern applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Languages(u8);

impl Languages {
    /// No language.
    pub const NONE: Languages = Languages(0);
    /// OpenCL C.
    pub const OPENCL: Languages = Languages(1);
    /// SYCL.
    pub const SYCL: Languages = Languages(2);
    /// CUDA.
    pub const CUDA: Languages = Languages(4);
    /// Every language the classifier knows.
    pub const ALL: Languages = Languages(7);

    /// The set holding one language; `None` for a language this crate does not know.
    pub fn of(language: Language) -> Option<Languages> {
        match language {
            Language::OpenCl => Some(Languages::OPENCL),
            Language::Sycl => Some(Languages::SYCL),
            Language::Cuda => Some(Languages::CUDA),
            _ => None,
        }
    }

    /// Whether `language` is in the set.
    pub fn contains(self, language: Language) -> bool {
        Languages::of(language).is_some_and(|l| self.0 & l.0 != 0)
    }
}

impl BitOr for Languages {
    type Output = Languages;
    fn bitor(self, rhs: Languages) -> Languages {
        Languages(self.0 | rhs.0)
    }
}

impl fmt::Display for Languages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [
            (Languages::OPENCL, "opencl"),
            (Languages::SYCL, "sycl"),
            (Languages::CUDA, "cuda"),
        ]
        .into_iter()
        .filter(|(l, _)| self.0 & l.0 != 0)
        .map(|(_, n)| n)
        .collect();
        if names.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&names.join("|"))
        }
    }
}

/// A structural fact that a single regular expression cannot express, computed from the
/// preprocessed source (see each variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// Always present: a level's baseline evidence (used with negative weights that take it
    /// away).
    Always,
    /// A lower level of the same dimension passed (levels are scored lowest first), so that a
    /// level can require another: "local memory *and* a prefetch".
    LevelPasses(usize),
    /// Two or more kernel entry points: OpenCL `__kernel`, CUDA `__global__`, SYCL free-function
    /// kernels (`SYCL_EXT_ONEAPI_FUNCTION_PROPERTY(…) void f(…)`), `parallel_for` /
    /// `single_task` submissions.
    MultipleKernels,
    /// Two loops that are not nested in each other run over the same data-sized range (their
    /// condition, with the loop variable renamed, is the same and reads a kernel parameter,
    /// a value computed from one, or a run-time size such as `get_local_size` / `blockDim`).
    RepeatedSweeps,
    /// A private array with more than one element (its extent evaluated with the parameter
    /// values and `#define`s: `acc[WPT]` with `WPT=1` does not count) updated in place:
    /// `acc[i] += …`, `acc[i][j] = fma(…, acc[i][j])`, `o[d] = o[d] * c + …`.
    AccumulatorArray,
    /// A private array with more than one element loaded by a plain copy from a local array
    /// (`Breg[w] = Bsub[k][w]`, `b[j] = vload4(0, &Bs[k][j])`): register caching fed from
    /// local tiles.
    RegistersFromLocal,
    /// A private value (scalar or array) loaded by plain reads of global memory in two
    /// places — a prologue and the loop — and stored into a local array
    /// (`a_next = A[…]; … As[r][c] = a_next;`): prefetching the next tile through registers.
    RegisterPrefetch,
    /// One loop accumulates both a value and its square (`s += v; ss += v * v`): several
    /// moments in one sweep.
    SingleSweepMoments,
    /// A running sum rescaled by the exponential of a difference, `s = s * exp(m - m_new)`,
    /// `s *= exp(…)`, or through a variable assigned from such an `exp` (online softmax).
    OnlineRescale,
    /// An atomic whose target is not local memory: OpenCL `atomic_*` / `atom_*`, CUDA
    /// `atomicAdd`… (not the `_block` variants), SYCL `atomic_ref` without `local_space`.
    GlobalAtomic,
    /// A SYCL group algorithm (`group_barrier`, `reduce_over_group`, `group_broadcast`, …)
    /// applied to something that is not a sub-group: a work-group collective.
    WorkGroupCollective,
    /// A SYCL group algorithm applied to a sub-group (an argument obtained from
    /// `get_sub_group()` or named `sg` / `sub_group` / `warp`).
    SubGroupCollective,
}

/// How a pattern recognises its evidence.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Matcher {
    /// A regular expression over the preprocessed text (comments and literals stripped,
    /// inactive `#if` branches removed).
    Regex(Regex),
    /// A structural fact.
    Feature(Feature),
}

/// One piece of weighted evidence for a level.
#[derive(Debug, Clone)]
pub struct Pattern {
    name: String,
    languages: Languages,
    matcher: Matcher,
    weight: f64,
}

impl Pattern {
    /// A pattern given by a regular expression (the `regex` crate's syntax); an error if it
    /// does not compile.
    pub fn regex(
        name: impl Into<String>,
        languages: Languages,
        regex: &str,
        weight: f64,
    ) -> Result<Pattern, ClassifyError> {
        let name = name.into();
        match Regex::new(regex) {
            Ok(r) => Ok(Pattern {
                name,
                languages,
                matcher: Matcher::Regex(r),
                weight,
            }),
            Err(source) => Err(ClassifyError::Pattern { name, source }),
        }
    }

    /// A pattern given by a structural fact.
    pub fn feature(
        name: impl Into<String>,
        languages: Languages,
        feature: Feature,
        weight: f64,
    ) -> Pattern {
        Pattern {
            name: name.into(),
            languages,
            matcher: Matcher::Feature(feature),
            weight,
        }
    }

    /// The name reported in evidence.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The languages it applies to.
    pub fn languages(&self) -> Languages {
        self.languages
    }

    /// How it matches.
    pub fn matcher(&self) -> &Matcher {
        &self.matcher
    }

    /// What it adds to its level's score when it fires (once, however often it matches).
    pub fn weight(&self) -> f64 {
        self.weight
    }
}

/// The evidence for one level: patterns and the score they must reach.
#[derive(Debug, Clone)]
pub struct LevelRule {
    /// Score the fired patterns' weights must reach (`>=`) for the level to pass.
    pub threshold: f64,
    /// The patterns.
    pub patterns: Vec<Pattern>,
}

impl LevelRule {
    /// A level that passes when the fired `patterns` reach `threshold`.
    pub fn new(threshold: f64, patterns: Vec<Pattern>) -> Self {
        LevelRule {
            threshold,
            patterns,
        }
    }
}

/// The levels of one dimension, lowest first. Level 0 is the fallback: it has no patterns and
/// always passes.
#[derive(Debug, Clone)]
pub struct DimensionRules {
    /// Dimension name, as in the descriptor space.
    pub name: String,
    /// One rule per level.
    pub levels: Vec<LevelRule>,
}

impl DimensionRules {
    /// The dimension `name` with the fallback level 0 (no patterns, threshold 0) followed by
    /// `levels` (levels 1, 2, …).
    pub fn with_fallback(name: impl Into<String>, levels: Vec<LevelRule>) -> Self {
        DimensionRules {
            name: name.into(),
            levels: std::iter::once(LevelRule::new(0.0, vec![]))
                .chain(levels)
                .collect(),
        }
    }
}

/// The complete rule table of a [`StaticClassifier`](crate::StaticClassifier): for each
/// dimension, for each level, weighted patterns and a threshold. The winning level of a
/// dimension is the highest one whose fired patterns' weights reach its threshold.
///
/// [`RuleSet::kernel_default`] documents the default table.
#[derive(Debug, Clone)]
pub struct RuleSet {
    /// Dimensions in descriptor order.
    pub dimensions: Vec<DimensionRules>,
}

impl RuleSet {
    /// Adds a pattern to a level of a dimension.
    ///
    /// ```
    /// use kf_classify::{Languages, Pattern, RuleSet};
    /// let mut rules = RuleSet::kernel_default().unwrap();
    /// let tma = Pattern::regex("cuda_tma", Languages::CUDA, r"\bcp\.async\.bulk\b", 2.0).unwrap();
    /// rules.add_pattern("memory_access", 3, tma).unwrap();
    /// assert!(rules.add_pattern("nope", 1, Pattern::regex("x", Languages::ALL, "x", 1.0).unwrap()).is_err());
    /// ```
    pub fn add_pattern(
        &mut self,
        dimension: &str,
        level: usize,
        pattern: Pattern,
    ) -> Result<(), ClassifyError> {
        self.level_mut(dimension, level)?.patterns.push(pattern);
        Ok(())
    }

    /// Sets the threshold of a level of a dimension.
    pub fn set_threshold(
        &mut self,
        dimension: &str,
        level: usize,
        threshold: f64,
    ) -> Result<(), ClassifyError> {
        self.level_mut(dimension, level)?.threshold = threshold;
        Ok(())
    }

    fn level_mut(
        &mut self,
        dimension: &str,
        level: usize,
    ) -> Result<&mut LevelRule, ClassifyError> {
        let dim = self
            .dimensions
            .iter_mut()
            .find(|d| d.name == dimension)
            .ok_or_else(|| ClassifyError::UnknownDimension(dimension.to_owned()))?;
        let levels = dim.levels.len();
        dim.levels
            .get_mut(level)
            .ok_or_else(|| ClassifyError::UnknownLevel {
                dimension: dimension.to_owned(),
                level,
                levels,
            })
    }

    /// The default table over [`DescriptorSpace::kernel_default`](kf_core::DescriptorSpace::kernel_default).
    /// Patterns match the preprocessed text: comments and string literals removed, inactive
    /// `#if` branches dropped (see [`crate::source`]). Each pattern counts once, whatever the
    /// number of matches. "Feature" patterns are structural facts ([`Feature`]).
    ///
    /// # `memory_access`
    ///
    /// * **0 `global`**: fallback, plain global loads.
    /// * **1 `coalesced_vectorised`** (threshold 1): explicit vector or block access.
    ///   `vload_vstore` (OpenCL `vloadN` / `vstoreN`, w 1), `vector_pointer` (a pointer to or a
    ///   cast to `float4*`, `__half2*`, `sycl::float2*`…, w 1), `vector_type` (`float4`,
    ///   `half2`, `__half2`, `sycl::vec<`, `marray<`…, w 1), `block_io`
    ///   (`intel_sub_group_block_read`, `sub_group_block_*`, SYCL `group_load` /
    ///   `group_store`, w 1). Coalescing by index arithmetic alone is not credited.
    /// * **2 `local_tiled`** (threshold 1): explicit local / shared memory. OpenCL
    ///   `opencl_local` (`__local`, or `local` before a type, w 1); CUDA `cuda_shared`
    ///   (`__shared__`, w 1); SYCL `sycl_local_accessor` (`local_accessor<`,
    ///   `access::target::local`, w 1), `sycl_group_local_memory`
    ///   (`group_local_memory[_for_overwrite]<`, w 1), `sycl_work_group_static`
    ///   (`work_group_static<`, work-group scratch memory, w 1).
    /// * **3 `multi_level`** (threshold 2): local memory plus another level.
    ///   `local_memory` ([`Feature::LevelPasses`]`(2)`, w 1), `double_buffer_decl` (a local
    ///   array whose leading extent is 2, w 1), `ping_pong_index` (`[(t + 1) % 2]`, `[buf ^ 1]`,
    ///   `buf ^= 1`, `cur = t & 1`, `b = 1 - b`, w 1), `prefetch_call` (`prefetch(`,
    ///   `__builtin_prefetch`, `joint_prefetch`, `.prefetch(`, PTX `prefetch.global`, w 2:
    ///   an explicit prefetch is a memory level of its own), `prefetch_named` (identifiers
    ///   containing `prefetch`, w 1),
    ///   `async_copy` (`async_work_group_copy`, `async_work_group_strided_copy`, `cp.async`,
    ///   `__pipeline_memcpy_async`, `memcpy_async`, `cuda::pipeline`, w 2),
    ///   `registers_from_local` ([`Feature::RegistersFromLocal`], w 1), `register_prefetch`
    ///   ([`Feature::RegisterPrefetch`], w 1).
    ///
    /// # `algorithm_structure`
    ///
    /// * **0 `multi_pass`**: fallback, reached when level 1's baseline is taken away.
    /// * **1 `fused`** (threshold 1): one kernel, one sweep. `one_kernel_one_sweep`
    ///   ([`Feature::Always`], w 1), `several_kernels` ([`Feature::MultipleKernels`], w −1),
    ///   `repeated_sweeps` ([`Feature::RepeatedSweeps`], w −1).
    /// * **2 `single_pass`** (threshold 2): online / single-sweep statistics.
    ///   `online_rescale` ([`Feature::OnlineRescale`], w 2), `welford_update`
    ///   (`mean += delta / n`, w 2), `welford_m2` (`m2 += delta…`, w 1), `welford_named`
    ///   (identifiers containing `welford`, w 1), `single_sweep_moments`
    ///   ([`Feature::SingleSweepMoments`], w 2), `running_names` (`running_*`, `online_*`
    ///   identifiers, w 1).
    /// * **3 `tiled_register_blocked`** (threshold 2): several outputs per work-item kept in
    ///   registers. `accumulator_array` ([`Feature::AccumulatorArray`], w 2),
    ///   `matrix_fragments` (CUDA `wmma::fragment` / `wmma::mma_sync`, PTX `mma.sync`, SYCL
    ///   `joint_matrix`, AMD `__builtin_amdgcn_mfma*`, Intel `*dpas*`, w 2). Flash-style
    ///   kernels land here through their output accumulator arrays.
    ///
    /// # `parallel_coordination`
    ///
    /// * **0 `independent`**: fallback.
    /// * **1 `work_group_barriers`** (threshold 1): OpenCL `opencl_barrier` (`barrier(`,
    ///   `work_group_barrier(`, w 1), `opencl_work_group_collective` (`work_group_reduce_*`,
    ///   `work_group_broadcast`, `work_group_scan_*`…, w 1), `wait_group_events` (w 1); CUDA
    ///   `cuda_syncthreads` (`__syncthreads*`, `block.sync()`, `this_thread_block().sync()`,
    ///   w 1); SYCL `sycl_item_barrier` (`.barrier(`, w 1), `sycl_work_group_collective`
    ///   ([`Feature::WorkGroupCollective`], w 1).
    /// * **2 `sub_group`** (threshold 1): OpenCL `opencl_sub_group_op` (`sub_group_reduce_*`,
    ///   `sub_group_broadcast`, `sub_group_shuffle*`, `sub_group_barrier`, `intel_sub_group_*`…,
    ///   w 1), `opencl_sub_group_ids` (`get_sub_group_id`, `get_sub_group_local_id`,
    ///   sub-group sizes, w 0.5), `sub_group_extension` (`cl_khr_subgroups`,
    ///   `cl_intel_subgroups`, `intel_reqd_sub_group_size`, w 0.5); CUDA `cuda_warp_op`
    ///   (`__shfl*`, `__ballot_sync`, `__any_sync`, `__all_sync`, `__match_*_sync`,
    ///   `__reduce_*_sync`, `__syncwarp`, `__activemask`, `tiled_partition`, `cg::reduce`,
    ///   `wmma::`, w 1); SYCL `sycl_sub_group_shuffle` (`permute_group_by_xor`,
    ///   `shift_group_left/right`, `select_from_group`, w 1), `sycl_sub_group_collective`
    ///   ([`Feature::SubGroupCollective`], w 1), `sycl_get_sub_group` (`get_sub_group(`,
    ///   `sycl::sub_group`, w 0.5), `sycl_required_sub_group_size`
    ///   (`[[intel::reqd_sub_group_size(N)]]`, `[[sycl::reqd_sub_group_size(N)]]`, the
    ///   `sub_group_size<N>` kernel property, w 0.5).
    /// * **3 `hierarchical`** (threshold 2): `barriers` ([`Feature::LevelPasses`]`(1)`, w 1),
    ///   `sub_groups` ([`Feature::LevelPasses`]`(2)`, w 1), `global_atomic`
    ///   ([`Feature::GlobalAtomic`], w 2), `grid_sync` (`grid.sync()`, `this_grid().sync()`,
    ///   `cg::sync(grid)`, w 2).
    ///
    /// The default patterns are tested; this returns an error only if one stops compiling.
    pub fn kernel_default() -> Result<RuleSet, ClassifyError> {
        use Languages as L;
        let re = Pattern::regex;
        let ft = Pattern::feature;
        let memory = DimensionRules::with_fallback(
            "memory_access",
            vec![
                LevelRule::new(
                    1.0,
                    vec![
                        re(
                            "vload_vstore",
                            L::OPENCL,
                            r"\bv(?:load|store)(?:_half|a_half)?(?:2|3|4|8|16)\s*\(",
                            1.0,
                        )?,
                        re(
                            "vector_pointer",
                            L::ALL,
                            r"\b(?:sycl::)?(?:float|half|double|u?int|u?short|u?char|__half|__nv_bfloat16)(?:2|3|4|8|16)\s*\*",
                            1.0,
                        )?,
                        re(
                            "vector_type",
                            L::ALL,
                            r"\b(?:sycl::)?(?:float|half|double|u?int|u?short|u?char|u?long)(?:2|3|4|8|16)\b|\b__half2\b|\b__nv_bfloat162\b|\bvec\s*<|\bmarray\s*<",
                            1.0,
                        )?,
                        re(
                            "block_io",
                            L::ALL,
                            r"\b(?:intel_)?sub_group_block_(?:read|write)\w*\s*\(|\bgroup_(?:load|store)\s*\(",
                            1.0,
                        )?,
                    ],
                ),
                LevelRule::new(
                    1.0,
                    vec![
                        re(
                            "opencl_local",
                            L::OPENCL,
                            r"\b__local\b|\blocal\s+(?:(?:const|volatile|unsigned)\s+)*(?:float|double|half|u?int|u?short|u?char|u?long|bool|size_t)\w*",
                            1.0,
                        )?,
                        re("cuda_shared", L::CUDA, r"\b__shared__\b", 1.0)?,
                        re(
                            "sycl_local_accessor",
                            L::SYCL,
                            r"\blocal_accessor\s*<|\btarget::local\b",
                            1.0,
                        )?,
                        re(
                            "sycl_group_local_memory",
                            L::SYCL,
                            r"\bgroup_local_memory(?:_for_overwrite)?\s*<",
                            1.0,
                        )?,
                        re(
                            "sycl_work_group_static",
                            L::SYCL,
                            r"\bwork_group_static\s*<|\bget_work_group_scratch_memory\s*\(|\bwork_group_scratch_size\b",
                            1.0,
                        )?,
                    ],
                ),
                LevelRule::new(
                    2.0,
                    vec![
                        ft("local_memory", L::ALL, Feature::LevelPasses(2), 1.0),
                        re(
                            "double_buffer_decl",
                            L::ALL,
                            r"(?:\b__local\b|\blocal\b|\b__shared__)[^;{}()]*?\w+\s*\[\s*2\s*\]\s*\[|\b(?:work_group_static|group_local_memory(?:_for_overwrite)?|local_accessor)\s*<\s*[\w:]+\s*\[\s*2\s*\]\s*\[",
                            1.0,
                        )?,
                        re(
                            "ping_pong_index",
                            L::ALL,
                            r"\[\s*\(?\s*\w+\s*(?:[+-]\s*1\s*)?\)?\s*(?:%\s*2|&\s*1|\^\s*1)\s*\]|\b\w+\s*\^=\s*1\b|=\s*\(?\s*\w+\s*(?:[+-]\s*1\s*)?\)?\s*(?:%\s*2|&\s*1|\^\s*1)\s*;|\b(\w+)\s*=\s*1\s*-\s*\w+\s*;",
                            1.0,
                        )?,
                        re(
                            "prefetch_call",
                            L::ALL,
                            r"\b(?:prefetch|__builtin_prefetch|__prefetch_global_l[12]|joint_prefetch)\s*\(|\.\s*prefetch\s*\(|\bprefetch\.global\b",
                            2.0,
                        )?,
                        re("prefetch_named", L::ALL, r"(?i)\b\w*prefetch\w*\b", 1.0)?,
                        re(
                            "async_copy",
                            L::ALL,
                            r"\basync_work_group(?:_strided)?_copy\s*\(|\bcp\.async\b|\b__pipeline_memcpy_async\s*\(|\bmemcpy_async\s*\(|\bcuda::pipeline\b",
                            2.0,
                        )?,
                        ft(
                            "registers_from_local",
                            L::ALL,
                            Feature::RegistersFromLocal,
                            1.0,
                        ),
                        ft("register_prefetch", L::ALL, Feature::RegisterPrefetch, 1.0),
                    ],
                ),
            ],
        );
        let algorithm = DimensionRules::with_fallback(
            "algorithm_structure",
            vec![
                LevelRule::new(
                    1.0,
                    vec![
                        ft("one_kernel_one_sweep", L::ALL, Feature::Always, 1.0),
                        ft("several_kernels", L::ALL, Feature::MultipleKernels, -1.0),
                        ft("repeated_sweeps", L::ALL, Feature::RepeatedSweeps, -1.0),
                    ],
                ),
                LevelRule::new(
                    2.0,
                    vec![
                        ft("online_rescale", L::ALL, Feature::OnlineRescale, 2.0),
                        re(
                            "welford_update",
                            L::ALL,
                            r"\b\w*mean\w*\s*\+=\s*\(?\s*\w*delta\w*\s*[/*]",
                            2.0,
                        )?,
                        re("welford_m2", L::ALL, r"(?i)\bm2\w*\s*\+=\s*\w*delta", 1.0)?,
                        re("welford_named", L::ALL, r"(?i)\b\w*welford\w*\b", 1.0)?,
                        ft(
                            "single_sweep_moments",
                            L::ALL,
                            Feature::SingleSweepMoments,
                            2.0,
                        ),
                        re("running_names", L::ALL, r"\b(?:running|online)_\w+", 1.0)?,
                    ],
                ),
                LevelRule::new(
                    2.0,
                    vec![
                        ft("accumulator_array", L::ALL, Feature::AccumulatorArray, 2.0),
                        re(
                            "matrix_fragments",
                            L::ALL,
                            r"\bwmma::(?:fragment|mma_sync)\b|\bmma\.sync\b|\bjoint_matrix(?:_mad)?\b|\b__builtin_amdgcn_mfma\w*|\bintel_sub_group_\w*dpas\w*",
                            2.0,
                        )?,
                    ],
                ),
            ],
        );
        let coordination = DimensionRules::with_fallback(
            "parallel_coordination",
            vec![
                LevelRule::new(
                    1.0,
                    vec![
                        re(
                            "opencl_barrier",
                            L::OPENCL,
                            r"\b(?:work_group_)?barrier\s*\(",
                            1.0,
                        )?,
                        re(
                            "opencl_work_group_collective",
                            L::OPENCL,
                            r"\bwork_group_(?:reduce|scan|broadcast|any|all)\w*\s*\(",
                            1.0,
                        )?,
                        re(
                            "wait_group_events",
                            L::OPENCL,
                            r"\bwait_group_events\s*\(",
                            1.0,
                        )?,
                        re(
                            "cuda_syncthreads",
                            L::CUDA,
                            r"\b__syncthreads(?:_count|_and|_or)?\s*\(|\b(?:block|cta|this_thread_block\s*\(\s*\))\s*\.\s*sync\s*\(|\bcg::sync\s*\(\s*block\b",
                            1.0,
                        )?,
                        re("sycl_item_barrier", L::SYCL, r"\.\s*barrier\s*\(", 1.0)?,
                        ft(
                            "sycl_work_group_collective",
                            L::SYCL,
                            Feature::WorkGroupCollective,
                            1.0,
                        ),
                    ],
                ),
                LevelRule::new(
                    1.0,
                    vec![
                        re(
                            "opencl_sub_group_op",
                            L::OPENCL,
                            r"\b(?:sub_group_(?:reduce|scan|broadcast|shuffle|any|all|barrier|block|elect|ballot|non_uniform|clustered)\w*|intel_sub_group_\w+)\s*\(",
                            1.0,
                        )?,
                        re(
                            "opencl_sub_group_ids",
                            L::OPENCL,
                            r"\bget_(?:sub_group_(?:local_)?id|sub_group_size|max_sub_group_size|num_sub_groups|enqueued_num_sub_groups)\s*\(",
                            0.5,
                        )?,
                        re(
                            "sub_group_extension",
                            L::OPENCL,
                            r"\bcl_(?:khr|intel)_subgroups\b|\bintel_reqd_sub_group_size\b",
                            0.5,
                        )?,
                        re(
                            "cuda_warp_op",
                            L::CUDA,
                            r"\b__(?:shfl\w*|ballot_sync|any_sync|all_sync|match_\w+_sync|reduce_\w+_sync|syncwarp|activemask)\s*\(|\btiled_partition\b|\bcg::reduce\s*\(|\bwmma::",
                            1.0,
                        )?,
                        re(
                            "sycl_sub_group_shuffle",
                            L::SYCL,
                            r"\b(?:permute_group_by_xor|shift_group_left|shift_group_right|select_from_group)\s*\(",
                            1.0,
                        )?,
                        ft(
                            "sycl_sub_group_collective",
                            L::SYCL,
                            Feature::SubGroupCollective,
                            1.0,
                        ),
                        re(
                            "sycl_get_sub_group",
                            L::SYCL,
                            r"\bget_sub_group\s*\(|\bsycl::sub_group\b",
                            0.5,
                        )?,
                        re(
                            "sycl_required_sub_group_size",
                            L::SYCL,
                            r"\breqd_sub_group_size\s*\(|\bsub_group_size\s*<",
                            0.5,
                        )?,
                    ],
                ),
                LevelRule::new(
                    2.0,
                    vec![
                        ft("barriers", L::ALL, Feature::LevelPasses(1), 1.0),
                        ft("sub_groups", L::ALL, Feature::LevelPasses(2), 1.0),
                        ft("global_atomic", L::ALL, Feature::GlobalAtomic, 2.0),
                        re(
                            "grid_sync",
                            L::CUDA | L::SYCL,
                            r"\bgrid\s*\.\s*sync\s*\(|\bthis_grid\s*\(\s*\)\s*\.\s*sync\s*\(|\bcg::sync\s*\(\s*grid\b",
                            2.0,
                        )?,
                    ],
                ),
            ],
        );
        Ok(RuleSet {
            dimensions: vec![memory, algorithm, coordination],
        })
    }
}
