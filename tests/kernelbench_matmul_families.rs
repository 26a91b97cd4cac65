//! The matrix-product family's own templates on the real OpenCL runtime: the shipped
//! matrix-vector task (`n = 1`) is seeded with the `matvec` template, the transposed-A product
//! with the `gemm_strided_a` template (beside the strided GEMM template), and every vector
//! width of both, with register blocks, split rows, local-memory reductions and a K that is
//! not a multiple of the vector width, computes the task correctly at a small size.
//!
//! Skips (printing `SKIPPED: …`) only when the OpenCL runtime or Python/NumPy is missing and
//! `KF_REQUIRE_OPENCL` / `KF_REQUIRE_PYTHON` is not `1`.

use std::path::{Path, PathBuf};

use kernelfoundry::core::prelude::*;
use kernelfoundry::eval::taskfile::{python::numpy_or_skip, FileTask, TaskFile};
use kernelfoundry::eval::tasks::{parse_sizes, KernelTask};
use kernelfoundry::eval::{EvalConfig, KernelEvaluator};
use kernelfoundry::mutate::{Structure, TaskBinding, TemplateLibrary};
use kernelfoundry::opencl::testing::backend_or_skip;
use kernelfoundry::search::offline_search;

fn task(name: &str, sizes: &str, cache: &Path) -> FileTask {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tasks/kernelbench")
        .join(name)
        .join("task.toml");
    let file = TaskFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
    FileTask::new(file, &parse_sizes(sizes).unwrap())
        .unwrap_or_else(|e| panic!("{e}"))
        .with_cache_dir(Some(cache.to_path_buf()))
}

fn config() -> EvalConfig {
    let mut c = EvalConfig::default();
    c.timing.min_trials = 2;
    c.timing.min_seconds = 0.0;
    c.timing.max_trials = 3;
    c.data_seed = Some(7);
    c
}

/// Evaluates every vector width of `library`'s one template bound with `binding`, at each
/// of `tunables`, and asserts each is correct.
fn every_width_is_correct<B: Backend>(
    ev: &mut KernelEvaluator<B>,
    t: &FileTask,
    library: TemplateLibrary,
    binding: &TaskBinding,
    tunables: &[&[(&str, i64)]],
) {
    let bound = library.bound_to(binding).unwrap();
    let template = &bound.templates()[0];
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
    let mut ev = KernelEvaluator::new(backend, config());
    let t = task(
        "4_Matrix_vector_multiplication_",
        "M=64,K=200",
        cache.path(),
    );
    let (seeds, mix) = offline_search(&t, Language::OpenCl).unwrap();
    assert!(mix.names().contains(&"structural"));
    assert!(
        seeds
            .iter()
            .skip(1)
            .any(|s| s.source.text.contains("template `matvec`")),
        "no matvec seed"
    );
    for seed in &seeds {
        let e = ev.evaluate(&t, &seed.source, &seed.params).unwrap();
        assert_eq!(
            e.status,
            Status::Correct,
            "{}: {}",
            seed.params,
            e.diagnostics
        );
    }
    let binding = TaskBinding::new(t.name(), "matvec")
        .param("__global const float*", "A")
        .param("__global const float*", "B")
        .param("__global float*", "out")
        .param("const int", "M")
        .param("const int", "K")
        .bind("M", "M")
        .bind("K", "K")
        .bind("A", "A")
        .bind("X", "B")
        .bind("Y", "out");
    every_width_is_correct(
        &mut ev,
        &t,
        TemplateLibrary::matvec().unwrap(),
        &binding,
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
    let mut ev = KernelEvaluator::new(backend, config());
    let t = task(
        "16_Matmul_with_transposed_A",
        "M=16,K=24,N=64",
        cache.path(),
    );
    let (seeds, mix) = offline_search(&t, Language::OpenCl).unwrap();
    assert!(mix.names().contains(&"structural"));
    for marker in ["template `gemm_strided_a`", "template `gemm_strided`"] {
        assert!(
            seeds.iter().skip(1).any(|s| s.source.text.contains(marker)),
            "no seed from the {marker}"
        );
    }
    for seed in &seeds {
        let e = ev.evaluate(&t, &seed.source, &seed.params).unwrap();
        assert_eq!(
            e.status,
            Status::Correct,
            "{}: {}",
            seed.params,
            e.diagnostics
        );
    }
    let binding = TaskBinding::new(t.name(), "matmul_at")
        .param("__global const float*", "A")
        .param("__global const float*", "B")
        .param("__global float*", "out")
        .param("const int", "M")
        .param("const int", "K")
        .param("const int", "N")
        .bind("M", "M")
        .bind("N", "N")
        .bind("K", "K")
        .bind("SAM", "1")
        .bind("SAK", "(M)")
        .bind("SBK", "(N)")
        .bind("SBN", "1")
        .bind("A", "A")
        .bind("B", "B")
        .bind("C", "out");
    every_width_is_correct(
        &mut ev,
        &t,
        TemplateLibrary::strided_a_gemm().unwrap(),
        &binding,
        &[
            &[("TM", 8), ("TN", 2), ("WG0", 1), ("WG1", 1), ("UNROLL", 1)],
            &[("TM", 2), ("TN", 1), ("WG0", 2), ("WG1", 2), ("UNROLL", 4)],
        ],
    );
}
