//! Export without a device: run directories written by hand, the crate's files, the refusals,
//! and the runtime's choice over real manifest constraints.

use std::path::Path;

use kf_core::DeviceFacts;

use crate::runtime::{Configuration, Param, Table};
use crate::signature::GEMM;
use crate::{export_rust, ExportError, RustExport};

const MANIFEST: &str = r#"entry = "gemm"
language = "opencl"
source = "best_kernel.cl"
[params]
TS = [16, 8, 32]
[constraints]
rules = ["M % TS == 0", "N % TS == 0", "TS * TS <= max_work_group_size"]
[launch]
global = ["N", "M"]
local = ["TS", "TS"]
"#;

const SOURCE: &str = "__kernel void gemm(const int M, const int N, const int K, __global const float* A, __global const float* B, __global float* C) {}\n";

/// A run directory as `kf search` writes it (the files the export reads).
fn fake_run(dir: &Path, backend: &str, task: &str, n: i64, ts: i64) {
    std::fs::create_dir_all(dir.join("run")).unwrap();
    std::fs::write(dir.join("best_kernel.cl"), SOURCE).unwrap();
    std::fs::write(dir.join("best_kernel.toml"), MANIFEST).unwrap();
    std::fs::write(dir.join("best_params.json"), format!("{{\"TS\": {ts}}}")).unwrap();
    let report = serde_json::json!({
        "best_kernel": {
            "path": "best_kernel.cl",
            "manifest_path": "best_kernel.toml",
            "params_path": "best_params.json",
            "gflops": 12.5,
            "params": {"TS": ts},
        },
        "extra": {"device": "Test CPU"},
    });
    std::fs::write(dir.join("report.json"), report.to_string()).unwrap();
    let run = serde_json::json!({
        "config": {
            "backend": {"kind": backend},
            "device": "Test CPU",
            "sizes": {"K": n, "M": n, "N": n},
            "task": task,
        }
    });
    std::fs::write(dir.join("run/run.json"), run.to_string()).unwrap();
}

