//! A task file's NumPy reference traced into an operator graph (kf-graph's tracer, run
//! confined like the reference) and recognised as a family, whatever way the operation is
//! written; a construct the tracer does not know is an error naming it, never a wrong family.

use kf_eval::task::file::{FamilySpec, FileTask, TaskFile, TaskFileError};
use kf_eval::task::KernelTask;

/// A task of rows `x` (`R × L`), optional vectors `w` and `b` (`L`), an output `y` of
/// `y_shape`, whose reference returns `{"y": <expr>}` after `body`.
fn task(dir: &tempfile::TempDir, body: &str, y_shape: &str, vectors: &[&str]) -> FileTask {
    let mut toml = format!(
        "name = \"t\"\nargs = [\"R\", \"L\", \"x\", {vecs}\"y\"]\n[sizes]\nR = 64\nL = 48\n\
         [[buffer]]\nname = \"x\"\ndtype = \"f32\"\nshape = [\"R\", \"L\"]\nrole = \"input\"\n",
        vecs = vectors
            .iter()
            .map(|v| format!("\"{v}\", "))
            .collect::<String>()
    );
    for v in vectors {
        toml.push_str(&format!(
            "[[buffer]]\nname = \"{v}\"\ndtype = \"f32\"\nshape = [\"L\"]\nrole = \"input\"\n"
        ));
    }
    toml.push_str(&format!(
        "[[buffer]]\nname = \"y\"\ndtype = \"f32\"\nshape = {y_shape}\nrole = \"output\"\n\
         [[scalar]]\nname = \"eps\"\ndtype = \"f32\"\nvalue = 1e-5\n\
         [reference]\npython = \"ref.py\"\n"
    ));
    let lines = format!("x = inputs['x'].astype(np.float64)\n{body}");
    write_task(dir, "t", &toml, &lines)
}

/// Writes the task file `toml` as `name.toml` beside a `ref.py` whose `reference` runs
/// `lines`, and loads it.
fn write_task(dir: &tempfile::TempDir, name: &str, toml: &str, lines: &str) -> FileTask {
    let script = format!(
        "import numpy as np\n\ndef reference(inputs, sizes, scalars):\n{}\n",
        lines
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    );
    let path = dir.path().join(format!("{name}.toml"));
    std::fs::write(&path, toml).unwrap();
    std::fs::write(dir.path().join("ref.py"), script).unwrap();
    let file = TaskFile::load(&path).unwrap();
    FileTask::new(file, &Default::default()).unwrap()
}

fn family(body: &str, y_shape: &str, vectors: &[&str]) -> Option<FamilySpec> {
    let dir = tempfile::tempdir().unwrap();
    task(&dir, body, y_shape, vectors).traced_family().unwrap()
}

/// A row family's kind, op, weight, bias and epsilon.
type RowSummary = (
    &'static str,
    String,
    Option<String>,
    Option<String>,
    Option<f64>,
);

fn row_op(family: &Option<FamilySpec>) -> Option<RowSummary> {
    match family {
        Some(FamilySpec::RowNorm(r)) => Some((
            "row_norm",
            r.op.clone()?,
            r.weight.clone(),
            r.bias.clone(),
            r.eps,
        )),
        Some(FamilySpec::RowReduce(r)) => Some(("row_reduce", r.op.clone()?, None, None, None)),
        Some(FamilySpec::Scan(r)) => Some(("scan", r.op.clone()?, None, None, None)),
        _ => None,
    }
}

const ROWS: &str = "[\"R\", \"L\"]";

#[test]
fn rms_norms_written_three_ways_are_one_family_with_their_weight_and_epsilon() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    let ways = [
        "w = inputs['w']\nreturn {'y': (x / np.sqrt(np.mean(x ** 2, axis=-1, keepdims=True) + 1e-6) * w).astype(np.float32)}",
        "ms = (x * x).sum(axis=1) / sizes['L']\nr = 1.0 / np.sqrt(ms + 1e-6)\nreturn {'y': x * r[:, None] * inputs['w'][None, :]}",
        "return {'y': inputs['w'] * x * np.reciprocal(np.sqrt(np.square(x).mean(-1, keepdims=True) + 1e-6))}",
    ];
    for way in ways {
        let found = family(way, ROWS, &["w"]);
        assert_eq!(
            row_op(&found),
            Some((
                "row_norm",
                "rms_norm".into(),
                Some("w".into()),
                None,
                Some(1e-6)
            )),
            "{way}"
        );
        let Some(FamilySpec::RowNorm(r)) = found else {
            unreachable!()
        };
        assert_eq!((r.rows.text(), r.length.text()), ("R".into(), "L".into()));
    }
}

