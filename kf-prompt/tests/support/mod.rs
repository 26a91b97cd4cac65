//! A tiny OpenAI-compatible mock server on 127.0.0.1 for tests: a handler decides each reply
//! from the request body; replies can be delayed, cut off mid-body, or carry any status and
//! headers. Every connection serves one request and closes.

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

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A status, headers and a body.
    Raw {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Waits, then answers.
    Delay(Duration, Box<Reply>),
    /// Declares `declared` bytes, sends `body` (shorter) and closes.
    CutOff { declared: usize, body: String },
}

impl Reply {
    /// A chat completion with `content`, finish reason `stop` and some usage.
    pub fn ok(content: &str) -> Reply {
        Reply::completion(content, "stop", 100, (content.len() / 4) as u64 + 1)
    }

    /// A chat completion with everything chosen.
    pub fn completion(content: &str, finish: &str, prompt: u64, completion: u64) -> Reply {
        Reply::Raw {
            status: 200,
            headers: Vec::new(),
            body: json!({
                "id": "chatcmpl-mock",
                "object": "chat.completion",
                "model": "mock-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
            })
            .to_string(),
        }
    }

    /// An error status with an OpenAI-style error body.
    pub fn status(status: u16, message: &str) -> Reply {
        Reply::Raw {
            status,
            headers: Vec::new(),
            body: json!({"error": {"message": message, "type": "mock"}}).to_string(),
        }
    }

    /// A 200 with a body that is not JSON.
    pub fn junk(body: &str) -> Reply {
        Reply::Raw {
            status: 200,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }

    /// Adds a header.
    pub fn header(self, name: &str, value: &str) -> Reply {
        match self {
            Reply::Raw {
                status,
                mut headers,
                body,
            } => {
                headers.push((name.to_owned(), value.to_owned()));
                Reply::Raw {
                    status,
                    headers,
                    body,
                }
            }
            other => other,
        }
    }
}

/// A request the server received.
pub use http_request::Request as Received;

type Handler = dyn Fn(&Value, usize) -> Reply + Send + Sync;

/// The server; stops when dropped.
pub struct MockServer {
    port: u16,
    received: RequestLog,
    max_active: Arc<AtomicUsize>,
    /// Stops the server when dropped.
    _runtime: ServerRuntime,
}

impl MockServer {
    /// Starts a server whose replies come from `handler(request body, request index)`.
    pub fn start(handler: impl Fn(&Value, usize) -> Reply + Send + Sync + 'static) -> MockServer {
        let (runtime, listener, port) = listen("mock");
        let received = RequestLog::default();
        let active = Arc::new(AtomicUsize::new(0));
        let max_active = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (r, a, m) = (received.clone(), active.clone(), max_active.clone());
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    break;
                };
                let (r, a, m, h) = (r.clone(), a.clone(), m.clone(), handler.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, r, a, m, h).await;
                });
            }
        });
        MockServer {
            port,
            received,
            max_active,
            _runtime: runtime,
        }
    }

    /// A server that answers every request with `reply`.
    pub fn always(reply: Reply) -> MockServer {
        MockServer::start(move |_, _| reply.clone())
    }

    /// A server that answers request `i` with `replies[i]` (the last one after that).
    pub fn sequence(replies: Vec<Reply>) -> MockServer {
        MockServer::start(move |_, i| replies[i.min(replies.len() - 1)].clone())
    }

    /// The base URL (`http://127.0.0.1:port/v1`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Requests received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.all()
    }

    /// Number of requests received.
    pub fn count(&self) -> usize {
        self.received.count()
    }

    /// Most requests that were being answered at once.
    pub fn max_concurrent(&self) -> usize {
        self.max_active.load(Ordering::SeqCst)
    }
}

async fn serve(
    mut stream: TcpStream,
    received: RequestLog,
    active: Arc<AtomicUsize>,
    max_active: Arc<AtomicUsize>,
    handler: Arc<Handler>,
) -> std::io::Result<()> {
    let Some((body, index)) = received.read_next(&mut stream).await? else {
        return Ok(());
    };
    let now = active.fetch_add(1, Ordering::SeqCst) + 1;
    max_active.fetch_max(now, Ordering::SeqCst);
    let mut reply = handler(&body, index);
    while let Reply::Delay(d, next) = reply {
        tokio::time::sleep(d).await;
        reply = *next;
    }
    // The answer is decided: the request stops counting as in flight before the client can
    // read it and send its next request, or that request would be counted with this one.
    active.fetch_sub(1, Ordering::SeqCst);
    match reply {
        Reply::Raw {
            status,
            headers,
            body,
        } => {
            let mut out = format!(
                "HTTP/1.1 {status} Mock\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.push_str(&body);
            stream.write_all(out.as_bytes()).await?;
            stream.flush().await?;
            stream.shutdown().await
        }
        Reply::CutOff { declared, body } => {
            let out = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\nconnection: close\r\n\r\n{body}"
            );
            stream.write_all(out.as_bytes()).await?;
            stream.flush().await?;
            stream.shutdown().await
        }
        Reply::Delay(..) => unreachable!("delays were resolved above"),
    }
}
