//! [`LlmMutator`]: the [`Mutator`] that asks a model for a child kernel, with meta-prompt
//! co-evolution, bandit credit for prompt variants and models, and record/replay.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kf_core::{
    DeviceFacts, Elite, InsertOutcome, Mutation, MutationContext, Mutator, Needs, StopHandle, Task,
    Usage,
};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::bandit::{choose_arm, weighted_index, ArmStats, BanditPolicy};
use crate::client::LlmClient;
use crate::components::{PromptComponents, PromptTemplates};
use crate::config::{LlmBudget, LlmSettings, ModelPolicy, ModelSpec};
use crate::error::PromptError;
use crate::fingerprint::of_source;
use crate::gateway::{Exchange, LlmGateway, LlmStats};
use crate::llm_budget::CostUnit;
use crate::population::{
    describe_outcome, CreditConfig, CreditEvent, MetaConfig, PromptVariant, VariantReport,
};
use crate::record::{RecordMode, EXCHANGES_FILE};
use crate::render::{clip, summarize, RenderLimits, ReplyFormat};

mod epoch;
mod meta;
mod step;

use epoch::{EpochFuture, EpochResult};

/// The file the prompt variants are written to inside a run folder.
pub const VARIANTS_FILE: &str = "prompt_variants.jsonl";

/// What the mutator does when the budget refuses a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WhenExhausted {
    /// Fail the step with the budget error (the engine counts a failed step; with
    /// [`LlmMutator::stop_on_budget`] the search stops).
    #[default]
    Fail,
    /// Propose no children, so that a mix of mutators falls back to its offline members
    /// (only inside such a mix: alone, a mutator that proposes nothing makes no progress).
    NoChildren,
}

/// Settings of the LLM mutator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmMutatorConfig {
    /// Mutator name, recorded in each child's origin.
    pub name: String,
    /// What the model is asked to reply with.
    pub format: ReplyFormat,
    /// Size bounds of the prompt.
    pub limits: RenderLimits,
    /// Reply token limit.
    pub max_reply_tokens: u32,
    /// Sampling temperature.
    pub temperature: f32,
    /// Follow-up requests per step: for a full rewrite when a reply's edits do not apply, and
    /// for a different kernel when a reply repeats one already evaluated.
    pub repair_attempts: u32,
    /// How a prompt variant is chosen per request.
    pub variant_policy: BanditPolicy,
    /// Meta-prompt evolution.
    pub meta: MetaConfig,
    /// Rewards of archive outcomes.
    pub credit: CreditConfig,
    /// Seed of the meta-calls' own choices (component, strategy).
    pub seed: u64,
    /// What to do when the budget refuses a request.
    #[serde(default)]
    pub when_exhausted: WhenExhausted,
    /// What a mutation reports as its cost to the engine ([`kf_core::Usage::cost`], which
    /// [`kf_core::Budget::with_cost`] limits): dollars by default.
    #[serde(default)]
    pub cost_unit: CostUnit,
}

impl Default for LlmMutatorConfig {
    fn default() -> Self {
        LlmMutatorConfig {
            name: "llm".into(),
            format: ReplyFormat::Either,
            limits: RenderLimits::default(),
            max_reply_tokens: 2048,
            temperature: 0.7,
            repair_attempts: 1,
            variant_policy: BanditPolicy::default(),
            meta: MetaConfig::default(),
            credit: CreditConfig::default(),
            seed: 0,
            when_exhausted: WhenExhausted::Fail,
            cost_unit: CostUnit::Dollars,
        }
    }
}

/// The task and device of the run, remembered for meta-calls.
type TaskFacts = (Arc<Task>, Option<Arc<DeviceFacts>>);

/// Appends each new variant to a JSON-lines file once.
struct VariantLog {
    path: PathBuf,
    written: Mutex<HashSet<String>>,
}

impl VariantLog {
    fn open(path: PathBuf) -> Self {
        let mut written = HashSet::new();
        if let Ok(text) = std::fs::read_to_string(&path) {
            for line in text.lines() {
                if let Ok(v) = serde_json::from_str::<PromptVariant>(line) {
                    written.insert(v.id);
                }
            }
        }
        VariantLog {
            path,
            written: Mutex::new(written),
        }
    }

