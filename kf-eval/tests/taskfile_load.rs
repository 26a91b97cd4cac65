//! Task-file loading and validation: every malformed case gives a typed error that names the
//! file and the field, and never panics.

use std::path::Path;

use kf_eval::task::file::{Dtype, TaskFile, TaskFileError, TaskSpec};

const GOOD: &str = r#"
name = "scaled_swish"
description = "y[r][c] = x[r][c] * sigmoid(alpha * x[r][c]) + bias[c]"
args = ["ROWS", "COLS", "alpha", "x", "bias", "y"]
[sizes]
ROWS = 512
COLS = 384
[[buffer]]
name = "x"
dtype = "f32"
shape = ["ROWS", "COLS"]
role = "input"
init = "normal"
[[buffer]]
name = "bias"
dtype = "f32"
shape = ["COLS"]
role = "input"
init = ["uniform(-1, 1)", "int(-3, 3)"]
[[buffer]]
name = "y"
dtype = "f32"
shape = ["ROWS", "COLS"]
role = "output"
[[scalar]]
name = "alpha"
dtype = "f32"
value = 1.5
[reference]
python = "ref.py"
[tolerance]
atol = 1e-4
rtol = 1e-4
[work]
flops = "4 * ROWS * COLS"
bytes = "4 * (2 * ROWS * COLS + COLS)"
[[alternative_sizes]]
ROWS = 100
"#;

/// Writes the task file (and a reference script) into a fresh folder and loads it.
fn load(text: &str) -> Result<TaskFile, TaskFileError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ref.py"),
        "def reference(i, s, c):\n    return {}\n",
    )
    .unwrap();
    let path = dir.path().join("task.toml");
    std::fs::write(&path, text).unwrap();
    TaskFile::load(&path)
}

fn error(text: &str) -> String {
    match load(text) {
        Ok(_) => panic!("accepted a bad task file:\n{text}"),
        Err(e) => {
            let s = e.to_string();
            assert!(s.contains("task.toml"), "error does not name the file: {s}");
            s
        }
    }
}

#[test]
fn the_issue_example_loads_with_shapes_work_and_args() {
    let t = load(GOOD).unwrap();
    assert_eq!(t.spec.buffers[2].dtype, Dtype::F32);
    assert_eq!(
        t.buffer_shapes(&t.spec.sizes).unwrap(),
        vec![vec![512, 384], vec![384], vec![512, 384]]
    );
    let sizes = t
        .complete_sizes(&kf_eval::task::parse_sizes("COLS=10").unwrap())
        .unwrap();
    assert_eq!(t.buffer_elements(&sizes).unwrap(), vec![5120, 10, 5120]);
    let w = t.work(&sizes).unwrap();
    assert_eq!(w.flops, 4.0 * 5120.0);
    assert_eq!(t.inits(1).len(), 2);
    assert_eq!(t.content_hash().len(), 64);
}

#[test]
fn a_spec_round_trips_through_toml() {
    let t = load(GOOD).unwrap();
    let text = t.spec.to_toml().unwrap();
    assert_eq!(TaskSpec::from_toml(&text).unwrap(), t.spec);
}

#[test]
fn unknown_dtype_is_rejected_with_its_line() {
    let e = error(&GOOD.replacen("dtype = \"f32\"", "dtype = \"f64\"", 1));
    assert!(e.contains("f64") && e.contains("dtype"), "{e}");
}

#[test]
fn shape_over_an_unknown_size_names_the_buffer_field() {
    let e = error(&GOOD.replace("shape = [\"COLS\"]", "shape = [\"WIDTH\"]"));
    assert!(
        e.contains("buffer[1].shape[0]") && e.contains("WIDTH"),
        "{e}"
    );
}

#[test]
fn args_naming_a_missing_buffer_are_rejected() {
    let e = error(&GOOD.replace("\"bias\", \"y\"]", "\"bais\", \"y\"]"));
    assert!(e.contains("args[4]") && e.contains("bais"), "{e}");
    let e = error(&GOOD.replace("\"bias\", \"y\"]", "\"y\"]"));
    assert!(e.contains("`bias` is not passed"), "{e}");
}

#[test]
fn zero_or_negative_element_counts_are_rejected() {
    let e = error(&GOOD.replace("shape = [\"COLS\"]", "shape = [\"COLS - 384\"]"));
    assert!(
        e.contains("buffer[1].shape[0]") && e.contains("positive"),
        "{e}"
    );
    let e = error(&GOOD.replace("COLS = 384", "COLS = -4"));
    assert!(e.contains("sizes.COLS"), "{e}");
    let e = error(&GOOD.replace("ROWS = 100", "ROWS = 0"));
    assert!(e.contains("alternative_sizes[0].ROWS"), "{e}");
}

#[test]
fn absurd_sizes_are_refused_before_allocating() {
    let e = error(&GOOD.replace("ROWS = 512", "ROWS = 2000000000"));
    assert!(e.contains("limit"), "{e}");
}

#[test]
fn a_missing_reference_file_names_the_field() {
    let e = error(&GOOD.replace("ref.py", "missing_ref.py"));
    assert!(
        e.contains("reference.python") && e.contains("missing_ref.py"),
        "{e}"
    );
    let e = error(&GOOD.replace("[reference]\npython = \"ref.py\"", "[reference]"));
    assert!(e.contains("reference"), "{e}");
}

