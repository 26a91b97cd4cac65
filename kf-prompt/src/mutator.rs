//! [`LlmMutator`]: the [`Mutator`] that asks a model for a child kernel, with meta-prompt
//! co-evolution, bandit credit for prompt variants and models, and record/replay.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::{BoxFuture, FutureExt, Shared};
use kf_core::{
    DeviceFacts, Elite, InsertOutcome, KernelSource, Mutation, MutationContext, Mutator, Needs,
    Offspring, Origin, ParamValues, StopHandle, Task, Usage,
};
use kf_manifest::Manifest;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::bandit::{choose_arm, weighted_index, ArmStats, BanditPolicy};
use crate::budget::CostUnit;
use crate::client::{ChatMessage, ChatRequest, LlmClient};
use crate::components::{fill, PromptComponents, PromptTemplates};
use crate::config::{LlmBudget, LlmSettings, ModelPolicy, ModelSpec};
use crate::error::{FailureKind, PromptError};
use crate::fingerprint::of_source;
use crate::gateway::{Exchange, LlmGateway, LlmStats};
use crate::lessons::recent_lessons;
use crate::parse::{
    apply_edit, code_blocks, draft_from_reply, lenient_manifest, parse_edits, KernelDraft,
};
use crate::population::{
    describe_outcome, stats_text, CreditConfig, CreditEvent, MetaConfig, PromptVariant,
    VariantReport,
};
use crate::record::{RecordMode, EXCHANGES_FILE};
use crate::render::{
    clip, describe_evaluation, render_prompt, render_repair, summarize, Attempt, PromptInput,
    RenderLimits, ReplyFormat,
};

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

#[derive(Clone)]
struct EpochResult {
    variant: Option<Arc<PromptVariant>>,
    usage: Usage,
}

type EpochFuture = Shared<BoxFuture<'static, EpochResult>>;

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

fn mix_seed(a: u64, b: u64) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(&a.to_le_bytes());
    h.update(&b.to_le_bytes());
    let bytes = h.finalize();
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes.as_bytes()[..8]);
    u64::from_le_bytes(out)
}

/// The new text of a component from a meta-call's reply: edits of the old text, the first
/// closed fenced block, or the whole reply (unless it was cut off at the token limit).
fn meta_text(reply: &str, old: &str, max_chars: usize, cut_off: bool) -> Result<String, NoSection> {
    if cut_off && !code_blocks(reply).iter().any(|b| b.closed) {
        return Err(NoSection::CutOff);
    }
    let edits = parse_edits(reply)?;
    let new = if !edits.is_empty() {
        let mut text = old.to_owned();
        for e in &edits {
            text = apply_edit(&text, &e.search, &e.replace)?;
        }
        text
    } else {
        let blocks = code_blocks(reply);
        match blocks.iter().find(|b| !b.text.trim().is_empty()) {
            Some(b) => b.text.clone(),
            None if !reply.contains("```") => reply.to_owned(),
            None => return Err(NoSection::EmptyBlock),
        }
    };
    let new = new.trim();
    if new.is_empty() {
        return Err(NoSection::NoText);
    }
    if new == old.trim() {
        return Err(NoSection::Unchanged);
    }
    Ok(clip(new, max_chars))
}

