//! A seeded simulation of an LLM for experiments on prompt evolution (the `llm_ablation`
//! example): [`SimulatedLlm`] answers child requests with synthetic kernels whose chance of
//! being a correct improvement depends on which advice lines the prompt shows (and whether its
//! pitfalls section is shown at all), with noise; it answers meta-calls by editing the section
//! it is shown, a little better than at random. [`SimEvaluator`] and [`SimClassifier`] judge
//! and place its kernels from markers in their source, so the real engine, archive, prompt
//! population, bandit and meta-prompt code run unchanged around it.
//!
//! What it can and cannot say: it tests whether the machinery (credit by archive outcome, the
//! bandit over variants, meta-rewrites that keep what earned credit) finds and keeps the prompt
//! contents that the *simulation* rewards, and what the meta-calls cost out of a fixed call
//! budget. It says nothing about how much real models react to prompt contents, which advice
//! helps a real model, or how good real meta-rewrites are: those are the parameters of
//! [`SimModel`], chosen by hand.
//!
//! ```
//! use kf_prompt::simulate::{SimModel, SimulatedLlm};
//! use kf_prompt::{ChatMessage, ChatRequest, LlmClient};
//!
//! let llm = SimulatedLlm::new(SimModel::default(), 7);
//! let prompt = "## Strategies\n- Stage tiles of both inputs in local memory and synchronise with barriers.\n\
//!               ```opencl\n// sim: quality=1.0000 cell=0\n__kernel void simk(__global float* x) {}\n```";
//! let request = ChatRequest::new("sim", vec![ChatMessage::user(prompt)]).with_seed(3);
//! let reply = futures::executor::block_on(llm.complete(&request))?;
//! assert!(reply.usage.total() > 0);
//! assert_eq!(llm.calls().len(), 1);
//! # Ok::<(), kf_prompt::LlmFailure>(())
//! ```

use std::convert::Infallible;
use std::sync::Mutex;

use async_trait::async_trait;
use kf_core::{
    BehaviorClassifier, Candidate, Descriptor, DescriptorSpace, Dimension, Evaluation, Evaluator,
    KernelSource, Language, ParamValues, Status, TimingStats,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::client::{ChatRequest, ChatResponse, LlmClient, TokenUsage};
use crate::components::{Component, PromptComponents};
use crate::error::{FailureKind, LlmFailure};

/// One line of advice the simulated model may be shown, with its hidden effect.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    /// The line as it appears in a prompt component.
    pub text: &'static str,
    /// Added to the log-odds of an improving, correct child when the prompt shows it.
    pub success_logit: f64,
    /// Added to the chance that a child lands in another cell.
    pub explore: f64,
}

/// The hidden truth of the simulation. Its numbers are choices, not measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct SimModel {
    /// Every advice line there is.
    pub advice: Vec<Advice>,
    /// Log-odds of an improving child with no advice.
    pub base_logit: f64,
    /// Added when the prompt shows a "Common pitfalls" section with any text.
    pub pitfalls_logit: f64,
    /// Standard deviation of per-call noise on the log-odds.
    pub noise_sd: f64,
    /// Mean relative gain of an improving child (exponentially distributed).
    pub mean_gain: f64,
    /// Chance that a child leaves its parent's cell, before advice.
    pub base_explore: f64,
    /// Of the children that do not improve: the share that are buggy (wrong values) and the
    /// share without a code block (extraction error); the rest are correct but slower.
    pub bug_share: f64,
    /// See `bug_share`.
    pub no_code_share: f64,
    /// Chance that a meta-call adding a line picks the most helpful line not yet shown
    /// (otherwise any line not shown, helpful or not).
    pub meta_insight: f64,
    /// Cells of the one behaviour dimension.
    pub cells: usize,
}

