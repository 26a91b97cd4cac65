//! Errors of `kf-prompt`: one enum for the crate, and [`LlmFailure`], the serialisable reason
//! an LLM request failed (it is recorded with the exchange and replayed as it happened).

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Why an LLM request produced no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// The server did not answer in time (after every retry).
    Timeout,
    /// The server kept answering 429 Too Many Requests.
    RateLimited,
    /// The server kept answering 5xx.
    Server,
    /// The connection failed or broke.
    Transport,
    /// The reply body ended before it was complete (a reply cut off mid-stream).
    Truncated,
    /// The reply was not the JSON of a chat completion.
    Malformed,
    /// The server refused the request for good (4xx other than 408 and 429: a bad key, an
    /// unknown model, a prompt over the context length).
    Rejected,
    /// The budget could not cover the request; nothing was sent.
    BudgetExhausted,
    /// The request was abandoned (the client was shut down).
    Cancelled,
}

impl FailureKind {
    /// The snake_case name used in records and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::RateLimited => "rate_limited",
            FailureKind::Server => "server",
            FailureKind::Transport => "transport",
            FailureKind::Truncated => "truncated",
            FailureKind::Malformed => "malformed",
            FailureKind::Rejected => "rejected",
            FailureKind::BudgetExhausted => "budget_exhausted",
            FailureKind::Cancelled => "cancelled",
        }
    }

    /// Whether a later attempt may succeed (the client retries these with backoff).
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            FailureKind::Timeout
                | FailureKind::RateLimited
                | FailureKind::Server
                | FailureKind::Transport
                | FailureKind::Truncated
        )
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed LLM request: what kind of failure, the last HTTP status if any, how many attempts
/// were made, and a message (never containing the API key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind}: {message} (after {attempts} attempt(s){})", .status.map(|s| format!(", last HTTP status {s}")).unwrap_or_default())]
pub struct LlmFailure {
    /// What went wrong.
    pub kind: FailureKind,
    /// What the server or the network said, bounded.
    pub message: String,
    /// The last HTTP status, when a response arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Attempts made (0 when nothing was sent).
    #[serde(default)]
    pub attempts: u32,
}

impl LlmFailure {
    /// A failure of `kind` with a message and no HTTP status.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        LlmFailure {
            kind,
            message: message.into(),
            status: None,
            attempts: 0,
        }
    }

    /// Sets the HTTP status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// Sets the number of attempts.
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }
}

/// Errors of `kf-prompt`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// An LLM request failed (after retries), or the budget refused it.
    #[error("LLM request failed: {0}")]
    Llm(#[from] LlmFailure),
    /// A configuration value is missing or invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Prompt components or templates could not be read.
    #[error("invalid prompt components in {origin}: {message}")]
    Components {
        /// Which file or text.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// The exchange records could not be read or written.
    #[error("exchange records {path}: {source}")]
    Records {
        /// The records file.
        path: PathBuf,
        /// What the file system said.
        source: std::io::Error,
    },
    /// A replayed run asked a question the records do not hold (the run diverged from the
    /// recorded one, or the records are incomplete).
    #[error("replay: no recorded answer for request {key} (model {model}); the run diverged from its records or they are incomplete")]
    ReplayMiss {
        /// The record key (`hash/scope/occurrence`).
        key: String,
        /// The requested model.
        model: String,
    },
    /// The HTTP client or its runtime could not be set up.
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
}

impl PromptError {
    /// The LLM failure inside, if this is one.
    pub fn llm_failure(&self) -> Option<&LlmFailure> {
        match self {
            PromptError::Llm(f) => Some(f),
            _ => None,
        }
    }

    /// True when the budget refused a request.
    pub fn is_budget_exhausted(&self) -> bool {
        self.llm_failure()
            .is_some_and(|f| f.kind == FailureKind::BudgetExhausted)
    }
}
