//! [`DistEvaluator`]: an [`Evaluator`] that sends each candidate to the workers as a job and
//! completes when the job's result is stored.
//!
//! Per evaluation: record the job in PostgreSQL (answering at once when the job already has a
//! reusable result: the cache across runs and machines), sign it, publish it under its request
//! id, wait. The workers store their results before publishing them; a background task pulls
//! the run's result messages in batches and reads what they name from the database, so the
//! search never sees a result the database does not hold, nor one an untrusted key signed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kf_core::{Candidate, Evaluation, Evaluator, KernelSource};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::config::{check_token, DistConfig, PRIORITIES};
use crate::error::{DistError, Result};
use crate::job::{
    self, job_id, kernel_hash, Hash, JobMessage, Profile, RefusalMessage, ResultMessage,
};
use crate::queue::{self, Queue};
use crate::store::{Store, StoredResult};

/// What a waiting evaluation receives (shared by every evaluation waiting on the same job).
type Reply = std::result::Result<Evaluation, Failure>;

/// Why a job produced no result.
#[derive(Debug, Clone)]
enum Failure {
    Cancelled,
    Failed(String),
    /// A worker refused the job: (worker, reason).
    Refused(String, String),
}

struct Waiting {
    replies: Vec<oneshot::Sender<Reply>>,
    /// When the poller looks in the database for its result next.
    next_poll: Instant,
    /// How long after that look the next one comes (doubling, see [`poller`]).
    poll_gap: Duration,
    /// Stream sequence of the published job, for cancellation.
    sequence: Option<u64>,
    /// The request whose result completes it.
    request: String,
    /// The stored result a sampled re-check evaluates again, to compare.
    recheck_of: Option<Evaluation>,
}

struct Inner {
    config: DistConfig,
    run: String,
    device_kind: String,
    profile: Profile,
    priority: u8,
    /// [`DistEvaluatorBuilder::compile_first`].
    compile_first: bool,
    result_timeout: Option<Duration>,
    /// The first look in the database for a waiting job's result comes after this.
    poll_interval: Duration,
    /// The longest gap between two looks for one job.
    max_poll_interval: Duration,
    /// How long the result reader waits to fill a batch (`None`: it reads what has arrived).
    result_linger: Option<Duration>,
    queue: Queue,
    store: Store,
    waiting: Mutex<HashMap<Hash, Waiting>>,
    permits: Arc<Semaphore>,
    submissions: mpsc::UnboundedSender<Submission>,
    /// Kernels this evaluator has stored (not sent again).
    stored_kernels: Mutex<HashSet<Hash>>,
}

/// A job on its way to the database and the queue.
struct Submission {
    message: JobMessage,
    source: KernelSource,
    priority: u8,
}

/// Jobs recorded in one statement at most.
const SUBMIT_BATCH: usize = 256;

/// Builds a [`DistEvaluator`].
#[derive(Debug, Clone)]
pub struct DistEvaluatorBuilder {
    config: DistConfig,
    run: String,
    device_kind: String,
    profile: serde_json::Value,
    priority: u8,
    max_in_flight: usize,
    poll_interval: Duration,
    max_poll_interval: Duration,
    result_linger: Option<Duration>,
    result_timeout: Option<Duration>,
    compile_first: bool,
}

impl DistEvaluatorBuilder {
    /// Sends every job to be compiled first: a compile worker of the device kind builds it
    /// (answering at once a kernel that cannot run), stores the binary by content hash, and
    /// passes the job on to the execute workers, so that device time never waits on a
    /// compiler ([`crate::WorkerRole`]): the deployment needs compile workers and execute
    /// workers. Default false: jobs go straight to the workers that evaluate them.
    pub fn compile_first(mut self, on: bool) -> Self {
        self.compile_first = on;
        self
    }