impl Default for SimModel {
    fn default() -> Self {
        let a = |text, success_logit, explore| Advice {
            text,
            success_logit,
            explore,
        };
        SimModel {
            advice: vec![
                a(
                    "- Stage tiles of both inputs in local memory and synchronise with barriers.",
                    0.9,
                    0.0,
                ),
                a(
                    "- Give each work-item a small block of outputs kept in registers.",
                    0.7,
                    0.0,
                ),
                a(
                    "- Load four floats at a time with vload4 where rows are aligned.",
                    0.6,
                    0.0,
                ),
                a(
                    "- Check every index against the bounds before a load or a store.",
                    0.5,
                    0.0,
                ),
                a(
                    "- Try a memory access pattern different from the parent's.",
                    0.0,
                    0.25,
                ),
                a("- Prefer descriptive variable names.", 0.0, 0.0),
                a("- Keep the kernel under 200 lines.", 0.0, 0.0),
                a("- Use double precision for every accumulator.", -0.6, 0.0),
                a(
                    "- Avoid barriers entirely; they are always slow.",
                    -0.5,
                    0.0,
                ),
                a(
                    "- Unroll every loop completely whatever its trip count.",
                    -0.4,
                    0.0,
                ),
                a(
                    "- Launch one work-item per matrix rather than per element.",
                    -0.8,
                    -0.05,
                ),
            ],
            base_logit: -1.6,
            pitfalls_logit: 0.3,
            noise_sd: 0.4,
            mean_gain: 0.12,
            base_explore: 0.12,
            bug_share: 0.35,
            no_code_share: 0.15,
            meta_insight: 0.35,
            cells: 8,
        }
    }
}

impl SimModel {
    /// Indices of the advice lines `text` shows.
    pub fn shown(&self, text: &str) -> Vec<usize> {
        (0..self.advice.len())
            .filter(|&i| text.contains(self.advice[i].text))
            .collect()
    }

    /// The noiseless log-odds of an improving child for a prompt showing `text`.
    pub fn logit(&self, text: &str) -> f64 {
        let advice: f64 = self
            .shown(text)
            .iter()
            .map(|&i| self.advice[i].success_logit)
            .sum();
        let pitfalls = if shows_pitfalls(text) {
            self.pitfalls_logit
        } else {
            0.0
        };
        self.base_logit + advice + pitfalls
    }

    /// The noiseless chance of an improving child for prompt components `c` (the hidden value
    /// of a prompt variant).
    pub fn value(&self, c: &PromptComponents) -> f64 {
        sigmoid(self.logit(&c.render()))
    }
}

