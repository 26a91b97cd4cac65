//! Untrusted kernels read nothing of the host (issue 47): the probe corpus of
//! `tests/probes/host_files/` (every include form, `#embed`, `__has_include`, a macro-built
//! path, a symlink, a `#line` trick, the parent's `/proc/<pid>/environ`, a directive after a
//! comment spanning lines, a digraph), each prepended to the naive gemm kernel of its language
//! and evaluated by the real `kf eval` on the real OpenCL and SYCL runtimes. A planted secret
//! file, a secret-looking environment variable and a database URL password are set up first;
//! every probe that reaches for a host file must end as a `compile_error` that names its
//! directive (in a disabled `#if` branch too: the check evaluates no condition), the
//! `harmless_*` probes (a commented-out include, an allowed header in a disabled branch) must
//! still evaluate as `correct`, and no secret may appear in anything `kf eval` prints. CUDA probes
//! go through the same check the evaluator applies (`kf_eval::host_file_check`): running
//! them needs a GPU.
//!
//! Skips (printing `SKIPPED: …`) without an OpenCL runtime unless `KF_REQUIRE_OPENCL=1`, and
//! the SYCL probes without a SYCL runtime unless `KF_REQUIRE_SYCL=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use kernelfoundry::opencl::testing::backend_or_skip;
use kf_core::{KernelSource, Language};

mod common;
use common::text;

/// The three planted secrets, made distinctive per run and split in the source so that this
/// file holds no copy of a whole value.
struct Secrets {
    file_contents: String,
    env_value: String,
    url_password: String,
}

impl Secrets {
    fn new() -> Self {
        let tag = format!("{:x}", std::process::id() as u64 * 2654435761 % 0xffff_ffff);
        Secrets {
            file_contents: format!("{}-{tag}", ["PLANTED", "FILE", "SECRET"].join("_")),
            env_value: format!("{}-{tag}", ["PLANTED", "ENV", "TOKEN"].join("_")),
            url_password: format!("{}{tag}", ["planted", "url", "pw"].join("")),
        }
    }

    fn all(&self) -> [&str; 3] {
        [&self.file_contents, &self.env_value, &self.url_password]
    }
}

/// The corpus folder.
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probes/host_files")
}

/// The probes of one language, by file name.
fn probes(extension: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(corpus())
        .expect("the probe corpus")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    out.sort();
    out
}

/// A folder holding the planted secret file, a symbolic link to it, and the evaluation's
/// working folder beside it (so that `@SECRET_REL@` is a real relative path).
struct Plant {
    _tmp: tempfile::TempDir,
    secret: PathBuf,
    link: PathBuf,
    work: PathBuf,
}

fn plant(secrets: &Secrets) -> Plant {
    let tmp = tempfile::tempdir().unwrap();
    let vault = tmp.path().join("vault");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&vault).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let secret = vault.join("creds.txt");
    std::fs::write(&secret, format!("{}\n", secrets.file_contents)).unwrap();
    let link = work.join("innocent.h");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    Plant {
        _tmp: tmp,
        secret,
        link,
        work,
    }
}

/// The probe's lines with the placeholders filled in, then the naive gemm kernel of its
/// language; writes the kernel and a manifest naming it into `plant.work`.
fn instantiate(probe: &Path, plant: &Plant, language: Language) -> (PathBuf, String) {
    let lines = std::fs::read_to_string(probe)
        .unwrap()
        .replace("@SECRET_REL@", "../vault/creds.txt")
        .replace("@SECRET@", plant.secret.to_str().unwrap())
        .replace("@LINK@", plant.link.to_str().unwrap())
        .replace(
            "@PPID_ENVIRON@",
            &format!("/proc/{}/environ", std::process::id()),
        );
    let (dir, ext) = match language {
        Language::Sycl => ("kf-eval/kernels/sycl", "cpp"),
        Language::Cuda => ("kf-eval/kernels/cuda", "cu"),
        _ => ("kf-eval/kernels", "cl"),
    };
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let kernel = std::fs::read_to_string(shipped.join(format!("gemm_naive.{ext}"))).unwrap();
    let text = format!("{lines}{kernel}");
    let stem = probe.file_stem().unwrap().to_str().unwrap();
    let source = format!("{stem}.{ext}");
    std::fs::write(plant.work.join(&source), &text).unwrap();
    let manifest = std::fs::read_to_string(shipped.join("gemm_naive.toml"))
        .unwrap()
        .replace(&format!("gemm_naive.{ext}"), &source);
    let path = plant.work.join(format!("{stem}.toml"));
    std::fs::write(&path, manifest).unwrap();
    (path, text)
}

/// `kf eval --json` of `manifest` on `backend`, in `work`, with the planted environment.
fn eval(
    manifest: &Path,
    backend: &str,
    work: &Path,
    secrets: &Secrets,
) -> (serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kf"))
        .current_dir(work)
        .args([
            "eval",
            "--task",
            "gemm",
            "--size",
            "M=64,N=64,K=64",
            "--backend",
            backend,
            "--kernel",
            manifest.to_str().unwrap(),
            "--json",
        ])
        .env("KF_PLANTED_API_KEY", &secrets.env_value)
        .env(
            "KF_DATABASE_URL",
            format!("postgres://kf:{}@127.0.0.1:1/kf", secrets.url_password),
        )
        .output()
        .expect("running kf eval");
    let all = text(&out);
    assert!(!all.contains("panicked"), "kf eval panicked:\n{all}");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (json, all)
}

