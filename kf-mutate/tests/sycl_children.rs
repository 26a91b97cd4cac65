//! The SYCL renderings of the templates compute the right answer after every transformation:
//! the base variant of every template, every strategy (the shared ones and SYCL's own) applied
//! to it, and SYCL's own strategies applied once more to those children (so that the
//! sub-group shuffles meet the sub-group variants that use them), and SYCL's own starting
//! points (`Template::seeds_at` beyond the base variant, fitted to the test's sizes), each evaluated through the
//! real evaluator (verification on fresh inputs, other shapes included) on the SYCL backend.
//! Skips with a message when no SYCL runtime is installed (`scripts/setup.sh --sycl`), unless
//! `KF_REQUIRE_SYCL=1`.

mod common;
use common::quick_config;

use std::time::Instant;

use kf_backend_sycl::SyclBackend;
use kf_core::prelude::*;
use kf_eval::task::{builtin_task, parse_sizes};
use kf_eval::KernelEvaluator;
use kf_mutate::{StrategyLibrary, StructuralMutator};

/// The backend, or `None` (after printing why) when this machine has no SYCL runtime and
/// `KF_REQUIRE_SYCL` is not `1`.
#[track_caller]
fn backend_or_skip() -> Option<SyclBackend> {
    // Kind `SYCL`: KF_REQUIRE_SYCL=1 makes this a failure.
    common::backend_or_skip(
        SyclBackend::builder().build(),
        "SYCL",
        kf_core::testing::skip::SkipKind::Sycl,
        |e| format!("{e} (scripts/setup.sh --sycl)"),
    )
}

fn check(task_name: &str, sizes: &str, mutator: StructuralMutator, minimum: usize) {
    let Some(backend) = backend_or_skip() else {
        return;
    };
    let device = backend.device().clone();
    let task = builtin_task(task_name, &parse_sizes(sizes).unwrap()).unwrap();
    let described = task.describe();
    let library = mutator.templates();
    let cases = common::transformations(
        library,
        mutator.strategies(),
        &StrategyLibrary::sycl_sub_groups(),
        &described,
        &device,
    );
    let mut evaluator = KernelEvaluator::new(backend, quick_config(None));
    let started = Instant::now();
    let mut failures = Vec::new();
    for (name, structure, params) in &cases {
        let variant = library.get(name).unwrap().instantiate(structure).unwrap();
        assert_eq!(variant.source.language, Language::Sycl);
        let evaluation = evaluator
            .evaluate(task.as_ref(), &variant.source, params)
            .unwrap();
        if evaluation.status != Status::Correct {
            failures.push(format!(
                "{name} {structure} [{params}]: {} — {}",
                evaluation.status, evaluation.diagnostics
            ));
        }
    }
    // SYCL's own starting points (after each template's base variant, which `cases` holds).
    let mut starts = 0;
    for template in library.templates() {
        for (source, params) in template
            .seeds_at(&described.sizes)
            .unwrap()
            .into_iter()
            .skip(1)
        {
            starts += 1;
            let evaluation = evaluator.evaluate(task.as_ref(), &source, &params).unwrap();
            if evaluation.status != Status::Correct {
                failures.push(format!(
                    "{} start [{params}]: {} — {}",
                    template.name(),
                    evaluation.status,
                    evaluation.diagnostics
                ));
            }
        }
    }
    eprintln!(
        "{task_name}: evaluated {} SYCL variants and {starts} starting points in {:.1} s",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(cases.len() >= minimum, "only {} variants", cases.len());
    common::assert_no_failures(&failures);
}

#[test]
fn sycl_gemm_transformations_are_correct() {
    check(
        "gemm",
        "M=256,N=192,K=128",
        StructuralMutator::builtin_for(Language::Sycl).unwrap(),
        15,
    );
}

#[test]
fn sycl_softmax_transformations_are_correct() {
    check(
        "softmax",
        "ROWS=96,COLS=256",
        StructuralMutator::softmax_for(Language::Sycl).unwrap(),
        12,
    );
}
