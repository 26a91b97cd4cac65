//! Operator families on the shipped KernelBench tasks: a matrix-product task file (its
//! `[family] kind = "matmul"`) is searched with the GEMM templates bound to its interface (a
//! transposed factor with the strided GEMM templates, a matrix-vector product with the
//! matrix-vector template), the softmax task with the softmax
//! templates, the element-wise maps with the map template and LayerNorm with the row
//! normalisation template (RMSNorm over the channels with its strided form), the 1-D and
//! pointwise 2-D convolutions with the direct convolution template. Every seed is correct at a small size, and a
//! short search on 1_Square_matrix_multiplication_ keeps structural children and beats the
//! naive kernel. A task file without a `[family]` is seeded from its NumPy reference's trace.
//!
//! Skips (printing `SKIPPED: …`) only when the OpenCL runtime or Python/NumPy is missing and
//! `KF_REQUIRE_OPENCL` / `KF_REQUIRE_PYTHON` is not `1`.

use std::path::Path;
use std::time::Duration;

use kernelfoundry::core::prelude::*;
use kernelfoundry::eval::task::file::{python::numpy_or_skip, FamilySpec, FileTask, TaskFile};
use kernelfoundry::eval::task::{parse_sizes, KernelTask};
use kernelfoundry::eval::{KernelEvaluator, TaskFileJob, WorkerCommand};
use kernelfoundry::opencl::testing::backend_or_skip;
use kernelfoundry::search::{offline_search, run_search, SearchConfig};

mod common;
use common::kernelbench::{correctness_config, every_seed_is_correct, seeded_with, shipped_task};

kernelfoundry::eval::worker_test_entry!(|spec: &kernelfoundry::eval::BackendSpec| {
    kernelfoundry::eval::BackendFactory::open(&kernelfoundry::backends::OpenClFactory, spec)
        .map_err(|e| e.to_string())
});

/// The matrix product and softmax tasks get their family's templates as seeds (the naive
/// kernel first, then the bound templates' base variants and starts) and a structural mutator;
/// every seed computes the task correctly. A task of a family without templates (a map) gets no
/// template structural mutator.
#[test]
fn family_tasks_are_seeded_with_bound_templates_that_are_correct() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let mut ev = KernelEvaluator::new(backend, correctness_config(5));
    for (name, sizes, marker) in [
        ("1_Square_matrix_multiplication_", "N=128", "gemm_blocked"),
        (
            "4_Matrix_vector_multiplication_",
            "M=64,K=256",
            "template `matvec`",
        ),
        ("23_Softmax", "batch_size=32,dim=256", "softmax_row"),
        ("26_GELU_", "batch_size=4,dim=200", "template `map`"),
        ("88_MinGPTNewGelu", "batch_size=4,dim=256", "template `map`"),
        (
            "40_LayerNorm",
            "batch_size=3,features=4,dim1=8,dim2=8",
            "template `row_norm`",
        ),
        (
            "36_RMSNorm_",
            "batch_size=2,features=8,dim1=5,dim2=7",
            "template `row_norm_strided`",
        ),
        (
            "47_Sum_reduction_over_a_dimension",
            "batch_size=2,dim1=6,dim2=37",
            "template `row_reduce_strided`",
        ),
        (
            "51_Argmax_over_a_dimension",
            "batch_size=2,dim1=6,dim2=37",
            "template `row_reduce_strided`",
        ),
        (
            "87_conv_pointwise_2D",
            "batch_size=2,in_channels=3,out_channels=8,width=6,height=5",
            "template `conv1d`",
        ),
        (
            "76_conv_standard_1D_dilated_strided__",
            "batch_size=2,in_channels=3,out_channels=16,length=100",
            "template `conv1d`",
        ),
    ] {
        let t = shipped_task(name, sizes, cache.path());
        let seeds = seeded_with(&t, &[marker], name);
        assert!(seeds.len() >= 3, "{name}: {} seeds", seeds.len());
        every_seed_is_correct(&mut ev, &t, &seeds, name);
    }
    // A map without an expression has nothing for the map template to compute: no template
    // structural mutator.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/kernelbench/19_ReLU/task.toml");
    let mut file = TaskFile::load(&path).unwrap();
    let Some(FamilySpec::Map(map)) = &mut file.spec.family else {
        panic!("19_ReLU declares no map: {:?}", file.spec.family);
    };
    map.expr = None;
    let relu = FileTask::new(file, &parse_sizes("batch_size=4,dim=256").unwrap()).unwrap();
    assert_eq!(relu.family().map(|f| f.kind()), Some("map"));
    let (_, mix) = offline_search(&relu, Language::OpenCl).unwrap();
    assert!(!mix.names().contains(&"structural"), "{:?}", mix.names());
}