#[test]
fn other_malformed_fields_are_rejected() {
    // A misspelt key.
    let e = error(&GOOD.replace("role = \"output\"", "role = \"output\"\nshpe = [1]"));
    assert!(e.contains("shpe"), "{e}");
    // A bad distribution.
    let e = error(&GOOD.replace("init = \"normal\"", "init = \"gauss(0, 1)\""));
    assert!(e.contains("buffer[0].init"), "{e}");
    // An f16 scalar.
    let e = error(&GOOD.replace("dtype = \"f32\"\nvalue", "dtype = \"f16\"\nvalue"));
    assert!(e.contains("scalar[0].dtype"), "{e}");
    // A duplicate name.
    let e = error(&GOOD.replace("name = \"bias\"", "name = \"x\""));
    assert!(
        e.contains("buffer[1].name") && e.contains("already declared"),
        "{e}"
    );
    // Nothing to check.
    let e = error(&GOOD.replace("role = \"output\"", "role = \"input\""));
    assert!(e.contains("output"), "{e}");
    // A negative tolerance.
    let e = error(&GOOD.replace("atol = 1e-4", "atol = -1.0"));
    assert!(e.contains("tolerance.atol"), "{e}");
    // Work over an unknown size.
    let e = error(&GOOD.replace("4 * ROWS * COLS\"", "4 * R * COLS\""));
    assert!(e.contains("work.flops"), "{e}");
    // Not TOML at all.
    let e = error("name = ");
    assert!(e.contains("invalid task file"), "{e}");
}

#[test]
fn a_missing_task_file_is_an_io_error() {
    let e = TaskFile::load(Path::new("/nonexistent/task.toml")).unwrap_err();
    assert!(matches!(e, TaskFileError::Io { .. }), "{e}");
}

/// A task file without `[work]` still reports GB/s and a bandwidth roofline: its work is the
/// least traffic any kernel has, every input read and every output written once.
#[test]
fn without_work_the_bytes_are_each_buffer_once() {
    use kf_eval::task::KernelTask;
    let text = GOOD.replace(
        "[work]\nflops = \"4 * ROWS * COLS\"\nbytes = \"4 * (2 * ROWS * COLS + COLS)\"\n",
        "",
    );
    assert!(!text.contains("[work]"));
    let task =
        kf_eval::task::file::FileTask::new(load(&text).unwrap(), &Default::default()).unwrap();
    let work = task.describe().work;
    assert_eq!(work.flops, 0.0);
    assert_eq!(work.bytes, 4.0 * (2.0 * 512.0 * 384.0 + 384.0));
    // Declared work wins.
    let declared =
        kf_eval::task::file::FileTask::new(load(GOOD).unwrap(), &Default::default()).unwrap();
    assert_eq!(declared.describe().work.flops, 4.0 * 512.0 * 384.0);
}

#[test]
fn accumulates_is_an_expression_on_float_outputs_only() {
    let on_output = GOOD.replace(
        "shape = [\"ROWS\", \"COLS\"]\nrole = \"output\"",
        "shape = [\"ROWS\", \"COLS\"]\nrole = \"output\"\naccumulates = \"COLS + 1\"",
    );
    let task = load(&on_output).unwrap();
    let lengths = task.accumulation_lengths(&task.spec.sizes).unwrap();
    assert_eq!(lengths, vec![None, None, Some(385)]);
    let on_input = GOOD.replace(
        "role = \"input\"\ninit = \"normal\"",
        "role = \"input\"\ninit = \"normal\"\naccumulates = \"COLS\"",
    );
    let err = load(&on_input).unwrap_err().to_string();
    assert!(
        err.contains("buffer[0].accumulates") && err.contains("outputs"),
        "{err}"
    );
    let unknown = on_output.replace("COLS + 1", "WIDTH");
    let err = load(&unknown).unwrap_err().to_string();
    assert!(err.contains("`WIDTH`"), "{err}");
}

/// `int(lo, hi)` bounds may be expressions over the sizes: class labels below `num_classes`
/// follow the size at every input set's sizes, a bound that is not a size is refused at load,
/// and sizes that reverse the bounds are refused where the shapes are checked (so the
/// evaluator's halved input sets skip them).
#[test]
fn integer_bounds_that_are_size_expressions_follow_the_sizes() {
    let labels = GOOD.replace("[sizes]\n", "[sizes]\nC = 36\n").replace(
        "init = [\"uniform(-1, 1)\", \"int(-3, 3)\"]",
        "init = [\"uniform(-1, 1)\", \"int(0, C - 1)\"]",
    );
    let t = load(&labels).unwrap();
    let at = |c: &str| {
        let sizes = t
            .complete_sizes(&kf_eval::task::parse_sizes(c).unwrap())
            .unwrap();
        t.init_at(1, 1, &sizes)
    };
    assert_eq!(
        at("C=36").unwrap(),
        Some(kf_eval::task::file::Init::Int { lo: 0, hi: 35 })
    );
    assert_eq!(
        at("C=18").unwrap(),
        Some(kf_eval::task::file::Init::Int { lo: 0, hi: 17 })
    );
    // The other distribution of the list is the fixed one.
    assert!(matches!(
        t.init_at(1, 0, &t.spec.sizes).unwrap(),
        Some(kf_eval::task::file::Init::Uniform { .. })
    ));
    // int(C - 30, 10): reversed once C passes 40.
    let shifted = load(&labels.replace("int(0, C - 1)", "int(C - 30, 10)")).unwrap();
    let sizes = shifted
        .complete_sizes(&kf_eval::task::parse_sizes("C=72").unwrap())
        .unwrap();
    let reversed = shifted.buffer_shapes(&sizes).unwrap_err().to_string();
    assert!(reversed.contains("int(42, 10)"), "{reversed}");
    assert!(shifted.buffer_shapes(&shifted.spec.sizes).is_ok());
    let unknown = error(&labels.replace("int(0, C - 1)", "int(0, CLASSES - 1)"));
    assert!(unknown.contains("CLASSES"), "{unknown}");
}
