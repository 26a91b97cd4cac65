//! The second task end to end: a short MAP-Elites search on softmax with the softmax templates
//! and strategies of kf-mutate, through worker processes (this test binary, re-executed), and
//! every structural variant of the softmax templates compiled and verified on the OpenCL
//! backend. Skips with a message when no OpenCL runtime is installed (run `scripts/setup.sh`),
//! unless `KF_REQUIRE_OPENCL=1`.

use std::collections::BTreeSet;
use std::time::Duration;

use kernelfoundry::backends::OpenClFactory;
use kernelfoundry::core::prelude::*;
use kernelfoundry::eval::task::{builtin_task, parse_sizes};
use kernelfoundry::eval::{EvalConfig, KernelEvaluator, WorkerCommand};
use kernelfoundry::mutate::{
    Feasibility, MixMutator, ParamMutator, StructuralMutator, TemplateLibrary,
};
use kernelfoundry::opencl::OpenClBackend;
use kernelfoundry::search::{run_search, seeds_for, SearchConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

kernelfoundry::eval::worker_test_entry!(|spec: &kernelfoundry::eval::BackendSpec| {
    kernelfoundry::eval::BackendFactory::open(&OpenClFactory, spec).map_err(|e| e.to_string())
});

/// The backend; `None` (skip) only when no OpenCL runtime is installed and
/// `KF_REQUIRE_OPENCL` is not `1`.
fn backend() -> Option<OpenClBackend> {
    kernelfoundry::opencl::testing::backend_or_skip()
}

#[test]
fn short_softmax_search_end_to_end() {
    if backend().is_none() {
        return;
    }
    let sizes = parse_sizes("ROWS=256,COLS=256").unwrap();
    let task = builtin_task("softmax", &sizes).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut config = SearchConfig::new("softmax", task.sizes());
    config.evaluations = 10;
    config.tune_budget = 2;
    // Fewer than the candidates could spend with tuning (up to 20): the device budget binds.
    config.device_evaluations = Some(12);
    config.wall = Some(Duration::from_secs(300));
    config.out = out.path().join("softmax");
    config.progress = false;
    config.worker = Some(WorkerCommand::test_harness().unwrap());

    let library = TemplateLibrary::softmax().unwrap();
    let extra = library
        .for_task("softmax")
        .map(|t| {
            let v = t.instantiate(t.base()).unwrap();
            let params = v.manifest.default_params();
            (v.source, params)
        })
        .collect();
    let seeds = seeds_for(task.as_ref(), Language::OpenCl, extra);
    assert_eq!(seeds.len(), 3);
    let mutator = MixMutator::new()
        .with(StructuralMutator::softmax().unwrap(), 2.0)
        .with(ParamMutator::new(), 1.0);

    let outcome = run_search(&config, mutator, seeds, None).unwrap();
    let summary = &outcome.summary;
    assert!(
        summary.evaluations >= 5 && summary.evaluations <= 10,
        "{} evaluations",
        summary.evaluations
    );
    let base = outcome
        .baseline_gflops
        .expect("the naive seed was measured");
    let best = outcome.best_gflops.expect("a correct kernel was found");
    assert!(
        base > 0.0 && best >= base,
        "best {best} against naive {base}"
    );
    assert!(
        summary.metrics.filled >= 2,
        "{} cells",
        summary.metrics.filled
    );

    // The archive holds kernels the structural mutator made, all of them correct.
    let elites = Archive::elites(&outcome.archive);
    let structural = elites
        .iter()
        .filter(|e| e.candidate.origin.mutator == "structural")
        .count();
    assert!(structural >= 1, "no structural child in the archive");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(config.out.join("report.json")).unwrap())
            .unwrap();
    assert!(report["best_gflops"].as_f64().is_some(), "{report}");
    assert!(
        report["cells_filled"].as_u64().unwrap_or(0) >= 2,
        "{report}"
    );

    // Device evaluations: every configuration compiled and timed, tuning included. The run
    // stops after the step that spent the limit; that step's other children are evaluated
    // untuned (a structural mutation has at most a handful).
    let device = report["device_evaluations"].as_u64().unwrap();
    assert_eq!(device, outcome.device_evaluations);
    assert_eq!(report["device_evaluation_limit"].as_u64(), Some(12));
    assert!(
        (12..=12 + 8).contains(&device),
        "{device} device evaluations"
    );
    assert!(
        summary.evaluations < 10,
        "the device budget did not bind: {report}"
    );
    assert!(
        device > summary.evaluations,
        "tuning ran no configuration: {report}"
    );
    let recorded: u64 = elites_and_rejects_device_evaluations(&config.out);
    assert_eq!(device, recorded, "the run directory's evaluations disagree");
    let last = report["trace"].as_array().unwrap().last().unwrap();
    assert_eq!(last["device_evaluations"].as_u64(), Some(device));

    // The reference library, measured in the same run (NumPy's row softmax, in GB/s).
    if kernelfoundry::eval::task::file::python::numpy_or_skip() {
        assert!(report["reference_gbs"].as_f64().unwrap() > 0.0, "{report}");
        assert!(
            report["reference_ratio"].as_f64().unwrap() > 0.0,
            "{report}"
        );
        assert!(report["reference"]["library"].is_string(), "{report}");
    }
}

