//! NVRTC without a GPU: the CUDA seed kernels compile, their resource usage is parsed from
//! ptxas' report, broken kernels return NVRTC's log, and the compile-only backend refuses to
//! allocate or launch with a typed `Unavailable` error. Skipped (with a message) where NVRTC is
//! not installed, unless `KF_REQUIRE_NVRTC=1`.

mod common;

use common::{backend_or_skip, describe, seed, staging_or_skip, uncached};
use kf_backend_cuda::{CudaBackend, CudaError};
use kf_core::testing::conformance::{test_kernel, TestKernel};
use kf_core::{
    Backend, BackendError, BackendErrorKind, CompileOptions, KernelArg, KernelSource, Language,
    NdRange, ParamValues,
};
use kf_eval::task::{Gemm, KernelTask, Softmax};

#[test]
fn seed_kernels_compile_with_resources() {
    let Some(backend) = uncached() else {
        return;
    };
    eprintln!(
        "NVRTC {} for {} ({}); device: {}",
        backend.nvrtc().version(),
        backend.arch(),
        backend.runtime().describe(),
        backend.device().name
    );
    for name in ["gemm_naive", "gemm_tiled", "softmax_naive"] {
        let (manifest, source) = seed(name);
        assert_eq!(source.language, Language::Cuda);
        let params = manifest.default_params();
        let compiled = backend
            .compile(&source, &params, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let f = &compiled.facts;
        eprintln!(
            "{name} {params}: {:.0} ms NVRTC, {:?} registers, {:?} bytes shared, {:?} bytes \
             spilled, {:?} bytes stack",
            f.compile_seconds.unwrap_or(0.0) * 1e3,
            f.registers,
            f.local_mem_bytes,
            f.spill_bytes,
            f.private_mem_bytes
        );
        assert!(f.registers.is_some_and(|r| r > 0), "{name}: {f:?}");
        assert!(!f.cache_hit);
        assert!(f.compile_seconds.is_some_and(|s| s > 0.0));
        assert_eq!(f.extra["arch"], backend.arch().to_string());
        assert!(compiled.log.contains("ptxas"), "{}", compiled.log);
        assert_eq!(
            compiled.kernel.param_bytes().len(),
            6 - usize::from(name == "softmax_naive") * 2
        );
        if name == "gemm_tiled" {
            let ts = params.get("TS").and_then(|v| v.as_i64()).unwrap_or(0) as u64;
            assert_eq!(f.local_mem_bytes, Some(2 * ts * (ts + 1) * 4), "{f:?}");
            assert_eq!(f.spill_bytes, Some(0));
            assert_eq!(compiled.kernel.param_bytes(), [4, 4, 4, 8, 8, 8]);
        } else {
            assert_eq!(f.local_mem_bytes, Some(0), "{name}: {f:?}");
        }
    }
}

#[test]
fn the_task_baselines_have_cuda_versions_that_compile() {
    let Some(backend) = uncached() else {
        return;
    };
    let gemm = Gemm::new(256, 256, 256).expect("gemm");
    let softmax = Softmax::from_sizes(&Default::default()).expect("softmax");
    for task in [&gemm as &dyn KernelTask, &softmax] {
        let source = task
            .baseline(Language::Cuda)
            .unwrap_or_else(|| panic!("{} has no CUDA baseline", task.name()));
        let manifest = kf_manifest::Manifest::from_kernel(&source)
            .unwrap_or_else(|e| panic!("{}: {e}", task.name()));
        let params = manifest.default_params();
        let symbols = manifest.symbols(&params, &task.sizes(), backend.device());
        manifest
            .check_constraints(&params, &symbols)
            .unwrap_or_else(|e| panic!("{}: {e}", task.name()));
        let range = manifest
            .launch_range(&symbols)
            .unwrap_or_else(|e| panic!("{}: {e}", task.name()));
        let c = backend
            .compile(&source, &params, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", task.name()));
        assert_eq!(c.kernel.param_bytes().len(), task.args().len());
        eprintln!(
            "{} baseline: {range}, {:?} registers",
            task.name(),
            c.facts.registers
        );
    }
}

#[test]
fn tiled_gemm_configurations_report_their_shared_memory() {
    let Some(backend) = uncached() else {
        return;
    };
    let (_, source) = seed("gemm_tiled");
    for (ts, wpt) in [(8i64, 1i64), (16, 2), (64, 8)] {
        let params = ParamValues::new().with("TS", ts).with("WPT", wpt);
        let c = backend
            .compile(&source, &params, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("TS={ts} WPT={wpt}: {e}"));
        let smem = (2 * ts * (ts + 1) * 4) as u64;
        assert_eq!(c.facts.local_mem_bytes, Some(smem), "TS={ts}");
        assert!(c.facts.registers.is_some_and(|r| r > 0));
        eprintln!(
            "TS={ts} WPT={wpt}: {:?} registers, {smem} bytes shared, {:.0} ms",
            c.facts.registers,
            c.facts.compile_seconds.unwrap_or(0.0) * 1e3
        );
    }
}

#[test]
fn a_deliberate_error_returns_nvrtcs_log() {
    let Some(backend) = uncached() else {
        return;
    };
    let src = test_kernel(Language::Cuda, TestKernel::Broken);
    let err = match backend.compile(&src, &ParamValues::new(), &CompileOptions::default()) {
        Ok(_) => panic!("a broken kernel compiled"),
        Err(e) => e,
    };
    assert_eq!(err.kind(), BackendErrorKind::Compile, "{}", describe(&err));
    let log = err.build_log().expect("a compile error has a log");
    eprintln!("{log}");
    assert!(log.contains("this_identifier_is_not_declared"), "{log}");
    assert!(log.contains("error"), "{log}");
    assert!(
        log.contains("broken.cu("),
        "the log names the file and line: {log}"
    );
    assert!(matches!(err, CudaError::Compile { .. }));
}

#[test]
fn a_missing_entry_point_is_a_compile_error_naming_the_kernels() {
    let Some(backend) = uncached() else {
        return;
    };
    let mut src = test_kernel(Language::Cuda, TestKernel::VectorAdd);
    src.entry = "no_such_kernel".into();
    let err = backend
        .compile(&src, &ParamValues::new(), &CompileOptions::default())
        .expect_err("a missing entry point compiled");
    assert_eq!(err.kind(), BackendErrorKind::Compile);
    let log = err.build_log().unwrap_or("");
    assert!(log.contains("vector_add"), "{log}");
    assert!(log.contains("extern \"C\""), "{log}");
}

#[test]
fn definitions_reach_the_source() {
    let Some(backend) = uncached() else {
        return;
    };
    let src = test_kernel(Language::Cuda, TestKernel::Defines);
    let params = ParamValues::new()
        .with("T", "float")
        .with("SCALE", 3i64)
        .with("OFFSET", 0.5);
    let c = backend
        .compile(&src, &params, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        c.facts.extra["definitions"].contains("SCALE=3"),
        "{:?}",
        c.facts.extra
    );
    // Without them the kernel does not compile, and the log says why.
    let err = backend
        .compile(&src, &ParamValues::new(), &CompileOptions::default())
        .expect_err("compiled without T");
    assert!(err.build_log().unwrap_or("").contains("T"));
    // A parameter name that is not an identifier is refused before NVRTC runs.
    let bad = ParamValues::new().with("NOT AN IDENT", 1i64);
    let err = backend
        .compile(&src, &bad, &CompileOptions::default())
        .expect_err("accepted a bad name");
    assert_eq!(err.kind(), BackendErrorKind::Compile);
}

#[test]
fn the_cuda_headers_are_found() {
    let Some(backend) = uncached() else {
        return;
    };
    if backend.runtime().include_dirs.is_empty() {
        // scripts/setup.sh --cuda installs the headers with NVRTC: where NVRTC is required
        // (KF_REQUIRE_NVRTC=1, as CI sets), so are they.
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Nvrtc,
            "NVRTC has no CUDA include directory configured (scripts/setup.sh --cuda installs one)",
        );
        return;
    }
    let src = KernelSource::new(
        Language::Cuda,
        "halves",
        r#"#include <cuda_fp16.h>
extern "C" __global__ void halves(const float* x, __half* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(x[i]);
}"#,
    );
    backend
        .compile(&src, &ParamValues::new(), &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn kernels_without_extern_c_resolve_to_their_mangled_name() {
    let Some(backend) = uncached() else {
        return;
    };
    let src = KernelSource::new(
        Language::Cuda,
        "scale",
        "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }",
    );
    let c = backend
        .compile(&src, &ParamValues::new(), &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.kernel.symbol(), "_Z5scalePff");
    assert_eq!(c.kernel.param_bytes(), [8, 4]);
    assert!(c.facts.registers.is_some());
}

#[test]
fn the_architecture_can_be_chosen_per_compilation() {
    let Some(backend) = uncached() else {
        return;
    };
    let src = test_kernel(Language::Cuda, TestKernel::VectorAdd);
    let options = CompileOptions {
        arch: Some("sm_80".into()),
        ..CompileOptions::default()
    };
    match backend.compile(&src, &ParamValues::new(), &options) {
        // On a GPU that is not sm_80-compatible, loading may fail; without one it compiles.
        Ok(c) => {
            assert_eq!(c.facts.extra["arch"], "sm_80");
            assert_eq!(c.kernel.arch().to_string(), "sm_80");
        }
        Err(e) => assert!(backend.has_device(), "{e}"),
    }
    let options = CompileOptions {
        arch: Some("sm_13".into()),
        ..CompileOptions::default()
    };
    let err = backend
        .compile(&src, &ParamValues::new(), &options)
        .expect_err("compiled for sm_13");
    assert_eq!(err.kind(), BackendErrorKind::Compile);
    assert!(err.to_string().contains("sm_90"), "{err}");
}

#[test]
fn register_spills_are_reported() {
    let Some(backend) = uncached() else {
        return;
    };
    // 64 live accumulators under a 32-register cap must spill.
    let src = KernelSource::new(
        Language::Cuda,
        "pressure",
        r#"extern "C" __global__ void pressure(const float* x, float* y, int n) {
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) acc[j] = x[j * 131 % 1024];
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int j = 0; j < 64; ++j) acc[j] = acc[j] * acc[(j + 1) % 64] + x[(i + j) % 1024];
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 64; ++j) s += acc[j];
    y[threadIdx.x] = s;
}"#,
    );
    let options = CompileOptions {
        flags: vec!["--maxrregcount=32".into()],
        ..CompileOptions::default()
    };
    let c = backend
        .compile(&src, &ParamValues::new(), &options)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}", c.log);
    assert!(c.facts.registers.is_some_and(|r| r <= 32), "{:?}", c.facts);
    assert!(c.facts.spill_bytes.is_some_and(|s| s > 0), "{:?}", c.facts);
}

