//! [`Worker`]: pulls jobs for the device kinds it serves, evaluates each with a local
//! [`JobHandler`], heartbeats while it works, and publishes the result.
//!
//! Workers have a [`WorkerRole`]. A search that sends its jobs to be compiled first
//! ([`crate::DistEvaluatorBuilder::compile_first`]) puts them on the compile subjects: a compile
//! worker (a CPU machine) builds each kernel ([`JobHandler::compile`]), answers at once those
//! that cannot run (a compile error costs no device time), stores the binaries of the others in
//! PostgreSQL by content hash ([`crate::Store::store_build`]) and passes the job, with the
//! search's signature unchanged, on to the execute workers (device machines), which fetch the
//! binary, check its hash and evaluate with it ([`JobHandler::evaluate_built`]). A binary that
//! fails its hash check is never used: the execute worker compiles the kernel itself, and the
//! evaluation's compiler facts say which happened (`binary`). Workers of the default role take
//! only the jobs sent straight to evaluation.
//!
//! A job is acknowledged only after its result is published (and JetStream confirmed it), so a
//! worker that dies at any moment loses nothing: the job goes to another worker after the
//! acknowledgement wait. A job whose deliveries all ended with the worker lost is recorded as a
//! failure on its last delivery instead of being evaluated again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{consumer, AckKind, Message};
use async_trait::async_trait;
use kf_core::{BoxError, Candidate, Evaluation, Evaluator, KernelSource, Status};
use tokio::sync::Semaphore;

use crate::config::{check_token, DistConfig};
use crate::error::{DistError, Result};
use crate::job::{self, Hash, JobMessage, Profile, ResultMessage};
use crate::queue::{self, Queue, Stage};
use crate::security::Refusal;
use crate::store::{BuildRecord, Store, StoredBuild, WorkerReport};

/// Evaluates one job on a worker: the candidate under the run's profile.
///
/// ```
/// use kf_core::prelude::*;
/// use kf_core::{async_trait, BoxError};
/// use kf_dist::{JobHandler, Profile};
///
/// /// Scores kernels by source length, whatever the profile.
/// struct Brevity;
///
/// #[async_trait]
/// impl JobHandler for Brevity {
///     async fn evaluate(&self, _profile: &Profile, c: &Candidate) -> Result<Evaluation, BoxError> {
///         let t = TimingStats::from_samples(&[c.source.text.len() as f64 * 1e-6])
///             .ok_or("no timing")?;
///         Ok(Evaluation::correct(t, None))
///     }
/// }
/// ```
#[async_trait]
pub trait JobHandler: Send + Sync + 'static {
    /// Evaluates `candidate` as `profile` says (task, sizes, protocol…). `Err` is a failure of
    /// the worker itself: the job is handed back to be tried again.
    async fn evaluate(
        &self,
        profile: &Profile,
        candidate: &Candidate,
    ) -> Result<Evaluation, BoxError>;

    /// Builds the candidate for the execute workers of its device kind, without running it
    /// (on a compile worker, [`WorkerRole::Compile`]). `Err` is a failure of the worker itself:
    /// the job is handed back. Default: no binary, the execute worker compiles.
    async fn compile(
        &self,
        _profile: &Profile,
        _candidate: &Candidate,
    ) -> Result<CompileOutcome, BoxError> {
        Ok(CompileOutcome::CompileThere(
            "this worker's handler builds nothing apart from an evaluation".into(),
        ))
    }

    /// Evaluates `candidate` with the `binary` a compile worker built for it (its hash checked
    /// against the one the compile worker recorded). A handler that cannot use the binary
    /// compiles the kernel itself; the compiler facts' `cache_hit` says whether the binary was
    /// loaded. Default: ignores the binary.
    async fn evaluate_built(
        &self,
        profile: &Profile,
        candidate: &Candidate,
        _binary: &Binary,
    ) -> Result<Evaluation, BoxError> {
        self.evaluate(profile, candidate).await
    }

    /// Answers a question a search asked `endpoint` through the queue (on an answer worker,
    /// [`WorkerRole::Answer`]: an LLM worker next to its model server, say). `Ok(Err(why))`
    /// is an answer saying the question could not be answered (a budget spent, a model that
    /// refused); `Err` is a failure of the worker itself: the question is handed back. Default:
    /// this worker answers no questions.
    async fn answer(
        &self,
        endpoint: &str,
        _question: &serde_json::Value,
    ) -> Result<std::result::Result<serde_json::Value, crate::NoAnswer>, BoxError> {
        Err(format!("this worker's handler answers no questions (endpoint {endpoint})").into())
    }

    /// Checks what the profile carries beyond its hash before anything is evaluated under it:
    /// a profile that ships files (a task file, its reference script and kernels) carries
    /// their hashes, and `Err` refuses the job unevaluated ([`Refusal`], recorded in
    /// `kf_refusals` and reported to the search as a failed job) when they do not match.
    /// Called on every job, after the signature check and before the content check
    /// ([`check_job`]), so that a refusal names the file that was altered. Default: nothing
    /// to check.
    fn check_profile(&self, _profile: &Profile) -> Result<(), Refusal> {
        Ok(())
    }

    /// What besides the job decides its result on this worker: the driver version and the
    /// evaluator's version. Stored (hashed) with every result; a search reuses a stored
    /// result only when it was measured in the environment of the device kind's most recently
    /// started worker. Default: nothing (`null`).
    fn environment(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// A shared handler serves as the handler itself, so that its owner can keep a handle (to
/// stop the handler's evaluation processes once the worker is done, say). Every method is
/// forwarded, the defaulted ones included, so that an override on `H` is never lost.
#[async_trait]
impl<H: JobHandler + ?Sized> JobHandler for std::sync::Arc<H> {
    async fn evaluate(
        &self,
        profile: &Profile,
        candidate: &Candidate,
    ) -> Result<Evaluation, BoxError> {
        (**self).evaluate(profile, candidate).await
    }

    async fn compile(
        &self,
        profile: &Profile,
        candidate: &Candidate,
    ) -> Result<CompileOutcome, BoxError> {
        (**self).compile(profile, candidate).await
    }

    async fn evaluate_built(
        &self,
        profile: &Profile,
        candidate: &Candidate,
        binary: &Binary,
    ) -> Result<Evaluation, BoxError> {
        (**self).evaluate_built(profile, candidate, binary).await
    }

    async fn answer(
        &self,
        endpoint: &str,
        question: &serde_json::Value,
    ) -> Result<std::result::Result<serde_json::Value, crate::NoAnswer>, BoxError> {
        (**self).answer(endpoint, question).await
    }

    fn check_profile(&self, profile: &Profile) -> Result<(), Refusal> {
        (**self).check_profile(profile)
    }

    fn environment(&self) -> serde_json::Value {
        (**self).environment()
    }
}

/// A [`JobHandler`] that evaluates every job with one [`Evaluator`], ignoring the profile.
#[derive(Debug, Clone)]
pub struct EvaluatorHandler<E>(pub E);

#[async_trait]
impl<E: Evaluator + 'static> JobHandler for EvaluatorHandler<E> {
    async fn evaluate(&self, _: &Profile, candidate: &Candidate) -> Result<Evaluation, BoxError> {
        self.0
            .evaluate(candidate)
            .await
            .map_err(|e| Box::new(e) as BoxError)
    }
}

