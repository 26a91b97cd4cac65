//! What the test servers in `support/` and `fault_server/` share: the listening socket on
//! 127.0.0.1 with its runtime, reading one HTTP request off a connection, and the log of the
//! requests received. Both answer by hand, so each can misbehave in its own ways.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// A request as the test servers see it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The JSON body (`Null` when it did not parse).
    pub body: Value,
    /// The `Authorization` header, if sent.
    pub authorization: Option<String>,
}

impl Request {
    /// The text of message `i`.
    pub fn message(&self, i: usize) -> String {
        self.body["messages"][i]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// The text of the last message.
    pub fn last_message(&self) -> String {
        let n = self.body["messages"].as_array().map_or(0, Vec::len);
        self.message(n.saturating_sub(1))
    }
}

/// The requests a server received, in order; clones share the log.
#[derive(Clone, Default)]
pub struct RequestLog(Arc<Mutex<Vec<Request>>>);

impl RequestLog {
    /// Every request so far.
    pub fn all(&self) -> Vec<Request> {
        self.0.lock().unwrap().clone()
    }

    /// How many requests came.
    pub fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Reads one request off `stream` and logs it: its body and its index (0-based), or
    /// `None` when the client closed the connection before a whole head arrived.
    pub async fn read_next(
        &self,
        stream: &mut TcpStream,
    ) -> std::io::Result<Option<(Value, usize)>> {
        let Some(request) = read_request(stream).await? else {
            return Ok(None);
        };
        let body = request.body.clone();
        let mut log = self.0.lock().unwrap();
        log.push(request);
        Ok(Some((body, log.len() - 1)))
    }
}

/// The runtime a test server runs on, shut down in the background when the server is
/// dropped (which cuts its connections).
pub struct ServerRuntime(Option<tokio::runtime::Runtime>);

impl ServerRuntime {
    /// Runs `task` on the server's runtime.
    pub fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        if let Some(rt) = &self.0 {
            rt.spawn(task);
        }
    }
}

impl Drop for ServerRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A runtime of two threads for a test server (`what` names it in a failure), and a listener
/// bound to a free port of 127.0.0.1, with that port.
pub fn listen(what: &str) -> (ServerRuntime, TcpListener, u16) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{what} runtime: {e}"));
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local addr").port();
    (ServerRuntime(Some(runtime)), listener, port)
}

/// Reads the head and the `Content-Length` body of one request; `None` when the client closed
/// the connection before a whole head arrived.
pub async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    let len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(Request {
        body: serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null),
        authorization: header("authorization"),
    }))
}
