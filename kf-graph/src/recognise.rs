//! From a graph to the kernel family a search can generate kernels for.
//!
//! A graph of element-wise operations on one input is a map: its expression is written as
//! OpenCL C from the graph. A graph whose reductions all run along the input's last dimension
//! is a row computation: which one (a softmax, a layer or RMS norm, a sum…) is found by
//! evaluating the graph on sample rows and comparing with each operation the row templates
//! implement, with each epsilon the graph holds and each way to read its other inputs as the
//! weight and bias. So any way of writing the operation is recognised (`x * x` or `x ** 2`,
//! `1 / sqrt` or `/ sqrt`, the variance as `mean(x²) − mean²` or `mean((x − mean)²)`), and a
//! graph that computes something else is not taken for one of them. Recognition only chooses
//! the templates a search starts from: the evaluator still checks every kernel against the
//! reference.

use rand::{Rng, SeedableRng};

use crate::graph::{BinaryFn, CompareFn, Graph, NodeId, Op, ReduceFn, ScanFn, UnaryFn};
use crate::pattern::{MapPattern, MatmulPattern, Pattern, RowOp, RowPattern};

/// Why a graph is none of the families: the reason, for a log line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Unrecognised(pub String);

fn unrecognised<T>(reason: impl Into<String>) -> Result<T, Unrecognised> {
    Err(Unrecognised(reason.into()))
}

/// The family of a graph with one output: an element-wise [`Pattern::Map`] of one input, or a
/// [`Pattern::Rows`] computation along the last dimension.
///
/// ```
/// use kf_graph::{recognise, Graph, Pattern, RowOp};
///
/// // y = x / sqrt(mean(x * x, axis=-1, keepdims=True) + 1e-6), as the NumPy tracer writes it.
/// let graph = Graph::from_trace(r#"{"nodes": [
///     {"op": "input", "name": "x", "dims": ["R", "L"]},
///     {"op": "binary", "func": "multiply", "args": [0, 0], "dims": ["R", "L"]},
///     {"op": "reduce", "func": "mean", "arg": 1, "axes": [1], "keepdims": true, "dims": ["R", "1"]},
///     {"op": "constant", "value": 1e-6, "dims": []},
///     {"op": "binary", "func": "add", "args": [2, 3], "dims": ["R", "1"]},
///     {"op": "unary", "func": "sqrt", "arg": 4, "dims": ["R", "1"]},
///     {"op": "binary", "func": "divide", "args": [0, 5], "dims": ["R", "L"]}],
///   "outputs": {"y": 6}}"#)?;
/// let Ok(Pattern::Rows(rows)) = recognise(&graph) else { panic!("not a row computation") };
/// assert_eq!((rows.op, rows.eps, rows.rows.as_str(), rows.length.as_str()),
///            (RowOp::RmsNorm, Some(1e-6), "R", "L"));
/// # Ok::<(), kf_graph::GraphError>(())
/// ```
pub fn recognise(graph: &Graph) -> Result<Pattern, Unrecognised> {
    let mut outputs = graph.outputs.iter();
    let (Some((output, &out)), None) = (outputs.next(), outputs.next()) else {
        return unrecognised(format!(
            "the operator has {} outputs; the generated families write one",
            graph.outputs.len()
        ));
    };
    let cone = graph.cone(out);
    let elementwise = cone.iter().all(|&id| {
        matches!(
            graph.nodes[id].op,
            Op::Input { .. }
                | Op::Constant { .. }
                | Op::Size { .. }
                | Op::Scalar { .. }
                | Op::Unary { .. }
                | Op::Binary { .. }
                | Op::Compare { .. }
                | Op::Select { .. }
        )
    });
    if elementwise {
        return map_pattern(graph, output, out, &cone).map(Pattern::Map);
    }
    if cone
        .iter()
        .any(|&id| matches!(graph.nodes[id].op, Op::Matmul { .. }))
    {
        return matmul_pattern(graph, output, out, &cone).map(Pattern::Matmul);
    }
    rows::row_pattern(graph, output, out, &cone).map(Pattern::Rows)
}

/// An element-wise graph of one input as a map with an OpenCL C expression.
fn map_pattern(
    graph: &Graph,
    output: &str,
    out: NodeId,
    cone: &[NodeId],
) -> Result<MapPattern, Unrecognised> {
    let inputs: Vec<(NodeId, &str)> = graph.inputs().filter(|(id, _)| cone.contains(id)).collect();
    let [(input_id, input)] = inputs[..] else {
        return unrecognised(format!(
            "an element-wise map of {} inputs; the map template reads one",
            inputs.len()
        ));
    };
    if graph.nodes[input_id].dims != graph.nodes[out].dims {
        return unrecognised("the map's output does not have its input's shape");
    }
    let expr = c_expression(graph, cone, out, |id| match &graph.nodes[id].op {
        Op::Input { name } => Some(Ok(name.clone())),
        _ => None,
    })?;
    Ok(MapPattern {
        input: input.to_owned(),
        output: output.to_owned(),
        expr,
    })
}