/// A short search on the square matrix product: structural children of the bound GEMM
/// templates reach the archive, and the best kernel is faster than the naive one.
#[test]
fn a_short_matmul_search_uses_the_gemm_templates() {
    let (Some(_), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let t = shipped_task("1_Square_matrix_multiplication_", "N=128", cache.path());
    let out = tempfile::tempdir().unwrap();
    let mut config = SearchConfig::new(t.name(), t.sizes());
    config.evaluations = 6;
    config.tune_budget = 1;
    config.wall = Some(Duration::from_secs(240));
    config.out = out.path().join("mm");
    config.progress = false;
    config.worker = Some(WorkerCommand::test_harness().unwrap());
    config.task_file = Some(TaskFileJob::from_task_file(t.file()).unwrap());
    let (seeds, mix) = offline_search(&t, Language::OpenCl).unwrap();
    let outcome = run_search(&config, mix, seeds, None).unwrap();
    // The task file declares no flops: compare fitness (throughput) with the naive seed's.
    let elites = Archive::elites(&outcome.archive);
    let naive = t.baseline(Language::OpenCl).unwrap();
    let fitness = |e: &&Elite| e.fitness.value();
    let base = elites
        .iter()
        .find(|e| e.candidate.source.text == naive.text)
        .map(fitness)
        .expect("the naive seed is in the archive");
    let best = elites.iter().map(fitness).fold(f64::MIN, f64::max);
    assert!(best > 2.0 * base, "best {best} against naive {base}");
    assert!(
        elites
            .iter()
            .any(|e| e.candidate.source.text.contains("Bound to the task")),
        "no bound template in the archive"
    );
}

/// The importer recognises the family of the shipped problems from the PyTorch operations
/// forward() calls, and writes what the shipped task files declare: `torch.matmul(A.T, B)` a
/// matrix product with A transposed, a matrix-vector product with `n = 1`, a softmax over the
/// last dimension a row normalisation, ReLU a map, the model's `nn.Conv1d` a 1-D convolution
/// (more in tests/kernelbench_import.rs).
#[test]
fn the_importer_recognises_the_shipped_problems_families() {
    let python = kernelfoundry::kernelbench::default_python();
    if !kernelfoundry::kernelbench::numpy_available(&python) {
        kernelfoundry::core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Python,
            format_args!("no Python with NumPy at {}", python.display()),
        );
        return;
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/kernelbench");
    for (stem, small, kind) in [
        ("1_Square_matrix_multiplication_", "N=32", Some("matmul")),
        (
            "16_Matmul_with_transposed_A",
            "M=16,K=32,N=24",
            Some("matmul"),
        ),
        (
            "4_Matrix_vector_multiplication_",
            "M=16,K=32",
            Some("matmul"),
        ),
        ("23_Softmax", "batch_size=4,dim=32", Some("row_norm")),
        ("19_ReLU", "batch_size=4,dim=32", Some("map")),
        (
            "76_conv_standard_1D_dilated_strided__",
            "batch_size=2,in_channels=3,out_channels=5,length=64",
            Some("conv1d"),
        ),
    ] {
        let (_dir, imported) = import_numpy(
            &python,
            &shipped.join(stem).join(format!("vendor/{stem}.py")),
            Some(&shipped.join(stem).join(format!("{stem}_ref.py"))),
            small,
        );
        let family = imported.spec.family.clone();
        assert_eq!(family.as_ref().map(|f| f.kind()), kind, "{stem}");
        if kind.is_some() {
            // What the shipped task file declares, buffers and sizes (a map's op aside).
            let declared = TaskFile::load(&shipped.join(stem).join("task.toml"))
                .unwrap()
                .spec
                .family;
            assert_eq!(family, declared, "{stem}");
        }
    }
}

/// Problems the project wrote no family for, a GEMM then element-wise steps: a level-2 problem
/// (`nn.Linear`, then sigmoid, a scaling and a residual add: 70_Gemm_Sigmoid_Scaling_ResidualAdd,
/// vendored unchanged) and a row-major product of two inputs, scaled, then a ReLU
/// (`tests/data/gemm_relu/Matmul_Scale_ReLU.py`), and a linear layer over a batch of
/// sequences (`Batched_Linear_ReLU.py`: its leading dimensions flatten into the GEMM's rows,
/// `m = (batch_size * seq)`). The importer reads the product and its
/// element-wise epilogue from forward()'s trace, so each task file declares a matmul with the
/// epilogue (B transposed for the linear layer's weight); the search is seeded with the GEMM
/// templates that fuse it into their stores (the one that reads both factors along K for the
/// linear layer, the blocked one for the row-major product; the split-K one never), and every
/// seed is correct. A fused kernel without the epilogue, or with an epilogue that drops a
/// term, is wrong: the evaluator judges the steps, not only the product.
#[test]
fn a_gemm_with_an_element_wise_epilogue_is_seeded_with_fused_gemm_templates() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let python = kernelfoundry::kernelbench::default_python();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ev = KernelEvaluator::new(backend, correctness_config(7));
    for (problem, sizes, transpose_b, marker, term, dropped) in [
        (
            root.join(
                "tests/data/kernelbench_level2/vendor/70_Gemm_Sigmoid_Scaling_ResidualAdd.py",
            ),
            "batch_size=32,input_size=64,hidden_size=48",
            true,
            "template `gemm_nt`",
            "col_of(gemm_bias)",
            "KF_COL_OF(col, kf_gemm_bias)",
        ),
        (
            root.join("tests/data/gemm_relu/Matmul_Scale_ReLU.py"),
            "M=64,K=128,N=96",
            false,
            "template `gemm_blocked`",
            "0.5f",
            "0.5f",
        ),
        (
            root.join("tests/data/gemm_relu/Batched_Linear_ReLU.py"),
            "batch_size=4,seq=24,in_features=64,out_features=48",
            true,
            "template `gemm_nt`",
            "col_of(linear_bias)",
            "KF_COL_OF(col, kf_linear_bias)",
        ),
    ] {
        let stem = problem.file_stem().unwrap().to_string_lossy().into_owned();
        let (_dir, file) = import_numpy(&python, &problem, None, sizes);
        let Some(FamilySpec::Matmul(m)) = &file.spec.family else {
            panic!("{stem}: no matmul family: {:?}", file.spec.family);
        };
        assert_eq!(
            (m.transpose_a, m.transpose_b),
            (false, transpose_b),
            "{stem}"
        );
        if stem == "Batched_Linear_ReLU" {
            assert_eq!(m.m.text(), "(batch_size * seq)", "{stem}");
        }
        let epilogue = m.epilogue.clone().expect("an epilogue");
        assert!(epilogue.contains(term), "{stem}: {epilogue}");
        let cache = tempfile::tempdir().unwrap();
        let task = FileTask::new(file, &parse_sizes("").unwrap())
            .unwrap()
            .with_cache_dir(Some(cache.path().to_path_buf()));
        let (seeds, mix) = offline_search(&task, Language::OpenCl).unwrap();
        assert!(mix.names().contains(&"structural"), "{:?}", mix.names());
        assert!(
            seeds.iter().any(|s| s.source.text.contains(marker)),
            "{stem}: no {marker} seed"
        );
        assert!(
            !seeds.iter().any(|s| s.source.text.contains("ksplit")),
            "{stem}: the split-K template cannot apply an epilogue"
        );
        let fused: Vec<_> = seeds
            .iter()
            .filter(|s| s.source.text.contains("#define EPILOGUE(acc, row, col)"))
            .collect();
        assert!(fused.len() >= 2, "{stem}: {} fused seeds", fused.len());
        every_seed_is_correct(&mut ev, &task, &seeds, &stem);
        // The same fused kernels without their epilogue, or without one of its terms, are
        // wrong.
        for seed in fused {
            let define = seed
                .source
                .text
                .lines()
                .find(|l| l.starts_with("#define EPILOGUE(acc, row, col)"))
                .unwrap()
                .to_owned();
            for cheat in [
                "#define EPILOGUE(acc, row, col) (acc)".to_owned(),
                define.replacen(dropped, "1.0f", 1),
            ] {
                let mut source = seed.source.clone();
                source.text = source.text.replace(&define, &cheat).into();
                assert_ne!(source.text, seed.source.text);
                let e = ev.evaluate(&task, &source, &seed.params).unwrap();
                assert_eq!(
                    e.status,
                    Status::WrongValues,
                    "{stem}: {cheat}: {}",
                    e.diagnostics
                );
            }
        }
    }
}