    /// The priority of every job but seeds' (which go first, at 0); default 1.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Jobs outstanding at once at most (back-pressure); default 256.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// How often the database is asked for results of jobs waiting that long (results another
    /// run stored for the same job); default 2 s.
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every;
        self
    }

    /// The longest a waiting job goes between two looks in the database for its result
    /// (default 30 s). The gap starts at the poll interval and doubles: a job published under
    /// its own message gets its result on the results stream (the look is a safety net), so
    /// a window of thousands of queued jobs is not looked up every poll interval. A job whose
    /// publish another run's message de-duplicated is looked up every poll interval (its result
    /// comes on the other run's subject).
    pub fn max_poll_interval(mut self, every: Duration) -> Self {
        self.max_poll_interval = every;
        self
    }

    /// Lets the result reader wait up to `linger` for a batch of 512 results to fill before it
    /// reads them from the database (fewer, larger reads; every result then waits up to
    /// `linger`). Default: no lingering, results are read as they arrive.
    pub fn result_linger(mut self, linger: Duration) -> Self {
        self.result_linger = Some(linger);
        self
    }

    /// Fails an evaluation that waited this long for its result; default: the configuration's
    /// [`DistConfig::result_timeout`].
    pub fn result_timeout(mut self, limit: Duration) -> Self {
        self.result_timeout = Some(limit);
        self
    }

    /// Connects to both servers (on a small runtime of the evaluator's own, so that any
    /// executor can drive it), records the run, and starts the result writer.
    pub fn connect(self) -> Result<DistEvaluator> {
        check_token("run id", &self.run)?;
        check_token("device kind", &self.device_kind)?;
        if self.priority >= PRIORITIES {
            return Err(DistError::Config(format!(
                "priority {} is out of range (0–{})",
                self.priority,
                PRIORITIES - 1
            )));
        }
        if self.max_in_flight == 0 {
            return Err(DistError::Config("max_in_flight must be at least 1".into()));
        }
        self.config.validate()?;
        let config = self.config.with_security_loaded()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kf-dist")
            .enable_all()
            .build()
            .map_err(DistError::Runtime)?;
        let profile = Profile::from_value(self.profile);
        let (submissions, submitted) = mpsc::unbounded_channel();
        config
            .security
            .check_signatures(crate::security::Role::Search)?;
        let inner = runtime.block_on(async {
            let queue = Queue::connect(&config, &format!("kf-search-{}", self.run)).await?;
            let store = Store::connect(&config.database_url, &config.security).await?;
            store
                .ensure_run(&self.run, &profile, &self.device_kind)
                .await?;
            // Created before the first job is published, so that no result is missed.
            queue.results_consumer(&self.run).await?;
            Ok::<_, DistError>(Arc::new(Inner {
                config: config.clone(),
                run: self.run.clone(),
                device_kind: self.device_kind.clone(),
                profile,
                priority: self.priority,
                compile_first: self.compile_first,
                result_timeout: self.result_timeout,
                poll_interval: self.poll_interval,
                max_poll_interval: self.max_poll_interval.max(self.poll_interval),
                result_linger: self.result_linger,
                queue,
                store,
                waiting: Mutex::new(HashMap::new()),
                permits: Arc::new(Semaphore::new(self.max_in_flight)),
                submissions,
                stored_kernels: Mutex::new(HashSet::new()),
            }))
        })?;
        runtime.spawn(submitter(inner.clone(), submitted));
        runtime.spawn(result_writer(inner.clone()));
        runtime.spawn(poller(inner.clone()));
        Ok(DistEvaluator {
            inner,
            runtime: Arc::new(OwnedRuntime(Some(runtime))),
        })
    }
}

