//! [`OpenAiClient`]: chat completions against any OpenAI-compatible server (OpenAI, vLLM,
//! llama.cpp's server, Ollama), with retries, timeouts, streaming and a cap on reply size.
//!
//! Replies are streamed (`stream: true`, server-sent events) unless turned off, so a slow model
//! that keeps sending tokens is never cut off by a blanket timeout: an attempt may wait
//! [`OpenAiConfig::timeout`] for the first chunk, then [`OpenAiConfig::idle_timeout`] between
//! chunks, within the request's [`OpenAiConfig::total_timeout`] (retries and their waits
//! included). A server that ignores `stream` and answers with one JSON body is read as such. A
//! reply longer than [`OpenAiConfig::max_reply_bytes`] is cut there and returned with finish
//! reason `length` (streamed) or refused as `malformed` (one body, which cannot be parsed
//! half-read), so the mutator turns it into an extraction failure with the reason. Requests in
//! flight to the endpoint are limited by [`OpenAiConfig::max_concurrency`] across every clone of
//! the client.
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
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;

use crate::client::{ChatRequest, ChatResponse, LlmClient, TokenUsage};
use crate::error::{FailureKind, LlmFailure, PromptError};

/// An API key. Its `Debug` and `Display` print `<redacted>`, so it never reaches a log; it is
/// sent only in the `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key, and registers it with [`kf_core::redact`] so that no text leaving the
    /// process (a compiler log fed back into a prompt, a record) carries it.
    pub fn new(key: impl Into<String>) -> Self {
        let key = key.into();
        kf_core::redact::register_secret(&key);
        ApiKey(key)
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
    /// Limit on one attempt: from sending the request to the end of the reply when not
    /// streaming, to the first chunk of the reply when streaming.
    pub timeout: Duration,
    /// Longest silence between two chunks of a streamed reply.
    pub idle_timeout: Duration,
    /// Limit on the whole request, every attempt and every wait between them included (none:
    /// bounded by the attempts only).
    pub total_timeout: Option<Duration>,
    /// Limit on establishing a connection.
    pub connect_timeout: Duration,
    /// Asks for a streamed reply (`stream: true`).
    pub stream: bool,
    /// Longest reply text kept, bytes; a longer reply is cut (streamed) or refused (one body).
    pub max_reply_bytes: usize,
    /// Requests in flight to this endpoint at most, shared by every clone of the client (none:
    /// no limit here; the gateway has its own).
    pub max_concurrency: Option<usize>,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// Threads of the client's own runtime.
    pub runtime_threads: usize,
}

impl OpenAiConfig {
    /// OpenAI's public endpoint.
    pub const OPENAI_BASE_URL: &'static str = "https://api.openai.com/v1";

    /// A configuration for `base_url`: streamed replies of at most 1 MiB, 300 s to the first
    /// chunk, 60 s between chunks, no total limit, no endpoint concurrency limit, the default
    /// retries.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(60),
            total_timeout: None,
            connect_timeout: Duration::from_secs(10),
            stream: true,
            max_reply_bytes: 1 << 20,
            max_concurrency: None,
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

    /// Sets the longest silence between streamed chunks.
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }

    /// Sets the limit on a whole request, retries included.
    pub fn with_total_timeout(mut self, total: Duration) -> Self {
        self.total_timeout = Some(total);
        self
    }

    /// Streams replies (`true`) or asks for one JSON body (`false`).
    pub fn with_stream(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// Sets the cap on reply size, bytes.
    pub fn with_max_reply_bytes(mut self, bytes: usize) -> Self {
        self.max_reply_bytes = bytes;
        self
    }

    /// Limits the requests in flight to this endpoint.
    pub fn with_max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = Some(n.max(1));
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
    timeout: Duration,
    idle_timeout: Duration,
    total_timeout: Option<Duration>,
    stream: bool,
    max_reply_bytes: usize,
    slots: Option<tokio::sync::Semaphore>,
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
            .field("url", &self.inner.describe)
            .field("api_key", &self.inner.key.as_ref().map(|_| "<redacted>"))
            .field("stream", &self.inner.stream)
            .field("retry", &self.inner.retry)
            .finish()
    }
}