/// A user's own operator with no `[family]` (tests/data/rms_norm: a NumPy reference and the
/// naive kernel a user writes first): the reference's trace shows an RMS norm with its weight
/// and epsilon, the search seeds the row normalisation template bound to the task, every seed
/// is correct, and a seed that drops the traced weight is judged wrong.
#[test]
fn a_task_file_without_a_family_is_seeded_from_its_references_trace() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let task = own_operator("rms_norm", "ROWS=37,LEN=256", cache.path());
    let Some(FamilySpec::RowNorm(rows)) = task.family() else {
        panic!("no row family traced: {:?}", task.family());
    };
    assert_eq!(
        (rows.op.as_deref(), rows.weight.as_deref(), rows.eps),
        (Some("rms_norm"), Some("w"), Some(1e-6))
    );
    let seeds = seeded_with(&task, &["template `row_norm`"], "rms_norm");
    let mut ev = KernelEvaluator::new(backend, correctness_config(11));
    every_seed_is_correct(&mut ev, &task, &seeds, "");
    let fused = seeds
        .iter()
        .find(|s| s.source.text.contains("o *= w;"))
        .expect("a seed applying the weight");
    let mut cheat = fused.source.clone();
    cheat.text = cheat.text.replace("o *= w;", "").into();
    let e = ev.evaluate(&task, &cheat, &fused.params).unwrap();
    assert_eq!(e.status, Status::WrongValues, "{}", e.diagnostics);
}

