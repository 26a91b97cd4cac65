//! Questions through the queue: a search asks a named endpoint (an LLM server, say) through
//! an [`Asker`], and whichever worker serves that endpoint ([`crate::WorkerRole::Answer`],
//! [`crate::JobHandler::answer`]) answers. Several searches that ask one endpoint share the
//! workers in front of it, so the endpoint's concurrency limit and budget are kept by those
//! workers for all of them, and a worker can run next to the model server.
//!
//! A question is signed by the search like a job and refused unsigned; the answer is stored in
//! PostgreSQL (`kf_answers`), signed by the worker, byte for byte, and the asker reads it from
//! there and checks the signature against its trusted worker keys. A question's request id is
//! the hash of the run, its number in the run and its content: a resumed run that asks the
//! same questions in the same order is answered from the database.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::config::{check_token, DistConfig};
use crate::error::{DistError, Result};
use crate::evaluator::OwnedRuntime;
use crate::job;
use crate::queue::Queue;
use crate::security::Role;
use crate::store::Store;

/// A question on the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskMessage {
    /// Message format version ([`crate::MESSAGE_VERSION`]).
    pub v: u32,
    /// The request id: the hash of the run, the question's number and its content.
    pub request: String,
    /// The run that asks.
    pub run: String,
    /// The endpoint asked.
    pub endpoint: String,
    /// The question, as the endpoint's workers understand it.
    pub question: serde_json::Value,
}

/// An answer, as a worker signs and stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerMessage {
    /// Message format version.
    pub v: u32,
    /// The request it answers.
    pub request: String,
    /// The run that asked.
    pub run: String,
    /// The answer; `Err`: the worker's handler could not answer (the text says why: the
    /// message of a [`NoAnswer`], kept as text on the wire).
    pub answer: std::result::Result<serde_json::Value, String>,
    /// Name of the worker.
    pub worker: String,
    /// Id of the key the worker signed it with (empty: unsigned).
    pub worker_key: String,
    /// Seconds the worker spent.
    pub seconds: f64,
}

/// An answer saying that the question could not be answered, in the words of the worker that
/// answered (a budget spent, a model that refused, a question refused or poisoned; an LLM
/// answer worker writes its `LlmFailure` as JSON here). On the wire it is the text itself
/// ([`AnswerMessage::answer`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(transparent)]
#[error("{0}")]
pub struct NoAnswer(pub String);

impl From<String> for NoAnswer {
    fn from(why: String) -> Self {
        NoAnswer(why)
    }
}

/// Asks one endpoint's questions for one run, through the queue ([`AnswerMessage`]s come back
/// through the database). Cheap to clone; the connections are shared.
#[derive(Clone)]
pub struct Asker {
    inner: Arc<AskerInner>,
    /// The asker's own runtime, apart from what its tasks hold, so that the last asker dropped
    /// shuts it down from any context.
    runtime: Arc<OwnedRuntime>,
}

struct AskerInner {
    config: DistConfig,
    run: String,
    endpoint: String,
    queue: Queue,
    store: Store,
    asked: AtomicU64,
    wait: Duration,
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asker")
            .field("run", &self.inner.run)
            .field("endpoint", &self.inner.endpoint)
            .finish_non_exhaustive()
    }
}

impl Asker {
    /// Connects to both servers (on a small runtime of its own, so that any executor can
    /// drive it) to ask `endpoint` for `run`. Answers are awaited for the configuration's
    /// result timeout at most (an hour by default).
    pub fn connect(config: DistConfig, run: &str, endpoint: &str) -> Result<Asker> {
        check_token("run id", run)?;
        check_token("endpoint", endpoint)?;
        config.validate()?;
        let config = config.with_security_loaded()?;
        config.security.check_signatures(Role::Search)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kf-ask")
            .enable_all()
            .build()
            .map_err(DistError::Runtime)?;
        let (queue, store) = runtime.block_on(async {
            let queue = Queue::connect(&config, &format!("kf-ask-{run}")).await?;
            let store = Store::connect(&config.database_url, &config.security).await?;
            Ok::<_, DistError>((queue, store))
        })?;
        let wait = config.result_timeout.unwrap_or(Duration::MAX);
        Ok(Asker {
            inner: Arc::new(AskerInner {
                config,
                run: run.to_owned(),
                endpoint: endpoint.to_owned(),
                queue,
                store,
                asked: AtomicU64::new(0),
                wait,
            }),
            runtime: Arc::new(OwnedRuntime(Some(runtime))),
        })
    }

