//! The crate's errors: a trace that is not a graph, and a construct the tracer does not know.

/// Why a trace did not become a [`crate::Graph`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The reference does something the tracer does not know: there is no graph (never a
    /// wrong one). `construct` names it (`np.fft.fft`, `indexing an array`), `detail` says
    /// where (`ref.py:12`) or with which arguments.
    #[error("the tracer does not know {construct}{}", if detail.is_empty() { String::new() } else { format!(" ({detail})") })]
    Unsupported {
        /// The construct, as the reference wrote it.
        construct: String,
        /// Where it was met, or its arguments; may be empty.
        detail: String,
    },
    /// The trace's text is not the graph format.
    #[error("the trace is not an operator graph: {0}")]
    Malformed(#[from] serde_json::Error),
    /// A node reads a node that does not come before it.
    #[error("node {node} reads node {arg}, which does not come before it")]
    Order {
        /// The reading node.
        node: usize,
        /// The node it reads.
        arg: usize,
    },
    /// An axis or a permutation does not fit the operand's rank.
    #[error("node {node}: {problem}")]
    Shape {
        /// The node.
        node: usize,
        /// What does not fit.
        problem: String,
    },
    /// An output names no node, or the graph has no output.
    #[error("output {0}")]
    Output(String),
}
