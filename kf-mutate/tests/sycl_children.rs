//! The SYCL renderings of the templates compute the right answer after every transformation:
//! the base variant of every template, every strategy (the shared ones and SYCL's own) applied
//! to it, and SYCL's own strategies applied once more to those children (so that the
//! sub-group shuffles meet the sub-group variants that use them), each evaluated through the
//! real evaluator (verification on fresh inputs, other shapes included) on the SYCL backend.
//! Skips with a message when no SYCL runtime is installed (`scripts/setup.sh --sycl`), unless
//! `KF_REQUIRE_SYCL=1`.

use std::collections::BTreeSet;
use std::time::Instant;

use kf_backend_sycl::SyclBackend;
use kf_core::prelude::*;
use kf_core::BackendErrorKind;
use kf_eval::tasks::{builtin_task, parse_sizes};
use kf_eval::{EvalConfig, KernelEvaluator};
use kf_mutate::{Feasibility, StrategyLibrary, StructuralMutator, Structure, TemplateLibrary};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The backend, or `None` (after printing why) when this machine has no SYCL runtime and
/// `KF_REQUIRE_SYCL` is not `1`.
fn backend_or_skip() -> Option<SyclBackend> {
    let required = std::env::var("KF_REQUIRE_SYCL").is_ok_and(|v| !v.is_empty() && v != "0");
    match SyclBackend::builder().build() {
        Ok(b) => Some(b),
        Err(e) if e.kind() == BackendErrorKind::Unavailable && !required => {
            eprintln!("SKIPPED: {e} (set KF_REQUIRE_SYCL=1 to make this a failure)");
            None
        }
        Err(e) => panic!("creating the SYCL backend failed: {e}"),
    }
}

fn quick_config() -> EvalConfig {
    let mut config = EvalConfig::default();
    config.timing.warmup = 1;
    config.timing.min_trials = 1;
    config.timing.min_seconds = 0.0;
    config.timing.max_trials = 2;
    config.timing.baseline_trials = 1;
    config
}

/// The structures to evaluate for one library: every base, every strategy of `strategies`
/// applied to it, and `again` applied to those children; as (template, structure, params).
fn transformations(
    library: &TemplateLibrary,
    strategies: &StrategyLibrary,
    again: &StrategyLibrary,
    task: &Task,
    device: &DeviceFacts,
) -> Vec<(String, Structure, ParamValues)> {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |template: &str, structure: Structure, params: ParamValues, out: &mut Vec<_>| {
        if seen.insert((template.to_owned(), structure.to_string())) {
            out.push((template.to_owned(), structure, params));
        }
    };
    for template in library.templates() {
        // The base parameters name every tunable; the base variant keeps only those it uses.
        let variant = template.instantiate(template.base()).unwrap();
        let space = Feasibility::new(&variant.manifest, &task.sizes, Some(device));
        let params = space
            .repair(template.base_params(), &[], &mut rng, 5000)
            .unwrap_or_else(|| panic!("{}: no feasible base configuration", template.name()));
        add(template.name(), template.base().clone(), params, &mut out);
    }
    let mut round = |from: Vec<(String, Structure, ParamValues)>,
                     with: &StrategyLibrary,
                     out: &mut Vec<(String, Structure, ParamValues)>| {
        for (name, structure, params) in from {
            let template = library.get(&name).unwrap();
            for strategy in with.strategies() {
                let Some(m) = strategy
                    .apply(library, template, &structure, &params, &mut rng)
                    .unwrap()
                else {
                    continue;
                };
                let target = library.get(&m.template).unwrap();
                let Ok(variant) = target.instantiate(&m.structure) else {
                    continue;
                };
                let space = Feasibility::new(&variant.manifest, &task.sizes, Some(device));
                let pinned: Vec<&str> = m.pinned.iter().map(String::as_str).collect();
                let Some(params) = space.repair(&m.params, &pinned, &mut rng, 5000) else {
                    continue;
                };
                add(&m.template, variant.structure, params, out);
            }
        }
    };
    let bases = out.clone();
    round(bases, strategies, &mut out);
    let children = out.clone();
    round(children, again, &mut out);
    out
}

fn check(task_name: &str, sizes: &str, mutator: StructuralMutator, minimum: usize) {
    let Some(backend) = backend_or_skip() else {
        return;
    };
    let device = backend.device().clone();
    let task = builtin_task(task_name, &parse_sizes(sizes).unwrap()).unwrap();
    let described = task.describe();
    let library = mutator.templates();
    let cases = transformations(
        library,
        mutator.strategies(),
        &StrategyLibrary::sycl_sub_groups(),
        &described,
        &device,
    );
    let mut evaluator = KernelEvaluator::new(backend, quick_config());
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
    eprintln!(
        "{task_name}: evaluated {} SYCL variants in {:.1} s",
        cases.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(cases.len() >= minimum, "only {} variants", cases.len());
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
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
