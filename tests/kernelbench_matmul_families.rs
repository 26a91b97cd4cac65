//! The matrix-product family's own templates on the real OpenCL runtime: the shipped
//! matrix-vector task (`n = 1`) is seeded with the `matvec` template, the transposed-A product
//! with the `gemm_strided_a` template (beside the strided GEMM template), and every vector
//! width of both, with register blocks, split rows, local-memory reductions and a K that is
//! not a multiple of the vector width, computes the task correctly at a small size.
//!
//! Skips (printing `SKIPPED: …`) only when the OpenCL runtime or Python/NumPy is missing and
//! `KF_REQUIRE_OPENCL` / `KF_REQUIRE_PYTHON` is not `1`.

use kernelfoundry::core::prelude::*;
use kernelfoundry::eval::task::file::{python::numpy_or_skip, FileTask};
use kernelfoundry::eval::KernelEvaluator;
use kernelfoundry::mutate::Structure;
use kernelfoundry::opencl::testing::backend_or_skip;
use kernelfoundry::search::family_templates;

mod common;
use common::kernelbench::{correctness_config, every_seed_is_correct, seeded_with, shipped_task};

/// Evaluates every vector width of the template `name` among the task's family templates
/// (bound to the task as the search binds them), at each of `tunables`, and asserts each is
/// correct.
fn every_width_is_correct<B: Backend>(
    ev: &mut KernelEvaluator<B>,
    t: &FileTask,
    name: &str,
    tunables: &[&[(&str, i64)]],
) {
    let (library, _) = family_templates(t, Language::OpenCl)
        .unwrap()
        .expect("the task has family templates");
    let template = library
        .templates()
        .iter()
        .find(|template| template.name() == name)
        .unwrap_or_else(|| panic!("no template {name}"));
    for vw in [1, 4, 8, 16] {
        let variant = template
            .instantiate(&Structure::new().with("VW", vw))
            .unwrap();
        for values in tunables {
            let mut params = variant.manifest.default_params();
            for (name, value) in values.iter() {
                params.set(*name, *value);
            }
            let e = ev.evaluate(t, &variant.source, &params).unwrap();
            assert_eq!(
                e.status,
                Status::Correct,
                "{} VW={vw} {params}: {}",
                template.name(),
                e.diagnostics
            );
        }
    }
}

/// The matrix-vector task is seeded with the `matvec` template, every seed is correct, and
/// every vector width with several row blocks, splits and accumulators is correct where K
/// (200) leaves a remainder for every vector width but 4 and 8.
#[test]
fn matvec_template_is_seeded_and_correct() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let mut ev = KernelEvaluator::new(backend, correctness_config(7));
    let t = shipped_task(
        "4_Matrix_vector_multiplication_",
        "M=64,K=200",
        cache.path(),
    );
    let seeds = seeded_with(&t, &["template `matvec`"], "matvec");
    every_seed_is_correct(&mut ev, &t, &seeds, "");
    every_width_is_correct(
        &mut ev,
        &t,
        "matvec",
        &[
            &[("RPI", 8), ("SPLIT", 1), ("WG", 1), ("U", 1)],
            &[("RPI", 4), ("SPLIT", 4), ("WG", 2), ("U", 2)],
            &[("RPI", 1), ("SPLIT", 16), ("WG", 1), ("U", 2)],
            &[("RPI", 16), ("SPLIT", 2), ("WG", 4), ("U", 1)],
        ],
    );
}

/// The transposed-A product is seeded with the `gemm_strided_a` template (and the strided
/// GEMM template), every seed is correct, and every vector width with two register blocks
/// and work-group shapes is correct.
#[test]
fn transposed_a_template_is_seeded_and_correct() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let mut ev = KernelEvaluator::new(backend, correctness_config(7));
    let t = shipped_task(
        "16_Matmul_with_transposed_A",
        "M=16,K=24,N=64",
        cache.path(),
    );
    let seeds = seeded_with(
        &t,
        &["template `gemm_strided_a`", "template `gemm_strided`"],
        "transposed A",
    );
    every_seed_is_correct(&mut ev, &t, &seeds, "");
    every_width_is_correct(
        &mut ev,
        &t,
        "gemm_strided_a",
        &[
            &[("TM", 8), ("TN", 2), ("WG0", 1), ("WG1", 1), ("UNROLL", 1)],
            &[("TM", 2), ("TN", 1), ("WG0", 2), ("WG1", 2), ("UNROLL", 4)],
        ],
    );
}
