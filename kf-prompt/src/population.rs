//! Meta-prompt co-evolution: a population of prompt variants, credit by what their children did
//! for the archive, and periodic meta-calls that rewrite one component of a good variant.
//!
//! Determinism is what makes record/replay and resume exact, and steps may run concurrently, so
//! every decision is a function of the step alone:
//!
//! * Credit events are tagged with the engine step of the child's request, and a request at
//!   step `s` sees only the credit of steps `≤ s − lag` (with `lag ≥` the engine's
//!   `max_in_flight`, those steps have completed, in order, by the time step `s` starts).
//! * Epoch `e` (`e ≥ 1`) starts at step `e · every`: its meta-call sees the population and the
//!   credit as of step `e · every − lag`, draws its component and strategy from a seed derived
//!   from the mutator's seed and `e`, and its variant is visible to every step `≥ e · every`.
//!   Whichever request first needs the variant makes the call; others wait for it. An epoch
//!   whose credit holds no judged child of the LLM makes no call (there is nothing to learn
//!   from yet) and no variant.

use kf_core::{CandidateId, InsertOutcome, Status};
use serde::{Deserialize, Serialize};

use crate::bandit::ArmStats;
use crate::components::PromptComponents;

/// One prompt variant: a full set of components and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptVariant {
    /// Identifier recorded in each child's origin (`v0`, `v3`, …).
    pub id: String,
    /// The variant it was rewritten from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The epoch that made it (0 for the initial variants).
    pub epoch: u64,
    /// The component the meta-call rewrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<String>,
    /// The meta strategy used (`improve`, `specialise`, `generalise`, `simplify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Its components.
    pub components: PromptComponents,
}

impl PromptVariant {
    /// An initial variant.
    pub fn initial(id: impl Into<String>, components: PromptComponents) -> Self {
        PromptVariant {
            id: id.into(),
            parent: None,
            epoch: 0,
            changed: None,
            strategy: None,
            components,
        }
    }
}

/// Settings of meta-prompt evolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetaConfig {
    /// Steps per epoch; a meta-call opens each epoch after the first. 0 turns evolution off.
    pub every_steps: u64,
    /// Steps of delay before credit counts (set it to at least the engine's `max_in_flight`).
    pub lag_steps: u64,
    /// Variants the bandit chooses among (the best by posterior mean, plus the newest).
    pub max_active: usize,
    /// Longest component text a meta-call may write.
    pub max_component_chars: usize,
    /// Reply token limit of meta-calls.
    pub max_reply_tokens: u32,
    /// Meta strategies to draw from (names of the templates' `[strategies]`); empty: all.
    pub strategies: Vec<String>,
    /// Model of meta-calls (default: the first model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Default for MetaConfig {
    fn default() -> Self {
        MetaConfig {
            every_steps: 8,
            lag_steps: 4,
            max_active: 6,
            max_component_chars: 1_500,
            max_reply_tokens: 768,
            strategies: Vec::new(),
            model: None,
        }
    }
}

impl MetaConfig {
    /// No meta-prompt evolution.
    pub fn off() -> Self {
        MetaConfig {
            every_steps: 0,
            ..MetaConfig::default()
        }
    }
}

/// How an archive outcome becomes a reward in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CreditConfig {
    /// Reward of a child that filled an empty cell.
    pub new_cell: f64,
    /// Reward of the smallest improvement of an elite.
    pub improved_base: f64,
    /// Gain at which an improvement earns the full reward (between, it grows linearly).
    pub gain_scale: f64,
}

impl Default for CreditConfig {
    fn default() -> Self {
        CreditConfig {
            new_cell: 1.0,
            improved_base: 0.3,
            gain_scale: 1.0,
        }
    }
}

