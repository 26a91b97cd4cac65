//! `kf serve`: the explorer page over HTTP, updated live while a search writes to the run.
//!
//! Routes (everything else is 404; nothing is ever read from a path the request names):
//!
//! | route | what |
//! |---|---|
//! | `GET /` | the page, with the run's current data inlined |
//! | `GET /api/data` | the run's current data as JSON |
//! | `GET /api/source/{blake3}` | one source text by its 64-hex-digit hash |
//! | `GET /api/events` | server-sent events: `update` whenever the step log grows |
//!
//! The server only reads the run directory (without its lock), and binds to `127.0.0.1`
//! unless told otherwise.
//!
//! A web page the user visits must not read the run (it holds kernels, prompts and LLM
//! exchanges). The browser's same-origin policy alone does not stop DNS rebinding: a page of
//! `evil.example` re-resolves its own name to `127.0.0.1` and then reads `kf serve` as its own
//! origin. So every request must name the server by address in its `Host` header (the bound
//! address, `localhost` or, when bound to every interface, any address literal, with the
//! bound port: never a DNS name a page could control), and a request with an `Origin` must
//! come from such an origin too; anything else gets `403`. At most [`MAX_EVENT_STREAMS`] event
//! streams are open at once (`503` beyond), so a page cannot hold the server's threads.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::{render_page, ExplorerError, RunData, RunFiles, SourceIndex};

/// How often the server looks at the step log for new records.
const POLL: Duration = Duration::from_millis(400);

/// The most event streams (`/api/events`) open at once.
pub const MAX_EVENT_STREAMS: usize = 16;

/// Which `Host` and `Origin` values name this server: by the address it bound to.
#[derive(Debug, Clone, Copy)]
struct HostCheck {
    bound: SocketAddr,
}

impl HostCheck {
    /// Whether `authority` (`host:port` of a `Host` header or an origin) names the server:
    /// its port, and as host an address literal the server answers on or `localhost`. A DNS
    /// name other than `localhost` never passes: that is what rebinding needs.
    fn allows(&self, authority: &str) -> bool {
        // `[v6]:port`, `[v6]`, `host:port` or `host`; without a port a browser means 80.
        let (host, port) = match authority.strip_prefix('[') {
            Some(rest) => match rest.split_once(']') {
                Some((host, "")) => (host, None),
                Some((host, tail)) => match tail.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return false,
                },
                None => return false,
            },
            None => match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            },
        };
        let port = port.map_or(Ok(80), str::parse::<u16>);
        if port != Ok(self.bound.port()) {
            return false;
        }
        if host.eq_ignore_ascii_case("localhost") {
            return self.bound.ip().is_loopback() || self.bound.ip().is_unspecified();
        }
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) => ip == self.bound.ip() || self.bound.ip().is_unspecified(),
            Err(_) => false,
        }
    }

    /// Why a request's headers do not name this server, if they do not.
    fn refusal(&self, headers: &HeaderMap) -> Option<&'static str> {
        let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        match text(header::HOST) {
            Some(host) if self.allows(host) => {}
            _ => return Some("the Host header does not name this server by its address"),
        }
        match text(header::ORIGIN) {
            None => None,
            Some(origin) => match origin.strip_prefix("http://") {
                Some(authority) if self.allows(authority) => None,
                _ => Some("requests from another origin are refused"),
            },
        }
    }
}

/// Refuses (403) a request whose `Host` or `Origin` does not name this server.
async fn same_origin_only(State(s): State<AppState>, request: Request, next: Next) -> Response {
    match s.hosts.refusal(request.headers()) {
        Some(why) => (StatusCode::FORBIDDEN, why).into_response(),
        None => next.run(request).await,
    }
}

/// The run's data, rebuilt when the step log changed since the last read.
struct Cache {
    log_len: u64,
    data: Arc<RunData>,
    sources: Arc<SourceIndex>,
}

#[derive(Clone)]
struct AppState {
    files: Arc<RunFiles>,
    cache: Arc<Mutex<Option<Cache>>>,
    hosts: HostCheck,
    streams: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    fn current(&self) -> Result<(Arc<RunData>, Arc<SourceIndex>), ExplorerError> {
        let len = self.files.log_len();
        if let Ok(guard) = self.cache.lock() {
            if let Some(c) = guard.as_ref().filter(|c| c.log_len == len) {
                return Ok((c.data.clone(), c.sources.clone()));
            }
        }
        // Only the elites' sources ride along; the page asks for the others.
        let (mut data, sources) = RunData::read(&self.files, None, 0)?;
        data.live = true;
        let (data, sources) = (Arc::new(data), Arc::new(sources));
        if let Ok(mut guard) = self.cache.lock() {
            *guard = Some(Cache {
                log_len: len,
                data: data.clone(),
                sources: sources.clone(),
            });
        }
        Ok((data, sources))
    }
}

fn error_response(e: ExplorerError) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        e.to_string(),
    )
        .into_response()
}