    /// Asks one question and waits for its answer: `Ok(Err(why))` when the worker's handler
    /// could not answer; `Err` when the question could not be asked, no trusted worker
    /// answered within the result timeout, or the answer failed its signature check.
    pub async fn ask(
        &self,
        question: &serde_json::Value,
    ) -> Result<std::result::Result<serde_json::Value, NoAnswer>> {
        let inner = self.inner.clone();
        let question = question.clone();
        let (tx, rx) = futures::channel::oneshot::channel();
        let Some(runtime) = &self.runtime.0 else {
            return Err(DistError::Config("the asker's runtime stopped".into()));
        };
        // The task holds the connections, never the runtime.
        runtime.spawn(async move {
            let _ = tx.send(ask_here(&inner, question).await);
        });
        rx.await
            .map_err(|_| DistError::Config("the asker's runtime stopped".into()))?
    }
}

/// Asks one question (on the asker's runtime) and waits for its answer.
async fn ask_here(
    inner: &AskerInner,
    question: serde_json::Value,
) -> Result<std::result::Result<serde_json::Value, NoAnswer>> {
    let number = inner.asked.fetch_add(1, Ordering::Relaxed);
    let text = job::encode("question", &question)?;
    let mut request = job::question_id(&inner.run, number, &text).0;
    // Asked before (a resumed run): a stored answer stands, a stored failure (a model
    // server that was down, a budget since raised) is asked again under a request of its
    // own.
    let mut again = 0;
    while let Some(answer) = stored(inner, &request).await? {
        if answer.is_ok() {
            return Ok(answer);
        }
        again += 1;
        request = format!(
            "{}-again{again}",
            job::question_id(&inner.run, number, &text)
        );
    }
    let message = AskMessage {
        v: job::MESSAGE_VERSION,
        request: request.clone(),
        run: inner.run.clone(),
        endpoint: inner.endpoint.clone(),
        question,
    };
    let payload = job::encode("question", &message)?;
    let headers = match &inner.config.security.signing_key {
        Some(key) => vec![
            (job::SIGNER_HEADER, key.id().to_string()),
            (job::SIGNATURE_HEADER, key.sign(&payload)),
        ],
        None => Vec::new(),
    };
    let subject = inner.config.ask_subject(&inner.endpoint);
    inner
        .queue
        .publish(&subject, &request, payload, &headers)
        .await?;
    // Answers take seconds (a model's reply): look in the database, less often the
    // longer it takes.
    let started = Instant::now();
    let mut gap = Duration::from_millis(50);
    loop {
        if let Some(answer) = stored(inner, &request).await? {
            return Ok(answer);
        }
        if started.elapsed() >= inner.wait {
            return Err(DistError::ResultTimeout {
                job: request,
                seconds: started.elapsed().as_secs_f64(),
            });
        }
        tokio::time::sleep(gap).await;
        gap = (gap * 2).min(Duration::from_secs(1));
    }
}

/// The stored answer of `request`, checked against the trusted worker keys.
async fn stored(
    inner: &AskerInner,
    request: &str,
) -> Result<Option<std::result::Result<serde_json::Value, NoAnswer>>> {
    let Some((signed, signature)) = inner.store.answer(request).await? else {
        return Ok(None);
    };
    let message: AnswerMessage = job::decode("answer", signed.as_bytes())?;
    if let Some(trusted) = &inner.config.security.trusted_keys {
        trusted
            .verify(&message.worker_key, signed.as_bytes(), &signature)
            .map_err(|refusal| DistError::Security(format!("an answer to {request}: {refusal}")))?;
    }
    if message.request != request {
        return Err(DistError::Security(format!(
            "the answer stored for {request} answers {}",
            message.request
        )));
    }
    Ok(Some(message.answer.map_err(NoAnswer)))
}