/// What a compile worker's handler made of a job ([`JobHandler::compile`]).
#[derive(Debug, Clone, PartialEq)]
pub enum CompileOutcome {
    /// The job's result, known without a device (the kernel does not compile, its manifest or
    /// launch geometry is invalid): answered at once, and no execute worker sees the job.
    Answered(Box<Evaluation>),
    /// The binary the execute worker runs.
    Binary(Binary),
    /// No binary moves to the execute worker, which compiles the kernel itself; why (the
    /// device's binaries do not move between machines, the handler keeps none…).
    CompileThere(String),
}

/// A compiled kernel on its way from a compile worker to an execute worker, stored in
/// PostgreSQL by content hash ([`crate::binary_hash`]).
#[derive(Clone, PartialEq, Eq)]
pub struct Binary {
    /// Its name for the execute worker's handler (a compile-cache file name, for example):
    /// letters, digits, `.`, `-` and `_` only, checked by the worker before it is used.
    pub name: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for Binary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binary")
            .field("name", &self.name)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl Binary {
    /// Whether the name is a plain file name (it comes from the database).
    pub fn has_plain_name(&self) -> bool {
        !self.name.is_empty()
            && self.name.len() <= 200
            && !self.name.starts_with('.')
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    }
}

/// What a worker does with the jobs of its device kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkerRole {
    /// Compiles and runs: takes the jobs searches send straight to evaluation (the default).
    #[default]
    All,
    /// Compiles only (a CPU machine): takes the jobs to compile first, answers those that
    /// cannot run, and passes the others on with their binaries.
    Compile,
    /// Runs (a device machine): takes the jobs compile workers built, with their binaries,
    /// and the jobs searches send straight to evaluation (compiling those itself).
    Execute,
    /// Answers the questions searches ask the endpoints named as its device kinds
    /// ([`crate::Asker`], [`JobHandler::answer`]): an LLM worker next to a model server, which
    /// keeps the server's concurrency limit and budget for every search that asks it.
    Answer,
}

impl WorkerRole {
    /// Every role.
    pub const ALL: [WorkerRole; 4] = [
        WorkerRole::All,
        WorkerRole::Compile,
        WorkerRole::Execute,
        WorkerRole::Answer,
    ];

    /// The name on command lines and in `kf cluster status`: `all`, `compile`, `execute`,
    /// `answer`.
    pub fn name(self) -> &'static str {
        match self {
            WorkerRole::All => "all",
            WorkerRole::Compile => "compile",
            WorkerRole::Execute => "execute",
            WorkerRole::Answer => "answer",
        }
    }

    /// The stages whose jobs it takes, in the order it looks at one priority; the first is
    /// the one it waits on when no job is waiting at all. A worker of the default role takes
    /// only the jobs searches send straight to evaluation, as before roles existed: every
    /// further subject it polled would cost the broker a request per job (measured: 8% of the
    /// throughput at saturation). A search that compiles first needs compile workers, and
    /// execute workers for what they build.
    fn stages(self) -> &'static [Stage] {
        match self {
            WorkerRole::All => &[Stage::Evaluate],
            WorkerRole::Compile => &[Stage::Compile],
            WorkerRole::Execute => &[Stage::Built, Stage::Evaluate],
            WorkerRole::Answer => &[Stage::Ask],
        }
    }
}

impl std::fmt::Display for WorkerRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WorkerRole {
    type Err = DistError;

    fn from_str(s: &str) -> Result<Self> {
        WorkerRole::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                DistError::Config(format!(
                    "unknown worker role '{s}' (all, compile, execute or answer)"
                ))
            })
    }
}

/// What a worker serves and how.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Name in results and logs (default: host and process id).
    pub name: String,
    /// Device kinds whose jobs it takes.
    pub device_kinds: Vec<String>,
    /// Jobs evaluated at once (default 1: one device, one kernel at a time).
    pub jobs: usize,
    /// How long one pull waits for a job when none is waiting.
    pub idle_wait: Duration,
    /// Facts of the worker's device, recorded in the database at start (a search that has no
    /// device of its own describes the device to its mutators with them).
    pub device: Option<serde_json::Value>,
    /// How often it reports to the database that it is alive, with its counters (`kf cluster
    /// status` marks a worker silent for three periods as gone).
    pub heartbeat: Duration,
    /// Give a job's slot back when its evaluation ends, before its result is stored and
    /// published (default true): the device starts the next job while the answer travels.
    /// False holds the slot until the job is acknowledged.
    pub overlap_answers: bool,
    /// What it does with the jobs (default [`WorkerRole::All`]).
    pub role: WorkerRole,
}

impl WorkerConfig {
    /// A worker for one device kind.
    pub fn new(device_kind: impl Into<String>) -> Self {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "worker".into());
        WorkerConfig {
            name: format!("{host}-{}", std::process::id()),
            device_kinds: vec![device_kind.into()],
            jobs: 1,
            idle_wait: Duration::from_millis(250),
            device: None,
            heartbeat: Duration::from_secs(5),
            overlap_answers: true,
            role: WorkerRole::All,
        }
    }
}

/// What a worker did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Jobs evaluated and answered.
    pub evaluated: u64,
    /// Redelivered jobs found already answered (not evaluated again).
    pub already_done: u64,
    /// Jobs recorded as failed after their deliveries ran out.
    pub poisoned: u64,
    /// Jobs handed back because the handler failed.
    pub handed_back: u64,
    /// Jobs refused unevaluated: unsigned, signed by an untrusted key, altered after signing.
    pub refused: u64,
    /// Jobs compiled and passed on to the execute workers (a compile worker's).
    pub compiled: u64,
}