/// The device evaluations of every evaluation the run directory recorded.
fn elites_and_rejects_device_evaluations(out: &std::path::Path) -> u64 {
    let run = kernelfoundry::archive::read_run(out.join("run")).unwrap();
    run.records
        .iter()
        .flat_map(|r| r.children.iter())
        .filter_map(|c| match c {
            kernelfoundry::core::ChildRecord::Judged { elite, .. } => {
                Some(elite.evaluation.device_evaluations())
            }
            _ => None,
        })
        .sum()
}

/// An evaluator that counts what it is asked to evaluate, around the real one.
#[derive(Clone)]
struct CountingEvaluator {
    inner: kernelfoundry::eval::IsolatedEvaluator,
    calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

#[kernelfoundry::core::async_trait]
impl Evaluator for CountingEvaluator {
    type Error = kernelfoundry::eval::EvalError;
    async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.evaluate(c).await
    }
}

#[test]
fn a_tuned_evaluation_counts_what_the_real_evaluator_ran() {
    let Some(backend) = backend() else {
        return;
    };
    let sizes = parse_sizes("ROWS=64,COLS=256").unwrap();
    let spec = kernelfoundry::eval::BackendSpec::new("opencl");
    let isolated = kernelfoundry::eval::IsolatedEvaluator::builder(spec, "softmax", sizes.clone())
        .command(WorkerCommand::test_harness().unwrap())
        .config(kernelfoundry::search::search_eval_config())
        .build();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counting = CountingEvaluator {
        inner: isolated.clone(),
        calls: calls.clone(),
    };
    let tuned = kernelfoundry::search::TunedEvaluator::new(
        counting,
        4,
        kernelfoundry::tune::strategy::StrategyName::Random,
        sizes.clone(),
        backend.device().clone(),
    );
    let library = TemplateLibrary::softmax().unwrap();
    let template = library.for_task("softmax").next().unwrap();
    let variant = template.instantiate(template.base()).unwrap();
    let candidate = Candidate::seed(variant.source, variant.manifest.default_params());
    let e = futures::executor::block_on(tuned.evaluate(&candidate)).unwrap();
    isolated.shutdown();
    let ran = calls.load(std::sync::atomic::Ordering::SeqCst);
    assert!(ran >= 2, "no configuration was tuned");
    assert_eq!(e.device_evaluations(), ran);
}

#[test]
fn every_softmax_variant_compiles_and_is_correct() {
    let Some(backend) = backend() else {
        return;
    };
    let device = backend.device().clone();
    // Small, and not a multiple of every work-group height: the last group is partial.
    let sizes = parse_sizes("ROWS=100,COLS=512").unwrap();
    let task = builtin_task("softmax", &sizes).unwrap();
    let mut config = EvalConfig::default();
    config.timing.warmup = 0;
    config.timing.min_trials = 1;
    config.timing.min_seconds = 0.0;
    config.timing.max_trials = 1;
    config.timing.baseline_trials = 1;
    let mut evaluator = KernelEvaluator::new(backend, config);

    let task_sizes = task.sizes();
    let library = TemplateLibrary::softmax().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut failures = Vec::new();
    let mut count = 0;
    let mut seen = BTreeSet::new();
    for template in library.templates() {
        for structure in template.all_structures() {
            let variant = template.instantiate(&structure).unwrap();
            let space = Feasibility::new(&variant.manifest, &task_sizes, Some(&device));
            // The fastest configuration (the manifest's first values) and the base one.
            for desired in [
                variant.manifest.default_params(),
                template.base_params().clone(),
            ] {
                let params = space
                    .repair(&desired, &[], &mut rng, 5000)
                    .unwrap_or_else(|| panic!("no feasible configuration for {structure}"));
                if !seen.insert((variant.source.content_hash(), params.canonical_key())) {
                    continue;
                }
                count += 1;
                let e = evaluator
                    .evaluate(task.as_ref(), &variant.source, &params)
                    .unwrap();
                if e.status != Status::Correct {
                    failures.push(format!(
                        "{} {structure} [{params}]: {} — {}",
                        template.name(),
                        e.status,
                        e.diagnostics
                    ));
                }
            }
        }
    }
    assert!(count >= 108, "only {count} kernels");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
