//! The worker confinement on its own (issue 47): with the source check turned off
//! (`EvalConfig::host_file_check = false`), a kernel that includes a planted secret file is
//! handed to the real OpenCL compiler in a real worker process. Confined, the compiler cannot
//! open the file and the secret appears nowhere in the evaluation; unconfined (the control,
//! which shows the probe would work), the compiler reads it. A Python reference confined the
//! same way cannot read the file either, while a harmless kernel still evaluates.
//!
//! Skips without an OpenCL runtime unless `KF_REQUIRE_OPENCL=1`, and when this kernel has no
//! Landlock (then nothing is confined, and the workers say so).

mod common;

use kf_core::{ParamValues, Status};
use kf_eval::confine::ConfinementLevel;
use kf_eval::{EvalError, IsolatedEvaluator};

kf_eval::worker_test_entry!(common::open_worker_backend);

fn evaluator(confine: bool) -> IsolatedEvaluator {
    let mut config = common::short_timing(3);
    config.host_file_check = false;
    common::harness_evaluator("gemm", "M=32,N=32,K=32", config)
        .confine(confine)
        .build()
}

/// The device of a confined evaluator's worker, or a skip (kind LANDLOCK) where this machine
/// cannot confine it completely.
fn device_or_skip(evaluator: &IsolatedEvaluator) -> Option<kf_core::DeviceFacts> {
    match evaluator.device() {
        Ok(d) => Some(d),
        Err(EvalError::Unconfined(incomplete)) => {
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Landlock,
                format_args!("{incomplete}"),
            );
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The naive gemm kernel with `first` as its first line.
fn naive_with(first: &str) -> (kf_core::KernelSource, ParamValues) {
    let (naive, params) = common::shipped_opencl("gemm_naive");
    let text = format!("{first}\n{}", naive.text);
    (
        kf_core::KernelSource {
            text: text.into(),
            ..naive
        },
        params,
    )
}

#[test]
fn a_confined_worker_cannot_open_a_planted_file() {
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let secret_value = ["PLANTED", "CONFINEMENT", "SECRET"].join("_");
    let secret = tmp.path().join("creds.h");
    // Valid C, so that an unconfined compiler includes it without complaint, then a line the
    // compiler quotes in its error.
    std::fs::write(
        &secret,
        format!("#define PLANTED 1\n#error {secret_value}\n"),
    )
    .unwrap();
    let include = format!("#include \"{}\"", secret.display());
    let (probe, params) = naive_with(&include);

    let confined = evaluator(true);
    let Some(device) = device_or_skip(&confined) else {
        return;
    };
    let confinement = confined.confinement().expect("a worker has started");
    assert!(
        confinement.is_complete(),
        "workers on {} are {confinement}",
        device.name
    );
    let e = confined.evaluate_blocking(&probe, &params).unwrap();
    eprintln!("confined: {:?}: {}", e.status, e.diagnostics);
    assert_eq!(e.status, Status::CompileError, "{}", e.diagnostics);
    assert!(
        !e.diagnostics.contains(&secret_value),
        "the confined compiler read the planted file: {}",
        e.diagnostics
    );
    // A harmless kernel still evaluates in the confined worker (builds, cache, timing).
    let (harmless, params) = naive_with("// harmless");
    let ok = confined.evaluate_blocking(&harmless, &params).unwrap();
    assert_eq!(ok.status, Status::Correct, "{}", ok.diagnostics);
    confined.shutdown();

    // The control: unconfined and unchecked, the same probe reads the file, so the assertion
    // above is about the confinement and not about a probe that cannot work.
    let open = evaluator(false);
    let e = open.evaluate_blocking(&probe, &params).unwrap();
    assert_eq!(
        open.confinement().map(|c| c.level),
        Some(ConfinementLevel::Off)
    );
    assert!(
        e.diagnostics.contains(&secret_value),
        "the unconfined control did not read the file, so the probe proves nothing: {}",
        e.diagnostics
    );
    open.shutdown();
}

/// A confined worker reads the compile caches but writes none: a new entry travels with its
/// answer and the parent stores it, intact, where the backend looks for it. The worker's file
/// rules name no cache folder as writable.
#[test]
fn a_confined_worker_writes_no_cache_entry_its_parent_stores_it() {
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }
    let allowed = kf_eval::confine::AllowedPaths::for_worker(None);
    for root in kf_eval::confine::AllowedPaths::cache_roots(None) {
        assert!(
            !allowed
                .write
                .iter()
                .any(|w| w.starts_with(&root) || root.starts_with(w)),
            "{} is writable by workers: {:?}",
            root.display(),
            allowed.write
        );
    }
    let confined = evaluator(true);
    // The first evaluation of a fresh evaluator (its worker started for it) already carries
    // the worker's confinement.
    let (kernel, params) = naive_with("// the first job");
    match confined.evaluate_blocking(&kernel, &params) {
        Ok(first) => assert_eq!(first.confinement, Some(ConfinementLevel::Complete)),
        Err(EvalError::Unconfined(incomplete)) => {
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Landlock,
                format_args!("{incomplete}"),
            );
            return;
        }
        Err(e) => panic!("{e}"),
    }
    // A kernel no cache has seen: a fresh comment changes its key.
    let unique = format!(
        "// {}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let (kernel, params) = naive_with(&unique);
    let e = confined.evaluate_blocking(&kernel, &params).unwrap();
    assert_eq!(e.status, Status::Correct, "{}", e.diagnostics);
    assert_eq!(e.confinement, Some(ConfinementLevel::Complete));
    let file = e
        .compiler
        .extra
        .get("cache_file")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| panic!("no cache file in {:?}", e.compiler.extra));
    let bytes = std::fs::read(&file)
        .unwrap_or_else(|err| panic!("the parent did not store {}: {err}", file.display()));
    // Intact: the same check the parent made before storing it, made again on the file.
    let scratch = tempfile::tempdir().unwrap();
    let again = kf_backend_common::cache_outbox::CacheEntry {
        dir: scratch.path().to_path_buf(),
        file: file.file_name().unwrap().to_string_lossy().into_owned(),
        bytes,
    };
    kf_backend_common::cache_outbox::store_from_child(&again, &[scratch.path().to_path_buf()])
        .unwrap();
    confined.shutdown();
}