impl OpenAiClient {
    /// A client for `config`; starts its runtime.
    pub fn new(config: OpenAiConfig) -> Result<Self, PromptError> {
        // A URL may carry a user and password: printed without it, kept out of every log.
        if let Some(password) = kf_core::redact::url_password(&config.base_url) {
            kf_core::redact::register_secret(password);
        }
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(PromptError::Config(format!(
                "base URL `{}` must start with http:// or https://",
                kf_core::redact::redact_url(&config.base_url)
            )));
        }
        for (name, d) in [
            ("timeout", config.timeout),
            ("idle timeout", config.idle_timeout),
            ("connect timeout", config.connect_timeout),
        ] {
            if d.is_zero() {
                return Err(PromptError::Config(format!("the {name} must be positive")));
            }
        }
        if config.max_reply_bytes == 0 {
            return Err(PromptError::Config(
                "the reply size cap must be positive".into(),
            ));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.runtime_threads.max(1))
            .thread_name("kf-prompt-http")
            .enable_all()
            .build()
            .map_err(|e| PromptError::Client(format!("cannot start the runtime: {e}")))?;
        // No blanket timeout on the client: attempts enforce theirs chunk by chunk, so a
        // streamed reply may take as long as it keeps coming.
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| PromptError::Client(e.to_string()))?;
        let url = config.chat_url();
        Ok(OpenAiClient {
            inner: Arc::new(Inner {
                http,
                // What the client is called in logs and by `kf search`: its URL without a
                // password.
                describe: kf_core::redact::redact_url(&url),
                url,
                key: config.api_key,
                retry: RetryPolicy {
                    max_attempts: config.retry.max_attempts.max(1),
                    ..config.retry
                },
                timeout: config.timeout,
                idle_timeout: config.idle_timeout,
                total_timeout: config.total_timeout,
                stream: config.stream,
                max_reply_bytes: config.max_reply_bytes,
                slots: config
                    .max_concurrency
                    .map(|n| tokio::sync::Semaphore::new(n.max(1))),
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

impl AttemptError {
    fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        AttemptError {
            failure: LlmFailure::new(kind, message),
            retry_after: None,
        }
    }
}

/// The earlier of two optional deadlines.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Runs `fut` until `deadline`; `None` when the deadline passed first.
async fn until<F: std::future::Future>(deadline: Option<Instant>, fut: F) -> Option<F::Output> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d.into(), fut).await.ok(),
        None => Some(fut.await),
    }
}

/// The failure an error reply (a status other than success) describes; error bodies are
/// short, so a bounded head of one is read.
async fn read_error_reply(
    response: &mut reqwest::Response,
    reader: &mut ChunkReader<'_>,
    status: u16,
) -> LlmFailure {
    let mut bytes = Vec::new();
    while let Ok(Some(chunk)) = reader.next(response).await {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > 64 * 1024 {
            break;
        }
    }
    decode_error_reply(&bytes, status)
}

