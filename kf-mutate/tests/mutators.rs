//! Behaviour of the offline mutators without a device: determinism per seed, constraints,
//! structure visible in the generated text, frontier hints, the mix.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::executor::block_on;
use kf_core::prelude::*;
use kf_manifest::Manifest;
use kf_mutate::{
    preprocess::strip_comments, variant_marker, CellPredictor, Feasibility, MixMutator,
    MutateError, ParamMutator, ParamMutatorConfig, StrategyLibrary, StructuralConfig,
    StructuralMutator, Structure, TemplateLibrary, Variant,
};

const NAIVE_CL: &str = kf_eval::kernels::OPENCL_GEMM_NAIVE.source;
const NAIVE_TOML: &str = kf_eval::kernels::OPENCL_GEMM_NAIVE.manifest;
const TILED_CL: &str = kf_eval::kernels::OPENCL_GEMM_TILED.source;
const TILED_TOML: &str = kf_eval::kernels::OPENCL_GEMM_TILED.manifest;
const SOFTMAX_CL: &str = kf_eval::kernels::OPENCL_SOFTMAX_NAIVE.source;
const SOFTMAX_TOML: &str = kf_eval::kernels::OPENCL_SOFTMAX_NAIVE.manifest;

fn kernel(cl: &str, toml: &str) -> KernelSource {
    Manifest::parse(toml, "test.toml", None)
        .unwrap()
        .kernel_source(cl)
}

fn elite(source: KernelSource, params: ParamValues, coords: [usize; 3]) -> Elite {
    let eval = Evaluation::failed(Status::WrongValues, "");
    Elite {
        candidate: Candidate::seed(source, params),
        fitness: Fitness::of(&eval),
        evaluation: eval,
        descriptor: Descriptor::new(coords, "test"),
    }
}

fn gemm_task(m: i64, n: i64, k: i64) -> Arc<Task> {
    Arc::new(
        Task::new("gemm")
            .with_size("M", m)
            .with_size("N", n)
            .with_size("K", k),
    )
}

fn cpu_device() -> DeviceFacts {
    let mut d = DeviceFacts::unknown("test cpu");
    d.kind = kf_core::DeviceKind::Cpu;
    d.max_work_group_size = 8192;
    d.max_work_item_sizes = vec![8192, 8192, 8192];
    d.local_mem_bytes = 262_144;
    d.sub_group_sizes = vec![4, 8, 16, 32, 64];
    d
}

fn ctx(seed: u64, task: Arc<Task>, device: Option<DeviceFacts>) -> MutationContext {
    MutationContext {
        step: seed,
        seed,
        task,
        device: device.map(Arc::new),
        inspirations: Vec::new(),
        hints: ArchiveHints::default(),
    }
}

fn keys(m: &Mutation) -> Vec<(String, String, String)> {
    m.children
        .iter()
        .map(|c| {
            (
                c.source.content_hash(),
                c.params.canonical_key(),
                c.origin.note.clone(),
            )
        })
        .collect()
}

fn hamming(a: &ParamValues, b: &ParamValues) -> usize {
    a.iter().filter(|(k, v)| b.get(k) != Some(*v)).count()
}

/// The children's parameters are exactly `expected` (in any order).
#[track_caller]
fn assert_moves(m: &Mutation, expected: &[&str]) {
    let moves: BTreeSet<String> = m.children.iter().map(|c| c.params.to_string()).collect();
    let expected: BTreeSet<String> = expected.iter().map(|e| (*e).to_owned()).collect();
    assert_eq!(moves, expected);
}

fn assert_feasible(child: &Offspring, task: &Task, device: Option<&DeviceFacts>) {
    let manifest = Manifest::from_kernel(&child.source).expect("child manifest parses");
    let space = Feasibility::new(&manifest, &task.sizes, device);
    let params = space.complete(&child.params);
    assert_eq!(
        params, child.params,
        "child names every parameter with an allowed value"
    );
    assert_eq!(
        space.violation(&params),
        None,
        "child {} violates its constraints",
        child.origin.note
    );
}

