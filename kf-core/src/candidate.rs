//! Candidates: kernels proposed by a mutator, with their lineage.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::kernel::{KernelSource, ParamValues};

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
}

impl Offspring {
    /// An offspring with the given source, parameters and origin.
    pub fn new(source: KernelSource, params: ParamValues, origin: Origin) -> Self {
        Offspring {
            source,
            params,
            origin,
            also_from: Vec::new(),
        }
    }
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
        }
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