#[test]
fn two_runs_export_one_table_with_regions_and_a_test() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    fake_run(&a, "opencl", "gemm", 64, 16);
    fake_run(&b, "opencl", "gemm", 256, 32);
    let out = tmp.path().join("crate");
    let done = export_rust(&RustExport::new(vec![a, b], &out)).unwrap();
    assert_eq!(done.kernels.len(), 2);
    // Sizes in the task's order, not run.json's.
    assert_eq!(done.kernels[0].sizes_text(), "M=64,N=64,K=64");
    let lib = std::fs::read_to_string(out.join("src/lib.rs")).unwrap();
    assert!(lib.contains("pub fn gemm(device: &Device, m: i64, n: i64, k: i64, a: &[f32], b: &[f32], c: &mut [f32])"), "{lib}");
    assert!(lib.contains("pub fn gemm_with(") && lib.contains("pub fn gemm_choice("));
    assert!(lib.contains("pub struct Kernels<'d>") && lib.contains("launch(self.device"));
    // Resolved at export time: parameters and build options; the expressions stay.
    assert!(lib.contains(r#"build_options: "-D TS=32""#), "{lib}");
    assert!(
        lib.contains(r#"params: &[("TS", Param::Int(32))]"#),
        "{lib}"
    );
    assert!(lib.contains(r#"local: Some(&["TS", "TS"])"#), "{lib}");
    // The run time travels with the crate, verbatim.
    for (rel, text) in crate::standalone::RUN_TIME_FILES {
        assert_eq!(
            &std::fs::read_to_string(out.join(rel)).unwrap(),
            text,
            "{rel}"
        );
    }
    assert!(out.join("src/kf_check.rs").is_file() && !out.join("src/kf_f16.rs").exists());
    assert!(
        lib.contains("- on Test CPU: 1 ≤ n ≤ 127: `gemm_0`; n ≥ 128: `gemm_1`"),
        "{lib}"
    );
    assert!(lib.contains("`M % TS == 0`"), "{lib}");
    assert!(lib.contains(r#"include_str!("../kernels/gemm_1.cl")"#));
    assert_eq!(
        std::fs::read_to_string(out.join("kernels/gemm_0.cl")).unwrap(),
        SOURCE
    );
    let cargo = std::fs::read_to_string(out.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("name = \"kf-kernels\"") && cargo.contains("[workspace]"));
    // No KernelFoundry crate: only what crates.io has.
    assert!(!cargo.lines().any(|l| l.starts_with("kf")), "{cargo}");
    assert!(cargo.contains("opencl3 = \"0.12\"") && cargo.contains("evalexpr = \"13\""));
    // A case's sizes are read in the task's order.
    assert!(cargo.contains(r#"serde_json = { version = "1", features = ["preserve_order"] }"#));
    assert!(!cargo.contains("half"), "{cargo}");
    let test = std::fs::read_to_string(out.join("tests/reference.rs")).unwrap();
    assert!(
        test.contains("fn reference(m: i64, n: i64, k: i64"),
        "{test}"
    );
}

#[test]
fn each_task_gets_its_own_typed_function_and_test_module() {
    let tmp = tempfile::tempdir().unwrap();
    let (g, sm) = (tmp.path().join("g"), tmp.path().join("sm"));
    fake_run(&g, "opencl", "gemm", 64, 16);
    fake_run(&sm, "opencl", "softmax", 64, 16);
    // A softmax run: its own sizes (the manifest's rules name M and N, which softmax does
    // not have; the export does not evaluate them, the call would refuse).
    let run = serde_json::json!({
        "config": {"backend": {"kind": "opencl"}, "device": "Test CPU",
                   "sizes": {"COLS": 128, "ROWS": 64}, "task": "softmax"}
    });
    std::fs::write(sm.join("run/run.json"), run.to_string()).unwrap();
    let out = tmp.path().join("crate");
    let mut export = RustExport::new(vec![sm, g], &out);
    export.crate_name = "my_kernels".to_owned();
    let done = export_rust(&export).unwrap();
    assert_eq!(done.kernels[0].sizes_text(), "ROWS=64,COLS=128");
    let lib = std::fs::read_to_string(out.join("src/lib.rs")).unwrap();
    assert!(
        lib.contains(
            "pub fn softmax(device: &Device, rows: i64, cols: i64, x: &[f32], y: &mut [f32])"
        ),
        "{lib}"
    );
    assert!(lib.contains("pub static SOFTMAX: Table") && lib.contains("pub static GEMM: Table"));
    assert!(lib.contains("along the diagonal ROWS = COLS = n"), "{lib}");
    let test = std::fs::read_to_string(out.join("tests/reference.rs")).unwrap();
    assert!(
        test.contains("use my_kernels::*;")
            && test.contains("mod softmax {")
            && test.contains("mod gemm {")
    );
}

#[test]
fn other_backends_tasks_and_empty_runs_are_refused_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let sycl = tmp.path().join("sycl");
    fake_run(&sycl, "sycl", "gemm", 64, 16);
    let e = export_rust(&RustExport::new(vec![sycl], tmp.path().join("o1"))).unwrap_err();
    assert!(matches!(e, ExportError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("kf-backend-opencl"), "{e}");

    let task = tmp.path().join("task");
    fake_run(&task, "opencl", "scaled_swish", 64, 16);
    let e = export_rust(&RustExport::new(vec![task], tmp.path().join("o2"))).unwrap_err();
    assert!(matches!(e, ExportError::Unsupported { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("no copy of its task file (task/task.toml"),
        "{e}"
    );

    let e = export_rust(&RustExport::new(vec![], tmp.path().join("o3"))).unwrap_err();
    assert!(matches!(e, ExportError::NoRuns));
    let ok = tmp.path().join("ok");
    fake_run(&ok, "opencl", "gemm", 64, 16);
    let mut named = RustExport::new(vec![ok], tmp.path().join("o6"));
    named.crate_name = "my kernels".to_owned();
    let e = export_rust(&named).unwrap_err();
    assert!(matches!(e, ExportError::BadCrateName { .. }), "{e}");

    let empty = tmp.path().join("empty");
    fake_run(&empty, "opencl", "gemm", 64, 16);
    std::fs::write(empty.join("report.json"), r#"{"best_kernel": null}"#).unwrap();
    let e = export_rust(&RustExport::new(vec![empty], tmp.path().join("o4"))).unwrap_err();
    assert!(matches!(e, ExportError::NoBestKernel { .. }), "{e}");

    let bad_param = tmp.path().join("bad");
    fake_run(&bad_param, "opencl", "gemm", 64, 12);
    let e = export_rust(&RustExport::new(vec![bad_param], tmp.path().join("o5"))).unwrap_err();
    assert!(matches!(e, ExportError::Manifest(_)), "{e}");

    // A best kernel of several kernels (`[[kernels]]` with scratch) is refused by name, not
    // exported as its first kernel.
    let sequence = tmp.path().join("sequence");
    fake_run(&sequence, "opencl", "gemm", 64, 16);
    let two = MANIFEST.replace(
        "[launch]\nglobal = [\"N\", \"M\"]\nlocal = [\"TS\", \"TS\"]\n",
        "[[scratch]]\nname = \"P\"\ndtype = \"f32\"\nelements = \"M * N\"\n\
         [[kernels]]\nentry = \"gemm\"\nwrites = [\"P\"]\nlaunch = { global = [\"N\", \"M\"] }\n\
         [[kernels]]\nentry = \"finish\"\nwrites = [\"C\"]\nlaunch = { global = [\"N\", \"M\"] }\n",
    );
    assert_ne!(two, MANIFEST);
    std::fs::write(sequence.join("best_kernel.toml"), two).unwrap();
    let e = export_rust(&RustExport::new(vec![sequence], tmp.path().join("o7"))).unwrap_err();
    assert!(matches!(e, ExportError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("a sequence of 2 kernels"), "{e}");
}

static CONFIGS: [Configuration; 2] = [
    gemm_config(
        "gemm_0",
        "a",
        &[("M", 64), ("N", 64), ("K", 64)],
        &[("TS", Param::Int(16))],
        "-D TS=16",
    ),
    gemm_config(
        "gemm_1",
        "b",
        &[("M", 256), ("N", 256), ("K", 256)],
        &[("TS", Param::Int(32))],
        "-D TS=32",
    ),
];

/// A configuration of the test manifest's GEMM ([`MANIFEST`]) from run `run`, tuned at
/// `tuned_sizes` with `params`.
const fn gemm_config(
    name: &'static str,
    run: &'static str,
    tuned_sizes: &'static [(&'static str, i64)],
    params: &'static [(&'static str, Param)],
    build_options: &'static str,
) -> Configuration {
    Configuration {
        name,
        run,
        device: "Test CPU",
        driver: None,
        tuned_sizes,
        params,
        build_options,
        entry: "gemm",
        constraints: &[
            "M % TS == 0",
            "N % TS == 0",
            "TS * TS <= max_work_group_size",
        ],
        global: &["N", "M"],
        local: Some(&["TS", "TS"]),
        source: SOURCE,
        gflops: None,
    }
}

static TABLE: Table = Table {
    signature: &GEMM,
    configurations: &CONFIGS,
};

fn device(max_wg: u64) -> crate::runtime::DeviceFacts {
    let mut d = DeviceFacts::unknown("Test CPU");
    d.max_work_group_size = max_wg;
    (&d).into()
}

#[test]
fn the_runtime_choice_evaluates_constraints_at_the_callers_sizes_and_device() {
    let d = device(1024);
    assert_eq!(TABLE.choose(&d, &[64, 64, 64]).unwrap(), 0);
    assert_eq!(TABLE.choose(&d, &[256, 256, 256]).unwrap(), 1);
    assert_eq!(TABLE.choose(&d, &[96, 96, 96]).unwrap(), 0);
    assert_eq!(TABLE.choose(&d, &[192, 192, 192]).unwrap(), 1);
    // 208 is nearer 256, but 208 % 32 != 0: the 64³ configuration serves.
    assert_eq!(TABLE.choose(&d, &[208, 208, 208]).unwrap(), 0);
    // A device whose work-groups are too small for TS = 32.
    assert_eq!(TABLE.choose(&device(256), &[256, 256, 256]).unwrap(), 0);
    // Nothing fits: the error names each configuration's rule.
    let e = TABLE.choose(&d, &[100, 100, 100]).unwrap_err().to_string();
    assert!(
        e.contains("M=100,N=100,K=100") && e.contains("gemm_0") && e.contains("M % TS == 0"),
        "{e}"
    );
    let e = TABLE
        .check(1, &d, &[208, 208, 208])
        .unwrap_err()
        .to_string();
    assert!(e.contains("M % TS == 0"), "{e}");
    // Sizes that do not fit the signature.
    assert!(TABLE.choose(&d, &[64, 64]).is_err());
    assert!(TABLE.choose(&d, &[0, 64, 64]).is_err());
    assert!(TABLE.choose(&d, &[1 << 40, 64, 64]).is_err());
}

/// A run of a task file as `kf search --task-file` leaves it: the run's files and the copy of
/// its task file (`task/task.toml`); the reference is the built-in Rust softmax, so no Python
/// is needed.
fn fake_task_file_run(dir: &Path, rows: i64, cols: i64) {
    fake_run(dir, "opencl", "rowsoft", rows, 16);
    let manifest = r#"entry = "rowsoft"
language = "opencl"
source = "best_kernel.cl"
[params]
TS = [16]
[launch]
global = ["ROWS"]
"#;
    std::fs::write(dir.join("best_kernel.toml"), manifest).unwrap();
    let run = serde_json::json!({
        "config": {"backend": {"kind": "opencl"}, "device": "Test CPU",
                   "sizes": {"COLS": cols, "ROWS": rows}, "task": "rowsoft"}
    });
    std::fs::write(dir.join("run/run.json"), run.to_string()).unwrap();
    std::fs::create_dir_all(dir.join("task")).unwrap();
    std::fs::write(
        dir.join(crate::TASK_COPY),
        r#"name = "rowsoft"
args = ["ROWS", "COLS", "scale", "X", "Y"]
[sizes]
ROWS = 64
COLS = 64
[[buffer]]
name = "X"
dtype = "f32"
shape = ["ROWS", "COLS"]
role = "input"
init = ["uniform(-2, 2)", "normal"]
[[buffer]]
name = "Y"
dtype = "f32"
shape = ["ROWS", "COLS"]
role = "output"
[[scalar]]
name = "scale"
dtype = "f32"
value = 2.0
[reference]
rust = "softmax"
[tolerance]
atol = 1e-5
rtol = 1e-5
"#,
    )
    .unwrap();
}

#[test]
fn a_task_file_run_exports_typed_scalars_and_stored_reference_cases() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    fake_task_file_run(&a, 64, 64);
    fake_task_file_run(&b, 512, 512);
    let out = tmp.path().join("crate");
    let done = export_rust(&RustExport::new(vec![a.clone(), b.clone()], &out)).unwrap();
    assert_eq!(done.kernels[0].sizes_text(), "ROWS=64,COLS=64");
    let lib = std::fs::read_to_string(out.join("src/lib.rs")).unwrap();
    assert!(lib.contains("pub fn rowsoft(device: &Device, rows: i64, cols: i64, scale: f32, x: &[f32], y: &mut [f32]) -> Result<usize, Error>"), "{lib}");
    assert!(lib.contains("pub const ROWSOFT_SCALE: f32 = 2.0;"), "{lib}");
    assert!(lib.contains("pub static ROWSOFT_SIGNATURE: kf_runtime::Signature"));
    assert!(lib.contains("ArgSig::Scalar(0)") && lib.contains("ScalarArg::F32(scale)"));
    let test = std::fs::read_to_string(out.join("tests/reference.rs")).unwrap();
    assert!(
        test.contains("mod rowsoft {") && test.contains("/reference/rowsoft"),
        "{test}"
    );
    assert!(!test.contains("fn data("), "{test}");

    // The cases: 32x32 (the smallest tuned sizes halved to at most 1024 elements), its halved
    // alternatives (the task declares none), and the tuned 64x64; 512x512 is too large.
    let cases =
        crate::standalone::check::ReferenceCases::read(out.join("reference/rowsoft")).unwrap();
    let sizes: Vec<Vec<i64>> = cases.cases().iter().map(|c| c.sizes()).collect();
    assert_eq!(sizes[0], [16, 16]);
    assert!(
        sizes.contains(&vec![32, 32]) && sizes.contains(&vec![64, 64]),
        "{sizes:?}"
    );
    assert!(!sizes.contains(&vec![512, 512]), "{sizes:?}");
    assert_eq!(cases.task(), "rowsoft");
    let index = std::fs::read_to_string(out.join("reference/rowsoft/index.json")).unwrap();
    assert!(index.contains("\"reference\": \"rust softmax\""), "{index}");
    let case = cases.cases()[1];
    assert_eq!(case.scalar("scale").unwrap(), 2.0);
    let x: Vec<f32> = case.input("X").unwrap();
    assert_eq!(
        x.len() as i64,
        case.size("ROWS").unwrap() * case.size("COLS").unwrap()
    );
    // The reference's own outputs pass; one element off by more than the tolerance fails,
    // naming it; an untouched output is caught as unwritten.
    let y = crate::standalone::check::ReferenceCases::read(out.join("reference/rowsoft")).unwrap();
    let case = y.cases()[1];
    let path = out.join("reference/rowsoft/1/Y.expected.bin");
    let mut want = vec![0f32; x.len()];
    crate::runtime::from_bytes(&std::fs::read(path).unwrap(), &mut want);
    case.check("Y", &want).unwrap();
    let mut off = want.clone();
    off[5] += 1e-3;
    let e = case.check("Y", &off).unwrap_err().to_string();
    assert!(e.contains("element 5") && e.contains("atol 0.00001"), "{e}");
    let untouched: Vec<f32> = case.output("Y").unwrap();
    let e = case.check("Y", &untouched).unwrap_err().to_string();
    assert!(e.contains("never written"), "{e}");
    assert!(case.input::<i32>("X").is_err());

    // The Python module: the same signature, the same cases beside it.
    let py = tmp.path().join("py");
    crate::export_python(&crate::PythonExport::new(vec![a, b], &py)).unwrap();
    let module = std::fs::read_to_string(py.join("kf_kernels.py")).unwrap();
    assert!(
        module.contains("def rowsoft(rows, cols, scale, x, *, kernels=None):"),
        "{module}"
    );
    assert!(module.contains("ROWSOFT_SCALE = 2.0"), "{module}");
    assert!(module.contains("[(\"scale\", np.float32)]"), "{module}");
    assert!(py.join("reference/rowsoft/index.json").is_file());
    let test = std::fs::read_to_string(py.join("test_kf_kernels.py")).unwrap();
    assert!(test.contains("def test_rowsoft_the_dispatched_call_matches_the_reference"));
}

#[test]
fn task_file_signatures_keep_the_files_order_and_refuse_nothing_the_backend_passes() {
    let text = r#"
name = "mix"
args = ["h", "N", "n", "k"]
[sizes]
N = 8
[[buffer]]
name = "h"
dtype = "f16"
shape = ["N", "2"]
role = "inout"
[[buffer]]
name = "k"
dtype = "i32"
shape = ["N"]
role = "output"
[[scalar]]
name = "n"
dtype = "i32"
value = 3
[reference]
rust = "x"
"#;
    let file = kf_eval::task::file::TaskFile::parse(
        text,
        "mix.toml",
        kf_eval::task::file::TaskBase::Dir(".".into()),
    )
    .unwrap();
    let sig = crate::signature::Signature::from_task_file(&file).unwrap();
    use crate::signature::{Access, ArgSig, Dtype};
    assert_eq!(sig.buffers[0].len, "(N) * (2)");
    assert_eq!(sig.buffers[0].dtype, Dtype::F16);
    assert_eq!(sig.buffers[0].access, Access::InOut);
    assert_eq!(sig.scalars[0].dtype, Dtype::I32);
    assert_eq!(
        sig.args.to_vec(),
        [
            ArgSig::Buffer(0),
            ArgSig::Size("N".into()),
            ArgSig::Scalar(0),
            ArgSig::Buffer(1)
        ]
    );
    // The sizes, scalars and buffers get distinct Rust names (`n` is a size and a scalar).
    let names = crate::group::Params::of(&sig);
    assert_eq!(names.list(), "n, n_value, h, k");
    assert!(sig.to_rust().contains("Dtype::F16"));
}
