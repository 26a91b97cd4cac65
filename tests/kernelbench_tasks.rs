//! The shipped KernelBench level-1 tasks and the rotary f16 task on the real OpenCL runtime
//! (the rotary task also on the SYCL runtime) with their real NumPy references: every naive baseline is correct at small sizes (at its
//! first and at other parameter values), the rotary kernels are correct, and kernels that do
//! part of the work are rejected.
//!
//! Skips (printing `SKIPPED: …`) only when the runtime is missing and `KF_REQUIRE_OPENCL` is
//! not `1` (`KF_REQUIRE_SYCL` for the SYCL test); likewise Python/NumPy with `KF_REQUIRE_PYTHON`.

use std::path::{Path, PathBuf};

use kernelfoundry::core::{KernelSource, ParamValue, ParamValues, Status};
use kernelfoundry::eval::task::file::{python::numpy_or_skip, FileTask, TaskFile};
use kernelfoundry::eval::task::parse_sizes;
use kernelfoundry::eval::{EvalConfig, KernelEvaluator};
use kernelfoundry::manifest::Manifest;
use kernelfoundry::opencl::testing::backend_or_skip;

fn tasks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks")
}

fn config() -> EvalConfig {
    let mut c = EvalConfig::default();
    c.timing.min_trials = 3;
    c.timing.min_seconds = 0.0;
    c.timing.max_trials = 5;
    c.data_seed = Some(11);
    c
}

fn kernel(path: &Path) -> KernelSource {
    Manifest::load(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .1
}

fn params(pairs: &[(&str, i64)]) -> ParamValues {
    let mut p = ParamValues::new();
    for (k, v) in pairs {
        p.set(*k, ParamValue::Int(*v));
    }
    p
}

fn task(path: &Path, sizes: &str, cache: &Path) -> FileTask {
    let file = TaskFile::load(path).unwrap_or_else(|e| panic!("{e}"));
    FileTask::new(file, &parse_sizes(sizes).unwrap())
        .unwrap_or_else(|e| panic!("{e}"))
        .with_cache_dir(Some(cache.to_path_buf()))
}

/// A shipped task's folder, small sizes (odd where a kernel must handle a ragged edge) and a
/// second parameter setting of its baseline.
type ShippedTask = (&'static str, &'static str, &'static [(&'static str, i64)]);

const SHIPPED: &[ShippedTask] = &[
    (
        "19_ReLU",
        "batch_size=7,dim=1000",
        &[("WG", 64), ("ITEMS", 4)],
    ),
    (
        "21_Sigmoid",
        "batch_size=7,dim=1000",
        &[("WG", 64), ("ITEMS", 4)],
    ),
    (
        "26_GELU_",
        "batch_size=7,dim=1000",
        &[("WG", 256), ("ITEMS", 16)],
    ),
    (
        "88_MinGPTNewGelu",
        "batch_size=7,dim=1000",
        &[("WG", 64), ("ITEMS", 4)],
    ),
    (
        "47_Sum_reduction_over_a_dimension",
        "batch_size=3,dim1=50,dim2=37",
        &[("WG", 64)],
    ),
    (
        "51_Argmax_over_a_dimension",
        "batch_size=3,dim1=50,dim2=37",
        &[("WG", 64)],
    ),
    ("23_Softmax", "batch_size=33,dim=300", &[("WG", 64)]),
    (
        "36_RMSNorm_",
        "batch_size=2,features=16,dim1=9,dim2=11",
        &[("WG", 64)],
    ),
    (
        "40_LayerNorm",
        "batch_size=3,features=4,dim1=9,dim2=11",
        &[("WG", 64)],
    ),
    (
        "1_Square_matrix_multiplication_",
        "N=70",
        &[("WG0", 16), ("WG1", 8)],
    ),
    (
        "4_Matrix_vector_multiplication_",
        "M=70,K=300",
        &[("WG", 64)],
    ),
    (
        "16_Matmul_with_transposed_A",
        "M=40,K=50,N=70",
        &[("WG0", 16), ("WG1", 8)],
    ),
    (
        "87_conv_pointwise_2D",
        "batch_size=2,in_channels=5,out_channels=6,width=13,height=11",
        &[("WG", 64)],
    ),
    (
        "76_conv_standard_1D_dilated_strided__",
        "batch_size=2,in_channels=3,out_channels=5,length=200",
        &[("WG", 64)],
    ),
];

#[test]
fn every_shipped_kernelbench_baseline_is_correct_at_small_sizes() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let mut ev = KernelEvaluator::new(backend, config());
    let dir = tasks_dir().join("kernelbench");
    let mut shipped: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("task.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    shipped.sort();
    let mut listed: Vec<String> = SHIPPED.iter().map(|(n, _, _)| (*n).to_owned()).collect();
    listed.sort();
    assert_eq!(shipped, listed, "every shipped task is checked here");
    assert!(shipped.len() >= 12);
    for (name, sizes, other) in SHIPPED {
        let t = task(&dir.join(name).join("task.toml"), sizes, cache.path());
        let naive = kernel(&dir.join(name).join("naive.toml"));
        for p in [ParamValues::new(), params(other)] {
            let e = ev.evaluate(&t, &naive, &p).unwrap();
            assert_eq!(e.status, Status::Correct, "{name} {p}: {}", e.diagnostics);
        }
    }
}

