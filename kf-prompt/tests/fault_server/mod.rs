//! A fault-injecting OpenAI-compatible server on 127.0.0.1 for the client's tests: each request
//! is answered by a script of steps (a status line and headers, body bytes, HTTP/1.1 chunks,
//! pauses, an abrupt close), so a test can return 429 with `Retry-After`, 500s, a stream that
//! stalls or breaks off mid-reply, or a reply far over the size cap. It counts the requests it
//! received, the bytes it managed to send and the most requests it served at once. Every
//! connection serves one request; the server stops when dropped.

#![allow(dead_code, unreachable_pub)]

#[path = "../http_request/mod.rs"]
mod http_request;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_request::{listen, RequestLog, ServerRuntime};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// One step of an answer.
#[derive(Debug, Clone)]
pub enum Step {
    /// The status line and headers (`content-length` is not added; see [`Step::Body`]).
    Head(u16, Vec<(String, String)>),
    /// Raw bytes.
    Raw(Vec<u8>),
    /// One HTTP/1.1 chunk of a `transfer-encoding: chunked` body.
    Chunk(Vec<u8>),
    /// The last chunk of a chunked body.
    EndChunks,
    /// A pause.
    Sleep(Duration),
    /// Closes the connection now.
    Close,
}

/// A whole answer.
pub type Script = Vec<Step>;

/// A complete (non-streamed) answer with a JSON body.
pub fn json_reply(status: u16, headers: &[(&str, &str)], body: &str) -> Script {
    let mut h: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    h.push(("content-type".into(), "application/json".into()));
    h.push(("content-length".into(), body.len().to_string()));
    vec![Step::Head(status, h), Step::Raw(body.as_bytes().to_vec())]
}

/// A chat completion as one JSON body.
pub fn completion(content: &str, prompt_tokens: u64, completion_tokens: u64) -> Script {
    json_reply(
        200,
        &[],
        &json!({
            "model": "fault-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        })
        .to_string(),
    )
}

/// An error status with an OpenAI-style error body.
pub fn error(status: u16, headers: &[(&str, &str)], message: &str) -> Script {
    json_reply(
        status,
        headers,
        &json!({"error": {"message": message, "type": "fault"}}).to_string(),
    )
}

/// The head of a streamed (SSE, chunked) reply.
pub fn stream_head() -> Step {
    Step::Head(
        200,
        vec![
            ("content-type".into(), "text/event-stream".into()),
            ("transfer-encoding".into(), "chunked".into()),
        ],
    )
}

/// One SSE event carrying `text` as a content delta.
pub fn delta(text: &str) -> Step {
    Step::Chunk(
        format!(
            "data: {}\n\n",
            json!({"model": "fault-model", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        )
        .into_bytes(),
    )
}

/// The end of a well-formed stream: the finish reason, the usage and `[DONE]`.
pub fn stream_end(prompt_tokens: u64, completion_tokens: u64) -> Vec<Step> {
    vec![
        Step::Chunk(
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            )
            .into_bytes(),
        ),
        Step::Chunk(
            format!(
                "data: {}\n\n",
                json!({"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}})
            )
            .into_bytes(),
        ),
        Step::Chunk(b"data: [DONE]\n\n".to_vec()),
        Step::EndChunks,
    ]
}

/// A well-formed streamed reply of `pieces`, `gap` apart.
pub fn streamed(
    pieces: &[&str],
    gap: Duration,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Script {
    let mut s = vec![stream_head()];
    for p in pieces {
        s.push(delta(p));
        if !gap.is_zero() {
            s.push(Step::Sleep(gap));
        }
    }
    s.extend(stream_end(prompt_tokens, completion_tokens));
    s
}

/// What the server received.
pub use http_request::Request as Received;

type Handler = dyn Fn(&Value, usize) -> Script + Send + Sync;

/// The server; stops when dropped.
pub struct FaultServer {
    port: u16,
    received: RequestLog,
    sent_bytes: Arc<AtomicUsize>,
    max_active: Arc<AtomicUsize>,
    /// Stops the server when dropped.
    _runtime: ServerRuntime,
}

impl FaultServer {
    /// Starts a server answering request `i` (0-based) with `handler(body, i)`.
    pub fn start(handler: impl Fn(&Value, usize) -> Script + Send + Sync + 'static) -> FaultServer {
        let (runtime, listener, port) = listen("fault server");
        let received = RequestLog::default();
        let sent_bytes = Arc::new(AtomicUsize::new(0));
        let active = Arc::new(AtomicUsize::new(0));
        let max_active = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (r, s, a, m) = (
            received.clone(),
            sent_bytes.clone(),
            active.clone(),
            max_active.clone(),
        );
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (r, s, a, m, h) = (r.clone(), s.clone(), a.clone(), m.clone(), handler.clone());
                tokio::spawn(async move {
                    let now = a.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now, Ordering::SeqCst);
                    let _ = serve(stream, r, s, h).await;
                    a.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        FaultServer {
            port,
            received,
            sent_bytes,
            max_active,
            _runtime: runtime,
        }
    }

    /// A server answering request `i` with `scripts[i]` (the last one after that).
    pub fn sequence(scripts: Vec<Script>) -> FaultServer {
        FaultServer::start(move |_, i| scripts[i.min(scripts.len() - 1)].clone())
    }

    /// `http://127.0.0.1:port/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Requests received.
    pub fn count(&self) -> usize {
        self.received.count()
    }

    /// The requests received.
    pub fn received(&self) -> Vec<Received> {
        self.received.all()
    }

    /// Body bytes written to clients (until they hung up).
    pub fn sent_bytes(&self) -> usize {
        self.sent_bytes.load(Ordering::SeqCst)
    }

    /// Most connections served at once.
    pub fn max_concurrent(&self) -> usize {
        self.max_active.load(Ordering::SeqCst)
    }
}

async fn serve(
    mut stream: TcpStream,
    received: RequestLog,
    sent: Arc<AtomicUsize>,
    handler: Arc<Handler>,
) -> std::io::Result<()> {
    let Some((body, index)) = received.read_next(&mut stream).await? else {
        return Ok(());
    };
    for step in handler(&body, index) {
        match step {
            Step::Head(status, headers) => {
                let mut out = format!("HTTP/1.1 {status} Fault\r\nconnection: close\r\n");
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                stream.write_all(out.as_bytes()).await?;
            }
            Step::Raw(bytes) => {
                stream.write_all(&bytes).await?;
                sent.fetch_add(bytes.len(), Ordering::SeqCst);
            }
            Step::Chunk(bytes) => {
                stream
                    .write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
                    .await?;
                stream.write_all(&bytes).await?;
                stream.write_all(b"\r\n").await?;
                sent.fetch_add(bytes.len(), Ordering::SeqCst);
            }
            Step::EndChunks => stream.write_all(b"0\r\n\r\n").await?,
            Step::Sleep(d) => {
                stream.flush().await?;
                tokio::time::sleep(d).await;
            }
            Step::Close => return Ok(()),
        }
        stream.flush().await?;
    }
    stream.shutdown().await
}
