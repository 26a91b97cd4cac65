//! Strategies for the switches that only some languages' renderings of the shipped templates
//! have: SYCL's sub-group shuffles (`SHUFFLE`) and required sub-group size (`REQD_SG`). Each
//! asks `defined(…)` of its switch, so it never applies to a template without it.

use kf_core::Language;

use crate::strategy::{Change, MutationStrategy, StrategyLibrary, COORDINATION};
use crate::structural::StructuralMutator;
use crate::template::TemplateLibrary;
use crate::MutateError;

impl StrategyLibrary {
    /// The strategies over SYCL's own switches of the shipped templates:
    ///
    /// | strategy | what it does |
    /// |---|---|
    /// | `sub-group-shuffle` | sub-group data movement by shuffles: `select_from_group` (GEMM's A broadcast), `permute_group_by_xor` butterflies or `shift_group_left` trees (softmax reductions) |
    /// | `sub-group-collective` | back to the collectives `group_broadcast` / `reduce_over_group` |
    /// | `required-sub-group-size` | require sub-group size 8 or 16 (`sub_group_size` kernel property, SYCL's `reqd_sub_group_size`) |
    /// | `any-sub-group-size` | let the runtime choose the sub-group size |
    pub fn sycl_sub_groups() -> Self {
        let s = MutationStrategy::new;
        StrategyLibrary::new()
            .with(
                s("sub-group-shuffle", "move values across the sub-group by shuffles (select_from_group, permute_group_by_xor butterflies, shift_group_left trees) instead of collectives")
                    .requires("defined(SHUFFLE) && SHUFFLE == 0 && (SUBGROUP || REDUCE != 0)")
                    .change("SHUFFLE", Change::OneOf(vec![1, 2]))
                    .targets(COORDINATION, 2),
            )
            .with(
                s("sub-group-collective", "sub-group collectives (group_broadcast, reduce_over_group) instead of shuffles")
                    .requires("defined(SHUFFLE) && SHUFFLE != 0")
                    .change("SHUFFLE", Change::Set(0))
                    .weight(0.5),
            )
            .with(
                s("required-sub-group-size", "require a sub-group size of 8 or 16 lanes (the sub_group_size kernel property)")
                    .requires("defined(REQD_SG) && REQD_SG == 0")
                    .change("REQD_SG", Change::OneOf(vec![8, 16])),
            )
            .with(
                s("any-sub-group-size", "let the runtime choose the sub-group size")
                    .requires("defined(REQD_SG) && REQD_SG != 0")
                    .change("REQD_SG", Change::Set(0))
                    .weight(0.3),
            )
    }

    /// The strategies of `self` and of `other`, in that order (a strategy of `other` replaces
    /// one of the same name).
    pub fn and(self, other: StrategyLibrary) -> Self {
        other
            .strategies()
            .iter()
            .fold(self, |library, strategy| library.with(strategy.clone()))
    }

    /// The strategies for `language`'s own template switches (SYCL: [`Self::sycl_sub_groups`];
    /// none for the others).
    pub fn for_language(language: Language) -> Self {
        match language {
            Language::Sycl => Self::sycl_sub_groups(),
            _ => StrategyLibrary::new(),
        }
    }
}

impl StructuralMutator {
    /// The GEMM templates rendered in `language` ([`TemplateLibrary::builtin_for`]) with the
    /// dense linear algebra strategies (their GPU form for CUDA:
    /// [`StrategyLibrary::gpu_dense_linear_algebra`]) and the language's own
    /// ([`StrategyLibrary::for_language`]).
    pub fn builtin_for(language: Language) -> Result<Self, MutateError> {
        let shared = match language {
            Language::Cuda => StrategyLibrary::gpu_dense_linear_algebra(),
            _ => StrategyLibrary::dense_linear_algebra(),
        };
        Ok(Self::new(
            TemplateLibrary::builtin_for(language)?,
            shared.and(StrategyLibrary::for_language(language)),
        ))
    }

    /// The softmax templates rendered in `language` ([`TemplateLibrary::softmax_for`]) with the
    /// softmax strategies and the language's own ([`StrategyLibrary::for_language`]).
    pub fn softmax_for(language: Language) -> Result<Self, MutateError> {
        Ok(Self::new(
            TemplateLibrary::softmax_for(language)?,
            StrategyLibrary::softmax().and(StrategyLibrary::for_language(language)),
        ))
    }
}