#[test]
fn a_kernelbench_kernel_that_skips_work_is_rejected() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let mut ev = KernelEvaluator::new(backend, config());
    let dir = tasks_dir().join("kernelbench/23_Softmax");
    let t = task(
        &dir.join("task.toml"),
        "batch_size=33,dim=300",
        cache.path(),
    );
    let naive = kernel(&dir.join("naive.toml"));
    // Normalises with the sum of the first half of the row only.
    let text = naive.text.replace(
        "for (int c = 0; c < dim; ++c) {\n        s +=",
        "for (int c = 0; c < dim / 2; ++c) {\n        s +=",
    );
    assert_ne!(text, *naive.text);
    let cheat = Manifest::from_kernel(&naive).unwrap().kernel_source(text);
    let e = ev.evaluate(&t, &cheat, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::WrongValues, "{}", e.diagnostics);
}

/// The rotary task at a small size on `backend`: the naive kernel of `folder` (`""` for the
/// OpenCL C kernels, `"sycl/"`) correct and timed against the task's baseline in its language
/// (the task file names one per language), and the vector kernel correct at each of
/// `settings`. Returns the evaluator, the task and the naive kernel for further checks.
fn check_rotary_kernels<B: kernelfoundry::core::Backend>(
    backend: B,
    folder: &str,
    settings: &[&[(&str, i64)]],
    cache: &Path,
) -> (KernelEvaluator<B>, FileTask, KernelSource) {
    let mut ev = KernelEvaluator::new(backend, config());
    let dir = tasks_dir().join("rotary");
    let t = task(
        &dir.join("rotary.toml"),
        "SEQ=40,HEADS=3,HEAD_DIM=64",
        cache,
    );
    let naive = kernel(&dir.join(format!("{folder}rotary_naive.toml")));
    let e = ev.evaluate(&t, &naive, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::Correct, "naive: {}", e.diagnostics);
    assert!(
        e.speedup.is_some(),
        "no speedup over the baseline: {}",
        e.diagnostics
    );
    let vec = kernel(&dir.join(format!("{folder}rotary_vec.toml")));
    for setting in settings {
        let p = params(setting);
        let e = ev.evaluate(&t, &vec, &p).unwrap();
        assert_eq!(e.status, Status::Correct, "vec {p}: {}", e.diagnostics);
    }
    (ev, t, naive)
}

#[test]
fn rotary_f16_kernels_are_correct_and_a_half_rotation_is_not() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let (mut ev, t, naive) = check_rotary_kernels(
        backend,
        "",
        &[
            &[("VW", 1), ("ITEMS", 1), ("WG", 16)],
            &[("VW", 2), ("ITEMS", 4), ("WG", 64)],
            &[("VW", 4), ("ITEMS", 8), ("WG", 16)],
        ],
        cache.path(),
    );
    // Rotating only the first element of each pair leaves the second one as it was: the inout
    // buffer is refilled before every launch, so the stale value cannot pass.
    let text = naive
        .text
        .replace("vstore_half_rte(a * s + b * c, 2 * p + 1, x);", "");
    assert_ne!(text, *naive.text);
    let cheat = Manifest::from_kernel(&naive).unwrap().kernel_source(text);
    let e = ev.evaluate(&t, &cheat, &ParamValues::new()).unwrap();
    assert_eq!(e.status, Status::WrongValues, "{}", e.diagnostics);
}

/// The SYCL backend, or `None` (after printing why) without a SYCL runtime, unless
/// `KF_REQUIRE_SYCL=1`.
#[track_caller]
fn sycl_backend_or_skip() -> Option<kernelfoundry::sycl::SyclBackend> {
    use kernelfoundry::core::{BackendError, BackendErrorKind};
    match kernelfoundry::sycl::SyclBackend::builder()
        .no_cache()
        .build()
    {
        Ok(b) => Some(b),
        Err(e) if e.kind() == BackendErrorKind::Unavailable => {
            // Kind `SYCL`: KF_REQUIRE_SYCL=1 makes this a failure.
            kernelfoundry::core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Sycl,
                format_args!("{e} (run scripts/setup.sh --sycl)"),
            );
            None
        }
        Err(e) => panic!("creating the SYCL backend failed: {e}"),
    }
}

#[test]
fn rotary_f16_sycl_kernels_are_correct_against_the_sycl_baseline() {
    let (Some(backend), true) = (sycl_backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    check_rotary_kernels(
        backend,
        "sycl/",
        &[
            &[("VW", 1), ("ITEMS", 2), ("WG", 16)],
            &[("VW", 4), ("ITEMS", 8), ("WG", 16)],
        ],
        cache.path(),
    );
}