async fn page(State(s): State<AppState>) -> Response {
    match tokio::task::spawn_blocking(move || s.current()).await {
        Ok(Ok((data, _))) => Html(render_page(&data)).into_response(),
        Ok(Err(e)) => error_response(e),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn data(State(s): State<AppState>) -> Response {
    match tokio::task::spawn_blocking(move || s.current()).await {
        Ok(Ok((data, _))) => match serde_json::to_string(&*data) {
            Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        },
        Ok(Err(e)) => error_response(e),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn source(State(s): State<AppState>, UrlPath(hash): UrlPath<String>) -> Response {
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return (
            StatusCode::BAD_REQUEST,
            "a source is named by its BLAKE3 hash",
        )
            .into_response();
    }
    match tokio::task::spawn_blocking(move || s.current()).await {
        Ok(Ok((_, sources))) => match sources.get(&hash) {
            Some(text) => (
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                text.clone(),
            )
                .into_response(),
            None => (StatusCode::NOT_FOUND, "no such source in this run").into_response(),
        },
        Ok(Err(e)) => error_response(e),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn events(State(s): State<AppState>) -> Response {
    // The permit travels with the stream: it is released when the client goes away.
    let Ok(permit) = s.streams.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many open event streams",
        )
            .into_response();
    };
    let start = s.files.log_len();
    let stream = futures::stream::unfold((start, permit), move |(last, permit)| {
        let files = s.files.clone();
        async move {
            loop {
                tokio::time::sleep(POLL).await;
                let now = files.log_len();
                if now != last {
                    let event = Event::default().event("update").data(now.to_string());
                    return Some((Ok::<_, Infallible>(event), (now, permit)));
                }
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

/// The explorer's HTTP routes for the run in `path`, served on `bound` (the address requests
/// must name in their `Host` header).
pub fn router(
    path: impl AsRef<std::path::Path>,
    bound: SocketAddr,
) -> Result<Router, ExplorerError> {
    let files = RunFiles::locate(path)?;
    let state = AppState {
        files: Arc::new(files),
        cache: Arc::new(Mutex::new(None)),
        hosts: HostCheck { bound },
        streams: Arc::new(tokio::sync::Semaphore::new(MAX_EVENT_STREAMS)),
    };
    // Fail now, not on the first request, when the run cannot be read.
    state.current()?;
    Ok(Router::new()
        .route("/", get(page))
        .route("/api/data", get(data))
        .route("/api/source/{hash}", get(source))
        .route("/api/events", get(events))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            same_origin_only,
        ))
        .with_state(state))
}

/// Serves the explorer for the run in `path` on `addr` until the process is interrupted;
/// `on_bound` hears the address actually bound (port 0 picks a free port).
pub fn serve(
    path: impl AsRef<std::path::Path>,
    addr: SocketAddr,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ExplorerError> {
    // The run is read before anything binds, so that a bad path fails at once.
    RunFiles::locate(path.as_ref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ExplorerError::Bind {
            addr: addr.to_string(),
            source: e,
        })?;
    runtime.block_on(async move {
        let listener =
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| ExplorerError::Bind {
                    addr: addr.to_string(),
                    source: e,
                })?;
        let bound = listener.local_addr().map_err(|e| ExplorerError::Bind {
            addr: addr.to_string(),
            source: e,
        })?;
        let app = router(path, bound)?;
        on_bound(bound);
        // No graceful shutdown: open event streams never end, and nothing here needs flushing.
        axum::serve(listener, app)
            .await
            .map_err(|e| ExplorerError::Bind {
                addr: bound.to_string(),
                source: e,
            })
    })
}

#[cfg(test)]
mod tests {
    use super::HostCheck;

    fn check(bound: &str) -> HostCheck {
        HostCheck {
            bound: bound.parse().unwrap(),
        }
    }

    #[test]
    fn only_the_bound_address_or_localhost_with_its_port_names_the_server() {
        let loopback = check("127.0.0.1:8717");
        for ok in ["127.0.0.1:8717", "localhost:8717", "LOCALHOST:8717"] {
            assert!(loopback.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example:8717",
            "127.0.0.1:8718",
            "127.0.0.1",
            "127.0.0.2:8717",
            "[::1]:8717",
            "127.0.0.1:8717:1",
            "",
            ":8717",
            "localhost.:8717",
        ] {
            assert!(!loopback.allows(refused), "{refused}");
        }
        // Port 80 may be left out, as browsers do.
        let web = check("127.0.0.1:80");
        assert!(web.allows("127.0.0.1") && web.allows("localhost") && !web.allows("evil"));
        // Bound to every interface: any address literal with the port, never a name but
        // localhost.
        let any = check("[::]:9000");
        for ok in [
            "[::1]:9000",
            "10.1.2.3:9000",
            "localhost:9000",
            "[fe80::1]:9000",
        ] {
            assert!(any.allows(ok), "{ok}");
        }
        for refused in ["rebound.example:9000", "[::1]:9001", "[::1", "[::1]x"] {
            assert!(!any.allows(refused), "{refused}");
        }
        let v6 = check("[::1]:9000");
        assert!(v6.allows("[::1]:9000") && v6.allows("localhost:9000"));
        assert!(!v6.allows("127.0.0.1:9000"));
    }
}
