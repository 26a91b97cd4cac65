//! LLM calls through the queue (feature `llm`): [`QueuedLlm`] is an [`LlmClient`] that asks an
//! endpoint's answer workers through an [`Asker`], and [`LlmAnswerer`] is the answer workers'
//! handler, an [`LlmGateway`] in front of the model server. Every search that asks the endpoint
//! shares the gateway's budget and concurrency limit (and its record of exchanges), and the
//! workers run next to the model server while the searches run anywhere.
//!
//! A question is a [`ChatRequest`]; an answer is the [`ChatResponse`], or a failed answer
//! holding the [`LlmFailure`] as JSON (a spent budget is [`FailureKind::BudgetExhausted`], as
//! from a gateway of the search's own). A failed answer is never reused by a resumed run: the
//! question is asked again.

use crate::ask::{Asker, NoAnswer};
use crate::job::Profile;
use crate::worker::JobHandler;
use kf_core::{async_trait, BoxError, Candidate, Evaluation};
use kf_prompt::{
    ChatRequest, ChatResponse, FailureKind, LlmClient, LlmFailure, LlmGateway, PromptError,
};

/// An [`LlmClient`] that asks through the queue: `kf search --llm --llm-queue ENDPOINT`.
#[derive(Debug, Clone)]
pub struct QueuedLlm {
    asker: Asker,
    endpoint: String,
}

impl QueuedLlm {
    /// A client asking through `asker` (whose endpoint it names in logs).
    pub fn new(asker: Asker, endpoint: impl Into<String>) -> Self {
        QueuedLlm {
            asker,
            endpoint: endpoint.into(),
        }
    }
}

#[async_trait]
impl LlmClient for QueuedLlm {
    fn describe(&self) -> String {
        format!("the queue's endpoint {}", self.endpoint)
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        let question = serde_json::to_value(request)
            .map_err(|e| LlmFailure::new(FailureKind::Malformed, e.to_string()))?;
        let answer = self
            .asker
            .ask(&question)
            .await
            .map_err(|e| LlmFailure::new(FailureKind::Transport, e.to_string()))?;
        decode_llm_answer(answer)
    }
}

/// Decodes an answer worker's answer to an LLM question ([`crate::Asker::ask`]'s, or
/// [`crate::AnswerMessage::answer`]) as [`QueuedLlm`] does: the [`ChatResponse`] as JSON, or it
/// is [`FailureKind::Malformed`]; a failed answer is the [`LlmFailure`] as JSON text (the answer
/// worker's), or any other text (the queue's: a refused or poison question) as a
/// [`FailureKind::Server`] failure.
pub fn decode_llm_answer<E: Into<NoAnswer>>(
    answer: Result<serde_json::Value, E>,
) -> Result<ChatResponse, LlmFailure> {
    let answer = answer.map_err(|why| {
        let NoAnswer(text) = why.into();
        serde_json::from_str::<LlmFailure>(&text)
            .unwrap_or_else(|_| LlmFailure::new(FailureKind::Server, text))
    })?;
    serde_json::from_value::<ChatResponse>(answer).map_err(|e| {
        LlmFailure::new(
            FailureKind::Malformed,
            format!("an answer from the queue: {e}"),
        )
    })
}

/// The handler of an LLM answer worker (`kf worker --role answer`): asks its gateway, whose
/// budget and concurrency limit every search asking through the queue shares. It evaluates
/// no kernels.
pub struct LlmAnswerer {
    gateway: LlmGateway,
}

impl LlmAnswerer {
    /// An answerer asking through `gateway`.
    pub fn new(gateway: LlmGateway) -> Self {
        LlmAnswerer { gateway }
    }

    /// The gateway (its statistics: requests, tokens, cost, refusals).
    pub fn gateway(&self) -> &LlmGateway {
        &self.gateway
    }
}

#[async_trait]
impl JobHandler for LlmAnswerer {
    async fn evaluate(&self, _: &Profile, _: &Candidate) -> Result<Evaluation, BoxError> {
        Err("an LLM answer worker evaluates no kernels".into())
    }

    async fn answer(
        &self,
        endpoint: &str,
        question: &serde_json::Value,
    ) -> Result<Result<serde_json::Value, NoAnswer>, BoxError> {
        let request: ChatRequest = match serde_json::from_value(question.clone()) {
            Ok(r) => r,
            Err(e) => return Ok(Err(NoAnswer(format!("not a chat request: {e}")))),
        };
        let failure = match self.gateway.ask(endpoint, request).await {
            Ok(exchange) => return Ok(Ok(serde_json::to_value(exchange.response)?)),
            Err(PromptError::Llm(failure)) => failure,
            Err(e) => LlmFailure::new(FailureKind::Rejected, e.to_string()),
        };
        Ok(Err(NoAnswer(serde_json::to_string(&failure)?)))
    }
}