#[test]
fn param_mutator_is_deterministic_and_respects_constraints() {
    let source = kernel(TILED_CL, TILED_TOML);
    let params = ParamValues::new().with("TS", 32i64).with("WPT", 4i64);
    let parent = elite(source, params.clone(), [2, 3, 1]);
    let task = gemm_task(256, 192, 128);
    let device = cpu_device();
    let mutator = ParamMutator::new().with_config(ParamMutatorConfig {
        children: 6,
        two_step_probability: 0.4,
        max_changes: 2,
    });
    let mut distinct_runs = BTreeSet::new();
    for seed in 0..20 {
        let c = ctx(seed, Arc::clone(&task), Some(device.clone()));
        let a = block_on(mutator.mutate(&parent, &c)).unwrap();
        let b = block_on(mutator.mutate(&parent, &c)).unwrap();
        assert_eq!(keys(&a), keys(&b), "same seed, same children");
        assert!(!a.children.is_empty());
        let mut seen = BTreeSet::new();
        for child in &a.children {
            assert_feasible(child, &task, Some(&device));
            let d = hamming(&child.params, &params);
            assert!((1..=2).contains(&d), "Hamming distance {d}");
            assert!(
                seen.insert(child.params.canonical_key()),
                "children are distinct"
            );
            assert_eq!(child.origin.mutator, "param");
            assert!(child.origin.note.contains('→'));
        }
        distinct_runs.insert(format!("{:?}", keys(&a)));
    }
    assert!(
        distinct_runs.len() > 5,
        "different seeds, different children"
    );
}

#[test]
fn param_mutator_moves_to_adjacent_values_only() {
    // TS values are declared [8, 16, 32, 64]: from 16 a one-step move goes to 8 or 32.
    let source = kernel(TILED_CL, TILED_TOML);
    let params = ParamValues::new().with("TS", 16i64).with("WPT", 1i64);
    let parent = elite(source, params, [0, 0, 0]);
    let mutator = ParamMutator::new().with_config(ParamMutatorConfig {
        children: 10,
        two_step_probability: 0.0,
        max_changes: 1,
    });
    let m = block_on(mutator.mutate(&parent, &ctx(3, gemm_task(256, 256, 256), None))).unwrap();
    assert_moves(&m, &["TS=8 WPT=1", "TS=32 WPT=1", "TS=16 WPT=2"]);
}

#[test]
fn param_mutator_without_device_skips_device_rules_only() {
    // 48 is not a multiple of 32 or 64: those moves are infeasible at any device.
    let source = kernel(TILED_CL, TILED_TOML);
    let parent = elite(
        source,
        ParamValues::new().with("TS", 16i64).with("WPT", 1i64),
        [0, 0, 0],
    );
    let mutator = ParamMutator::new().with_config(ParamMutatorConfig {
        children: 20,
        two_step_probability: 0.5,
        max_changes: 2,
    });
    let task = gemm_task(48, 48, 48);
    let m = block_on(mutator.mutate(&parent, &ctx(9, Arc::clone(&task), None))).unwrap();
    assert!(!m.children.is_empty());
    for child in &m.children {
        assert_feasible(child, &task, None);
        let ts = child.params.get("TS").and_then(ParamValue::as_i64).unwrap();
        assert!(ts == 8 || ts == 16, "TS={ts}");
    }
    // A tiny device limits work-groups: TS * TS / WPT <= 64.
    let mut small = cpu_device();
    small.max_work_group_size = 64;
    let m =
        block_on(mutator.mutate(&parent, &ctx(9, Arc::clone(&task), Some(small.clone())))).unwrap();
    for child in &m.children {
        assert_feasible(child, &task, Some(&small));
    }
}

#[test]
fn param_mutator_works_for_softmax_and_skips_kernels_without_manifest() {
    let source = kernel(SOFTMAX_CL, SOFTMAX_TOML);
    let parent = elite(source, ParamValues::new().with("WG", 32i64), [0, 0, 0]);
    let task = Arc::new(
        Task::new("softmax")
            .with_size("ROWS", 512)
            .with_size("COLS", 256),
    );
    let m = block_on(ParamMutator::new().mutate(&parent, &ctx(1, task, None))).unwrap();
    let values: BTreeSet<String> = m.children.iter().map(|c| c.params.to_string()).collect();
    assert_eq!(
        values,
        ["WG=16", "WG=64"].into_iter().map(String::from).collect()
    );

    let bare = KernelSource::new(Language::OpenCl, "gemm", NAIVE_CL);
    let parent = elite(bare, ParamValues::new(), [0, 0, 0]);
    let m = block_on(ParamMutator::new().mutate(&parent, &ctx(1, gemm_task(64, 64, 64), None)))
        .unwrap();
    assert!(m.children.is_empty());
}

