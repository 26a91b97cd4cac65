//! The shipped templates per kernel language: one table of template texts and manifests, so
//! that the GEMM and softmax libraries ([`TemplateLibrary::builtin_for`],
//! [`TemplateLibrary::softmax_for`]) and the conformance test read the same renderings.
//!
//! Every rendering of a template keeps the OpenCL C template's switches, their values and its
//! tunables (the shared [`StrategyLibrary`](crate::StrategyLibrary) moves them by name), and
//! may add switches of its own language (SYCL's sub-group shuffles and required sub-group
//! size), listed here as `extra_switches`.

use kf_core::Language;

use crate::error::MutateError;

/// The register-blocked SGEMM template's source (`templates/gemm_blocked.cl`).
pub const GEMM_BLOCKED_CL: &str = include_str!("../templates/gemm_blocked.cl");
/// The register-blocked SGEMM template's manifest (`templates/gemm_blocked.toml`).
pub const GEMM_BLOCKED_TOML: &str = include_str!("../templates/gemm_blocked.toml");
/// The K-split SGEMM template's source (`templates/gemm_ksplit.cl`).
pub const GEMM_KSPLIT_CL: &str = include_str!("../templates/gemm_ksplit.cl");
/// The K-split SGEMM template's manifest (`templates/gemm_ksplit.toml`).
pub const GEMM_KSPLIT_TOML: &str = include_str!("../templates/gemm_ksplit.toml");
/// The one-work-item-per-row softmax template's source (`templates/softmax_row.cl`).
pub const SOFTMAX_ROW_CL: &str = include_str!("../templates/softmax_row.cl");
/// The one-work-item-per-row softmax template's manifest (`templates/softmax_row.toml`).
pub const SOFTMAX_ROW_TOML: &str = include_str!("../templates/softmax_row.toml");
/// The work-group-per-row softmax template's source (`templates/softmax_group.cl`).
pub const SOFTMAX_GROUP_CL: &str = include_str!("../templates/softmax_group.cl");
/// The work-group-per-row softmax template's manifest (`templates/softmax_group.toml`).
pub const SOFTMAX_GROUP_TOML: &str = include_str!("../templates/softmax_group.toml");
/// The SYCL register-blocked SGEMM template's source (`templates/sycl/gemm_blocked.cpp`).
pub const SYCL_GEMM_BLOCKED_CPP: &str = include_str!("../templates/sycl/gemm_blocked.cpp");
/// The SYCL register-blocked SGEMM template's manifest (`templates/sycl/gemm_blocked.toml`).
pub const SYCL_GEMM_BLOCKED_TOML: &str = include_str!("../templates/sycl/gemm_blocked.toml");
/// The SYCL K-split SGEMM template's source (`templates/sycl/gemm_ksplit.cpp`).
pub const SYCL_GEMM_KSPLIT_CPP: &str = include_str!("../templates/sycl/gemm_ksplit.cpp");
/// The SYCL K-split SGEMM template's manifest (`templates/sycl/gemm_ksplit.toml`).
pub const SYCL_GEMM_KSPLIT_TOML: &str = include_str!("../templates/sycl/gemm_ksplit.toml");
/// The SYCL one-work-item-per-row softmax template's source (`templates/sycl/softmax_row.cpp`).
pub const SYCL_SOFTMAX_ROW_CPP: &str = include_str!("../templates/sycl/softmax_row.cpp");
/// The SYCL one-work-item-per-row softmax template's manifest (`templates/sycl/softmax_row.toml`).
pub const SYCL_SOFTMAX_ROW_TOML: &str = include_str!("../templates/sycl/softmax_row.toml");
/// The SYCL work-group-per-row softmax template's source (`templates/sycl/softmax_group.cpp`).
pub const SYCL_SOFTMAX_GROUP_CPP: &str = include_str!("../templates/sycl/softmax_group.cpp");
/// The SYCL work-group-per-row softmax template's manifest (`templates/sycl/softmax_group.toml`).
pub const SYCL_SOFTMAX_GROUP_TOML: &str = include_str!("../templates/sycl/softmax_group.toml");

