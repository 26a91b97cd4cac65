//! Candidates of several kernels: a manifest's `[[kernels]]` (an ordered sequence, each with
//! its launch and the buffers it writes) and `[[scratch]]` (device buffers sized by
//! expressions that only the sequence's kernels use).
//!
//! ```toml
//! entry = "row_stats"            # the kernel that names the candidate: one of the sequence
//! language = "opencl"
//! [params]
//! WG = [64, 128]
//! [[scratch]]
//! name = "stats"                 # appended to every kernel's arguments, in this order
//! dtype = "f32"
//! elements = "2 * ROWS"
//! [[kernels]]
//! entry = "row_stats"
//! writes = ["stats"]
//! launch = { global = ["ROWS * WG"], local = ["WG"] }
//! [[kernels]]
//! entry = "normalise"
//! writes = ["Y"]
//! launch = { global = ["ROWS", "COLS"] }
//! ```
//!
//! Every kernel of a sequence takes the task's arguments in the task's order followed by the
//! scratch buffers in declaration order. The evaluator launches the kernels one after the
//! other, checks after each that it wrote only what it lists in `writes` and that each
//! scratch buffer it lists is written whole, and times the sequence as one launch.

use serde::Deserialize;

use crate::error::ManifestError;
use crate::expr::{Expr, ExprSite, Symbols};

/// Most kernels a sequence may hold.
pub const MAX_SEQUENCE_KERNELS: usize = 16;

/// Most scratch buffers a manifest may declare.
pub const MAX_SCRATCH_BUFFERS: usize = 16;

/// The element type of a scratch buffer: the evaluator's buffer types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScratchElement {
    /// `float`.
    F32,
    /// `half`.
    F16,
    /// `int`.
    I32,
}

impl ScratchElement {
    /// The name written in manifests (`f32`, `f16`, `i32`), the same as task files'.
    pub fn name(self) -> &'static str {
        match self {
            ScratchElement::F32 => "f32",
            ScratchElement::F16 => "f16",
            ScratchElement::I32 => "i32",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ScratchElement::F32 | ScratchElement::I32 => 4,
            ScratchElement::F16 => 2,
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "f32" | "float" => Some(ScratchElement::F32),
            "f16" | "half" => Some(ScratchElement::F16),
            "i32" | "int" => Some(ScratchElement::I32),
            _ => None,
        }
    }
}

/// A device buffer of the candidate's own (`[[scratch]]`): poisoned before every launch of
/// the sequence, guarded like the task's buffers, and passed to every kernel after the task's
/// arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ScratchBuffer {
    /// Its name, unique among the scratch buffers (and, as the evaluator checks, distinct
    /// from the task's buffer names).
    pub name: String,
    /// Its element type.
    pub element: ScratchElement,
    /// Its number of elements: an expression over parameters, sizes and device facts.
    pub elements: Expr,
}