/// Why a meta-call's reply gave no new text for its component.
#[derive(Debug, thiserror::Error)]
enum NoSection {
    #[error("the reply was cut off at the token limit")]
    CutOff,
    #[error(transparent)]
    Edit(#[from] crate::parse::EditError),
    #[error("the reply's code block is empty")]
    EmptyBlock,
    #[error("the reply holds no text")]
    NoText,
    #[error("the section is unchanged")]
    Unchanged,
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

    /// A follow-up request in a step's conversation (a repair, or after a repeat).
    async fn follow_up(
        &self,
        scope: &str,
        model: &str,
        messages: &[ChatMessage],
        seed: u64,
    ) -> Result<Exchange, PromptError> {
        let request = ChatRequest::new(model.to_owned(), messages.to_vec())
            .with_max_tokens(self.config.max_reply_tokens)
            .with_temperature(self.config.temperature)
            .with_seed(seed);
        self.gateway.ask(scope, request).await
    }

    /// The evaluated kernel `child` repeats, with its result in words: the parent, an
    /// inspiration, or an earlier child of the LLM whose credit has settled.
    fn repeated(
        &self,
        child: &Offspring,
        parent: &Elite,
        ctx: &MutationContext,
        credits: &[CreditEvent],
    ) -> Option<(kf_core::CandidateId, String)> {
        if child.extraction_failure.is_some() {
            return None;
        }
        let key = of_source(&child.source);
        for e in std::iter::once(parent).chain(ctx.inspirations.iter()) {
            if of_source(&e.candidate.source) == key {
                return Some((e.candidate.id, describe_evaluation(&e.evaluation)));
            }
        }
        credits
            .iter()
            .rev()
            .find(|c| c.key.as_deref() == Some(key.as_str()))
            .map(|c| {
                let mut result = format!("{} ({})", c.status, c.outcome);
                if c.status != kf_core::Status::Correct && !c.diagnostics.is_empty() {
                    result.push_str(&format!(": {}", c.diagnostics.replace('\n', " ")));
                }
                (c.child, result)
            })
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

    /// The future of epoch `e`, and whether this call created it.
    fn epoch(self: &Arc<Self>, e: u64) -> (EpochFuture, bool) {
        let mut epochs = self.epochs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = epochs.get(&e) {
            return (f.clone(), false);
        }
        let this = Arc::clone(self);
        let f = async move { this.run_meta(e).await }.boxed().shared();
        epochs.insert(e, f.clone());
        (f, true)
    }

    /// The variants visible at `step`, and the usage of the meta-calls this call made.
    async fn population_at(self: &Arc<Self>, step: u64) -> (Vec<Arc<PromptVariant>>, Usage) {
        let mut pop = self.initial.clone();
        let mut usage = Usage::default();
        let every = self.config.meta.every_steps;
        if every == 0 {
            return (pop, usage);
        }
        for e in 1..=(step / every) {
            let (f, created) = self.epoch(e);
            let r = f.await;
            if created {
                usage.add(&r.usage);
            }
            if let Some(v) = r.variant {
                pop.push(v);
            }
        }
        (pop, usage)
    }

    /// The meta-call of epoch `e`: rewrite one component of the best variant.
    async fn run_meta(self: Arc<Self>, e: u64) -> EpochResult {
        let every = self.config.meta.every_steps.max(1);
        let base = e * every;
        let (pop, mut usage) = self.population_at(base - 1).await;
        let credits = self.snapshot(base);
        if credits.is_empty() {
            // No child of the LLM has been judged yet: a meta-call would rewrite blind.
            tracing::debug!(
                epoch = e,
                "no judged LLM child yet: no meta-call this epoch"
            );
            return EpochResult {
                variant: None,
                usage,
            };
        }
        let active = self.active(&pop, &credits);
        let Some(parent) = active
            .iter()
            .enumerate()
            .filter(|(_, v)| credits.iter().any(|c| c.variant == v.id))
            .max_by(|(i, a), (j, b)| {
                Self::variant_stats(&credits, &a.id)
                    .mean()
                    .total_cmp(&Self::variant_stats(&credits, &b.id).mean())
                    .then(j.cmp(i))
            })
            .map(|(_, v)| Arc::clone(v))
        else {
            return EpochResult {
                variant: None,
                usage,
            };
        };
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(self.config.seed, e));
        let evolvable = parent.components.evolvable();
        if evolvable.is_empty() {
            return EpochResult {
                variant: None,
                usage,
            };
        }
        let component = evolvable[rng.random_range(0..evolvable.len())].to_owned();
        let strategies: Vec<String> = if self.config.meta.strategies.is_empty() {
            self.templates.strategies.keys().cloned().collect()
        } else {
            self.config
                .meta
                .strategies
                .iter()
                .filter(|s| self.templates.strategies.contains_key(*s))
                .cloned()
                .collect()
        };
        if strategies.is_empty() {
            return EpochResult {
                variant: None,
                usage,
            };
        }
        let strategy = strategies[rng.random_range(0..strategies.len())].clone();
        let instruction = self
            .templates
            .strategies
            .get(&strategy)
            .cloned()
            .unwrap_or_default();
        let Some(old) = parent.components.get(&component).cloned() else {
            return EpochResult {
                variant: None,
                usage,
            };
        };
        let events: Vec<&CreditEvent> = credits.iter().filter(|c| c.variant == parent.id).collect();
        let task_text = {
            let guard = self.task.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_ref() {
                Some((task, device)) => {
                    let mut t = format!("{}: {}", task.name, task.description.trim());
                    if let Some(d) = device {
                        t.push_str(&format!(" Device: {} ({:?}).", d.name, d.kind));
                    }
                    clip(&t, 1500)
                }
                None => "optimise a GPU kernel".into(),
            }
        };
        let max_chars = self.config.meta.max_component_chars.to_string();
        let stats = stats_text(&events, 1200);
        let user = fill(
            &self.templates.meta_user,
            &[
                ("task", &task_text),
                ("title", &old.title),
                ("component", &old.text),
                ("stats", &stats),
                ("strategy", &strategy),
                ("instruction", &instruction),
                ("max_chars", &max_chars),
            ],
        );
        let messages = vec![
            ChatMessage::system(fill(&self.templates.meta_system, &[])),
            ChatMessage::user(user),
        ];
        let model = self
            .config
            .meta
            .model
            .clone()
            .unwrap_or_else(|| self.models[0].name.clone());
        let request = ChatRequest::new(model, messages)
            .with_max_tokens(self.config.meta.max_reply_tokens.max(1))
            .with_temperature(self.config.temperature)
            .with_seed(mix_seed(self.config.seed ^ 0x6d65_7461, e) & 0x7fff_ffff);
        let exchange = match self.gateway.ask(&format!("meta-{e}"), request).await {
            Ok(x) => x,
            Err(err) => {
                tracing::warn!(epoch = e, "meta-call failed: {err}");
                return EpochResult {
                    variant: None,
                    usage,
                };
            }
        };
        usage.add(&exchange_usage(&exchange));
        let new_text = match meta_text(
            &exchange.response.content,
            &old.text,
            self.config.meta.max_component_chars,
            exchange.response.hit_token_limit(),
        ) {
            Ok(t) => t,
            Err(why) => {
                tracing::info!(epoch = e, "meta-call gave no usable section: {why}");
                return EpochResult {
                    variant: None,
                    usage,
                };
            }
        };
        let Some(components) = parent.components.with_text(&component, new_text) else {
            return EpochResult {
                variant: None,
                usage,
            };
        };
        let variant = PromptVariant {
            id: format!("v{e}"),
            parent: Some(parent.id.clone()),
            epoch: e,
            changed: Some(component),
            strategy: Some(strategy),
            components,
        };
        if let Some(log) = &self.variants_log {
            if self
                .gateway
                .records()
                .is_none_or(|r| r.mode() == RecordMode::Record)
            {
                log.append(&variant);
            }
        }
        tracing::info!(epoch = e, id = %variant.id, parent = %parent.id, "new prompt variant");
        EpochResult {
            variant: Some(Arc::new(variant)),
            usage,
        }
    }

    fn origin(&self, step: u64, variant: &str, model: &str, how: &str) -> Origin {
        Origin {
            mutator: self.config.name.clone(),
            prompt_variant: Some(variant.to_owned()),
            model: Some(model.to_owned()),
            llm_step: Some(step),
            note: format!("llm step {step}: {how}"),
            aimed_cell: None,
        }
    }

    fn extraction_child(
        &self,
        parent: &Elite,
        ctx: &MutationContext,
        variant: &str,
        model: &str,
        reason: &str,
    ) -> Offspring {
        let src = &parent.candidate.source;
        let mut child = Offspring::extraction_failure(
            src.language,
            src.entry.clone(),
            reason,
            self.origin(ctx.step, variant, model, "extraction error"),
        );
        child.also_from = self.also_from(ctx);
        child
    }

    fn also_from(&self, ctx: &MutationContext) -> Vec<kf_core::CandidateId> {
        ctx.inspirations
            .iter()
            .take(self.config.limits.max_inspirations)
            .map(|e| e.candidate.id)
            .collect()
    }

    fn child_from_draft(
        &self,
        parent: &Elite,
        ctx: &MutationContext,
        variant: &str,
        model: &str,
        d: KernelDraft,
    ) -> Offspring {
        let src = &parent.candidate.source;
        let mut notes = d.notes;
        let from_reply = match d.manifest {
            Some(m) => match lenient_manifest(&m, &src.entry, &src.language.to_string()) {
                Ok(lenient) => {
                    notes.extend(lenient.notes);
                    Some(lenient.text)
                }
                Err(why) => {
                    // Carried as written, so the evaluator reports it as an invalid manifest.
                    notes.push(format!("the reply's manifest cannot be used: {why}"));
                    Some(m)
                }
            },
            None => None,
        };
        let manifest_text = from_reply.or_else(|| src.manifest.as_deref().map(str::to_owned));
        let same_manifest = manifest_text.as_deref() == src.manifest.as_deref();
        let (source, params) = match manifest_text {
            Some(m) => match Manifest::parse(&m, "<manifest from the model>", None) {
                Ok(manifest) => {
                    let params = if same_manifest {
                        parent.effective_params()
                    } else {
                        manifest.default_params()
                    };
                    (manifest.kernel_source(d.text), params)
                }
                // Left for the evaluator to report as an invalid manifest.
                Err(e) => {
                    notes.push(format!("the reply's manifest cannot be used: {e}"));
                    (
                        KernelSource::new(src.language, src.entry.clone(), d.text).with_manifest(m),
                        ParamValues::new(),
                    )
                }
            },
            None => (
                KernelSource::new(src.language, src.entry.clone(), d.text),
                parent.effective_params(),
            ),
        };
        let how = if notes.is_empty() {
            d.how
        } else {
            format!("{}; {}", d.how, notes.join("; "))
        };
        let mut child = Offspring::new(source, params, self.origin(ctx.step, variant, model, &how));
        child.also_from = self.also_from(ctx);
        child
    }

    async fn mutate(
        self: Arc<Self>,
        parent: &Elite,
        ctx: &MutationContext,
    ) -> Result<Mutation, PromptError> {
        {
            let mut t = self.task.lock().unwrap_or_else(|p| p.into_inner());
            if t.is_none() {
                *t = Some((Arc::clone(&ctx.task), ctx.device.clone()));
            }
        }
        let (population, mut usage) = self.population_at(ctx.step).await;
        let credits = self.snapshot(ctx.step);
        let active = self.active(&population, &credits);
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let arms: Vec<ArmStats> = active
            .iter()
            .map(|v| Self::variant_stats(&credits, &v.id))
            .collect();
        let vi = choose_arm(self.config.variant_policy, &arms, &mut rng).unwrap_or(0);
        let Some(variant) = active.get(vi).or(active.first()).cloned() else {
            return Err(PromptError::Config("no prompt variant".into()));
        };
        let model = self.choose_model(&credits, &mut rng);
        let attempts: Vec<Attempt> = credits
            .iter()
            .filter(|c| c.parent == Some(parent.candidate.id))
            .map(|c| Attempt {
                how: c.how.clone(),
                status: c.status,
                outcome: c.outcome.clone(),
                diagnostics: c.diagnostics.clone(),
            })
            .collect();
        let lessons = recent_lessons(
            &credits,
            self.config.limits.max_lessons,
            self.config.limits.max_attempt_chars,
        );
        let input = PromptInput {
            task: &ctx.task,
            device: ctx.device.as_deref(),
            parent,
            inspirations: &ctx.inspirations,
            hints: &ctx.hints,
            attempts: &attempts,
            lessons: &lessons,
        };
        let messages = render_prompt(
            &variant.components,
            &self.templates,
            &self.config.limits,
            self.config.format,
            &input,
        );
        let seed = ctx.seed & 0x7fff_ffff;
        let request = ChatRequest::new(model.clone(), messages.clone())
            .with_max_tokens(self.config.max_reply_tokens)
            .with_temperature(self.config.temperature)
            .with_seed(seed);
        let scope = format!("step-{}", ctx.step);
        let first = match self.gateway.ask(&scope, request).await {
            Ok(x) => x,
            Err(e)
                if e.is_budget_exhausted()
                    && self.config.when_exhausted == WhenExhausted::NoChildren =>
            {
                let _ = self.on_error(e);
                return Ok(Mutation {
                    children: Vec::new(),
                    usage,
                });
            }
            // A reply that was cut off or unreadable after every retry is the model's failure,
            // not the step's: a child that says why, so the reason reaches the next prompt.
            Err(PromptError::Llm(f))
                if matches!(f.kind, FailureKind::Truncated | FailureKind::Malformed) =>
            {
                let reason = format!("the model's reply could not be read: {f}");
                let child = self.extraction_child(parent, ctx, &variant.id, &model, &reason);
                self.step_costs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(ctx.step, usage.cost_usd);
                return Ok(Mutation {
                    children: vec![child],
                    usage,
                });
            }
            Err(e) => return Err(self.on_error(e)),
        };
        usage.add(&exchange_usage(&first));
        let src = &parent.candidate.source;
        let lang = src.language.to_string();
        let mut reply = first.response;
        let mut messages = messages;
        let mut repairs = 0;
        let mut repeated = None;
        let child = loop {
            match draft_from_reply(
                &reply.content,
                &src.entry,
                &src.text,
                src.manifest.as_deref(),
                reply.hit_token_limit(),
            ) {
                Ok(mut d) => {
                    match &repeated {
                        Some((of, _)) => d.how = format!("{} after repeating {of}", d.how),
                        None if repairs > 0 => d.how = format!("{} after edits failed", d.how),
                        None => {}
                    }
                    let child = self.child_from_draft(parent, ctx, &variant.id, &model, d);
                    let Some((of, result)) = self.repeated(&child, parent, ctx, &credits) else {
                        break Some(child);
                    };
                    repeated = Some((of, result.clone()));
                    if repairs >= self.config.repair_attempts {
                        break None;
                    }
                    // Answered from the earlier result; the model is told and asked again.
                    repairs += 1;
                    let mut follow_messages = messages.clone();
                    follow_messages.push(ChatMessage::assistant(clip(
                        &reply.content,
                        self.config.limits.max_source_chars,
                    )));
                    follow_messages.push(ChatMessage::user(fill(
                        &self.templates.repeated_reply,
                        &[
                            ("candidate", &of.to_string()),
                            ("result", &result),
                            ("language", &lang),
                        ],
                    )));
                    messages = follow_messages;
                    match self.follow_up(&scope, &model, &messages, seed).await {
                        Ok(x) => {
                            usage.add(&exchange_usage(&x));
                            reply = x.response;
                        }
                        Err(e) => {
                            let _ = self.on_error(e);
                            break None;
                        }
                    }
                }
                Err(u) if u.edits_failed && repairs < self.config.repair_attempts => {
                    repairs += 1;
                    messages = render_repair(
                        &self.templates,
                        &messages,
                        &reply.content,
                        &u.reason,
                        &lang,
                        self.config.limits.max_source_chars,
                    );
                    match self.follow_up(&scope, &model, &messages, seed).await {
                        Ok(x) => {
                            usage.add(&exchange_usage(&x));
                            reply = x.response;
                        }
                        Err(e) => {
                            let e = self.on_error(e);
                            let reason =
                                format!("{}; asking for a full rewrite failed: {e}", u.reason);
                            break Some(self.extraction_child(
                                parent,
                                ctx,
                                &variant.id,
                                &model,
                                &reason,
                            ));
                        }
                    }
                }
                Err(u) => {
                    let reason = if repairs > 0 {
                        format!(
                            "after a follow-up, the reply was unusable too: {}",
                            u.reason
                        )
                    } else {
                        u.reason
                    };
                    break Some(self.extraction_child(parent, ctx, &variant.id, &model, &reason));
                }
            }
        };
        self.step_costs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ctx.step, usage.cost_usd);
        let children = match child {
            Some(child) => vec![child],
            None => {
                let (of, result) = repeated.unwrap_or((parent.candidate.id, String::new()));
                tracing::info!(
                    "llm step {}: parent {}: the reply repeats {of} ({result}); not evaluated again",
                    ctx.step,
                    parent.candidate.id
                );
                Vec::new()
            }
        };
        Ok(Mutation { children, usage })
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
    use super::*;

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

    #[test]
    fn meta_text_forms() {
        let old = "- a\n- b";
        assert_eq!(
            meta_text("```text\n- c\n```", old, 100, false).unwrap(),
            "- c"
        );
        assert_eq!(
            meta_text("```text\n- c\n```\nmore", old, 100, true).unwrap(),
            "- c"
        );
        assert_eq!(
            meta_text("just text", old, 100, false).unwrap(),
            "just text"
        );
        assert!(meta_text("just text", old, 100, true).is_err());
        assert_eq!(
            meta_text(
                "<<<<<<< SEARCH\n- b\n=======\n- d\n>>>>>>> REPLACE",
                old,
                100,
                false
            )
            .unwrap(),
            "- a\n- d"
        );
        assert!(meta_text("```text\n- a\n- b\n```", old, 100, false).is_err());
        assert!(meta_text("```\n\n```", old, 100, false).is_err());
        assert!(meta_text(&"x".repeat(500), old, 100, false).unwrap().len() <= 100);
    }
}
