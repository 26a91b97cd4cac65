//! Helpers shared by the integration tests that check templates on a real runtime.

// Each test binary that includes this module uses some of its helpers, not all.
#![allow(dead_code)]

use std::collections::BTreeSet;

use kf_core::prelude::*;
use kf_eval::task::KernelTask;
use kf_eval::{EvalConfig, KernelEvaluator};
use kf_mutate::{Feasibility, StrategyLibrary, Structure, Template, TemplateLibrary};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The structures to check for the templates of `library` for `task`: every base, every
/// strategy of `strategies` applied to it, and `again` applied to those children; each at a
/// feasible configuration for `task`'s sizes on `device`, as (template, structure, params),
/// without repeats.
pub(crate) fn transformations(
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
    for template in library.for_task(&task.name) {
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

/// The backend `built` for a test; `None` where its runtime is not installed, after printing
/// `reason` for the error and recording a skip of `kind` (which its `KF_REQUIRE_…` variable
/// turns into a failure). Any other failure to create the `name` backend fails the test.
#[track_caller]
pub(crate) fn backend_or_skip<B, E: kf_core::BackendError>(
    built: Result<B, E>,
    name: &str,
    kind: kf_core::testing::skip::SkipKind,
    reason: impl FnOnce(&E) -> String,
) -> Option<B> {
    match built {
        Ok(b) => Some(b),
        Err(e) if e.kind() == kf_core::BackendErrorKind::Unavailable => {
            kf_core::testing::skip::skip(kind, reason(&e));
            None
        }
        Err(e) => panic!("creating the {name} backend failed: {e}"),
    }
}

/// Fails the test with every failure listed, if there are any.
#[track_caller]
pub(crate) fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// An evaluation that judges correctness with one or two timed launches (these tests check
/// correctness, not speed); `data_seed` fixes the inputs where given.
pub(crate) fn quick_config(data_seed: Option<u64>) -> EvalConfig {
    let mut config = EvalConfig::default();
    config.timing.warmup = 1;
    config.timing.min_trials = 1;
    config.timing.min_seconds = 0.0;
    config.timing.max_trials = 2;
    config.timing.baseline_trials = 1;
    config.data_seed = data_seed;
    config
}

/// Evaluates `template` on `task` at `case`, comma-separated `NAME=value` pairs: the
/// template's switches choose the variant, the rest are parameter values over `params` (the
/// manifest's first values for those neither names). `None` when the kernel is correct, else
/// its status and diagnostics.
pub(crate) fn check_case<B: Backend>(
    evaluator: &mut KernelEvaluator<B>,
    task: &dyn KernelTask,
    template: &Template,
    params: ParamValues,
    case: &str,
) -> Option<String> {
    let mut structure = Structure::new();
    let mut params = params;
    for pair in case.split(',') {
        let (name, value) = pair.split_once('=').unwrap();
        let value: i64 = value.parse().unwrap();
        if template.switches().contains_key(name) {
            structure = structure.with(name, value);
        } else {
            params = params.with(name, value);
        }
    }
    let variant = template.instantiate(&structure).unwrap();
    let params = variant.manifest.resolve_params(&params).unwrap();
    let evaluation = evaluator.evaluate(task, &variant.source, &params).unwrap();
    (evaluation.status != Status::Correct)
        .then(|| format!("{} — {}", evaluation.status, evaluation.diagnostics))
}