/// One rendering of a shipped template.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rendering {
    /// The template's name (the same in every language).
    pub name: &'static str,
    /// Its kernel language.
    pub language: Language,
    /// The source text.
    pub text: &'static str,
    /// The manifest.
    pub manifest: &'static str,
    /// Switches this rendering has beyond the OpenCL C template's.
    pub extra_switches: &'static [&'static str],
    /// Tunables that only choose compiler flags (a manifest's `[[flags]]`), which only this
    /// rendering's compiler has; the other renderings' parameters are the same. Read by the
    /// tests that hold the renderings to one parameter set.
    #[cfg_attr(not(test), allow(dead_code))]
    pub flag_params: &'static [&'static str],
    /// Starting points a search in this language adds beside the base variant (see
    /// [`Template::with_start`](crate::Template::with_start)).
    pub starts: &'static [RenderingStart],
}

/// A [`Start`](crate::template::Start) of a rendering, as static data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenderingStart {
    /// Switch values.
    pub structure: &'static [(&'static str, i64)],
    /// Parameter values in place of the variant's first values.
    pub params: &'static [(&'static str, i64)],
    /// Why the start is there.
    pub why: &'static str,
}

/// SYCL's sub-group GEMM: scalar lanes that share A through 16-wide sub-group broadcasts, B
/// staged in group-local memory in 256-deep K tiles (16 KiB), a register block of 8
/// accumulators per lane, 16 × 32 work-groups. The seed article names sub-group operations and
/// 16-wide sub-groups as what SYCL code is tuned with; on the Intel CPU runtime, which
/// vectorises SYCL kernels across work-items, this is where SYCL's fastest GEMMs are (about
/// 155–175 GFLOP/s at 1024³ on the 2-core test machine, where the base variant's
/// explicit-vector family reaches 47 in SYCL against 205 in OpenCL C; see
/// `templates/README.md`). From the base variant it is four structural moves and a register
/// block, tile depth and group shape that the search's small per-kernel tuning rarely
/// combines: without this start, SYCL searches at 1024³ ended between 104 and 188 GFLOP/s.
const SYCL_SUB_GROUP_GEMM: RenderingStart = RenderingStart {
    structure: &[("VW", 1), ("LOCAL_B", 1), ("SUBGROUP", 1), ("REQD_SG", 16)],
    params: &[
        ("WG0", 16),
        ("WG1", 32),
        ("TM", 8),
        ("TN", 1),
        ("TK", 256),
        ("UNROLL", 2),
    ],
    why: "SYCL idiom: 16-wide sub-group broadcasts of A, B in group-local memory, 8 accumulators per lane",
};

/// OpenCL C's explicit-vector GEMM: each work-item computes a 16 × 32 block (`float16` loads
/// of B, `TN=2`: 32 accumulators, the AVX-512 register file), its work-group's rows of A
/// staged in group-local memory in 256-deep K tiles, the next B row prefetched, the k-loop
/// unrolled by 4, small 8 × 4 work-groups. On the Intel CPU OpenCL runtime, which leaves
/// `float16` code unvectorised across work-items, this family is OpenCL's fastest GEMM.
/// Measured with `kf eval` at 1024³ on the 2-core test machine (2026-12-04, load 1.2–1.5, three
/// rounds alternating): 352–371 GFLOP/s; 16 × 32 groups in 128-deep tiles 324–356, and 8 × 32
/// blocks in 256-deep tiles (an earlier start) 273–292. The small groups are chosen for
/// robustness as much as for speed: at 1024³ they make 64 work-groups, where 16 × 32 groups
/// make 4 and the 32 × 32 groups a search tuned its way to make 2, one per core, so that any
/// other load on a shared machine stalls half the kernel (that search's best, 322 GFLOP/s in
/// the search, re-timed at 235). It is three structural moves from the base variant (`VW=16`,
/// `LOCAL_A`, `PREFETCH`) plus a register block, tile depth and unroll that only pay together
/// (without the local A tile the family gives 113–119): OpenCL searches at 1024³ without a
/// start reached it in some runs (203–215) and ended between 109 and 166 in others. On a GPU's
/// OpenCL runtime, with less local memory than its 64 KiB A tile may need, this seed can fail
/// its evaluation (seeds are fitted to the task's sizes, not to device limits) and the search
/// goes on from the base variant.
const OPENCL_LOCAL_A_GEMM: RenderingStart = RenderingStart {
    structure: &[("VW", 16), ("LOCAL_A", 1), ("PREFETCH", 1)],
    params: &[
        ("WG0", 8),
        ("WG1", 4),
        ("TM", 16),
        ("TN", 2),
        ("TK", 256),
        ("UNROLL", 4),
    ],
    why: "OpenCL C idiom on CPUs: float16 register blocks of 16 x 32, A tiles in group-local memory, prefetched B",
};

