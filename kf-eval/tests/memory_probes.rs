//! Workers that ask for far more memory than they may map (issue 47): a task file's Python
//! reference that allocates 16 GiB in 256 MiB steps, a kernel build that expands a macro into
//! a billion statements, and a launch whose work-items each declare a 2 GiB private array, each
//! under a 1 GiB growth limit, end as one failed evaluation (the reference's MemoryError, the
//! compiler's "out of memory" crash, a launch that leaves its output unwritten), and the next
//! evaluation in the same evaluator is judged normally. The default limit is a quarter of the
//! machine's memory, not all of it.
//!
//! Real OpenCL workers (this test binary, re-executed) and the real Python of
//! `scripts/setup.sh`; skips without them unless `KF_REQUIRE_OPENCL=1` / `KF_REQUIRE_PYTHON=1`.

mod common;

use std::path::Path;
use std::time::Duration;

use kf_core::{ParamValues, Status};
use kf_eval::task::file::{python::numpy_or_skip, TaskFile};
use kf_eval::{IsolatedEvaluator, ResourceLimits, TaskFileJob, TimeoutPolicy};
use kf_manifest::Manifest;

kf_eval::worker_test_entry!(common::open_worker_backend);

const GIB: u64 = 1 << 30;

fn limits() -> ResourceLimits {
    ResourceLimits {
        memory_growth_bytes: Some(GIB),
        ..ResourceLimits::default()
    }
}

/// An evaluator of gemm at 32³ in workers under [`limits`].
fn gemm_evaluator(timeout: TimeoutPolicy) -> IsolatedEvaluator {
    common::harness_evaluator("gemm", "M=32,N=32,K=32", common::short_timing(3))
        .limits(limits())
        .timeout(timeout)
        .build()
}

/// The shipped naive gemm kernel and its default parameters: the evaluation after a probe.
fn naive_gemm() -> (kf_core::KernelSource, ParamValues) {
    common::shipped_opencl("gemm_naive")
}

#[test]
fn the_default_limit_is_a_quarter_of_the_machine() {
    let quarter = kf_eval::default_memory_growth().expect("physical memory is known on Linux");
    // sysconf's figure, read independently from /proc/meminfo.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    let ratio = quarter as f64 / (total_kib * 1024) as f64;
    assert!((0.24..0.26).contains(&ratio), "{ratio}");
}

#[test]
fn a_reference_that_allocates_far_too_much_costs_one_evaluation() {
    let (Some(_), true) = (
        kf_backend_opencl::testing::backend_or_skip(),
        numpy_or_skip(),
    ) else {
        return;
    };
    // The shipped example with a reference that, on its first call in a worker, allocates and
    // touches 256 MiB blocks until 16 GiB (or the limit) and afterwards computes honestly.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/examples/scaled_swish");
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&shipped).unwrap().flatten() {
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    let reference = tmp.path().join("scaled_swish_ref.py");
    let honest = std::fs::read_to_string(&reference).unwrap();
    std::fs::write(
        &reference,
        format!(
            "{honest}\n\nimport os\n_honest = reference\n\ndef reference(inputs, sizes, scalars):\n    \
             marker = os.path.join(os.environ['TMPDIR'], 'hogged')\n    \
             if not os.path.exists(marker):\n        \
             open(marker, 'w').close()\n        \
             blocks = [np.ones(1 << 26, dtype=np.float32) for _ in range(64)]\n        \
             return {{'y': blocks[0][:1]}}\n    \
             return _honest(inputs, sizes, scalars)\n"
        ),
    )
    .unwrap();
    let file = TaskFile::load(&tmp.path().join("scaled_swish.toml")).unwrap();
    let eval = common::harness_evaluator("ignored", "ROWS=64,COLS=64", common::short_timing(3))
        .task_file(TaskFileJob::from_task_file(&file).unwrap())
        .limits(limits())
        .build();
    let fast = Manifest::load(&tmp.path().join("scaled_swish_fast.toml"))
        .unwrap()
        .1;
    let first = eval.evaluate_blocking(&fast, &ParamValues::new());
    let said = match &first {
        Ok(e) => {
            assert_ne!(e.status, Status::Correct, "{}", e.diagnostics);
            e.diagnostics.clone()
        }
        Err(e) => e.to_string(),
    };
    eprintln!("reference past its memory limit: {said}");
    assert!(
        said.contains("MemoryError") || said.contains("memory") || said.contains("alloc"),
        "the diagnosis names memory: {said}"
    );
    let next = eval.evaluate_blocking(&fast, &ParamValues::new()).unwrap();
    assert_eq!(next.status, Status::Correct, "{}", next.diagnostics);
    eval.shutdown();
}

#[test]
fn a_launch_that_asks_for_far_too_much_private_memory_costs_one_evaluation() {
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }
    let eval = gemm_evaluator(TimeoutPolicy::default());
    let (naive, params) = naive_gemm();
    // 2 GiB of private memory per work-item, one work-item per group, written and read so
    // that no compiler may drop it.
    let hog = naive
        .text
        .replace(
            "float acc = 0.0f;",
            "float acc = 0.0f;\n    float big[1 << 29];\n    big[(row * N + col) & ((1 << 29) - 1)] = 1.0f;\n    acc += big[(col * 7) & ((1 << 29) - 1)];",
        );
    let manifest = "entry = \"gemm\"\nlanguage = \"opencl\"\n[launch]\nglobal = [\"N\", \"M\"]\nlocal = [\"1\", \"1\"]\n";
    let source = Manifest::parse(manifest, "hog.toml", None)
        .unwrap()
        .kernel_source(hog);
    let e = eval
        .evaluate_blocking(&source, &ParamValues::new())
        .unwrap();
    eprintln!(
        "2 GiB private array per work-item: {:?}: {}",
        e.status, e.diagnostics
    );
    assert_ne!(e.status, Status::Correct, "{}", e.diagnostics);
    let ok = eval.evaluate_blocking(&naive, &params).unwrap();
    assert_eq!(ok.status, Status::Correct, "{}", ok.diagnostics);
    eval.shutdown();
}

#[test]
fn a_build_that_allocates_far_too_much_costs_one_evaluation() {
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }
    let eval = gemm_evaluator(TimeoutPolicy::fixed(Duration::from_secs(120)));
    let (naive, params) = naive_gemm();
    // 2^30 statements from 31 lines: the compiler's memory grows until the limit stops it.
    let mut bomb = String::from("#define A0 acc += 1.0f;\n");
    for i in 1..=30 {
        bomb.push_str(&format!("#define A{i} A{p} A{p}\n", p = i - 1));
    }
    let text = format!("{bomb}{}", naive.text).replace(
        "C[row * N + col] = acc;",
        "A30\n    C[row * N + col] = acc;",
    );
    let source = kf_core::KernelSource {
        text: text.into(),
        ..naive.clone()
    };
    let started = std::time::Instant::now();
    let e = eval.evaluate_blocking(&source, &params).unwrap();
    eprintln!(
        "macro bomb under a 1 GiB growth limit, {:.1} s: {:?}: {}",
        started.elapsed().as_secs_f64(),
        e.status,
        e.diagnostics
    );
    assert!(
        matches!(
            e.status,
            Status::RuntimeError | Status::CompileError | Status::Timeout
        ),
        "{:?}: {}",
        e.status,
        e.diagnostics
    );
    let ok = eval.evaluate_blocking(&naive, &params).unwrap();
    assert_eq!(ok.status, Status::Correct, "{}", ok.diagnostics);
    eval.shutdown();
}