/// What a variant's text must show for its structure.
fn check_text_matches_structure(template: &str, s: &Structure, text: &str) {
    let code = strip_comments(text);
    let on = |name: &str| s.get(name).unwrap_or(0) != 0;
    let local = on("LOCAL_A") || on("LOCAL_B") || on("PACK_B") || template == "gemm_ksplit";
    assert_eq!(
        code.contains("__local"),
        local,
        "__local for {template} {s}"
    );
    assert_eq!(
        code.contains("barrier("),
        local,
        "barrier( for {template} {s}"
    );
    let vw = s.get("VW").unwrap_or(1);
    assert_eq!(code.contains("vload"), vw > 1, "vload for {template} {s}");
    if vw > 1 {
        assert!(code.contains(&format!("vload{vw}(")), "vload{vw} for {s}");
    }
    assert_eq!(
        code.contains("sub_group_broadcast("),
        on("SUBGROUP"),
        "sub_group_broadcast for {s}"
    );
    assert_eq!(
        code.contains("prefetch("),
        on("PREFETCH"),
        "prefetch for {s}"
    );
    assert_eq!(
        code.contains("Bs[2]"),
        on("DOUBLE_BUFFER"),
        "double buffer for {s}"
    );
    assert_eq!(
        code.contains("__local float Bp["),
        on("PACK_B"),
        "packed B panel for {s}"
    );
    assert!(
        !code.contains("#if "),
        "resolved {template} {s} keeps no #if"
    );
}

#[test]
fn every_variant_shows_its_structure_in_the_text() {
    let library = TemplateLibrary::builtin().unwrap();
    let mut variants = 0;
    for template in library.templates() {
        for s in template.all_structures() {
            let Ok(v) = template.instantiate(&s) else {
                continue;
            };
            variants += 1;
            check_text_matches_structure(template.name(), &v.structure, &v.source.text);
            assert_eq!(
                variant_marker(&v.source),
                Some((template.name().to_owned(), v.structure.clone()))
            );
            for switch in template.switches().keys() {
                assert!(!v.manifest.params.contains_key(switch));
            }
            // Every parameter left is used by the text or the launch.
            for name in v.manifest.params.keys() {
                assert!(
                    v.source.text.contains(name.as_str()),
                    "{name} unused in {s}"
                );
            }
        }
    }
    assert!(variants >= 60, "{variants} variants");
}

#[test]
fn impossible_structures_are_rejected() {
    let library = TemplateLibrary::builtin().unwrap();
    let t = library.get("gemm_blocked").unwrap();
    let bad = [
        Structure::new().with("DOUBLE_BUFFER", 1).with("LOCAL_B", 0),
        Structure::new().with("SUBGROUP", 1).with("VW", 16),
        Structure::new().with("SUBGROUP", 1).with("LOCAL_A", 1),
    ];
    for s in bad {
        assert!(
            matches!(t.instantiate(&s), Err(MutateError::Template { .. })),
            "{s}"
        );
    }
    assert!(t.instantiate(&Structure::new().with("VW", 3)).is_err());
    assert!(t.instantiate(&Structure::new().with("NOPE", 1)).is_err());
    assert!("VW=1,LOCAL_B".parse::<Structure>().is_err());
    let s: Structure = "VW=16,LOCAL_B=1".parse().unwrap();
    assert_eq!(s.to_string(), "VW=16,LOCAL_B=1");
}

#[test]
fn structural_mutator_adopts_the_naive_seed_deterministically() {
    let mutator = StructuralMutator::builtin().unwrap();
    let library = StrategyLibrary::dense_linear_algebra();
    let parent = elite(
        kernel(NAIVE_CL, NAIVE_TOML),
        ParamValues::new().with("WG", 16i64),
        [0, 2, 0],
    );
    let task = gemm_task(256, 192, 128);
    let device = cpu_device();
    let mut strategies = BTreeSet::new();
    for seed in 0..30 {
        let c = ctx(seed, Arc::clone(&task), Some(device.clone()));
        let a = block_on(mutator.mutate(&parent, &c)).unwrap();
        let b = block_on(mutator.mutate(&parent, &c)).unwrap();
        assert_eq!(keys(&a), keys(&b));
        assert!(!a.children.is_empty(), "seed {seed}");
        for child in &a.children {
            assert_feasible(child, &task, Some(&device));
            let (template, structure) = variant_marker(&child.source).unwrap();
            check_text_matches_structure(&template, &structure, &child.source.text);
            let name = child.origin.note.split(':').next().unwrap();
            assert!(
                library.get(name).is_some(),
                "note names a strategy: {}",
                child.origin.note
            );
            strategies.insert(name.to_owned());
        }
    }
    assert!(strategies.len() >= 8, "{strategies:?}");
}