/// OpenCL C's explicit-vector GEMM without local memory: each work-item computes an 8 × 64
/// block (`float16` loads of B, `TN=4`: 32 accumulators, the AVX-512 register file) straight
/// from global memory, 1 × 16 work-groups (128 of them at 1024³). Measured with `kf eval` at
/// 1024³ on the 2-core test machine (2026-12-04, load 0.8–1.6, four rounds alternating):
/// 343–415 GFLOP/s (median 378), against 327–353 (median 342) for the local-A start beside it
/// in the same rounds; a 40-configuration `kf tune` over this family's group shapes, tile
/// depths, unrolls and the local-A and prefetch switches put the no-local-memory forms with
/// `TM=8, TN=4, WG0=1` on top (392–408). Default searches reached this family by themselves in
/// some runs only (one of three seeds, `VW 1→16` with this block); from the local-A start it
/// is a switch, a register-block change and a group shape away, which the search's per-kernel
/// tuning rarely combines. Both starts stay: they fill different cells.
///
/// The start blocks K for the caches (`KC=256`: a 256 × 64 panel of B, 64 KiB, stays in L2)
/// and lets each group walk two row blocks under it (`RB=2`). Measured with kf-mutate's `bench`
/// example on a 2-core AMD EPYC (family 26 model 2, L1d 48 KiB, L2 1 MiB per core, L3 32
/// MiB; load 4–5; two rounds alternating, GFLOP/s): at 1024³ 412–415 against 333–338 without
/// the blocking and 338–382 for the local-A start, at 2048³ 284–394 against 291–313 (local-A
/// 363–368); pinned to one core (`taskset -c 0`) 194–215 against 173–178 at 1024³ and 180–192
/// against 150–157 at 2048³ (local-A 170–190 at both).
const OPENCL_VECTOR_GEMM: RenderingStart = RenderingStart {
    structure: &[("VW", 16)],
    params: &[
        ("WG0", 1),
        ("WG1", 16),
        ("TM", 8),
        ("TN", 4),
        ("TK", 64),
        ("UNROLL", 1),
        ("KC", 256),
        ("RB", 2),
    ],
    why: "OpenCL C idiom on CPUs: float16 register blocks of 8 x 64 read straight from global memory, K blocked for the L2 with two row blocks per group",
};

/// OpenCL C's row softmax: `float16` loads along the row, 16 consecutive rows per work-item
/// and 16 work-items per work-group, each exponential computed once into a private buffer
/// (`ALGO=3`) while the next row's maximum is taken in the same sweep (X read from memory
/// once, overlapping this row's arithmetic), with the manifest's first values for the rest:
/// the polynomial `exp2` (`EXP=3`), 2 accumulators, streaming stores. Measured with kf-mutate's
/// `softmax_bench` example at the task's default size on a 2-core AMD EPYC (family 26 model
/// 2; 2026-12-05, rounds alternating): 1.01–1.09 of a plain copy timed beside it, against
/// 0.77–0.81 for the earlier start (`ALGO=4`: blocked online, two `exp` per element, one row
/// per work-item; see `kf-mutate/src/softmax.rs`). The base variant is the scalar three-sweep
/// structure; this one is two structural moves away (`VW`, `ALGO`), and the search, which
/// tries one switch at a time, reached `softmax_row` only with narrower vectors.
const OPENCL_ROW_SOFTMAX: RenderingStart = RenderingStart {
    structure: &[("VW", 16), ("ALGO", 3)],
    params: &[("WG", 16), ("RPI", 16)],
    why: "OpenCL C idiom on CPUs: float16 loads, 16 rows per work-item, exponentials once into a private buffer while the next row's maximum is read, polynomial exp2",
};

impl Rendering {
    /// This rendering as the template for `task`: the OpenCL C template's `switches` and this
    /// rendering's own, the base `structure` and `params` (switches and parameters they do not
    /// name keep the template's defaults), and this rendering's starts.
    pub(crate) fn template(
        &self,
        task: &str,
        switches: &[&str],
        structure: crate::Structure,
        params: kf_core::ParamValues,
    ) -> Result<crate::Template, MutateError> {
        let template = crate::Template::new(
            self.name,
            task,
            self.text,
            self.manifest,
            switches.iter().chain(self.extra_switches).copied(),
        )?
        .with_base(structure, params)?;
        self.with_starts(template)
    }

