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

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures::Stream;

use super::{render_page, ExplorerError, RunData, RunFiles, SourceIndex};

/// How often the server looks at the step log for new records.
const POLL: Duration = Duration::from_millis(400);

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

async fn events(State(s): State<AppState>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let start = s.files.log_len();
    let stream = futures::stream::unfold(start, move |last| {
        let files = s.files.clone();
        async move {
            loop {
                tokio::time::sleep(POLL).await;
                let now = files.log_len();
                if now != last {
                    let event = Event::default().event("update").data(now.to_string());
                    return Some((Ok(event), now));
                }
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found").into_response()
}

/// The explorer's HTTP routes for the run in `path`.
pub fn router(path: impl AsRef<std::path::Path>) -> Result<Router, ExplorerError> {
    let files = RunFiles::locate(path)?;
    let state = AppState {
        files: Arc::new(files),
        cache: Arc::new(Mutex::new(None)),
    };
    // Fail now, not on the first request, when the run cannot be read.
    state.current()?;
    Ok(Router::new()
        .route("/", get(page))
        .route("/api/data", get(data))
        .route("/api/source/{hash}", get(source))
        .route("/api/events", get(events))
        .fallback(not_found)
        .with_state(state))
}

/// Serves the explorer for the run in `path` on `addr` until the process is interrupted;
/// `on_bound` hears the address actually bound (port 0 picks a free port).
pub fn serve(
    path: impl AsRef<std::path::Path>,
    addr: SocketAddr,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ExplorerError> {
    let app = router(path)?;
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