    fn append(&self, v: &PromptVariant) {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if !written.insert(v.id.clone()) {
            return;
        }
        let result = serde_json::to_string(v)
            .map_err(std::io::Error::other)
            .and_then(|line| {
                if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)?;
                }
                let mut f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?;
                f.write_all(format!("{line}\n").as_bytes())
            });
        if let Err(e) = result {
            tracing::warn!(path = %self.path.display(), "cannot write a prompt variant: {e}");
        }
    }
}

struct Inner {
    config: LlmMutatorConfig,
    gateway: LlmGateway,
    models: Vec<ModelSpec>,
    model_policy: ModelPolicy,
    templates: PromptTemplates,
    initial: Vec<Arc<PromptVariant>>,
    stop: Mutex<Option<StopHandle>>,
    task: Mutex<Option<TaskFacts>>,
    epochs: Mutex<HashMap<u64, EpochFuture>>,
    credits: Mutex<Vec<CreditEvent>>,
    step_costs: Mutex<HashMap<u64, f64>>,
    variants_log: Option<VariantLog>,
}

/// A [`Mutator`] that asks an LLM to rewrite the parent kernel.
///
/// Each request renders a prompt from a prompt variant chosen by a seeded bandit, asks one of
/// the models (by weight, or by a bandit on gain per cost), and turns the reply into one child:
/// a full rewrite, the parent with the reply's SEARCH/REPLACE edits applied (with one follow-up
/// asking for a full rewrite when they do not apply), or — when nothing usable came back — a
/// child marked as an extraction failure with the reason, which `kf-eval` ranks as
/// `extraction_error` and later prompts show. [`Mutator::credit`] rewards the child's prompt
/// variant and model by what the child did for the archive. Every exchange is recorded by the
/// [`LlmGateway`]; a seeded run replayed from its records asks the same questions and builds
/// the same archive.
///
/// Budget: the gateway's hard budget refuses a request it cannot cover; the mutator then
/// returns [`PromptError::Llm`] with kind `budget_exhausted`, and stops the engine if given a
/// [`StopHandle`] with [`LlmMutatorBuilder::stop_on_budget`].
///
/// ```
/// use kf_core::prelude::*;
/// use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, VecArchive};
/// use kf_prompt::{async_trait, ChatRequest, ChatResponse, LlmBudget, LlmClient, LlmFailure, LlmMutator};
///
/// /// A "model" that always answers with the same kernel.
/// struct Canned;
/// #[async_trait]
/// impl LlmClient for Canned {
///     async fn complete(&self, _: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
///         Ok(ChatResponse::text("```opencl\n__kernel void k() {}\n```"))
///     }
/// }
///
/// let mutator = LlmMutator::builder(Canned).budget(LlmBudget::requests(5)).build()?;
/// let classifier = SyntheticClassifier::new(3);
/// let archive = VecArchive::new(classifier.space().clone());
/// let result = Engine::new(mutator.clone(), SyntheticEvaluator::new(), classifier, archive)
///     .task(Task::new("synthetic"))
///     .seeds(vec![synthetic_seed(4)])
///     .budget(Budget::evaluations(4))
///     .run_blocking()?;
/// assert_eq!(result.summary.usage.requests, 3);
/// assert_eq!(mutator.stats().live_requests, 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct LlmMutator {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LlmMutator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmMutator")
            .field("name", &self.inner.config.name)
            .field("gateway", &self.inner.gateway)
            .field("models", &self.inner.models)
            .finish()
    }
}

/// Builds an [`LlmMutator`].
pub struct LlmMutatorBuilder {
    client: Box<dyn LlmClient>,
    models: Vec<ModelSpec>,
    model_policy: ModelPolicy,
    budget: LlmBudget,
    max_concurrency: usize,
    records: Option<(PathBuf, RecordMode)>,
    variants_log: Option<PathBuf>,
    variants: Vec<PromptComponents>,
    templates: PromptTemplates,
    config: LlmMutatorConfig,
    stop: Option<StopHandle>,
}

impl LlmMutatorBuilder {
    /// Takes models, model policy, reply tokens, temperature, concurrency and budget from
    /// `settings` (the connection itself belongs to the client).
    pub fn settings(mut self, settings: &LlmSettings) -> Self {
        self.models = settings.models.clone();
        self.model_policy = settings.model_policy;
        self.budget = settings.budget;
        self.max_concurrency = settings.max_concurrency;
        self.config.max_reply_tokens = settings.max_reply_tokens;
        self.config.temperature = settings.temperature;
        self
    }