/// An [`Evaluator`] that spreads evaluations over workers through NATS JetStream and records
/// everything in PostgreSQL. The engine uses it unchanged.
///
/// ```no_run
/// use kf_dist::{DistConfig, DistEvaluator};
///
/// let config = DistConfig::new("nats://127.0.0.1:4222", "postgres://kf@127.0.0.1/kf");
/// let profile = serde_json::json!({"task": "gemm", "sizes": {"M": 1024, "N": 1024, "K": 1024}});
/// let evaluator = DistEvaluator::builder(config, "run-1", "opencl-cpu", profile)
///     .max_in_flight(64)
///     .connect()?;
/// // Engine::new(mutator, evaluator, classifier, archive) … .run_blocking()
/// evaluator.shutdown();
/// # Ok::<(), kf_dist::DistError>(())
/// ```
///
/// Clones share the connections, the runtime and the waiting jobs (a tuner can wrap a clone).
#[derive(Clone)]
pub struct DistEvaluator {
    inner: Arc<Inner>,
    runtime: Arc<OwnedRuntime>,
}

/// The evaluator's runtime, stopped when the last clone goes.
pub(crate) struct OwnedRuntime(pub(crate) Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            // Safe from any context, async included.
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for DistEvaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistEvaluator")
            .field("run", &self.inner.run)
            .field("device_kind", &self.inner.device_kind)
            .finish_non_exhaustive()
    }
}

impl DistEvaluator {
    /// A builder for run `run` (letters, digits, `-`, `_`; the same id resumes the run's
    /// results) whose jobs go to workers of `device_kind`, each evaluated under `profile` (what
    /// the workers' handler needs: task, sizes, protocol…).
    pub fn builder(
        config: DistConfig,
        run: impl Into<String>,
        device_kind: impl Into<String>,
        profile: serde_json::Value,
    ) -> DistEvaluatorBuilder {
        DistEvaluatorBuilder {
            result_timeout: config.result_timeout,
            config,
            run: run.into(),
            device_kind: device_kind.into(),
            profile,
            priority: 1,
            max_in_flight: 256,
            poll_interval: Duration::from_secs(2),
            max_poll_interval: Duration::from_secs(30),
            result_linger: None,
            compile_first: false,
        }
    }

    /// The run id.
    pub fn run(&self) -> &str {
        &self.inner.run
    }

    /// The profile hash every job of this evaluator carries.
    pub fn profile(&self) -> &Profile {
        &self.inner.profile
    }

    /// The database connection (to store snapshots, or read results).
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Runs a future on the evaluator's runtime (database access from synchronous code).
    ///
    /// Not from inside an asynchronous task (it blocks the thread).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        match &self.runtime.0 {
            Some(rt) => rt.block_on(f),
            None => futures::executor::block_on(f),
        }
    }

    /// Jobs waiting for a result now.
    pub fn pending(&self) -> usize {
        self.inner.waiting.lock().map(|w| w.len()).unwrap_or(0)
    }

    /// Cancels the evaluations still waiting: jobs no worker has taken are deleted from the
    /// queue, and their evaluations fail with [`DistError::Cancelled`]. Results already on
    /// their way are still stored.
    pub fn cancel_pending(&self) -> usize {
        let inner = self.inner.clone();
        self.block_on(async move { inner.cancel_all().await })
    }

    /// Cancels what is pending; the runtime stops when the last clone is dropped.
    pub fn shutdown(self) {
        self.cancel_pending();
    }
}

#[async_trait]
impl Evaluator for DistEvaluator {
    type Error = DistError;

    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation> {
        let Some(rt) = &self.runtime.0 else {
            return Err(DistError::Cancelled);
        };
        let inner = self.inner.clone();
        let candidate = candidate.clone();
        let (tx, rx) = oneshot::channel();
        rt.spawn(async move {
            let _ = tx.send(inner.evaluate(candidate).await);
        });
        // A worker redacts its own secrets; this process's are its to take out.
        rx.await.unwrap_or(Err(DistError::Cancelled)).map(|mut e| {
            e.redact_secrets();
            e
        })
    }

    /// Submits every candidate at once.
    async fn evaluate_batch(&self, candidates: &[Candidate]) -> Vec<Result<Evaluation>> {
        futures::future::join_all(candidates.iter().map(|c| self.evaluate(c))).await
    }
}

