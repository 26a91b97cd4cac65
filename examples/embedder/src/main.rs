//! KernelFoundry embedded in another crate, through public items only: the shipped search
//! (`Search::builder`) with the embedder's own backend (opened by this program's isolated
//! evaluation workers), archive, tuning strategy, classifier, mutator, evaluator layer and
//! observer. A gemm search writes the usual run directory, `report.json` (naming the parts)
//! and `report.html`.
//!
//! ```sh
//! CARGO_TARGET_DIR=target cargo run --manifest-path examples/embedder/Cargo.toml -- 128 12
//! ```
//!
//! Arguments: the size (M=N=K, default 256) and the evaluation budget (default 16). Fails
//! (exit 1) when no correct kernel was found or a part of its own was not used.

mod archive;
mod backend;
mod classifier;
mod layer;
mod mutator;
mod report;
mod tuning;

use std::sync::atomic::Ordering;

use anyhow::{ensure, Context};
use kernelfoundry::core::prelude::*;
use kernelfoundry::eval::tasks::{builtin_task, parse_sizes};
use kernelfoundry::eval::BackendRegistry;
use kernelfoundry::mutate::{MixMutator, ParamMutator, StructuralMutator, TemplateLibrary};
use kernelfoundry::search::{seeds_for, template_seeds, Search};

fn main() -> anyhow::Result<()> {
    // First: evaluation workers are this program, re-executed; they open our backend by name.
    kernelfoundry::init_with(&BackendRegistry::new().with(backend::CountingOpenCl));

    let mut args = std::env::args().skip(1);
    let n: i64 = args.next().map_or(Ok(256), |a| a.parse()).context("size")?;
    let evaluations: u64 = args
        .next()
        .map_or(Ok(16), |a| a.parse())
        .context("budget")?;
    let sizes = parse_sizes(&format!("M={n},N={n},K={n}"))?;
    let task = builtin_task("gemm", &sizes)?;
    println!("gemm {n}x{n}x{n}");

    // Seeds: the naive baseline and the base variant of every gemm template.
    let templates = TemplateLibrary::builtin()?;
    let extra = template_seeds(&templates, "gemm")?;
    let seeds = seeds_for(task.as_ref(), Language::OpenCl, extra);
    // The library's mutators mixed with ours.
    let mutator = MixMutator::new()
        .with(ParamMutator::new(), 2.0)
        .with(StructuralMutator::builtin()?, 1.0)
        .with(mutator::MoreOutputsPerItem, 1.0);
    let classifier = classifier::LocalAndOutputs::new()?;
    let space = classifier.space().clone();

    // The run directory, report and pictures go to a temporary folder; so does the launch
    // log, which the workers inherit through the environment.
    let out = std::env::temp_dir().join(format!("kf-embedder-{}", std::process::id()));
    std::fs::create_dir_all(&out)?;
    let launch_log = out.join("launches.log");
    std::env::set_var(backend::LAUNCH_LOG_ENV, &launch_log);

    // Our parts' counters, read after the search.
    let archive = archive::LoggingGridFactory::default();
    let offered = archive.offered.clone();
    let strategy = tuning::BestNeighbourFactory::default();
    let tuned = strategy.made.clone();
    let layer = layer::CountingLayer::default();
    let layered = layer.evaluations.clone();
    let new_best = |r: &EvaluationReport<'_>| -> Result<(), BoxError> {
        let speedup = r.evaluation.and_then(|e| e.speedup).unwrap_or(0.0);
        println!(
            "new best: {} {speedup:.2}x by {}",
            r.candidate.id, r.candidate.origin.mutator
        );
        Ok(())
    };

    // The shipped search (evaluator in worker processes, tuning, report) with our parts.
    let outcome = Search::builder()
        .task("gemm")
        .sizes(sizes)
        .backend_factory(backend::CountingOpenCl, None)
        .classifier(classifier)
        .archive_factory(archive)
        .mutator(mutator)
        .seeds(seeds)
        .tune_budget(2)
        .tune_strategy_factory(strategy)
        .evaluator_layer(layer)
        .observer(new_best, ObserverMode::NewBest)
        .seed(25)
        .evaluations(evaluations)
        .wall(None)
        .out(&out)
        .progress(false)
        .build()?
        .run();
    let checked = outcome.map_err(anyhow::Error::from).and_then(|outcome| {
        let parts = report::check_output(&out, &report::OUR_PARTS)?;
        Ok((outcome, parts, backend::launches(&launch_log)))
    });
    let _ = std::fs::remove_dir_all(&out);
    let (result, parts, launches) = checked?;

    println!("report.json names the parts: {parts}");
    let metrics = result.archive.metrics();
    println!(
        "{} evaluations, {}/{} cells filled",
        result.summary.evaluations, metrics.filled, metrics.cells
    );
    let counters = [
        ("kernel launches by the counting backend", launches),
        (
            "insertions logged by the archive",
            offered.load(Ordering::Relaxed),
        ),
        (
            "kernels tuned by best-neighbour",
            tuned.load(Ordering::Relaxed),
        ),
        (
            "evaluations through the counting layer",
            layered.load(Ordering::Relaxed),
        ),
    ];
    for (what, n) in counters {
        println!("{what}: {n}");
        ensure!(n > 0, "no {what}: the part was not used");
    }
    let best = report::print_elites(&result.archive, &space).context("no correct kernel")?;
    ensure!(
        metrics.filled >= 2,
        "the search filled only {} cell",
        metrics.filled
    );
    println!("best correct kernel: {best:.1} GFLOP/s");
    Ok(())
}
