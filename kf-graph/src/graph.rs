//! The operator graph: nodes in evaluation order, each an operation over earlier nodes, with
//! its shape as one size expression per dimension (`"ROWS"`, `"(N) / (4)"`, `"1"`), in the
//! syntax of task files' size expressions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::GraphError;

/// A node's index in [`Graph::nodes`].
pub type NodeId = usize;

/// An operator as a graph of operations over its named inputs, with symbolic shapes.
///
/// ```
/// use kf_graph::{Graph, Op};
///
/// let trace = r#"{"nodes": [
///     {"op": "input", "name": "x", "dims": ["N"]},
///     {"op": "unary", "func": "exp", "arg": 0, "dims": ["N"]}],
///   "outputs": {"y": 1}}"#;
/// let graph = Graph::from_trace(trace)?;
/// assert!(matches!(graph.nodes[1].op, Op::Unary { .. }));
/// assert_eq!(graph.inputs().collect::<Vec<_>>(), [(0, "x")]);
/// # Ok::<(), kf_graph::GraphError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// The operations, each reading only nodes before it.
    pub nodes: Vec<Node>,
    /// The operator's results by name (a task's output buffers).
    pub outputs: BTreeMap<String, NodeId>,
}

/// One operation and the shape of its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// What the node computes.
    #[serde(flatten)]
    pub op: Op,
    /// The result's shape: one size expression per dimension, `"1"` for a dimension of one.
    pub dims: Vec<String>,
}

/// An operation. Element-wise operations broadcast as NumPy does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// An input buffer of the task.
    Input {
        /// The buffer's name.
        name: String,
    },
    /// A number written in the reference.
    Constant {
        /// Its value.
        value: f64,
    },
    /// A size of the task used as a number (`x / sizes["L"]`, `x.shape[-1]`).
    Size {
        /// Its expression over the task's sizes.
        expr: String,
        /// Its value when traced.
        value: f64,
    },
    /// A scalar of the task, used by name.
    Scalar {
        /// The scalar's name.
        name: String,
        /// Its value when traced.
        value: f64,
    },
    /// An element-wise function of one operand.
    Unary {
        /// The function.
        func: UnaryFn,
        /// The operand.
        arg: NodeId,
    },
    /// An element-wise function of two operands.
    Binary {
        /// The function.
        func: BinaryFn,
        /// The operands.
        args: [NodeId; 2],
    },
    /// An element-wise comparison (a condition for [`Op::Select`]).
    Compare {
        /// The comparison.
        func: CompareFn,
        /// The operands.
        args: [NodeId; 2],
    },
    /// `args[1]` where the condition `args[0]` holds, else `args[2]`.
    Select {
        /// Condition, then, else.
        args: [NodeId; 3],
    },
    /// A reduction along `axes`.
    Reduce {
        /// The reduction.
        func: ReduceFn,
        /// The operand.
        arg: NodeId,
        /// The reduced axes of the operand, ascending.
        axes: Vec<usize>,
        /// Whether the reduced axes stay as dimensions of one.
        keepdims: bool,
    },
    /// A prefix scan along `axis`.
    Scan {
        /// The scan.
        func: ScanFn,
        /// The operand.
        arg: NodeId,
        /// The scanned axis.
        axis: usize,
    },
    /// The product of two matrices.
    Matmul {
        /// The factors.
        args: [NodeId; 2],
    },
    /// The same elements in another shape (row-major order), including added or removed
    /// dimensions of one.
    Reshape {
        /// The operand.
        arg: NodeId,
    },
    /// The dimensions permuted: dimension `i` of the result is dimension `perm[i]` of the operand.
    Transpose {
        /// The operand.
        arg: NodeId,
        /// The permutation.
        perm: Vec<usize>,
    },
}

/// Element-wise functions of one operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // the names are NumPy's
pub enum UnaryFn {
    Negative,
    Abs,
    Exp,
    Expm1,
    Log,
    Log1p,
    Sqrt,
    Square,
    Reciprocal,
    Sin,
    Cos,
    Tanh,
    Sign,
    Floor,
    Ceil,
}

/// Element-wise functions of two operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // the names are NumPy's
pub enum BinaryFn {
    Add,
    Subtract,
    Multiply,
    Divide,
    Power,
    Maximum,
    Minimum,
}

/// Element-wise comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // the names are NumPy's
pub enum CompareFn {
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
    Equal,
    NotEqual,
}

/// Reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // the names are NumPy's
pub enum ReduceFn {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

/// Prefix scans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // the names are NumPy's
pub enum ScanFn {
    Cumsum,
    Cumprod,
}

/// The tracer's answer: a graph, or the construct it does not know.
#[derive(Deserialize)]
#[serde(untagged)]
enum Trace {
    Unsupported {
        unsupported: String,
        #[serde(default)]
        detail: String,
    },
    Graph(Graph),
}

impl Op {
    /// The nodes this operation reads.
    pub fn args(&self) -> Vec<NodeId> {
        match self {
            Op::Input { .. } | Op::Constant { .. } | Op::Size { .. } | Op::Scalar { .. } => {
                Vec::new()
            }
            Op::Unary { arg, .. }
            | Op::Reduce { arg, .. }
            | Op::Scan { arg, .. }
            | Op::Reshape { arg }
            | Op::Transpose { arg, .. } => vec![*arg],
            Op::Binary { args, .. } | Op::Compare { args, .. } | Op::Matmul { args } => {
                args.to_vec()
            }
            Op::Select { args } => args.to_vec(),
        }
    }
}

impl Graph {
    /// Reads a tracer's JSON answer (the format this type serialises to, or
    /// `{"unsupported": construct, "detail": text}`) and checks the graph: every node reads
    /// only nodes before it, axes and permutations fit their operand, every output names a node.
    pub fn from_trace(json: &str) -> Result<Graph, GraphError> {
        match serde_json::from_str::<Trace>(json) {
            Ok(Trace::Unsupported {
                unsupported,
                detail,
            }) => Err(GraphError::Unsupported {
                construct: unsupported,
                detail,
            }),
            Ok(Trace::Graph(graph)) => {
                graph.check()?;
                Ok(graph)
            }
            // An untagged enum's error says only that no variant matched: parse as a graph
            // again for the field and line at fault.
            Err(_) => {
                let graph: Graph = serde_json::from_str(json)?;
                graph.check()?;
                Ok(graph)
            }
        }
    }