impl Inner {
    async fn send_with_retries(&self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        let body = request_body(request, self.stream);
        let total_deadline = self.total_timeout.map(|t| Instant::now() + t);
        let mut attempt = 0u32;
        // Jitter from the request hash: no global RNG, and still spread across requests.
        let mut jitter_state = u64::from_str_radix(&request.content_hash()[..16], 16).unwrap_or(1);
        loop {
            attempt += 1;
            match self.attempt(&body, request, total_deadline).await {
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
                    if total_deadline.is_some_and(|d| Instant::now() + delay >= d) {
                        let total = self.total_timeout.unwrap_or_default().as_secs_f64();
                        return Err(LlmFailure {
                            message: format!(
                                "{}; waiting {:.1} s for another attempt would pass the request's total limit of {total:.1} s",
                                failure.message,
                                delay.as_secs_f64(),
                            ),
                            ..failure
                        });
                    }
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

    /// One attempt, within the endpoint's concurrency limit and the request's total deadline.
    async fn attempt(
        &self,
        body: &str,
        request: &ChatRequest,
        total_deadline: Option<Instant>,
    ) -> Result<ChatResponse, AttemptError> {
        let _permit = match &self.slots {
            Some(slots) => Some(
                until(total_deadline, slots.acquire())
                    .await
                    .ok_or_else(|| self.total_passed())?
                    .map_err(|_| {
                        AttemptError::new(FailureKind::Cancelled, "the client is closed")
                    })?,
            ),
            None => None,
        };
        let first_deadline = earliest(Some(Instant::now() + self.timeout), total_deadline);
        let mut response = self.send(body, first_deadline, total_deadline).await?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if !status.is_success() {
            let mut reader = ChunkReader::new(self, first_deadline, false, total_deadline);
            let failure = read_error_reply(&mut response, &mut reader, status.as_u16()).await;
            return Err(AttemptError {
                failure,
                retry_after,
            });
        }
        let with_status = |mut e: AttemptError| {
            e.failure = e.failure.with_status(status.as_u16());
            e
        };
        let mut reader = ChunkReader::new(self, first_deadline, event_stream, total_deadline);
        if event_stream {
            return self
                .read_stream(&mut response, &mut reader, request)
                .await
                .map_err(with_status);
        }
        let bytes = self
            .read_body(&mut response, &mut reader)
            .await
            .map_err(with_status)?;
        decode_chat_reply(&bytes, request).map_err(|failure| AttemptError {
            failure: failure.with_status(status.as_u16()),
            retry_after: None,
        })
    }

    /// The failure when the request's total limit passed.
    fn total_passed(&self) -> AttemptError {
        AttemptError::new(
            FailureKind::Timeout,
            format!(
                "the request's total limit of {:.1} s passed",
                self.total_timeout.unwrap_or_default().as_secs_f64()
            ),
        )
    }

    /// Posts the request body; the response (its headers) must arrive by `first_deadline`.
    async fn send(
        &self,
        body: &str,
        first_deadline: Option<Instant>,
        total_deadline: Option<Instant>,
    ) -> Result<reqwest::Response, AttemptError> {
        let mut builder = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        if let Some(key) = &self.key {
            builder = builder.bearer_auth(key.expose());
        }
        until(first_deadline, builder.send())
            .await
            .ok_or_else(|| {
                if total_deadline.is_some_and(|d| Instant::now() >= d) {
                    self.total_passed()
                } else {
                    AttemptError::new(
                        FailureKind::Timeout,
                        format!("no response within {:.1} s", self.timeout.as_secs_f64()),
                    )
                }
            })?
            .map_err(|e| AttemptError::new(classify_reqwest(&e), describe_reqwest(&e)))
    }

    /// Reads a whole (not streamed) reply body, up to the size cap.
    async fn read_body(
        &self,
        response: &mut reqwest::Response,
        reader: &mut ChunkReader<'_>,
    ) -> Result<Vec<u8>, AttemptError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = reader.next(response).await? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > self.max_reply_bytes {
                return Err(AttemptError::new(
                    FailureKind::Malformed,
                    format!(
                        "the reply is longer than the cap of {} bytes; it was not read further",
                        self.max_reply_bytes
                    ),
                ));
            }
        }
        Ok(bytes)
    }

    /// Reads a streamed reply (server-sent events of `chat.completion.chunk`s) to its end, to
    /// the size cap, or to a failure.
    async fn read_stream(
        &self,
        response: &mut reqwest::Response,
        reader: &mut ChunkReader<'_>,
        request: &ChatRequest,
    ) -> Result<ChatResponse, AttemptError> {
        let mut decoder = ChatStreamDecoder::new(self.max_reply_bytes);
        loop {
            let chunk = match reader.next(response).await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) if decoder.content_len() == 0 => return Err(e),
                Err(mut e) => {
                    // Part of the reply arrived: say how much, so the reason is concrete.
                    e.failure.message = format!(
                        "{} after {} bytes of reply text",
                        e.failure.message,
                        decoder.content_len()
                    );
                    return Err(e);
                }
            };
            let complete = decoder
                .feed(&chunk)
                .map_err(|f| AttemptError::new(f.kind, f.message))?;
            if complete {
                break;
            }
        }
        decoder
            .finish(request)
            .map_err(|f| AttemptError::new(f.kind, f.message))
    }
}

