//! Manifest parsing and evaluation, including every malformed case the evaluator relies on.

use std::io::Write;

use indexmap::IndexMap;
use kf_core::{DeviceFacts, ParamValues};
use kf_manifest::{Manifest, ManifestError, Symbols};

const GOOD: &str = r#"
source = "k.cl"
entry = "gemm"
language = "opencl"
[params]
TS = [8, 16, 32]
WPT = [1, 2, 4]
[constraints]
rules = ["TS % WPT == 0", "TS * TS / WPT <= max_work_group_size"]
[launch]
global = ["M", "N / WPT"]
local = ["TS", "TS / WPT"]
"#;

fn sizes() -> IndexMap<String, i64> {
    [
        ("M".to_string(), 256),
        ("N".to_string(), 192),
        ("K".to_string(), 128),
    ]
    .into_iter()
    .collect()
}

fn device() -> DeviceFacts {
    let mut d = DeviceFacts::unknown("test");
    d.max_work_group_size = 256;
    d
}

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(text, "test.toml", None)
}

/// The `GOOD` manifest with tile size `ts` and work per thread `wpt`: the manifest, its
/// resolved parameters, and their symbols at [`sizes`] on [`device`] (what constraint and
/// launch checks read).
fn good_with(ts: i64, wpt: i64) -> (Manifest, ParamValues, Symbols) {
    let m = parse(GOOD).unwrap();
    let params = m
        .resolve_params(&ParamValues::new().with("TS", ts).with("WPT", wpt))
        .unwrap();
    let s = m.symbols(&params, &sizes(), &device());
    (m, params, s)
}

#[test]
fn good_manifest_gives_launch_geometry() {
    let (m, params, s) = good_with(16, 2);
    m.check_constraints(&params, &s).unwrap();
    let r = m.launch_range(&s).unwrap();
    assert_eq!(r.global, vec![256, 96]);
    assert_eq!(r.local, Some(vec![16, 8]));
}

#[test]
fn defaults_fill_missing_params_and_undeclared_or_disallowed_are_errors() {
    let m = parse(GOOD).unwrap();
    let p = m.resolve_params(&ParamValues::new()).unwrap();
    assert_eq!(p.to_string(), "TS=8 WPT=1");
    let e = m
        .resolve_params(&ParamValues::new().with("TS", 12i64))
        .unwrap_err();
    assert!(
        e.to_string().contains("not one of the allowed values"),
        "{e}"
    );
    let e = m
        .resolve_params(&ParamValues::new().with("XX", 1i64))
        .unwrap_err();
    assert!(e.to_string().contains("not declared"), "{e}");
}

#[test]
fn constraint_violation_names_the_rule() {
    let (m, params, s) = good_with(32, 1);
    let e = m.check_constraints(&params, &s).unwrap_err();
    assert!(
        matches!(&e, ManifestError::ConstraintViolated { rule, .. } if rule.contains("max_work_group_size")),
        "{e}"
    );
}

#[test]
fn unknown_symbol_is_typed_and_named() {
    let m = parse(&GOOD.replace("\"N / WPT\"", "\"P / WPT\"")).unwrap();
    let params = m.default_params();
    let s = m.symbols(&params, &sizes(), &device());
    match m.launch_range(&s).unwrap_err() {
        ManifestError::UnknownSymbol {
            file,
            field,
            expr,
            symbol,
        } => {
            assert_eq!(file, "test.toml");
            assert_eq!(field, "launch.global[1]");
            assert_eq!(expr, "P / WPT");
            assert_eq!(symbol, "P");
        }
        other => panic!("expected UnknownSymbol, got {other}"),
    }
}

