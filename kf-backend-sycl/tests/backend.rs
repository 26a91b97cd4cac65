//! SYCL-specific behaviour beyond the shared conformance suite: the persistent bundle cache,
//! compile errors with clang's diagnostics on the kernel's own lines, definitions that the SYCL
//! headers never see, C++-named kernels, and sources that would crash the runtime compiler.
//! Skips without a SYCL runtime unless `KF_REQUIRE_SYCL=1`.

mod common;

use std::fs;
use std::time::Instant;

use common::backend_with_cache;
use kf_core::prelude::*;

const SCALE: &str = r#"// A test kernel: y = x * FACTOR + T(OFFSET).
#include <sycl/sycl.hpp>

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void scale(const float* x, float* y) {
    const size_t i = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    y[i] = x[i] * FACTOR + T(OFFSET) + WG;
}
"#;

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Runs `kernel(x, y)` over 64 work-items and returns y.
fn run<B: Backend>(backend: &B, kernel: &B::Kernel) -> Vec<f32> {
    let x: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_ne_bytes()).collect();
    let mut xb = backend.alloc(x.len()).expect("alloc");
    backend.write(&mut xb, &x).expect("write");
    let yb = backend.alloc(x.len()).expect("alloc");
    backend
        .launch(
            kernel,
            &[
                KernelArg::Buffer {
                    buffer: &xb,
                    offset: 0,
                },
                KernelArg::Buffer {
                    buffer: &yb,
                    offset: 0,
                },
            ],
            &NdRange::new([64], [16]),
        )
        .expect("launch");
    let mut out = vec![0u8; x.len()];
    backend.read(&yb, &mut out).expect("read");
    floats(&out)
}

/// `T` and `WG` as parameters would break the SYCL headers as `-D` options.
fn params(factor: i64) -> ParamValues {
    ParamValues::new()
        .with("FACTOR", factor)
        .with("T", "float")
        .with("OFFSET", 0.5)
        .with("WG", 16i64)
}