#[derive(Default)]
struct Counters {
    evaluated: AtomicU64,
    already_done: AtomicU64,
    poisoned: AtomicU64,
    handed_back: AtomicU64,
    refused: AtomicU64,
    compiled: AtomicU64,
    /// Jobs being processed now.
    in_flight: AtomicU64,
}

impl Counters {
    /// The counts so far, as [`Worker::run`] returns them.
    fn stats(&self) -> WorkerStats {
        WorkerStats {
            evaluated: self.evaluated.load(Ordering::Relaxed),
            already_done: self.already_done.load(Ordering::Relaxed),
            poisoned: self.poisoned.load(Ordering::Relaxed),
            handed_back: self.handed_back.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            compiled: self.compiled.load(Ordering::Relaxed),
        }
    }
}

/// Reports to the database every `every` that the worker `name` is alive, with its counters,
/// until the returned task is aborted.
fn spawn_heartbeat<H: JobHandler>(
    shared: Arc<Shared<H>>,
    name: String,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    let store = shared.store.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            if let Err(e) = store.heartbeat(&name, &shared.report(), false).await {
                tracing::debug!("heartbeat: {e}");
            }
        }
    })
}

/// A worker process's main loop.
pub struct Worker<H> {
    dist: DistConfig,
    config: WorkerConfig,
    handler: Arc<H>,
}

impl<H: JobHandler> Worker<H> {
    /// A worker with the deployment's settings, its own, and a handler.
    pub fn new(dist: DistConfig, config: WorkerConfig, handler: H) -> Self {
        Worker {
            dist,
            config,
            handler: Arc::new(handler),
        }
    }

    /// Runs until `stop` completes, then finishes the jobs in hand. Must run on a tokio
    /// runtime; see [`Worker::run_blocking`] otherwise.
    pub async fn run(mut self, stop: impl Future<Output = ()> + Send) -> Result<WorkerStats> {
        self.dist.validate()?;
        self.dist = self.dist.with_security_loaded()?;
        self.check_settings()?;
        self.dist
            .security
            .check_signatures(crate::security::Role::Worker)?;
        let queue = Queue::connect(&self.dist, &format!("kf-worker-{}", self.config.name)).await?;
        let store = Store::connect(&self.dist.database_url, &self.dist.security).await?;
        let environment = Profile::from_value(self.handler.environment()).hash.0;
        self.register(&store, &environment).await?;
        let consumers = self.pull_consumers(&queue).await?;
        let role = self.config.role;
        let shared = Arc::new(Shared {
            dist: self.dist.clone(),
            name: self.config.name.clone(),
            handler: self.handler.clone(),
            queue,
            store,
            kernels: HashCache::new(),
            profiles: HashCache::new(),
            counters: Counters::default(),
            environment,
            overlap_answers: self.config.overlap_answers,
            role,
        });
        let heartbeat = spawn_heartbeat(
            shared.clone(),
            self.config.name.clone(),
            self.config.heartbeat,
        );
        tracing::info!(worker = %self.config.name, kinds = ?self.config.device_kinds, role = %role, "worker started");
        self.serve(&shared, &consumers, stop).await;
        heartbeat.abort();
        if let Err(e) = shared
            .store
            .heartbeat(&self.config.name, &shared.report(), true)
            .await
        {
            tracing::warn!("recording the worker's stop: {e}");
        }
        Ok(shared.counters.stats())
    }

    /// Refuses settings a worker cannot run with: no device kind (or one unfit for a subject),
    /// a heartbeat too short to be useful, no job slot.
    fn check_settings(&self) -> Result<()> {
        if self.config.device_kinds.is_empty() {
            return Err(DistError::Config(
                "a worker needs at least one device kind".into(),
            ));
        }
        for kind in &self.config.device_kinds {
            check_token("device kind", kind)?;
        }
        if self.config.heartbeat < Duration::from_millis(100) {
            return Err(DistError::Config(format!(
                "a worker's heartbeat period {:?} is too short (at least 100 ms)",
                self.config.heartbeat
            )));
        }
        if self.config.jobs == 0 {
            return Err(DistError::Config(
                "a worker needs at least one job slot".into(),
            ));
        }
        Ok(())
    }

    /// Records the worker in the database once per device kind it serves, so that `kf cluster
    /// status` and the searches (device facts, environment) see it.
    async fn register(&self, store: &Store, environment: &str) -> Result<()> {
        for kind in &self.config.device_kinds {
            store
                .register_worker(
                    &self.config.name,
                    kind,
                    self.config.device.as_ref(),
                    environment,
                    self.config.heartbeat,
                    self.config.role.name(),
                )
                .await?;
        }
        Ok(())
    }

    /// The pull consumers of every device kind and stage the role serves, highest priority
    /// first over every device kind; at one priority, in the role's order of stages.
    async fn pull_consumers(&self, queue: &Queue) -> Result<Vec<Pull>> {
        let mut consumers = Vec::new();
        for kind in &self.config.device_kinds {
            for stage in self.config.role.stages() {
                for (p, c) in queue
                    .work_consumers(kind, *stage)
                    .await?
                    .into_iter()
                    .enumerate()
                {
                    consumers.push(Pull {
                        priority: p,
                        stage: *stage,
                        consumer: c,
                    });
                }
            }
        }
        consumers.sort_by_key(|c| c.priority);
        Ok(consumers)
    }

    /// The main loop: takes a job whenever a slot is free and processes it on a task of its
    /// own, until `stop` completes; then waits for the jobs in hand.
    async fn serve(
        &self,
        shared: &Arc<Shared<H>>,
        consumers: &[Pull],
        stop: impl Future<Output = ()> + Send,
    ) {
        let slots = Arc::new(Semaphore::new(self.config.jobs));
        // The stage it waits on when nothing waits: the one that gave it its last job.
        let mut waiting_stage = self.config.role.stages()[0];
        let mut tasks = tokio::task::JoinSet::new();
        tokio::pin!(stop);
        loop {
            let permit = tokio::select! {
                _ = &mut stop => break,
                p = slots.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let message = tokio::select! {
                _ = &mut stop => break,
                m = next_job(consumers, self.config.idle_wait, &mut waiting_stage) => m,
            };
            // Reap finished tasks so the set does not grow.
            while tasks.try_join_next().is_some() {}
            if let Some(message) = message {
                let shared = shared.clone();
                tasks.spawn(async move {
                    shared.counters.in_flight.fetch_add(1, Ordering::Relaxed);
                    shared.process(message, permit).await;
                    shared.counters.in_flight.fetch_sub(1, Ordering::Relaxed);
                });
            }
        }
        while tasks.join_next().await.is_some() {}
    }

    /// [`Worker::run`] on a runtime of its own.
    pub fn run_blocking(self, stop: impl Future<Output = ()> + Send) -> Result<WorkerStats> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kf-worker")
            .enable_all()
            .build()
            .map_err(DistError::Runtime)?;
        rt.block_on(self.run(stop))
    }
}

