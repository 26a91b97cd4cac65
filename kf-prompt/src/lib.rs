//! # kf-prompt
//!
//! The LLM side of KernelFoundry-rs: prompts that co-evolve with the kernels, the mutator that
//! asks a model for a child kernel, an OpenAI-compatible client, and record/replay of every
//! exchange.
//!
//! * **Prompt components as data** ([`PromptComponents`], [`PromptTemplates`]): named, bounded
//!   sections — optimisation philosophy, strategy library, common pitfalls, analysis guidance —
//!   seeded from the seed document and shipped as TOML (`components/*.toml`), replaceable by
//!   users. [`render_prompt`] combines them with the task, the device facts, the parent kernel
//!   with its manifest and evaluation feedback (status, diagnostics summarised with
//!   [`summarize`], timing, compiler facts), earlier attempts from the same parent,
//!   inspirations from other cells and a hint of where the archive is empty ("increase
//!   memory_access from … to …"), within [`RenderLimits`].
//! * **Meta-prompt evolution** ([`population`]): a population of [`PromptVariant`]s; every
//!   few steps a meta-call rewrites one component of the best variant (improve, specialise,
//!   generalise, simplify), once the LLM has children judged to learn from; a seeded bandit
//!   ([`BanditPolicy`]: UCB1 or Thompson) picks the variant per request, credited through
//!   [`kf_core::Mutator::credit`] by what each child did for the archive ([`CreditConfig`]:
//!   new cell, improvement by its gain, nothing). Each
//!   child's [`kf_core::Origin`] names its variant and model.
//! * **The client** ([`LlmClient`], [`OpenAiClient`]): chat completions against any
//!   OpenAI-compatible server, with retries and backoff on 429/5xx/timeouts/cut-off replies
//!   honouring `retry-after`, run on a runtime owned by the client so any executor can drive
//!   it. [`LlmGateway`] adds the hard budget ([`LlmBudget`], counting requests in flight), the
//!   concurrency limit, prices per model ([`ModelSpec`]) and statistics ([`LlmStats`]).
//! * **Parsing** ([`parse`]): fenced blocks for the kernel and its manifest, or SEARCH/REPLACE
//!   edits applied with whitespace-tolerant matching (with a follow-up asking for a full
//!   rewrite when they do not apply). A reply with nothing usable becomes a child marked with
//!   [`extraction_failure_source`], which `kf-eval` ranks as `extraction_error` with the reason.
//!   The reply format (also in the guide's chapter "An LLM in the search"):
//!
//!   ````text
//!   One sentence on the change.
//!   ```opencl
//!   __kernel void gemm(…) { … }          <- the kernel: any kernel label, or none
//!   ```
//!   ```toml
//!   [params]                              <- the manifest: any fence whose text reads as
//!   RM = [4, 2]                              one (```ini, ```toml:gemm.toml, none), or a
//!   [launch]                                 block under a `manifest` / `gemm.toml` label
//!   global = ["N", "M / RM"]
//!   ```
//!   manifest                              <- or edits; the label above says which file,
//!   ```diff                                  even inside a ```diff fence
//!   <<<<<<< SEARCH
//!   RM = [4, 2]
//!   =======
//!   RM = [2, 4]
//!   >>>>>>> REPLACE
//!   ```
//!   ````
//!
//!   A model's manifest is read leniently ([`parse::lenient_manifest`]: `entry` and
//!   `language` default to the parent's, unknown keys are dropped with a note), and every such
//!   note goes into the child's origin, the log and later prompts; files users write keep the
//!   strict loading of `kf-manifest`.
//! * **Feedback that arrives**: every prompt has a bounded *recent lessons* section — the
//!   latest distinct outcomes of the LLM's children of any parent, failures with the
//!   diagnostics that matter — visible `lag_steps` after a child was judged whatever the
//!   selection does, beside the earlier attempts from the same parent. A reply that repeats a
//!   kernel already evaluated ([`fingerprint`]: comments and whitespace folded, the manifest
//!   read as TOML) is not evaluated again: the model is told what that kernel got and asked
//!   for another (within `repair_attempts`); if it repeats again, the step proposes nothing.
//!   At the default log level each LLM child gets one line: step, child, parent, how the
//!   reply was read, status, what it did for the archive.
//! * **Record and replay** ([`record`]): every exchange is appended to the run folder as a JSON
//!   line keyed by request hash, scope (the engine step) and occurrence. A run replayed from its
//!   records with no server gets every answer at the same place (step and position) and, with
//!   a deterministic evaluator, builds the same archive; a resumed run does not pay twice for
//!   answers it already has. Every choice of the mutator (prompt variant, model, meta-call) is
//!   a function of the engine step and of credit that has settled, never of timing, so this
//!   holds with steps in flight too.
//! * **Configuration** ([`LlmSettings`]): from a struct or from `KF_LLM_*` environment
//!   variables; the API key ([`ApiKey`]) is redacted from every `Debug` output and never
//!   reaches evaluation workers (`kf-eval` strips `KF_LLM_*` and `*KEY*` variables).
//!
//! ```no_run
//! use kf_prompt::{LlmMutator, LlmSettings, OpenAiClient};
//!
//! let settings = LlmSettings::from_env()?;
//! let mutator = LlmMutator::builder(OpenAiClient::new(settings.openai.clone())?)
//!     .settings(&settings)
//!     .record_in("runs/gemm")
//!     .build()?;
//! // Engine::new(mutator, evaluator, classifier, archive)…
//! # Ok::<(), kf_prompt::PromptError>(())
//! ```

mod bandit;
mod client;
mod components;
mod config;
mod error;
mod fingerprint;
mod gateway;
mod lessons;
mod llm_budget;
mod marker;
mod mutator;
mod openai;
pub mod parse;
pub mod population;
pub mod record;
mod render;
pub mod simulate;
pub mod testing;

pub use async_trait::async_trait;
pub use bandit::{choose_arm, weighted_index, ArmStats, BanditPolicy};
pub use client::{ChatMessage, ChatRequest, ChatResponse, LlmClient, Role, TokenUsage};
pub use components::{
    fill, Component, PromptComponents, PromptTemplates, DEFAULT_COMPONENTS_TOML,
    DEFAULT_TEMPLATES_TOML,
};
pub use config::{LlmBudget, LlmSettings, ModelPolicy, ModelSpec};
pub use error::{FailureKind, LlmFailure, PromptError};
pub use fingerprint::fingerprint;
pub use gateway::{Exchange, GatewayBuilder, LlmGateway, LlmStats};
pub use llm_budget::{BudgetExceeded, BudgetTracker, CostUnit, Reservation, Spend};
pub use marker::{extraction_failure, extraction_failure_source, EXTRACTION_ERROR_MARKER};
pub use mutator::{LlmMutator, LlmMutatorBuilder, LlmMutatorConfig, WhenExhausted, VARIANTS_FILE};
pub use openai::{
    decode_chat_reply, decode_error_reply, ApiKey, ChatStreamDecoder, OpenAiClient, OpenAiConfig,
    RetryPolicy,
};
pub use population::{CreditConfig, CreditEvent, MetaConfig, PromptVariant, VariantReport};
pub use record::{
    ExchangeKey, ExchangeLog, ExchangeOutcome, ExchangeRecord, RecordMode, EXCHANGES_FILE,
};
pub use render::{
    describe_cell, describe_evaluation, describe_interface, hint_lines, render_prompt,
    render_repair, render_system, summarize, Attempt, PromptInput, RenderLimits, ReplyFormat,
};
