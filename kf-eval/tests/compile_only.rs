//! `KernelEvaluator::compile_only` on the real OpenCL runtime: the protocol up to compilation,
//! nothing run. A good kernel compiles into the compile cache (the facts name the file); a
//! kernel that cannot run gets exactly the evaluation the whole protocol gives it.
//!
//! Skips (printing `SKIPPED: …`) only when the runtime is missing and `KF_REQUIRE_OPENCL` is
//! not `1`.

mod common;

use std::path::Path;

use kf_backend_opencl::OpenClBackend;
use kf_core::{KernelSource, ParamValues, Status};
use kf_eval::task::Gemm;
use kf_eval::{CompileCheck, EvalConfig, KernelEvaluator};
use kf_manifest::Manifest;

fn naive() -> KernelSource {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/gemm_naive.toml");
    Manifest::load(&path).unwrap().1
}

fn evaluator(cache: &Path) -> Option<KernelEvaluator<OpenClBackend>> {
    common::opencl_or_skip(OpenClBackend::builder().cache_dir(cache).build())
        .map(|b| KernelEvaluator::new(b, EvalConfig::default()))
}

#[test]
fn a_good_kernel_compiles_into_the_cache_and_a_bad_one_fails_as_in_a_full_evaluation() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut ev) = evaluator(dir.path()) else {
        return;
    };
    let task = Gemm::new(64, 48, 32).unwrap();
    let kernel = naive();
    let CompileCheck::Compiled(facts) = ev
        .compile_only(&task, &kernel, &ParamValues::new())
        .unwrap()
    else {
        panic!("the naive kernel did not compile");
    };
    let file = facts
        .extra
        .get("cache_file")
        .expect("the cached binary's file");
    assert!(Path::new(file).starts_with(dir.path()), "{file}");
    assert!(std::fs::metadata(file).unwrap().len() > 0);
    assert!(facts.extra.contains_key("cache_key"));
    // Nothing ran: no baseline was measured, no input prepared.
    assert_eq!(ev.last_profile().baseline_s, 0.0);
    assert_eq!(ev.last_profile().inputs_generated, 0);

    let mut broken = kernel.clone();
    broken.text = broken
        .text
        .replace("__kernel", "__kernel syntax error here")
        .into();
    let CompileCheck::Failed(failed) = ev
        .compile_only(&task, &broken, &ParamValues::new())
        .unwrap()
    else {
        panic!("a kernel with a syntax error compiled");
    };
    assert_eq!(failed.status, Status::CompileError);
    let full = ev.evaluate(&task, &broken, &ParamValues::new()).unwrap();
    assert_eq!(full.status, failed.status);
    // The same compiler message (the driver numbers its programs, so the logs differ there).
    for d in [&failed.diagnostics, &full.diagnostics] {
        assert!(d.contains("unknown type name 'syntax'"), "{d}");
    }
}