#[test]
fn division_by_zero_is_typed() {
    let m = parse(&GOOD.replace("\"N / WPT\"", "\"N / (WPT - 1)\"")).unwrap();
    let s = m.symbols(&m.default_params(), &sizes(), &device());
    let e = m.launch_range(&s).unwrap_err();
    assert!(matches!(e, ManifestError::DivisionByZero { .. }), "{e}");
    let m = parse(&GOOD.replace("\"TS % WPT == 0\"", "\"TS % (WPT - 1) == 0\"")).unwrap();
    let s = m.symbols(&m.default_params(), &sizes(), &device());
    let e = m.violated_constraint(&s).unwrap_err();
    assert!(matches!(e, ManifestError::DivisionByZero { .. }), "{e}");
}

#[test]
fn non_positive_or_fractional_launch_size_is_typed() {
    let m = parse(&GOOD.replace("\"N / WPT\"", "\"N - 1000\"")).unwrap();
    let s = m.symbols(&m.default_params(), &sizes(), &device());
    assert!(matches!(
        m.launch_range(&s).unwrap_err(),
        ManifestError::NotPositive { value: -808, .. }
    ));
    let m = parse(&GOOD.replace("\"N / WPT\"", "\"N / 2.5\"")).unwrap();
    let s = m.symbols(&m.default_params(), &sizes(), &device());
    assert!(matches!(
        m.launch_range(&s).unwrap_err(),
        ManifestError::WrongType { .. }
    ));
    let m = parse(&GOOD.replace("\"N / WPT\"", "\"N > 3\"")).unwrap();
    let s = m.symbols(&m.default_params(), &sizes(), &device());
    assert!(matches!(
        m.launch_range(&s).unwrap_err(),
        ManifestError::WrongType { .. }
    ));
}

#[test]
fn local_not_dividing_global_is_an_error() {
    let m = parse(&GOOD.replace("\"M\", \"N / WPT\"", "\"M + 1\", \"N / WPT\"")).unwrap();
    let s = m.symbols(&m.default_params(), &sizes(), &device());
    let e = m.launch_range(&s).unwrap_err();
    assert!(e.to_string().contains("does not divide"), "{e}");
}

#[test]
fn malformed_toml_and_shapes_are_typed() {
    let kind = |e: &ManifestError| match e {
        ManifestError::Toml { .. } => "Toml",
        ManifestError::Invalid { .. } => "Invalid",
        ManifestError::Expression { .. } => "Expression",
        _ => "another error",
    };
    let cases = [
        ("entry = ".to_string(), "Toml"),
        // No launch at all: neither `[launch]` nor `[[kernels]]`.
        (
            "entry = \"k\"\nlanguage = \"opencl\"".to_string(),
            "Invalid",
        ),
        (
            GOOD.replace("language = \"opencl\"", "language = \"fortran\""),
            "Invalid",
        ),
        (GOOD.replace("TS = [8, 16, 32]", "TS = []"), "Invalid"),
        (
            GOOD.replace("local = [\"TS\", \"TS / WPT\"]", "local = [\"TS\"]"),
            "Invalid",
        ),
        (
            GOOD.replace("\"TS % WPT == 0\"", "\"(TS % WPT == 0\""),
            "Expression",
        ),
        (format!("{GOOD}\nunknown_key = 1"), "Toml"),
        (
            GOOD.replace("entry = \"gemm\"", "entry = \"ge mm\""),
            "Invalid",
        ),
    ];
    for (text, want) in &cases {
        match parse(text) {
            Err(e) => assert_eq!(kind(&e), *want, "{text}: {e:?}"),
            Ok(_) => panic!("{text} parsed"),
        }
    }
}

#[test]
fn load_reads_source_and_reports_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.toml");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(GOOD.as_bytes())
        .unwrap();
    match Manifest::load(&path) {
        Err(ManifestError::Io { path: p, .. }) => assert!(p.ends_with("k.cl")),
        other => panic!("expected a missing source file, got {other:?}"),
    }
    std::fs::write(dir.path().join("k.cl"), "__kernel void gemm() {}").unwrap();
    let (m, k) = Manifest::load(&path).unwrap();
    assert_eq!(k.entry, "gemm");
    assert_eq!(k.params.len(), 2);
    assert_eq!(Manifest::from_kernel(&k).unwrap().params, m.params);
    assert!(matches!(
        Manifest::load(&dir.path().join("absent.toml")),
        Err(ManifestError::Io { .. })
    ));
}

