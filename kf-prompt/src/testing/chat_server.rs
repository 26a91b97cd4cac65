//! [`ChatServer`]: a real OpenAI-compatible HTTP server on 127.0.0.1 (axum on its own tokio
//! runtime and thread) whose replies come from a closure of the test, which sees every request
//! as the model would.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

/// One chat-completions request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenRequest {
    /// The model named in the request.
    pub model: String,
    /// `(role, content)` of each message, in order.
    pub messages: Vec<(String, String)>,
    /// Whether the client asked for a streamed (server-sent events) reply.
    pub stream: bool,
    /// The whole request body.
    pub body: Value,
}

impl SeenRequest {
    /// The content of the last message with `role` (`system`, `user`, `assistant`).
    pub fn last(&self, role: &str) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|(r, _)| r == role)
            .map(|(_, c)| c.as_str())
    }

    /// Every message's content, joined: what the model was shown in all.
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self.messages.iter().map(|(_, c)| c.as_str()).collect();
        parts.join("\n")
    }
}

type Answer = dyn Fn(&SeenRequest) -> String + Send + Sync;

struct Shared {
    answer: Box<Answer>,
    seen: Mutex<Vec<SeenRequest>>,
}

/// A local OpenAI-compatible server (`POST /v1/chat/completions`, plain or streamed, and
/// `GET /health`) answering each request with the text `answer` returns for it, with token
/// counts estimated from the text. Every request is kept ([`ChatServer::requests`]), so a test
/// can check what the model was shown. Stopped when dropped.
///
/// ```
/// use kf_prompt::testing::ChatServer;
/// use kf_prompt::{ChatMessage, ChatRequest, LlmClient, OpenAiClient, OpenAiConfig};
///
/// let server = ChatServer::start(|req| format!("you said: {}", req.last("user").unwrap_or("")))?;
/// let client = OpenAiClient::new(OpenAiConfig::new(server.base_url()))?;
/// let request = ChatRequest::new("any", vec![ChatMessage::user("hello")]);
/// let reply = futures::executor::block_on(client.complete(&request))?;
/// assert_eq!(reply.content, "you said: hello");
/// assert_eq!(server.requests().len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ChatServer {
    base_url: String,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ChatServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatServer")
            .field("base_url", &self.base_url)
            .finish()
    }
}

impl ChatServer {
    /// Starts a server on a free port of 127.0.0.1.
    pub fn start(
        answer: impl Fn(&SeenRequest) -> String + Send + Sync + 'static,
    ) -> std::io::Result<ChatServer> {
        let shared = Arc::new(Shared {
            answer: Box::new(answer),
            seen: Mutex::new(Vec::new()),
        });
        let listener = std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/chat/completions", post(chat))
            .route("/health", get(|| async { "ok" }))
            .with_state(Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("kf-chat-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::error!("the test chat server cannot listen: {e}");
                            return;
                        }
                    };
                    let served = axum::serve(listener, app).with_graceful_shutdown(async {
                        let _ = stopped.await;
                    });
                    if let Err(e) = served.await {
                        tracing::error!("the test chat server stopped: {e}");
                    }
                });
            })?;
        Ok(ChatServer {
            base_url: format!("http://{addr}/v1"),
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The base URL to give a client (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.shared
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for ChatServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn chat(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            let error = json!({"error": {"message": format!("bad request body: {e}")}});
            return (StatusCode::BAD_REQUEST, error.to_string()).into_response();
        }
    };
    let messages: Vec<(String, String)> = body["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| {
                    (
                        m["role"].as_str().unwrap_or_default().to_owned(),
                        m["content"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let seen = SeenRequest {
        model: body["model"].as_str().unwrap_or_default().to_owned(),
        stream: body["stream"].as_bool().unwrap_or(false),
        messages,
        body,
    };
    let content = (shared.answer)(&seen);
    let prompt_tokens = seen.text().len().div_ceil(4);
    let usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": content.len().div_ceil(4),
        "total_tokens": prompt_tokens + content.len().div_ceil(4),
    });
    let stream = seen.stream;
    let model = seen.model.clone();
    shared
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(seen);
    if stream {
        let chunk = json!({
            "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}}],
        });
        let last = json!({
            "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": usage,
        });
        let text = format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n");
        return ([(header::CONTENT_TYPE, "text/event-stream")], text).into_response();
    }
    let reply = json!({
        "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": usage,
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        reply.to_string(),
    )
        .into_response()
}