/// The files of a bundle cache folder (its `pch/` folder of precompiled headers left out).
fn bundles(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn bundles_are_cached_on_disk_across_backends() {
    let dir = tempfile::tempdir().unwrap();
    let Some(first) = backend_with_cache(Some(dir.path())) else {
        return;
    };
    let src = KernelSource::new(Language::Sycl, "scale", SCALE);
    let opts = CompileOptions::default();
    let started = Instant::now();
    let a = first.compile(&src, &params(3), &opts).unwrap();
    let build_s = started.elapsed().as_secs_f64();
    assert!(!a.facts.cache_hit);
    assert!(a.facts.compile_seconds.is_some_and(|s| s > 0.0));
    assert_eq!(a.facts.extra["entry_lookup"], "extern \"C\" name");
    assert_eq!(run(&first, &a.kernel)[2], 2.0 * 3.0 + 0.5 + 16.0);
    assert_eq!(
        bundles(dir.path()).len(),
        1,
        "one bundle stored, no temporary files left"
    );
    // The facts name the stored bundle, as the other backends name their binaries.
    let stored = std::path::PathBuf::from(&a.facts.extra["cache_file"]);
    assert_eq!(bundles(dir.path()), vec![stored.clone()]);
    assert!(
        dir.path().join("pch").is_dir(),
        "the precompiled SYCL headers are kept beside the bundles"
    );

    // The same backend answers from memory; another value is another kernel.
    let again = first.compile(&src, &params(3), &opts).unwrap();
    assert!(again.facts.cache_hit);
    assert_eq!(again.facts.extra["cache"], "memory");
    let other = first.compile(&src, &params(5), &opts).unwrap();
    assert!(!other.facts.cache_hit);
    assert_eq!(run(&first, &other.kernel)[2], 2.0 * 5.0 + 0.5 + 16.0);
    drop(first);

    // A new backend (as a new worker process would be) loads the bundle from disk.
    let second = backend_with_cache(Some(dir.path())).unwrap();
    let started = Instant::now();
    let b = second.compile(&src, &params(3), &opts).unwrap();
    let load_s = started.elapsed().as_secs_f64();
    assert!(b.facts.cache_hit, "{:?}", b.facts);
    assert_eq!(b.facts.extra["cache"], "disk");
    assert_eq!(b.facts.extra["cache_file"], stored.display().to_string());
    assert_eq!(run(&second, &b.kernel)[2], 2.0 * 3.0 + 0.5 + 16.0);
    eprintln!(
        "build without the cache {build_s:.3} s, with the disk cache {load_s:.4} s ({:.0}x)",
        build_s / load_s
    );
    assert!(load_s < build_s / 5.0, "{load_s} vs {build_s}");

    // A corrupt entry is dropped and rebuilt.
    for entry in bundles(dir.path()) {
        let mut bytes = fs::read(&entry).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x5A;
        fs::write(&entry, bytes).unwrap();
    }
    let third = backend_with_cache(Some(dir.path())).unwrap();
    let c = third.compile(&src, &params(3), &opts).unwrap();
    assert!(!c.facts.cache_hit);
    assert_eq!(run(&third, &c.kernel)[2], 2.0 * 3.0 + 0.5 + 16.0);
}

#[test]
fn compile_errors_carry_clang_diagnostics_on_the_kernels_own_lines() {
    let Some(backend) = backend_with_cache(None) else {
        return;
    };
    // Line 7 of the kernel; the parameters' virtual header must not shift it.
    let broken = SCALE.replace("y[i] = x[i]", "y[i] = undeclared_thing + x[i]");
    let src = KernelSource::new(Language::Sycl, "scale", broken);
    let err = backend
        .compile(&src, &params(3), &CompileOptions::default())
        .expect_err("does not compile");
    assert_eq!(err.kind(), BackendErrorKind::Compile, "{err}");
    let log = err.build_log().unwrap_or_default();
    eprintln!("{log}");
    assert!(
        log.contains(":7:12: error: use of undeclared identifier 'undeclared_thing'"),
        "{log}"
    );
    assert!(err.to_string().contains("undeclared_thing"), "{err}");

    // A missing entry point is a compile error that says so.
    let src = KernelSource::new(Language::Sycl, "no_such_kernel", SCALE);
    let err = backend
        .compile(&src, &params(3), &CompileOptions::default())
        .expect_err("no such kernel");
    assert_eq!(err.kind(), BackendErrorKind::Compile, "{err}");
    assert!(
        err.to_string().contains("no kernel named `no_such_kernel`"),
        "{err}"
    );

    // Sources that crash this runtime's compiler are refused before it runs.
    let crasher = r#"#include <sycl/sycl.hpp>
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void k(float* x) {
    auto it = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
    auto& t = *sycl::ext::oneapi::group_local_memory_for_overwrite<float[16]>(it.get_group());
    t[0] = x[0];
}
"#;
    let src = KernelSource::new(Language::Sycl, "k", crasher);
    let err = backend
        .compile(&src, &ParamValues::new(), &CompileOptions::default())
        .expect_err("refused");
    assert_eq!(err.kind(), BackendErrorKind::Compile, "{err}");
    assert!(
        err.build_log()
            .unwrap_or_default()
            .contains("work_group_static"),
        "{err}"
    );

    // Other languages are compile errors too, not panics.
    let src = KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}");
    let err = backend
        .compile(&src, &ParamValues::new(), &CompileOptions::default())
        .expect_err("not SYCL");
    assert_eq!(err.kind(), BackendErrorKind::Compile, "{err}");
}

#[test]
fn kernels_with_cpp_names_are_found_by_registered_name() {
    let dir = tempfile::tempdir().unwrap();
    let Some(backend) = backend_with_cache(Some(dir.path())) else {
        return;
    };
    let source = r#"#include <sycl/sycl.hpp>
namespace kernels {
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void scale(const float* x, float* y) {
    const size_t i = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    y[i] = x[i] * FACTOR;
}
}
"#;
    let src = KernelSource::new(Language::Sycl, "kernels::scale", source);
    let params = ParamValues::new().with("FACTOR", 4i64);
    let compiled = backend
        .compile(&src, &params, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(compiled.facts.extra["entry_lookup"], "registered C++ name");
    assert!(compiled.facts.extra.contains_key("cache_note"));
    assert_eq!(run(&backend, &compiled.kernel)[3], 12.0);
    assert_eq!(
        bundles(dir.path()).len(),
        0,
        "not serialisable, so not stored"
    );
    let again = backend
        .compile(&src, &params, &CompileOptions::default())
        .unwrap();
    assert!(again.facts.cache_hit, "kept in memory");
}
