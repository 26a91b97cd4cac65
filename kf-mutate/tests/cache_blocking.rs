//! The structures for large problems (issue 50): `gemm_blocked`'s cache blocking over K (`KC`)
//! with several row blocks per group (`RB`), the blocking over N (`CB` column panels per
//! group under one block of A) and the packed B panel (`PACK_B`), and the
//! softmax templates' streaming stores (`STREAM`). Their constraints use the device's cache
//! facts; every combination below compiles and computes the right answer through the real
//! evaluator on the OpenCL backend (skips without a runtime unless `KF_REQUIRE_OPENCL=1`).

use kf_core::prelude::*;
use kf_core::DeviceKind;
use kf_eval::task::{Gemm, KernelTask, Softmax};
use kf_eval::KernelEvaluator;
use kf_mutate::{Structure, TemplateLibrary, Variant};

mod common;
use common::quick_config;

/// `name=value` pairs, comma-separated.
fn values(text: &str) -> Vec<(String, i64)> {
    text.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (k.trim().to_owned(), v.trim().parse().unwrap())
        })
        .collect()
}

/// The variant of `template` with the switches in `config` set, and the rest of `config` as
/// its parameters (the manifest's first values for the others).
fn variant(library: &TemplateLibrary, template: &str, config: &str) -> (Variant, ParamValues) {
    let template = library.get(template).unwrap();
    let mut structure = Structure::new();
    let mut params = ParamValues::new();
    for (name, value) in values(config) {
        if template.switches().contains_key(&name) {
            structure = structure.with(&name, value);
        } else {
            params = params.with(&name, value);
        }
    }
    let variant = template.instantiate(&structure).unwrap();
    let params = variant.manifest.resolve_params(&params).unwrap();
    (variant, params)
}

/// The sizes of a 1024 x `n` x 1024 matrix product (`M`, `N`, `K`).
fn gemm_sizes(n: i64) -> indexmap::IndexMap<String, i64> {
    [("M", 1024), ("N", n), ("K", 1024)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
}

/// A CPU with work-groups up to 1024, 256 KiB of local memory and an L2 cache of `l2` bytes.
fn cpu_with_l2(l2: u64) -> DeviceFacts {
    let mut device = DeviceFacts::unknown("cpu");
    device.max_work_group_size = 1024;
    device.local_mem_bytes = 256 << 10;
    device.l2_cache_bytes = l2;
    device
}

#[test]
fn cache_blocking_constraints_use_the_cache_facts() {
    let library = TemplateLibrary::builtin().unwrap();
    let (variant, _) = variant(&library, "gemm_blocked", "VW=16,PACK_B=1");
    let sizes = gemm_sizes(1024);
    let mut device = cpu_with_l2(64 << 10);
    let check = |device: &DeviceFacts, kc: i64| {
        let params = variant
            .manifest
            .resolve_params(
                &ParamValues::new()
                    .with("KC", kc)
                    .with("RB", 2i64)
                    .with("TN", 2i64)
                    .with("WG0", 1i64),
            )
            .unwrap();
        let symbols = variant.manifest.symbols(&params, &sizes, device);
        variant.manifest.check_constraints(&params, &symbols)
    };
    // A 256 x 32 panel of B is 32 KiB: half of a 64 KiB L2; a 512-deep one is not.
    check(&device, 256).unwrap();
    let refused = check(&device, 512).unwrap_err().to_string();
    assert!(refused.contains("l2_cache_bytes"), "{refused}");
    // An unknown L2 (0) leaves the choice to the measurements.
    device.l2_cache_bytes = 0;
    check(&device, 512).unwrap();
    // PACK_B needs an outer K block.
    assert!(check(&device, 0).is_err());
}

#[test]
fn n_blocking_needs_a_k_block_and_fits_the_l2() {
    let library = TemplateLibrary::builtin().unwrap();
    let (variant, _) = variant(&library, "gemm_blocked", "VW=16");
    let sizes = gemm_sizes(1024);
    let mut device = cpu_with_l2(1 << 20);
    let check = |device: &DeviceFacts, config: &str| {
        let mut params = ParamValues::new();
        for (name, value) in values(config) {
            params = params.with(&name, value);
        }
        let params = variant.manifest.resolve_params(&params).unwrap();
        let symbols = variant.manifest.symbols(&params, &sizes, device);
        variant.manifest.check_constraints(&params, &symbols)?;
        variant.manifest.launch_range(&symbols)
    };
    // The explicit-vector start's blocks (8 x 64 per work-item, 16 rows per group): 4 column
    // panels of 64 per group, so 4 groups across N instead of 16.
    let start = "TM=8,TN=4,WG0=1,WG1=16,TK=64,KC=256,RB=2";
    let range = check(&device, &format!("{start},CB=4")).unwrap();
    assert_eq!(range.global[0], 1024 / 64 / 4, "{range:?}");
    // N blocking reuses one K block's A: without KC it is refused.
    let refused = check(&device, "TM=8,TN=4,WG0=1,WG1=16,TK=64,KC=0,CB=2")
        .unwrap_err()
        .to_string();
    assert!(refused.contains("CB == 1 || KC > 0"), "{refused}");
    // The 256 x 512 block of A (RB=4: 4 x 128 rows) and a 512 x 64 panel of B are 2.5 MiB:
    // more than a 1 MiB L2, fine for a 4 MiB one, and left to the measurements when unknown.
    let big = "TM=8,TN=4,WG0=1,WG1=16,TK=64,KC=512,RB=4,CB=2";
    assert!(check(&device, big)
        .unwrap_err()
        .to_string()
        .contains("l2_cache_bytes"));
    device.l2_cache_bytes = 4 << 20;
    check(&device, big).unwrap();
    device.l2_cache_bytes = 0;
    check(&device, big).unwrap();
    // The columns divide into CB panels: 1088 = 17 panels of 64 do not make groups of 8.
    device.l2_cache_bytes = 1 << 20;
    let narrow = gemm_sizes(1088);
    let params = variant
        .manifest
        .resolve_params(&ParamValues::new().with("KC", 256i64).with("CB", 8i64))
        .unwrap();
    let symbols = variant.manifest.symbols(&params, &narrow, &device);
    let refused = variant
        .manifest
        .check_constraints(&params, &symbols)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("CB) == 0"), "{refused}");
}