    /// The models (default: one model named `default`).
    pub fn models(mut self, models: Vec<ModelSpec>) -> Self {
        self.models = models;
        self
    }

    /// How a model is chosen.
    pub fn model_policy(mut self, policy: ModelPolicy) -> Self {
        self.model_policy = policy;
        self
    }

    /// The hard budget.
    pub fn budget(mut self, budget: LlmBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Requests in flight at most.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n;
        self
    }

    /// Records exchanges (and prompt variants) in `dir` ([`EXCHANGES_FILE`],
    /// [`VARIANTS_FILE`]); answers already recorded there are not asked again.
    pub fn record_in(mut self, dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        self.records = Some((dir.join(EXCHANGES_FILE), RecordMode::Record));
        self.variants_log = Some(dir.join(VARIANTS_FILE));
        self
    }

    /// Replays the exchanges recorded in `dir`; no request reaches the client.
    pub fn replay_from(mut self, dir: impl AsRef<Path>) -> Self {
        self.records = Some((dir.as_ref().join(EXCHANGES_FILE), RecordMode::Replay));
        self.variants_log = None;
        self
    }

    /// Records exchanges in the file `path`.
    pub fn record_file(mut self, path: impl AsRef<Path>) -> Self {
        self.records = Some((path.as_ref().to_path_buf(), RecordMode::Record));
        self
    }

    /// The initial prompt components (default: [`PromptComponents::builtin`]).
    pub fn components(mut self, components: PromptComponents) -> Self {
        self.variants = vec![components];
        self
    }

    /// Adds another initial variant.
    pub fn add_variant(mut self, components: PromptComponents) -> Self {
        self.variants.push(components);
        self
    }

    /// The templates (default: [`PromptTemplates::builtin`]).
    pub fn templates(mut self, templates: PromptTemplates) -> Self {
        self.templates = templates;
        self
    }

    /// The mutator's settings.
    pub fn config(mut self, config: LlmMutatorConfig) -> Self {
        self.config = config;
        self
    }

    /// Changes the settings in place.
    pub fn configure(mut self, f: impl FnOnce(&mut LlmMutatorConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// Stops the engine when the budget refuses a request.
    pub fn stop_on_budget(mut self, handle: StopHandle) -> Self {
        self.stop = Some(handle);
        self
    }

    /// The mutator.
    pub fn build(self) -> Result<LlmMutator, PromptError> {
        if self.models.is_empty() {
            return Err(PromptError::Config("no model configured".into()));
        }
        if self.variants.is_empty() {
            return Err(PromptError::Config("no prompt components".into()));
        }
        if self.config.max_reply_tokens == 0 {
            return Err(PromptError::Config(
                "the reply token limit must be positive".into(),
            ));
        }
        let mut gateway = LlmGateway::builder(self.client)
            .budget(self.budget)
            .models(&self.models)
            .max_concurrency(self.max_concurrency.max(1));
        gateway = match &self.records {
            Some((path, RecordMode::Record)) => gateway.record(path),
            Some((path, RecordMode::Replay)) => gateway.replay(path),
            None => gateway,
        };
        let gateway = gateway.build()?;
        let initial = self
            .variants
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let id = if i == 0 {
                    "v0".to_owned()
                } else {
                    format!("v0.{i}")
                };
                Arc::new(PromptVariant::initial(id, c))
            })
            .collect();
        Ok(LlmMutator {
            inner: Arc::new(Inner {
                config: self.config,
                gateway,
                models: self.models,
                model_policy: self.model_policy,
                templates: self.templates,
                initial,
                stop: Mutex::new(self.stop),
                task: Mutex::new(None),
                epochs: Mutex::new(HashMap::new()),
                credits: Mutex::new(Vec::new()),
                step_costs: Mutex::new(HashMap::new()),
                variants_log: self.variants_log.map(VariantLog::open),
            }),
        })
    }
}

impl LlmMutator {
    /// A builder around `client` with the default components, templates and settings.
    pub fn builder(client: impl LlmClient + 'static) -> LlmMutatorBuilder {
        LlmMutatorBuilder {
            client: Box::new(client),
            models: vec![ModelSpec::new("default")],
            model_policy: ModelPolicy::Weighted,
            budget: LlmBudget::unlimited(),
            max_concurrency: 2,
            records: None,
            variants_log: None,
            variants: vec![PromptComponents::builtin()],
            templates: PromptTemplates::builtin(),
            config: LlmMutatorConfig::default(),
            stop: None,
        }
    }

