//! Engine overhead per evaluation with a no-op mutator, evaluator and classifier over the grid
//! archive (target <= 20 µs per evaluation): selection, inspirations, hints, id bookkeeping,
//! insertion, history and (in one variant) the run-directory checkpoint.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::convert::Infallible;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kf_archive::{EliteArchive, RunDir, RunDirOptions, RunMeta};
use kf_core::prelude::*;
use kf_core::{async_trait, RunResult};

const EVALUATIONS: u64 = 1000;

/// Returns the parent's kernel unchanged.
struct NoopMutator;

#[async_trait]
impl Mutator for NoopMutator {
    type Error = Infallible;
    fn name(&self) -> &str {
        "noop"
    }
    async fn mutate(&self, parent: &Elite, _ctx: &MutationContext) -> Result<Mutation, Infallible> {
        let child = Offspring::new(
            parent.candidate.source.clone(),
            ParamValues::new(),
            Origin::mutator("noop"),
        );
        Ok(Mutation::free(vec![child]))
    }
}

/// Returns the same evaluation for every candidate.
struct NoopEvaluator(Evaluation);

#[async_trait]
impl Evaluator for NoopEvaluator {
    type Error = Infallible;
    async fn evaluate(&self, _c: &Candidate) -> Result<Evaluation, Infallible> {
        Ok(self.0.clone())
    }
}

/// Places candidate `#i` in cell `i mod cells`.
struct IdClassifier(DescriptorSpace);

impl BehaviorClassifier for IdClassifier {
    type Error = Infallible;
    fn space(&self) -> &DescriptorSpace {
        &self.0
    }
    fn classify(&self, c: &Candidate, _e: &Evaluation) -> Result<Descriptor, Infallible> {
        let i = c.id.0 as usize % 64;
        Ok(Descriptor::new([i / 16, (i / 4) % 4, i % 4], "id"))
    }
}

fn engine(in_flight: usize) -> Engine<NoopEvaluator, IdClassifier, EliteArchive> {
    let space = DescriptorSpace::kernel_default();
    let timing = TimingStats::from_samples(&[1e-3]).expect("valid sample");
    let archive = EliteArchive::new(space.clone()).expect("valid space");
    let seed = Candidate::seed(
        KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}"),
        ParamValues::new(),
    );
    Engine::new(
        NoopMutator,
        NoopEvaluator(Evaluation::correct(timing, Some(timing))),
        IdClassifier(space),
        archive,
    )
    .seeds(vec![seed])
    .seed(1)
    .budget(Budget::evaluations(EVALUATIONS))
    .max_in_flight(in_flight)
}

fn check(result: RunResult<EliteArchive>) {
    assert_eq!(result.summary.evaluations, EVALUATIONS);
}

fn overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine_per_evaluation");
    group.throughput(Throughput::Elements(EVALUATIONS));
    for in_flight in [1, 8] {
        group.bench_function(format!("noop/in_flight_{in_flight}"), |b| {
            b.iter(|| check(engine(in_flight).run_blocking().expect("runs")))
        });
    }
    // The run directory: one JSON line per step, plus a snapshot (with fsync) every 100
    // records or only at the end.
    for (name, snapshot_every) in [("snapshot_every_100", 100), ("final_snapshot_only", 0)] {
        group.bench_function(format!("noop_with_run_dir/{name}"), |b| {
            b.iter_batched(
                || {
                    let tmp = tempfile::tempdir().expect("temporary directory");
                    let meta = RunMeta::new(1, &"bench").expect("serializable");
                    let options = RunDirOptions {
                        snapshot_every,
                        ..RunDirOptions::default()
                    };
                    let dir = RunDir::open_with(tmp.path(), meta, options).expect("run directory");
                    (tmp, dir)
                },
                |(tmp, dir)| {
                    check(engine(1).checkpoint(dir).run_blocking().expect("runs"));
                    tmp
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
