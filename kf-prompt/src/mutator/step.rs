//! One step of the [`LlmMutator`](super::LlmMutator): the prompt, the request, and the
//! conversation that turns the reply into a child (follow-ups when a reply's edits do not
//! apply or it repeats a kernel already evaluated).

use std::ops::ControlFlow;
use std::sync::Arc;

use kf_core::{
    CandidateId, Elite, KernelSource, Mutation, MutationContext, Offspring, Origin, ParamValues,
    Usage,
};
use kf_manifest::Manifest;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{exchange_usage, Inner, WhenExhausted};
use crate::bandit::{choose_arm, ArmStats};
use crate::client::{ChatMessage, ChatRequest, ChatResponse};
use crate::components::fill;
use crate::error::{FailureKind, PromptError};
use crate::fingerprint::of_source;
use crate::gateway::Exchange;
use crate::lessons::recent_lessons;
use crate::parse::{draft_from_reply, lenient_manifest, KernelDraft, Unusable};
use crate::population::{CreditEvent, PromptVariant};
use crate::render::{
    clip, describe_evaluation, render_prompt, render_repair, Attempt, PromptInput,
};

/// One step's conversation with the model: where it is asked, what was asked so far, the
/// latest reply, and how the follow-ups went.
struct Conversation<'a> {
    parent: &'a Elite,
    ctx: &'a MutationContext,
    variant: &'a str,
    model: &'a str,
    /// The record scope of the step's requests (`step-<n>`).
    scope: String,
    seed: u64,
    /// The parent's language, for the follow-up prompts.
    lang: String,
    messages: Vec<ChatMessage>,
    reply: ChatResponse,
    /// Follow-up requests made so far.
    repairs: u32,
    /// The evaluated kernel the latest draft repeated, with its result in words.
    repeated: Option<(CandidateId, String)>,
    /// The step's usage: meta-calls it made and every exchange.
    usage: Usage,
}

/// What the conversation does after a reply: ask again, or end with a child (`None`: the
/// replies only repeated kernels already evaluated).
type Next = ControlFlow<Option<Offspring>>;

impl Inner {
    /// One step: a variant and a model chosen by the seeded bandits, the prompt, and the
    /// conversation that turns the reply into at most one child.
    pub(super) async fn mutate(
        self: Arc<Self>,
        parent: &Elite,
        ctx: &MutationContext,
    ) -> Result<Mutation, PromptError> {
        self.remember_task(ctx);
        let (population, mut usage) = self.population_at(ctx.step).await;
        let credits = self.snapshot(ctx.step);
        let mut rng = ChaCha8Rng::seed_from_u64(ctx.seed);
        let variant = self.choose_variant(&population, &credits, &mut rng)?;
        let model = self.choose_model(&credits, &mut rng);
        let messages = self.first_prompt(parent, ctx, &variant, &credits);
        let seed = ctx.seed & 0x7fff_ffff;
        let scope = format!("step-{}", ctx.step);
        let first = match self.ask_step(&scope, &model, &messages, seed).await {
            Ok(x) => x,
            Err(e) => return self.first_ask_failed(e, parent, ctx, &variant.id, &model, usage),
        };
        usage.add(&exchange_usage(&first));
        let mut conversation = Conversation {
            parent,
            ctx,
            variant: &variant.id,
            model: &model,
            scope,
            seed,
            lang: parent.candidate.source.language.to_string(),
            messages,
            reply: first.response,
            repairs: 0,
            repeated: None,
            usage,
        };
        let child = self.converse(&mut conversation, &credits).await;
        self.record_step_cost(ctx.step, conversation.usage.cost_usd);
        let children = match child {
            Some(child) => vec![child],
            None => {
                let (of, result) = conversation
                    .repeated
                    .unwrap_or((parent.candidate.id, String::new()));
                tracing::info!(
                    "llm step {}: parent {}: the reply repeats {of} ({result}); not evaluated again",
                    ctx.step,
                    parent.candidate.id
                );
                Vec::new()
            }
        };
        Ok(Mutation {
            children,
            usage: conversation.usage,
        })
    }

