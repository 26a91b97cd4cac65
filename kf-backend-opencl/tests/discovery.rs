//! Runtime discovery, tested in child processes (the OpenCL library is loaded once per process):
//! with nothing found the error is `Unavailable` and says how to get a runtime; `KF_OPENCL_ICD`
//! may name a driver library or an `.icd` file.

use std::path::{Path, PathBuf};
use std::process::Command;

use kf_backend_opencl::list_devices;
use kf_backend_opencl::runtime::RuntimeConfig;
use kf_core::BackendError;

const CHILD: &str = "KF_DISCOVERY_CHILD";

/// In a child process: lists devices and prints one result line.
#[test]
#[ignore = "a child process of another test: runs only with --ignored"]
fn child_probe() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    match list_devices() {
        Ok(devices) => println!("CHILD-RESULT ok {}", devices[0].name),
        Err(e) => println!("CHILD-RESULT err {:?} {e}", e.kind()),
    }
}

fn run_child(envs: &[(&str, &str)], cwd: &Path) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "child_probe",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, "1")
    .env_remove("OPENCL_DYLIB_PATH")
    .env_remove("KF_OPENCL_ICD")
    .env_remove("OCL_ICD_VENDORS")
    .env_remove("OCL_ICD_FILENAMES")
    .current_dir(cwd);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-RESULT ").map(|(_, r)| r.to_owned()))
        .unwrap_or_else(|| {
            panic!(
                "child printed no result:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

fn setup_config() -> Option<(PathBuf, RuntimeConfig)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join(".runtime").join("opencl.json"))
        .find(|p| p.is_file())?;
    let config = RuntimeConfig::read(&path).ok()?;
    Some((path, config))
}

/// The runtime `scripts/setup.sh` installed ([`setup_config`]); `None` after skipping the
/// test (as a missing runtime, under `KF_REQUIRE_OPENCL`'s rule) where there is none.
#[track_caller]
fn setup_config_or_skip() -> Option<(PathBuf, RuntimeConfig)> {
    let found = setup_config();
    if found.is_none() {
        kf_backend_opencl::testing::skip_missing_runtime("no .runtime/opencl.json");
    }
    found
}

/// Asserts that a child's result is the "no runtime" error, saying how to get one.
#[track_caller]
fn assert_unavailable_with_instructions(result: &str) {
    assert!(result.starts_with("err Unavailable"), "{result}");
    assert!(result.contains("scripts/setup.sh"), "{result}");
    assert!(result.contains("pocl-opencl-icd"), "{result}");
}

/// No OpenCL runtime at all: no library where `OPENCL_DYLIB_PATH` points. opencl3 then falls
/// back to the system's `libOpenCL.so.1`; where a system ICD loader is installed, the empty
/// `OCL_ICD_VENDORS` folder leaves it without a driver, so the outcome is the same either way.
#[test]
fn a_missing_runtime_is_unavailable_with_instructions() {
    let no_vendors = tempfile::tempdir().unwrap();
    let result = run_child(
        &[
            ("OPENCL_DYLIB_PATH", "/nonexistent/libOpenCL.so.1"),
            ("OCL_ICD_VENDORS", &no_vendors.path().to_string_lossy()),
        ],
        &std::env::temp_dir(),
    );
    assert_unavailable_with_instructions(&result);
}

/// An ICD loader found by opencl3's fallback (what a system loader is) but no driver: the same
/// error. The loader is the one `scripts/setup.sh` installed, found through `LD_LIBRARY_PATH`
/// as a system one would be through the linker's cache, so this runs on every machine with the
/// setup runtime, whether or not the system has a loader of its own.
#[test]
fn a_loader_without_a_driver_is_unavailable_with_instructions() {
    let Some((path, config)) = setup_config_or_skip() else {
        return;
    };
    let Some(lib_dir) = config.loader.as_ref().and_then(|l| l.parent()) else {
        panic!("{} names no ICD loader", path.display());
    };
    let no_vendors = tempfile::tempdir().unwrap();
    let result = run_child(
        &[
            ("OPENCL_DYLIB_PATH", "/nonexistent/libOpenCL.so.1"),
            ("OCL_ICD_VENDORS", &no_vendors.path().to_string_lossy()),
            ("LD_LIBRARY_PATH", &lib_dir.to_string_lossy()),
        ],
        &std::env::temp_dir(),
    );
    // A loader was loaded: the error is not cl3's "could not load the library" (-2000).
    assert!(!result.contains("(-2000)"), "{result}");
    assert_unavailable_with_instructions(&result);
}

#[test]
fn discovery_finds_the_setup_runtime_without_variables() {
    let Some((path, _)) = setup_config_or_skip() else {
        return;
    };
    let result = run_child(&[], &std::env::temp_dir());
    assert!(result.starts_with("ok"), "{} -> {result}", path.display());
}

#[test]
fn kf_opencl_icd_names_a_library_an_icd_file_or_a_config() {
    let Some((path, config)) = setup_config_or_skip() else {
        return;
    };
    let icd_file = config
        .vendors_dir
        .as_ref()
        .map(|d| d.join("intel-cpu.icd"))
        .filter(|p| p.is_file());
    let mut targets = vec![config.icd.clone(), path.clone()];
    targets.extend(icd_file);
    for target in targets {
        let t = target.to_string_lossy().into_owned();
        let result = run_child(&[("KF_OPENCL_ICD", &t)], &std::env::temp_dir());
        assert!(result.starts_with("ok"), "KF_OPENCL_ICD={t} -> {result}");
    }
    let result = run_child(
        &[("KF_OPENCL_ICD", "/nonexistent/libfoo.so")],
        &std::env::temp_dir(),
    );
    if !result.starts_with("ok") {
        assert!(result.contains("does not exist"), "{result}");
    }
}
