//! [`OpenAiClient`]: chat completions against any OpenAI-compatible server (OpenAI, vLLM,
//! llama.cpp's server, Ollama), with retries and timeouts.
//!
//! The HTTP stack (`reqwest` over `tokio`, rustls for TLS) runs on a small runtime owned by the
//! client; each request is spawned there and its answer comes back through a oneshot channel,
//! so the client works from any executor. Dropping a request future aborts the request.
//!
//! Why `reqwest` rather than `async-openai`: records must hold the raw request and the exact
//! reply, replies of llama.cpp and other compatible servers differ in small ways from OpenAI's
//! schema (a typed client fails on them), a reply cut off mid-body must be told apart from a
//! malformed one and retried, and `retry-after` must be honoured on 429 *and* 5xx with one
//! deadline per attempt. `async-openai`'s retries go through the unmaintained `backoff` crate
//! and only look at 429. The protocol itself is one POST, so a thin client is the smaller risk.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::client::{ChatRequest, ChatResponse, LlmClient, TokenUsage};
use crate::error::{FailureKind, LlmFailure, PromptError};

/// An API key. Its `Debug` and `Display` print `<redacted>`, so it never reaches a log; it is
/// sent only in the `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How transient failures (timeouts, 408, 429, 5xx, broken connections, cut-off replies) are
/// retried: exponential backoff with jitter, or the server's `retry-after` when it gives one.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each further one.
    pub base_delay: Duration,
    /// Longest backoff delay.
    pub max_delay: Duration,
    /// Longest `retry-after` honoured; a server asking for more fails the request.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// No retries: one attempt.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The backoff before attempt `attempt + 1` (1-based `attempt`), with ±20 % jitter drawn
    /// from `jitter` in `[0, 1)`.
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exp = 2f64.powi(attempt.saturating_sub(1).min(30) as i32);
        let base = self.base_delay.as_secs_f64() * exp;
        let capped = base.min(self.max_delay.as_secs_f64());
        Duration::from_secs_f64((capped * (0.8 + 0.4 * jitter.clamp(0.0, 1.0))).max(0.0))
    }
}

/// Where and how an [`OpenAiClient`] connects.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL of the API, up to and including the version (`https://api.openai.com/v1`,
    /// `http://127.0.0.1:8080/v1`); `/chat/completions` is appended.
    pub base_url: String,
    /// The key, sent as `Authorization: Bearer …` (none for local servers).
    pub api_key: Option<ApiKey>,
    /// Limit on one attempt, from sending the request to the end of the reply.
    pub timeout: Duration,
    /// Limit on establishing a connection.
    pub connect_timeout: Duration,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Threads of the client's own runtime.
    pub runtime_threads: usize,
}

impl OpenAiConfig {
    /// OpenAI's public endpoint.
    pub const OPENAI_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A configuration for `base_url` with a 300 s timeout and the default retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            runtime_threads: 1,
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Sets the per-attempt timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The chat-completions URL.
    pub fn chat_url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with("/chat/completions") {
            base.to_owned()
        } else {
            format!("{base}/chat/completions")
        }
    }
}

/// Owns the runtime; shuts it down without blocking, so a client may be dropped anywhere
/// (even inside another runtime).
struct RuntimeHolder(Option<tokio::runtime::Runtime>);

impl Drop for RuntimeHolder {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// Aborts the spawned request when the caller's future is dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Inner {
    http: reqwest::Client,
    url: String,
    key: Option<ApiKey>,
    retry: RetryPolicy,
    describe: String,
}

/// An [`LlmClient`] for OpenAI-compatible chat completions.
///
/// ```no_run
/// use kf_prompt::{ChatMessage, ChatRequest, LlmClient, OpenAiClient, OpenAiConfig};
///
/// let client = OpenAiClient::new(OpenAiConfig::new("http://127.0.0.1:8080/v1"))?;
/// let request = ChatRequest::new("local", vec![ChatMessage::user("Say hi")]).with_max_tokens(16);
/// let reply = futures::executor::block_on(client.complete(&request))?;
/// println!("{} ({} tokens)", reply.content, reply.usage.total());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct OpenAiClient {
    inner: Arc<Inner>,
    runtime: Arc<RuntimeHolder>,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("url", &self.inner.url)
            .field("api_key", &self.inner.key.as_ref().map(|_| "<redacted>"))
            .field("retry", &self.inner.retry)
            .finish()
    }
}

