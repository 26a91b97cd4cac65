//! The standalone run time against the KernelFoundry code it stands in for: the evaluator's
//! comparison, kf-manifest's expressions and launch geometry, kf-backend-opencl's device facts
//! and launches.

use kf_core::{Backend as _, DeviceFacts as CoreFacts, ParamValues, Tolerance as CoreTolerance};
use kf_eval::task::HostBuffer;
use kf_eval::verify::{compare_buffers_with, Verdict as EvalVerdict};
use kf_manifest::Manifest;

use super::check::{compare, Tolerance, Verdict};
use super::runtime::{Configuration, Device, Error, HostData, KernelCache, Param, Table};
use crate::signature::GEMM;

fn same_verdict(got: &[f32], want: &[f32], allowance: Option<&[f64]>) {
    let core = CoreTolerance::fp32();
    let tol = Tolerance {
        atol: core.atol,
        rtol: core.rtol,
        relative_threshold: core.relative_threshold,
        min_fraction_within: core.min_fraction_within,
        min_cosine: core.min_cosine,
    };
    let ours = compare(got, want, &tol, allowance);
    let host = |v: &[f32]| HostBuffer::F32(v.to_vec());
    let theirs = compare_buffers_with(&host(got), &host(want), &core, allowance);
    let agree = match (ours, &theirs) {
        (Verdict::Close(a), EvalVerdict::Close(b))
        | (Verdict::Mismatch(a), EvalVerdict::Mismatch(b)) => {
            a.first_mismatch.map(|i| i as u64) == b.first_mismatch
                && a.fraction_within == b.fraction_within
                && a.cosine == b.cosine
        }
        (
            Verdict::Unwritten {
                count,
                first,
                total,
            },
            EvalVerdict::Unwritten {
                count: c,
                first: f,
                total: t,
            },
        ) => count == *c && first == *f && total == *t,
        (Verdict::NonFinite { count, first }, EvalVerdict::NonFinite { count: c, first: f }) => {
            count == *c && first == *f
        }
        _ => false,
    };
    assert!(agree, "{ours:?} against the evaluator's {theirs:?}");
}

#[test]
fn the_comparison_is_the_evaluators() {
    let want: Vec<f32> = (0..200).map(|i| (i as f32 * 0.37).sin()).collect();
    same_verdict(&want, &want, None);
    let mut off = want.clone();
    off[7] += 1e-2;
    same_verdict(&off, &want, None);
    same_verdict(&off, &want, Some(&[1.0; 200]));
    let mut unwritten = want.clone();
    unwritten[3] = <f32 as super::runtime::Element>::POISON;
    unwritten[9] = <f32 as super::runtime::Element>::POISON;
    same_verdict(&unwritten, &want, None);
    let mut nan = want.clone();
    nan[4] = f32::INFINITY;
    same_verdict(&nan, &want, None);
    let scaled: Vec<f32> = want.iter().map(|v| v * 1.5).collect();
    same_verdict(&scaled, &want, None);
    same_verdict(&[], &[], None);
    // The element types' poison values are the evaluator's.
    let poison = HostBuffer::poison(kf_eval::task::file::Dtype::F16, 1).to_bytes();
    let ours = super::runtime::to_bytes(&[<half::f16 as super::runtime::Element>::POISON]);
    assert_eq!(poison, ours);
    let poison = HostBuffer::poison(kf_eval::task::file::Dtype::I32, 1).to_bytes();
    assert_eq!(
        poison,
        super::runtime::to_bytes(&[<i32 as super::runtime::Element>::POISON])
    );
}

const MANIFEST: &str = r#"entry = "k"
language = "opencl"
[params]
WPT = [2, 4]
TS = [8, 16]
FAST = [true, false]
[constraints]
rules = ["N % (TS * WPT) == 0", "TS * TS <= max_work_group_size", "FAST || N > 7"]
[launch]
global = ["N / WPT", "M"]
local = ["TS / WPT * 2", "TS"]
"#;

static K: Configuration = Configuration {
    name: "k_0",
    run: "r",
    device: "Test CPU",
    driver: None,
    tuned_sizes: &[("M", 64), ("N", 64)],
    params: &[
        ("WPT", Param::Int(4)),
        ("TS", Param::Int(16)),
        ("FAST", Param::Bool(true)),
    ],
    build_options: "",
    entry: "k",
    constraints: &[
        "N % (TS * WPT) == 0",
        "TS * TS <= max_work_group_size",
        "FAST || N > 7",
    ],
    global: &["N / WPT", "M"],
    local: Some(&["TS / WPT * 2", "TS"]),
    source: "",
    gflops: None,
};