    /// Stops the engine behind `handle` when the budget refuses a request (for example
    /// `mutator.stop_on_budget(engine.stop_handle())` after handing a clone to the engine).
    pub fn stop_on_budget(&self, handle: StopHandle) {
        *self.inner.stop.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    }

    /// Usage statistics of the gateway (live requests, recorded answers, tokens, cost).
    pub fn stats(&self) -> LlmStats {
        self.inner.gateway.stats()
    }

    /// The gateway (budget, records).
    pub fn gateway(&self) -> &LlmGateway {
        &self.inner.gateway
    }

    /// Every credit event so far, in order.
    pub fn credits(&self) -> Vec<CreditEvent> {
        self.inner
            .credits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The prompt variants made so far (initial ones first), with their credit.
    pub fn variants(&self) -> Vec<VariantReport> {
        let mut variants: Vec<Arc<PromptVariant>> = self.inner.initial.clone();
        let mut epochs: Vec<(u64, EpochFuture)> = self
            .inner
            .epochs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(e, f)| (*e, f.clone()))
            .collect();
        epochs.sort_by_key(|(e, _)| *e);
        for (_, f) in epochs {
            if let Some(EpochResult {
                variant: Some(v), ..
            }) = f.peek()
            {
                variants.push(Arc::clone(v));
            }
        }
        let credits = self.credits();
        variants
            .into_iter()
            .map(|v| {
                let mine: Vec<&CreditEvent> =
                    credits.iter().filter(|c| c.variant == v.id).collect();
                let mut stats = ArmStats::default();
                for c in &mine {
                    stats.add(c.reward);
                }
                VariantReport {
                    new_cells: mine.iter().filter(|c| c.outcome == "new cell").count() as u64,
                    improvements: mine
                        .iter()
                        .filter(|c| c.outcome.starts_with("improved"))
                        .count() as u64,
                    variant: (*v).clone(),
                    stats,
                }
            })
            .collect()
    }
}

#[async_trait]
impl Mutator for LlmMutator {
    type Error = PromptError;

    fn name(&self) -> &str {
        &self.inner.config.name
    }

    /// Prompts describe the task (name, sizes, tolerance); device facts are used when given.
    fn needs(&self) -> Needs {
        Needs::TASK
    }

    async fn mutate(&self, parent: &Elite, ctx: &MutationContext) -> Result<Mutation, PromptError> {
        let mut mutation = Arc::clone(&self.inner).mutate(parent, ctx).await?;
        // The engine counts an opaque cost; this mutator's spend in the configured unit.
        mutation.usage.cost = self.inner.config.cost_unit.cost(&mutation.usage);
        Ok(mutation)
    }

    fn credit(&self, child: &Elite, outcome: &InsertOutcome) {
        self.inner.credit(child, outcome);
    }
}

fn exchange_usage(x: &Exchange) -> Usage {
    Usage {
        requests: 1,
        prompt_tokens: x.response.usage.prompt_tokens,
        completion_tokens: x.response.usage.completion_tokens,
        cost_usd: x.cost_usd,
        // Set once for the whole mutation (see `LlmMutator::mutate`).
        cost: 0.0,
    }
}

