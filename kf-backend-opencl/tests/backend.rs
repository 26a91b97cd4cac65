//! OpenCL-specific behaviour beyond the shared conformance suite: the persistent compile cache,
//! compiler facts, refused definitions, device selection. Skips when no runtime is found.

use std::fs;

use kf_backend_opencl::{DeviceSelector, OpenClBackend};
use kf_core::prelude::*;

fn backend_or_skip(cache: Option<&std::path::Path>) -> Option<OpenClBackend> {
    let builder = OpenClBackend::builder();
    let builder = match cache {
        Some(dir) => builder.cache_dir(dir),
        None => builder.no_cache(),
    };
    kf_backend_opencl::testing::skip_unless_installed(builder.build())
}

const TILE: &str = "
__kernel void tile(__global float* x) {
    __local float t[TS];
    float priv[PRIV];
    size_t l = get_local_id(0);
    for (int i = 0; i < PRIV; i++) priv[i] = x[get_global_id(0)] + i;
    t[l] = priv[l % PRIV];
    barrier(CLK_LOCAL_MEM_FENCE);
    x[get_global_id(0)] = t[TS - 1 - l];
}";

fn tile(ts: i64) -> (KernelSource, ParamValues) {
    (
        KernelSource::new(Language::OpenCl, "tile", TILE),
        ParamValues::new().with("TS", ts).with("PRIV", 4i64),
    )
}

#[test]
fn binaries_are_cached_across_backends_and_bad_entries_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let Some(first) = backend_or_skip(Some(dir.path())) else {
        return;
    };
    let (src, params) = tile(64);
    let opts = CompileOptions::default();
    let a = first.compile(&src, &params, &opts).unwrap();
    assert!(!a.facts.cache_hit);
    let compile_s = a.facts.compile_seconds.unwrap();
    assert!(compile_s > 0.0);
    let entries: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(
        entries.len(),
        1,
        "one binary stored, no temporary files left"
    );
    drop(first);

    // A new backend (as in a new process) loads the binary instead of compiling.
    let second = backend_or_skip(Some(dir.path())).unwrap();
    let b = second.compile(&src, &params, &opts).unwrap();
    assert!(b.facts.cache_hit);
    let load_s: f64 = b.facts.extra["load_seconds"].parse().unwrap();
    eprintln!(
        "compile {:.1} ms, cache hit {:.2} ms",
        compile_s * 1e3,
        load_s * 1e3
    );
    assert_eq!(a.facts.local_mem_bytes, b.facts.local_mem_bytes);
    // The cached kernel runs correctly.
    let data: Vec<u8> = (0..64).flat_map(|i| (i as f32).to_ne_bytes()).collect();
    let mut buf = second.alloc(data.len()).unwrap();
    second.write(&mut buf, &data).unwrap();
    second
        .launch(
            &b.kernel,
            &[KernelArg::Buffer {
                buffer: &buf,
                offset: 0,
            }],
            &NdRange::new([64], [64]),
        )
        .unwrap();
    let mut out = vec![0u8; data.len()];
    second.read(&buf, &mut out).unwrap();
    let first_value = f32::from_ne_bytes([out[0], out[1], out[2], out[3]]);
    // Work-item 0 reads t[63], written by work-item 63 as priv[63 % 4] = x[63] + 3.
    assert_eq!(first_value, 63.0 + 3.0);

    // Other definitions are another entry.
    let (src2, params2) = tile(32);
    assert!(
        !second
            .compile(&src2, &params2, &opts)
            .unwrap()
            .facts
            .cache_hit
    );

    // A corrupted entry is dropped and rebuilt, not fatal.
    for entry in fs::read_dir(dir.path()).unwrap().flatten() {
        fs::write(entry.path(), b"garbage").unwrap();
    }
    let c = second.compile(&src, &params, &opts).unwrap();
    assert!(!c.facts.cache_hit);
    assert!(
        second
            .compile(&src, &params, &opts)
            .unwrap()
            .facts
            .cache_hit
    );
}