/// The built-in `gemm_blocked` template instantiated with `structure`.
fn gemm_blocked(structure: Structure) -> Variant {
    TemplateLibrary::builtin()
        .unwrap()
        .get("gemm_blocked")
        .unwrap()
        .instantiate(&structure)
        .unwrap()
}

#[test]
fn structural_children_spread_over_structures() {
    let mutator = StructuralMutator::builtin().unwrap();
    let start = gemm_blocked(Structure::new().with("VW", 16));
    let params = ParamValues::new()
        .with("TM", 8i64)
        .with("TN", 2i64)
        .with("WG0", 1i64)
        .with("WG1", 16i64)
        .with("TK", 128i64)
        .with("UNROLL", 1i64);
    let task = gemm_task(1024, 1024, 1024);
    // A short random walk: each child becomes the next parent.
    let mut parent = elite(start.source, params, [1, 3, 0]);
    let mut structures = BTreeSet::new();
    for seed in 0..60 {
        let m = block_on(mutator.mutate(&parent, &ctx(seed, Arc::clone(&task), None))).unwrap();
        for child in &m.children {
            assert_feasible(child, &task, None);
            let (t, s) = variant_marker(&child.source).unwrap();
            structures.insert(format!("{t} {s}"));
        }
        if let Some(child) = m.children.into_iter().next() {
            parent = elite(child.source, child.params, [1, 3, 0]);
        }
    }
    assert!(structures.len() >= 10, "{structures:#?}");
}

#[test]
fn frontier_hints_steer_strategies() {
    let mutator = StructuralMutator::builtin().unwrap();
    let start = gemm_blocked(Structure::new().with("VW", 1));
    let params = ParamValues::new().with("WG0", 16i64).with("WG1", 16i64);
    let parent = elite(start.source, params, [0, 3, 0]);
    let task = gemm_task(256, 256, 256);
    let count = |hints: &ArchiveHints| {
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for seed in 0..200 {
            let mut c = ctx(seed, Arc::clone(&task), None);
            c.hints = hints.clone();
            for child in block_on(mutator.mutate(&parent, &c)).unwrap().children {
                let name = child.origin.note.split(':').next().unwrap().to_owned();
                *per.entry(name).or_default() += 1;
            }
        }
        per
    };
    let plain = count(&ArchiveHints::default());
    let hints = ArchiveHints {
        space: Some(DescriptorSpace::kernel_default()),
        // Only sub-group coordination cells are empty next to the filled ones.
        empty_frontier: vec![vec![0, 3, 2], vec![1, 3, 2]],
        ..ArchiveHints::default()
    };
    let steered = count(&hints);
    let sub = |m: &BTreeMap<String, usize>| m.get("sub-group-broadcast").copied().unwrap_or(0);
    assert!(
        sub(&steered) > sub(&plain) * 3 / 2,
        "steered {steered:?} plain {plain:?}"
    );
}