impl Inner {
    fn on_error(&self, e: PromptError) -> PromptError {
        if e.is_budget_exhausted() {
            if let Some(h) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                tracing::info!("the LLM budget is spent; stopping the search");
                h.stop();
            }
        }
        e
    }

    /// Credit of steps `≤ step − lag`.
    fn snapshot(&self, step: u64) -> Vec<CreditEvent> {
        let lag = self.config.meta.lag_steps;
        self.credits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|c| c.step.saturating_add(lag) <= step)
            .cloned()
            .collect()
    }

    fn variant_stats(credits: &[CreditEvent], id: &str) -> ArmStats {
        let mut s = ArmStats::default();
        for c in credits.iter().filter(|c| c.variant == id) {
            s.add(c.reward);
        }
        s
    }

    /// The variants the bandit chooses among: the best `max_active` by posterior mean, and the
    /// newest; in population order.
    fn active(
        &self,
        pop: &[Arc<PromptVariant>],
        credits: &[CreditEvent],
    ) -> Vec<Arc<PromptVariant>> {
        let max = self.config.meta.max_active.max(1);
        if pop.len() <= max {
            return pop.to_vec();
        }
        let mut ranked: Vec<(usize, f64)> = pop
            .iter()
            .enumerate()
            .map(|(i, v)| (i, Self::variant_stats(credits, &v.id).mean()))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut keep: Vec<usize> = ranked.iter().take(max).map(|(i, _)| *i).collect();
        let newest = pop.len() - 1;
        if !keep.contains(&newest) {
            keep.pop();
            keep.push(newest);
        }
        keep.sort_unstable();
        keep.into_iter().map(|i| Arc::clone(&pop[i])).collect()
    }

    fn choose_model(&self, credits: &[CreditEvent], rng: &mut ChaCha8Rng) -> String {
        if self.models.len() == 1 {
            return self.models[0].name.clone();
        }
        let index = match self.model_policy {
            ModelPolicy::Weighted => {
                let w: Vec<f64> = self.models.iter().map(|m| m.weight).collect();
                weighted_index(&w, rng)
            }
            ModelPolicy::Bandit {
                exploration,
                cost_scale_usd,
            } => {
                let scale = if cost_scale_usd > 0.0 {
                    cost_scale_usd
                } else {
                    1.0
                };
                let arms: Vec<ArmStats> = self
                    .models
                    .iter()
                    .map(|m| {
                        let mut s = ArmStats::default();
                        for c in credits.iter().filter(|c| c.model == m.name) {
                            s.add(c.reward / (1.0 + c.cost_usd.max(0.0) / scale));
                        }
                        s
                    })
                    .collect();
                choose_arm(BanditPolicy::Ucb1 { exploration }, &arms, rng)
            }
        };
        self.models[index.unwrap_or(0).min(self.models.len() - 1)]
            .name
            .clone()
    }

    fn credit(&self, child: &Elite, outcome: &InsertOutcome) {
        let origin = &child.candidate.origin;
        if origin.mutator != self.config.name {
            return;
        }
        let Some(step) = origin.llm_step else {
            return;
        };
        let cost_usd = self
            .step_costs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&step)
            .copied()
            .or_else(|| {
                self.gateway
                    .records()
                    .map(|r| r.recorded_cost(&format!("step-{step}")))
            })
            .unwrap_or(0.0);
        let how = origin
            .note
            .split_once(": ")
            .map_or("", |(_, h)| h)
            .to_owned();
        let outcome_text = describe_outcome(outcome);
        let speed = child
            .evaluation
            .gflops
            .filter(|g| g.is_finite())
            .map(|g| format!(", {g:.2} GFLOP/s"))
            .unwrap_or_default();
        // The line that says what went wrong: the first error line, else the first line.
        let diagnostics = &child.evaluation.diagnostics;
        let first_line = diagnostics
            .lines()
            .find(|l| l.contains("error:"))
            .or_else(|| diagnostics.lines().find(|l| !l.trim().is_empty()))
            .map(|l| format!(": {}", clip(l.trim(), 160)))
            .filter(|_| child.evaluation.status != kf_core::Status::Correct)
            .unwrap_or_default();
        tracing::info!(
            "llm step {step}: {} of {}: {how} -> {}{speed} -> {outcome_text}{first_line}",
            child.candidate.id,
            child
                .candidate
                .parents
                .first()
                .map_or_else(|| "-".to_owned(), ToString::to_string),
            child.evaluation.status,
        );
        let event = CreditEvent {
            key: (child.candidate.extraction_failure_reason().is_none())
                .then(|| of_source(&child.candidate.source)),
            step,
            child: child.candidate.id,
            parent: child.candidate.parents.first().copied(),
            variant: origin.prompt_variant.clone().unwrap_or_default(),
            model: origin.model.clone().unwrap_or_default(),
            reward: self.config.credit.reward(outcome),
            cost_usd,
            status: child.evaluation.status,
            how,
            outcome: outcome_text,
            diagnostics: summarize(&child.evaluation.diagnostics, 400),
        };
        self.credits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
    }
}

#[cfg(test)]
mod tests {
    use kf_core::Origin;

    #[test]
    fn origins_carry_their_step() {
        let step = |note: &str| {
            let json = format!(r#"{{"mutator":"llm","note":"{note}"}}"#);
            serde_json::from_str::<Origin>(&json).unwrap().llm_step
        };
        // Origins written before `llm_step` existed: the step is read back from the note.
        assert_eq!(step("llm step 12: full rewrite"), Some(12));
        assert_eq!(step("llm step x"), None);
        assert_eq!(step("seed"), None);
    }
}