#[test]
fn symbols_include_device_facts() {
    let s = Symbols::new().with_device(&device());
    assert!(s.contains("max_work_group_size"));
    assert!(s.contains("local_mem_bytes"));
    assert!(!s.contains("M"));
}

/// `GOOD` in `language` with the given `[[flags]]` entries appended.
fn with_flags(language: &str, flags: &str) -> String {
    GOOD.replace(
        "language = \"opencl\"",
        &format!("language = \"{language}\""),
    ) + flags
}

#[test]
fn flags_apply_by_parameter_value_in_order_and_once() {
    let m = parse(&with_flags(
        "opencl",
        "[[flags]]\nadd = [\"-cl-mad-enable\"]\n\
         [[flags]]\nwhen = \"WPT == 4\"\nadd = [\"-cl-fast-relaxed-math\", \"-cl-mad-enable\"]\n",
    ))
    .unwrap();
    let at = |wpt: i64| {
        let p = m
            .resolve_params(&ParamValues::new().with("WPT", wpt))
            .unwrap();
        m.compile_flags(&p).unwrap()
    };
    assert_eq!(at(1), vec!["-cl-mad-enable"]);
    assert_eq!(at(4), vec!["-cl-mad-enable", "-cl-fast-relaxed-math"]);
    // A manifest without [[flags]] asks for none.
    let plain = parse(GOOD).unwrap();
    assert!(plain
        .compile_flags(&plain.default_params())
        .unwrap()
        .is_empty());
}

#[test]
fn only_floating_point_mode_flags_of_the_language_are_accepted() {
    // Flags that could change what the evaluator's checks read (-D), read host files (-I,
    // --include), or are another language's are refused at parse time, naming the entry.
    for (language, flag) in [
        ("opencl", "-DN=1"),
        ("opencl", "-I/"),
        ("opencl", "-cl-opt-disable"),
        ("opencl", "--use_fast_math"),
        ("cuda", "--include=/etc/passwd"),
        ("cuda", "-cl-fast-relaxed-math"),
        ("sycl", "-ffast-math"),
    ] {
        let text = with_flags(language, &format!("[[flags]]\nadd = [\"{flag}\"]\n"));
        match parse(&text) {
            Err(ManifestError::Invalid { field, message, .. }) => {
                assert_eq!(field, "flags[0]", "{language} {flag}");
                assert!(message.contains(flag), "{message}");
            }
            other => panic!("{language} {flag}: expected a refusal, got {other:?}"),
        }
    }
    let cuda = parse(&with_flags(
        "cuda",
        "[[flags]]\nadd = [\"--use_fast_math\"]\n",
    ))
    .unwrap();
    assert_eq!(
        cuda.compile_flags(&cuda.default_params()).unwrap(),
        vec!["--use_fast_math"]
    );
    assert!(matches!(
        parse(&with_flags("opencl", "[[flags]]\nadd = []\n")),
        Err(ManifestError::Invalid { .. })
    ));
}

#[test]
fn flag_conditions_name_parameters_only() {
    // One compiled kernel runs at several sizes, so a condition over a size is an error.
    let m = parse(&with_flags(
        "opencl",
        "[[flags]]\nwhen = \"M > 128\"\nadd = [\"-cl-mad-enable\"]\n",
    ))
    .unwrap();
    match m.compile_flags(&m.default_params()) {
        Err(ManifestError::UnknownSymbol { field, symbol, .. }) => {
            assert_eq!(field, "flags[0].when");
            assert_eq!(symbol, "M");
        }
        other => panic!("expected an unknown symbol, got {other:?}"),
    }
}