    /// Remembers the run's task and device at the first step, for the meta-calls' prompts.
    fn remember_task(&self, ctx: &MutationContext) {
        let mut t = self.task.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_none() {
            *t = Some((Arc::clone(&ctx.task), ctx.device.clone()));
        }
    }

    /// The prompt variant of this step, chosen by the variant bandit among the active ones.
    fn choose_variant(
        &self,
        population: &[Arc<PromptVariant>],
        credits: &[CreditEvent],
        rng: &mut ChaCha8Rng,
    ) -> Result<Arc<PromptVariant>, PromptError> {
        let active = self.active(population, credits);
        let arms: Vec<ArmStats> = active
            .iter()
            .map(|v| Self::variant_stats(credits, &v.id))
            .collect();
        let vi = choose_arm(self.config.variant_policy, &arms, rng).unwrap_or(0);
        active
            .get(vi)
            .or(active.first())
            .cloned()
            .ok_or_else(|| PromptError::Config("no prompt variant".into()))
    }

    /// The step's first prompt: the parent with the earlier attempts from it, the run's recent
    /// lessons, the inspirations and hints, rendered from the variant's components.
    fn first_prompt(
        &self,
        parent: &Elite,
        ctx: &MutationContext,
        variant: &PromptVariant,
        credits: &[CreditEvent],
    ) -> Vec<ChatMessage> {
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
            credits,
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
        render_prompt(
            &variant.components,
            &self.templates,
            &self.config.limits,
            self.config.format,
            &input,
        )
    }

    /// What a step whose first request failed comes to: no children when the budget is spent
    /// and the mutator is set to propose none then; a child saying why when the model's reply
    /// could not be read; the error otherwise.
    fn first_ask_failed(
        &self,
        error: PromptError,
        parent: &Elite,
        ctx: &MutationContext,
        variant: &str,
        model: &str,
        usage: Usage,
    ) -> Result<Mutation, PromptError> {
        match error {
            e if e.is_budget_exhausted()
                && self.config.when_exhausted == WhenExhausted::NoChildren =>
            {
                let _ = self.on_error(e);
                Ok(Mutation {
                    children: Vec::new(),
                    usage,
                })
            }
            // A reply that was cut off or unreadable after every retry is the model's failure,
            // not the step's: a child that says why, so the reason reaches the next prompt.
            PromptError::Llm(f)
                if matches!(f.kind, FailureKind::Truncated | FailureKind::Malformed) =>
            {
                let reason = format!("the model's reply could not be read: {f}");
                let child = self.extraction_child(parent, ctx, variant, model, &reason);
                self.record_step_cost(ctx.step, usage.cost_usd);
                Ok(Mutation {
                    children: vec![child],
                    usage,
                })
            }
            e => Err(self.on_error(e)),
        }
    }

    /// Turns replies into a child until one is usable and new, or the follow-ups run out.
    async fn converse(
        &self,
        conversation: &mut Conversation<'_>,
        credits: &[CreditEvent],
    ) -> Option<Offspring> {
        let parent = conversation.parent;
        let src = &parent.candidate.source;
        loop {
            let draft = draft_from_reply(
                &conversation.reply.content,
                &src.entry,
                &src.text,
                src.manifest.as_deref(),
                conversation.reply.hit_token_limit(),
            );
            let next = match draft {
                Ok(d) => self.on_draft(conversation, d, credits).await,
                Err(u) if u.edits_failed && conversation.repairs < self.config.repair_attempts => {
                    self.ask_for_rewrite(conversation, u).await
                }
                Err(u) => ControlFlow::Break(Some(self.unusable_child(conversation, u))),
            };
            if let ControlFlow::Break(child) = next {
                return child;
            }
        }
    }