    /// `template` with this rendering's starts added.
    pub(crate) fn with_starts(
        &self,
        mut template: crate::Template,
    ) -> Result<crate::Template, MutateError> {
        for start in self.starts {
            template = template.with_start(
                crate::Structure(
                    start
                        .structure
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), *v))
                        .collect(),
                ),
                start.params.iter().map(|(k, v)| (*k, *v)).collect(),
                start.why,
            )?;
        }
        Ok(template)
    }
}

/// Every shipped rendering.
const RENDERINGS: &[Rendering] = &[
    Rendering {
        name: "gemm_blocked",
        language: Language::OpenCl,
        text: GEMM_BLOCKED_CL,
        manifest: GEMM_BLOCKED_TOML,
        extra_switches: &[],
        flag_params: &[],
        starts: &[OPENCL_LOCAL_A_GEMM, OPENCL_VECTOR_GEMM],
    },
    Rendering {
        name: "gemm_ksplit",
        language: Language::OpenCl,
        text: GEMM_KSPLIT_CL,
        manifest: GEMM_KSPLIT_TOML,
        extra_switches: &[],
        flag_params: &[],
        starts: &[],
    },
    Rendering {
        name: "softmax_row",
        language: Language::OpenCl,
        text: SOFTMAX_ROW_CL,
        manifest: SOFTMAX_ROW_TOML,
        extra_switches: &[],
        flag_params: &["FAST_MATH"],
        starts: &[OPENCL_ROW_SOFTMAX],
    },
    Rendering {
        name: "softmax_group",
        language: Language::OpenCl,
        text: SOFTMAX_GROUP_CL,
        manifest: SOFTMAX_GROUP_TOML,
        extra_switches: &[],
        flag_params: &["FAST_MATH"],
        starts: &[],
    },
    Rendering {
        name: "gemm_blocked",
        language: Language::Sycl,
        text: SYCL_GEMM_BLOCKED_CPP,
        manifest: SYCL_GEMM_BLOCKED_TOML,
        extra_switches: &["SHUFFLE", "REQD_SG"],
        flag_params: &[],
        starts: &[SYCL_SUB_GROUP_GEMM],
    },
    Rendering {
        name: "gemm_ksplit",
        language: Language::Sycl,
        text: SYCL_GEMM_KSPLIT_CPP,
        manifest: SYCL_GEMM_KSPLIT_TOML,
        extra_switches: &[],
        flag_params: &[],
        starts: &[],
    },
    Rendering {
        name: "softmax_row",
        language: Language::Sycl,
        text: SYCL_SOFTMAX_ROW_CPP,
        manifest: SYCL_SOFTMAX_ROW_TOML,
        extra_switches: &[],
        flag_params: &[],
        starts: &[],
    },
    Rendering {
        name: "softmax_group",
        language: Language::Sycl,
        text: SYCL_SOFTMAX_GROUP_CPP,
        manifest: SYCL_SOFTMAX_GROUP_TOML,
        extra_switches: &["SHUFFLE"],
        flag_params: &[],
        starts: &[],
    },
];

/// The rendering of the template `name` in `language`.
pub(crate) fn rendering(name: &str, language: Language) -> Result<Rendering, MutateError> {
    RENDERINGS
        .iter()
        .find(|r| r.name == name && r.language == language)
        .copied()
        .ok_or_else(|| MutateError::NoTemplate {
            template: name.to_owned(),
            language,
        })
}