/// The OpenCL C expression of `out` over the element-wise `nodes` (in graph order), with
/// `leaf` giving the text of the nodes it knows (the inputs, a product's `acc`).
fn c_expression(
    graph: &Graph,
    nodes: &[NodeId],
    out: NodeId,
    leaf: impl Fn(NodeId) -> Option<Result<String, Unrecognised>>,
) -> Result<String, Unrecognised> {
    let mut text: Vec<String> = vec![String::new(); graph.nodes.len()];
    for &id in nodes {
        if let Some(known) = leaf(id) {
            text[id] = known?;
            continue;
        }
        let a = |k: usize| -> &str {
            let args = graph.nodes[id].op.args();
            &text[args[k]]
        };
        let expr = match &graph.nodes[id].op {
            Op::Constant { value } => float_literal(*value)?,
            Op::Scalar { name, .. } => name.clone(),
            // A size is an integer argument of the kernel.
            Op::Size { expr, .. } => format!("((float)({expr}))"),
            Op::Unary { func, .. } => unary_c(*func, a(0)),
            Op::Binary { func, args } => {
                let constant = |n: NodeId| match graph.nodes[n].op {
                    Op::Constant { value } => Some(value),
                    _ => None,
                };
                binary_c(*func, a(0), a(1), constant(args[0]), constant(args[1]))
            }
            Op::Compare { func, .. } => format!("({} {} {})", a(0), compare_c(*func), a(1)),
            // OpenCL's select(else, then, condition).
            Op::Select { .. } => format!("select({}, {}, {})", a(2), a(1), a(0)),
            // A reshape that only adds or drops dimensions of one keeps the element.
            Op::Reshape { arg }
                if stripped(&graph.nodes[id].dims) == stripped(&graph.nodes[*arg].dims) =>
            {
                a(0).to_owned()
            }
            _ => return unrecognised("an operation that is not element-wise"),
        };
        if expr.len() > 4096 {
            return unrecognised("the expression grows past 4096 characters");
        }
        text[id] = expr;
    }
    Ok(std::mem::take(&mut text[out]))
}

/// The dimensions that are not one.
fn stripped(dims: &[String]) -> Vec<&str> {
    dims.iter()
        .map(String::as_str)
        .filter(|d| *d != "1")
        .collect()
}

/// A matrix product `A · B` (either factor an input, or the transpose of one) followed only by
/// element-wise steps, which become the epilogue: the product as `acc`, other inputs through
/// `col_of(b)` (one value per column: a bias), `row_of(b)` (per row) and `at(b)` (a matrix
/// shaped like the product).
fn matmul_pattern(
    graph: &Graph,
    output: &str,
    out: NodeId,
    cone: &[NodeId],
) -> Result<MatmulPattern, Unrecognised> {
    let products: Vec<NodeId> = cone
        .iter()
        .copied()
        .filter(|&id| matches!(graph.nodes[id].op, Op::Matmul { .. }))
        .collect();
    let [product] = products[..] else {
        return unrecognised(format!(
            "{} matrix products; the GEMM templates compute one",
            products.len()
        ));
    };
    let Op::Matmul { args } = &graph.nodes[product].op else {
        return unrecognised("not a product");
    };
    let (a, transpose_a) = factor(graph, args[0])?;
    let (b, transpose_b) = factor(graph, args[1])?;
    let dims = &graph.nodes[product].dims;
    if graph.nodes[out].dims != *dims {
        return unrecognised("the output does not have the product's shape");
    }
    let (m, n) = (dims[0].clone(), dims[1].clone());
    let k = graph.nodes[args[0]].dims[1].clone();
    let before = graph.cone(product);
    let epilogue_nodes: Vec<NodeId> = cone
        .iter()
        .copied()
        .filter(|id| *id == product || !before.contains(id))
        .collect();
    // How the epilogue reads an input, by the shape it has where it is used.
    let accessor = |name: &str, used: &[String]| -> Result<String, Unrecognised> {
        if name == a || name == b {
            return unrecognised("the epilogue reads a factor of the product");
        }
        // NumPy's broadcasting aligns the last dimensions: a vector of N is one value per
        // column, `[M, 1]` one per row.
        let (m, n) = (m.as_str(), n.as_str());
        let used: Vec<&str> = used.iter().map(String::as_str).collect();
        match used[..] {
            [c] | ["1", c] if c == n => Ok(format!("col_of({name})")),
            [r, "1"] if r == m => Ok(format!("row_of({name})")),
            [r, c] if r == m && c == n => Ok(format!("at({name})")),
            _ => unrecognised(format!(
                "the epilogue reads `{name}` in a shape that is not a row, a column or the product's"
            )),
        }
    };
    let expr = c_expression(graph, &epilogue_nodes, out, |id| {
        match &graph.nodes[id].op {
            _ if id == product => Some(Ok("acc".to_owned())),
            // An input read only through a reshape (`s[:, None]`) takes the reshape's shape:
            // a shape no accessor reads is an error only where the expression uses it as it is.
            Op::Input { name } => Some(Ok(accessor(name, &graph.nodes[id].dims)
                .unwrap_or_else(|e| format!("{UNREADABLE}{e}{UNREADABLE}")))),
            // `b[None, :]`: the input read in the shape of the reshape.
            Op::Reshape { arg } => match &graph.nodes[*arg].op {
                Op::Input { name } => Some(accessor(name, &graph.nodes[id].dims)),
                _ => None,
            },
            _ => None,
        }
    })?;
    if let Some(reason) = expr.split(UNREADABLE).nth(1) {
        return unrecognised(reason.to_owned());
    }
    Ok(MatmulPattern {
        a: a.to_owned(),
        b: b.to_owned(),
        c: output.to_owned(),
        m,
        n,
        k,
        transpose_a,
        transpose_b,
        epilogue: (expr != "acc").then_some(expr),
    })
}