/// With a cell predictor, the children kept are those predicted in an empty frontier cell:
/// here the cell of prefetching kernels, one strategy among many (no hint names its level).
#[test]
fn a_cell_predictor_keeps_the_children_aimed_at_empty_cells() {
    let predictor = CellPredictor::new(|source, _| {
        Some(vec![
            if source.text.contains("prefetch(") {
                2
            } else {
                0
            },
            0,
            0,
        ])
    });
    let config = StructuralConfig {
        children: 1,
        ..StructuralConfig::default()
    };
    let plain = StructuralMutator::builtin()
        .unwrap()
        .with_config(config.clone());
    let aimed = plain.clone().predicting_cells(predictor.clone());
    let start = gemm_blocked(Structure::new().with("VW", 1));
    let params = ParamValues::new().with("WG0", 16i64).with("WG1", 16i64);
    let parent = elite(start.source, params, [0, 0, 0]);
    let task = gemm_task(256, 256, 256);
    let hints = ArchiveHints {
        space: Some(DescriptorSpace::kernel_default()),
        empty_frontier: vec![vec![2, 0, 0]],
        ..ArchiveHints::default()
    };
    let hits = |mutator: &StructuralMutator| {
        let mut hits = 0;
        for seed in 0..100 {
            let mut c = ctx(seed, Arc::clone(&task), None);
            c.hints = hints.clone();
            let children = block_on(mutator.mutate(&parent, &c)).unwrap().children;
            assert!(children.len() <= 1);
            hits += children
                .iter()
                .filter(|ch| predictor.predict(&ch.source, &ch.params) == Some(vec![2, 0, 0]))
                .count();
        }
        hits
    };
    let (plain_hits, aimed_hits) = (hits(&plain), hits(&aimed));
    let marked = (0..100)
        .flat_map(|seed| {
            let mut c = ctx(seed, Arc::clone(&task), None);
            c.hints = hints.clone();
            block_on(aimed.mutate(&parent, &c)).unwrap().children
        })
        .filter(|ch| ch.origin.aimed_cell == Some(vec![2, 0, 0]))
        .count();
    assert_eq!(
        marked, aimed_hits,
        "every child kept for the empty cell is marked"
    );
    assert!(
        aimed_hits >= plain_hits * 2 && aimed_hits > plain_hits,
        "aimed {aimed_hits} plain {plain_hits}"
    );
    // Deterministic for a seed.
    let mut c = ctx(5, Arc::clone(&task), None);
    c.hints = hints.clone();
    assert_eq!(
        keys(&block_on(aimed.mutate(&parent, &c)).unwrap()),
        keys(&block_on(aimed.mutate(&parent, &c)).unwrap())
    );
}

#[test]
fn mix_mutator_is_deterministic_and_falls_back() {
    let mix = MixMutator::new()
        .with(ParamMutator::new(), 3.0)
        .with(StructuralMutator::builtin().unwrap(), 1.0);
    let task = gemm_task(256, 192, 128);
    // The naive seed's manifest has one parameter WG in [8, 16]: the param mutator has one
    // move; the structural one always has some.
    let parent = elite(
        kernel(NAIVE_CL, NAIVE_TOML),
        ParamValues::new().with("WG", 8i64),
        [0, 2, 0],
    );
    let mut by = BTreeMap::<String, usize>::new();
    for seed in 0..40 {
        let c = ctx(seed, Arc::clone(&task), None);
        let a = block_on(mix.mutate(&parent, &c)).unwrap();
        let b = block_on(mix.mutate(&parent, &c)).unwrap();
        assert_eq!(keys(&a), keys(&b));
        assert!(!a.children.is_empty());
        *by.entry(a.children[0].origin.mutator.clone()).or_default() += 1;
    }
    assert!(by.get("param").copied().unwrap_or(0) > 15, "{by:?}");
    assert!(by.get("structural").copied().unwrap_or(0) > 3, "{by:?}");

    // A kernel with no manifest and no template for its task: nobody has children.
    let bare = elite(
        KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}"),
        ParamValues::new(),
        [0, 0, 0],
    );
    let other = Arc::new(Task::new("other"));
    let m = block_on(mix.mutate(&bare, &ctx(1, other, None))).unwrap();
    assert!(m.children.is_empty());

    let empty = MixMutator::new();
    assert!(matches!(
        block_on(empty.mutate(&parent, &ctx(1, Arc::clone(&task), None))),
        Err(MutateError::Config(_))
    ));
    let zero = MixMutator::new().with(ParamMutator::new(), 0.0);
    assert!(block_on(zero.mutate(&parent, &ctx(1, task, None))).is_err());
}

/// A tuner may have measured the parent with other values than it was proposed with: the
/// children of a "change one parameter" mutator are one move from the values that earned the
/// parent its place (`Elite::effective_params`), not from the proposed ones.
#[test]
fn param_children_move_one_parameter_from_the_measured_values() {
    let source = kernel(TILED_CL, TILED_TOML);
    let proposed = ParamValues::new().with("TS", 16i64).with("WPT", 1i64);
    let mut parent = elite(source, proposed.clone(), [1, 1, 1]);
    parent.evaluation.params = ParamValues::new().with("TS", 32i64).with("WPT", 4i64);
    let measured = parent.effective_params();
    assert_eq!(measured.to_string(), "TS=32 WPT=4");
    let mutator = ParamMutator::new().with_config(ParamMutatorConfig {
        children: 10,
        two_step_probability: 0.0,
        max_changes: 1,
    });
    let task = gemm_task(256, 256, 256);
    let device = cpu_device();
    let m = block_on(mutator.mutate(&parent, &ctx(5, Arc::clone(&task), Some(device.clone()))))
        .unwrap();
    assert!(!m.children.is_empty());
    for child in &m.children {
        assert_feasible(child, &task, Some(&device));
        assert_eq!(
            hamming(&child.params, &measured),
            1,
            "{} is one move from the measured {measured}",
            child.params
        );
    }
    assert_moves(
        &m,
        &["TS=16 WPT=4", "TS=64 WPT=4", "TS=32 WPT=2", "TS=32 WPT=8"],
    );
}

