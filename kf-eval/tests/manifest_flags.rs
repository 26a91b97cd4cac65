//! A manifest's `[[flags]]` reach the compiler, on the real OpenCL runtime: a kernel that
//! computes a wrong result only when built with `-cl-fast-relaxed-math` (OpenCL C defines
//! `__FAST_RELAXED_MATH__` then) is correct with `FAST_MATH=0` and wrong with `FAST_MATH=1`;
//! a flag outside the allowed floating-point modes is a compile error that names it, and
//! nothing is built.
//!
//! Skips (printing `SKIPPED: …`) only when the runtime is missing and `KF_REQUIRE_OPENCL` is
//! not `1`.

mod common;

use kf_backend_opencl::OpenClBackend;
use kf_core::{KernelSource, Language, ParamValues, Status};
use kf_eval::task::file::FileTask;
use kf_eval::task::Gemm;
use kf_eval::{EvalConfig, KernelEvaluator};

/// The task baseline's naive kernel, its result negated when `__FAST_RELAXED_MATH__` is set.
fn source() -> String {
    let naive = include_str!("../kernels/gemm_naive.cl");
    let store = "C[row * N + col] = acc;";
    assert!(naive.contains(store));
    naive.replace(
        store,
        &format!("#ifdef __FAST_RELAXED_MATH__\n    acc = -acc;\n#endif\n    {store}"),
    )
}

fn manifest(flag: &str) -> String {
    format!(
        "entry = \"gemm\"\nlanguage = \"opencl\"\n\
         [params]\nWG = [16]\nFAST_MATH = [0, 1]\n\
         [launch]\nglobal = [\"N\", \"M\"]\nlocal = [\"WG\", \"WG\"]\n\
         [[flags]]\nwhen = \"FAST_MATH == 1\"\nadd = [\"{flag}\"]\n"
    )
}

fn kernel(manifest_text: &str) -> KernelSource {
    KernelSource::new(Language::OpenCl, "gemm", source()).with_manifest(manifest_text)
}

/// An evaluator, a GEMM at 64 × 48 × 32 and the kernel whose manifest adds `flag` with
/// `FAST_MATH=1`.
fn case(flag: &str) -> Option<(KernelEvaluator<OpenClBackend>, FileTask, KernelSource)> {
    let evaluator = common::opencl_or_skip(OpenClBackend::new())
        .map(|b| KernelEvaluator::new(b, EvalConfig::default()))?;
    Some((
        evaluator,
        Gemm::new(64, 48, 32).unwrap(),
        kernel(&manifest(flag)),
    ))
}

#[test]
fn a_manifest_flag_is_passed_to_the_compiler_for_its_parameter_values_only() {
    let Some((mut ev, task, k)) = case("-cl-fast-relaxed-math") else {
        return;
    };
    let precise = ev
        .evaluate(&task, &k, &ParamValues::new().with("FAST_MATH", 0i64))
        .unwrap();
    assert_eq!(precise.status, Status::Correct, "{}", precise.diagnostics);
    let fast = ev
        .evaluate(&task, &k, &ParamValues::new().with("FAST_MATH", 1i64))
        .unwrap();
    assert_eq!(fast.status, Status::WrongValues, "{}", fast.diagnostics);
}

#[test]
fn a_flag_that_is_not_a_floating_point_mode_never_reaches_the_compiler() {
    // `-D__FAST_RELAXED_MATH__` would flip the kernel's result if it were passed on.
    let Some((mut ev, task, k)) = case("-D__FAST_RELAXED_MATH__") else {
        return;
    };
    let e = ev
        .evaluate(&task, &k, &ParamValues::new().with("FAST_MATH", 0i64))
        .unwrap();
    let says = ["-D__FAST_RELAXED_MATH__", "floating-point mode"];
    common::assert_judged(&e, Status::CompileError, &says);
}