/// Marks an input's text that no accessor reads (around the reason), until the expression
/// shows whether it is used as it is.
const UNREADABLE: char = '\u{1}';

/// A factor of a product: an input, or the transpose of one (`x.T`, `np.transpose(x)`).
fn factor(graph: &Graph, id: NodeId) -> Result<(&str, bool), Unrecognised> {
    match &graph.nodes[id].op {
        Op::Input { name } => Ok((name, false)),
        Op::Transpose { arg, perm } if perm[..] == [1, 0] => match &graph.nodes[*arg].op {
            Op::Input { name } => Ok((name, true)),
            _ => unrecognised("a factor of the product that is computed, not an input"),
        },
        _ => unrecognised("a factor of the product that is computed, not an input"),
    }
}

/// An f32 literal of OpenCL C (`0.5f`), or why not (an infinity or NaN).
fn float_literal(value: f64) -> Result<String, Unrecognised> {
    let v = value as f32;
    if !v.is_finite() {
        return unrecognised(format!("the constant {value} has no finite f32 value"));
    }
    Ok(format!("{v:?}f"))
}

fn unary_c(func: UnaryFn, a: &str) -> String {
    match func {
        UnaryFn::Negative => format!("(-{a})"),
        UnaryFn::Abs => format!("fabs({a})"),
        UnaryFn::Square => format!("({a} * {a})"),
        UnaryFn::Reciprocal => format!("(1.0f / {a})"),
        other => {
            let name = match other {
                UnaryFn::Exp => "exp",
                UnaryFn::Expm1 => "expm1",
                UnaryFn::Log => "log",
                UnaryFn::Log1p => "log1p",
                UnaryFn::Sqrt => "sqrt",
                UnaryFn::Sin => "sin",
                UnaryFn::Cos => "cos",
                UnaryFn::Tanh => "tanh",
                UnaryFn::Sign => "sign",
                UnaryFn::Floor => "floor",
                _ => "ceil",
            };
            format!("{name}({a})")
        }
    }
}

fn binary_c(func: BinaryFn, a: &str, b: &str, ca: Option<f64>, cb: Option<f64>) -> String {
    match func {
        BinaryFn::Add => format!("({a} + {b})"),
        BinaryFn::Subtract => format!("({a} - {b})"),
        BinaryFn::Multiply => format!("({a} * {b})"),
        BinaryFn::Divide => format!("({a} / {b})"),
        BinaryFn::Power => match cb {
            Some(2.0) => format!("({a} * {a})"),
            Some(0.5) => format!("sqrt({a})"),
            Some(1.0) => a.to_owned(),
            _ => format!("pow({a}, {b})"),
        },
        // fmax(gentype, float) exists for vectors, fmax(float, gentype) does not: a constant
        // goes second (both are commutative).
        BinaryFn::Maximum | BinaryFn::Minimum => {
            let name = if func == BinaryFn::Maximum {
                "fmax"
            } else {
                "fmin"
            };
            if ca.is_some() {
                format!("{name}({b}, {a})")
            } else {
                format!("{name}({a}, {b})")
            }
        }
    }
}

fn compare_c(func: CompareFn) -> &'static str {
    match func {
        CompareFn::Greater => ">",
        CompareFn::GreaterEqual => ">=",
        CompareFn::Less => "<",
        CompareFn::LessEqual => "<=",
        CompareFn::Equal => "==",
        CompareFn::NotEqual => "!=",
    }
}

mod rows {
    //! Row computations: the graph evaluated on sample rows and compared with each operation
    //! the row templates implement.

    use super::*;

