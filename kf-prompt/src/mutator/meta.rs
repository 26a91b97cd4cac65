//! Meta-prompt co-evolution: every `every_steps` steps a meta-call asks the model to rewrite
//! one component of the best prompt variant so far, making a new variant the bandit can choose.

use std::sync::Arc;

use futures::future::FutureExt;
use kf_core::Usage;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::epoch::{EpochFuture, EpochResult};
use super::{exchange_usage, Inner};
use crate::client::{ChatMessage, ChatRequest};
use crate::components::{fill, Component};
use crate::gateway::Exchange;
use crate::parse::{apply_edit, code_blocks, parse_edits};
use crate::population::{stats_text, CreditEvent, PromptVariant};
use crate::record::RecordMode;
use crate::render::clip;

/// What a meta-call is asked to do: rewrite `component` of the variant `parent` (whose text
/// is `old`) following `strategy`.
struct MetaPlan {
    parent: Arc<PromptVariant>,
    component: String,
    strategy: String,
    /// The strategy's instruction to the model.
    instruction: String,
    old: Component,
}

/// A seed for epoch `b` drawn from the run's seed `a`, so that each epoch's choices differ
/// and a replay makes the same ones.
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
    /// The future of epoch `e`, and whether this call created it.
    pub(super) fn epoch(self: &Arc<Self>, e: u64) -> (EpochFuture, bool) {
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
    pub(super) async fn population_at(
        self: &Arc<Self>,
        step: u64,
    ) -> (Vec<Arc<PromptVariant>>, Usage) {
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
            return EpochResult::nothing(usage);
        }
        let Some(plan) = self.plan_meta(e, &pop, &credits) else {
            return EpochResult::nothing(usage);
        };
        let request = self.meta_request(e, &plan, &credits);
        let exchange = match self.gateway.ask(&format!("meta-{e}"), request).await {
            Ok(x) => x,
            Err(err) => {
                tracing::warn!(epoch = e, "meta-call failed: {err}");
                return EpochResult::nothing(usage);
            }
        };
        usage.add(&exchange_usage(&exchange));
        let parent = Arc::clone(&plan.parent);
        let Some(variant) = self.variant_from_reply(e, plan, &exchange) else {
            return EpochResult::nothing(usage);
        };
        self.log_variant(&variant);
        tracing::info!(epoch = e, id = %variant.id, parent = %parent.id, "new prompt variant");
        EpochResult {
            variant: Some(Arc::new(variant)),
            usage,
        }
    }

    /// Chooses what epoch `e`'s meta-call rewrites: the active variant with the best mean
    /// reward (of those with credit), one of its evolvable components and a strategy, both
    /// drawn with the epoch's seed. `None` when there is nothing to rewrite.
    fn plan_meta(
        &self,
        e: u64,
        pop: &[Arc<PromptVariant>],
        credits: &[CreditEvent],
    ) -> Option<MetaPlan> {
        let active = self.active(pop, credits);
        let parent = active
            .iter()
            .enumerate()
            .filter(|(_, v)| credits.iter().any(|c| c.variant == v.id))
            .max_by(|(i, a), (j, b)| {
                Self::variant_stats(credits, &a.id)
                    .mean()
                    .total_cmp(&Self::variant_stats(credits, &b.id).mean())
                    .then(j.cmp(i))
            })
            .map(|(_, v)| Arc::clone(v))?;
        let mut rng = ChaCha8Rng::seed_from_u64(mix_seed(self.config.seed, e));
        let evolvable = parent.components.evolvable();
        if evolvable.is_empty() {
            return None;
        }
        let component = evolvable[rng.random_range(0..evolvable.len())].to_owned();
        let strategies = self.meta_strategies();
        if strategies.is_empty() {
            return None;
        }
        let strategy = strategies[rng.random_range(0..strategies.len())].clone();
        let instruction = self
            .templates
            .strategies
            .get(&strategy)
            .cloned()
            .unwrap_or_default();
        let old = parent.components.get(&component).cloned()?;
        Some(MetaPlan {
            parent,
            component,
            strategy,
            instruction,
            old,
        })
    }

    /// The strategies a meta-call may follow: the configured ones the templates know, or
    /// every strategy of the templates when none is configured.
    fn meta_strategies(&self) -> Vec<String> {
        if self.config.meta.strategies.is_empty() {
            self.templates.strategies.keys().cloned().collect()
        } else {
            self.config
                .meta
                .strategies
                .iter()
                .filter(|s| self.templates.strategies.contains_key(*s))
                .cloned()
                .collect()
        }
    }

    /// The run's task (and device) in a few words, for the meta-prompt.
    fn meta_task_text(&self) -> String {
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
    }

    /// The meta-call's request: the component, the parent variant's record and the strategy,
    /// sent to the meta model (default: the first model) with the epoch's seed.
    fn meta_request(&self, e: u64, plan: &MetaPlan, credits: &[CreditEvent]) -> ChatRequest {
        let events: Vec<&CreditEvent> = credits
            .iter()
            .filter(|c| c.variant == plan.parent.id)
            .collect();
        let task_text = self.meta_task_text();
        let max_chars = self.config.meta.max_component_chars.to_string();
        let stats = stats_text(&events, 1200);
        let user = fill(
            &self.templates.meta_user,
            &[
                ("task", &task_text),
                ("title", &plan.old.title),
                ("component", &plan.old.text),
                ("stats", &stats),
                ("strategy", &plan.strategy),
                ("instruction", &plan.instruction),
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
        ChatRequest::new(model, messages)
            .with_max_tokens(self.config.meta.max_reply_tokens.max(1))
            .with_temperature(self.config.temperature)
            .with_seed(mix_seed(self.config.seed ^ 0x6d65_7461, e) & 0x7fff_ffff)
    }

    /// The variant epoch `e` makes from the meta-call's reply: the parent with the planned
    /// component rewritten. `None` (logged) when the reply gives no usable text.
    fn variant_from_reply(
        &self,
        e: u64,
        plan: MetaPlan,
        exchange: &Exchange,
    ) -> Option<PromptVariant> {
        let new_text = match meta_text(
            &exchange.response.content,
            &plan.old.text,
            self.config.meta.max_component_chars,
            exchange.response.hit_token_limit(),
        ) {
            Ok(t) => t,
            Err(why) => {
                tracing::info!(epoch = e, "meta-call gave no usable section: {why}");
                return None;
            }
        };
        let components = plan
            .parent
            .components
            .with_text(&plan.component, new_text)?;
        Some(PromptVariant {
            id: format!("v{e}"),
            parent: Some(plan.parent.id.clone()),
            epoch: e,
            changed: Some(plan.component),
            strategy: Some(plan.strategy),
            components,
        })
    }

    /// Appends a new variant to the run's variants file (not when replaying: the file is the
    /// record being replayed).
    fn log_variant(&self, variant: &PromptVariant) {
        if let Some(log) = &self.variants_log {
            if self
                .gateway
                .records()
                .is_none_or(|r| r.mode() == RecordMode::Record)
            {
                log.append(variant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