#[test]
fn the_library_mutators_need_the_task_and_a_mix_needs_what_its_parts_need() {
    assert_eq!(ParamMutator::new().needs(), Needs::TASK);
    assert_eq!(StructuralMutator::builtin().unwrap().needs(), Needs::TASK);
    assert_eq!(MixMutator::new().needs(), Needs::NOTHING);
    let mix = MixMutator::new().with(ParamMutator::new(), 1.0);
    assert_eq!(mix.needs(), Needs::TASK);
}

/// A cell that only a combination of moves reaches (a local B tile, a prefetch, a sub-group
/// broadcast *and* one output per work-item: `[3, 1, 3]`), predicted by the shipped static
/// classifier: with every other cell the gemm templates reach filled, no single strategy step
/// lands there, and the reach pass finds it for nearly every seed.
#[test]
fn the_reach_pass_finds_a_cell_only_a_combination_of_moves_reaches() {
    let classifier = Arc::new(kf_classify::StaticClassifier::new());
    let predictor = {
        let classifier = Arc::clone(&classifier);
        CellPredictor::new(move |source, params| {
            let eval = Evaluation::failed(Status::Correct, "");
            classifier
                .classify(&Candidate::seed(source.clone(), params.clone()), &eval)
                .ok()
                .map(|d| d.coords)
        })
    };
    let target = vec![3, 1, 3];
    let filled: Vec<Vec<usize>> = [
        [0, 1, 0],
        [0, 1, 2],
        [0, 3, 0],
        [0, 3, 2],
        [1, 1, 0],
        [1, 3, 0],
        [2, 1, 1],
        [2, 1, 3],
        [2, 3, 1],
        [2, 3, 3],
        [3, 1, 0],
        [3, 1, 1],
        [3, 1, 2],
        [3, 3, 0],
        [3, 3, 1],
        [3, 3, 2],
        [3, 3, 3],
    ]
    .iter()
    .map(|c| c.to_vec())
    .collect();
    let hints = ArchiveHints {
        space: Some(DescriptorSpace::kernel_default()),
        filled,
        ..ArchiveHints::default()
    };
    let start = gemm_blocked(Structure::new().with("LOCAL_A", 1).with("PREFETCH", 1));
    let params = start.manifest.default_params();
    let parent = elite(start.source, params, [3, 3, 1]);
    let task = gemm_task(1024, 1024, 1024);
    let hits = |mutator: &StructuralMutator| {
        (0..40)
            .filter(|&seed| {
                let mut c = ctx(seed, Arc::clone(&task), Some(cpu_device()));
                c.hints = hints.clone();
                block_on(mutator.mutate(&parent, &c))
                    .unwrap()
                    .children
                    .iter()
                    .any(|ch| {
                        eprintln!(
                            "seed {seed}: {:?} {:?} {}",
                            predictor.predict(&ch.source, &ch.params),
                            ch.origin.aimed_cell,
                            ch.origin.note
                        );
                        predictor.predict(&ch.source, &ch.params).as_ref() == Some(&target)
                            && ch.origin.aimed_cell.as_ref() == Some(&target)
                    })
            })
            .count()
    };
    let aimed = StructuralMutator::builtin()
        .unwrap()
        .predicting_cells(predictor.clone());
    let without = aimed.clone().with_config(StructuralConfig {
        reach: false,
        ..StructuralConfig::default()
    });
    let (with_reach, without_reach) = (hits(&aimed), hits(&without));
    assert_eq!(without_reach, 0, "one strategy step does not get there");
    assert_eq!(with_reach, 40, "reached in {with_reach} of 40 mutations");
    // Deterministic for a seed.
    let mut c = ctx(3, Arc::clone(&task), Some(cpu_device()));
    c.hints = hints.clone();
    assert_eq!(
        keys(&block_on(aimed.mutate(&parent, &c)).unwrap()),
        keys(&block_on(aimed.mutate(&parent, &c)).unwrap())
    );
}
