//! KernelFoundry embedded in another crate, through public items only: a custom
//! two-dimensional behaviour descriptor (local memory used? outputs per work-item), a custom
//! mutator mixed with the library's parameter and structural mutators, a closure observer, all
//! given to the shipped search (`Search::builder`): a gemm search on the real OpenCL evaluator
//! in worker processes.
//!
//! ```sh
//! CARGO_TARGET_DIR=target cargo run --manifest-path examples/embedder/Cargo.toml -- 128 12
//! ```
//!
//! Arguments: the size (M=N=K, default 256) and the evaluation budget (default 16). Fails
//! (exit 1) when no correct kernel was found.

use std::sync::{Arc, Mutex};

use anyhow::{ensure, Context};
use kernelfoundry::core::prelude::*;
use kernelfoundry::core::{async_trait, Needs};
use kernelfoundry::eval::tasks::{builtin_task, parse_sizes};
use kernelfoundry::mutate::{MixMutator, ParamMutator, StructuralMutator, TemplateLibrary};
use kernelfoundry::search::{seeds_for, template_seeds, BackendKind, Search};

/// Names of the parameters whose product is the outputs each work-item computes, in the
/// shipped gemm kernels and templates.
const OUTPUT_FACTORS: [&str; 4] = ["WPT", "TM", "TN", "VW"];

/// The embedder's own descriptor: does the kernel stage data in local memory (2 levels), and
/// how many outputs does a work-item compute (1, 2–8, more: 3 levels). 6 cells.
struct LocalAndOutputs {
    space: DescriptorSpace,
}

impl LocalAndOutputs {
    fn new() -> anyhow::Result<Self> {
        let space = DescriptorSpace::new(vec![
            Dimension::new("local memory", ["no", "yes"]),
            Dimension::new("outputs per work-item", ["1", "2-8", ">8"]),
        ])?;
        Ok(LocalAndOutputs { space })
    }
}

impl BehaviorClassifier for LocalAndOutputs {
    type Error = std::convert::Infallible;

    fn space(&self) -> &DescriptorSpace {
        &self.space
    }

    fn classify(&self, c: &Candidate, e: &Evaluation) -> Result<Descriptor, Self::Error> {
        // The values the kernel was measured with, not only the ones it was proposed with.
        let params = e.effective_params(c);
        let int = |name: &str| params.get(name).and_then(ParamValue::as_i64);
        // Templates switch local memory with parameters; other kernels show it in their text.
        let switches = [int("LOCAL_A"), int("LOCAL_B")];
        let local = if switches.iter().any(Option::is_some) {
            switches.contains(&Some(1))
        } else {
            c.source.text.contains("__local")
        };
        let outputs: i64 = OUTPUT_FACTORS.iter().filter_map(|n| int(n)).product();
        let level = match outputs {
            ..=1 => 0,
            2..=8 => 1,
            _ => 2,
        };
        let mut d = Descriptor::new([usize::from(local), level], "local-and-outputs");
        d.evidence = vec![
            format!("local memory: {local}"),
            format!("outputs per work-item: {outputs}"),
        ];
        Ok(d)
    }
}

/// The embedder's own mutator: doubles the first output factor the parent has, from the values
/// it was measured with. Children the manifest rules out are left to the evaluator to reject.
struct MoreOutputsPerItem;

#[async_trait]
impl Mutator for MoreOutputsPerItem {
    type Error = std::convert::Infallible;

    fn name(&self) -> &str {
        "more-outputs"
    }

    fn needs(&self) -> Needs {
        Needs::NOTHING
    }

    async fn mutate(
        &self,
        parent: &Elite,
        _ctx: &MutationContext,
    ) -> Result<Mutation, Self::Error> {
        let params = parent.effective_params();
        let Some((name, value)) = OUTPUT_FACTORS
            .iter()
            .find_map(|n| params.get(n).and_then(ParamValue::as_i64).map(|v| (*n, v)))
        else {
            return Ok(Mutation::default());
        };
        let child = Offspring::new(
            parent.candidate.source.clone(),
            params.clone().with(name, value * 2),
            Origin::mutator(self.name()).with_note(format!("{name} {value} -> {}", value * 2)),
        );
        Ok(Mutation::free(vec![child]))
    }
}