/// One pull consumer of a worker: a stage's jobs of one priority.
struct Pull {
    priority: usize,
    stage: Stage,
    consumer: consumer::Consumer<consumer::pull::Config>,
}

/// The next job: a waiting one of the highest priority, else the first to arrive within
/// `wait` on the normal priority of `stage` (which becomes the stage of the job taken).
/// `None` when none came (or the server is away).
async fn next_job(consumers: &[Pull], wait: Duration, stage: &mut Stage) -> Option<Message> {
    for c in consumers {
        match queue::take(&c.consumer, 1, None).await {
            Ok(mut m) if !m.is_empty() => {
                *stage = c.stage;
                return m.pop();
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!("pulling jobs: {e}");
                tokio::time::sleep(wait).await;
                return None;
            }
        }
    }
    let normal = consumers
        .iter()
        .find(|c| c.priority == 1 && c.stage == *stage)
        .or(consumers.first())?;
    match queue::take(&normal.consumer, 1, Some(wait)).await {
        Ok(mut m) => m.pop(),
        Err(e) => {
            tracing::debug!("pulling jobs: {e}");
            tokio::time::sleep(wait).await;
            None
        }
    }
}

struct Shared<H> {
    dist: DistConfig,
    name: String,
    handler: Arc<H>,
    queue: Queue,
    store: Store,
    kernels: HashCache<KernelSource>,
    profiles: HashCache<Profile>,
    counters: Counters,
    /// Hash of the handler's environment, stored with every result.
    environment: String,
    /// [`WorkerConfig::overlap_answers`].
    overlap_answers: bool,
    role: WorkerRole,
}

/// What an execute worker received for a job a compile worker passed on.
struct Built {
    /// The binary, when it passed its hash check.
    binary: Option<Binary>,
    /// Which binary, or why none is used.
    note: String,
}

impl Built {
    fn not_used(note: String) -> Self {
        Built { binary: None, note }
    }

    /// Says in the evaluation's compiler facts (`binary`) whether the compile worker's binary
    /// ran or the kernel was compiled here, and why.
    fn annotate(&self, evaluation: &mut Evaluation) {
        let text = match (&self.binary, evaluation.compiler.cache_hit) {
            (Some(_), true) => format!("shipped: {}", self.note),
            (Some(_), false) => format!(
                "compiled on the execute worker: {} was not loaded here (another device or \
                 driver, or no compile cache folder of its own)",
                self.note
            ),
            (None, _) => format!("compiled on the execute worker: {}", self.note),
        };
        evaluation.compiler.extra.insert("binary".into(), text);
    }
}

/// Values fetched from the database by hash, kept in memory up to [`CACHE_LIMIT`] entries
/// (then the cache starts over: content-addressed values never go stale).
struct HashCache<T>(Mutex<HashMap<Hash, T>>);

impl<T: Clone> HashCache<T> {
    fn new() -> Self {
        HashCache(Mutex::new(HashMap::new()))
    }

    fn get(&self, hash: &Hash) -> Option<T> {
        self.0.lock().ok().and_then(|m| m.get(hash).cloned())
    }

    fn put(&self, hash: &Hash, value: &T) {
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= CACHE_LIMIT {
                m.clear();
            }
            m.insert(hash.clone(), value.clone());
        }
    }
}

/// Kernels and profiles kept in memory at most (then the cache starts over).
const CACHE_LIMIT: usize = 4096;

/// Whether the kernel and profile fetched by hash are the ones the job names, and the job id
/// is the hash of the job's content on the device kind of the subject it came on
/// (`<namespace>.eval.<device kind>.p<priority>`): what a worker checks, after the job's
/// signature, before it evaluates a job; [`Refusal::Inconsistent`] says which part does not
/// match.
pub fn check_job(
    job: &JobMessage,
    source: &KernelSource,
    profile: &Profile,
    subject: &str,
) -> Result<(), Refusal> {
    let bad = |what: &str| Err(Refusal::Inconsistent(what.to_string()));
    match job::kernel_hash(source) {
        Ok(h) if h == job.kernel => {}
        _ => return bad("the kernel does not hash to the job's kernel hash"),
    }
    if profile.hash != job.profile {
        return bad("the profile does not hash to the job's profile hash");
    }
    // `<namespace>.eval.<device kind>.p<priority>`
    let kind = subject.rsplit('.').nth(1).unwrap_or("");
    match job::job_id(&job.kernel, &job.params, &job.profile, kind) {
        Ok(id) if id == job.job => {}
        _ => return bad("the job id is not the hash of the job's content"),
    }
    if job.request != job.job.0 && !job.request.starts_with(&format!("{}-", job.job)) {
        return bad("the request is not one of the job's");
    }
    Ok(())
}

/// What the handler's evaluation on a blocking thread came to: the thread's own failure (a
/// panic) outside, the handler's inside.
type HandlerOutcome =
    std::result::Result<std::result::Result<Evaluation, BoxError>, tokio::task::JoinError>;

/// The job `message` carries, or `None` when it is undecodable or of another message version
/// (then terminated: no worker could read it either).
async fn decode_job(message: &Message) -> Option<JobMessage> {
    match job::decode::<JobMessage>("job", &message.payload) {
        Ok(j) if j.v == job::MESSAGE_VERSION => Some(j),
        Ok(j) => {
            tracing::warn!("job of message version {} refused", j.v);
            let _ = message.ack_with(AckKind::Term).await;
            None
        }
        Err(e) => {
            tracing::warn!("undecodable job refused: {e}");
            let _ = message.ack_with(AckKind::Term).await;
            None
        }
    }
}

impl<H: JobHandler> Shared<H> {
    /// The heartbeat's report.
    fn report(&self) -> WorkerReport {
        let c = &self.counters;
        WorkerReport {
            in_flight: c.in_flight.load(Ordering::Relaxed) as usize,
            evaluated: c.evaluated.load(Ordering::Relaxed),
            handed_back: c.handed_back.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            poisoned: c.poisoned.load(Ordering::Relaxed),
            compiled: c.compiled.load(Ordering::Relaxed),
        }
    }