#[test]
fn layer_norm_softmax_l2_norm_sums_and_prefix_sums_are_told_apart() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    // A layer norm through np.var, with the task's scalar epsilon, a weight and a bias.
    let layer = family(
        "m = x.mean(axis=-1, keepdims=True)\nv = np.var(x, axis=-1, keepdims=True)\n\
         return {'y': (x - m) / np.sqrt(v + scalars['eps']) * inputs['g'] + inputs['b']}",
        ROWS,
        &["g", "b"],
    );
    assert_eq!(
        row_op(&layer),
        Some((
            "row_norm",
            "layer_norm".into(),
            Some("g".into()),
            Some("b".into()),
            Some(1e-5)
        ))
    );
    let softmax = family(
        "e = np.exp(x - x.max(axis=1, keepdims=True))\nreturn {'y': e / e.sum(axis=1, keepdims=True)}",
        ROWS,
        &[],
    );
    assert_eq!(row_op(&softmax).map(|r| r.1), Some("softmax".into()));
    let l2 = family(
        "return {'y': x / np.linalg.norm(x, axis=1, keepdims=True)}",
        ROWS,
        &[],
    );
    assert_eq!(row_op(&l2).map(|r| r.1), Some("l2_norm".into()));
    let sum = family("return {'y': np.sum(x, axis=1)}", "[\"R\"]", &[]);
    assert_eq!(
        row_op(&sum).map(|r| (r.0, r.1)),
        Some(("row_reduce", "sum".into()))
    );
    let scan = family("return {'y': np.cumsum(x, axis=-1)}", ROWS, &[]);
    assert_eq!(
        row_op(&scan).map(|r| (r.0, r.1)),
        Some(("scan", "cumsum".into()))
    );
}

#[test]
fn an_element_wise_reference_becomes_a_map_with_its_expression() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    let found = family(
        "return {'y': np.where(x > 0, x, 0.01 * x) + np.tanh(x) ** 2}",
        ROWS,
        &[],
    );
    let Some(FamilySpec::Map(map)) = found else {
        panic!("not a map: {found:?}")
    };
    assert_eq!((map.input.as_str(), map.output.as_str()), ("x", "y"));
    assert_eq!(
        map.expr.as_deref(),
        Some("(select((0.01f * x), x, (x > 0.0f)) + (tanh(x) * tanh(x)))")
    );
}

#[test]
fn a_computation_that_is_no_family_is_recognised_as_none() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    // A row divided by its maximum: along rows, but none of the row templates' operations.
    assert_eq!(
        family("return {'y': x / x.max(axis=-1, keepdims=True)}", ROWS, &[]),
        None
    );
    // A per-row value without keepdims broadcast against the rows (NumPy aligns it with the
    // columns): not a row computation, whatever the numbers.
    let dir = tempfile::tempdir().unwrap();
    let t = task(&dir, "s = x.sum(axis=0)\nreturn {'y': x - s}", ROWS, &[]);
    assert_eq!(t.traced_family().unwrap(), None);
}

#[test]
fn a_construct_the_tracer_does_not_know_stops_with_its_name_and_line() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    for (body, construct) in [
        ("return {'y': np.fft.fft(x).real}", "np.fft"),
        ("return {'y': x[:, ::-1]}", "indexing an array"),
        (
            "if x.sum() > 0:\n    return {'y': x}\nreturn {'y': -x}",
            "a branch on array values",
        ),
        ("return {'y': np.sort(x, axis=1)}", "np.sort"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let t = task(&dir, body, ROWS, &[]);
        match t.trace() {
            Err(TaskFileError::Trace { source, .. }) => {
                let text = source.to_string();
                assert!(
                    text.contains(construct) && text.contains("ref.py:"),
                    "{body}: {text}"
                );
            }
            other => panic!("{body}: {other:?}"),
        }
        // The search then goes on without a family.
        assert_eq!(t.family(), None);
    }
}