fn main() -> anyhow::Result<()> {
    // First: evaluation workers are this program, re-executed; init() serves when we are one.
    kernelfoundry::init();

    let mut args = std::env::args().skip(1);
    let n: i64 = args
        .next()
        .map_or(Ok(256), |a| a.parse())
        .context("size: a number")?;
    let evaluations: u64 = args
        .next()
        .map_or(Ok(16), |a| a.parse())
        .context("budget: a number")?;
    let sizes = parse_sizes(&format!("M={n},N={n},K={n}"))?;

    let task = builtin_task("gemm", &sizes)?;
    println!("gemm {n}x{n}x{n}");

    // Seeds: the naive baseline and the base variant of every gemm template.
    let templates = TemplateLibrary::builtin()?;
    let seeds = seeds_for(
        task.as_ref(),
        Language::OpenCl,
        template_seeds(&templates, "gemm")?,
    );

    // The library's mutators mixed with ours.
    let mutator = MixMutator::new()
        .with(ParamMutator::new(), 2.0)
        .with(StructuralMutator::builtin()?, 1.0)
        .with(MoreOutputsPerItem, 1.0);

    let classifier = LocalAndOutputs::new()?;
    let space = classifier.space().clone();
    // The run directory, report and pictures go to a temporary folder.
    let out = std::env::temp_dir().join(format!("kf-embedder-{}", std::process::id()));

    // A closure observer: prints every new best as it happens.
    let new_bests = Arc::new(Mutex::new(0u32));
    let counted = Arc::clone(&new_bests);
    let observer = move |r: &EvaluationReport<'_>| -> Result<(), BoxError> {
        // Fitness ranks by speedup over the baseline timed in the same worker, so a new best
        // may show fewer GFLOP/s than an earlier one timed beside a slower baseline run.
        let gflops = r.evaluation.and_then(|e| e.gflops).unwrap_or(0.0);
        let speedup = r.evaluation.and_then(|e| e.speedup).unwrap_or(0.0);
        let cell = r.descriptor.map(|d| d.coords.clone()).unwrap_or_default();
        println!(
            "new best after {} evaluations: {} {speedup:.2}x ({:.1} GFLOP/s) in cell {cell:?} by {} ({})",
            r.evaluations,
            r.candidate.id,
            gflops,
            r.candidate.origin.mutator,
            r.candidate.origin.note
        );
        *counted.lock().map_err(|_| "poisoned")? += 1;
        Ok(())
    };

    // The shipped search (real evaluator in worker processes, archive, report) with our
    // descriptor, mutator and observer; no per-kernel tuning.
    let outcome = Search::builder()
        .task("gemm")
        .sizes(sizes)
        .backend(BackendKind::OpenCl, None)
        .classifier(classifier)
        .mutator(mutator)
        .seeds(seeds)
        .seed(25)
        .evaluations(evaluations)
        .tune_budget(1)
        .wall(None)
        .out(&out)
        .progress(false)
        .observer(observer, ObserverMode::NewBest)
        .build()?
        .run();
    let _ = std::fs::remove_dir_all(&out);
    let result = outcome?;

    let metrics = result.archive.metrics();
    println!(
        "{} evaluations, {}/{} cells filled, {} new bests",
        result.summary.evaluations,
        metrics.filled,
        metrics.cells,
        new_bests.lock().map(|n| *n).unwrap_or(0)
    );
    let mut best = None::<f64>;
    for elite in result.archive.elites() {
        let levels: Vec<&str> = elite
            .descriptor
            .coords
            .iter()
            .zip(&space.dimensions)
            .map(|(c, d)| d.levels[*c].as_str())
            .collect();
        let gflops = elite
            .evaluation
            .gflops
            .filter(|_| elite.evaluation.status.is_correct());
        println!(
            "  local {:>3}, outputs {:>4}: {:>8} {}  {}",
            levels[0],
            levels[1],
            gflops.map_or_else(|| "-".to_owned(), |g| format!("{g:.1}")),
            elite.evaluation.status,
            elite.effective_params()
        );
        if let Some(g) = gflops {
            best = Some(best.map_or(g, |b: f64| b.max(g)));
        }
    }
    let best = best.context("no correct kernel was found")?;
    ensure!(
        metrics.filled >= 2,
        "the search filled only {} cell",
        metrics.filled
    );
    println!("best correct kernel: {best:.1} GFLOP/s");
    Ok(())
}
