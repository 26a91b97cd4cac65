//! The [`LlmClient`] trait and the chat vocabulary it speaks.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::LlmFailure;

/// Who wrote a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user's turn.
    User,
    /// The model's turn.
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Its author.
    pub role: Role,
    /// Its text.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::System,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            content: content.into(),
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// A chat-completion request. Everything in it is part of the record key, so the same request
/// made by a replayed run finds the recorded answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model name as the server knows it.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// Most tokens the reply may have.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: f32,
    /// Sampling seed, for servers that honour one (llama.cpp, vLLM, OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl ChatRequest {
    /// A request with 1024 reply tokens, temperature 0.7 and no seed.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            model: model.into(),
            messages,
            max_tokens: 1024,
            temperature: 0.7,
            seed: None,
        }
    }

    /// Sets the reply token limit.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Sets the temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = temperature;
        self
    }

    /// Sets the sampling seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Characters of prompt text (for token estimates).
    pub fn prompt_chars(&self) -> usize {
        self.messages.iter().map(|m| m.content.len()).sum()
    }

    /// A conservative estimate of the prompt's tokens (about three characters per token, plus
    /// a few per message), used to reserve budget before the request is sent.
    pub fn estimated_prompt_tokens(&self) -> u64 {
        (self.prompt_chars() as u64).div_ceil(3) + 8 * self.messages.len() as u64
    }

    /// A stable content hash (BLAKE3, hex) of everything in the request: the first part of its
    /// record key.
    pub fn content_hash(&self) -> String {
        let mut h = blake3::Hasher::new();
        let mut part = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        part(self.model.as_bytes());
        for m in &self.messages {
            part(match m.role {
                Role::System => b"system",
                Role::User => b"user",
                Role::Assistant => b"assistant",
            });
            part(m.content.as_bytes());
        }
        part(&self.max_tokens.to_le_bytes());
        part(&self.temperature.to_bits().to_le_bytes());
        match self.seed {
            Some(s) => part(&s.to_le_bytes()),
            None => part(b"-"),
        }
        h.finalize().to_hex().to_string()
    }
}

/// Tokens of one exchange.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// True when the server reported no usage and these are estimates.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl TokenUsage {
    /// Prompt plus completion tokens (at most `u64::MAX`: the counts are the server's word).
    pub fn total(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// A chat-completion answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The reply text (empty when the model said nothing).
    pub content: String,
    /// Why generation stopped (`stop`, `length`, …), as the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// The model that answered, as the server named it.
    #[serde(default)]
    pub model: String,
    /// Tokens used.
    pub usage: TokenUsage,
    /// Attempts it took (1 without retries).
    #[serde(default)]
    pub attempts: u32,
}

impl ChatResponse {
    /// A response with the given text, `stop` as finish reason and no usage.
    pub fn text(content: impl Into<String>) -> Self {
        ChatResponse {
            content: content.into(),
            finish_reason: Some("stop".into()),
            model: String::new(),
            usage: TokenUsage::default(),
            attempts: 1,
        }
    }

    /// True when generation stopped at the token limit, so the reply is cut off.
    pub fn hit_token_limit(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// Sends chat-completion requests to a model. [`crate::OpenAiClient`] implements it for any
/// OpenAI-compatible server; tests and embedders implement it for canned or local models.
///
/// Implementations must work when polled from any executor (the search engine uses
/// `futures::executor::block_on` by default) and should retry transient failures themselves;
/// budget, concurrency limits and record/replay live in [`crate::LlmGateway`] on top.
///
/// # Example
///
/// ```
/// use kf_prompt::{async_trait, ChatMessage, ChatRequest, ChatResponse, LlmClient, LlmFailure};
///
/// /// Answers every request with the same kernel.
/// struct Canned;
///
/// #[async_trait]
/// impl LlmClient for Canned {
///     async fn complete(&self, _request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
///         Ok(ChatResponse::text("```opencl\n__kernel void k() {}\n```"))
///     }
/// }
///
/// let request = ChatRequest::new("any", vec![ChatMessage::user("write a kernel")]);
/// let reply = futures::executor::block_on(Canned.complete(&request)).unwrap();
/// assert!(reply.content.contains("__kernel"));
/// ```
#[async_trait]
pub trait LlmClient: Send + Sync {
    /// A short description for logs (for example the base URL); never the API key.
    fn describe(&self) -> String {
        "llm".to_owned()
    }

    /// Sends one request and returns the answer, retrying transient failures.
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure>;
}

#[async_trait]
impl<C: LlmClient + ?Sized> LlmClient for Arc<C> {
    fn describe(&self) -> String {
        (**self).describe()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        (**self).complete(request).await
    }
}

#[async_trait]
impl<C: LlmClient + ?Sized> LlmClient for Box<C> {
    fn describe(&self) -> String {
        (**self).describe()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        (**self).complete(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `chat_reply` fuzz target: a server reporting token counts near `u64::MAX`
    /// made `total` overflow (a panic in debug builds; in release the sum wrapped, and the
    /// gateway charged the budget almost nothing).
    #[test]
    fn usage_from_the_server_saturates() {
        let request = ChatRequest::new("m", vec![ChatMessage::user("hi")]);
        let body = br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":1}}"#;
        let reply = crate::decode_chat_reply(body, &request).unwrap();
        assert_eq!(reply.usage.total(), u64::MAX);
    }

    #[test]
    fn hash_changes_with_every_field() {
        let base = ChatRequest::new("m", vec![ChatMessage::user("hi")]);
        let h = base.content_hash();
        assert_eq!(h, base.clone().content_hash());
        assert_ne!(h, base.clone().with_seed(1).content_hash());
        assert_ne!(h, base.clone().with_max_tokens(5).content_hash());
        assert_ne!(h, base.clone().with_temperature(0.1).content_hash());
        let mut other = base.clone();
        other.messages[0].role = Role::System;
        assert_ne!(h, other.content_hash());
        let mut moved = ChatRequest::new("m", vec![ChatMessage::user("h"), ChatMessage::user("i")]);
        assert_ne!(h, moved.content_hash());
        moved.model = "n".into();
        assert_ne!(h, moved.content_hash());
    }
}