#[test]
fn constraints_and_geometry_evaluate_as_kf_manifest_does() {
    let manifest = Manifest::parse(MANIFEST, "k.toml", None).unwrap();
    let params = manifest
        .resolve_params(&ParamValues::new().with("WPT", 4i64).with("TS", 16i64))
        .unwrap();
    for wg in [64u64, 256, 1024] {
        let mut core = CoreFacts::unknown("Test CPU");
        core.max_work_group_size = wg;
        let facts = super::runtime::DeviceFacts::from(&core);
        for (m, n) in [(64, 64), (16, 128), (8, 8), (64, 100), (3, 192)] {
            let sizes = indexmap::IndexMap::from([("M".to_owned(), m), ("N".to_owned(), n)]);
            let symbols = manifest.symbols(&params, &sizes, &core);
            let theirs = manifest
                .check_constraints(&params, &symbols)
                .map_err(|e| e.to_string())
                .and_then(|()| manifest.launch_range(&symbols).map_err(|e| e.to_string()));
            let ours = K.geometry(&facts, &[("M", m), ("N", n)]);
            match (&ours, &theirs) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.global, b.global);
                    assert_eq!(a.local, b.local);
                }
                (Err(a), Err(b)) => {
                    // The same rule fails.
                    if let Error::ConstraintViolated { rule, .. } = a {
                        assert!(b.contains(rule.as_str()), "{a} / {b}");
                    }
                }
                _ => panic!("at M={m}, N={n}, wg={wg}: {ours:?} against kf-manifest's {theirs:?}"),
            }
        }
    }
    // An unknown symbol is an error naming it, not a panic.
    let bad = Configuration {
        constraints: &["NOPE > 1"],
        ..K
    };
    let e = bad
        .geometry(
            &super::runtime::DeviceFacts::new("x", "y"),
            &[("M", 1), ("N", 1)],
        )
        .unwrap_err();
    assert!(e.to_string().contains("NOPE"), "{e}");
}

#[test]
fn setup_configs_and_case_indexes_are_read_and_malformed_json_is_an_error() {
    use super::runtime::discovery::RuntimeConfig;
    let text = r#"{"schema": 1, "loader": "/x/libOpenCL.so.1", "icd": "/x/lib\u0069ntelocl.so",
        "preload": ["/x/a.so", "/x/b \"q\".so"], "platforms": [{"devices": [{"n": -1.5e3}]}]}"#;
    let config: RuntimeConfig = serde_json::from_str(text).unwrap();
    assert_eq!(
        config.icd.as_deref(),
        Some(std::path::Path::new("/x/libintelocl.so"))
    );
    assert_eq!(config.preload[1], "/x/b \"q\".so");
    for bad in ["{\"icd\": }", "[1, 2", "{} x", "{\"preload\": 3}"] {
        assert!(serde_json::from_str::<RuntimeConfig>(bad).is_err(), "{bad}");
    }
    // A malformed index.json is Error::Reference naming the file, not a panic.
    let dir = tempfile::tempdir().unwrap();
    for bad in ["{\"task\": \"t\", \"cases\": [", "{\"task\": \"t\"}", "[]"] {
        std::fs::write(dir.path().join("index.json"), bad).unwrap();
        let e = super::check::ReferenceCases::read(dir.path()).unwrap_err();
        assert!(matches!(e, Error::Reference { .. }), "{bad}: {e}");
        assert!(e.to_string().contains("index.json"), "{e}");
    }
    let index = r#"{"task": "t", "cases": [{"sizes": {"ROWS": 4, "COLS": 2}, "buffers": []}]}"#;
    std::fs::write(dir.path().join("index.json"), index).unwrap();
    let cases = super::check::ReferenceCases::read(dir.path()).unwrap();
    assert_eq!(cases.task(), "t");
    // The index's order, not sorted by name.
    assert_eq!(cases.cases()[0].sizes(), [4, 2]);
    assert_eq!(cases.cases()[0].describe(), "case 0 (ROWS=4,COLS=2)");
}

/// The device under kf-backend-opencl's skip rule.
fn device_or_skip() -> Option<(Device, kf_backend_opencl::OpenClBackend)> {
    let backend = kf_backend_opencl::testing::backend_or_skip()?;
    let device = Device::open().unwrap_or_else(|e| {
        panic!(
            "kf-backend-opencl opened {} but the run time: {e}",
            backend.device().name
        )
    });
    Some((device, backend))
}

#[test]
fn the_device_and_its_facts_are_the_opencl_backends() {
    let Some((device, backend)) = device_or_skip() else {
        return;
    };
    let theirs = super::runtime::DeviceFacts::from(backend.device());
    assert_eq!(device.name(), theirs.name);
    assert_eq!(device.facts().driver_version, theirs.driver_version);
    for (k, v) in &theirs.symbols {
        assert_eq!(device.facts().symbol(k), Some(*v), "{k}");
    }
}

const ADD: &str = "__kernel void add(const int N, __global const float* X, __global float* Y) {\n\
    int i = get_global_id(0); if (i < N) Y[i] = X[i] + (float)OFFSET;\n}\n";

