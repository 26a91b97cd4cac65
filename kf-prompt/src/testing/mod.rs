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
use std::path::{Path, PathBuf};
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
pub fn find_server(start: &Path) -> Result<TestServer, NoServer> {
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
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Llm,
                format_args!("no LLM server: {why}"),
            );
            None
        }
    }
}

fn from_runtime_file(start: &Path) -> Result<TestServer, NoServer> {
    let info = start
        .ancestors()
        .map(|dir| dir.join(".runtime/llm-server.json"))
        .find(|p| p.is_file())
        .ok_or_else(|| NoServer::NoRuntimeFile {
            start: start.to_path_buf(),
        })?;
    let text = std::fs::read_to_string(&info).map_err(|source| NoServer::Read {
        path: info.clone(),
        source,
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|source| NoServer::Parse {
        path: info.clone(),
        source,
    })?;
    let base_url = v["base_url"]
        .as_str()
        .ok_or_else(|| NoServer::NoBaseUrl { path: info.clone() })?
        .to_owned();
    Ok(TestServer {
        base_url,
        model: v["model"].as_str().map(str::to_owned),
    })
}

/// `GET /health` on the server's host and port (plain HTTP on loopback: no client needed).
fn health(url: &str) -> Result<(), NoServer> {
    let host_port = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let addr = match host_port.to_socket_addrs() {
        Ok(mut addrs) => addrs.next().ok_or_else(|| NoServer::Unresolved {
            host_port: host_port.clone(),
            source: None,
        })?,
        Err(source) => {
            return Err(NoServer::Unresolved {
                host_port,
                source: Some(source),
            })
        }
    };
    let unreachable = |source| NoServer::Unreachable {
        url: url.to_owned(),
        source,
    };
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(unreachable)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(NoServer::Io)?;
    write!(
        s,
        "GET /health HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n"
    )
    .map_err(NoServer::Io)?;
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    if reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200") {
        Ok(())
    } else {
        Err(NoServer::Unhealthy {
            url: url.to_owned(),
            status_line: reply.lines().next().map(str::to_owned),
        })
    }
}

/// How to get a test server, for the messages of [`NoServer`].
const HOW_TO_START: &str = "run scripts/llm-server.sh install && scripts/llm-server.sh start";

/// Why no test server answers ([`find_server`]); the message says how to start one where that
/// is the cure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoServer {
    /// No `.runtime/llm-server.json` in `start` or above it.
    #[error("no .runtime/llm-server.json above {} ({HOW_TO_START})", start.display())]
    NoRuntimeFile {
        /// Where the search started.
        start: PathBuf,
    },
    /// The server description could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The server description is not JSON.
    #[error("{}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The server description names no `base_url`.
    #[error("{} has no base_url ({HOW_TO_START})", path.display())]
    NoBaseUrl {
        /// The file.
        path: PathBuf,
    },
    /// The server's host does not resolve.
    #[error("{host_port}{}", match source {
        Some(e) => format!(": {e}"),
        None => " resolves to nothing".to_owned(),
    })]
    Unresolved {
        /// The host and port.
        host_port: String,
        /// The resolver's error, if it gave one.
        source: Option<std::io::Error>,
    },
    /// Nothing accepts connections there.
    #[error("{url}: {source}")]
    Unreachable {
        /// The base URL.
        url: String,
        /// Why.
        source: std::io::Error,
    },
    /// The connection failed while asking.
    #[error(transparent)]
    Io(std::io::Error),
    /// `GET /health` did not answer 200.
    #[error("{url}/health did not answer 200: {status_line:?}")]
    Unhealthy {
        /// The base URL.
        url: String,
        /// The reply's first line, if any.
        status_line: Option<String>,
    },
}
