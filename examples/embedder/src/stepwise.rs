//! The second search: the shipped search driven step by step (`ask`, `evaluate`, `tell`),
//! stopped after a few steps, and resumed from its run directory to the end.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use anyhow::{bail, ensure};
use kernelfoundry::core::Ask;
use kernelfoundry::eval::task::parse_sizes;
use kernelfoundry::search::Search;

use crate::classifier::LocalAndOutputs;
use crate::layer::CountingLayer;

/// What the stopped and resumed search did.
pub struct Resumed {
    /// Evaluations told in the first session, before it stopped.
    pub before: u64,
    /// Evaluations the resumed session made (the recorded ones are replayed, not evaluated).
    pub after: u64,
}

/// Runs `steps` steps of a small gemm search in `out` one at a time, drops it, builds the same
/// search again over `out` and runs it to `evaluations`; checks that the second session
/// replayed those steps and evaluated only the rest.
pub fn stop_and_resume(out: &Path, steps: u64, evaluations: u64) -> anyhow::Result<Resumed> {
    let sizes = parse_sizes("M=64,N=64,K=64")?;
    // The same search both times (its run directory refuses a changed one); a fresh counting
    // layer for each session.
    let search = |layer: CountingLayer| -> anyhow::Result<_> {
        let search = Search::builder()
            .task("gemm")
            .sizes(sizes.clone())
            .classifier(LocalAndOutputs::new()?)
            .evaluator_layer(layer)
            .tune_budget(1)
            .seed(46)
            .evaluations(evaluations)
            .wall(None)
            .reference(false)
            .final_rounds(0)
            .out(out)
            .progress(false)
            .build()?;
        Ok(search)
    };

    let first = CountingLayer::default();
    let counted = Arc::clone(&first.evaluations);
    let mut run = search(first)?.start()?;
    for _ in 0..steps {
        let Ask::Evaluate(proposal) = run.ask()? else {
            bail!("the search ended before step {steps}");
        };
        // Our own work could go here, between the steps.
        let evaluations = run.evaluate(&proposal);
        println!("step {}: {} children", proposal.step(), evaluations.len());
        run.tell(proposal.id(), evaluations)?;
    }
    let before = run.stepper().evaluations();
    ensure!(run.stepper().steps() == steps, "{steps} steps told");
    ensure!(counted.load(Ordering::Relaxed) == before);
    drop(run); // stop: the run directory keeps every told step

    let second = CountingLayer::default();
    let counted = Arc::clone(&second.evaluations);
    let outcome = search(second)?.start()?.run()?;
    let after = counted.load(Ordering::Relaxed);
    let summary = &outcome.summary;
    ensure!(
        summary.replayed_steps == steps,
        "the resumed search replayed {} steps, not {steps}",
        summary.replayed_steps
    );
    ensure!(
        summary.evaluations == before + after,
        "the resumed search evaluated {after} kernels beyond the {before} recorded, \
         yet counts {}",
        summary.evaluations
    );
    ensure!(after > 0, "the resumed search evaluated nothing new");
    Ok(Resumed { before, after })
}