/// A user's linear layer with a bias and a ReLU, no `[family]` (tests/data/linear_relu): the
/// NumPy reference's trace gives the product with B transposed and the epilogue, the search
/// seeds `gemm_nt` with it fused, every seed is correct, and a fused seed whose epilogue
/// drops the bias is judged wrong.
#[test]
fn a_numpy_linear_layer_without_a_family_gets_fused_gemm_seeds() {
    let (Some(backend), true) = (backend_or_skip(), numpy_or_skip()) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let task = own_operator("linear_relu", "BATCH=24,IN=64,OUT=40", cache.path());
    let Some(FamilySpec::Matmul(m)) = task.family() else {
        panic!("no matmul traced: {:?}", task.family());
    };
    assert!(m.transpose_b && !m.transpose_a);
    assert_eq!(
        m.epilogue.as_deref(),
        Some("fmax((acc + col_of(bias)), 0.0f)")
    );
    let (seeds, _) = offline_search(&task, Language::OpenCl).unwrap();
    let fused: Vec<_> = seeds
        .iter()
        .filter(|s| s.source.text.contains("template `gemm_nt`"))
        .collect();
    assert!(!fused.is_empty(), "no gemm_nt seed");
    let mut ev = KernelEvaluator::new(backend, correctness_config(13));
    every_seed_is_correct(&mut ev, &task, &seeds, "");
    let seed = fused[0];
    let mut cheat = seed.source.clone();
    cheat.text = seed
        .source
        .text
        .replacen("KF_COL_OF(col, kf_bias)", "0.0f", 1)
        .into();
    assert_ne!(
        cheat.text, seed.source.text,
        "the bias accessor is in the seed"
    );
    let e = ev.evaluate(&task, &cheat, &seed.params).unwrap();
    assert_eq!(e.status, Status::WrongValues, "{}", e.diagnostics);
}

/// Imports the problem file `problem` at `sizes` into a fresh folder with `python`, with its
/// NumPy reference `reference` beside it (where given; else run on the stand-in for torch):
/// the folder and the task file written.
fn import_numpy(
    python: &Path,
    problem: &Path,
    reference: Option<&Path>,
    sizes: &str,
) -> (tempfile::TempDir, TaskFile) {
    let stem = problem.file_stem().unwrap().to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join(format!("{stem}.py"));
    std::fs::copy(problem, &copy).unwrap();
    if let Some(reference) = reference {
        std::fs::copy(reference, dir.path().join(format!("{stem}_ref.py"))).unwrap();
    }
    let options = kernelfoundry::kernelbench::ImportOptions {
        problem: copy,
        out_dir: dir.path().join("task"),
        sizes: parse_sizes(sizes).unwrap(),
        max_size: None,
        fit: None,
        python: Some(python.to_path_buf()),
        reference: kernelfoundry::kernelbench::ReferencePreference::Numpy,
        tolerance: Default::default(),
    };
    let report = kernelfoundry::kernelbench::import_kernelbench(&options)
        .unwrap_or_else(|e| panic!("{stem}: {e}"));
    let file = TaskFile::load(&report.task_file).unwrap();
    (dir, file)
}

/// The task file `tests/data/NAME/NAME.toml` (a user's own operator: no `[family]`) at `sizes`,
/// its reference outputs cached in `cache`.
fn own_operator(name: &str, sizes: &str, cache: &Path) -> FileTask {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/{name}/{name}.toml"));
    let file = TaskFile::load(&path).unwrap();
    assert!(
        file.spec.family.is_none(),
        "{name}: the test is about a task without [family]"
    );
    FileTask::new(file, &parse_sizes(sizes).unwrap())
        .unwrap()
        .with_cache_dir(Some(cache.to_path_buf()))
}