impl CreditConfig {
    /// The reward of an outcome: a new cell, an improvement by its gain, or nothing.
    ///
    /// ```
    /// use kf_core::{Fitness, InsertOutcome};
    /// use kf_prompt::CreditConfig;
    ///
    /// let c = CreditConfig::default();
    /// assert_eq!(c.reward(&InsertOutcome::NewCell), 1.0);
    /// let small = InsertOutcome::Improved { previous: Fitness::MIN, gain: 0.1 };
    /// let big = InsertOutcome::Improved { previous: Fitness::MIN, gain: 2.0 };
    /// assert!(c.reward(&small) < c.reward(&big));
    /// assert_eq!(c.reward(&InsertOutcome::NotAdded { incumbent: Fitness::MIN }), 0.0);
    /// ```
    pub fn reward(&self, outcome: &InsertOutcome) -> f64 {
        let r = match outcome {
            InsertOutcome::NewCell => self.new_cell,
            InsertOutcome::Improved { gain, .. } => {
                let scale = if self.gain_scale > 0.0 {
                    self.gain_scale
                } else {
                    1.0
                };
                let frac = (gain / scale).clamp(0.0, 1.0);
                self.improved_base + (1.0 - self.improved_base) * frac
            }
            InsertOutcome::NotAdded { .. } => 0.0,
        };
        if r.is_finite() {
            r.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// What became of one child of the LLM mutator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditEvent {
    /// The engine step of its request.
    pub step: u64,
    /// The child.
    pub child: CandidateId,
    /// Its parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<CandidateId>,
    /// The prompt variant that produced it.
    pub variant: String,
    /// The model that wrote it.
    pub model: String,
    /// Its reward.
    pub reward: f64,
    /// Cost of the step's requests, US dollars.
    pub cost_usd: f64,
    /// Where it landed on the ladder.
    pub status: Status,
    /// How it was made.
    pub how: String,
    /// What it did for the archive.
    pub outcome: String,
    /// Its diagnostics, summarised.
    pub diagnostics: String,
    /// Its [`crate::fingerprint`] (source and manifest), to recognise a reply that repeats it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// `new cell`, `improved by 0.42`, `not added`.
pub fn describe_outcome(outcome: &InsertOutcome) -> String {
    match outcome {
        InsertOutcome::NewCell => "new cell".into(),
        InsertOutcome::Improved { gain, .. } => format!("improved its cell by {gain:.3}"),
        InsertOutcome::NotAdded { .. } => "not added".into(),
    }
}

/// A variant with what it has earned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantReport {
    /// The variant.
    pub variant: PromptVariant,
    /// Its credit so far.
    pub stats: ArmStats,
    /// Children that filled a new cell.
    pub new_cells: u64,
    /// Children that improved an elite.
    pub improvements: u64,
}

/// The text a meta-call shows about a variant's children.
pub(crate) fn stats_text(events: &[&CreditEvent], max_chars: usize) -> String {
    if events.is_empty() {
        return "No kernel written with these instructions has been judged yet.".into();
    }
    let n = events.len();
    let new_cells = events.iter().filter(|e| e.outcome == "new cell").count();
    let improved = events
        .iter()
        .filter(|e| e.outcome.starts_with("improved"))
        .count();
    let mut by_status: Vec<(Status, usize)> = Vec::new();
    for e in events {
        match by_status.iter_mut().find(|(s, _)| *s == e.status) {
            Some((_, c)) => *c += 1,
            None => by_status.push((e.status, 1)),
        }
    }
    let statuses: Vec<String> = by_status.iter().map(|(s, c)| format!("{c} {s}")).collect();
    let mut out = format!(
        "{n} kernels judged: {new_cells} filled a new cell, {improved} improved an elite; statuses: {}.",
        statuses.join(", ")
    );
    let failures: Vec<&&CreditEvent> = events
        .iter()
        .rev()
        .filter(|e| e.status != Status::Correct && !e.diagnostics.is_empty())
        .take(2)
        .collect();
    for f in failures {
        out.push_str(&format!(
            "\nA recent {}: {}",
            f.status,
            f.diagnostics.replace('\n', " ")
        ));
    }
    crate::render::clip(&out, max_chars)
}
