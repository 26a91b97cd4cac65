//! LLM calls through the queue (feature `llm`): [`QueuedLlm`] is an [`LlmClient`] that asks an
//! endpoint's answer workers through an [`Asker`], and [`LlmAnswerer`] is the answer workers'
//! handler, an [`LlmGateway`] in front of the model server. Every search that asks the endpoint
//! shares the gateway's budget and concurrency limit (and its record of exchanges), and the
//! workers run next to the model server while the searches run anywhere.
//!
//! A question is a [`ChatRequest`]; an answer is `{"response": ChatResponse}` or
//! `{"failure": LlmFailure}` (a spent budget is [`FailureKind::BudgetExhausted`], as from a
//! gateway of the search's own).

use kf_core::{async_trait, BoxError, Candidate, Evaluation};
use kf_prompt::{
    ChatRequest, ChatResponse, FailureKind, LlmClient, LlmFailure, LlmGateway, PromptError,
};
use serde::{Deserialize, Serialize};

use crate::ask::Asker;
use crate::job::Profile;
use crate::worker::JobHandler;

/// An answer as it travels.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum LlmAnswer {
    /// The model's reply.
    Response(ChatResponse),
    /// Why there is none.
    Failure(LlmFailure),
}

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
            .map_err(|e| LlmFailure::new(FailureKind::Transport, e.to_string()))?
            .map_err(|e| LlmFailure::new(FailureKind::Server, e))?;
        match serde_json::from_value::<LlmAnswer>(answer) {
            Ok(LlmAnswer::Response(r)) => Ok(r),
            Ok(LlmAnswer::Failure(f)) => Err(f),
            Err(e) => Err(LlmFailure::new(
                FailureKind::Malformed,
                format!("an answer from the queue: {e}"),
            )),
        }
    }
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
    ) -> Result<Result<serde_json::Value, String>, BoxError> {
        let request: ChatRequest = match serde_json::from_value(question.clone()) {
            Ok(r) => r,
            Err(e) => return Ok(Err(format!("not a chat request: {e}"))),
        };
        let answer = match self.gateway.ask(endpoint, request).await {
            Ok(exchange) => LlmAnswer::Response(exchange.response),
            Err(PromptError::Llm(failure)) => LlmAnswer::Failure(failure),
            Err(e) => LlmAnswer::Failure(LlmFailure::new(FailureKind::Rejected, e.to_string())),
        };
        Ok(Ok(serde_json::to_value(answer)?))
    }
}
