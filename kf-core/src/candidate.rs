//! Candidates: kernels proposed by a mutator, with their lineage.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::kernel::{KernelSource, Language, ParamValues};

/// Identifier of a candidate within one run. The engine assigns them in completion order, so a
/// seeded run numbers its candidates identically every time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CandidateId(pub u64);

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Where a candidate came from: which mutator (and, for LLM mutators, which prompt variant,
/// model and engine step) produced it, and a short human-readable note of what it changed.
///
/// Origins recorded before [`Origin::llm_step`] existed still load: an LLM mutator's note
/// then began with `llm step N: `, and `N` becomes the step.
///
/// ```
/// use kf_core::Origin;
///
/// let old: Origin = serde_json::from_str(
///     r#"{"mutator":"llm","prompt_variant":"v1","model":"m","note":"llm step 12: full rewrite"}"#,
/// )
/// .unwrap();
/// assert_eq!(old.llm_step, Some(12));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "OriginRecord")]
pub struct Origin {
    /// Name of the mutator (`"seed"` for initial kernels).
    pub mutator: String,
    /// Prompt variant that produced it, when an LLM mutator did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_variant: Option<String>,
    /// Model that produced it, when an LLM mutator did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The engine step whose LLM request produced it, when an LLM mutator did (the mutator
    /// finds its costs and prompt by this step when the child is credited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_step: Option<u64>,
    /// What the mutation did, for example `"register blocking WPT=4"`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// The archive cell the mutator aimed this child at, when it predicted one (an empty
    /// cell): tuning then keeps the child in that cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aimed_cell: Option<Vec<usize>>,
}

/// How an [`Origin`] is read: as written, plus the step of an LLM origin recorded before
/// [`Origin::llm_step`] existed (its note began with `llm step N: `).
#[derive(Deserialize)]
struct OriginRecord {
    mutator: String,
    #[serde(default)]
    prompt_variant: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    llm_step: Option<u64>,
    #[serde(default)]
    note: String,
    #[serde(default)]
    aimed_cell: Option<Vec<usize>>,
}

impl From<OriginRecord> for Origin {
    fn from(r: OriginRecord) -> Self {
        let llm_step = r.llm_step.or_else(|| legacy_llm_step(&r.note));
        Origin {
            mutator: r.mutator,
            prompt_variant: r.prompt_variant,
            model: r.model,
            llm_step,
            note: r.note,
            aimed_cell: r.aimed_cell,
        }
    }
}

/// The step of a note written by an LLM mutator before origins had [`Origin::llm_step`]
/// (`llm step 12: …`).
fn legacy_llm_step(note: &str) -> Option<u64> {
    let rest = note.strip_prefix("llm step ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

impl Origin {
    /// An origin naming only the mutator.
    pub fn mutator(name: impl Into<String>) -> Self {
        Origin {
            mutator: name.into(),
            ..Origin::default()
        }
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }

    /// Records the engine step of the LLM request that produced the candidate.
    pub fn with_llm_step(mut self, step: u64) -> Self {
        self.llm_step = Some(step);
        self
    }
}

/// What a mutator proposes: a kernel with parameter values and an origin. The engine turns each
/// offspring into a [`Candidate`] by giving it an id and its parents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offspring {
    /// The proposed kernel.
    pub source: KernelSource,
    /// Parameter values to build it with (the tuner may refine them).
    pub params: ParamValues,
    /// Which mutator made it, and how.
    pub origin: Origin,
    /// Other candidates it drew from besides the parent (crossover, inspirations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_from: Vec<CandidateId>,
    /// Why the mutator could not draw a kernel from its output (an LLM reply with no code
    /// block, edits that do not apply), when this child stands for such a failure; see
    /// [`Offspring::extraction_failure`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction_failure: Option<String>,
}

impl Offspring {
    /// An offspring with the given source, parameters and origin.
    pub fn new(source: KernelSource, params: ParamValues, origin: Origin) -> Self {
        Offspring {
            source,
            params,
            origin,
            also_from: Vec::new(),
            extraction_failure: None,
        }
    }

    /// A child standing for a mutator's failure to draw a kernel from its output, with the
    /// reason (made one line). It is evaluated and recorded like any other child: evaluators
    /// rank it [`crate::Status::ExtractionError`] with the reason as diagnostics, so that the
    /// next prompt that sees it can show the model why.
    ///
    /// The reason is in [`Offspring::extraction_failure`]; the source is one line, the
    /// [`EXTRACTION_FAILURE_MARKER`] and the reason, so that the failure also crosses
    /// boundaries that carry only a kernel source (an evaluation worker process, a
    /// distributed job) and reads back with [`extraction_failure_in`].
    ///
    /// ```
    /// use kf_core::{Candidate, CandidateId, Language, Offspring, Origin};
    ///
    /// let child = Offspring::extraction_failure(Language::OpenCl, "gemm", "no code block\nin the reply", Origin::mutator("llm"));
    /// assert_eq!(child.extraction_failure.as_deref(), Some("no code block in the reply"));
    /// let candidate = Candidate::from_offspring(CandidateId(4), None, child);
    /// assert_eq!(candidate.extraction_failure_reason(), Some("no code block in the reply"));
    /// assert_eq!(kf_core::extraction_failure_in(&candidate.source), Some("no code block in the reply"));
    /// ```
    pub fn extraction_failure(
        language: Language,
        entry: impl Into<String>,
        reason: &str,
        origin: Origin,
    ) -> Self {
        let one_line = reason.replace(['\n', '\r'], " ");
        let source = KernelSource::new(
            language,
            entry,
            format!("{EXTRACTION_FAILURE_MARKER}{one_line}\n"),
        );
        Offspring {
            extraction_failure: Some(one_line),
            ..Offspring::new(source, ParamValues::new(), origin)
        }
    }
}

/// First characters of the kernel text of a child that stands for an extraction failure
/// ([`Offspring::extraction_failure`]); the reason follows on the same line.
pub const EXTRACTION_FAILURE_MARKER: &str = "//! kf:extraction-error: ";

/// The reason, when `source` is the kernel text of an extraction failure
/// ([`Offspring::extraction_failure`]): for code that has only the source, such as an
/// evaluation worker. Code that has the candidate uses [`Candidate::extraction_failure_reason`].
pub fn extraction_failure_in(source: &KernelSource) -> Option<&str> {
    source
        .text
        .strip_prefix(EXTRACTION_FAILURE_MARKER)
        .map(|r| r.trim_end())
}

/// A kernel in the search: id, lineage, source, parameter values, origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Run-unique id.
    pub id: CandidateId,
    /// Parents (empty for seeds; the first is the selected parent).
    pub parents: Vec<CandidateId>,
    /// The kernel.
    pub source: KernelSource,
    /// Parameter values it is built with.
    pub params: ParamValues,
    /// Which mutator made it.
    pub origin: Origin,
    /// Why its mutator could not draw a kernel from its output, when it stands for such a
    /// failure ([`Offspring::extraction_failure`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extraction_failure: Option<String>,
}

impl Candidate {
    /// A seed candidate (no parents) with id 0; the engine renumbers seeds it is given.
    pub fn seed(source: KernelSource, params: ParamValues) -> Self {
        Candidate {
            id: CandidateId(0),
            parents: Vec::new(),
            source,
            params,
            origin: Origin::mutator("seed"),
            extraction_failure: None,
        }
    }

    /// Why its mutator could not draw a kernel from its output, when it stands for such a
    /// failure: [`Candidate::extraction_failure`], or for a candidate recorded before that
    /// field existed, the reason its source text carries ([`extraction_failure_in`]).
    pub fn extraction_failure_reason(&self) -> Option<&str> {
        self.extraction_failure
            .as_deref()
            .or_else(|| extraction_failure_in(&self.source))
    }

    /// Turns an offspring into a candidate.
    pub fn from_offspring(id: CandidateId, parent: Option<CandidateId>, child: Offspring) -> Self {
        let mut parents: Vec<CandidateId> = parent.into_iter().collect();
        parents.extend(child.also_from.into_iter().filter(|p| Some(*p) != parent));
        Candidate {
            id,
            parents,
            source: child.source,
            params: child.params,
            origin: child.origin,
            extraction_failure: child.extraction_failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_failures_are_typed_and_load_from_old_records() {
        let child = Offspring::extraction_failure(
            Language::Cuda,
            "k",
            "edits do not apply",
            Origin::mutator("llm"),
        );
        let c = Candidate::from_offspring(CandidateId(2), Some(CandidateId(1)), child);
        assert_eq!(c.extraction_failure.as_deref(), Some("edits do not apply"));
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Candidate>(&json).unwrap(), c);
        // A candidate recorded before the field existed: only its source says it.
        let mut old = c.clone();
        old.extraction_failure = None;
        let old_json = serde_json::to_string(&old).unwrap();
        assert!(!old_json.contains("\"extraction_failure\""));
        let loaded: Candidate = serde_json::from_str(&old_json).unwrap();
        assert_eq!(loaded.extraction_failure, None);
        assert_eq!(
            loaded.extraction_failure_reason(),
            Some("edits do not apply")
        );
        // Ordinary candidates serialise as before and have no reason.
        let seed = Candidate::seed(
            KernelSource::new(Language::OpenCl, "k", "x"),
            ParamValues::new(),
        );
        assert!(!serde_json::to_string(&seed).unwrap().contains("extraction"));
        assert_eq!(seed.extraction_failure_reason(), None);
    }

    #[test]
    fn origins_round_trip_with_their_llm_step() {
        let o = Origin::mutator("llm")
            .with_llm_step(7)
            .with_note("llm step 7: full rewrite");
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(
            json,
            r#"{"mutator":"llm","llm_step":7,"note":"llm step 7: full rewrite"}"#
        );
        assert_eq!(serde_json::from_str::<Origin>(&json).unwrap(), o);
    }

    #[test]
    fn origins_without_a_step_serialize_as_before() {
        let o = Origin::mutator("param").with_note("TS 8 -> 16");
        assert_eq!(
            serde_json::to_string(&o).unwrap(),
            r#"{"mutator":"param","note":"TS 8 -> 16"}"#
        );
    }

    #[test]
    fn origins_recorded_before_llm_step_still_load() {
        // As written by kf-prompt into run directories before `llm_step` existed.
        let old = r#"{"mutator":"llm","prompt_variant":"v3","model":"gpt-x","note":"llm step 12: extraction error"}"#;
        let o: Origin = serde_json::from_str(old).unwrap();
        assert_eq!(o.llm_step, Some(12));
        assert_eq!(o.note, "llm step 12: extraction error");
        assert_eq!(o.prompt_variant.as_deref(), Some("v3"));
        let seed: Origin = serde_json::from_str(r#"{"mutator":"seed"}"#).unwrap();
        assert_eq!(seed, Origin::mutator("seed"));
        let other: Origin =
            serde_json::from_str(r#"{"mutator":"param","note":"llm step x"}"#).unwrap();
        assert_eq!(other.llm_step, None);
        // A recorded step wins over the note.
        let both: Origin =
            serde_json::from_str(r#"{"mutator":"llm","llm_step":3,"note":"llm step 12: x"}"#)
                .unwrap();
        assert_eq!(both.llm_step, Some(3));
    }
}