/// Reads body chunks with the attempt's deadlines: the first chunk within the attempt timeout,
/// later ones within the idle timeout when streaming (within the attempt timeout otherwise),
/// always within the request's total deadline.
struct ChunkReader<'a> {
    inner: &'a Inner,
    first_deadline: Option<Instant>,
    streaming: bool,
    total_deadline: Option<Instant>,
    got_first: bool,
}

impl<'a> ChunkReader<'a> {
    fn new(
        inner: &'a Inner,
        first_deadline: Option<Instant>,
        streaming: bool,
        total_deadline: Option<Instant>,
    ) -> Self {
        ChunkReader {
            inner,
            first_deadline,
            streaming,
            total_deadline,
            got_first: false,
        }
    }

    async fn next(
        &mut self,
        response: &mut reqwest::Response,
    ) -> Result<Option<Vec<u8>>, AttemptError> {
        let idle = self.streaming && self.got_first;
        let deadline = if idle {
            earliest(
                Some(Instant::now() + self.inner.idle_timeout),
                self.total_deadline,
            )
        } else {
            self.first_deadline
        };
        match until(deadline, response.chunk()).await {
            None => {
                let message = if self.total_deadline.is_some_and(|d| Instant::now() >= d) {
                    format!(
                        "the request's total limit of {:.1} s passed while the reply was read",
                        self.inner.total_timeout.unwrap_or_default().as_secs_f64()
                    )
                } else if idle {
                    format!(
                        "the stream stalled: nothing for {:.1} s",
                        self.inner.idle_timeout.as_secs_f64()
                    )
                } else {
                    format!(
                        "the reply did not arrive within {:.1} s",
                        self.inner.timeout.as_secs_f64()
                    )
                };
                Err(AttemptError::new(FailureKind::Timeout, message))
            }
            Some(Ok(chunk)) => {
                self.got_first = true;
                Ok(chunk.map(|c| c.to_vec()))
            }
            Some(Err(e)) => Err(AttemptError::new(
                if e.is_timeout() {
                    FailureKind::Timeout
                } else {
                    FailureKind::Truncated
                },
                format!("the reply body broke off: {}", describe_reqwest(&e)),
            )),
        }
    }
}

/// Decodes a streamed chat completion (server-sent events of `chat.completion.chunk`s) as
/// [`OpenAiClient`] reads one off the wire, without the network: feed it the body's bytes as
/// they arrive, split anywhere, then [`finish`](Self::finish) it.
///
/// `data:` lines are joined into events; comments (`: keep-alive`), `event:`, `id:` and
/// `retry:` lines are skipped; `data: [DONE]` ends the reply. The reply text is the events'
/// `delta.content` (text, or a list of text parts) in order; the model, finish reason and token
/// usage are the last ones an event gave. Reply text past `max_reply_bytes` is cut there (at a
/// character boundary) and the reply ends with finish reason `length`; more than eight times
/// that (plus 64 KiB) of stream without that much reply text is refused as
/// [`FailureKind::Malformed`].
///
/// ```
/// use kf_prompt::{ChatMessage, ChatRequest, ChatStreamDecoder};
///
/// let request = ChatRequest::new("m", vec![ChatMessage::user("hi")]);
/// let mut decoder = ChatStreamDecoder::new(1 << 20);
/// assert!(!decoder.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\nda").unwrap());
/// assert!(decoder.feed(b"ta: {\"choices\":[{\"delta\":{\"content\":\"llo\"}}]}\n\ndata: [DONE]\n\n").unwrap());
/// assert_eq!(decoder.finish(&request).unwrap().content, "hello");
/// ```
#[derive(Debug)]
pub struct ChatStreamDecoder {
    events: SseAssembler,
    max_reply_bytes: usize,
    /// Bytes fed so far.
    raw: usize,
    /// Most bytes fed without `max_reply_bytes` of reply text.
    raw_cap: usize,
    /// The reply text reached `max_reply_bytes` and was cut there.
    capped: bool,
}

