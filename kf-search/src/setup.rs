//! The offline search the examples and `kf search` run: which seeds and which mutator, per task
//! and kernel language.

use kf_core::{Candidate, KernelSource, Language, ParamValues};
use kf_eval::tasks::KernelTask;
use kf_mutate::{
    CellPredictor, MixMutator, ParamMutator, ParamMutatorConfig, StructuralMutator, TemplateLibrary,
};

use super::{seeds_for, SearchError};

/// Seeds and mutator for `task` in `language`, with no LLM:
///
/// - OpenCL C for a task without templates (a task file): the task's baseline; parameter
///   moves (add the user's kernels as further seeds).
/// - OpenCL C: the task's naive baseline and the base variant of every template for the task;
///   structural transformations of the templates (weight 3, aimed at empty cells) and parameter
///   moves (weight 1, two children each).
/// - SYCL: the same as OpenCL C, over the SYCL renderings of the templates (with SYCL's own
///   sub-group strategies).
/// - CUDA (no CUDA renderings in the search yet): the naive baseline and, for GEMM, the shipped
///   tiled kernel; parameter moves (each new kernel is tuned as well).
///
/// The first seed is the task baseline, whose throughput the report compares against.
pub fn offline_search(
    task: &dyn KernelTask,
    language: Language,
) -> Result<(Vec<Candidate>, MixMutator), SearchError> {
    offline_search_with(task, language, None)
}

/// [`offline_search`] whose structural mutator aims at empty cells as `cells` predicts them
/// ([`StructuralMutator::predicting_cells`]); the shipped search passes its classifier's
/// prediction ([`crate::cell_predictor`]).
pub fn offline_search_with(
    task: &dyn KernelTask,
    language: Language,
    cells: Option<CellPredictor>,
) -> Result<(Vec<Candidate>, MixMutator), SearchError> {
    let name = task.name().to_string();
    let templated = matches!(name.as_str(), "gemm" | "softmax");
    let seeds_and_mutator = if language == Language::OpenCl && !templated {
        // A task with no kernel templates (a task file): parameter moves over the seeds'
        // manifest params.
        let mutator = MixMutator::new().with(ParamMutator::new(), 1.0);
        (seeds_for(task, language, Vec::new()), mutator)
    } else if matches!(language, Language::OpenCl | Language::Sycl) && templated {
        let (library, structural) = match name.as_str() {
            "softmax" => (
                TemplateLibrary::softmax_for(language),
                StructuralMutator::softmax_for(language),
            ),
            _ => (
                TemplateLibrary::builtin_for(language),
                StructuralMutator::builtin_for(language),
            ),
        };
        let library = library?;
        let structural = match cells {
            Some(cells) => structural?.predicting_cells(cells),
            None => structural?,
        };
        let extra = template_seeds(&library, &name)?;
        // Two children per parameter move, as per structural move: with four, parameter moves
        // (which stay in their parent's cell, and each child is tuned besides) took 35 of 57
        // children in a default gemm run and the structural ones that reach new cells 22.
        let params = ParamMutator::new().with_config(ParamMutatorConfig {
            children: 2,
            ..ParamMutatorConfig::default()
        });
        let mutator = MixMutator::new().with(structural, 3.0).with(params, 1.0);
        (seeds_for(task, language, extra), mutator)
    } else {
        let extra = match name.as_str() {
            "gemm" => vec![tiled_gemm(language)?],
            _ => Vec::new(),
        };
        let mutator = MixMutator::new().with(ParamMutator::new(), 1.0);
        (seeds_for(task, language, extra), mutator)
    };
    if seeds_and_mutator.0.is_empty() && templated {
        return Err(SearchError::NoSeed {
            task: name,
            language,
        });
    }
    Ok(seeds_and_mutator)
}

/// The shipped tiled GEMM in SYCL or CUDA (from kf-eval's kernels), with its manifest's first
/// parameter values.
fn tiled_gemm(language: Language) -> Result<(KernelSource, ParamValues), SearchError> {
    let shipped = match language {
        Language::Sycl | Language::Cuda => kf_eval::kernels::shipped("gemm_tiled", language),
        _ => None,
    }
    .ok_or(SearchError::NoShippedKernel {
        kernel: "gemm_tiled",
        language,
    })?;
    let manifest = shipped.manifest()?;
    Ok((
        manifest.kernel_source(shipped.source),
        manifest.default_params(),
    ))
}

/// The base variant of every template of `library` for `task`, with its manifest's first
/// parameter values: the seeds the structural mutator transforms.
pub fn template_seeds(
    library: &TemplateLibrary,
    task: &str,
) -> Result<Vec<(KernelSource, ParamValues)>, SearchError> {
    let mut seeds = Vec::new();
    for template in library.for_task(task) {
        let variant = template.instantiate(template.base())?;
        let params = variant.manifest.default_params();
        seeds.push((variant.source, params));
    }
    Ok(seeds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SYCL searches the templates as OpenCL does: the same seeds (the baseline, then each
    /// template's base variant, in SYCL) and a structural mutator beside the parameter moves.
    #[test]
    fn sycl_gets_the_templates_like_opencl() {
        for task in ["gemm", "softmax"] {
            let sizes = kf_eval::tasks::parse_sizes("").unwrap();
            let task = kf_eval::tasks::builtin_task(task, &sizes).unwrap();
            let (cl_seeds, cl_mix) = offline_search(task.as_ref(), Language::OpenCl).unwrap();
            let (seeds, mix) = offline_search(task.as_ref(), Language::Sycl).unwrap();
            assert_eq!(mix.names(), cl_mix.names());
            assert!(mix.names().contains(&"structural"));
            assert_eq!(seeds.len(), cl_seeds.len());
            assert!(seeds.iter().all(|s| s.source.language == Language::Sycl));
        }
    }
}
