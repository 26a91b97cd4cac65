//! KernelFoundry embedded in another crate, through public items only: the shipped search
//! (`Search::builder`) with the embedder's own backend (opened by this program's isolated
//! evaluation workers), archive, tuning strategy, classifier, mutator, evaluator layer and
//! observer. A gemm search writes the usual run directory, `report.json` (naming the parts)
//! and `report.html`. Then a second, small search is driven step by step (`Search::start`,
//! `ask`/`tell`), stopped after 3 steps and resumed from its run directory to the end.
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
mod counters;
mod layer;
mod mutator;
mod report;
mod stepwise;
mod tuning;

use anyhow::{ensure, Context};
use kernelfoundry::core::prelude::*;
use kernelfoundry::eval::task::{builtin_task, parse_sizes};
use kernelfoundry::eval::BackendRegistry;
use kernelfoundry::mutate::{MixMutator, ParamMutator, StructuralMutator, TemplateLibrary};
use kernelfoundry::search::{seeds_for, template_seeds, Search};

fn main() -> anyhow::Result<()> {
    // First: evaluation workers are this program, re-executed; they open our backend by name.
    kernelfoundry::init_with(&BackendRegistry::new().with(backend::CountingOpenCl));

    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>());
    let n = args.next().unwrap_or(Ok(256)).context("size: a number")?;
    let evaluations = args.next().unwrap_or(Ok(16)).context("budget: a number")?;
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
    let (archive, strategy, layer, counters) = counters::parts(launch_log);

    // The shipped search (evaluator in worker processes, tuning, report) with our parts.
    let outcome = Search::builder()
        .task("gemm")
        .sizes(sizes)
        .backend(backend::CountingOpenCl, None)
        .classifier(classifier)
        .archive_factory(archive)
        .mutator(mutator)
        .seeds(seeds)
        .tune_budget(2)
        .tune_strategy(strategy)
        .evaluator_layer(layer)
        .observer(report::print_new_best, ObserverMode::NewBest)
        .seed(25)
        .evaluations(evaluations)
        .wall(None)
        .out(&out)
        .progress(false)
        .build()?
        .run();
    // Checked before the temporary folder goes.
    let checked = outcome.map_err(anyhow::Error::from).and_then(|outcome| {
        let parts = report::check_output(&out, &report::OUR_PARTS)?;
        let counts = counters.read();
        // A second search, step by step: 3 steps, stopped, resumed to 6 evaluations.
        let resumed = stepwise::stop_and_resume(&out.join("stepwise"), 3, 6)?;
        Ok((outcome, parts, counts, resumed))
    });
    let _ = std::fs::remove_dir_all(&out);
    let (result, parts, counts, resumed) = checked?;
    let (before, after) = (resumed.before, resumed.after);
    println!("stepwise search: stopped after {before} evaluations, resumed for {after} more");

    println!("report.json names the parts: {parts}");
    let metrics = result.archive.metrics();
    let (evaluated, filled) = (result.summary.evaluations, metrics.filled);
    println!(
        "{evaluated} evaluations, {filled}/{} cells filled",
        metrics.cells
    );
    counters::check(&counts)?;
    let best = report::print_elites(&result.archive, &space).context("no correct kernel")?;
    ensure!(filled >= 2, "the search filled only {filled} cell");
    println!("best correct kernel: {best:.1} GFLOP/s");
    Ok(())
}