fn shows_pitfalls(text: &str) -> bool {
    // The section is rendered only when it has text.
    text.contains("## Common pitfalls")
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// What the simulated model saw in one call.
#[derive(Debug, Clone, PartialEq)]
pub struct SimCall {
    /// A meta-call (rewriting a section) rather than a child request.
    pub meta: bool,
    /// Advice lines the prompt showed.
    pub shown: Vec<usize>,
    /// Whether the pitfalls section was shown.
    pub pitfalls: bool,
    /// For a child request: whether the model wrote an improving, correct child.
    pub improved: bool,
}

/// The simulated model, an [`LlmClient`]. Its answers depend only on its seed and the request,
/// so runs are reproducible.
#[derive(Debug)]
pub struct SimulatedLlm {
    model: SimModel,
    seed: u64,
    calls: Mutex<Vec<SimCall>>,
}

impl SimulatedLlm {
    /// A simulated model with hidden truth `model`.
    pub fn new(model: SimModel, seed: u64) -> Self {
        SimulatedLlm {
            model,
            seed,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<SimCall> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn rng(&self, request: &ChatRequest) -> ChaCha8Rng {
        let h = blake3::hash(format!("{}:{}", self.seed, request.content_hash()).as_bytes());
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(h.as_bytes());
        ChaCha8Rng::from_seed(bytes)
    }

    fn log(&self, call: SimCall) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }

    /// A meta-call: edit the section between the first ```text fence and its end.
    fn meta(&self, prompt: &str, rng: &mut ChaCha8Rng) -> String {
        let m = &self.model;
        let section = prompt
            .split_once("```text\n")
            .and_then(|(_, rest)| rest.split_once("\n```"))
            .map(|(s, _)| s.to_owned())
            .unwrap_or_default();
        let mut lines: Vec<String> = section
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.trim().is_empty())
            .collect();
        let shown = m.shown(&section);
        self.log(SimCall {
            meta: true,
            shown: shown.clone(),
            pitfalls: false,
            improved: false,
        });
        let hidden: Vec<usize> = (0..m.advice.len()).filter(|i| !shown.contains(i)).collect();
        let roll: f64 = rng.random();
        if (roll < 0.6 || lines.is_empty()) && !hidden.is_empty() {
            // Add a line: the most helpful one with insight, else any.
            let pick = if rng.random::<f64>() < m.meta_insight {
                *hidden
                    .iter()
                    .max_by(|a, b| {
                        m.advice[**a]
                            .success_logit
                            .total_cmp(&m.advice[**b].success_logit)
                    })
                    .unwrap_or(&hidden[0])
            } else {
                hidden[rng.random_range(0..hidden.len())]
            };
            lines.push(m.advice[pick].text.to_owned());
        } else if !lines.is_empty() {
            // Drop a line: with insight the least helpful advice shown, else any line.
            let worst = shown
                .iter()
                .min_by(|a, b| {
                    m.advice[**a]
                        .success_logit
                        .total_cmp(&m.advice[**b].success_logit)
                })
                .and_then(|&i| lines.iter().position(|l| l == m.advice[i].text));
            let at = match worst {
                Some(p) if rng.random::<f64>() < m.meta_insight => p,
                _ => rng.random_range(0..lines.len()),
            };
            lines.remove(at);
            if lines.is_empty() {
                lines.push("- Keep the kernel correct first, then fast.".into());
            }
        }
        format!(
            "Here is the revised section.\n```text\n{}\n```\n",
            lines.join("\n")
        )
    }

    /// A child request: a synthetic kernel derived from the parent's marker.
    fn child(&self, prompt: &str, rng: &mut ChaCha8Rng) -> String {
        let m = &self.model;
        let (quality, cell) = parse_marker(prompt).unwrap_or((1.0, 0));
        let shown = m.shown(prompt);
        let pitfalls = shows_pitfalls(prompt);
        let noise = m.noise_sd * standard_normal(rng);
        let p = sigmoid(m.logit(prompt) + noise);
        let improved = rng.random::<f64>() < p;
        let explore: f64 = m.base_explore + shown.iter().map(|&i| m.advice[i].explore).sum::<f64>();
        self.log(SimCall {
            meta: false,
            shown,
            pitfalls,
            improved,
        });
        let cells = m.cells.max(1);
        let cell = if rng.random::<f64>() < explore.clamp(0.0, 1.0) && cells > 1 {
            (cell + rng.random_range(1..cells)) % cells
        } else {
            cell
        };
        let (quality, bug) = if improved {
            let gain = -m.mean_gain * (1.0 - rng.random::<f64>()).max(1e-12).ln();
            (quality * (1.0 + gain), false)
        } else {
            let r: f64 = rng.random();
            if r < m.no_code_share {
                return "I would tile the loops and use vector loads.".into();
            }
            let bug = r < m.no_code_share + m.bug_share;
            (quality * rng.random_range(0.6..1.0), bug)
        };
        format!(
            "A rewrite.\n```opencl\n{}\n```\n",
            sim_kernel_text(quality, cell.min(cells - 1), bug)
        )
    }
}

#[async_trait]
impl LlmClient for SimulatedLlm {
    fn describe(&self) -> String {
        format!("simulated LLM (seed {})", self.seed)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        let mut rng = self.rng(request);
        let Some(last) = request.messages.last() else {
            return Err(LlmFailure::new(FailureKind::Rejected, "no messages"));
        };
        let is_meta = request
            .messages
            .first()
            .is_some_and(|m| m.content.contains("You maintain the instructions"));
        let prompt: String = request
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let content = if is_meta {
            self.meta(&last.content, &mut rng)
        } else {
            self.child(&prompt, &mut rng)
        };
        let usage = TokenUsage {
            prompt_tokens: (prompt.len() as u64).div_ceil(4),
            completion_tokens: (content.len() as u64).div_ceil(4),
            estimated: false,
        };
        Ok(ChatResponse {
            finish_reason: Some("stop".into()),
            model: request.model.clone(),
            usage,
            attempts: 1,
            content,
        })
    }
}

fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

const MARKER: &str = "// sim: quality=";

/// The source of a synthetic kernel of `quality` in `cell`; `bug` makes it compute wrong values.
pub fn sim_kernel_text(quality: f64, cell: usize, bug: bool) -> String {
    format!(
        "{MARKER}{quality:.6} cell={cell}{}\n__kernel void simk(__global float* x) {{ x[0] = {quality:.6}f; }}",
        if bug { " BUG" } else { "" }
    )
}

/// The quality and cell of the first synthetic kernel in `text`.
pub fn parse_marker(text: &str) -> Option<(f64, usize)> {
    let rest = &text[text.find(MARKER)? + MARKER.len()..];
    let line = rest.lines().next()?;
    let mut parts = line.split_whitespace();
    let quality: f64 = parts.next()?.parse().ok()?;
    let cell: usize = parts.next()?.strip_prefix("cell=")?.parse().ok()?;
    Some((quality, cell))
}

/// The seed of a simulated search: quality 1 in cell 0.
pub fn sim_seed() -> Candidate {
    Candidate::seed(
        KernelSource::new(Language::OpenCl, "simk", sim_kernel_text(1.0, 0, false)),
        ParamValues::new(),
    )
}

/// Judges synthetic kernels: extraction failures as `kf-eval` ranks them, `BUG` as wrong
/// values, anything else correct with a speedup equal to its quality.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimEvaluator;

#[async_trait]
impl Evaluator for SimEvaluator {
    type Error = Infallible;

    async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Infallible> {
        if let Some(reason) = crate::marker::extraction_failure(&c.source) {
            return Ok(Evaluation::failed(Status::ExtractionError, reason));
        }
        let Some((quality, _)) = parse_marker(&c.source.text) else {
            return Ok(Evaluation::failed(
                Status::CompileError,
                "sim.cl:1: error: not a kernel of the simulation",
            ));
        };
        if c.source
            .text
            .lines()
            .next()
            .is_some_and(|l| l.contains(" BUG"))
        {
            return Ok(Evaluation::failed(
                Status::WrongValues,
                "values differ from the reference at index 17",
            ));
        }
        let timing = |s: f64| TimingStats {
            median_s: s,
            min_s: s,
            max_s: s,
            mean_s: s,
            stddev_s: 0.0,
            trials: 1,
        };
        Ok(Evaluation::correct(
            timing(1e-3 / quality.max(1e-6)),
            Some(timing(1e-3)),
        ))
    }
}

/// Places synthetic kernels by their `cell=` marker on one dimension.
#[derive(Debug, Clone)]
pub struct SimClassifier(DescriptorSpace);

impl SimClassifier {
    /// A classifier with `cells` cells.
    pub fn new(cells: usize) -> Self {
        let levels: Vec<String> = (0..cells.max(1)).map(|i| format!("style{i}")).collect();
        let space = DescriptorSpace::new(vec![Dimension::new("style", levels)]);
        // One dimension with at least one level is always a valid space.
        SimClassifier(space.unwrap_or_else(|_| DescriptorSpace::kernel_default()))
    }
}

impl BehaviorClassifier for SimClassifier {
    type Error = Infallible;

    fn space(&self) -> &DescriptorSpace {
        &self.0
    }

    fn classify(&self, c: &Candidate, _: &Evaluation) -> Result<Descriptor, Infallible> {
        let cells = self.0.cells().max(1);
        let cell = parse_marker(&c.source.text).map_or(0, |(_, cell)| cell.min(cells - 1));
        Ok(Descriptor::new([cell], "sim marker"))
    }
}

fn components_of(components: Vec<Component>) -> PromptComponents {
    #[derive(serde::Serialize)]
    struct File {
        component: Vec<Component>,
    }
    toml::to_string(&File {
        component: components,
    })
    .ok()
    .and_then(|t| PromptComponents::from_toml_str(&t, "simulation").ok())
    .unwrap_or_else(PromptComponents::builtin)
}

/// The initial prompt variants of the experiment: the first is the "default" prompt of the
/// fixed-prompt arm; the others show different advice (one without a pitfalls section).
pub fn sim_variants(model: &SimModel) -> Vec<PromptComponents> {
    let line = |i: usize| model.advice.get(i).map_or("", |a| a.text);
    let make = |strategies: Vec<&str>, pitfalls: Vec<&str>| {
        let c = |name: &str, title: &str, text: String| Component {
            name: name.into(),
            title: title.into(),
            text,
            evolvable: true,
        };
        components_of(vec![
            c(
                "philosophy",
                "Optimisation philosophy",
                "Make it correct, then make it fast.".into(),
            ),
            c("strategies", "Strategy library", strategies.join("\n")),
            c("pitfalls", "Common pitfalls", pitfalls.join("\n")),
        ])
    };
    vec![
        make(vec![line(5), line(7), line(2)], vec![line(3)]),
        make(vec![line(0), line(2)], vec![]),
        make(vec![line(10), line(9), line(6)], vec![line(3)]),
        make(vec![line(1), line(5)], vec![line(8)]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ChatMessage;

    #[test]
    fn markers_round_trip_and_judge() {
        let t = sim_kernel_text(1.25, 3, false);
        assert_eq!(parse_marker(&t), Some((1.25, 3)));
        let c = Candidate::seed(
            KernelSource::new(Language::OpenCl, "simk", t),
            ParamValues::new(),
        );
        let e = futures::executor::block_on(SimEvaluator.evaluate(&c)).unwrap();
        assert_eq!(e.status, Status::Correct);
        assert!((e.speedup.unwrap() - 1.25).abs() < 1e-9);
        let bug = Candidate::seed(
            KernelSource::new(Language::OpenCl, "simk", sim_kernel_text(2.0, 1, true)),
            ParamValues::new(),
        );
        let e = futures::executor::block_on(SimEvaluator.evaluate(&bug)).unwrap();
        assert_eq!(e.status, Status::WrongValues);
    }

    #[test]
    fn advice_moves_the_odds_and_answers_are_seeded() {
        let m = SimModel::default();
        let v = sim_variants(&m);
        assert!(m.value(&v[1]) > m.value(&v[0]) && m.value(&v[0]) > m.value(&v[2]));
        let llm = SimulatedLlm::new(m.clone(), 1);
        let count = |components: &PromptComponents| {
            let text = format!(
                "{}\n{}",
                components.render(),
                sim_kernel_text(1.0, 0, false)
            );
            (0..400u64)
                .filter(|s| {
                    let r = ChatRequest::new("sim", vec![ChatMessage::user(text.clone())])
                        .with_seed(*s);
                    let reply = futures::executor::block_on(llm.complete(&r)).unwrap();
                    parse_marker(&reply.content).is_some_and(|(q, _)| q > 1.0)
                })
                .count()
        };
        let (good, bad) = (count(&v[1]), count(&v[2]));
        assert!(good > bad + 40, "good {good}, bad {bad}");
        let r = ChatRequest::new("sim", vec![ChatMessage::user("x")]).with_seed(9);
        let a = futures::executor::block_on(llm.complete(&r)).unwrap();
        let b = futures::executor::block_on(SimulatedLlm::new(m, 1).complete(&r)).unwrap();
        assert_eq!(a.content, b.content);
    }
}
