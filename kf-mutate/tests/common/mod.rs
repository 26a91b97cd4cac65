//! Helpers shared by the integration tests that check templates on a real runtime.

use std::collections::BTreeSet;

use kf_core::prelude::*;
use kf_mutate::{Feasibility, StrategyLibrary, Structure, TemplateLibrary};
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