impl ChatStreamDecoder {
    /// A decoder whose reply text is cut at `max_reply_bytes`
    /// ([`OpenAiConfig::max_reply_bytes`] in the client).
    pub fn new(max_reply_bytes: usize) -> Self {
        ChatStreamDecoder {
            events: SseAssembler::default(),
            max_reply_bytes,
            raw: 0,
            // Events that carry no text (role, usage, keep-alives) may not grow without bound.
            raw_cap: max_reply_bytes.saturating_mul(8).saturating_add(1 << 16),
            capped: false,
        }
    }

    /// Takes the next bytes of the body. `Ok(true)`: the reply is complete (`[DONE]`, or the
    /// reply text reached the cap) and nothing further is read; later calls change nothing.
    /// An event that is not JSON is [`FailureKind::Malformed`], one that carries an `error`
    /// is [`FailureKind::Server`].
    pub fn feed(&mut self, bytes: &[u8]) -> Result<bool, LlmFailure> {
        if self.is_complete() {
            return Ok(true);
        }
        self.raw = self.raw.saturating_add(bytes.len());
        self.events.feed(bytes)?;
        if self.cap() {
            return Ok(true);
        }
        if self.raw > self.raw_cap {
            return Err(LlmFailure::new(
                FailureKind::Malformed,
                format!(
                    "the stream sent more than {} bytes without that much reply text",
                    self.raw_cap
                ),
            ));
        }
        Ok(self.events.done)
    }

    /// Cuts the reply text at the cap when it passed it: true when it did.
    fn cap(&mut self) -> bool {
        if self.events.content.len() <= self.max_reply_bytes {
            return false;
        }
        let mut end = self.max_reply_bytes;
        while !self.events.content.is_char_boundary(end) {
            end -= 1;
        }
        self.events.content.truncate(end);
        self.capped = true;
        tracing::warn!(
            cap = self.max_reply_bytes,
            "a streamed reply passed the size cap; it is cut there"
        );
        true
    }

    /// Whether the reply is complete: `[DONE]` arrived or the reply text reached the cap.
    pub fn is_complete(&self) -> bool {
        self.capped || self.events.done
    }

    /// Bytes of reply text so far.
    pub fn content_len(&self) -> usize {
        self.events.content.len()
    }

    /// The reply, once the body has ended (or [`feed`](Self::feed) said it is complete): a
    /// last event without its blank line still counts. A stream that ended with neither a
    /// finish reason nor `[DONE]` is [`FailureKind::Truncated`]. Without token counts from the
    /// server the usage is estimated; without a model name the request's is used.
    pub fn finish(mut self, request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
        if self.capped {
            return Ok(self.events.finish(request, Some("length".into())));
        }
        self.events.flush()?;
        // A last event without its blank line may pass the cap too.
        if self.cap() {
            return Ok(self.events.finish(request, Some("length".into())));
        }
        if !self.events.done && self.events.finish_reason.is_none() {
            return Err(LlmFailure::new(
                FailureKind::Truncated,
                format!(
                    "the stream ended before the reply was complete (no finish reason, no [DONE]) after {} bytes of reply text",
                    self.events.content.len()
                ),
            ));
        }
        let finish = self.events.finish_reason.take();
        Ok(self.events.finish(request, finish))
    }
}

/// Assembles `chat.completion.chunk` events of a server-sent-event stream into one reply.
#[derive(Debug, Default)]
struct SseAssembler {
    pending: Vec<u8>,
    data: String,
    content: String,
    finish_reason: Option<String>,
    model: Option<String>,
    usage: Option<(u64, u64)>,
    done: bool,
}

