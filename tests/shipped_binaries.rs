//! Binaries built on a compile worker run on an execute worker: a compile worker's handler
//! builds a kernel without running it and ships the backend's compile-cache entry; an execute
//! worker's handler puts it into its own compile cache, and the backend loads it instead of
//! compiling. OpenCL on this machine's CPU runtime (the same driver on both sides, so the
//! binary loads and runs); CUDA with NVRTC, where the execute side must receive the very bytes
//! it would have built itself (running them needs a GPU: without one the evaluation stops at
//! the launch and says so, after loading the shipped binary). Skips with a message without an
//! OpenCL runtime (unless `KF_REQUIRE_OPENCL=1`) or NVRTC (unless `KF_REQUIRE_NVRTC=1`).

use std::path::Path;

use kernelfoundry::core::{Candidate, KernelSource, Language, ParamValues};
use kernelfoundry::dist::{Binary, CompileOutcome, JobHandler, Profile};
use kernelfoundry::distributed::{TaskHandler, TaskProfile};
use kernelfoundry::eval::task::{builtin_task, parse_sizes};
use kernelfoundry::eval::{BackendSpec, EvalConfig, TimeoutPolicy, WorkerCommand};

/// The `kf` binary as the evaluation worker (its `main` calls `init()` first).
fn kf_worker() -> WorkerCommand {
    WorkerCommand {
        program: env!("CARGO_BIN_EXE_kf").into(),
        args: Vec::new(),
        env_remove: Vec::new(),
    }
}

fn handler(backend: &str, cache: &Path) -> TaskHandler {
    let mut spec = BackendSpec::new(backend);
    spec.cache_dir = Some(cache.to_path_buf());
    TaskHandler::new(spec, kf_worker())
}

fn profile(backend: &str) -> Profile {
    let p = TaskProfile {
        task: "gemm".into(),
        sizes: parse_sizes("M=64,N=64,K=64").unwrap(),
        backend: backend.to_string(),
        eval: EvalConfig::default(),
        timeout: TimeoutPolicy::default().into(),
        task_file: None,
    };
    Profile::new(&p).unwrap()
}

/// The task's own naive kernel in `language`, as a candidate.
fn naive(language: Language) -> Candidate {
    let task = builtin_task("gemm", &parse_sizes("M=64,N=64,K=64").unwrap()).unwrap();
    let source: KernelSource = task.baseline(language).expect("a naive kernel");
    Candidate::seed(source, ParamValues::new())
}

/// Builds `candidate` on a compile-side handler (cache `a`), ships it to an execute-side
/// handler (cache `b`), and returns the binary and the execute side's evaluation.
fn ship(
    backend: &str,
    candidate: &Candidate,
    a: &Path,
    b: &Path,
) -> (Binary, kernelfoundry::core::Evaluation) {
    let profile = profile(backend);
    let compiler = handler(backend, a);
    let outcome = futures::executor::block_on(compiler.compile(&profile, candidate)).unwrap();
    compiler.shutdown();
    let CompileOutcome::Binary(binary) = outcome else {
        panic!("the compile side shipped no binary: {outcome:?}");
    };
    assert!(binary.has_plain_name(), "{binary:?}");
    let executor = handler(backend, b);
    let evaluation =
        futures::executor::block_on(executor.evaluate_built(&profile, candidate, &binary)).unwrap();
    executor.shutdown();
    (binary, evaluation)
}

#[test]
fn an_opencl_binary_built_apart_is_loaded_and_run_not_rebuilt() {
    if kernelfoundry::opencl::testing::backend_or_skip().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("compile"), dir.path().join("execute"));
    let candidate = naive(Language::OpenCl);
    let (binary, evaluation) = ship("opencl", &candidate, &a, &b);
    assert!(binary.name.ends_with(".clbin"), "{binary:?}");
    assert_eq!(
        evaluation.status,
        kernelfoundry::core::Status::Correct,
        "{evaluation:?}"
    );
    assert!(
        evaluation.compiler.cache_hit,
        "the execute side compiled instead of loading the shipped binary: {:?}",
        evaluation.compiler
    );
    // What the execute side loaded is the compile side's file, byte for byte.
    let shipped = std::fs::read(b.join(&binary.name)).unwrap();
    assert_eq!(shipped, std::fs::read(a.join(&binary.name)).unwrap());
    assert_eq!(shipped, binary.bytes);
}

#[test]
fn a_cuda_binary_built_by_nvrtc_reaches_the_execute_side_byte_for_byte() {
    let probe = kernelfoundry::eval::BackendFactory::open(
        &kernelfoundry::backends::CudaFactory,
        &BackendSpec::new("cuda"),
    );
    if let Err(e) = &probe {
        // Kind `NVRTC`: KF_REQUIRE_NVRTC=1 makes this a failure.
        kernelfoundry::core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Nvrtc,
            format_args!("NVRTC is not installed (opening the CUDA backend: {e})"),
        );
        return;
    }
    drop(probe);
    let dir = tempfile::tempdir().unwrap();
    let (a, b, own) = (
        dir.path().join("compile"),
        dir.path().join("execute"),
        dir.path().join("own"),
    );
    let candidate = naive(Language::Cuda);
    let (binary, evaluation) = ship("cuda", &candidate, &a, &b);
    assert!(binary.name.ends_with(".kfcubin"), "{binary:?}");
    assert!(
        evaluation.compiler.cache_hit,
        "the execute side did not load the shipped binary: {:?}",
        evaluation.compiler
    );
    // The bytes the execute side would have built itself, in a cache of its own.
    let profile = profile("cuda");
    let itself = handler("cuda", &own);
    let outcome = futures::executor::block_on(itself.compile(&profile, &candidate)).unwrap();
    itself.shutdown();
    let CompileOutcome::Binary(own_build) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(
        own_build.name, binary.name,
        "the same cache key on both sides"
    );
    // The entries hold NVRTC's log beside the images, and the log has the compile time: the
    // images must be the same bytes.
    let key = binary.name.trim_end_matches(".kfcubin");
    let received = kernelfoundry::cuda::BinaryCache::new(&b)
        .get(key)
        .expect("a readable entry");
    let built = kernelfoundry::cuda::BinaryCache::new(&own)
        .get(key)
        .expect("a readable entry");
    assert!(!received.ptx.is_empty());
    assert_eq!(
        received.cubin, built.cubin,
        "the execute side received another cubin than it would have built"
    );
    assert_eq!(
        received.ptx, built.ptx,
        "another PTX than it would have built"
    );
    if evaluation.status != kernelfoundry::core::Status::Correct {
        assert!(
            evaluation.diagnostics.contains("no CUDA device"),
            "the shipped binary failed on a GPU: {evaluation:?}"
        );
        // The run, not the test: kind `CUDA_DEVICE` (KF_REQUIRE_CUDA_DEVICE=1 makes it a
        // failure).
        kernelfoundry::core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::CudaDevice,
            format_args!(
                "the run only: no GPU here; the shipped binary was loaded ({})",
                evaluation.diagnostics
            ),
        );
    }
}
