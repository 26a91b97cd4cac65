//! Counting and uniform sampling of a constrained space of about 1.4·10⁷ raw combinations
//! (a CLBlast-like GEMM space with device-dependent constraints), without materialising it.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kf_core::DeviceFacts;
use kf_tune::{Param, Space};
use rand::SeedableRng;

fn gemm_space() -> Space {
    let mut device = DeviceFacts::unknown("bench");
    device.max_work_group_size = 1024;
    device.local_mem_bytes = 48 * 1024;
    let p2 = |n: &str, lo, hi| Param::powers_of_two(n, lo, hi).expect("valid range");
    Space::builder()
        .param(p2("MWG", 4, 256))
        .param(p2("NWG", 4, 256))
        .param(p2("KWG", 8, 64))
        .param(p2("MDIMC", 1, 8))
        .param(p2("NDIMC", 1, 8))
        .param(p2("VWM", 1, 8))
        .param(Param::range("KWI", 1, 8, 1).expect("valid range"))
        .param(Param::ints("SA", [0, 1]).expect("valid"))
        .param(Param::ints("SB", [0, 1]).expect("valid"))
        .param(p2("LX", 1, 32))
        .param(p2("LY", 1, 32))
        .constraint("MWG % (MDIMC * VWM) == 0")
        .constraint("NWG % NDIMC == 0")
        .constraint("MDIMC * NDIMC * 16 <= max_work_group_size")
        .constraint("KWG % KWI == 0")
        .constraint("(SA * MWG + SB * NWG) * KWG * 4 <= local_mem_bytes")
        .constraint("LX * LY <= max_work_group_size && LX * LY >= 32")
        .device(&device)
        .build()
        .expect("valid space")
}

fn bench(c: &mut Criterion) {
    let space = gemm_space();
    let n = space.len();
    println!("raw combinations: {}, valid: {n}", space.raw_len());
    let mut g = c.benchmark_group("space");
    g.sample_size(20);
    g.bench_function("count (build + exact count)", |b| {
        b.iter(|| gemm_space().len())
    });
    g.throughput(Throughput::Elements(1000));
    g.bench_function("sample 1000 uniform", |b| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        b.iter(|| {
            (0..1000)
                .filter_map(|_| space.sample_point(&mut rng))
                .count()
        })
    });
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("enumerate 100000", |b| {
        b.iter(|| space.iter_points().take(100_000).count())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