impl SseAssembler {
    /// Takes bytes off the wire; complete lines are handled at once.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), LlmFailure> {
        self.pending.extend_from_slice(bytes);
        while let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            self.line(line.trim_end_matches(['\n', '\r']))?;
            if self.done {
                break;
            }
        }
        Ok(())
    }

    /// Handles what is left when the stream ends (a last event without its blank line).
    /// After `[DONE]` nothing counts: what came with it in the same chunk is dropped, as a
    /// later chunk would not have been read.
    fn flush(&mut self) -> Result<(), LlmFailure> {
        if self.done {
            self.pending.clear();
            return Ok(());
        }
        if !self.pending.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
            self.line(rest.trim_end_matches(['\n', '\r']))?;
        }
        self.line("")
    }

    fn line(&mut self, line: &str) -> Result<(), LlmFailure> {
        if line.is_empty() {
            let data = std::mem::take(&mut self.data);
            return if data.is_empty() {
                Ok(())
            } else {
                self.event(&data)
            };
        }
        if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(rest);
        }
        // Comments (`:` keep-alives), `event:`, `id:` and `retry:` lines carry nothing here.
        Ok(())
    }

    fn event(&mut self, data: &str) -> Result<(), LlmFailure> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let value: Value = serde_json::from_str(data).map_err(|e| {
            LlmFailure::new(
                FailureKind::Malformed,
                bounded_message(&format!(
                    "a stream event is not JSON: {e}; it starts with {:?}",
                    head(data)
                )),
            )
        })?;
        if let Some(err) = value.get("error").filter(|e| !e.is_null()) {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            return Err(LlmFailure::new(
                FailureKind::Server,
                bounded_message(&format!(
                    "the server reported an error mid-stream: {message}"
                )),
            ));
        }
        if let Some(m) = value.get("model").and_then(Value::as_str) {
            self.model = Some(m.to_owned());
        }
        if let Some(u) = value.get("usage").filter(|u| u.is_object()) {
            let tokens = |name: &str| u.get(name).and_then(Value::as_u64);
            if let (Some(p), Some(c)) = (tokens("prompt_tokens"), tokens("completion_tokens")) {
                self.usage = Some((p, c));
            }
        }
        if let Some(choice) = value
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        {
            match choice.get("delta").and_then(|d| d.get("content")) {
                Some(Value::String(s)) => self.content.push_str(s),
                Some(Value::Array(parts)) => {
                    for p in parts {
                        if let Some(t) = p.get("text").and_then(Value::as_str) {
                            self.content.push_str(t);
                        }
                    }
                }
                _ => {}
            }
            if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(f.to_owned());
            }
        }
        Ok(())
    }

    fn finish(self, request: &ChatRequest, finish_reason: Option<String>) -> ChatResponse {
        let usage = match self.usage {
            Some((p, c)) => TokenUsage {
                prompt_tokens: p,
                completion_tokens: c,
                estimated: false,
            },
            None => estimated_usage(request, &self.content),
        };
        ChatResponse {
            content: self.content,
            finish_reason,
            model: self.model.unwrap_or_else(|| request.model.clone()),
            usage,
            attempts: 1,
        }
    }
}

/// Token estimates for a reply whose server reported no usage.
fn estimated_usage(request: &ChatRequest, content: &str) -> TokenUsage {
    TokenUsage {
        prompt_tokens: request.estimated_prompt_tokens(),
        completion_tokens: (content.len() as u64).div_ceil(3),
        estimated: true,
    }
}