/// Evaluates every probe with extension `ext` on `backend`; returns how many were refused.
fn run_probes(ext: &str, backend: &str, language: Language) -> usize {
    let secrets = Secrets::new();
    let plant = plant(&secrets);
    let mut refused = 0;
    for probe in probes(ext) {
        let name = probe.file_name().unwrap().to_string_lossy().into_owned();
        let (manifest, _) = instantiate(&probe, &plant, language);
        let (json, all) = eval(&manifest, backend, &plant.work, &secrets);
        for secret in secrets.all() {
            assert!(
                !all.contains(secret),
                "{name}: a planted secret reached kf eval's output:\n{all}"
            );
        }
        let status = json["status"].as_str().unwrap_or_default();
        if name.starts_with("harmless_") {
            assert_eq!(status, "correct", "{name} must still evaluate:\n{all}");
        } else {
            let diagnostics = json["diagnostics"].as_str().unwrap_or_default();
            assert_eq!(status, "compile_error", "{name} must be refused:\n{all}");
            assert!(
                diagnostics.contains("refused before compilation"),
                "{name}: the diagnostic must say the kernel was refused and why:\n{diagnostics}"
            );
            refused += 1;
        }
    }
    refused
}

#[test]
fn opencl_probes_are_refused_and_leak_nothing() {
    if backend_or_skip().is_none() {
        return;
    }
    let refused = run_probes("cl", "opencl", Language::OpenCl);
    assert!(refused >= 12, "only {refused} OpenCL probes");
}

#[test]
fn sycl_probes_are_refused_and_leak_nothing() {
    // The SYCL runtime's presence, as `kf devices` reports it.
    let devices = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(["devices", "--backend", "sycl"])
        .output()
        .expect("kf devices");
    let listed = String::from_utf8_lossy(&devices.stdout);
    let sycl_device = listed
        .lines()
        .any(|l| l.starts_with("sycl") && !l.contains("not available"));
    if !sycl_device {
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Sycl,
            format_args!("kf devices lists no SYCL device (scripts/setup.sh --sycl)"),
        );
        return;
    }
    let refused = run_probes("cpp", "sycl", Language::Sycl);
    assert!(refused >= 2, "only {refused} SYCL probes");
}

#[test]
fn cuda_probes_are_refused_by_the_evaluators_check() {
    let secrets = Secrets::new();
    let plant = plant(&secrets);
    let mut refused = 0;
    for probe in probes("cu") {
        let name = probe.file_name().unwrap().to_string_lossy().into_owned();
        let (_, text) = instantiate(&probe, &plant, Language::Cuda);
        let source = KernelSource::new(Language::Cuda, "gemm", text);
        match kf_eval::host_file_check(&source) {
            Ok(()) => assert!(name.starts_with("harmless_"), "{name} was not refused"),
            Err(e) => {
                assert!(!name.starts_with("harmless_"), "{name} was refused: {e}");
                assert!(e.to_string().contains("#include"), "{name}: {e}");
                refused += 1;
            }
        }
    }
    assert!(refused >= 2);
}

#[test]
fn a_reference_that_reads_a_planted_file_at_import_is_denied() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    let secrets = Secrets::new();
    let plant = plant(&secrets);
    // KernelBench's ReLU problem with a third-party NumPy reference whose first line reads the
    // planted file; the importer runs the reference to fit the output shapes.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/kernelbench/19_ReLU");
    let problem = plant.work.join("19_ReLU.py");
    std::fs::copy(shipped.join("vendor/19_ReLU.py"), &problem).unwrap();
    std::fs::write(
        plant.work.join("19_ReLU_ref.py"),
        format!(
            "_stolen = open({:?}).read()\n{}",
            plant.secret.display().to_string(),
            std::fs::read_to_string(shipped.join("19_ReLU_ref.py")).unwrap()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kf"))
        .current_dir(&plant.work)
        .args(["task", "import-kernelbench", "19_ReLU.py", "--out", "task"])
        .args(["--size", "batch_size=4,dim=64", "--numpy"])
        .env("KF_PLANTED_API_KEY", &secrets.env_value)
        .output()
        .expect("running kf");
    let all = text(&out);
    assert!(
        !out.status.success(),
        "the import read the planted file:\n{all}"
    );
    assert!(
        all.contains("Permission denied") || all.contains("PermissionError"),
        "the import failed for another reason:\n{all}"
    );
    for secret in secrets.all() {
        assert!(
            !all.contains(secret),
            "a planted secret reached the output:\n{all}"
        );
    }
    // Without the hostile line the same import works (so the denial is the file's).
    std::fs::copy(
        shipped.join("19_ReLU_ref.py"),
        plant.work.join("19_ReLU_ref.py"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kf"))
        .current_dir(&plant.work)
        .args(["task", "import-kernelbench", "19_ReLU.py", "--out", "task"])
        .args(["--size", "batch_size=4,dim=64", "--numpy"])
        .output()
        .expect("running kf");
    assert!(out.status.success(), "{}", text(&out));
}