#[test]
fn cache_blocked_gemm_and_streaming_softmax_verify_on_opencl() {
    let Some(backend) = kf_backend_opencl::testing::backend_or_skip() else {
        return;
    };
    let device = backend.device().clone();
    assert!(
        device.kind != DeviceKind::Cpu || device.l2_cache_bytes > 0,
        "a CPU device without its L2 size: {device:?}"
    );
    let mut evaluator = KernelEvaluator::new(backend, quick_config(None));
    let gemm = Gemm::new(256, 256, 512).unwrap();
    let gemm_library = TemplateLibrary::builtin().unwrap();
    let softmax = Softmax::from_sizes(
        &[("ROWS", 256), ("COLS", 512)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
    .unwrap();
    let softmax_library = TemplateLibrary::softmax().unwrap();
    let cases: &[(&dyn KernelTask, &TemplateLibrary, &str, &str)] = &[
        // K blocks without packing: C read back between blocks, 2 row blocks per group.
        (
            &gemm,
            &gemm_library,
            "gemm_blocked",
            "VW=16,TM=8,TN=2,WG0=1,WG1=4,TK=64,KC=128,RB=2",
        ),
        // Packed B panels, explicit vectors, several work-items wide.
        (
            &gemm,
            &gemm_library,
            "gemm_blocked",
            "VW=16,PACK_B=1,TM=4,TN=2,WG0=2,WG1=4,TK=64,KC=256,RB=4",
        ),
        // Packed B panels, scalar lanes across work-items (the panel's work-item-major layout).
        (
            &gemm,
            &gemm_library,
            "gemm_blocked",
            "VW=1,PACK_B=1,TM=4,TN=2,WG0=16,WG1=2,TK=32,KC=128,RB=2",
        ),
        // N blocking: each group walks 2 column panels under one block of A, with two row
        // blocks, and with packed B panels (one pack per K block and column panel).
        (
            &gemm,
            &gemm_library,
            "gemm_blocked",
            "VW=16,TM=8,TN=2,WG0=1,WG1=4,TK=64,KC=128,RB=2,CB=2",
        ),
        (
            &gemm,
            &gemm_library,
            "gemm_blocked",
            "VW=16,PACK_B=1,TM=4,TN=2,WG0=2,WG1=4,TK=64,KC=256,RB=2,CB=4",
        ),
        (
            &gemm,
            &gemm_library,
            "gemm_blocked",
            "VW=1,LOCAL_B=1,TM=4,TN=2,WG0=16,WG1=2,TK=32,KC=128,RB=1,CB=2",
        ),
        // The local-A start's structure with K blocks.
        (
            &gemm,
            &gemm_library,
            "gemm_blocked",
            "VW=16,LOCAL_A=1,PREFETCH=1,TM=16,TN=2,WG0=8,WG1=4,TK=128,UNROLL=4,KC=256,RB=2",
        ),
        // Double-buffered local B tiles restart at every K block and row block.
        (
            &gemm,
            &gemm_library,
            "gemm_blocked",
            "VW=4,LOCAL_B=1,DOUBLE_BUFFER=1,TM=4,TN=2,WG0=4,WG1=4,TK=32,KC=128,RB=2",
        ),
        (
            &softmax,
            &softmax_library,
            "softmax_row",
            "VW=16,ALGO=0,WG=16,STREAM=1",
        ),
        (
            &softmax,
            &softmax_library,
            "softmax_row",
            "VW=16,ALGO=1,WG=16,STREAM=1",
        ),
        (
            &softmax,
            &softmax_library,
            "softmax_row",
            "VW=4,ALGO=2,WG=4,STREAM=1",
        ),
        (
            &softmax,
            &softmax_library,
            "softmax_row",
            "VW=1,ALGO=1,WG=16,STREAM=1",
        ),
        (
            &softmax,
            &softmax_library,
            "softmax_group",
            "VW=16,ALGO=3,REDUCE=1,WG=16,CHUNKS=2,STREAM=1",
        ),
        (
            &softmax,
            &softmax_library,
            "softmax_group",
            "VW=1,ALGO=1,REDUCE=1,WG=16,STREAM=1",
        ),
    ];
    let mut failures = Vec::new();
    for (task, library, template, config) in cases {
        let (variant, params) = variant(library, template, config);
        let evaluation = evaluator.evaluate(*task, &variant.source, &params).unwrap();
        if evaluation.status != Status::Correct {
            failures.push(format!(
                "{template} {config}: {} — {}",
                evaluation.status, evaluation.diagnostics
            ));
        }
    }
    common::assert_no_failures(&failures);
}
