//! The JetStream side: the connection, the two streams (a work queue of jobs, a log of results)
//! and their consumers, and publishing that survives a restarting server.

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer, stream, Message};
use futures::StreamExt;

use crate::config::{DistConfig, PRIORITIES};
use crate::error::{DistError, Result};

/// How long a new connection waits for JetStream to accept the streams.
const STREAMS_READY_WAIT: Duration = Duration::from_secs(15);

/// The stages of a job on the jobs stream, each with its subjects and consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Jobs a search sent to be evaluated (`<namespace>.eval.…`).
    Evaluate,
    /// Jobs a search sent to be compiled first (`<namespace>.compile.…`).
    Compile,
    /// Jobs a compile worker built and passed on (`<namespace>.built.…`).
    Built,
    /// Questions to an endpoint (`<namespace>.ask.<endpoint>`).
    Ask,
}

/// A connection to NATS with the deployment's streams in place.
#[derive(Clone)]
pub(crate) struct Queue {
    pub(crate) js: jetstream::Context,
    pub(crate) config: DistConfig,
}

impl Queue {
    /// Connects (failing fast when no server answers) and creates the streams when missing.
    /// After the first connection the client reconnects forever.
    pub(crate) async fn connect(config: &DistConfig, name: &str) -> Result<Self> {
        config.validate()?;
        if let Some(pw) = kf_core::redact::url_password(&config.nats_url) {
            kf_core::redact::register_secret(pw);
        }
        let security = &config.security;
        security.check_plain_text("NATS", &crate::security::nats_hosts(&config.nats_url))?;
        let mut options = async_nats::ConnectOptions::new();
        if let Some(ca) = &security.ca {
            options = options.require_tls(true).add_root_certificates(ca.clone());
        }
        if let Some(c) = &security.credentials {
            options = options
                .user_and_password(c.nats_user.clone(), c.nats_password.expose().to_string());
        }
        let client = options
            .name(name)
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None)
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((50 * attempts as u64).min(1000))
            })
            .connect(config.nats_url.as_str())
            .await
            .map_err(|e| {
                let url = kf_core::redact::redact_url(&config.nats_url);
                DistError::nats(format!("connecting to {url}"), e)
            })?;
        let js = jetstream::new(client);
        let queue = Queue {
            js,
            config: config.clone(),
        };
        // A server that has just started (or a cluster electing a leader) may answer before
        // JetStream is ready: keep asking for a while.
        let start = Instant::now();
        loop {
            match queue.ensure_streams().await {
                Ok(()) => return Ok(queue),
                Err(e) if start.elapsed() < STREAMS_READY_WAIT => {
                    tracing::debug!("JetStream not ready ({e}); retrying");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn ensure_streams(&self) -> Result<()> {
        let c = &self.config;
        let jobs = stream::Config {
            name: c.jobs_stream(),
            // Jobs to evaluate; for compile and execute workers, jobs to compile first and
            // jobs a compile worker built.
            subjects: vec![
                format!("{}.eval.>", c.namespace),
                format!("{}.compile.>", c.namespace),
                format!("{}.built.>", c.namespace),
                format!("{}.ask.>", c.namespace),
            ],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            duplicate_window: c.duplicate_window,
            ..Default::default()
        };
        let mut existing = self
            .js
            .get_or_create_stream(jobs.clone())
            .await
            .map_err(|e| DistError::nats("creating the jobs stream", e))?;
        // A stream created before compile jobs existed takes their subjects on.
        let subjects = existing
            .info()
            .await
            .map_err(|e| DistError::nats("reading the jobs stream", e))?
            .config
            .subjects
            .clone();
        if jobs.subjects.iter().any(|s| !subjects.contains(s)) {
            self.js.update_stream(jobs).await.map_err(|e| {
                DistError::nats("adding the compile subjects to the jobs stream", e)
            })?;
        }
        self.js
            .get_or_create_stream(stream::Config {
                name: c.results_stream(),
                subjects: vec![format!("{}.result.>", c.namespace)],
                retention: stream::RetentionPolicy::Limits,
                storage: stream::StorageType::File,
                duplicate_window: c.duplicate_window,
                max_age: Duration::from_secs(7 * 24 * 3600),
                ..Default::default()
            })
            .await
            .map_err(|e| DistError::nats("creating the results stream", e))?;
        Ok(())
    }

    /// Publishes under a message id (JetStream drops a second publish of the same id within
    /// the de-duplication window), retrying until the server acknowledges or the publish
    /// timeout passes. Returns the stream sequence and whether it was a duplicate.
    pub(crate) async fn publish(
        &self,
        subject: &str,
        id: &str,
        payload: Vec<u8>,
        headers: &[(&'static str, String)],
    ) -> Result<(u64, bool)> {
        let start = Instant::now();
        let mut delay = Duration::from_millis(20);
        loop {
            let attempt = async {
                let mut message = jetstream::message::PublishMessage::build()
                    .payload(payload.clone().into())
                    .message_id(id);
                for (name, value) in headers {
                    message = message.header(*name, value.as_str());
                }
                let ack = self
                    .js
                    .send_publish(subject.to_string(), message)
                    .await
                    .map_err(async_nats::Error::from)?
                    .await
                    .map_err(async_nats::Error::from)?;
                Ok::<_, async_nats::Error>(ack)
            };
            match attempt.await {
                Ok(ack) => return Ok((ack.sequence, ack.duplicate)),
                Err(e) if start.elapsed() < self.config.publish_timeout => {
                    tracing::debug!("publishing to {subject} failed ({e}); retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(DistError::nats(format!("publishing to {subject}"), e)),
            }
        }
    }

    /// The work consumers of a device kind for one stage, highest priority first (created
    /// when missing).
    pub(crate) async fn work_consumers(
        &self,
        device_kind: &str,
        stage: Stage,
    ) -> Result<Vec<consumer::Consumer<consumer::pull::Config>>> {
        let c = &self.config;
        let stream = self
            .js
            .get_stream(c.jobs_stream())
            .await
            .map_err(|e| DistError::nats("opening the jobs stream", e))?;
        let mut out = Vec::new();
        for p in 0..PRIORITIES {
            let (name, filter_subject) = match stage {
                Stage::Evaluate => (
                    format!("work-{device_kind}-p{p}"),
                    c.job_subject(device_kind, p),
                ),
                Stage::Compile => (
                    format!("compile-{device_kind}-p{p}"),
                    c.compile_subject(device_kind, p),
                ),
                Stage::Built => (
                    format!("built-{device_kind}-p{p}"),
                    c.built_subject(device_kind, p),
                ),
                // Questions have no priorities: one consumer, at p0.
                Stage::Ask if p > 0 => continue,
                Stage::Ask => (format!("ask-{device_kind}"), c.ask_subject(device_kind)),
            };
            let consumer = stream
                .get_or_create_consumer(
                    &name,
                    consumer::pull::Config {
                        durable_name: Some(name.clone()),
                        filter_subject,
                        ack_policy: consumer::AckPolicy::Explicit,
                        ack_wait: c.ack_wait,
                        // The attempts, plus one delivery that records the job as failed.
                        max_deliver: i64::from(c.max_attempts) + 1,
                        backoff: c.backoff(),
                        max_ack_pending: 10_000,
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| DistError::nats(format!("creating consumer {name}"), e))?;
            out.push(consumer);
        }
        Ok(out)
    }

    /// The durable consumer of one run's results (created when missing).
    pub(crate) async fn results_consumer(
        &self,
        run: &str,
    ) -> Result<consumer::Consumer<consumer::pull::Config>> {
        let c = &self.config;
        let stream = self
            .js
            .get_stream(c.results_stream())
            .await
            .map_err(|e| DistError::nats("opening the results stream", e))?;
        let name = format!("results-{run}");
        stream
            .get_or_create_consumer(
                &name,
                consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: c.result_subject(run),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: Duration::from_secs(30),
                    max_ack_pending: 100_000,
                    inactive_threshold: Duration::from_secs(7 * 24 * 3600),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| DistError::nats(format!("creating consumer {name}"), e))
    }

    /// Jobs on the queue (waiting or delivered and unanswered) by device kind and priority:
    /// (device kind, priority, messages), from the jobs stream's message count per subject.
    /// Jobs waiting for a compile worker count under `<device kind> (to compile)`, jobs a
    /// compile worker built under `<device kind> (built)`.
    pub(crate) async fn depths(&self) -> Result<Vec<(String, u8, u64)>> {
        use futures::TryStreamExt;
        let stages = [
            (format!("{}.eval.", self.config.namespace), ""),
            (
                format!("{}.compile.", self.config.namespace),
                " (to compile)",
            ),
            (format!("{}.built.", self.config.namespace), " (built)"),
            (format!("{}.ask.", self.config.namespace), " (questions)"),
        ];
        let stream = self
            .js
            .get_stream(self.config.jobs_stream())
            .await
            .map_err(|e| DistError::nats("opening the jobs stream", e))?;
        let mut subjects = stream
            .info_with_subjects(format!("{}.>", self.config.namespace))
            .await
            .map_err(|e| DistError::nats("reading the queue depths", e))?;
        let mut out = Vec::new();
        while let Some((subject, count)) = subjects
            .try_next()
            .await
            .map_err(|e| DistError::nats("reading the queue depths", e))?
        {
            // `<namespace>.eval.<device kind>.p<priority>`, `<namespace>.compile.…`
            let Some((rest, stage)) = stages.iter().find_map(|(prefix, stage)| {
                subject.strip_prefix(prefix.as_str()).map(|r| (r, *stage))
            }) else {
                continue;
            };
            // Questions have no priority token.
            let (kind, priority) = rest.rsplit_once(".p").unwrap_or((rest, "0"));
            if let Ok(priority) = priority.parse() {
                out.push((format!("{kind}{stage}"), priority, count as u64));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Deletes a job that no worker has taken yet (cancellation). False when it is gone.
    pub(crate) async fn delete_job(&self, sequence: u64) -> bool {
        match self.js.get_stream(self.config.jobs_stream()).await {
            Ok(stream) => stream.delete_message(sequence).await.unwrap_or(false),
            Err(_) => false,
        }
    }
}

/// Takes up to `max` messages: waiting ones at once, else waits up to `wait` for the first.
pub(crate) async fn take(
    consumer: &consumer::Consumer<consumer::pull::Config>,
    max: usize,
    wait: Option<Duration>,
) -> Result<Vec<Message>> {
    let batch = match wait {
        None => consumer.fetch().max_messages(max).messages().await,
        Some(w) => {
            consumer
                .batch()
                .max_messages(max)
                .expires(w)
                .messages()
                .await
        }
    }
    .map_err(|e| DistError::nats("pulling messages", e))?;
    let mut batch = batch;
    let mut out = Vec::new();
    while let Some(m) = batch.next().await {
        match m {
            Ok(m) => out.push(m),
            Err(e) => {
                if out.is_empty() {
                    return Err(DistError::nats("pulling messages", e));
                }
                break;
            }
        }
    }
    Ok(out)
}