impl Inner {
    async fn evaluate(&self, candidate: Candidate) -> Result<Evaluation> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| DistError::Cancelled)?;
        let kernel = kernel_hash(&candidate.source)?;
        let job = job_id(
            &kernel,
            &candidate.params,
            &self.profile.hash,
            &self.device_kind,
        )?;
        let message = JobMessage {
            v: job::MESSAGE_VERSION,
            job: job.clone(),
            request: job.0.clone(),
            run: self.run.clone(),
            kernel,
            profile: self.profile.hash.clone(),
            candidate: candidate.id,
            parents: candidate.parents.clone(),
            params: candidate.params.clone(),
            origin: candidate.origin.clone(),
        };
        let (tx, rx) = oneshot::channel();
        let first = {
            let mut waiting = self.waiting.lock().map_err(|_| DistError::Cancelled)?;
            let entry = waiting.entry(job.clone());
            let first = matches!(entry, std::collections::hash_map::Entry::Vacant(_));
            entry
                .or_insert_with(|| Waiting {
                    replies: Vec::new(),
                    next_poll: Instant::now() + self.poll_interval,
                    poll_gap: self.poll_interval,
                    sequence: None,
                    request: job.0.clone(),
                    recheck_of: None,
                })
                .replies
                .push(tx);
            first
        };
        if first {
            // The same job asked twice at once is sent once; both wait for its result.
            let priority = if candidate.parents.is_empty() {
                0
            } else {
                self.priority
            };
            let submission = Submission {
                message,
                source: candidate.source,
                priority,
            };
            if self.submissions.send(submission).is_err() {
                self.complete(&job, Err(Failure::Cancelled));
            }
        }
        let reply = match self.result_timeout {
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(r) => r,
                Err(_) => {
                    self.abandon(&job).await;
                    return Err(DistError::ResultTimeout {
                        job: job.0,
                        seconds: limit.as_secs_f64(),
                    });
                }
            },
            None => rx.await,
        };
        match reply {
            Ok(Ok(evaluation)) => Ok(evaluation),
            Ok(Err(Failure::Cancelled)) => Err(DistError::Cancelled),
            Ok(Err(Failure::Failed(message))) => Err(DistError::Failed(message)),
            Ok(Err(Failure::Refused(worker, reason))) => Err(DistError::Refused {
                job: job.0,
                worker,
                reason,
            }),
            Err(_) => Err(DistError::Cancelled),
        }
    }

    /// After a timed-out wait: when nobody else waits for the job, forgets it and takes its
    /// message off the queue (if it is still there), so that no worker evaluates a job nobody
    /// waits for.
    async fn abandon(&self, job: &Hash) {
        let sequence = match self.waiting.lock() {
            Ok(mut waiting) => {
                let Some(w) = waiting.get_mut(job) else {
                    return;
                };
                // The timed-out wait dropped its receiver.
                w.replies.retain(|tx| !tx.is_closed());
                if !w.replies.is_empty() {
                    return;
                }
                waiting.remove(job).and_then(|w| w.sequence)
            }
            Err(_) => return,
        };
        if let Some(sequence) = sequence {
            self.queue.delete_job(sequence).await;
        }
    }

    /// Fails the waiting jobs that the database records as refused for this run.
    async fn fail_refused(&self, jobs: &[String]) -> Result<()> {
        for (job, worker, reason) in self.store.refusals_for(&self.run, jobs).await? {
            tracing::warn!(job = %job, worker = %worker, "job refused by a worker: {reason}");
            self.complete(&job, Err(Failure::Refused(worker, reason)));
        }
        Ok(())
    }

    /// Records a batch of jobs in one statement (retrying a failing database briefly), then
    /// publishes those that have no result yet.
    async fn submit_batch(self: &Arc<Self>, batch: Vec<Submission>) {
        let mut kernels = Vec::new();
        if let Ok(stored) = self.stored_kernels.lock() {
            let mut seen = HashSet::new();
            for s in &batch {
                if !stored.contains(&s.message.kernel) && seen.insert(s.message.kernel.clone()) {
                    kernels.push((s.message.kernel.clone(), s.source.clone()));
                }
            }
        }
        let messages: Vec<JobMessage> = batch.iter().map(|s| s.message.clone()).collect();
        let mut attempt = 0;
        let done = loop {
            match self
                .store
                .submit(&messages, &kernels, &self.device_kind)
                .await
            {
                Ok(done) => break done,
                Err(e) if attempt < 4 => {
                    tracing::warn!("recording {} jobs: {e}; retrying", messages.len());
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(250 << attempt)).await;
                }
                Err(e) => {
                    for m in &messages {
                        self.complete(&m.job, Err(Failure::Failed(e.to_string())));
                    }
                    return;
                }
            }
        };
        if let Ok(mut stored) = self.stored_kernels.lock() {
            if stored.len() > 100_000 {
                stored.clear();
            }
            stored.extend(kernels.into_iter().map(|(h, _)| h));
        }
        let environment = match self.store.worker_environment(&self.device_kind).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("reading the workers' environment: {e}; reusing nothing");
                None
            }
        };
        let mut stored: HashMap<Hash, Vec<StoredResult>> = HashMap::new();
        for r in done {
            stored.entry(r.job.clone()).or_default().push(r);
        }
        let mut batch = batch;
        let mut answered = HashSet::new();
        for s in &mut batch {
            let job = s.message.job.clone();
            let rows = stored.remove(&job).unwrap_or_default();
            let reusable = self.reusable(&rows, environment.as_deref());
            if let Some(r) = &reusable {
                if !self.rechecked(&job) {
                    answered.insert(job.clone());
                    self.complete(&job, Ok(r.evaluation.clone()));
                    continue;
                }
            }
            // Evaluated (again): under the job's own request when nothing holds it yet (so
            // that later runs can reuse it), else under one of this run's.
            if rows.iter().any(|r| r.request == job.0) {
                s.message.request = format!("{job}-{}", self.run);
            }
            if let Ok(mut waiting) = self.waiting.lock() {
                if let Some(w) = waiting.get_mut(&job) {
                    w.request = s.message.request.clone();
                    w.recheck_of = reusable.map(|r| r.evaluation);
                }
            }
        }
        // Publishing waits for JetStream's acknowledgements; the next batch need not.
        let inner = self.clone();
        tokio::spawn(async move {
            let publishes = batch
                .into_iter()
                .filter(|s| !answered.contains(&s.message.job))
                .map(|s| {
                    let inner = inner.clone();
                    async move {
                        let job = s.message.job.clone();
                        if let Err(e) = inner.publish(&s).await {
                            inner.complete(&job, Err(Failure::Failed(e.to_string())));
                        }
                    }
                });
            futures::future::join_all(publishes).await;
        });
    }

    /// The first stored result of a job this search may answer it with: reuse enabled, signed
    /// by a worker the search trusts, measured in the current workers' environment.
    fn reusable(&self, rows: &[StoredResult], environment: Option<&str>) -> Option<StoredResult> {
        if !self.config.reuse.enabled {
            return None;
        }
        let trusted = self.config.security.trusted_keys.as_ref();
        rows.iter()
            .find(|r| {
                let trust = r.trusted_by(trusted);
                if let Err(why) = &trust {
                    tracing::info!(job = %r.job, worker = %r.worker, "stored result not reused: {why}");
                }
                trust.is_ok() && environment.is_some_and(|e| e == r.environment)
            })
            .cloned()
    }

    /// Whether a reusable result of `job` is evaluated again anyway: the sampled re-check, the
    /// same jobs for the same run.
    fn rechecked(&self, job: &Hash) -> bool {
        let fraction = self.config.reuse.recheck;
        if fraction <= 0.0 {
            return false;
        }
        let h = blake3::hash(format!("recheck:{}:{job}", self.run).as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&h.as_bytes()[..8]);
        (u64::from_le_bytes(first) as f64 / u64::MAX as f64) < fraction
    }

    /// Completes the waiting evaluations these stored results answer: those of the request
    /// each waits for, signed by a trusted worker.
    fn accept(&self, rows: Vec<StoredResult>) {
        let trusted = self.config.security.trusted_keys.as_ref();
        for r in rows {
            let (request, recheck_of) = match self.waiting.lock() {
                Ok(w) => match w.get(&r.job) {
                    Some(w) => (w.request.clone(), w.recheck_of.clone()),
                    None => continue,
                },
                Err(_) => return,
            };
            if r.request != request {
                continue;
            }
            if let Err(why) = r.trusted_by(trusted) {
                tracing::warn!(job = %r.job, worker = %r.worker, "result refused: {why}");
                continue;
            }
            if let Some(old) = recheck_of {
                if old.status != r.evaluation.status {
                    tracing::warn!(
                        job = %r.job,
                        "re-check disagrees with the stored result: {} then, {} now",
                        old.status,
                        r.evaluation.status
                    );
                }
            }
            self.complete(&r.job, Ok(r.evaluation));
        }
    }

    async fn publish(&self, s: &Submission) -> Result<()> {
        let payload = job::encode("job", &s.message)?;
        let subject = if self.compile_first {
            self.config.compile_subject(&self.device_kind, s.priority)
        } else {
            self.config.job_subject(&self.device_kind, s.priority)
        };
        // The signature covers the message's exact bytes.
        let headers = match &self.config.security.signing_key {
            Some(key) => vec![
                (job::SIGNER_HEADER, key.id().to_string()),
                (job::SIGNATURE_HEADER, key.sign(&payload)),
            ],
            None => Vec::new(),
        };
        let (sequence, duplicate) = self
            .queue
            .publish(&subject, &s.message.request, payload, &headers)
            .await?;
        if duplicate {
            // Published before (by this run before a restart, or by another run): its result
            // arrives on the results stream or is found in the database by the poller.
            tracing::debug!(job = %s.message.job, "job already queued");
        } else if let Ok(mut waiting) = self.waiting.lock() {
            if let Some(w) = waiting.get_mut(&s.message.job) {
                w.sequence = Some(sequence);
            }
        }
        Ok(())
    }

    fn complete(&self, job: &Hash, reply: Reply) {
        let waiting = self.waiting.lock().ok().and_then(|mut w| w.remove(job));
        if let Some(w) = waiting {
            for tx in w.replies {
                let _ = tx.send(reply.clone());
            }
        }
    }

    async fn cancel_all(&self) -> usize {
        self.permits.close();
        let all: Vec<(Hash, Waiting)> = match self.waiting.lock() {
            Ok(mut w) => w.drain().collect(),
            Err(_) => Vec::new(),
        };
        let n = all.len();
        for (_, w) in all {
            if let Some(seq) = w.sequence {
                self.queue.delete_job(seq).await;
            }
            for tx in w.replies {
                let _ = tx.send(Err(Failure::Cancelled));
            }
        }
        n
    }
}