impl OpenAiClient {
    /// A client for `config`; starts its runtime.
    pub fn new(config: OpenAiConfig) -> Result<Self, PromptError> {
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(PromptError::Config(format!(
                "base URL `{}` must start with http:// or https://",
                config.base_url
            )));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.runtime_threads.max(1))
            .thread_name("kf-prompt-http")
            .enable_all()
            .build()
            .map_err(|e| PromptError::Client(format!("cannot start the runtime: {e}")))?;
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.timeout)
            .build()
            .map_err(|e| PromptError::Client(e.to_string()))?;
        let url = config.chat_url();
        Ok(OpenAiClient {
            inner: Arc::new(Inner {
                http,
                describe: url.clone(),
                url,
                key: config.api_key,
                retry: RetryPolicy {
                    max_attempts: config.retry.max_attempts.max(1),
                    ..config.retry
                },
            }),
            runtime: Arc::new(RuntimeHolder(Some(runtime))),
        })
    }
}

#[async_trait]
impl LlmClient for OpenAiClient {
    fn describe(&self) -> String {
        self.inner.describe.clone()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        let Some(rt) = self.runtime.0.as_ref() else {
            return Err(LlmFailure::new(
                FailureKind::Cancelled,
                "the client is shut down",
            ));
        };
        let (tx, rx) = futures::channel::oneshot::channel();
        let inner = Arc::clone(&self.inner);
        let request = request.clone();
        let task = rt.spawn(async move {
            let result = inner.send_with_retries(&request).await;
            let _ = tx.send(result);
        });
        let _abort = AbortOnDrop(task.abort_handle());
        match rx.await {
            Ok(result) => result,
            Err(_) => Err(LlmFailure::new(
                FailureKind::Cancelled,
                "the request task ended without an answer",
            )),
        }
    }
}

/// One attempt's failure, with the server's `retry-after` if it gave one.
struct AttemptError {
    failure: LlmFailure,
    retry_after: Option<Duration>,
}

