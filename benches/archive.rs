//! Grid archive throughput: one-at-a-time insertion (target >= 10 million inserts/s on the
//! default 3-D kernel space with a small payload) and parent selection.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kf_archive::GridArchive;
use kf_core::{DescriptorSpace, Dimension, Fitness};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const OPS: usize = 4096;

type Op = (Vec<usize>, Fitness, u64);

/// `OPS` random insertions into `space`; `fitness(i, rng)` gives the i-th fitness.
fn ops(space: &DescriptorSpace, mut fitness: impl FnMut(usize, &mut ChaCha8Rng) -> f64) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let shape = space.shape();
    (0..OPS)
        .map(|i| {
            let coords = shape.iter().map(|&n| rng.random_range(0..n)).collect();
            let f = Fitness::new(fitness(i, &mut rng)).expect("finite and non-negative");
            (coords, f, i as u64)
        })
        .collect()
}

fn insert_all(archive: &mut GridArchive<u64>, ops: &[Op]) {
    for (coords, fitness, payload) in ops {
        black_box(
            archive
                .insert_at(black_box(coords), *fitness, *payload)
                .ok(),
        );
    }
}

fn big_space() -> DescriptorSpace {
    DescriptorSpace::new(
        (0..4)
            .map(|i| Dimension::numbered(format!("d{i}"), 10))
            .collect(),
    )
    .expect("valid space")
}

fn inserts(c: &mut Criterion) {
    let kernel = DescriptorSpace::kernel_default();
    let mut group = c.benchmark_group("grid_insert");
    group.throughput(Throughput::Elements(OPS as u64));

    // A filled archive receiving random candidates (mostly rejected, some improvements).
    let random = ops(&kernel, |_, rng| rng.random::<f64>() * 10.0);
    let mut steady = GridArchive::<u64>::new(kernel.clone()).expect("valid space");
    insert_all(&mut steady, &random);
    group.bench_function("64_cells/steady_state", |b| {
        b.iter(|| insert_all(&mut steady, &random))
    });

    // A fresh archive per batch: new cells, improvements and rejections.
    let empty = GridArchive::<u64>::new(kernel.clone()).expect("valid space");
    group.bench_function("64_cells/from_empty", |b| {
        b.iter_batched_ref(
            || empty.clone(),
            |a| insert_all(a, &random),
            BatchSize::SmallInput,
        )
    });

    // Every insertion adds or improves (the slowest path: metrics, best and recent ring).
    let rising = ops(&kernel, |i, _| i as f64 * 1e-3);
    group.bench_function("64_cells/always_improving", |b| {
        b.iter_batched_ref(
            || empty.clone(),
            |a| insert_all(a, &rising),
            BatchSize::SmallInput,
        )
    });

    // A larger grid: 4 dimensions x 10 levels = 10 000 cells.
    let big = big_space();
    let big_ops = ops(&big, |_, rng| rng.random::<f64>() * 10.0);
    let big_empty = GridArchive::<u64>::new(big).expect("valid space");
    group.bench_function("10000_cells/from_empty", |b| {
        b.iter_batched_ref(
            || big_empty.clone(),
            |a| insert_all(a, &big_ops),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn filled(space: DescriptorSpace, fraction: f64) -> GridArchive<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut archive = GridArchive::<u64>::new(space).expect("valid space");
    for i in 0..archive.num_cells() {
        if rng.random::<f64>() < fraction {
            let f = Fitness::new(rng.random::<f64>() * 10.0).expect("valid");
            archive.insert_index(i, f, i as u64).expect("in range");
        }
    }
    archive
}

fn selection(c: &mut Criterion) {
    let mut group = c.benchmark_group("grid_select");
    group.throughput(Throughput::Elements(1));
    for (name, archive) in [
        (
            "64_cells/full",
            filled(DescriptorSpace::kernel_default(), 1.0),
        ),
        (
            "64_cells/quarter",
            filled(DescriptorSpace::kernel_default(), 0.25),
        ),
        ("10000_cells/half", filled(big_space(), 0.5)),
    ] {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        group.bench_function(name, |b| {
            b.iter(|| black_box(archive.select(&mut rng).map(|s| s.occupant.index)))
        });
    }
    // What the engine asks of the archive each step besides the parent.
    let archive = filled(DescriptorSpace::kernel_default(), 0.5);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    group.bench_function("64_cells/inspirations_3", |b| {
        b.iter(|| black_box(archive.inspiration_indices(&mut rng, Some(0), 3)))
    });
    group.bench_function("64_cells/hints", |b| {
        b.iter(|| black_box(archive.hints(Some(&[1, 2, 3]))))
    });
    group.finish();
}

criterion_group!(benches, inserts, selection);
criterion_main!(benches);