/// Takes submissions in batches: whatever has queued up while the previous batch was recorded.
async fn submitter(inner: Arc<Inner>, mut submitted: mpsc::UnboundedReceiver<Submission>) {
    while let Some(first) = submitted.recv().await {
        let mut batch = vec![first];
        while batch.len() < SUBMIT_BATCH {
            match submitted.try_recv() {
                Ok(s) => batch.push(s),
                Err(_) => break,
            }
        }
        inner.submit_batch(batch).await;
    }
}

/// Pulls the run's result messages in batches, reads the results they name from the
/// database, completes the waiting evaluations, then acknowledges: a crash before
/// acknowledging only reads the same results again.
async fn result_writer(inner: Arc<Inner>) {
    let mut consumer = None;
    loop {
        if inner.permits.is_closed() {
            return;
        }
        let c = match &consumer {
            Some(c) => c,
            None => match inner.queue.results_consumer(&inner.run).await {
                Ok(c) => consumer.insert(c),
                Err(e) => {
                    tracing::warn!("results consumer: {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
            },
        };
        // What has arrived, at once; when nothing has, wait for the first result (a batch
        // that waited to fill would hold every result of a small window for its expiry).
        let pulled = match inner.result_linger {
            Some(linger) => queue::take(c, 512, Some(linger)).await,
            None => match queue::take(c, 512, None).await {
                Ok(m) if m.is_empty() => queue::take(c, 1, Some(Duration::from_millis(500))).await,
                other => other,
            },
        };
        let messages = match pulled {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!("pulling results: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        if messages.is_empty() {
            continue;
        }
        let mut requests = Vec::with_capacity(messages.len());
        let mut refused = Vec::new();
        for m in &messages {
            let kind = m.headers.as_ref().and_then(|h| h.get(job::KIND_HEADER));
            if kind.is_some_and(|k| k.as_str() == job::REFUSAL_KIND) {
                match job::decode::<RefusalMessage>("refusal", &m.payload) {
                    Ok(r) => refused.push(r.job.0),
                    Err(e) => tracing::warn!("dropping an undecodable refusal: {e}"),
                }
                continue;
            }
            match job::decode::<ResultMessage>("result", &m.payload) {
                Ok(r) if r.v == job::MESSAGE_VERSION => requests.push(r.request),
                Ok(r) => tracing::warn!("dropping a result of message version {}", r.v),
                Err(e) => tracing::warn!("dropping an undecodable result: {e}"),
            }
        }
        // The message only says which results are there: what counts is what the database
        // holds (the worker stored it before publishing), signed by a trusted worker.
        let read = async {
            inner.accept(inner.store.results_for(&requests).await?);
            inner.fail_refused(&refused).await
        };
        match read.await {
            Ok(()) => {}
            Err(e) => {
                // Not acknowledged: redelivered after the wait, read then.
                tracing::warn!("reading {} results: {e}", requests.len());
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        }
        for m in &messages {
            if let Err(e) = m.ack().await {
                tracing::debug!("acknowledging a result: {e}");
            }
        }
    }
}

/// Answers jobs that have waited a while from the database: a result stored by another run
/// for the same job (whose publish JetStream de-duplicated) reaches this run this way.
async fn poller(inner: Arc<Inner>) {
    let every = inner.poll_interval;
    loop {
        tokio::time::sleep(every).await;
        if inner.permits.is_closed() {
            return;
        }
        let now = Instant::now();
        let (old, jobs): (Vec<String>, Vec<String>) = match inner.waiting.lock() {
            Ok(mut w) => w
                .iter_mut()
                .filter(|(_, w)| w.next_poll <= now)
                .map(|(job, w)| {
                    // Published under its own message: its result comes on the results
                    // stream, so look less and less often. De-duplicated: look every time.
                    if w.sequence.is_some() {
                        w.poll_gap = (w.poll_gap * 2).min(inner.max_poll_interval);
                    }
                    w.next_poll = now + w.poll_gap;
                    (w.request.clone(), job.0.clone())
                })
                .unzip(),
            Err(_) => return,
        };
        if old.is_empty() {
            continue;
        }
        match inner.store.results_for(&old).await {
            Ok(found) => inner.accept(found),
            Err(e) => tracing::debug!("polling results: {e}"),
        }
        // A refusal whose notice was lost on the way.
        if let Err(e) = inner.fail_refused(&jobs).await {
            tracing::debug!("polling refusals: {e}");
        }
    }
}