static ADD_SIG: crate::signature::Signature = crate::signature::Signature {
    task: std::borrow::Cow::Borrowed("add"),
    sizes: std::borrow::Cow::Borrowed(&[std::borrow::Cow::Borrowed("N")]),
    scalars: std::borrow::Cow::Borrowed(&[]),
    buffers: std::borrow::Cow::Borrowed(&[
        crate::signature::BufferSig {
            name: std::borrow::Cow::Borrowed("X"),
            dtype: crate::signature::Dtype::F32,
            len: std::borrow::Cow::Borrowed("N"),
            access: crate::signature::Access::Input,
        },
        crate::signature::BufferSig {
            name: std::borrow::Cow::Borrowed("Y"),
            dtype: crate::signature::Dtype::F32,
            len: std::borrow::Cow::Borrowed("N"),
            access: crate::signature::Access::Output,
        },
    ]),
    args: std::borrow::Cow::Borrowed(&[
        crate::signature::ArgSig::Size(std::borrow::Cow::Borrowed("N")),
        crate::signature::ArgSig::Buffer(0),
        crate::signature::ArgSig::Buffer(1),
    ]),
};

static ADD_CONFIGS: [Configuration; 1] = [Configuration {
    name: "add_0",
    run: "r",
    device: "any",
    driver: None,
    tuned_sizes: &[("N", 64)],
    params: &[("OFFSET", Param::Int(3))],
    build_options: "-D OFFSET=3",
    entry: "add",
    constraints: &["N % 16 == 0"],
    global: &["N"],
    local: Some(&["16"]),
    source: ADD,
    gflops: None,
}];

static ADD_TABLE: Table = Table {
    signature: &ADD_SIG,
    configurations: &ADD_CONFIGS,
};

#[test]
fn a_launch_builds_with_the_defines_runs_and_reads_back() {
    let Some((device, _backend)) = device_or_skip() else {
        return;
    };
    let cache = KernelCache::new();
    let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let xb = super::runtime::to_bytes(&x);
    let mut yb = vec![0u8; 64 * 4];
    let mut data = [HostData::In(&xb), HostData::Out(&mut yb)];
    ADD_TABLE
        .launch(&device, &cache, 0, &[64], &[], &mut data)
        .unwrap();
    let mut y = vec![0f32; 64];
    super::runtime::from_bytes(&yb, &mut y);
    assert!(y.iter().zip(&x).all(|(y, x)| *y == x + 3.0), "{y:?}");
    assert_eq!(cache.len(), 1);
    // Arguments that do not fit: typed errors naming what is wrong.
    let mut short = vec![0u8; 8];
    let mut data = [HostData::In(&xb), HostData::Out(&mut short)];
    let e = ADD_TABLE
        .launch(&device, &cache, 0, &[64], &[], &mut data)
        .unwrap_err();
    assert!(
        matches!(e, Error::BadCall { .. }) && e.to_string().contains("buffer Y"),
        "{e}"
    );
    let mut data = [HostData::In(&xb), HostData::Out(&mut yb)];
    let e = ADD_TABLE
        .launch(&device, &cache, 0, &[60], &[], &mut data)
        .unwrap_err();
    assert!(e.to_string().contains("buffer X"), "{e}");
    let e = ADD_TABLE.choose(device.facts(), &[60]).unwrap_err();
    assert!(e.to_string().contains("N % 16 == 0"), "{e}");
    let e = ADD_TABLE
        .launch(&device, &cache, 3, &[64], &[], &mut [])
        .unwrap_err();
    assert!(e.to_string().contains("buffers given"), "{e}");
    // The gemm table type checks too.
    assert_eq!(GEMM.size_names(), ["M", "N", "K"]);
}

#[test]
fn the_device_is_selected_as_kf_backend_opencls_selector_does() {
    use super::runtime::device::{select, Listed};
    let pocl = "Portable Computing Language";
    let listed = [
        Listed::fake((0, pocl), (0, "pthread-cpu"), 2),
        Listed::fake((1, "Intel(R) OpenCL"), (0, "AMD EPYC"), 2),
        Listed::fake((2, "NVIDIA CUDA"), (0, "H100"), 0),
        Listed::fake((2, "NVIDIA CUDA"), (1, "H100 second"), 0),
    ];
    let pick = |w: &str| select(&listed, w).map(Listed::index);
    // A GPU first, listing order breaking ties; the CPU that is not PoCL before PoCL's.
    assert_eq!(pick(""), Some("2:0".into()));
    assert_eq!(pick("auto"), Some("2:0".into()));
    assert_eq!(pick("cpu"), Some("1:0".into()));
    assert_eq!(pick("accelerator"), None);
    assert_eq!(pick("0:0"), Some("0:0".into()));
    assert_eq!(pick("2:1"), Some("2:1".into()));
    assert_eq!(pick("9:9"), None);
    // A name: equal first, else a part of the name or the platform's.
    assert_eq!(pick("H100 second"), Some("2:1".into()));
    assert_eq!(pick("epyc"), Some("1:0".into()));
    assert_eq!(pick("portable"), Some("0:0".into()));
    assert_eq!(pick("nothing"), None);
}
