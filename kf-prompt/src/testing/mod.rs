//! For tests that need a real LLM server: finding the one `scripts/llm-server.sh start` runs,
//! and one rule for when such a test may skip; with feature `test-server`, `ChatServer`: a
//! real OpenAI-compatible HTTP server on loopback that answers with replies of the test's
//! own (see its docs).
//!
//! A test skips (prints `SKIPPED: …`, records it as kind `LLM` where [`kf_core::testing::skip`]
//! says, and passes) only when no server answers **and** `KF_REQUIRE_LLM` is not `1`; CI sets
//! it, so that a broken server cannot turn the tests into passes.
//!
//! ```no_run
//! let Some(server) = kf_prompt::testing::server_or_skip(std::path::Path::new(".")) else {
//!     return; // printed `SKIPPED: …`
//! };
//! println!("{} ({:?})", server.base_url, server.model);
//! ```

#[cfg(feature = "test-server")]
mod chat_server;
#[cfg(feature = "test-server")]
pub use chat_server::{ChatServer, SeenRequest};

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

/// The variable that turns a missing server from a test skip into a test failure.
pub const KF_REQUIRE_LLM: &str = "KF_REQUIRE_LLM";

/// The variable naming a server's base URL (such as `http://127.0.0.1:8080/v1`) instead of
/// the one `.runtime/llm-server.json` describes.
pub const TEST_BASE_URL_ENV: &str = "KF_LLM_TEST_BASE_URL";

/// A server that answered its health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestServer {
    /// The OpenAI-compatible base URL.
    pub base_url: String,
    /// The model it serves, when `llm-server.json` names it.
    pub model: Option<String>,
}

/// The server named by [`TEST_BASE_URL_ENV`], else by `.runtime/llm-server.json` in `start`
/// or the nearest folder above it that has one, if it answers `GET /health` with 200 within a
/// few seconds. The error says why not, and how to start one.
pub fn find_server(start: &Path) -> Result<TestServer, String> {
    let server = match std::env::var(TEST_BASE_URL_ENV) {
        Ok(url) if !url.trim().is_empty() => TestServer {
            base_url: url.trim().to_owned(),
            model: None,
        },
        _ => from_runtime_file(start)?,
    };
    health(&server.base_url)?;
    Ok(server)
}

/// [`find_server`] with the skip rule: `None` after printing `SKIPPED: …` when no server
/// answers and `KF_REQUIRE_LLM` is not `1`.
///
/// # Panics
///
/// When no server answers and `KF_REQUIRE_LLM=1`: a test calling this is meant to fail then.
#[track_caller]
pub fn server_or_skip(start: &Path) -> Option<TestServer> {
    match find_server(start) {
        Ok(server) => Some(server),
        Err(why) => {
            // Kind `LLM`: KF_REQUIRE_LLM=1 makes this a failure.
            kf_core::testing::skip::skip("LLM", format_args!("no LLM server: {why}"));
            None
        }
    }
}

fn from_runtime_file(start: &Path) -> Result<TestServer, String> {
    let how = "run scripts/llm-server.sh install && scripts/llm-server.sh start";
    let info = start
        .ancestors()
        .map(|dir| dir.join(".runtime/llm-server.json"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "no .runtime/llm-server.json above {} ({how})",
                start.display()
            )
        })?;
    let text = std::fs::read_to_string(&info).map_err(|e| format!("{}: {e}", info.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", info.display()))?;
    let base_url = v["base_url"]
        .as_str()
        .ok_or_else(|| format!("{} has no base_url ({how})", info.display()))?
        .to_owned();
    Ok(TestServer {
        base_url,
        model: v["model"].as_str().map(str::to_owned),
    })
}

/// `GET /health` on the server's host and port (plain HTTP on loopback: no client needed).
fn health(url: &str) -> Result<(), String> {
    let host_port = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let addr = host_port
        .to_socket_addrs()
        .map_err(|e| format!("{host_port}: {e}"))?
        .next()
        .ok_or(format!("{host_port} resolves to nothing"))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("{url}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET /health HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    if reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200") {
        Ok(())
    } else {
        Err(format!(
            "{url}/health did not answer 200: {:?}",
            reply.lines().next()
        ))
    }
}
