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

/// Where a candidate came from: which mutator (and, for LLM mutators, which prompt variant and
/// model) produced it, and a short human-readable note of what it changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// Name of the mutator (`"seed"` for initial kernels).
    pub mutator: String,
    /// Prompt variant that produced it, when an LLM mutator did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_variant: Option<String>,
    /// Model that produced it, when an LLM mutator did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// What the mutation did, for example `"register blocking WPT=4"`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
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