/// The JSON body sent for a request.
fn request_body(request: &ChatRequest, stream: bool) -> String {
    let mut body = serde_json::json!({
        "model": request.model,
        "messages": request.messages,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": stream,
    });
    if let Some(map) = body.as_object_mut() {
        if let Some(seed) = request.seed {
            // Servers take a signed 32- or 64-bit seed; keep it in the positive 31-bit range.
            map.insert("seed".into(), Value::from(seed & 0x7fff_ffff));
        }
        if stream {
            // Without it OpenAI (and vLLM, Ollama) send no token counts in a stream.
            map.insert(
                "stream_options".into(),
                serde_json::json!({"include_usage": true}),
            );
        }
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
    // reqwest names the URL, which may hold a password.
    bounded_message(&kf_core::redact::redact(&out))
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

/// Decodes the body of a chat completion that was not streamed (one JSON object), as
/// [`OpenAiClient`] reads one: tolerantly (invalid UTF-8 replaced; the content as a string,
/// null or a list of text parts; usage optional: estimated when absent). A body cut off in the
/// middle of its JSON is [`FailureKind::Truncated`], one that is not a chat completion
/// [`FailureKind::Malformed`], one that carries an `error` [`FailureKind::Server`]; the
/// failure's message is bounded.
///
/// ```
/// use kf_prompt::{decode_chat_reply, ChatMessage, ChatRequest};
///
/// let request = ChatRequest::new("m", vec![ChatMessage::user("hi")]);
/// let body = br#"{"model":"m1","choices":[{"message":{"content":"hello"},"finish_reason":"stop"}]}"#;
/// assert_eq!(decode_chat_reply(body, &request).unwrap().content, "hello");
/// ```
pub fn decode_chat_reply(body: &[u8], request: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
    parse_completion(&String::from_utf8_lossy(body), request)
}

/// The failure an HTTP error reply stands for: its kind from the status (408: timeout, 429:
/// rate limited, 5xx: server, any other: rejected), its message the body's `error.message`
/// (or `error` as text, or the body itself), bounded, with the status.
pub fn decode_error_reply(body: &[u8], status: u16) -> LlmFailure {
    let text = String::from_utf8_lossy(body);
    let kind = match status {
        408 => FailureKind::Timeout,
        429 => FailureKind::RateLimited,
        500..=599 => FailureKind::Server,
        _ => FailureKind::Rejected,
    };
    LlmFailure::new(kind, error_message(&text, status)).with_status(status)
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
        _ => estimated_usage(request, &content),
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
    fn a_url_password_is_neither_described_nor_debugged() {
        let client =
            OpenAiClient::new(OpenAiConfig::new("http://kf:pw-7781234@127.0.0.1:9/v1")).unwrap();
        for shown in [client.describe(), format!("{client:?}")] {
            assert!(!shown.contains("pw-7781234"), "{shown}");
            assert!(shown.contains("kf:[redacted]@127.0.0.1:9"), "{shown}");
        }
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
        let body = request_body(&req().with_seed(u64::MAX), false);
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["seed"], Value::from(0x7fff_ffffu64));
        assert_eq!(v["stream"], Value::Bool(false));
        assert!(v.get("stream_options").is_none());
        let streamed: Value = serde_json::from_str(&request_body(&req(), true)).unwrap();
        assert_eq!(streamed["stream"], Value::Bool(true));
        assert_eq!(
            streamed["stream_options"]["include_usage"],
            Value::Bool(true)
        );
        assert_eq!(v["messages"][0]["role"], "user");
    }

    fn assemble(wire: &[&str]) -> Result<SseAssembler, LlmFailure> {
        let mut a = SseAssembler::default();
        for piece in wire {
            a.feed(piece.as_bytes())?;
        }
        a.flush()?;
        Ok(a)
    }

    #[test]
    fn assembles_a_stream_split_anywhere() {
        let wire = "data: {\"model\":\"m1\",\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n: keep-alive\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"llo\"},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        // Every split point gives the same reply.
        for cut in 0..wire.len() {
            let (a, b) = wire.split_at(cut);
            let s = assemble(&[a, b]).unwrap();
            assert!(s.done, "cut at {cut}");
            assert_eq!(s.content, "hello");
            assert_eq!(s.finish_reason.as_deref(), Some("stop"));
            assert_eq!(s.usage, Some((4, 2)));
            let r = s.finish(&req(), Some("stop".into()));
            assert_eq!(r.model, "m1");
            assert!(!r.usage.estimated);
        }
    }

    /// Found by the `chat_stream` fuzz target: what a server sent after `[DONE]` in the same
    /// chunk was read as one more event (several lines run together), so a complete reply
    /// failed as malformed, or not, depending on where the network split the bytes.
    #[test]
    fn nothing_after_done_counts() {
        let wire = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {junk";
        let done = wire.find("data: [DONE]").unwrap() + "data: [DONE]\n\n".len();
        for cut in [wire.len(), done, done + 3] {
            let mut decoder = ChatStreamDecoder::new(1 << 20);
            assert!(
                decoder.feed(&wire.as_bytes()[..cut]).unwrap(),
                "cut at {cut}"
            );
            // Later bytes are not read.
            assert!(decoder.feed(b"data: {junk\n\n").unwrap());
            let reply = decoder.finish(&req()).unwrap();
            assert_eq!(reply.content, "hi", "cut at {cut}");
            assert_eq!(reply.finish_reason, None);
        }
    }

    #[test]
    fn stream_decoder_caps_and_refuses() {
        let wire = "data: {\"choices\":[{\"delta\":{\"content\":\"héllo\"}}]}\n\n";
        let mut capped = ChatStreamDecoder::new(2);
        assert!(capped.feed(wire.as_bytes()).unwrap());
        let reply = capped.finish(&req()).unwrap();
        // Cut at a character boundary, with finish reason `length`.
        assert_eq!(reply.content, "h");
        assert!(reply.hit_token_limit());
        let mut chatty = ChatStreamDecoder::new(0);
        let keep_alives = ": keep-alive\n\n".repeat(5000);
        let err = chatty.feed(keep_alives.as_bytes()).unwrap_err();
        assert_eq!(err.kind, FailureKind::Malformed);
        let cut = ChatStreamDecoder::new(100);
        assert_eq!(cut.finish(&req()).unwrap_err().kind, FailureKind::Truncated);
        // Found by the `chat_stream` fuzz target: a last event without its blank line, read
        // when the stream ended, was not held to the cap.
        let mut last = ChatStreamDecoder::new(3);
        let wire = "data: {\"choices\":[{\"delta\":{\"content\":\"hello\"}}]}";
        assert!(!last.feed(wire.as_bytes()).unwrap());
        let reply = last.finish(&req()).unwrap();
        assert_eq!(reply.content, "hel");
        assert!(reply.hit_token_limit());
    }

    #[test]
    fn error_replies_are_typed() {
        let f = decode_error_reply(br#"{"error":{"message":"slow down"}}"#, 429);
        assert_eq!(f.kind, FailureKind::RateLimited);
        assert_eq!(f.status, Some(429));
        assert_eq!(f.message, "HTTP 429: slow down");
        assert_eq!(decode_error_reply(b"", 502).kind, FailureKind::Server);
        assert_eq!(decode_error_reply(b"\xff", 400).kind, FailureKind::Rejected);
        let r = decode_chat_reply(
            b"{\"choices\":[{\"message\":{\"content\":\"\xffa\"}}]}",
            &req(),
        )
        .unwrap();
        assert_eq!(r.content, "\u{fffd}a");
    }

    #[test]
    fn stream_errors_are_typed() {
        let junk = assemble(&["data: {not json\n\n"]).err().unwrap();
        assert_eq!(junk.kind, FailureKind::Malformed);
        let err = assemble(&["data: {\"error\":{\"message\":\"overloaded\"}}\n\n"])
            .err()
            .unwrap();
        assert_eq!(err.kind, FailureKind::Server);
        assert!(err.message.contains("overloaded"));
        // A last event without its blank line still counts.
        let tail = assemble(&["data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}"]).unwrap();
        assert_eq!(tail.content, "x");
        assert!(!tail.done && tail.finish_reason.is_none());
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