/// The kernel languages the shipped templates are rendered in.
pub fn template_languages() -> Vec<Language> {
    let mut out: Vec<Language> = Vec::new();
    for r in RENDERINGS {
        if !out.contains(&r.language) {
            out.push(r.language);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Start, StrategyLibrary, Structure, Template, TemplateLibrary};
    use kf_core::{KernelSource, ParamValues};

    fn libraries(language: Language) -> TemplateLibrary {
        TemplateLibrary::builtin_for(language)
            .unwrap()
            .with_softmax_for(language)
            .unwrap()
    }

    /// Every OpenCL C template has a rendering in every template language with the same task,
    /// switches (values included), tunables (the same values; the first, which is what a
    /// variant starts from, may differ: each rendering puts its runtime's fastest first), base
    /// structure and base parameters; extra switches are only the declared ones.
    #[test]
    fn every_rendering_matches_the_opencl_template() {
        let opencl = libraries(Language::OpenCl);
        for language in template_languages() {
            let other = libraries(language);
            assert_eq!(other.templates().len(), opencl.templates().len());
            for t in opencl.templates() {
                let r = other
                    .get(t.name())
                    .unwrap_or_else(|| panic!("no {language} rendering of {}", t.name()));
                assert_eq!(r.task(), t.task());
                assert_eq!(r.manifest().language, language, "{}", t.name());
                assert_eq!(r.manifest().entry, t.manifest().entry);
                let extra = rendering(t.name(), language).unwrap().extra_switches;
                for (name, values) in t.switches() {
                    assert_eq!(r.switches().get(name), Some(values), "{} {name}", t.name());
                }
                for name in r.switches().keys() {
                    assert!(
                        t.switches().contains_key(name) || extra.contains(&name.as_str()),
                        "{language} {}: undeclared switch {name}",
                        t.name()
                    );
                }
                let sorted = |values: &[kf_core::ParamValue]| {
                    let mut v: Vec<String> = values.iter().map(ToString::to_string).collect();
                    v.sort();
                    v
                };
                let flag_params = rendering(t.name(), Language::OpenCl).unwrap().flag_params;
                let own = rendering(t.name(), language).unwrap().flag_params;
                for name in r.manifest().params.keys() {
                    assert!(
                        t.manifest().params.contains_key(name)
                            || own.contains(&name.as_str())
                            || extra.contains(&name.as_str()),
                        "{language} {}: undeclared parameter {name}",
                        t.name()
                    );
                }
                for (name, values) in &t.manifest().params {
                    if language != Language::OpenCl && flag_params.contains(&name.as_str()) {
                        continue;
                    }
                    let theirs =
                        r.manifest().params.get(name).unwrap_or_else(|| {
                            panic!("{language} {}: no parameter {name}", t.name())
                        });
                    assert_eq!(
                        sorted(theirs),
                        sorted(values),
                        "{language} {} parameter {name}",
                        t.name()
                    );
                }
                for (k, v) in t.base().iter() {
                    assert_eq!(r.base().get(k), Some(v), "{} base {k}", t.name());
                }
                assert_eq!(
                    without_opencl_flag_params(t.name(), r.base_params()),
                    without_opencl_flag_params(t.name(), t.base_params()),
                    "{}",
                    t.name()
                );
            }
        }
    }

    /// The same structures instantiate in every language (the constraints agree up to the
    /// language's own switches at 0).
    #[test]
    fn the_same_structures_instantiate() {
        let opencl = libraries(Language::OpenCl);
        let sycl = libraries(Language::Sycl);
        for t in opencl.templates() {
            let r = sycl.get(t.name()).unwrap();
            for structure in t.all_structures() {
                assert_eq!(
                    t.instantiate(&structure).is_ok(),
                    r.instantiate(&structure).is_ok(),
                    "{} {structure}",
                    t.name()
                );
            }
        }
    }

    /// `language`'s `gemm_blocked`, its start number `index` and its seeds: the base variant,
    /// then one seed per start (`starts` of them), start `index`'s the only one whose source
    /// contains `marker`.
    fn gemm_start(
        language: Language,
        starts: usize,
        index: usize,
        marker: &str,
    ) -> (Template, Start, Vec<(KernelSource, ParamValues)>) {
        let library = libraries(language);
        let blocked = library.get("gemm_blocked").unwrap().clone();
        assert_eq!(blocked.starts().len(), starts, "{:?}", blocked.starts());
        let start = blocked.starts()[index].clone();
        let seeds = blocked.seeds().unwrap();
        assert_eq!(seeds.len(), 1 + starts);
        for (i, seed) in seeds.iter().enumerate() {
            assert_eq!(seed.0.text.contains(marker), i == index + 1, "seed {i}");
        }
        (blocked, start, seeds)
    }

    /// The test's small GEMM sizes (K below SYCL's start's 256-deep tiles, M below OpenCL's
    /// 512-row A tile, N not a multiple of 512).
    fn small_gemm() -> indexmap::IndexMap<String, i64> {
        [("M", 256), ("N", 192), ("K", 128)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
    }

    /// `params` without the tunables that only choose OpenCL C compiler flags for `template`
    /// (the other renderings do not have them).
    fn without_opencl_flag_params(template: &str, params: &ParamValues) -> ParamValues {
        let flag_params = rendering(template, Language::OpenCl).unwrap().flag_params;
        params
            .iter()
            .filter(|(k, _)| !flag_params.iter().any(|f| f == k))
            .map(|(k, v)| (k, v.clone()))
            .collect()
    }

    fn int(p: &ParamValues, name: &str) -> Option<i64> {
        p.get(name).and_then(|v| v.as_i64())
    }

    /// A SYCL gemm search also starts from the sub-group GEMM (its seed follows the base
    /// variant's).
    #[test]
    fn sycl_gemm_starts_from_its_sub_group_form() {
        let (blocked, start, seeds) = gemm_start(Language::Sycl, 1, 0, "group_broadcast");
        assert_eq!(start.structure.get("SUBGROUP"), Some(1));
        assert_eq!(start.structure.get("VW"), Some(1));
        assert_eq!(int(&seeds[1].1, "TM"), Some(8));
        // At a K smaller than the start's 256-deep tile, the seed is fitted: the nearest
        // feasible configuration, its register block kept.
        let fitted = blocked.seeds_at(&small_gemm()).unwrap();
        assert_eq!(int(&fitted[1].1, "TK"), Some(128));
        assert_eq!(
            (int(&fitted[1].1, "TM"), int(&fitted[1].1, "TN")),
            (Some(8), Some(1))
        );
        assert_eq!(fitted[0].1, seeds[0].1, "the base variant already fits");
    }

    /// OpenCL C's `gemm_blocked` starts a search also from its explicit-vector form with a
    /// local A tile, fitted to the task's sizes; its other templates have no starts.
    #[test]
    fn opencl_gemm_starts_from_its_explicit_vector_form() {
        let (blocked, start, seeds) =
            gemm_start(Language::OpenCl, 2, 0, "__local float As[BM][TK + PAD];");
        assert_eq!(start.structure.get("VW"), Some(16));
        assert_eq!(start.structure.get("LOCAL_A"), Some(1));
        assert!(seeds[1].0.text.contains("prefetch(B + "));
        assert_eq!(
            (int(&seeds[1].1, "WG0"), int(&seeds[1].1, "WG1")),
            (Some(8), Some(4))
        );
        // At 256 × 192 × 128 the 512-wide column block and the 512-row A tile do not divide
        // the sizes: the fitted seed is feasible there and keeps its two float16 columns.
        let fitted = blocked.seeds_at(&small_gemm()).unwrap();
        let p = &fitted[1].1;
        let (wg0, tn, tk) = (
            int(p, "WG0").unwrap(),
            int(p, "TN").unwrap(),
            int(p, "TK").unwrap(),
        );
        assert_eq!(192 % (wg0 * tn * 16), 0, "{p}");
        assert_eq!(128 % tk, 0, "{p}");
        assert_eq!(
            256 % (int(p, "WG1").unwrap() * int(p, "TM").unwrap()),
            0,
            "{p}"
        );
        assert_eq!(int(p, "TN"), Some(2), "{p}");
        assert_eq!(int(&seeds[1].1, "TM"), Some(16));
        let opencl = libraries(Language::OpenCl);
        for template in opencl.templates() {
            if !["gemm_blocked", "softmax_row"].contains(&template.name()) {
                assert!(template.starts().is_empty(), "{}", template.name());
            }
        }
    }

    /// OpenCL C's `gemm_blocked` also starts from its explicit-vector form without local
    /// memory: 8 × 64 register blocks (`float16` B loads) in 1 × 16 work-groups.
    #[test]
    fn opencl_gemm_also_starts_from_vector_blocks_without_local_memory() {
        // No local tile of A and no prefetching: the only seed with `float16` loads of B and
        // neither.
        let library = libraries(Language::OpenCl);
        let blocked = library.get("gemm_blocked").unwrap();
        let start = &blocked.starts()[1];
        assert_eq!(start.structure.get("VW"), Some(16));
        assert_eq!(start.structure.get("LOCAL_A"), Some(0));
        assert_eq!(start.structure.get("PREFETCH"), Some(0));
        let seeds = blocked.seeds().unwrap();
        let p = &seeds[2].1;
        assert_eq!(
            ["TM", "TN", "WG0", "WG1", "TK", "UNROLL", "KC", "RB"].map(|k| int(p, k)),
            [8, 4, 1, 16, 64, 1, 256, 2].map(Some),
            "{p}"
        );
        assert!(seeds[2].0.text.contains("vload16"), "{}", seeds[2].0.text);
        assert!(!seeds[2].0.text.contains("__local float As"));
        // At 256 × 192 × 128 the 64-wide column block does not divide N = 192 four times
        // over in one group: the fitted seed divides the sizes and keeps float16 loads.
        let fitted = blocked.seeds_at(&small_gemm()).unwrap();
        let p = &fitted[2].1;
        let (tm, tn, wg0, wg1) = (
            int(p, "TM").unwrap(),
            int(p, "TN").unwrap(),
            int(p, "WG0").unwrap(),
            int(p, "WG1").unwrap(),
        );
        assert_eq!(192 % (wg0 * tn * 16), 0, "{p}");
        let rb = int(p, "RB").unwrap();
        assert_eq!(256 % (wg1 * tm * rb), 0, "{p}");
        // K = 128 is one K block: the fitted seed's KC divides it (or blocks nothing).
        assert_eq!(128 % int(p, "KC").unwrap().max(1), 0, "{p}");
    }

    /// OpenCL C's `softmax_row` starts a softmax search also from its float16 form with the
    /// exponentials in a private buffer and 16 rows per work-item, compiled in the relaxed
    /// floating-point mode its manifest lists first.
    #[test]
    fn opencl_softmax_starts_from_its_vector_row_form() {
        let opencl = libraries(Language::OpenCl);
        let row = opencl.get("softmax_row").unwrap();
        let [start] = row.starts() else {
            panic!("one start expected: {:?}", row.starts());
        };
        assert_eq!(start.structure.get("VW"), Some(16));
        assert_eq!(start.structure.get("ALGO"), Some(3));
        let sizes: indexmap::IndexMap<String, i64> = [("ROWS", 4096), ("COLS", 1024)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let seeds = row.seeds_at(&sizes).unwrap();
        let (variant, params) = &seeds[1];
        assert!(variant.text.contains("vload16"), "{}", variant.text);
        assert_eq!(int(params, "WG"), Some(16));
        assert_eq!(int(params, "RPI"), Some(16));
        let manifest = kf_manifest::Manifest::from_kernel(variant).unwrap();
        let resolved = manifest.resolve_params(params).unwrap();
        assert_eq!(
            manifest.compile_flags(&resolved).unwrap(),
            vec!["-cl-fast-relaxed-math"]
        );
        let precise = manifest
            .resolve_params(&resolved.clone().with("FAST_MATH", 0i64))
            .unwrap();
        assert!(manifest.compile_flags(&precise).unwrap().is_empty());
    }

    /// SYCL variants keep `#include <sycl/sycl.hpp>` before their switch definitions, and the
    /// language's constructs appear exactly where the switches ask for them.
    #[test]
    fn sycl_variants_resolve_their_switches() {
        let sycl = libraries(Language::Sycl);
        let blocked = sycl.get("gemm_blocked").unwrap();
        let v = blocked
            .instantiate(&Structure::new().with("VW", 16).with("LOCAL_B", 1))
            .unwrap();
        let text = &v.source.text;
        let include = text.find("#include <sycl/sycl.hpp>").unwrap();
        let define = text.find("#define VW 16").unwrap();
        assert!(include < define, "{text}");
        assert!(text.contains("work_group_static<b_tile_t>"));
        assert!(text.contains("sycl::vec<float, VW>"));
        assert!(!text.contains("group_broadcast"));
        let v = blocked
            .instantiate(&Structure::new().with("SUBGROUP", 1).with("SHUFFLE", 1))
            .unwrap();
        assert!(v.source.text.contains("select_from_group"));
        assert!(v.source.text.contains("sub_group_size<WG0>"));
        assert!(!v.source.text.contains("sycl::vec"));
        let v = blocked
            .instantiate(&Structure::new().with("REQD_SG", 16))
            .unwrap();
        assert!(v.source.text.contains("sub_group_size<REQD_SG>"));
        let group = sycl.get("softmax_group").unwrap();
        for (shuffle, call) in [
            (0, "reduce_over_group"),
            (1, "permute_group_by_xor"),
            (2, "shift_group_left"),
        ] {
            let v = group
                .instantiate(&Structure::new().with("REDUCE", 1).with("SHUFFLE", shuffle))
                .unwrap();
            assert!(v.source.text.contains(call), "SHUFFLE={shuffle}");
        }
        assert!(group
            .instantiate(&Structure::new().with("REDUCE", 0).with("SHUFFLE", 1))
            .is_err());
        assert!(StrategyLibrary::sycl_sub_groups()
            .get("required-sub-group-size")
            .is_some());
    }

    /// Every transformation means the same in every language: each strategy of the OpenCL
    /// libraries, applied to each structure of each template with the same random draws, makes
    /// the same move (template, switches, parameters) on the SYCL rendering; the SYCL-only
    /// switches stay at 0.
    #[test]
    fn every_strategy_moves_the_renderings_alike() {
        use rand::SeedableRng;
        let strategies = StrategyLibrary::dense_linear_algebra().and(StrategyLibrary::softmax());
        let opencl = libraries(Language::OpenCl);
        let sycl = libraries(Language::Sycl);
        let mut moves = 0;
        for t in opencl.templates() {
            let r = sycl.get(t.name()).unwrap();
            for structure in t.all_structures() {
                let Ok(variant) = t.instantiate(&structure) else {
                    continue;
                };
                let params = variant.manifest.default_params();
                for strategy in strategies.strategies() {
                    let mut rng_a = rand_chacha::ChaCha8Rng::seed_from_u64(3);
                    let mut rng_b = rand_chacha::ChaCha8Rng::seed_from_u64(3);
                    let a = strategy
                        .apply(&opencl, t, &structure, &params, &mut rng_a)
                        .unwrap();
                    let b = strategy
                        .apply(
                            &sycl,
                            r,
                            &r.complete(&structure).unwrap(),
                            &params,
                            &mut rng_b,
                        )
                        .unwrap();
                    let what = format!("{} on {} {structure}", strategy.name(), t.name());
                    let (a, b) = match (a, b) {
                        (None, None) => continue,
                        (Some(a), Some(b)) => (a, b),
                        _ => panic!("{what}: applies in one language only"),
                    };
                    assert_eq!(a.template, b.template, "{what}");
                    let target = sycl.get(&b.template).unwrap();
                    let extra = rendering(&b.template, Language::Sycl)
                        .unwrap()
                        .extra_switches;
                    for (k, v) in b.structure.iter() {
                        let expected = if extra.contains(&k) {
                            Some(0)
                        } else {
                            a.structure.get(k)
                        };
                        assert_eq!(Some(v), expected, "{what}: switch {k}");
                    }
                    assert_eq!(
                        a.structure.iter().count() + extra.len(),
                        target.switches().len()
                    );
                    // OpenCL C's flag-choosing tunables are its own.
                    let a_params = without_opencl_flag_params(&a.template, &a.params);
                    assert_eq!(a_params.canonical_key(), b.params.canonical_key(), "{what}");
                    moves += 1;
                }
            }
        }
        assert!(moves > 500, "only {moves} moves compared");
    }

    #[test]
    fn a_missing_rendering_is_a_typed_error() {
        assert!(matches!(
            rendering("gemm_ksplit", Language::Cuda),
            Err(MutateError::NoTemplate { .. })
        ));
    }

    /// CUDA has its own GPU renderings: the GEMM and softmax libraries for CUDA are those of
    /// `TemplateLibrary::cuda`, one template each, in CUDA.
    #[test]
    fn cuda_libraries_are_the_gpu_renderings() {
        let gemm = TemplateLibrary::builtin_for(Language::Cuda).unwrap();
        let softmax = TemplateLibrary::softmax_for(Language::Cuda).unwrap();
        for (library, name, task) in [
            (&gemm, "gemm_blocked", "gemm"),
            (&softmax, "softmax_group", "softmax"),
        ] {
            assert_eq!(library.templates().len(), 1);
            let t = library.get(name).unwrap();
            assert_eq!(t.task(), task);
            assert_eq!(t.manifest().language, Language::Cuda);
        }
    }
}