impl Inner {
    async fn send_with_retries(&self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        let body = request_body(request);
        let mut attempt = 0u32;
        // Jitter from the request hash: no global RNG, and still spread across requests.
        let mut jitter_state = u64::from_str_radix(&request.content_hash()[..16], 16).unwrap_or(1);
        loop {
            attempt += 1;
            match self.attempt(&body, request).await {
                Ok(mut response) => {
                    response.attempts = attempt;
                    return Ok(response);
                }
                Err(AttemptError {
                    failure,
                    retry_after,
                }) => {
                    let failure = failure.with_attempts(attempt);
                    if !failure.kind.is_transient() || attempt >= self.retry.max_attempts {
                        return Err(failure);
                    }
                    let delay = match retry_after {
                        Some(d) if d > self.retry.max_retry_after => {
                            return Err(LlmFailure {
                                message: format!(
                                    "{}; the server asked to wait {:.0} s, more than the {:.0} s allowed",
                                    failure.message,
                                    d.as_secs_f64(),
                                    self.retry.max_retry_after.as_secs_f64()
                                ),
                                ..failure
                            });
                        }
                        Some(d) => d,
                        None => {
                            jitter_state = jitter_state
                                .wrapping_mul(6364136223846793005)
                                .wrapping_add(1442695040888963407);
                            let jitter = (jitter_state >> 11) as f64 / (1u64 << 53) as f64;
                            self.retry.backoff(attempt, jitter)
                        }
                    };
                    tracing::debug!(
                        kind = %failure.kind,
                        attempt,
                        delay_ms = delay.as_millis() as u64,
                        "LLM request failed; retrying"
                    );
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    async fn attempt(
        &self,
        body: &str,
        request: &ChatRequest,
    ) -> Result<ChatResponse, AttemptError> {
        let fail = |kind: FailureKind, message: String| AttemptError {
            failure: LlmFailure::new(kind, message),
            retry_after: None,
        };
        let mut builder = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        if let Some(key) = &self.key {
            builder = builder.bearer_auth(key.expose());
        }
        let response = builder
            .send()
            .await
            .map_err(|e| fail(classify_reqwest(&e), describe_reqwest(&e)))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let bytes = response.bytes().await.map_err(|e| {
            let kind = if e.is_timeout() {
                FailureKind::Timeout
            } else {
                FailureKind::Truncated
            };
            AttemptError {
                failure: LlmFailure::new(
                    kind,
                    format!("the reply body broke off: {}", describe_reqwest(&e)),
                )
                .with_status(status.as_u16()),
                retry_after: None,
            }
        })?;
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            let code = status.as_u16();
            let kind = match code {
                408 => FailureKind::Timeout,
                429 => FailureKind::RateLimited,
                500..=599 => FailureKind::Server,
                _ => FailureKind::Rejected,
            };
            return Err(AttemptError {
                failure: LlmFailure::new(kind, error_message(&text, code)).with_status(code),
                retry_after,
            });
        }
        parse_completion(&text, request).map_err(|failure| AttemptError {
            failure: failure.with_status(status.as_u16()),
            retry_after: None,
        })
    }
}

/// The JSON body sent for a request.
fn request_body(request: &ChatRequest) -> String {
    let mut body = serde_json::json!({
        "model": request.model,
        "messages": request.messages,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": false,
    });
    if let (Some(seed), Some(map)) = (request.seed, body.as_object_mut()) {
        // Servers take a signed 32- or 64-bit seed; keep it in the positive 31-bit range.
        map.insert("seed".into(), Value::from(seed & 0x7fff_ffff));
    }
    body.to_string()
}

fn classify_reqwest(e: &reqwest::Error) -> FailureKind {
    if e.is_timeout() {
        FailureKind::Timeout
    } else if e.is_body() || e.is_decode() {
        FailureKind::Truncated
    } else {
        FailureKind::Transport
    }
}

/// The error and its sources, without the URL's query (there is none) and never a header.
fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    bounded_message(&out)
}

fn bounded_message(text: &str) -> String {
    const MAX: usize = 600;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// `retry-after` as seconds (integer or decimal). HTTP dates are not honoured (backoff is used).
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// The `error.message` of an error body, or the body itself.
fn error_message(body: &str, status: u16) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        let e = v.get("error")?;
        e.get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| e.as_str().map(str::to_owned))
    });
    let message = from_json.unwrap_or_else(|| body.trim().to_owned());
    if message.is_empty() {
        format!("HTTP {status}")
    } else {
        bounded_message(&format!("HTTP {status}: {message}"))
    }
}