    /// How a node's values vary within the rows of the input `x` (`R… × L`).
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Kind {
        /// One value per element of a row (`R… × L`, or a vector of `L` for every row).
        Elem,
        /// One value per row, its dimensions kept (`R… × 1`), or a number.
        Stat,
        /// One value per row without the reduced dimension (`R…`): it broadcasts against the
        /// rows' last dimension, not per row, so it may not meet an [`Kind::Elem`] value.
        Flat,
    }

    #[derive(Debug, Clone)]
    enum Val {
        Elem(Vec<f64>),
        Stat(f64),
    }

    /// Elements of the sample rows: odd, so that no pairing of elements hides a difference.
    const SAMPLE_LENGTH: usize = 7;

    /// The rows a computation along the last dimension reads, and its other inputs.
    struct Rows<'g> {
        id: NodeId,
        name: &'g str,
        dims: Vec<String>,
        /// The rows' length (their last dimension).
        length: String,
        /// The other inputs: one value per element of a row (a weight, a bias).
        vectors: Vec<(NodeId, &'g str)>,
    }

    impl Rows<'_> {
        /// How many rows, as a size expression.
        fn count(&self) -> String {
            match &self.dims[..self.dims.len() - 1] {
                [] => "1".to_owned(),
                [one] => one.clone(),
                many => many
                    .iter()
                    .map(|d| format!("({d})"))
                    .collect::<Vec<_>>()
                    .join(" * "),
            }
        }
    }

    /// The input whose shape the output has (or has with the last dimension reduced), and
    /// the others, each one value per element of a row (at most two: a weight and a bias).
    fn rows_of<'g>(
        graph: &'g Graph,
        out: NodeId,
        cone: &[NodeId],
    ) -> Result<Rows<'g>, Unrecognised> {
        let out_dims = &graph.nodes[out].dims;
        let inputs: Vec<(NodeId, &str)> =
            graph.inputs().filter(|(id, _)| cone.contains(id)).collect();
        let fits = |dims: &Vec<String>| {
            let n = dims.len();
            n >= 1
                && dims[n - 1] != "1"
                && (dims == out_dims
                    || out_dims[..] == dims[..n - 1]
                    || (out_dims.len() == n
                        && out_dims[..n - 1] == dims[..n - 1]
                        && out_dims[n - 1] == "1"))
        };
        let rows_inputs: Vec<_> = inputs
            .iter()
            .filter(|(id, _)| fits(&graph.nodes[*id].dims))
            .collect();
        let &(id, name) = match rows_inputs[..] {
            [one] => one,
            [] => return unrecognised("no input has the output's shape along its rows"),
            _ => return unrecognised("several inputs have the shape of the rows"),
        };
        let dims = graph.nodes[id].dims.clone();
        let length = dims[dims.len() - 1].clone();
        let mut vectors = Vec::new();
        for &(other, other_name) in &inputs {
            if other == id {
                continue;
            }
            let d = &graph.nodes[other].dims;
            let is_vector = d.last() == Some(&length) && d[..d.len() - 1].iter().all(|x| x == "1");
            if !is_vector {
                return unrecognised(format!(
                    "input `{other_name}` is neither the rows nor one value per element of a row"
                ));
            }
            vectors.push((other, other_name));
        }
        if vectors.len() > 2 {
            return unrecognised("more than a weight and a bias besides the rows");
        }
        Ok(Rows {
            id,
            name,
            dims,
            length,
            vectors,
        })
    }

    /// Fixed sample rows (one tiny, so that an epsilon matters; shifted ones, so that a mean
    /// matters) and, for `vectors` other inputs, sample vectors (the first positive, as a
    /// weight), the same on every run.
    fn samples(vectors: usize) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x6b66_6772);
        let normal = |rng: &mut rand_chacha::ChaCha8Rng| -> f64 {
            // Box-Muller: a normal sample from two uniform ones.
            let u: f64 = rng.random_range(1e-12..1.0);
            let v: f64 = rng.random::<f64>();
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        };
        let rows = [(1.0, 0.0), (1.0, 0.0), (1e-3, 0.0), (1.0, 3.0), (2.5, -1.0)]
            .into_iter()
            .map(|(scale, shift)| {
                (0..SAMPLE_LENGTH)
                    .map(|_| normal(&mut rng) * scale + shift)
                    .collect()
            })
            .collect();
        let vectors = (0..vectors)
            .map(|k| {
                (0..SAMPLE_LENGTH)
                    .map(|_| {
                        if k == 0 {
                            rng.random_range(0.5..1.5)
                        } else {
                            normal(&mut rng)
                        }
                    })
                    .collect()
            })
            .collect();
        (rows, vectors)
    }

    pub(super) fn row_pattern(
        graph: &Graph,
        output: &str,
        out: NodeId,
        cone: &[NodeId],
    ) -> Result<RowPattern, Unrecognised> {
        let rows = rows_of(graph, out, cone)?;
        let kinds = kinds(graph, cone, &rows.dims)?;
        let out_kind = kinds[out]
            .ok_or_else(|| Unrecognised("the output is not computed along rows".into()))?;
        if (graph.nodes[out].dims == rows.dims) != (out_kind == Kind::Elem) {
            return unrecognised("the output's shape and its computation disagree");
        }
        let (samples, vector_values) = samples(rows.vectors.len());
        let mut results = Vec::new();
        for row in &samples {
            let values = evaluate(
                graph,
                cone,
                (rows.id, &rows.length),
                row,
                &rows.vectors,
                &vector_values,
            )?;
            results.push(
                values[out]
                    .clone()
                    .ok_or_else(|| Unrecognised("no value".into()))?,
            );
        }
        let pattern =
            |op: RowOp, weight: Option<usize>, bias: Option<usize>, eps: Option<f64>| RowPattern {
                op,
                input: rows.name.to_owned(),
                output: output.to_owned(),
                rows: rows.count(),
                length: rows.length.clone(),
                weight: weight.map(|k| rows.vectors[k].1.to_owned()),
                bias: bias.map(|k| rows.vectors[k].1.to_owned()),
                eps,
            };
        let (op, weight, bias, eps) = if out_kind == Kind::Elem {
            elementwise_op(&samples, &results, &vector_values, &epsilons(graph, cone))?
        } else if rows.vectors.is_empty() {
            (reduction_op(&samples, &results)?, None, None, None)
        } else {
            return unrecognised("a reduction that reads a vector besides its rows");
        };
        Ok(pattern(op, weight, bias, eps))
    }

    /// The reduction whose value on each sample row is the one the graph computed.
    fn reduction_op(samples: &[Vec<f64>], results: &[Val]) -> Result<RowOp, Unrecognised> {
        [RowOp::Sum, RowOp::Mean, RowOp::Max, RowOp::Min]
            .into_iter()
            .find(|&op| {
                samples.iter().zip(results).all(|(row, got)| {
                    matches!(got, Val::Stat(v) if close(*v, reduce_reference(op, row)))
                })
            })
            .ok_or_else(|| {
                Unrecognised(
                    "a reduction of rows that is not a sum, mean, maximum or minimum".into(),
                )
            })
    }

    /// The row operation (with the vectors as its weight and bias, and one of the graph's
    /// epsilons) whose rows are the ones the graph computed from each sample row.
    #[allow(clippy::type_complexity)]
    fn elementwise_op(
        samples: &[Vec<f64>],
        results: &[Val],
        vector_values: &[Vec<f64>],
        epsilons: &[f64],
    ) -> Result<(RowOp, Option<usize>, Option<usize>, Option<f64>), Unrecognised> {
        // Ways to read the vectors: none; one as the weight or the bias; two as both.
        let roles: Vec<(Option<usize>, Option<usize>)> = match vector_values.len() {
            0 => vec![(None, None)],
            1 => vec![(Some(0), None), (None, Some(0))],
            _ => vec![(Some(0), Some(1)), (Some(1), Some(0))],
        };
        let ops = [
            RowOp::Softmax,
            RowOp::LogSoftmax,
            RowOp::Cumsum,
            RowOp::L1Norm,
            RowOp::L2Norm,
            RowOp::RmsNorm,
            RowOp::LayerNorm,
        ];
        for op in ops {
            let affine = matches!(
                op,
                RowOp::L1Norm | RowOp::L2Norm | RowOp::RmsNorm | RowOp::LayerNorm
            );
            let eps_choices: Vec<Option<f64>> = if matches!(op, RowOp::RmsNorm | RowOp::LayerNorm) {
                epsilons.iter().copied().map(Some).collect()
            } else {
                vec![None]
            };
            for &(w, b) in &roles {
                if !affine && (w.is_some() || b.is_some()) {
                    continue;
                }
                for &eps in &eps_choices {
                    let matches = samples.iter().zip(results).all(|(row, got)| {
                        let Val::Elem(got) = got else { return false };
                        let want = row_reference(
                            op,
                            row,
                            w.map(|k| vector_values[k].as_slice()),
                            b.map(|k| vector_values[k].as_slice()),
                            eps.unwrap_or(0.0),
                        );
                        got.len() == want.len() && got.iter().zip(&want).all(|(g, w)| close(*g, *w))
                    });
                    if matches {
                        return Ok((op, w, b, eps));
                    }
                }
            }
        }
        unrecognised(
            "a computation along rows that is none of softmax, log-softmax, a layer, RMS, L1 or \
             L2 norm, or a prefix sum",
        )
    }

    fn close(got: f64, want: f64) -> bool {
        (got - want).abs() <= 1e-9 * (1.0 + want.abs())
    }

    /// The epsilons to try: every small positive number the graph holds, and none.
    fn epsilons(graph: &Graph, cone: &[NodeId]) -> Vec<f64> {
        let mut out = vec![0.0];
        for &id in cone {
            if let Op::Constant { value } | Op::Scalar { value, .. } = graph.nodes[id].op {
                if value > 0.0 && value < 0.1 && !out.contains(&value) {
                    out.push(value);
                }
            }
        }
        out
    }

    /// Each node's kind, or `None` for nodes that do not compute along rows (an error once
    /// the output depends on them).
    fn kinds(
        graph: &Graph,
        cone: &[NodeId],
        x_dims: &[String],
    ) -> Result<Vec<Option<Kind>>, Unrecognised> {
        let n = x_dims.len();
        let mut kinds: Vec<Option<Kind>> = vec![None; graph.nodes.len()];
        for &id in cone {
            let node = &graph.nodes[id];
            let of = |a: NodeId| kinds[a];
            let kind = match &node.op {
                Op::Input { .. } => Some(Kind::Elem),
                Op::Constant { .. } | Op::Size { .. } | Op::Scalar { .. } => Some(Kind::Stat),
                Op::Unary { arg, .. } => of(*arg),
                Op::Binary { .. } | Op::Compare { .. } | Op::Select { .. } => {
                    let ks: Vec<Kind> = node.op.args().iter().filter_map(|&a| of(a)).collect();
                    if ks.contains(&Kind::Flat) && ks.contains(&Kind::Elem) {
                        return unrecognised(
                            "a value per row without its reduced dimension meets the rows \
                             (NumPy broadcasts it along the row, not per row)",
                        );
                    }
                    if ks.contains(&Kind::Elem) {
                        Some(Kind::Elem)
                    } else if ks.contains(&Kind::Flat) {
                        Some(Kind::Flat)
                    } else {
                        Some(Kind::Stat)
                    }
                }
                Op::Reduce {
                    arg,
                    axes,
                    keepdims,
                    ..
                } => {
                    let rank = graph.nodes[*arg].dims.len();
                    match of(*arg) {
                        Some(Kind::Elem) if axes[..] == [rank - 1] => {
                            Some(if *keepdims || rank < n {
                                Kind::Stat
                            } else {
                                Kind::Flat
                            })
                        }
                        _ => {
                            return unrecognised(
                                "a reduction along another dimension than the rows'",
                            )
                        }
                    }
                }
                Op::Scan { arg, axis, .. } => match of(*arg) {
                    Some(Kind::Elem) if *axis + 1 == graph.nodes[*arg].dims.len() => {
                        Some(Kind::Elem)
                    }
                    _ => return unrecognised("a scan along another dimension than the rows'"),
                },
                Op::Reshape { arg } => {
                    let strip =
                        |d: &[String]| d.iter().filter(|s| *s != "1").cloned().collect::<Vec<_>>();
                    if strip(&node.dims) != strip(&graph.nodes[*arg].dims) {
                        return unrecognised("a reshape that moves elements between rows");
                    }
                    match of(*arg) {
                        Some(Kind::Elem) => Some(Kind::Elem),
                        Some(_) if node.dims.len() == n || strip(&node.dims).is_empty() => {
                            Some(Kind::Stat)
                        }
                        Some(_) => Some(Kind::Flat),
                        None => None,
                    }
                }
                Op::Transpose { .. } => return unrecognised("a transpose"),
                Op::Matmul { .. } => return unrecognised("a matrix product"),
            };
            kinds[id] = kind;
        }
        Ok(kinds)
    }

    /// Every node's value on one sample row (`None` off the output's cone).
    fn evaluate(
        graph: &Graph,
        cone: &[NodeId],
        (x, length): (NodeId, &str),
        row: &[f64],
        vectors: &[(NodeId, &str)],
        vector_values: &[Vec<f64>],
    ) -> Result<Vec<Option<Val>>, Unrecognised> {
        let mut values: Vec<Option<Val>> = vec![None; graph.nodes.len()];
        for &id in cone {
            let arg = |a: NodeId| {
                values[a]
                    .clone()
                    .ok_or_else(|| Unrecognised("a value off the rows".into()))
            };
            let value = match &graph.nodes[id].op {
                Op::Input { .. } if id == x => Val::Elem(row.to_vec()),
                Op::Input { .. } => {
                    let k = vectors
                        .iter()
                        .position(|(v, _)| *v == id)
                        .ok_or_else(|| Unrecognised("an input off the rows".into()))?;
                    Val::Elem(vector_values[k].clone())
                }
                Op::Constant { value } | Op::Scalar { value, .. } => Val::Stat(*value),
                // The row's length is the sample's; any other size keeps its value.
                Op::Size { expr, .. } if *expr == *length => Val::Stat(SAMPLE_LENGTH as f64),
                Op::Size { value, .. } => Val::Stat(*value),
                Op::Unary { func, arg: a } => map1(arg(*a)?, |v| unary_f64(*func, v)),
                Op::Binary { func, args } => {
                    map2(arg(args[0])?, arg(args[1])?, |a, b| binary_f64(*func, a, b))
                }
                Op::Compare { func, args } => map2(arg(args[0])?, arg(args[1])?, |a, b| {
                    let holds = match func {
                        CompareFn::Greater => a > b,
                        CompareFn::GreaterEqual => a >= b,
                        CompareFn::Less => a < b,
                        CompareFn::LessEqual => a <= b,
                        CompareFn::Equal => a == b,
                        CompareFn::NotEqual => a != b,
                    };
                    f64::from(u8::from(holds))
                }),
                Op::Select { args } => select(arg(args[0])?, arg(args[1])?, arg(args[2])?),
                Op::Reduce { func, arg: a, .. } => {
                    let Val::Elem(v) = arg(*a)? else {
                        return unrecognised("a reduction of one value");
                    };
                    Val::Stat(reduce_f64(*func, &v))
                }
                Op::Scan { func, arg: a, .. } => {
                    let Val::Elem(v) = arg(*a)? else {
                        return unrecognised("a scan of one value");
                    };
                    let mut acc = if *func == ScanFn::Cumsum { 0.0 } else { 1.0 };
                    Val::Elem(
                        v.iter()
                            .map(|x| {
                                acc = if *func == ScanFn::Cumsum {
                                    acc + x
                                } else {
                                    acc * x
                                };
                                acc
                            })
                            .collect(),
                    )
                }
                Op::Reshape { arg: a } => arg(*a)?,
                Op::Transpose { .. } | Op::Matmul { .. } => return unrecognised("not along rows"),
            };
            values[id] = Some(value);
        }
        Ok(values)
    }

    /// `then` where `cond` holds, else `otherwise`, element by element.
    fn select(cond: Val, then: Val, otherwise: Val) -> Val {
        let len = [&cond, &then, &otherwise].iter().find_map(|v| match v {
            Val::Elem(e) => Some(e.len()),
            Val::Stat(_) => None,
        });
        let at = |v: &Val, i: usize| match v {
            Val::Elem(e) => e[i],
            Val::Stat(s) => *s,
        };
        let pick = |i: usize| {
            if at(&cond, i) != 0.0 {
                at(&then, i)
            } else {
                at(&otherwise, i)
            }
        };
        match len {
            Some(n) => Val::Elem((0..n).map(pick).collect()),
            None => Val::Stat(pick(0)),
        }
    }

    fn map1(v: Val, f: impl Fn(f64) -> f64) -> Val {
        match v {
            Val::Elem(v) => Val::Elem(v.into_iter().map(f).collect()),
            Val::Stat(s) => Val::Stat(f(s)),
        }
    }

    fn map2(a: Val, b: Val, f: impl Fn(f64, f64) -> f64) -> Val {
        match (a, b) {
            (Val::Stat(a), Val::Stat(b)) => Val::Stat(f(a, b)),
            (Val::Elem(a), Val::Stat(b)) => Val::Elem(a.into_iter().map(|a| f(a, b)).collect()),
            (Val::Stat(a), Val::Elem(b)) => Val::Elem(b.into_iter().map(|b| f(a, b)).collect()),
            (Val::Elem(a), Val::Elem(b)) => {
                Val::Elem(a.into_iter().zip(b).map(|(a, b)| f(a, b)).collect())
            }
        }
    }

    fn unary_f64(func: UnaryFn, v: f64) -> f64 {
        match func {
            UnaryFn::Negative => -v,
            UnaryFn::Abs => v.abs(),
            UnaryFn::Exp => v.exp(),
            UnaryFn::Expm1 => v.exp_m1(),
            UnaryFn::Log => v.ln(),
            UnaryFn::Log1p => v.ln_1p(),
            UnaryFn::Sqrt => v.sqrt(),
            UnaryFn::Square => v * v,
            UnaryFn::Reciprocal => 1.0 / v,
            UnaryFn::Sin => v.sin(),
            UnaryFn::Cos => v.cos(),
            UnaryFn::Tanh => v.tanh(),
            UnaryFn::Sign => {
                if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            UnaryFn::Floor => v.floor(),
            UnaryFn::Ceil => v.ceil(),
        }
    }

    fn binary_f64(func: BinaryFn, a: f64, b: f64) -> f64 {
        match func {
            BinaryFn::Add => a + b,
            BinaryFn::Subtract => a - b,
            BinaryFn::Multiply => a * b,
            BinaryFn::Divide => a / b,
            BinaryFn::Power => a.powf(b),
            BinaryFn::Maximum => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }
            BinaryFn::Minimum => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.min(b)
                }
            }
        }
    }

    fn reduce_f64(func: ReduceFn, v: &[f64]) -> f64 {
        match func {
            ReduceFn::Sum => v.iter().sum(),
            ReduceFn::Mean => v.iter().sum::<f64>() / v.len() as f64,
            ReduceFn::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ReduceFn::Min => v.iter().copied().fold(f64::INFINITY, f64::min),
            ReduceFn::Prod => v.iter().product(),
        }
    }

    fn reduce_reference(op: RowOp, row: &[f64]) -> f64 {
        match op {
            RowOp::Sum => reduce_f64(ReduceFn::Sum, row),
            RowOp::Mean => reduce_f64(ReduceFn::Mean, row),
            RowOp::Max => reduce_f64(ReduceFn::Max, row),
            _ => reduce_f64(ReduceFn::Min, row),
        }
    }

    /// What the row templates compute for `op` (`row_norm.cl`, the softmax templates).
    fn row_reference(
        op: RowOp,
        x: &[f64],
        w: Option<&[f64]>,
        b: Option<&[f64]>,
        eps: f64,
    ) -> Vec<f64> {
        let n = x.len() as f64;
        let max = reduce_f64(ReduceFn::Max, x);
        let scaled: Vec<f64> = match op {
            RowOp::Softmax => {
                let total: f64 = x.iter().map(|v| (v - max).exp()).sum();
                return x.iter().map(|v| (v - max).exp() / total).collect();
            }
            RowOp::LogSoftmax => {
                let total: f64 = x.iter().map(|v| (v - max).exp()).sum();
                return x.iter().map(|v| v - max - total.ln()).collect();
            }
            RowOp::Cumsum => {
                let mut acc = 0.0;
                return x
                    .iter()
                    .map(|v| {
                        acc += v;
                        acc
                    })
                    .collect();
            }
            RowOp::LayerNorm => {
                let mean = x.iter().sum::<f64>() / n;
                let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                x.iter().map(|v| (v - mean) / (var + eps).sqrt()).collect()
            }
            RowOp::RmsNorm => {
                let ms = x.iter().map(|v| v * v).sum::<f64>() / n;
                x.iter().map(|v| v / (ms + eps).sqrt()).collect()
            }
            RowOp::L1Norm => {
                let total: f64 = x.iter().map(|v| v.abs()).sum();
                x.iter().map(|v| v / total).collect()
            }
            _ => {
                let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
                x.iter().map(|v| v / norm).collect()
            }
        };
        scaled
            .iter()
            .enumerate()
            .map(|(i, v)| v * w.map_or(1.0, |w| w[i]) + b.map_or(0.0, |b| b[i]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(nodes: &str, out: usize) -> Graph {
        Graph::from_trace(&format!(
            r#"{{"nodes": [{nodes}], "outputs": {{"y": {out}}}}}"#
        ))
        .expect("a graph")
    }

    const X: &str = r#"{"op": "input", "name": "x", "dims": ["R", "L"]}"#;

    #[test]
    fn a_softmax_written_with_a_reciprocal_of_the_sum_is_a_softmax() {
        let g = graph(
            &format!(
                r#"{X},
                {{"op": "reduce", "func": "max", "arg": 0, "axes": [1], "keepdims": true, "dims": ["R", "1"]}},
                {{"op": "binary", "func": "subtract", "args": [0, 1], "dims": ["R", "L"]}},
                {{"op": "unary", "func": "exp", "arg": 2, "dims": ["R", "L"]}},
                {{"op": "reduce", "func": "sum", "arg": 3, "axes": [1], "keepdims": true, "dims": ["R", "1"]}},
                {{"op": "unary", "func": "reciprocal", "arg": 4, "dims": ["R", "1"]}},
                {{"op": "binary", "func": "multiply", "args": [3, 5], "dims": ["R", "L"]}}"#
            ),
            6,
        );
        let Ok(Pattern::Rows(rows)) = recognise(&g) else {
            panic!("not rows")
        };
        assert_eq!(rows.op, RowOp::Softmax);
    }

    #[test]
    fn a_row_scaled_by_its_maximum_is_no_family() {
        let g = graph(
            &format!(
                r#"{X},
                {{"op": "reduce", "func": "max", "arg": 0, "axes": [1], "keepdims": true, "dims": ["R", "1"]}},
                {{"op": "binary", "func": "divide", "args": [0, 1], "dims": ["R", "L"]}}"#
            ),
            2,
        );
        assert!(recognise(&g).is_err());
    }

    #[test]
    fn a_reduction_across_rows_is_no_row_computation() {
        let g = graph(
            &format!(
                r#"{X},
                {{"op": "reduce", "func": "sum", "arg": 0, "axes": [0], "keepdims": true, "dims": ["1", "L"]}},
                {{"op": "binary", "func": "subtract", "args": [0, 1], "dims": ["R", "L"]}}"#
            ),
            2,
        );
        let err = recognise(&g).unwrap_err();
        assert!(err.0.contains("another dimension"), "{err}");
    }

    #[test]
    fn a_map_of_two_inputs_is_not_the_one_input_map() {
        let g = graph(
            &format!(
                r#"{X}, {{"op": "input", "name": "z", "dims": ["R", "L"]}},
                {{"op": "binary", "func": "add", "args": [0, 1], "dims": ["R", "L"]}}"#
            ),
            2,
        );
        assert!(recognise(&g).is_err());
    }
}