    /// Processes one job; `slot` is its evaluation slot, given back as soon as the device is
    /// free (see [`WorkerConfig::overlap_answers`]).
    async fn process(&self, message: Message, slot: tokio::sync::OwnedSemaphorePermit) {
        let delivery = message
            .info()
            .map(|i| i.delivered.max(1) as u32)
            .unwrap_or(1);
        if self.came_on(&message, "ask") {
            self.process_question(message, delivery).await;
            drop(slot);
            return;
        }
        let Some(job) = decode_job(&message).await else {
            return;
        };
        // Before anything else: a job no trusted search signed is never evaluated.
        if let Err(refusal) = self.check_signature(&message) {
            self.refuse(&message, &job, refusal).await;
            return;
        }
        let started = Instant::now();
        if delivery > self.dist.max_attempts {
            self.record_poison(&message, &job, delivery, started).await;
            return;
        }
        if self.settled_before(&message, &job, delivery).await {
            return;
        }
        let Some((source, profile)) = self.checked_inputs(&message, &job).await else {
            return;
        };
        // A job sent to be compiled first is compiled and passed on by a compile worker; a
        // worker of the default role does everything itself.
        let compiles_here = self.role == WorkerRole::Compile && self.came_on(&message, "compile");
        let candidate = job.candidate(source);
        let heartbeat = self.keep_in_progress(&message);
        if compiles_here {
            self.compile_and_pass_on(&message, &job, profile, candidate, delivery, started)
                .await;
            heartbeat.abort();
            return;
        }
        // A job a compile worker passed on: the binary it built, checked against its hash.
        let built = match self.built_binary(&message, &job).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(job = %job.job, "cannot read the job's build: {e}");
                self.hand_back(&message).await;
                heartbeat.abort();
                return;
            }
        };
        let outcome = self
            .evaluate_off_thread(built.as_ref(), profile, candidate)
            .await;
        if self.overlap_answers {
            // The device is free: the next job may start while this one's result is stored
            // and published. Should this worker die before the answer is through, the job is
            // not acknowledged and goes to another worker, as for a death mid-evaluation.
            drop(slot);
        }
        self.settle(&message, &job, built.as_ref(), outcome, delivery, started)
            .await;
        // Until the result is published, the job's message stays with this worker.
        heartbeat.abort();
    }

    /// Whether `message` came on one of the namespace's `stage` subjects
    /// (`<namespace>.<stage>.…`: `ask`, `compile`, `built`).
    fn came_on(&self, message: &Message, stage: &str) -> bool {
        message
            .subject
            .as_str()
            .starts_with(&format!("{}.{stage}.", self.dist.namespace))
    }

    /// Records a job whose deliveries all ended with its worker lost as failed, instead of
    /// evaluating it again (it may be what kills the workers).
    async fn record_poison(
        &self,
        message: &Message,
        job: &JobMessage,
        delivery: u32,
        started: Instant,
    ) {
        let evaluation = Evaluation::failed(
            Status::RuntimeError,
            format!(
                "poison job: its {} deliveries ended without a result (the workers that \
                 took it crashed, were killed or handed it back); recorded as failed \
                 instead of evaluated again",
                delivery - 1
            ),
        );
        tracing::warn!(job = %job.job, "recording a poison job as failed");
        if self
            .answer(message, job, evaluation, delivery, started)
            .await
        {
            self.counters.poisoned.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether a redelivered job (or a built job passed on again) was already dealt with by an
    /// earlier worker: its result stored (acknowledged here), or, on a compile worker, its
    /// build stored (passed on without building it again). True when nothing is left to do.
    async fn settled_before(&self, message: &Message, job: &JobMessage, delivery: u32) -> bool {
        // A redelivery, or a built job passed on again: answered once only.
        if delivery <= 1 && !self.came_on(message, "built") {
            return false;
        }
        // A redelivery: the earlier worker may have published before it died.
        if let Ok(true) = self.store.has_result(&job.request).await {
            let _ = message.double_ack().await;
            self.counters.already_done.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        // A compile worker may have stored the build before it died: pass the job on without
        // building it again (a second pass is dropped by the stream's de-duplication).
        let compile_job = self.role == WorkerRole::Compile && self.came_on(message, "compile");
        if compile_job {
            if let Ok(Some(_)) = self.store.build(&job.request).await {
                if self.pass_on(message, job).await {
                    self.counters.already_done.fetch_add(1, Ordering::Relaxed);
                }
                return true;
            }
        }
        false
    }

    /// The job's kernel and profile, fetched by hash and checked: the files the profile ships
    /// must be the ones the search hashed (the refusal names the file), then the content
    /// must match the hashes the signature covers. `None` when the job was handed back
    /// (the inputs could not be fetched) or refused.
    async fn checked_inputs(
        &self,
        message: &Message,
        job: &JobMessage,
    ) -> Option<(KernelSource, Profile)> {
        let inputs = async {
            let source = self.kernel(&job.kernel).await?;
            let profile = self.profile(&job.profile).await?;
            Ok::<_, DistError>((source, profile))
        };
        let (source, profile) = match inputs.await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(job = %job.job, "cannot fetch the job's inputs: {e}");
                self.hand_back(message).await;
                return None;
            }
        };
        let checked = self
            .handler
            .check_profile(&profile)
            .and_then(|()| check_job(job, &source, &profile, message.subject.as_str()));
        if let Err(refusal) = checked {
            self.refuse(message, job, refusal).await;
            return None;
        }
        Some((source, profile))
    }

    /// Evaluates the candidate with the handler (with the compile worker's binary, when one
    /// passed its checks) on a blocking thread: evaluators may block (pipes to worker
    /// processes, device waits), and the heartbeat must keep going meanwhile.
    async fn evaluate_off_thread(
        &self,
        built: Option<&Built>,
        profile: Profile,
        candidate: Candidate,
    ) -> HandlerOutcome {
        let handler = self.handler.clone();
        let binary = built.and_then(|b| b.binary.clone());
        tokio::task::spawn_blocking(move || {
            futures::executor::block_on(async {
                match &binary {
                    Some(binary) => handler.evaluate_built(&profile, &candidate, binary).await,
                    None => handler.evaluate(&profile, &candidate).await,
                }
            })
        })
        .await
    }

    /// Answers the job with its evaluation, or hands it back when the handler failed or
    /// panicked (a failure of this worker, not of the kernel).
    async fn settle(
        &self,
        message: &Message,
        job: &JobMessage,
        built: Option<&Built>,
        outcome: HandlerOutcome,
        delivery: u32,
        started: Instant,
    ) {
        match outcome {
            Ok(Ok(mut evaluation)) => {
                if let Some(built) = built {
                    built.annotate(&mut evaluation);
                }
                if self
                    .answer(message, job, evaluation, delivery, started)
                    .await
                {
                    self.counters.evaluated.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(job = %job.job, "evaluation failed on this worker: {e}");
                self.hand_back(message).await;
            }
            Err(e) => {
                tracing::warn!(job = %job.job, "evaluation panicked on this worker: {e}");
                self.hand_back(message).await;
            }
        }
    }

    /// Tells JetStream every heartbeat period that `message` is still being worked on, until
    /// the returned task is aborted.
    fn keep_in_progress(&self, message: &Message) -> tokio::task::JoinHandle<()> {
        let message = message.clone();
        let every = self.dist.heartbeat();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = message.ack_with(AckKind::Progress).await {
                    tracing::debug!("heartbeat: {e}");
                }
            }
        })
    }

    /// Answers one question: signature first, then the handler on a blocking thread with
    /// heartbeats; the signed answer is stored before the question is acknowledged. A question
    /// whose deliveries all ended with the worker lost is answered with that.
    async fn process_question(&self, message: Message, delivery: u32) {
        let question = match job::decode::<crate::AskMessage>("question", &message.payload) {
            Ok(q) if q.v == job::MESSAGE_VERSION => q,
            _ => {
                tracing::warn!("undecodable question refused");
                let _ = message.ack_with(AckKind::Term).await;
                return;
            }
        };
        // The endpoint asked is the one of the subject it came on.
        let endpoint = message.subject.as_str().rsplit('.').next().unwrap_or("");
        let refused = match self.check_signature(&message) {
            Err(refusal) => Some(refusal.to_string()),
            Ok(()) if question.endpoint != endpoint => Some(format!(
                "a question for {} on {endpoint}'s subject",
                question.endpoint
            )),
            Ok(()) => None,
        };
        if let Some(why) = refused {
            // Answered with the refusal, so that the asker stops waiting now.
            tracing::warn!(request = %question.request, run = %question.run, "question refused, not answered: {why}");
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            let answer = Err(crate::NoAnswer(format!("refused by {}: {why}", self.name)));
            self.store_answer(&message, &question, endpoint, answer, Instant::now())
                .await;
            let _ = message.ack_with(AckKind::Term).await;
            return;
        }
        if let Ok(Some(_)) = self.store.answer(&question.request).await {
            let _ = message.double_ack().await;
            self.counters.already_done.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let started = Instant::now();
        let answer = if delivery > self.dist.max_attempts {
            self.counters.poisoned.fetch_add(1, Ordering::Relaxed);
            Err(crate::NoAnswer(format!(
                "poison question: its {} deliveries ended without an answer (the workers that \
                 took it crashed or were killed)",
                delivery - 1
            )))
        } else {
            let heartbeat = self.keep_in_progress(&message);
            let handler = self.handler.clone();
            let (endpoint, q) = (endpoint.to_owned(), question.question.clone());
            let outcome = tokio::task::spawn_blocking(move || {
                futures::executor::block_on(handler.answer(&endpoint, &q))
            })
            .await;
            heartbeat.abort();
            match outcome {
                Ok(Ok(answer)) => answer,
                Ok(Err(e)) => {
                    tracing::warn!(request = %question.request, "answering failed on this worker: {e}");
                    self.hand_back(&message).await;
                    return;
                }
                Err(e) => {
                    tracing::warn!(request = %question.request, "answering panicked on this worker: {e}");
                    self.hand_back(&message).await;
                    return;
                }
            }
        };
        if self
            .store_answer(&message, &question, endpoint, answer, started)
            .await
        {
            self.counters.evaluated.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = message.ack().await {
                tracing::debug!(request = %question.request, "acknowledging: {e}");
            }
        }
    }

    /// Signs and stores an answer; hands the question back (false) when that fails.
    async fn store_answer(
        &self,
        message: &Message,
        question: &crate::AskMessage,
        endpoint: &str,
        answer: std::result::Result<serde_json::Value, crate::NoAnswer>,
        started: Instant,
    ) -> bool {
        let key = self.dist.security.signing_key.as_ref();
        let signed = crate::AnswerMessage {
            v: job::MESSAGE_VERSION,
            request: question.request.clone(),
            run: question.run.clone(),
            answer: answer.map_err(|why| why.0),
            worker: self.name.clone(),
            worker_key: key.map(|k| k.id().to_string()).unwrap_or_default(),
            seconds: started.elapsed().as_secs_f64(),
        };
        let Ok(text) = serde_json::to_string(&signed) else {
            self.hand_back(message).await;
            return false;
        };
        let signature = key.map(|k| k.sign(text.as_bytes())).unwrap_or_default();
        if let Err(e) = self
            .store
            .store_answer(&signed, endpoint, &text, &signature)
            .await
        {
            tracing::warn!(request = %question.request, "cannot store the answer: {e}");
            self.hand_back(message).await;
            return false;
        }
        true
    }

    /// On a compile worker: builds the job's kernel, answers it at once when it cannot run,
    /// else stores the binary and the build and passes the job on to the execute workers.
    async fn compile_and_pass_on(
        &self,
        message: &Message,
        job: &JobMessage,
        profile: Profile,
        candidate: Candidate,
        delivery: u32,
        started: Instant,
    ) {
        let handler = self.handler.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            futures::executor::block_on(handler.compile(&profile, &candidate))
        })
        .await;
        let outcome = match outcome {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => {
                tracing::warn!(job = %job.job, "compilation failed on this worker: {e}");
                self.hand_back(message).await;
                return;
            }
            Err(e) => {
                tracing::warn!(job = %job.job, "compilation panicked on this worker: {e}");
                self.hand_back(message).await;
                return;
            }
        };
        let key = self.dist.security.signing_key.as_ref();
        let mut record = BuildRecord {
            request: job.request.clone(),
            job: job.job.clone(),
            binary: None,
            name: String::new(),
            worker: self.name.clone(),
            environment: self.environment.clone(),
            note: String::new(),
            seconds: started.elapsed().as_secs_f64(),
            worker_key: key.map(|k| k.id().to_string()).unwrap_or_default(),
        };
        // Signed, so that an execute worker runs only binaries a trusted worker built.
        let sign = |record: &BuildRecord| -> Result<(String, String)> {
            let signed =
                serde_json::to_string(record).map_err(|e| DistError::decode("build", e))?;
            let signature = key.map(|k| k.sign(signed.as_bytes())).unwrap_or_default();
            Ok((signed, signature))
        };
        let stored = match outcome {
            CompileOutcome::Answered(evaluation) => {
                if self
                    .answer(message, job, *evaluation, delivery, started)
                    .await
                {
                    self.counters.evaluated.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            CompileOutcome::Binary(binary) => {
                if !binary.has_plain_name() {
                    tracing::warn!(job = %job.job, name = %binary.name, "a binary's name must be a plain file name");
                    self.hand_back(message).await;
                    return;
                }
                record.binary = Some(job::binary_hash(&binary.bytes));
                record.name = binary.name;
                match sign(&record) {
                    Ok((signed, signature)) => {
                        self.store
                            .store_build(&record, &signed, &signature, Some(&binary.bytes))
                            .await
                    }
                    Err(e) => Err(e),
                }
            }
            CompileOutcome::CompileThere(note) => {
                record.note = note;
                match sign(&record) {
                    Ok((signed, signature)) => {
                        self.store
                            .store_build(&record, &signed, &signature, None)
                            .await
                    }
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(e) = stored {
            tracing::warn!(job = %job.job, "cannot store the build: {e}");
            self.hand_back(message).await;
            return;
        }
        if self.pass_on(message, job).await {
            self.counters.compiled.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Passes a compiled job on to the execute workers: the search's message and signature,
    /// byte for byte, on the built-jobs subject of the same device kind and priority; then
    /// acknowledges it here. True when both went through.
    async fn pass_on(&self, message: &Message, job: &JobMessage) -> bool {
        // `<namespace>.compile.<device kind>.p<priority>`
        let mut tokens = message.subject.as_str().rsplit('.');
        let priority = tokens
            .next()
            .and_then(|p| p.strip_prefix('p'))
            .and_then(|p| p.parse::<u8>().ok());
        let (Some(priority), Some(kind)) = (priority, tokens.next()) else {
            tracing::warn!(subject = %message.subject, "a compile job on a subject of another shape");
            let _ = message.ack_with(AckKind::Term).await;
            return false;
        };
        let mut headers = vec![(job::COMPILED_BY_HEADER, self.name.clone())];
        for name in [job::SIGNER_HEADER, job::SIGNATURE_HEADER] {
            if let Some(v) = message.headers.as_ref().and_then(|h| h.get(name)) {
                headers.push((name, v.as_str().to_string()));
            }
        }
        // Its own message id: the search's (the request) is taken in this stream.
        let id = format!("compiled-{}", job.request);
        let subject = self.dist.built_subject(kind, priority);
        if let Err(e) = self
            .queue
            .publish(&subject, &id, message.payload.to_vec(), &headers)
            .await
        {
            tracing::warn!(job = %job.job, "cannot pass the job on: {e}");
            self.hand_back(message).await;
            return false;
        }
        if let Err(e) = message.ack().await {
            tracing::debug!(job = %job.job, "acknowledging: {e}");
        }
        true
    }

    /// The build a compile worker recorded for a job it passed on (on a built-jobs subject;
    /// `None` for a job that came straight from a search), with its binary when the stored bytes match the recorded hash.
    async fn built_binary(&self, message: &Message, job: &JobMessage) -> Result<Option<Built>> {
        if !self.came_on(message, "built") {
            return Ok(None);
        }
        let Some(stored) = self.store.build(&job.request).await? else {
            return Ok(Some(Built::not_used(
                "no build is recorded for the job".into(),
            )));
        };
        let StoredBuild {
            record,
            signed,
            signature,
            bytes,
        } = stored;
        // Only a record a trusted worker signed, for this very job, names a binary to run:
        // the worker key this worker signs its own results with (the deployment's worker key).
        if let Some(key) = &self.dist.security.signing_key {
            if let Err(refusal) =
                key.public()
                    .verify(&record.worker_key, signed.as_bytes(), &signature)
            {
                tracing::warn!(job = %job.job, "a build record not signed by a trusted worker: {refusal}");
                return Ok(Some(Built::not_used(format!(
                    "the build record is not signed by a trusted worker ({refusal}); it was not used"
                ))));
            }
        }
        if record.request != job.request || record.job != job.job {
            return Ok(Some(Built::not_used(
                "the build record names another job; it was not used".into(),
            )));
        }
        let Some(hash) = &record.binary else {
            return Ok(Some(Built::not_used(format!(
                "{} built no binary for it: {}",
                record.worker, record.note
            ))));
        };
        let Some(bytes) = bytes else {
            return Ok(Some(Built::not_used(format!(
                "the binary {hash} {} built is missing from storage",
                record.worker
            ))));
        };
        if job::binary_hash(&bytes) != *hash {
            tracing::warn!(job = %job.job, binary = %hash, "a stored binary failed its hash check; compiling here");
            return Ok(Some(Built::not_used(format!(
                "the stored binary {hash} {} built failed its hash check (it was not used)",
                record.worker
            ))));
        }
        let binary = Binary {
            name: record.name.clone(),
            bytes,
        };
        if !binary.has_plain_name() {
            return Ok(Some(Built::not_used(format!(
                "the binary {hash} has an unusable name"
            ))));
        }
        Ok(Some(Built {
            binary: Some(binary),
            note: format!("{hash} built by {}", record.worker),
        }))
    }

    /// Publishes the result, then acknowledges the job. True when both went through.
    async fn answer(
        &self,
        message: &Message,
        job: &JobMessage,
        mut evaluation: Evaluation,
        delivery: u32,
        started: Instant,
    ) -> bool {
        // The run directory records which worker evaluated what (the explorer shows it).
        evaluation.worker.get_or_insert_with(|| self.name.clone());
        let key = self.dist.security.signing_key.as_ref();
        let result = ResultMessage {
            v: job::MESSAGE_VERSION,
            job: job.job.clone(),
            request: job.request.clone(),
            run: job.run.clone(),
            evaluation,
            worker: self.name.clone(),
            worker_key: key.map(|k| k.id().to_string()).unwrap_or_default(),
            environment: self.environment.clone(),
            delivery,
            seconds: started.elapsed().as_secs_f64(),
        };
        let signed = match serde_json::to_string(&result) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("cannot encode a result: {e}");
                self.hand_back(message).await;
                return false;
            }
        };
        let signature = key.map(|k| k.sign(signed.as_bytes())).unwrap_or_default();
        // Stored first: the search reads results from the database only, so it never sees one
        // the database does not hold.
        if let Err(e) = self.store.store_result(&result, &signed, &signature).await {
            tracing::warn!(job = %job.job, "cannot store the result: {e}");
            self.hand_back(message).await;
            return false;
        }
        let subject = self.dist.result_subject(&job.run);
        let headers = [
            (job::SIGNER_HEADER, result.worker_key.clone()),
            (job::SIGNATURE_HEADER, signature),
        ];
        if let Err(e) = self
            .queue
            .publish(&subject, &job.request, signed.into_bytes(), &headers)
            .await
        {
            tracing::warn!(job = %job.job, "cannot publish the result: {e}");
            self.hand_back(message).await;
            return false;
        }
        // If this acknowledgement is lost, the job comes back and the redelivery check (or the
        // results stream's de-duplication, or the database's key) absorbs it.
        if let Err(e) = message.ack().await {
            tracing::debug!(job = %job.job, "acknowledging: {e}");
        }
        true
    }

    /// Whether a trusted search signed the message's exact bytes (always, when the worker
    /// trusts no keys: an insecure deployment).
    fn check_signature(&self, message: &Message) -> Result<(), Refusal> {
        let Some(trusted) = &self.dist.security.trusted_keys else {
            return Ok(());
        };
        let header = |name: &str| {
            message
                .headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.as_str().to_string())
                .unwrap_or_default()
        };
        trusted.verify(
            &header(job::SIGNER_HEADER),
            &message.payload,
            &header(job::SIGNATURE_HEADER),
        )
    }

    /// Refuses a job for good: logged, recorded in the database, terminated on the queue.
    async fn refuse(&self, message: &Message, job: &JobMessage, refusal: Refusal) {
        let signer = message
            .headers
            .as_ref()
            .and_then(|h| h.get(job::SIGNER_HEADER))
            .map(|v| v.as_str().to_string())
            .unwrap_or_default();
        tracing::warn!(job = %job.job, run = %job.run, signer = %signer, "job refused, not evaluated: {refusal}");
        self.counters.refused.fetch_add(1, Ordering::Relaxed);
        match self
            .store
            .record_refusal(&self.name, job, &signer, &refusal)
            .await
        {
            Ok(()) => self.notify_refusal(job).await,
            Err(e) => tracing::warn!("recording the refusal: {e}"),
        }
        let _ = message.ack_with(AckKind::Term).await;
    }

    /// Tells the run that named the job that it was refused, so that its search fails the job
    /// now instead of at its result timeout. Best effort: the search also finds the refusal in
    /// the database when it polls.
    async fn notify_refusal(&self, job: &JobMessage) {
        // The run id comes from a message nobody vouched for: only a plain token names a
        // subject.
        if check_token("run id", &job.run).is_err() {
            return;
        }
        let notice = job::RefusalMessage {
            v: job::MESSAGE_VERSION,
            job: job.job.clone(),
            request: job.request.clone(),
            run: job.run.clone(),
            worker: self.name.clone(),
        };
        let Ok(payload) = job::encode("refusal", &notice) else {
            return;
        };
        // Its own message id: the result's (the request) must stay free for a real result.
        let id = format!("refused-{}-{}", job.request, self.name);
        let headers = [(job::KIND_HEADER, job::REFUSAL_KIND.to_string())];
        let subject = self.dist.result_subject(&job.run);
        let publish = self.queue.publish(&subject, &id, payload, &headers);
        // Not for as long as a result is retried: the slot is wanted for the next job.
        match tokio::time::timeout(Duration::from_secs(10), publish).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(job = %job.job, "telling the run about the refusal: {e}"),
            Err(_) => tracing::warn!(job = %job.job, "telling the run about the refusal timed out"),
        }
    }

    async fn hand_back(&self, message: &Message) {
        self.counters.handed_back.fetch_add(1, Ordering::Relaxed);
        let _ = message
            .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
            .await;
    }

    async fn kernel(&self, hash: &Hash) -> Result<KernelSource> {
        if let Some(k) = self.kernels.get(hash) {
            return Ok(k);
        }
        let k = self.store.kernel(hash).await?;
        self.kernels.put(hash, &k);
        Ok(k)
    }

    async fn profile(&self, hash: &Hash) -> Result<Profile> {
        if let Some(p) = self.profiles.get(hash) {
            return Ok(p);
        }
        let p = self.store.profile(hash).await?;
        self.profiles.put(hash, &p);
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Overrides the defaulted methods, so that a forwarder that skipped one would show it.
    struct Answering;

    #[async_trait]
    impl JobHandler for Answering {
        async fn evaluate(&self, _: &Profile, _: &Candidate) -> Result<Evaluation, BoxError> {
            Err("not evaluated here".into())
        }

        async fn answer(
            &self,
            endpoint: &str,
            question: &serde_json::Value,
        ) -> Result<std::result::Result<serde_json::Value, crate::NoAnswer>, BoxError> {
            Ok(Ok(
                serde_json::json!({ "endpoint": endpoint, "echo": question }),
            ))
        }

        fn check_profile(&self, profile: &Profile) -> Result<(), Refusal> {
            match profile.value.get("refuse") {
                Some(_) => Err(Refusal::Inconsistent("refused by the test handler".into())),
                None => Ok(()),
            }
        }

        fn environment(&self) -> serde_json::Value {
            serde_json::json!({ "driver": "test" })
        }
    }

    #[test]
    fn a_shared_handler_forwards_every_overridden_method() {
        let shared: Arc<Answering> = Arc::new(Answering);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime");
        let question = serde_json::json!({ "q": 1 });
        let answer = runtime
            .block_on(JobHandler::answer(&shared, "llm", &question))
            .expect("the worker itself did not fail")
            .expect("the question was answered");
        assert_eq!(answer["endpoint"], "llm");
        assert_eq!(answer["echo"], question);
        assert_eq!(JobHandler::environment(&shared)["driver"], "test");
        let refused = Profile::from_value(serde_json::json!({ "refuse": true }));
        assert!(JobHandler::check_profile(&shared, &refused).is_err());
        let accepted = Profile::from_value(serde_json::json!({}));
        assert!(JobHandler::check_profile(&shared, &accepted).is_ok());
    }
}