/// Parses a chat-completion body tolerantly (content as a string, null or a list of text
/// parts; usage optional).
pub(crate) fn parse_completion(
    text: &str,
    request: &ChatRequest,
) -> Result<ChatResponse, LlmFailure> {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) if e.is_eof() => {
            return Err(LlmFailure::new(
                FailureKind::Truncated,
                format!(
                    "the reply ended in the middle of its JSON ({} bytes): {e}",
                    text.len()
                ),
            ))
        }
        Err(e) => {
            return Err(LlmFailure::new(
                FailureKind::Malformed,
                bounded_message(&format!(
                    "the reply is not JSON: {e}; it starts with {:?}",
                    head(text)
                )),
            ))
        }
    };
    if let Some(err) = value.get("error").filter(|e| !e.is_null()) {
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| err.to_string());
        return Err(LlmFailure::new(
            FailureKind::Server,
            bounded_message(&format!("the server reported an error: {message}")),
        ));
    }
    let Some(choice) = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return Err(LlmFailure::new(
            FailureKind::Malformed,
            bounded_message(&format!("the reply has no choices: {:?}", head(text))),
        ));
    };
    let content = match choice.get("message").and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(other) => {
            return Err(LlmFailure::new(
                FailureKind::Malformed,
                format!(
                    "message content is neither text nor parts: {}",
                    head(&other.to_string())
                ),
            ))
        }
    };
    let finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let model = value
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(&request.model)
        .to_owned();
    let usage = value.get("usage").filter(|u| u.is_object());
    let tokens = |name: &str| usage.and_then(|u| u.get(name)).and_then(Value::as_u64);
    let usage = match (tokens("prompt_tokens"), tokens("completion_tokens")) {
        (Some(p), Some(c)) => TokenUsage {
            prompt_tokens: p,
            completion_tokens: c,
            estimated: false,
        },
        _ => TokenUsage {
            prompt_tokens: request.estimated_prompt_tokens(),
            completion_tokens: (content.len() as u64).div_ceil(3),
            estimated: true,
        },
    };
    Ok(ChatResponse {
        content,
        finish_reason,
        model,
        usage,
        attempts: 1,
    })
}

fn head(text: &str) -> &str {
    let mut end = text.len().min(120);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ChatMessage;

    fn req() -> ChatRequest {
        ChatRequest::new("m", vec![ChatMessage::user("hello")])
    }

    #[test]
    fn api_key_is_redacted() {
        let key = ApiKey::new("sk-secret-123");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(key.to_string(), "<redacted>");
        let config = OpenAiConfig::new("http://x/v1").with_api_key(key);
        assert!(!format!("{config:?}").contains("sk-secret"));
        let client = OpenAiClient::new(config).unwrap();
        assert!(!format!("{client:?}").contains("sk-secret"));
    }

    #[test]
    fn parses_tolerantly() {
        let r = parse_completion(
            r#"{"choices":[{"message":{"content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
            &req(),
        )
        .unwrap();
        assert_eq!(r.content, "hi");
        assert!(r.hit_token_limit());
        assert_eq!(r.usage.total(), 5);
        assert!(!r.usage.estimated);
        let parts = parse_completion(
            r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#,
            &req(),
        )
        .unwrap();
        assert_eq!(parts.content, "ab");
        assert!(parts.usage.estimated);
        let null =
            parse_completion(r#"{"choices":[{"message":{"content":null}}]}"#, &req()).unwrap();
        assert_eq!(null.content, "");
    }

    #[test]
    fn classifies_bad_bodies() {
        let cut =
            parse_completion(r#"{"choices":[{"message":{"content":"hel"#, &req()).unwrap_err();
        assert_eq!(cut.kind, FailureKind::Truncated);
        let junk = parse_completion("<html>oops</html>", &req()).unwrap_err();
        assert_eq!(junk.kind, FailureKind::Malformed);
        let none = parse_completion(r#"{"choices":[]}"#, &req()).unwrap_err();
        assert_eq!(none.kind, FailureKind::Malformed);
        let err = parse_completion(r#"{"error":{"message":"overloaded"}}"#, &req()).unwrap_err();
        assert_eq!(err.kind, FailureKind::Server);
    }

    #[test]
    fn retry_after_and_backoff() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        let p = RetryPolicy::default();
        assert!(p.backoff(1, 0.5) < p.backoff(2, 0.5));
        assert!(p.backoff(30, 1.0) <= p.max_delay.mul_f64(1.2));
    }

    #[test]
    fn body_carries_seed_and_no_key() {
        let body = request_body(&req().with_seed(u64::MAX));
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["seed"], Value::from(0x7fff_ffffu64));
        assert_eq!(v["stream"], Value::Bool(false));
        assert_eq!(v["messages"][0]["role"], "user");
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error_message(r#"{"error":{"message":"slow down"}}"#, 429),
            "HTTP 429: slow down"
        );
        assert_eq!(error_message("", 503), "HTTP 503");
    }
}