    /// Checks what [`Graph::from_trace`] promises.
    pub fn check(&self) -> Result<(), GraphError> {
        for (id, node) in self.nodes.iter().enumerate() {
            if let Some(&arg) = node.op.args().iter().find(|&&a| a >= id) {
                return Err(GraphError::Order { node: id, arg });
            }
            let rank_of = |a: NodeId| self.nodes[a].dims.len();
            let problem = match &node.op {
                Op::Reduce { arg, axes, .. } => axes
                    .iter()
                    .find(|&&a| a >= rank_of(*arg))
                    .map(|a| format!("reduces axis {a} of a {}-D operand", rank_of(*arg))),
                Op::Scan { arg, axis, .. } => (*axis >= rank_of(*arg))
                    .then(|| format!("scans axis {axis} of a {}-D operand", rank_of(*arg))),
                Op::Transpose { arg, perm } => {
                    let mut sorted = perm.clone();
                    sorted.sort_unstable();
                    (sorted != (0..rank_of(*arg)).collect::<Vec<_>>())
                        .then(|| format!("{perm:?} does not permute {} dimensions", rank_of(*arg)))
                }
                Op::Matmul { args } => (rank_of(args[0]) != 2 || rank_of(args[1]) != 2)
                    .then(|| "multiplies operands that are not matrices".to_owned()),
                _ => None,
            };
            if let Some(problem) = problem {
                return Err(GraphError::Shape { node: id, problem });
            }
        }
        if self.outputs.is_empty() {
            return Err(GraphError::Output("none: the graph has no output".into()));
        }
        if let Some((name, id)) = self.outputs.iter().find(|(_, &id)| id >= self.nodes.len()) {
            return Err(GraphError::Output(format!(
                "`{name}` names node {id}, but the graph has {} nodes",
                self.nodes.len()
            )));
        }
        Ok(())
    }

    /// The input nodes with their buffer names, in graph order.
    pub fn inputs(&self) -> impl Iterator<Item = (NodeId, &str)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(id, n)| match &n.op {
                Op::Input { name } => Some((id, name.as_str())),
                _ => None,
            })
    }

    /// The nodes `output` depends on (itself included), in graph order.
    pub fn cone(&self, output: NodeId) -> Vec<NodeId> {
        let mut needed = vec![false; self.nodes.len()];
        if let Some(flag) = needed.get_mut(output) {
            *flag = true;
        }
        for id in (0..self.nodes.len()).rev() {
            if needed[id] {
                for a in self.nodes[id].op.args() {
                    needed[a] = true;
                }
            }
        }
        (0..self.nodes.len()).filter(|&i| needed[i]).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsupported_construct_is_an_error_naming_it() {
        let err = Graph::from_trace(r#"{"unsupported": "np.fft.fft", "detail": "ref.py:4"}"#)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the tracer does not know np.fft.fft (ref.py:4)"
        );
    }

    #[test]
    fn a_node_reading_a_later_node_is_refused() {
        let err = Graph::from_trace(
            r#"{"nodes": [{"op": "unary", "func": "exp", "arg": 1, "dims": []},
                          {"op": "constant", "value": 1.0, "dims": []}], "outputs": {"y": 0}}"#,
        )
        .unwrap_err();
        assert!(
            matches!(err, GraphError::Order { node: 0, arg: 1 }),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_function_is_malformed_and_named() {
        let err = Graph::from_trace(
            r#"{"nodes": [{"op": "input", "name": "x", "dims": ["N"]},
                          {"op": "unary", "func": "gamma", "arg": 0, "dims": ["N"]}],
                "outputs": {"y": 1}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("gamma"), "{err}");
    }

    #[test]
    fn axes_outside_the_operand_and_missing_outputs_are_refused() {
        let reduce = r#"{"nodes": [{"op": "input", "name": "x", "dims": ["N"]},
            {"op": "reduce", "func": "sum", "arg": 0, "axes": [1], "keepdims": false, "dims": []}],
            "outputs": {"y": 1}}"#;
        assert!(matches!(
            Graph::from_trace(reduce).unwrap_err(),
            GraphError::Shape { node: 1, .. }
        ));
        let missing =
            r#"{"nodes": [{"op": "input", "name": "x", "dims": ["N"]}], "outputs": {"y": 3}}"#;
        assert!(matches!(
            Graph::from_trace(missing).unwrap_err(),
            GraphError::Output(_)
        ));
    }
}
