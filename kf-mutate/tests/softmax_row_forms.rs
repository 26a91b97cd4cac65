//! The bandwidth forms of `softmax_row` (issue 50): the blocked online softmax (`ALGO=4`),
//! the exponentials once into a private buffer (`ALGO=3`, `CHUNKS` vectors) with the next
//! row's maximum taken on the way, several consecutive rows per work-item (`RPI`, with a last
//! work-item that runs out of rows at the task's half-height shape), the ways of computing
//! `exp` (`EXP`: `exp`, `native_exp`, prescaled `exp2`, the polynomial `exp2`), several
//! accumulators (`ACC`, with a remainder the loops finish one vector at a time) and the next
//! row prefetched (`PREFETCH_ROW`). Every configuration below computes the
//! right answer through the real evaluator (three input sets, one shifted by about 60, and the
//! task's other shapes) on the OpenCL and SYCL backends; each skips without its runtime
//! unless `KF_REQUIRE_OPENCL=1` / `KF_REQUIRE_SYCL=1`.

use kf_core::prelude::*;
use kf_eval::task::file::FileTask;
use kf_eval::task::Softmax;
use kf_eval::KernelEvaluator;
use kf_mutate::TemplateLibrary;

mod common;
use common::{check_case, quick_config};

/// 96 rows of 200 floats: 200 / 8 = 25 vectors of 8, so `ACC=8` and `ACC=16` leave a
/// remainder (and the task's other shapes, 100 and 400 columns, others still).
fn task() -> FileTask {
    Softmax::from_sizes(
        &[("ROWS", 96), ("COLS", 200)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
    .unwrap()
}

/// Switches and parameters, `name=value` comma-separated; `WG=4` and `RPI=1` unless given.
/// 96 rows are 6 work-items of 16 rows or 3 of 32, and the task's 48-row shape leaves the
/// second of two 32-row work-items half empty.
const CASES: &[&str] = &[
    "VW=8,ALGO=3,EXP=3,ACC=2,RPI=16,CHUNKS=64,PREFETCH_ROW=0,STREAM=1",
    "VW=4,ALGO=3,EXP=0,ACC=8,RPI=32,CHUNKS=128,PREFETCH_ROW=1,STREAM=0",
    "VW=8,ALGO=3,EXP=2,ACC=16,RPI=2,CHUNKS=32,PREFETCH_ROW=2,STREAM=1,WG=1",
    "VW=1,ALGO=3,EXP=1,ACC=4,RPI=1,CHUNKS=512,PREFETCH_ROW=0,STREAM=1,WG=16",
    "VW=4,ALGO=3,EXP=3,ACC=1,RPI=8,CHUNKS=64,PREFETCH_ROW=0,STREAM=1",
    "VW=8,ALGO=4,EXP=3,ACC=8,RPI=32,PREFETCH_ROW=1,STREAM=1",
    "VW=4,ALGO=1,EXP=3,ACC=2,RPI=4,PREFETCH_ROW=2,STREAM=1",
    "VW=4,ALGO=0,EXP=2,ACC=1,RPI=8,PREFETCH_ROW=0,STREAM=0",
    "VW=8,ALGO=2,EXP=0,ACC=1,RPI=16,PREFETCH_ROW=1,STREAM=1,WG=1",
    "VW=8,ALGO=4,EXP=3,ACC=8,PREFETCH_ROW=1,STREAM=1",
    "VW=8,ALGO=4,EXP=0,ACC=16,PREFETCH_ROW=2,STREAM=0",
    "VW=4,ALGO=4,EXP=2,ACC=1,PREFETCH_ROW=0,STREAM=1",
    "VW=1,ALGO=4,EXP=1,ACC=4,PREFETCH_ROW=1,STREAM=0",
    "VW=8,ALGO=1,EXP=3,ACC=16,PREFETCH_ROW=2,STREAM=1",
    "VW=4,ALGO=0,EXP=3,ACC=8,PREFETCH_ROW=1,STREAM=0",
    "VW=8,ALGO=2,EXP=3,ACC=2,PREFETCH_ROW=2,STREAM=1",
    "VW=1,ALGO=1,EXP=2,ACC=2,PREFETCH_ROW=0,STREAM=1,WG=16",
];

fn verify<B: Backend>(backend: B, language: Language) {
    let library = TemplateLibrary::softmax_for(language).unwrap();
    let template = library.get("softmax_row").unwrap();
    let task = task();
    let mut evaluator = KernelEvaluator::new(backend, quick_config(None));
    let mut failures = Vec::new();
    for case in CASES {
        if let Some(failure) = check_case(
            &mut evaluator,
            &task,
            template,
            ParamValues::new().with("WG", 4i64).with("RPI", 1i64),
            case,
        ) {
            failures.push(format!("{language} {case}: {failure}"));
        }
    }
    common::assert_no_failures(&failures);
}

#[test]
fn softmax_row_forms_verify_on_opencl() {
    let Some(backend) = kf_backend_opencl::testing::backend_or_skip() else {
        return;
    };
    verify(backend, Language::OpenCl);
}

#[test]
fn softmax_row_forms_verify_on_sycl() {
    let Some(backend) = common::backend_or_skip(
        kf_backend_sycl::SyclBackend::builder().build(),
        "SYCL",
        kf_core::testing::skip::SkipKind::Sycl,
        |e| format!("{e} (scripts/setup.sh --sycl)"),
    ) else {
        return;
    };
    verify(backend, Language::Sycl);
}