const SEQUENCE: &str = r#"
entry = "row_stats"
language = "opencl"
[params]
WG = [64, 128]
[[scratch]]
name = "stats"
dtype = "f32"
elements = "2 * ROWS"
[[kernels]]
entry = "row_stats"
writes = ["stats"]
launch = { global = ["ROWS * WG"], local = ["WG"] }
[[kernels]]
entry = "normalise"
writes = ["Y"]
launch = { global = ["ROWS", "COLS"] }
"#;

#[test]
fn a_sequence_gives_every_kernels_launch_and_its_scratch_sizes() {
    let m = parse(SEQUENCE).unwrap();
    assert!(m.is_sequence());
    assert_eq!(m.sequence.len(), 2);
    assert_eq!(m.sequence[1].writes, vec!["Y".to_string()]);
    let params = m
        .resolve_params(&ParamValues::new().with("WG", 128i64))
        .unwrap();
    let (rows, cols) = ("ROWS".to_string(), "COLS".to_string());
    let s = Symbols::new()
        .with_params(&params)
        .with_sizes([(&rows, &8), (&cols, &100)]);
    let ranges = m.launch_ranges(&s).unwrap();
    let entries: Vec<&str> = ranges.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(entries, ["row_stats", "normalise"]);
    assert_eq!(ranges[0].1.global, vec![1024]);
    assert_eq!(ranges[0].1.local, Some(vec![128]));
    assert_eq!(ranges[1].1.global, vec![8, 100]);
    // The main kernel's launch is the manifest's own.
    assert_eq!(m.launch_range(&s).unwrap(), ranges[0].1);
    assert_eq!(m.scratch[0].elements_at(&s, &m.file).unwrap(), 16);
    // A manifest with [launch] is a sequence of one.
    let one = parse(GOOD).unwrap();
    assert!(!one.is_sequence());
}

#[test]
fn a_malformed_sequence_is_refused_naming_the_field() {
    let field = |text: &str| match parse(text) {
        Err(ManifestError::Invalid { field, .. }) => field,
        other => panic!("{text}: expected Invalid, got {other:?}"),
    };
    let with_launch = format!("{SEQUENCE}[launch]\nglobal = [\"ROWS\"]\n");
    assert_eq!(field(&with_launch), "launch");
    // Each change to the sequence, and the field its error names.
    let broken = [
        (
            "entry = \"row_stats\"\nlanguage",
            "entry = \"other\"\nlanguage",
            "entry",
        ),
        ("writes = [\"stats\"]", "writes = [\"Y\"]", "scratch"),
        ("writes = [\"Y\"]", "writes = []", "kernels[1].writes"),
        (
            "writes = [\"Y\"]",
            "writes = [\"Y\", \"Y\"]",
            "kernels[1].writes[1]",
        ),
        ("dtype = \"f32\"", "dtype = \"f64\"", "scratch[0].dtype"),
        (
            "local = [\"WG\"]",
            "local = [\"WG\", 1]",
            "kernels[0].launch.local",
        ),
    ];
    for (from, to, named) in broken {
        assert_eq!(field(&SEQUENCE.replace(from, to)), named, "{from} -> {to}");
    }
    let scratch_alone =
        format!("{GOOD}\n[[scratch]]\nname = \"s\"\ndtype = \"f32\"\nelements = \"M\"\n");
    assert_eq!(field(&scratch_alone), "scratch");
    // A scratch size that is not positive at some sizes is an error when evaluated.
    let m = parse(&SEQUENCE.replace("elements = \"2 * ROWS\"", "elements = \"ROWS - 8\"")).unwrap();
    let rows = "ROWS".to_string();
    let s = Symbols::new().with_sizes([(&rows, &8)]);
    assert!(matches!(
        m.scratch[0].elements_at(&s, &m.file),
        Err(ManifestError::NotPositive { value: 0, .. })
    ));
}