/// One kernel of a sequence (`[[kernels]]`).
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceKernel {
    /// The kernel function's name in the candidate's source.
    pub entry: String,
    /// Global size per dimension.
    pub global: Vec<Expr>,
    /// Work-group size per dimension (`None`: the runtime chooses).
    pub local: Option<Vec<Expr>>,
    /// The buffers it writes: task outputs and scratch buffers, by name.
    pub writes: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScratch {
    name: String,
    dtype: String,
    elements: crate::raw::RawExpr,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKernel {
    entry: String,
    launch: crate::raw::RawLaunch,
    writes: Vec<String>,
}

pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn invalid(file: &str, field: String, message: String) -> ManifestError {
    ManifestError::Invalid {
        file: file.to_owned(),
        field,
        message,
    }
}

/// The scratch buffers of a manifest, checked: identifiers, unique, a known element type.
pub(crate) fn parse_scratch(
    raw: Vec<RawScratch>,
    file: &str,
) -> Result<Vec<ScratchBuffer>, ManifestError> {
    if raw.len() > MAX_SCRATCH_BUFFERS {
        return Err(invalid(
            file,
            "scratch".into(),
            format!(
                "declares {} buffers; at most {MAX_SCRATCH_BUFFERS}",
                raw.len()
            ),
        ));
    }
    let mut out: Vec<ScratchBuffer> = Vec::with_capacity(raw.len());
    for (i, s) in raw.into_iter().enumerate() {
        let field = format!("scratch[{i}]");
        if !is_identifier(&s.name) {
            return Err(invalid(
                file,
                format!("{field}.name"),
                format!("`{}` is not a valid buffer name", s.name),
            ));
        }
        if out.iter().any(|o| o.name == s.name) {
            return Err(invalid(
                file,
                format!("{field}.name"),
                format!("`{}` is declared twice", s.name),
            ));
        }
        let Some(element) = ScratchElement::parse(&s.dtype) else {
            return Err(invalid(
                file,
                format!("{field}.dtype"),
                format!("`{}` is not one of f32, f16, i32", s.dtype),
            ));
        };
        let site = ExprSite {
            file: file.to_owned(),
            field: format!("{field}.elements"),
        };
        out.push(ScratchBuffer {
            name: s.name,
            element,
            elements: Expr::parse(&s.elements.text(), &site)?,
        });
    }
    Ok(out)
}

/// The kernels of a sequence, checked: names, launches, and `writes` lists that are not
/// empty, name no buffer twice, and together write every scratch buffer.
pub(crate) fn parse_kernels(
    raw: Vec<RawKernel>,
    scratch: &[ScratchBuffer],
    file: &str,
) -> Result<Vec<SequenceKernel>, ManifestError> {
    if raw.len() > MAX_SEQUENCE_KERNELS {
        return Err(invalid(
            file,
            "kernels".into(),
            format!(
                "lists {} kernels; a sequence holds at most {MAX_SEQUENCE_KERNELS}",
                raw.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(raw.len());
    for (i, k) in raw.into_iter().enumerate() {
        let field = format!("kernels[{i}]");
        if !is_identifier(&k.entry) {
            return Err(invalid(
                file,
                format!("{field}.entry"),
                format!("`{}` is not a function name", k.entry),
            ));
        }
        if k.writes.is_empty() {
            return Err(invalid(
                file,
                format!("{field}.writes"),
                "lists no buffer: every kernel of a sequence writes something".into(),
            ));
        }
        for (j, name) in k.writes.iter().enumerate() {
            if !is_identifier(name) {
                return Err(invalid(
                    file,
                    format!("{field}.writes[{j}]"),
                    format!("`{name}` is not a buffer name"),
                ));
            }
            if k.writes[..j].contains(name) {
                return Err(invalid(
                    file,
                    format!("{field}.writes[{j}]"),
                    format!("`{name}` is listed twice"),
                ));
            }
        }
        let (global, local) = k.launch.parse(file, &format!("{field}.launch"))?;
        out.push(SequenceKernel {
            entry: k.entry,
            global,
            local,
            writes: k.writes,
        });
    }
    if let Some(unwritten) = scratch
        .iter()
        .find(|s| !out.iter().any(|k| k.writes.contains(&s.name)))
    {
        return Err(invalid(
            file,
            "scratch".into(),
            format!(
                "`{}` is written by no kernel of the sequence (list it in a kernel's `writes`)",
                unwritten.name
            ),
        ));
    }
    Ok(out)
}

impl ScratchBuffer {
    /// Its number of elements at `symbols` (a positive integer).
    ///
    /// # Errors
    ///
    /// The expression's error, or [`ManifestError::NotPositive`].
    pub fn elements_at(&self, symbols: &Symbols, file: &str) -> Result<usize, ManifestError> {
        self.elements.eval_positive(
            symbols,
            &ExprSite {
                file: file.to_owned(),
                field: format!("scratch `{}`.elements", self.name),
            },
        )
    }
}