    /// A usable draft: its child, unless it repeats a kernel already evaluated; then the
    /// model is told the earlier result and asked again while follow-ups remain.
    async fn on_draft(
        &self,
        conversation: &mut Conversation<'_>,
        mut d: KernelDraft,
        credits: &[CreditEvent],
    ) -> Next {
        match &conversation.repeated {
            Some((of, _)) => d.how = format!("{} after repeating {of}", d.how),
            None if conversation.repairs > 0 => d.how = format!("{} after edits failed", d.how),
            None => {}
        }
        let c = &*conversation;
        let child = self.child_from_draft(c.parent, c.ctx, c.variant, c.model, d);
        let Some((of, result)) = self.repeated(&child, c.parent, c.ctx, credits) else {
            return ControlFlow::Break(Some(child));
        };
        conversation.repeated = Some((of, result.clone()));
        if conversation.repairs >= self.config.repair_attempts {
            return ControlFlow::Break(None);
        }
        // Answered from the earlier result; the model is told and asked again.
        conversation.repairs += 1;
        conversation.messages.push(ChatMessage::assistant(clip(
            &conversation.reply.content,
            self.config.limits.max_source_chars,
        )));
        conversation.messages.push(ChatMessage::user(fill(
            &self.templates.repeated_reply,
            &[
                ("candidate", &of.to_string()),
                ("result", &result),
                ("language", &conversation.lang),
            ],
        )));
        match self.ask_again(conversation).await {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                let _ = self.on_error(e);
                ControlFlow::Break(None)
            }
        }
    }

    /// A reply whose edits do not apply: asks for a full rewrite instead; when that request
    /// fails, the child says why.
    async fn ask_for_rewrite(&self, conversation: &mut Conversation<'_>, u: Unusable) -> Next {
        conversation.repairs += 1;
        conversation.messages = render_repair(
            &self.templates,
            &conversation.messages,
            &conversation.reply.content,
            &u.reason,
            &conversation.lang,
            self.config.limits.max_source_chars,
        );
        match self.ask_again(conversation).await {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                let e = self.on_error(e);
                let reason = format!("{}; asking for a full rewrite failed: {e}", u.reason);
                ControlFlow::Break(Some(self.failure_child(conversation, &reason)))
            }
        }
    }

    /// The child of a reply nothing usable could be drawn from.
    fn unusable_child(&self, conversation: &Conversation<'_>, u: Unusable) -> Offspring {
        let reason = if conversation.repairs > 0 {
            format!(
                "after a follow-up, the reply was unusable too: {}",
                u.reason
            )
        } else {
            u.reason
        };
        self.failure_child(conversation, &reason)
    }

    /// [`Inner::extraction_child`] of the conversation's parent, variant and model.
    fn failure_child(&self, conversation: &Conversation<'_>, reason: &str) -> Offspring {
        let c = conversation;
        self.extraction_child(c.parent, c.ctx, c.variant, c.model, reason)
    }

    /// Sends the conversation's messages again (after a follow-up was added); its reply
    /// becomes the latest, and its usage counts.
    async fn ask_again(&self, conversation: &mut Conversation<'_>) -> Result<(), PromptError> {
        let x = self
            .ask_step(
                &conversation.scope,
                conversation.model,
                &conversation.messages,
                conversation.seed,
            )
            .await?;
        conversation.usage.add(&exchange_usage(&x));
        conversation.reply = x.response;
        Ok(())
    }

    /// A request in a step's conversation (the first, a repair, or after a repeat).
    async fn ask_step(
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

    /// Remembers what step `step` cost, for the credit of its child (which arrives later).
    fn record_step_cost(&self, step: u64, cost_usd: f64) {
        self.step_costs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(step, cost_usd);
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

    /// The origin of a child of this step: mutator, variant, model, and what the reply did.
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

    /// A child that carries no kernel, only the reason nothing usable came back: ranked as an
    /// extraction error, and shown to later prompts.
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

    /// The inspirations the prompt showed, recorded as further parents of the child.
    fn also_from(&self, ctx: &MutationContext) -> Vec<kf_core::CandidateId> {
        ctx.inspirations
            .iter()
            .take(self.config.limits.max_inspirations)
            .map(|e| e.candidate.id)
            .collect()
    }

    /// The child a usable draft makes: its kernel with the reply's manifest (made lenient where
    /// it can be) or the parent's, and the parameters that go with that manifest.
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
}
