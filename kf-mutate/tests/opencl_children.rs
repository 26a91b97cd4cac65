//! Every kernel the mutators generate must compile and compute the right answer: each
//! structural variant of the shipped templates, and the children of random walks of the
//! structural, parameter and mixed mutators from the naive seed, evaluated through the real
//! evaluator (verification on fresh inputs, another shape included) on the OpenCL backend.
//! Skips with a message when no OpenCL runtime is installed (run `scripts/setup.sh`), unless
//! `KF_REQUIRE_OPENCL=1`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use futures::executor::block_on;
use kf_backend_opencl::OpenClBackend;
use kf_core::prelude::*;
use kf_eval::task::{Gemm, KernelTask};
use kf_eval::KernelEvaluator;
use kf_manifest::Manifest;
use kf_mutate::{Feasibility, MixMutator, ParamMutator, StructuralMutator, TemplateLibrary};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

mod common;
use common::quick_config;

const NAIVE_CL: &str = kf_eval::kernels::OPENCL_GEMM_NAIVE.source;
const NAIVE_TOML: &str = kf_eval::kernels::OPENCL_GEMM_NAIVE.manifest;

/// The backend; `None` (skip) only when no OpenCL runtime is installed and
/// `KF_REQUIRE_OPENCL` is not `1`.
fn backend() -> Option<OpenClBackend> {
    kf_backend_opencl::testing::backend_or_skip()
}

fn elite(source: KernelSource, params: ParamValues) -> Elite {
    let eval = Evaluation::failed(Status::WrongValues, "");
    Elite {
        candidate: Candidate::seed(source, params),
        fitness: Fitness::of(&eval),
        evaluation: eval,
        descriptor: Descriptor::new([0, 2, 0], "test"),
    }
}

#[test]
fn generated_kernels_compile_and_are_correct() {
    let Some(backend) = backend() else {
        return;
    };
    let device = backend.device().clone();
    let gemm = Gemm::new(256, 192, 128).unwrap();
    let task = Arc::new(gemm.describe());
    let mut evaluator = KernelEvaluator::new(backend, quick_config(None));

    // (source, params, what) to evaluate, without duplicates.
    let mut kernels: Vec<(KernelSource, ParamValues, String)> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |source: KernelSource, params: ParamValues, what: String| {
        if seen.insert((source.content_hash(), params.canonical_key())) {
            kernels.push((source, params, what));
        }
    };

    // Every variant of every template, at its first feasible configuration.
    let library = TemplateLibrary::builtin().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for template in library.templates() {
        for structure in template.all_structures() {
            let Ok(variant) = template.instantiate(&structure) else {
                continue;
            };
            let space = Feasibility::new(&variant.manifest, &task.sizes, Some(&device));
            let params = space
                .repair(&variant.manifest.default_params(), &[], &mut rng, 5000)
                .unwrap_or_else(|| panic!("no feasible configuration for {structure}"));
            add(
                variant.source,
                params,
                format!("{} {}", template.name(), variant.structure),
            );
        }
    }

    // Every template's own starting points, fitted to the test's sizes (`Template::seeds_at`
    // beyond the base variant: gemm's explicit-vector form with a local A tile).
    let mut starts = 0;
    for template in library.templates() {
        for (source, params) in template.seeds_at(&task.sizes).unwrap().into_iter().skip(1) {
            starts += 1;
            add(source, params, format!("{} start", template.name()));
        }
    }
    assert!(starts >= 1, "no starting points");

    // Random walks of the mutators from the naive seed.
    let naive = Manifest::parse(NAIVE_TOML, "gemm_naive.toml", None)
        .unwrap()
        .kernel_source(NAIVE_CL);
    let structural = StructuralMutator::builtin().unwrap();
    let mix = MixMutator::new()
        .with(ParamMutator::new(), 1.0)
        .with(StructuralMutator::builtin().unwrap(), 1.0);
    for walk in 0..4u64 {
        let mut parent = elite(naive.clone(), ParamValues::new().with("WG", 16i64));
        for step in 0..8u64 {
            let ctx = MutationContext {
                step,
                seed: walk * 1000 + step,
                task: Arc::clone(&task),
                device: Some(Arc::new(device.clone())),
                inspirations: Vec::new(),
                hints: ArchiveHints::default(),
            };
            let mutation = if walk % 2 == 0 {
                block_on(structural.mutate(&parent, &ctx)).unwrap()
            } else {
                block_on(mix.mutate(&parent, &ctx)).unwrap()
            };
            for child in &mutation.children {
                add(
                    child.source.clone(),
                    child.params.clone(),
                    format!("walk {walk} step {step}: {}", child.origin.note),
                );
            }
            if let Some(child) = mutation.children.into_iter().last() {
                parent = elite(child.source, child.params);
            }
        }
    }

    let started = Instant::now();
    let mut failures = Vec::new();
    for (source, params, what) in &kernels {
        let evaluation = evaluator
            .evaluate(&gemm as &dyn KernelTask, source, params)
            .unwrap();
        if evaluation.status != Status::Correct {
            failures.push(format!(
                "{what} [{params}]: {} — {}",
                evaluation.status, evaluation.diagnostics
            ));
        }
    }
    eprintln!(
        "evaluated {} generated kernels in {:.1} s",
        kernels.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(kernels.len() >= 80, "only {} kernels", kernels.len());
    common::assert_no_failures(&failures);
}