#[test]
fn the_trace_runs_once_per_task_and_its_copies_at_other_sizes_share_it() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = task(&dir, "return {'y': np.exp(x)}", ROWS, &[]);
    assert!(matches!(t.family(), Some(FamilySpec::Map(_))));
    // The reference is gone: a copy at other sizes still knows the family, traced once.
    std::fs::remove_file(dir.path().join("ref.py")).unwrap();
    let other = t
        .at_sizes(&[("R".to_owned(), 8)].into_iter().collect())
        .unwrap();
    assert!(matches!(other.family(), Some(FamilySpec::Map(_))));
}

/// A task of `x` (`M × K`), a weight `w`, vectors and an output `y` (`M × N`), whose reference
/// returns `{"y": …}` after `body` (`x` and `w` already float64).
fn gemm_family(body: &str, w_shape: &str, extra: &[(&str, &str)]) -> Option<FamilySpec> {
    let dir = tempfile::tempdir().unwrap();
    let mut toml = String::from("name = \"g\"\nargs = [\"M\", \"N\", \"K\", \"x\", \"w\"");
    for (name, _) in extra {
        toml.push_str(&format!(", \"{name}\""));
    }
    toml.push_str(
        ", \"y\"]\n[sizes]\nM = 32\nN = 24\nK = 16\n\
         [[buffer]]\nname = \"x\"\ndtype = \"f32\"\nshape = [\"M\", \"K\"]\nrole = \"input\"\n",
    );
    toml.push_str(&format!(
        "[[buffer]]\nname = \"w\"\ndtype = \"f32\"\nshape = {w_shape}\nrole = \"input\"\n"
    ));
    for (name, shape) in extra {
        toml.push_str(&format!(
            "[[buffer]]\nname = \"{name}\"\ndtype = \"f32\"\nshape = {shape}\nrole = \"input\"\n"
        ));
    }
    toml.push_str(
        "[[buffer]]\nname = \"y\"\ndtype = \"f32\"\nshape = [\"M\", \"N\"]\nrole = \"output\"\n\
         [reference]\npython = \"ref.py\"\n",
    );
    let lines =
        format!("x = inputs['x'].astype(np.float64)\nw = inputs['w'].astype(np.float64)\n{body}");
    write_task(&dir, "g", &toml, &lines)
        .traced_family()
        .unwrap()
}

#[test]
fn a_product_with_element_wise_steps_is_a_matmul_with_its_epilogue() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    // A linear layer (B stored N × K) with a bias and a ReLU.
    let linear = gemm_family(
        "return {'y': np.maximum(x @ w.T + inputs['bias'], 0.0)}",
        "[\"N\", \"K\"]",
        &[("bias", "[\"N\"]")],
    );
    let Some(FamilySpec::Matmul(m)) = &linear else {
        panic!("not a matmul: {linear:?}")
    };
    assert_eq!(
        (
            m.a.as_str(),
            m.b.as_str(),
            m.c.as_str(),
            m.transpose_a,
            m.transpose_b
        ),
        ("x", "w", "y", false, true)
    );
    assert_eq!(
        (m.m.text(), m.n.text(), m.k.text()),
        ("M".into(), "N".into(), "K".into())
    );
    assert_eq!(
        m.epilogue.as_deref(),
        Some("fmax((acc + col_of(bias)), 0.0f)")
    );
    // A scaled product with a residual matrix and a per-row term.
    let residual = gemm_family(
        "return {'y': np.dot(x, w) * 0.5 + inputs['r'] - inputs['s'][:, None]}",
        "[\"K\", \"N\"]",
        &[("r", "[\"M\", \"N\"]"), ("s", "[\"M\"]")],
    );
    let Some(FamilySpec::Matmul(m)) = &residual else {
        panic!("not a matmul: {residual:?}")
    };
    assert!(!m.transpose_b);
    assert_eq!(
        m.epilogue.as_deref(),
        Some("(((acc * 0.5f) + at(r)) - row_of(s))")
    );
    // The bare product has no epilogue; a product of a computed factor is none of the families.
    let bare = gemm_family("return {'y': x @ w}", "[\"K\", \"N\"]", &[]);
    assert!(
        matches!(&bare, Some(FamilySpec::Matmul(m)) if m.epilogue.is_none()),
        "{bare:?}"
    );
    assert_eq!(
        gemm_family("return {'y': np.exp(x) @ w}", "[\"K\", \"N\"]", &[]),
        None
    );
}