#[test]
fn compiler_facts_are_reported() {
    let Some(backend) = backend_or_skip(None) else {
        return;
    };
    let (src, params) = tile(128);
    let c = backend
        .compile(&src, &params, &CompileOptions::default())
        .unwrap();
    assert!(!c.facts.cache_hit);
    assert!(c.facts.local_mem_bytes.unwrap() >= 128 * 4, "{:?}", c.facts);
    assert!(c.facts.private_mem_bytes.is_some());
    assert!(c.facts.max_work_group_size.unwrap() >= 1);
    assert!(c.facts.compile_seconds.unwrap() > 0.0);
    assert_eq!(c.facts.extra["build_options"], "-D TS=128 -D PRIV=4");
}

#[test]
fn refused_inputs_are_errors_not_panics() {
    let Some(backend) = backend_or_skip(None) else {
        return;
    };
    let src = KernelSource::new(
        Language::OpenCl,
        "k",
        "__kernel void k(__global int* x) { x[0] = V; }",
    );
    let opts = CompileOptions::default();
    for (what, params) in [
        ("whitespace value", ParamValues::new().with("V", "1 + 2")),
        ("bad name", ParamValues::new().with("1V", 1i64)),
        ("NUL", ParamValues::new().with("V", "1\0")),
    ] {
        let e = backend.compile(&src, &params, &opts).expect_err(what);
        assert_eq!(e.kind(), BackendErrorKind::Compile, "{what}: {e}");
        assert!(!e.build_log().unwrap().is_empty());
    }
    let mut flags = opts.clone();
    flags.flags.push("-cl-no-such-option".into());
    let e = backend
        .compile(&src, &ParamValues::new().with("V", 1i64), &flags)
        .expect_err("unknown flag");
    assert_eq!(e.kind(), BackendErrorKind::Compile, "{e}");
    let cuda = KernelSource::new(Language::Cuda, "k", "__global__ void k() {}");
    let e = backend
        .compile(&cuda, &ParamValues::new(), &opts)
        .unwrap_err();
    assert_eq!(e.kind(), BackendErrorKind::Compile);
    let nul = KernelSource::new(Language::OpenCl, "k", "__kernel void k() {}\0");
    assert!(backend.compile(&nul, &ParamValues::new(), &opts).is_err());
    let bad_entry = KernelSource::new(Language::OpenCl, "k\0x", "__kernel void k() {}");
    assert!(backend
        .compile(&bad_entry, &ParamValues::new(), &opts)
        .is_err());

    assert_eq!(
        backend.alloc(0).unwrap_err().kind(),
        BackendErrorKind::Other
    );
    let huge = backend.device().global_mem_bytes as usize * 4;
    assert_eq!(
        backend.alloc(huge).unwrap_err().kind(),
        BackendErrorKind::Resources
    );

    // A launch that faults on arguments of the wrong size is an error.
    let k = backend
        .compile(&src, &ParamValues::new().with("V", 1i64), &opts)
        .unwrap();
    let e = backend
        .launch(&k.kernel, &[KernelArg::I32(3)], &NdRange::new([1], [1]))
        .unwrap_err();
    assert_eq!(e.kind(), BackendErrorKind::Launch, "{e}");
}

#[test]
fn device_selection() {
    let Some(backend) = backend_or_skip(None) else {
        return;
    };
    let name = backend.device().name.clone();
    let by_name = OpenClBackend::builder()
        .no_cache()
        .device(DeviceSelector::NameContains(name.to_lowercase()))
        .build()
        .unwrap();
    assert_eq!(by_name.device().name, name);
    let by_index = OpenClBackend::builder()
        .no_cache()
        .device(DeviceSelector::parse(&format!(
            "{}:{}",
            backend.device_info().platform_index,
            backend.device_info().device_index
        )))
        .build()
        .unwrap();
    assert_eq!(by_index.device().name, name);
    let e = OpenClBackend::builder()
        .no_cache()
        .device(DeviceSelector::NameContains(
            "no such device anywhere".into(),
        ))
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), BackendErrorKind::Unavailable);
    assert!(e.to_string().contains(&name), "lists the devices: {e}");
}