#[test]
fn the_compile_cache_returns_the_same_facts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some(backend) = backend_or_skip(CudaBackend::builder().cache_dir(dir.path())) else {
        return;
    };
    let (manifest, source) = seed("gemm_tiled");
    let params = manifest.default_params();
    let first = backend
        .compile(&source, &params, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let again = backend
        .compile(&source, &params, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!first.facts.cache_hit);
    assert!(again.facts.cache_hit);
    assert_eq!(first.facts.registers, again.facts.registers);
    assert_eq!(first.facts.local_mem_bytes, again.facts.local_mem_bytes);
    assert_eq!(first.kernel.param_bytes(), again.kernel.param_bytes());
    let other = backend
        .compile(
            &source,
            &ParamValues::new().with("TS", 16i64).with("WPT", 2i64),
            &CompileOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!other.facts.cache_hit);
}

#[test]
fn without_a_device_running_is_a_typed_unavailable_error() {
    let Some(backend) = uncached() else {
        return;
    };
    if backend.has_device() {
        // Kind `CUDA_COMPILE_ONLY`: a machine without a CUDA device (CI's) runs this test.
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::CudaCompileOnly,
            "this machine has a CUDA device; the compile-only path is not used",
        );
        return;
    }
    assert!(backend.no_device_reason().is_some());
    assert_eq!(backend.device().extra["device_present"], "false");
    let err = backend.alloc(1024).expect_err("allocated without a device");
    assert_eq!(err.kind(), BackendErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("no CUDA device present"), "{err}");
    let err = backend
        .flush_caches()
        .expect_err("flushed without a device");
    assert_eq!(err.kind(), BackendErrorKind::Unavailable);

    // With host buffers the whole protocol runs up to the launch, which names the resources.
    let Some(staging) = staging_or_skip() else {
        return;
    };
    let (manifest, source) = seed("gemm_tiled");
    let c = staging
        .compile(
            &source,
            &manifest.default_params(),
            &CompileOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let bytes: Vec<u8> = (0..64u8).collect();
    let mut buf = staging.alloc(bytes.len()).unwrap_or_else(|e| panic!("{e}"));
    staging
        .write(&mut buf, &bytes)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut back = vec![0u8; bytes.len()];
    staging
        .read(&buf, &mut back)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, bytes);
    assert!(!buf.is_on_device());
    let args = [
        KernelArg::I32(64),
        KernelArg::I32(64),
        KernelArg::I32(64),
        KernelArg::Buffer {
            buffer: &buf,
            offset: 0,
        },
        KernelArg::Buffer {
            buffer: &buf,
            offset: 0,
        },
        KernelArg::Buffer {
            buffer: &buf,
            offset: 0,
        },
    ];
    let err = staging
        .launch(&c.kernel, &args, &NdRange::new([64, 16], [32, 8]))
        .expect_err("launched without a device");
    assert_eq!(err.kind(), BackendErrorKind::Unavailable);
    let text = err.to_string();
    eprintln!("{text}");
    assert!(text.contains("no CUDA device present to run it"), "{text}");
    assert!(
        text.contains("registers") && text.contains("8448 bytes shared"),
        "{text}"
    );
}
