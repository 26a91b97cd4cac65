//! Reading one HTTP request off a connection, for the test servers in `support/` and
//! `fault_server/` (both answer by hand, so each can misbehave in its own ways).

use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A request as the test servers see it.
pub struct Request {
    /// The JSON body (`Null` when it did not parse).
    pub body: Value,
    /// The `Authorization` header, if sent.
    pub authorization: Option<String>,
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
