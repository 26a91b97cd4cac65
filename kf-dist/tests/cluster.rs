//! Distributed evaluation against real servers: a nats-server per test (started, killed and
//! restarted here), the PostgreSQL server of `scripts/dist-servers.sh`, and worker processes
//! (this test binary, re-executed) that the tests kill with SIGKILL.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{servers, Nats, TestDb};
use kf_archive::EliteArchive;
use kf_core::testing::{synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator};
use kf_core::{
    async_trait, BehaviorClassifier, BoxError, Budget, Candidate, Engine, Evaluation, Evaluator,
};
use kf_dist::{
    job_id, kernel_hash, Binary, ClusterStatus, CompileOutcome, DistConfig, DistEvaluator,
    JobHandler, Profile, QueueDepth, Role, Security, SecurityFiles, Worker, WorkerConfig,
    WorkerRole, WorkerState,
};
use serde::{Deserialize, Serialize};

const DIMS: usize = 6;
const LEVELS: usize = 4;
const DEVICE: &str = "synthetic";
/// The endpoint the test answer workers serve.
const ENDPOINT: &str = "test-llm";
/// The test workers' heartbeat period: a killed one is gone after three.
const WORKER_HEARTBEAT_MS: u64 = 300;

/// One test at a time: each starts several processes, and the timing-based parts (heartbeats,
/// redelivery) should not compete with another test's.
static SERIAL: Mutex<()> = Mutex::new(());

/// What a worker process is told (through the environment).
#[derive(Serialize, Deserialize)]
struct WorkerSpec {
    nats_url: String,
    database_url: String,
    namespace: String,
    ack_wait_ms: u64,
    max_attempts: u32,
    log: PathBuf,
    /// The deployment's secrets folder (None: servers without security).
    secrets: Option<PathBuf>,
    /// The worker's heartbeat period to the database.
    heartbeat_ms: u64,
    /// Its role (`all`, `compile`, `execute`).
    role: String,
}

/// A role's security settings from the servers' secrets, or none (servers without security).
fn security(secrets: Option<&Path>, role: Role) -> Security {
    match secrets {
        Some(dir) => SecurityFiles::in_dir(dir, role).load().unwrap(),
        None => Security::insecure(),
    }
}

/// The profile every test run uses: how long the synthetic evaluation takes on a worker.
fn profile(sleep_ms: u64) -> serde_json::Value {
    serde_json::json!({"problem": "synthetic", "levels": LEVELS, "sleep_ms": sleep_ms})
}

/// A profile whose jobs also take `compile_ms` to compile on a compile worker.
fn profile_compiling(sleep_ms: u64, compile_ms: u64) -> serde_json::Value {
    serde_json::json!({
        "problem": "synthetic", "levels": LEVELS, "sleep_ms": sleep_ms, "compile_ms": compile_ms
    })
}

/// The binary the test compile workers build for a job: bytes only that job has.
fn test_binary(job: &kf_dist::Hash) -> Vec<u8> {
    format!("binary of {job}").into_bytes()
}

/// Evaluates the synthetic problem after sleeping as the profile says, writing
/// `start <job id>` to its log first and `done <job id>` after the sleep; aborts the process on
/// a kernel marked POISON. As a compile worker it logs `compile <job id>`, sleeps `compile_ms`,
/// logs `compiled <job id>` and builds [`test_binary`] (aborting on a kernel marked
/// POISON_COMPILE, answering a kernel marked NOCOMPILE as a compile error); as an execute
/// worker it logs `WRONG <job id>` if the binary it was given is not the job's.
struct TestHandler {
    log: PathBuf,
    /// Questions answered (an answer worker's budget is [`ANSWER_BUDGET`] of them).
    answered: std::sync::atomic::AtomicU64,
}

/// Questions a test answer worker answers before it says its budget is spent.
const ANSWER_BUDGET: u64 = 6;

impl TestHandler {
    fn log(&self, line: String) -> std::io::Result<()> {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?
            .write_all(format!("{line}\n").as_bytes())
    }
}

fn job_of(profile: &Profile, c: &Candidate) -> Result<kf_dist::Hash, BoxError> {
    Ok(job_id(
        &kernel_hash(&c.source)?,
        &c.params,
        &profile.hash,
        DEVICE,
    )?)
}

#[async_trait]
impl JobHandler for TestHandler {
    async fn evaluate(&self, profile: &Profile, c: &Candidate) -> Result<Evaluation, BoxError> {
        let job = job_of(profile, c)?;
        self.log(format!("start {job}"))?;
        if c.source.text.contains("POISON") {
            std::process::abort();
        }
        let sleep = profile.value["sleep_ms"].as_u64().unwrap_or(0);
        std::thread::sleep(Duration::from_millis(sleep));
        self.log(format!("done {job}"))?;
        Ok(SyntheticEvaluator::with_levels(LEVELS).evaluate(c).await?)
    }

    async fn compile(&self, profile: &Profile, c: &Candidate) -> Result<CompileOutcome, BoxError> {
        let job = job_of(profile, c)?;
        self.log(format!("compile {job}"))?;
        if c.source.text.contains("POISON_COMPILE") {
            std::process::abort();
        }
        let sleep = profile.value["compile_ms"].as_u64().unwrap_or(0);
        std::thread::sleep(Duration::from_millis(sleep));
        self.log(format!("compiled {job}"))?;
        if c.source.text.contains("NOCOMPILE") {
            return Ok(CompileOutcome::Answered(Box::new(Evaluation::failed(
                kf_core::Status::CompileError,
                "NOCOMPILE does not compile",
            ))));
        }
        Ok(CompileOutcome::Binary(Binary {
            name: format!("{job}.bin"),
            bytes: test_binary(&job),
        }))
    }

    /// Echoes the question after 100 ms, logging `ask <id>` and `answered <id>`, until its
    /// budget is spent.
    async fn answer(
        &self,
        endpoint: &str,
        question: &serde_json::Value,
    ) -> Result<Result<serde_json::Value, kf_dist::NoAnswer>, BoxError> {
        let id = question["id"].as_str().unwrap_or("?").to_owned();
        self.log(format!("ask {id}"))?;
        std::thread::sleep(Duration::from_millis(100));
        self.log(format!("answered {id}"))?;
        let n = self
            .answered
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n >= ANSWER_BUDGET {
            return Ok(Err(kf_dist::NoAnswer(format!(
                "{endpoint}: the budget of {ANSWER_BUDGET} answers is spent"
            ))));
        }
        Ok(Ok(
            serde_json::json!({"echo": question, "endpoint": endpoint}),
        ))
    }

    async fn evaluate_built(
        &self,
        profile: &Profile,
        c: &Candidate,
        binary: &Binary,
    ) -> Result<Evaluation, BoxError> {
        let job = job_of(profile, c)?;
        if binary.bytes != test_binary(&job) || binary.name != format!("{job}.bin") {
            self.log(format!("WRONG {job}"))?;
        }
        let mut evaluation = self.evaluate(profile, c).await?;
        // "Loaded" the binary it was given.
        evaluation.compiler.cache_hit = true;
        Ok(evaluation)
    }
}

/// The worker processes' entry point (run only when a test starts this binary as a worker).
#[test]
#[ignore = "entry point of the worker processes the other tests start"]
fn worker_process_entry() {
    let spec: WorkerSpec =
        serde_json::from_str(&std::env::var("KF_DIST_TEST_WORKER").expect("started by a test"))
            .unwrap();
    let dist = DistConfig::new(spec.nats_url, spec.database_url)
        .security(security(spec.secrets.as_deref(), Role::Worker))
        .namespace(spec.namespace)
        .ack_wait(Duration::from_millis(spec.ack_wait_ms))
        .max_attempts(spec.max_attempts);
    let mut config = WorkerConfig::new(DEVICE);
    config.name = format!("w{}", std::process::id());
    config.heartbeat = Duration::from_millis(spec.heartbeat_ms);
    config.role = spec.role.parse().unwrap();
    if config.role == WorkerRole::Answer {
        // An answer worker serves an endpoint, not a device.
        config.device_kinds = vec![ENDPOINT.into()];
    }
    let handler = TestHandler {
        log: spec.log,
        answered: Default::default(),
    };
    let worker = Worker::new(dist, config, handler);
    worker.run_blocking(futures::future::pending()).unwrap();
}

struct Cluster {
    nats: Nats,
    db: TestDb,
    /// The search's settings.
    dist: DistConfig,
    secrets: Option<PathBuf>,
    dir: tempfile::TempDir,
    workers: Arc<Mutex<Vec<(Child, WorkerRole)>>>,
    supervise: Arc<AtomicBool>,
    /// One cluster at a time (each has its nats-server and workers), held until the rest of
    /// the cluster is gone.
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Cluster {
    /// The cluster of test `test`: a nats-server and a database of its own, no worker yet.
    /// Tests take turns: the cluster holds the lock while it lives. `None` (skipped) when the
    /// servers are missing.
    fn new(test: &str, ack_wait: Duration, max_attempts: u32) -> Option<Cluster> {
        let serial = lock();
        let s = servers(test)?;
        let nats = Nats::start(&s);
        let db = TestDb::create(&s.database_url, test);
        let dist = DistConfig::new(nats.url(), db.url.clone())
            .security(security(s.secrets.as_deref(), Role::Search))
            .ack_wait(ack_wait)
            .max_attempts(max_attempts);
        Some(Cluster {
            nats,
            db,
            dist,
            secrets: s.secrets.clone(),
            dir: tempfile::tempdir().unwrap(),
            workers: Arc::new(Mutex::new(Vec::new())),
            supervise: Arc::new(AtomicBool::new(false)),
            _serial: serial,
        })
    }

    fn spawn_worker(
        dist: &DistConfig,
        secrets: Option<&Path>,
        dir: &Path,
        role: WorkerRole,
    ) -> Child {
        let n = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        let log = dir.join(format!("worker-{n}.log"));
        let spec = WorkerSpec {
            nats_url: dist.nats_url.clone(),
            database_url: dist.database_url.clone(),
            namespace: dist.namespace.clone(),
            ack_wait_ms: dist.ack_wait.as_millis() as u64,
            max_attempts: dist.max_attempts,
            log: log.clone(),
            secrets: secrets.map(Path::to_path_buf),
            heartbeat_ms: WORKER_HEARTBEAT_MS,
            role: role.name().into(),
        };
        std::fs::write(&log, "").unwrap();
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "worker_process_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("KF_DIST_TEST_WORKER", serde_json::to_string(&spec).unwrap())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn start_workers(&self, n: usize) {
        self.start_role(n, WorkerRole::All);
    }

    /// Starts `n` workers of a role (their log indices follow the earlier workers').
    fn start_role(&self, n: usize, role: WorkerRole) {
        for _ in 0..n {
            let child =
                Self::spawn_worker(&self.dist, self.secrets.as_deref(), self.dir.path(), role);
            self.workers.lock().unwrap().push((child, role));
        }
    }

    /// Restarts workers that die (as a process supervisor would) until the cluster is dropped.
    fn supervise(&self) {
        self.supervise.store(true, Ordering::SeqCst);
        let (workers, on, dist, secrets, dir) = (
            self.workers.clone(),
            self.supervise.clone(),
            self.dist.clone(),
            self.secrets.clone(),
            self.dir.path().to_path_buf(),
        );
        std::thread::spawn(move || {
            while on.load(Ordering::SeqCst) {
                if let Ok(mut ws) = workers.lock() {
                    for (w, role) in ws.iter_mut() {
                        if matches!(w.try_wait(), Ok(Some(_))) {
                            *w = Cluster::spawn_worker(&dist, secrets.as_deref(), &dir, *role);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }

    /// The job ids worker `i` has started, from its log.
    fn started(&self, i: usize) -> Vec<String> {
        self.logged(i, "start ")
    }

    /// The job ids worker `i` has started and not finished evaluating, from its log.
    fn in_flight(&self, i: usize) -> Vec<String> {
        let done = self.logged(i, "done ");
        self.started(i)
            .into_iter()
            .filter(|j| !done.contains(j))
            .collect()
    }

    fn logged(&self, i: usize, prefix: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join(format!("worker-{i}.log")))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix(prefix).map(String::from))
            .collect()
    }

    /// Waits until `n` workers have registered in the database (a worker registers before it
    /// subscribes to the queue), so that a test does not depend on how fast processes start.
    fn wait_for_workers(&self, n: i64) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let table = self.db.count(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'kf_workers'",
            );
            let registered = if table > 0 {
                self.db.count("SELECT count(*) FROM kf_workers")
            } else {
                0
            };
            if registered >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "only {registered} of {n} workers registered within 120 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill_worker(&self, i: usize) {
        let mut ws = self.workers.lock().unwrap();
        let _ = ws[i].0.kill(); // SIGKILL
        let _ = ws[i].0.wait();
    }

    fn evaluator(&self, run: &str, sleep_ms: u64) -> DistEvaluator {
        // A broken cluster fails the test instead of hanging it.
        DistEvaluator::builder(self.dist.clone(), run, DEVICE, profile(sleep_ms))
            .result_timeout(Duration::from_secs(120))
            .connect()
            .unwrap()
    }

    /// An evaluator that sends its jobs to the compile workers first.
    fn evaluator_compiling_first(
        &self,
        run: &str,
        sleep_ms: u64,
        compile_ms: u64,
    ) -> DistEvaluator {
        DistEvaluator::builder(
            self.dist.clone(),
            run,
            DEVICE,
            profile_compiling(sleep_ms, compile_ms),
        )
        .compile_first(true)
        .result_timeout(Duration::from_secs(120))
        .connect()
        .unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.supervise.store(false, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(150));
        if let Ok(mut ws) = self.workers.lock() {
            for (w, _) in ws.iter_mut() {
                let _ = w.kill();
                let _ = w.wait();
            }
        }
    }
}

fn search<E: Evaluator>(evaluator: E, seeds: Vec<Candidate>, evaluations: u64) -> EliteArchive {
    let archive = EliteArchive::new(SyntheticClassifier::new(LEVELS).space().clone()).unwrap();
    Engine::new(
        SyntheticMutator::new(0.1),
        evaluator,
        SyntheticClassifier::new(LEVELS),
        archive,
    )
    .seeds(seeds)
    .seed(11)
    .budget(Budget::evaluations(evaluations))
    .max_in_flight(6)
    .run_blocking()
    .unwrap()
    .archive
}

/// A search from the synthetic seed on a thread of its own, while the test acts on the
/// cluster (kills a worker, restarts a server, alters what was stored).
struct BackgroundSearch {
    done: std::sync::mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<EliteArchive>,
}

impl BackgroundSearch {
    /// Starts a search of `evaluations` evaluations with `evaluator`.
    fn start(evaluator: DistEvaluator, evaluations: u64) -> BackgroundSearch {
        let (tx, done) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let a = search(evaluator, vec![synthetic_seed(DIMS)], evaluations);
            let _ = tx.send(());
            a
        });
        BackgroundSearch { done, thread }
    }

    /// The search's archive; it must finish within `timeout` (else the test fails with
    /// `unfinished`).
    fn archive(self, timeout: Duration, unfinished: &str) -> EliteArchive {
        self.done.recv_timeout(timeout).expect(unfinished);
        self.thread.join().unwrap()
    }
}

/// The archive as JSON, without the name of the worker that evaluated each elite and what its
/// compiler reported: which worker took a job, and whether a compile worker built its binary,
/// are the things a distributed run may record differently.
fn json(a: &EliteArchive) -> String {
    let mut doc = serde_json::to_value(a).unwrap();
    if let Some(cells) = doc["cells"].as_array_mut() {
        for cell in cells {
            if let Some(evaluation) = cell["payload"]["evaluation"].as_object_mut() {
                evaluation.remove("worker");
                evaluation.remove("compiler");
            }
        }
    }
    doc.to_string()
}

/// The in-process archive for the same search.
fn in_process(evaluations: u64) -> String {
    json(&search(
        SyntheticEvaluator::with_levels(LEVELS),
        vec![synthetic_seed(DIMS)],
        evaluations,
    ))
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn three_workers_give_the_in_process_archive() {
    let Some(cluster) = Cluster::new("three_workers", Duration::from_secs(5), 3) else {
        return;
    };
    cluster.start_workers(3);
    // Every worker must take part: none may still be starting when the jobs are gone.
    cluster.wait_for_workers(3);
    let evaluator = cluster.evaluator("three", 0);
    let archive = search(evaluator, vec![synthetic_seed(DIMS)], 150);
    assert_eq!(
        json(&archive),
        in_process(150),
        "distributed and in-process archives differ"
    );
    let db = &cluster.db;
    assert_eq!(db.count("SELECT count(*) FROM kf_candidates"), 150);
    let jobs = db.count("SELECT count(*) FROM kf_jobs");
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results"),
        jobs,
        "one result per job"
    );
    // Every worker took part.
    let busy = (0..3).filter(|i| !cluster.started(*i).is_empty()).count();
    assert_eq!(busy, 3, "some worker got no job");
    // A second run of the same search is answered from the database: no job is published.
    let again = cluster.evaluator("three-again", 0);
    let t = Instant::now();
    let archive2 = search(again, vec![synthetic_seed(DIMS)], 150);
    assert_eq!(json(&archive2), json(&archive));
    assert_eq!(
        db.count("SELECT count(*) FROM kf_jobs"),
        jobs,
        "no new job for a cached run"
    );
    eprintln!(
        "cached re-run of 150 evaluations: {:.2} s",
        t.elapsed().as_secs_f64()
    );
}

#[test]
fn a_killed_worker_s_job_is_evaluated_again() {
    let Some(cluster) = Cluster::new("killed_worker", Duration::from_secs(1), 3) else {
        return;
    };
    cluster.start_workers(2);
    let evaluator = cluster.evaluator("killed", 400);
    // Run the search on another thread; watch worker 0 from this one.
    let background = BackgroundSearch::start(evaluator, 24);
    let deadline = Instant::now() + Duration::from_secs(120);
    // Kill worker 0 in the middle of an evaluation (each takes 400 ms), from its second job on.
    // Which job it was is read from its log after the kill: the one started and not done.
    loop {
        if cluster.started(0).len() >= 2 && !cluster.in_flight(0).is_empty() {
            cluster.kill_worker(0);
            break;
        }
        assert!(Instant::now() < deadline, "worker 0 never started two jobs");
        std::thread::sleep(Duration::from_millis(20));
    }
    let in_flight = cluster.in_flight(0);
    assert_eq!(
        in_flight.len(),
        1,
        "worker 0 was killed with {in_flight:?} in flight (one slot)"
    );
    let killed_job = in_flight[0].clone();
    let archive = background.archive(Duration::from_secs(120), "the search did not finish");
    assert_eq!(json(&archive), in_process(24));
    let db = &cluster.db;
    assert_eq!(db.count("SELECT count(*) FROM kf_candidates"), 24);
    let jobs = db.count("SELECT count(*) FROM kf_jobs");
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results"),
        jobs,
        "exactly one result per job"
    );
    let row = db.rows(&format!(
        "SELECT worker, delivery::text FROM kf_results WHERE job_id = '{killed_job}'"
    ));
    assert_eq!(row.len(), 1, "the killed worker's job has one result");
    let (worker, delivery) = (&row[0][0], &row[0][1]);
    assert!(
        delivery.parse::<u32>().unwrap() >= 2,
        "the job was delivered again ({delivery})"
    );
    assert!(
        cluster.started(1).contains(&killed_job),
        "the surviving worker evaluated the killed worker's job (result from {worker})"
    );
    eprintln!(
        "killed worker: job {killed_job} answered by {worker} on delivery {delivery}; \
         {jobs} jobs, {jobs} results"
    );
}

/// What [`search_survives`] saw.
struct Survived {
    /// Results stored when the fault began.
    during: i64,
    /// Jobs of the run (each with exactly one result).
    jobs: i64,
    /// Jobs answered on a redelivery.
    again: i64,
    /// Seconds from the fault's start to the end of the search.
    finished_s: f64,
}

/// Runs an 80-evaluation search on two workers, applies `fault` once 20 results are stored,
/// and checks that nothing was lost: the search finishes, every candidate is recorded, each
/// job has one result, and the archive is the one the same search gets in one process.
fn search_survives(cluster: &mut Cluster, run: &str, fault: impl FnOnce(&mut Cluster)) -> Survived {
    cluster.start_workers(2);
    cluster.wait_for_workers(2);
    let evaluator = cluster.evaluator(run, 30);
    let background = BackgroundSearch::start(evaluator, 80);
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.db.count("SELECT count(*) FROM kf_results") < 20 {
        assert!(Instant::now() < deadline, "no progress before the fault");
        std::thread::sleep(Duration::from_millis(20));
    }
    let during = cluster.db.count("SELECT count(*) FROM kf_results");
    let began = Instant::now();
    fault(cluster);
    let archive = background.archive(
        Duration::from_secs(180),
        "the search did not finish after the fault",
    );
    assert!(during < 80, "the fault happened mid-run");
    assert_eq!(
        json(&archive),
        in_process(80),
        "nothing lost, nothing changed"
    );
    let db = &cluster.db;
    assert_eq!(db.count("SELECT count(*) FROM kf_candidates"), 80);
    let jobs = db.count("SELECT count(*) FROM kf_jobs");
    assert_eq!(db.count("SELECT count(*) FROM kf_results"), jobs);
    Survived {
        during,
        jobs,
        again: db.count("SELECT count(*) FROM kf_results WHERE delivery > 1"),
        finished_s: began.elapsed().as_secs_f64(),
    }
}

#[test]
fn a_nats_restart_loses_nothing() {
    let Some(mut cluster) = Cluster::new("nats_restart", Duration::from_secs(2), 3) else {
        return;
    };
    let s = search_survives(&mut cluster, "restart", |c| {
        c.nats.kill();
        std::thread::sleep(Duration::from_secs(1));
        c.nats.restart();
    });
    eprintln!(
        "NATS restart: killed after {} of {} results, back after 1 s; run finished {:.1} s \
         after the kill; {} jobs answered on a redelivery; archive identical",
        s.during, s.jobs, s.finished_s, s.again
    );
}

/// PostgreSQL restarted mid-run: every connection of the search and the workers is cut and
/// the server stays down for 3 s, longer than the workers' acknowledgement wait (2 s), so jobs
/// whose results could not be stored are redelivered meanwhile. The search and its workers
/// reconnect by themselves.
#[test]
fn a_postgres_restart_loses_nothing() {
    if !common::can_restart_postgres("a_postgres_restart_loses_nothing") {
        return;
    }
    let Some(mut cluster) = Cluster::new("postgres_restart", Duration::from_secs(2), 3) else {
        return;
    };
    let s = search_survives(&mut cluster, "pg-restart", |_| common::restart_postgres(3));
    eprintln!(
        "PostgreSQL restart: began after {} of {} results, down 3 s; run finished {:.1} s \
         after the restart began; {} jobs answered on a redelivery; archive identical",
        s.during, s.jobs, s.finished_s, s.again
    );
}

#[test]
fn a_poison_job_ends_as_a_recorded_failure() {
    let Some(cluster) = Cluster::new("poison", Duration::from_secs(1), 2) else {
        return;
    };
    cluster.start_workers(2);
    cluster.supervise();
    let evaluator = cluster.evaluator("poison", 0);
    let mut poison = synthetic_seed(DIMS);
    poison.source.text = "// POISON: kills the process that evaluates it".into();
    let t = Instant::now();
    let archive = search(evaluator, vec![poison.clone(), synthetic_seed(DIMS)], 30);
    let seconds = t.elapsed().as_secs_f64();
    assert!(!kf_core::Archive::elites(&archive).is_empty());
    let db = &cluster.db;
    let profile = Profile::from_value(profile(0));
    let job = recorded_poison(db, &poison, &profile, "all");
    // Exactly two worker processes died on it (one per attempt), none after.
    let started: usize = (0..8)
        .map(|i| cluster.started(i).iter().filter(|j| **j == job.0).count())
        .sum();
    assert_eq!(started, 2, "evaluated once per attempt, not again");
    eprintln!("poison job recorded after {seconds:.1} s");
}

#[test]
fn cancelling_deletes_the_jobs_no_worker_took() {
    let Some(cluster) = Cluster::new("cancel", Duration::from_secs(5), 3) else {
        return;
    };
    // No worker yet: the jobs wait on the queue.
    let evaluator = cluster.evaluator("cancel", 0);
    let candidates: Vec<Candidate> = (0..5u32)
        .map(|i| {
            let mut c = synthetic_seed(DIMS);
            c.params.set("X0", 0.1 * f64::from(i));
            c.id = kf_core::CandidateId(u64::from(i));
            c
        })
        .collect();
    let handle = evaluator.clone();
    let waiting =
        std::thread::spawn(move || futures::executor::block_on(handle.evaluate_batch(&candidates)));
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.db.count("SELECT count(*) FROM kf_jobs") < 5 {
        assert!(Instant::now() < deadline, "the jobs were not recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Recorded jobs are published right after; 3 s is ten times what that takes here.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(evaluator.cancel_pending(), 5);
    let results = waiting.join().unwrap();
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Err(kf_dist::DistError::Cancelled))),
        "{results:?}"
    );
    // The queue is empty: a worker started now evaluates a job published after the
    // cancellation, and nothing before it (the queue is first in, first out).
    cluster.start_workers(1);
    let probe = cluster.evaluator("cancel-probe", 0);
    let mut after = synthetic_seed(DIMS);
    after.params.set("X0", 0.9);
    after.id = kf_core::CandidateId(99);
    futures::executor::block_on(probe.evaluate(&after)).unwrap();
    assert_eq!(
        cluster.started(0).len(),
        1,
        "a cancelled job was evaluated: {:?}",
        cluster.started(0)
    );
    assert_eq!(cluster.db.count("SELECT count(*) FROM kf_results"), 1);
}

#[test]
fn bad_settings_are_refused_before_connecting() {
    let config = DistConfig::new("nats://127.0.0.1:1", "postgres://nobody@127.0.0.1:1/none")
        .security(Security::insecure());
    let bad_run =
        DistEvaluator::builder(config.clone(), "run id with spaces", DEVICE, profile(0)).connect();
    assert!(
        matches!(bad_run, Err(kf_dist::DistError::Config(_))),
        "{bad_run:?}"
    );
    let bad_priority = DistEvaluator::builder(config.clone(), "r", DEVICE, profile(0))
        .priority(9)
        .connect();
    assert!(matches!(bad_priority, Err(kf_dist::DistError::Config(_))));
    // Valid settings, but no server there: a clear NATS error, not a hang or a panic.
    let unreachable = DistEvaluator::builder(config, "r", DEVICE, profile(0)).connect();
    assert!(
        matches!(unreachable, Err(kf_dist::DistError::Nats { .. })),
        "{unreachable:?}"
    );
}

#[test]
fn heartbeats_keep_a_long_evaluation_with_its_worker() {
    // Each evaluation takes 3.5 acknowledgement waits: without heartbeats every job would be
    // delivered again to the other worker. A heartbeat goes every third of the 3 s wait, so a
    // loaded machine would have to stall a worker for 3 s to cause a redelivery.
    let Some(cluster) = Cluster::new("heartbeat", Duration::from_secs(3), 3) else {
        return;
    };
    cluster.start_workers(2);
    let evaluator = cluster.evaluator("heartbeat", 10_500);
    // Two jobs (the seed's and a child's): the property is per job, and each takes 10.5 s.
    let archive = search(evaluator, vec![synthetic_seed(DIMS)], 2);
    assert_eq!(json(&archive), in_process(2));
    let db = &cluster.db;
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results WHERE delivery > 1"),
        0,
        "no redelivery"
    );
    let started = cluster.started(0).len() + cluster.started(1).len();
    assert_eq!(
        started as i64,
        db.count("SELECT count(*) FROM kf_jobs"),
        "each job evaluated once"
    );
}

#[test]
fn cluster_status_shows_workers_queue_throughput_and_the_gone() {
    let Some(cluster) = Cluster::new("status", Duration::from_secs(5), 3) else {
        return;
    };
    cluster.start_workers(2);
    cluster.wait_for_workers(2);
    let evaluator = cluster.evaluator("status", 0);
    search(evaluator.clone(), vec![synthetic_seed(DIMS)], 20);
    let window = Duration::from_secs(600);
    let status = ClusterStatus::read_blocking(&cluster.dist, window).unwrap();
    assert_eq!(status.count(WorkerState::Alive), 2, "{status}");
    assert!(status
        .workers
        .iter()
        .all(|w| w.role == "all" && w.device_kind == DEVICE));
    let jobs = cluster.db.count("SELECT count(*) FROM kf_jobs") as u64;
    assert_eq!(status.results_in_window, jobs, "{status}");
    assert_eq!(status.results_total, jobs);
    assert!(status.jobs_per_second > 0.0);
    assert!(
        status.failures.is_empty() && status.refusals == 0,
        "{status}"
    );
    assert!(
        status.queue.iter().all(|q| q.jobs == 0),
        "the queue is drained: {status}"
    );
    // Heartbeats carry the counters: together the workers evaluated every job.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = ClusterStatus::read_blocking(&cluster.dist, window).unwrap();
        // … and that, idle, they hold none.
        if s.workers.iter().map(|w| w.evaluated).sum::<u64>() == jobs && s.in_flight == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the heartbeats did not report the jobs: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // A SIGKILLed worker stops heartbeating and is marked gone; the other stays alive.
    cluster.kill_worker(0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let s = ClusterStatus::read_blocking(&cluster.dist, window).unwrap();
        if s.count(WorkerState::Gone) == 1 {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the killed worker is not marked gone: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.count(WorkerState::Alive), 1, "{status}");
    let gone = status
        .workers
        .iter()
        .find(|w| w.state == WorkerState::Gone)
        .unwrap();
    assert!(
        gone.silent_s > 3.0 * WORKER_HEARTBEAT_MS as f64 / 1000.0,
        "{gone:?}"
    );

    // With no worker left, jobs wait on the queue: the status counts them by priority.
    cluster.kill_worker(1);
    let waiting: Vec<Candidate> = (0..3u32)
        .map(|i| {
            let mut c = synthetic_seed(DIMS);
            c.params.set("X1", 0.05 * f64::from(i + 1));
            c.id = kf_core::CandidateId(1000 + u64::from(i));
            c.parents = vec![kf_core::CandidateId(0)];
            c
        })
        .collect();
    let handle = evaluator.clone();
    let pending =
        std::thread::spawn(move || futures::executor::block_on(handle.evaluate_batch(&waiting)));
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let s = ClusterStatus::read_blocking(&cluster.dist, window).unwrap();
        if s.queue.iter().map(|q| q.jobs).sum::<u64>() == 3 && s.count(WorkerState::Gone) == 2 {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the waiting jobs are not counted: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        status.queue,
        vec![QueueDepth {
            device_kind: DEVICE.into(),
            priority: 1,
            jobs: 3
        }],
        "{status}"
    );
    assert_eq!(status.count(WorkerState::Alive), 0, "{status}");
    assert_eq!(status.in_flight, 0, "no alive worker holds a job");
    let text = status.to_string();
    assert!(
        text.contains("synthetic") && text.contains("gone"),
        "{text}"
    );
    evaluator.cancel_pending();
    assert!(pending.join().unwrap().iter().all(|r| r.is_err()));
}

/// Checks that `poison`'s job (of a run with `profile`) has one result, recorded as a poison
/// job after two attempts (`max_attempts` 2) that killed the workers of `role`; returns its id.
fn recorded_poison(
    db: &TestDb,
    poison: &Candidate,
    profile: &Profile,
    role: &str,
) -> kf_dist::Hash {
    let job = job_of(profile, poison).unwrap();
    let row = db.rows(&format!(
        "SELECT status, delivery::text, evaluation->>'diagnostics' FROM kf_results \
         WHERE job_id = '{job}'"
    ));
    assert_eq!(
        row.len(),
        1,
        "the {role} poison job has one (recorded) result"
    );
    assert_eq!(row[0][0], "runtime_error");
    assert_eq!(
        row[0][1], "3",
        "{role}: two attempts, then the recording delivery"
    );
    assert!(row[0][2].contains("poison job"), "{}", row[0][2]);
    job
}

/// A job's result rows: (status, delivery, the evaluation's `binary` note).
fn result_of(db: &TestDb, job: &str) -> Vec<Vec<String>> {
    db.rows(&format!(
        "SELECT status, delivery::text, coalesce(evaluation->'compiler'->'extra'->>'binary', '') \
         FROM kf_results WHERE job_id = '{job}'"
    ))
}

/// Every worker log line starting with `prefix`, over the first `n` workers.
fn logged_by_all(cluster: &Cluster, n: usize, prefix: &str) -> Vec<String> {
    (0..n).flat_map(|i| cluster.logged(i, prefix)).collect()
}

/// Compile workers build, execute workers run: the archive is the in-process one, every job
/// was compiled once on a compile worker and run with the binary it built (the execute
/// workers received exactly those bytes), a kernel that does not compile never reached an
/// execute worker, and the compile worker ran nothing.
#[test]
fn compile_and_execute_workers_give_the_in_process_archive() {
    let Some(cluster) = Cluster::new("roles", Duration::from_secs(5), 3) else {
        return;
    };
    cluster.start_role(1, WorkerRole::Compile); // log 0
    cluster.start_role(2, WorkerRole::Execute); // logs 1, 2
    cluster.wait_for_workers(3);
    let evaluator = cluster.evaluator_compiling_first("roles", 0, 0);
    let mut broken = synthetic_seed(DIMS);
    broken.source.text = "// NOCOMPILE: the compile worker answers it".into();
    let mut seeds = vec![synthetic_seed(DIMS)];
    let archive = search(evaluator, seeds.clone(), 60);
    assert_eq!(json(&archive), in_process(60), "archives differ");
    let db = &cluster.db;
    let jobs = db.count("SELECT count(*) FROM kf_jobs");
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results"),
        jobs,
        "one result per job"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM kf_builds"),
        jobs,
        "one build per job"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM kf_binaries"),
        jobs,
        "one stored binary per job"
    );
    let shipped = db.count(
        "SELECT count(*) FROM kf_results \
         WHERE evaluation->'compiler'->'extra'->>'binary' LIKE 'shipped: %'",
    );
    assert_eq!(
        shipped, jobs,
        "every job ran with the compile worker's binary"
    );
    assert!(
        cluster.logged(0, "start ").is_empty(),
        "the compile worker evaluated"
    );
    assert_eq!(cluster.logged(0, "compiled ").len() as i64, jobs);
    assert!(
        logged_by_all(&cluster, 3, "WRONG ").is_empty(),
        "an execute worker got other bytes"
    );
    assert!(logged_by_all(&cluster, 3, "compile ")
        .iter()
        .all(|j| cluster.logged(0, "compile ").contains(j)));
    // A kernel that does not compile is answered by the compile worker alone.
    seeds.push(broken.clone());
    let again = cluster.evaluator_compiling_first("roles-broken", 0, 0);
    let _ = search(again, seeds, 10);
    let job = job_id(
        &kernel_hash(&broken.source).unwrap(),
        &broken.params,
        &Profile::from_value(profile_compiling(0, 0)).hash,
        DEVICE,
    )
    .unwrap();
    let row = result_of(db, &job.0);
    assert_eq!(row.len(), 1);
    assert_eq!(row[0][0], "compile_error");
    assert!(
        !logged_by_all(&cluster, 3, "start ").contains(&job.0),
        "an execute worker ran a kernel that does not compile"
    );
    eprintln!("compile/execute roles: {jobs} jobs, {shipped} run with the shipped binary");
}

/// A binary corrupted in storage is detected by its hash and never run: the execute worker
/// compiles the kernel itself, the evaluation says so, and the archive is unchanged.
#[test]
fn a_corrupted_binary_is_detected_and_the_kernel_compiled_again() {
    tampered_builds_are_never_used(
        "corrupt",
        // Flip one byte of every binary (as a failing disk or a tampering hand).
        "UPDATE kf_binaries SET bytes = set_byte(bytes, 0, get_byte(bytes, 0) # 1)",
        "failed its hash check",
    );
}

/// A build record altered after the compile worker signed it (here: another file name, as a
/// hand that wants its file to land in another kernel's cache entry would write) is never
/// used: the execute worker compiles the kernel itself. Needs the servers' security (signed
/// records).
#[test]
fn a_forged_build_record_is_never_used() {
    if common::servers("forged_build").is_some_and(|s| s.secrets.is_none()) {
        // Kind `DIST`: the servers CI starts (KF_REQUIRE_DIST=1) run with security.
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Dist,
            "the servers run without security, so build records are unsigned",
        );
        return;
    }
    tampered_builds_are_never_used(
        "forged_build",
        "UPDATE kf_builds SET signed = replace(signed, '.bin\"', '.evil\"')",
        "not signed by a trusted worker",
    );
}

/// Lets a compile worker build the first jobs, applies `tamper` (SQL run as the database's
/// owner) to what it stored, then starts an execute worker: each tampered job is compiled on
/// the execute worker, whose note says `note`, nothing tampered is used, and the archive is
/// the in-process one.
fn tampered_builds_are_never_used(test: &str, tamper: &str, note: &str) {
    let Some(cluster) = Cluster::new(test, Duration::from_secs(5), 3) else {
        return;
    };
    // First only the compile worker: the first jobs are built and wait for an execute worker.
    cluster.start_role(1, WorkerRole::Compile); // log 0
    cluster.wait_for_workers(1);
    let evaluator = cluster.evaluator_compiling_first(test, 0, 0);
    let background = BackgroundSearch::start(evaluator, 30);
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.db.count("SELECT count(*) FROM kf_binaries") < 1 {
        assert!(Instant::now() < deadline, "nothing was built");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let tampered: Vec<String> = cluster
        .db
        .rows("SELECT b.job_id FROM kf_builds b JOIN kf_binaries x ON x.hash = b.binary_hash")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    runtime_exec(&cluster.db, tamper);
    cluster.start_role(1, WorkerRole::Execute); // log 1
    let archive = background.archive(Duration::from_secs(120), "the search did not finish");
    assert_eq!(json(&archive), in_process(30), "archives differ");
    assert!(!tampered.is_empty());
    assert!(
        logged_by_all(&cluster, 2, "WRONG ").is_empty(),
        "a tampered binary was used"
    );
    for job in &tampered {
        let row = result_of(&cluster.db, job);
        assert_eq!(row.len(), 1, "job {job}: one result");
        assert!(row[0][2].contains(note), "job {job}: {:?}", row[0]);
    }
    let db = &cluster.db;
    let jobs = db.count("SELECT count(*) FROM kf_jobs");
    assert_eq!(db.count("SELECT count(*) FROM kf_results"), jobs);
    let shipped = db.count(
        "SELECT count(*) FROM kf_results \
         WHERE evaluation->'compiler'->'extra'->>'binary' LIKE 'shipped: %'",
    );
    assert_eq!(shipped, jobs - tampered.len() as i64);
    eprintln!(
        "{test}: {} tampered builds detected and compiled again on the execute worker, \
         {shipped} shipped, {jobs} jobs",
        tampered.len()
    );
}

/// Runs one statement as the database's owner.
fn runtime_exec(db: &TestDb, sql: &str) {
    let n = db.count(&format!(
        "WITH x AS ({sql} RETURNING 1) SELECT count(*) FROM x"
    ));
    assert!(n > 0, "{sql} changed nothing");
}

/// A compile worker and an execute worker are each SIGKILLed in the middle of a job: both
/// jobs are done again by the survivors of their role, nothing is lost, each job has one
/// result, and the archive is the in-process one.
#[test]
fn killed_compile_and_execute_workers_lose_nothing() {
    let Some(cluster) = Cluster::new("roles_killed", Duration::from_secs(1), 3) else {
        return;
    };
    cluster.start_role(2, WorkerRole::Compile); // logs 0, 1
    cluster.start_role(2, WorkerRole::Execute); // logs 2, 3
    cluster.wait_for_workers(4);
    let evaluator = cluster.evaluator_compiling_first("roles-killed", 300, 300);
    let background = BackgroundSearch::start(evaluator, 24);
    let deadline = Instant::now() + Duration::from_secs(120);
    let compiling = |i: usize| -> Vec<String> {
        let done = cluster.logged(i, "compiled ");
        cluster
            .logged(i, "compile ")
            .into_iter()
            .filter(|j| !done.contains(j))
            .collect()
    };
    loop {
        if cluster.logged(0, "compiled ").len() >= 2 && !compiling(0).is_empty() {
            cluster.kill_worker(0);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "compile worker 0 never compiled two jobs"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed_compile = compiling(0);
    assert_eq!(killed_compile.len(), 1, "{killed_compile:?}");
    loop {
        if cluster.started(2).len() >= 2 && !cluster.in_flight(2).is_empty() {
            cluster.kill_worker(2);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "execute worker 2 never ran two jobs"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed_run = cluster.in_flight(2);
    assert_eq!(killed_run.len(), 1, "{killed_run:?}");
    let archive = background.archive(Duration::from_secs(180), "the search did not finish");
    assert_eq!(json(&archive), in_process(24), "archives differ");
    let db = &cluster.db;
    let jobs = db.count("SELECT count(*) FROM kf_jobs");
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results"),
        jobs,
        "one result per job"
    );
    assert!(
        cluster.logged(1, "compiled ").contains(&killed_compile[0]),
        "the other compile worker built the killed one's job"
    );
    assert!(
        cluster.started(3).contains(&killed_run[0]),
        "the other execute worker ran the killed one's job"
    );
    for job in [&killed_compile[0], &killed_run[0]] {
        let row = result_of(db, job);
        assert_eq!(row.len(), 1, "{job}");
        assert!(row[0][2].starts_with("shipped: "), "{job}: {:?}", row[0]);
    }
    assert!(logged_by_all(&cluster, 4, "WRONG ").is_empty());
    eprintln!(
        "killed compile worker (job {}) and execute worker (job {}): {jobs} jobs, {jobs} results",
        killed_compile[0], killed_run[0]
    );
}

/// A job that kills every compile worker that builds it, and one that kills every execute
/// worker that runs it, each end as one recorded failure after their attempts, and the search
/// goes on.
#[test]
fn poison_jobs_end_as_recorded_failures_in_either_role() {
    let Some(cluster) = Cluster::new("roles_poison", Duration::from_secs(1), 2) else {
        return;
    };
    cluster.start_role(1, WorkerRole::Compile);
    cluster.start_role(1, WorkerRole::Execute);
    cluster.supervise();
    cluster.wait_for_workers(2);
    let evaluator = cluster.evaluator_compiling_first("roles-poison", 0, 0);
    let mut compile_poison = synthetic_seed(DIMS);
    compile_poison.source.text = "// POISON_COMPILE: kills the compile worker".into();
    let mut run_poison = synthetic_seed(DIMS);
    run_poison.source.text = "// POISON: kills the execute worker".into();
    let archive = search(
        evaluator,
        vec![
            compile_poison.clone(),
            run_poison.clone(),
            synthetic_seed(DIMS),
        ],
        20,
    );
    assert!(!kf_core::Archive::elites(&archive).is_empty());
    let profile = Profile::from_value(profile_compiling(0, 0));
    for (poison, role) in [(&compile_poison, "compile"), (&run_poison, "execute")] {
        recorded_poison(&cluster.db, poison, &profile, role);
    }
}

/// Two searches ask one endpoint through the queue; its one answer worker (one question at a
/// time: the endpoint's concurrency limit) answers both, each answer reaches the search that
/// asked, and the worker's budget is shared by both (answers past it say so). A resumed run
/// that asks the same questions is answered from the database without asking again, except
/// where the stored answer is a failure: that question is asked again.
#[test]
fn questions_from_two_searches_share_one_answer_worker() {
    let Some(cluster) = Cluster::new("answers", Duration::from_secs(5), 3) else {
        return;
    };
    cluster.start_role(1, WorkerRole::Answer); // log 0
    cluster.wait_for_workers(1);
    let asker = |run: &str| {
        kf_dist::Asker::connect(
            cluster
                .dist
                .clone()
                .result_timeout(Some(Duration::from_secs(60))),
            run,
            ENDPOINT,
        )
        .unwrap()
    };
    let ask_one = |asker: &kf_dist::Asker, id: &str| {
        futures::executor::block_on(asker.ask(&serde_json::json!({ "id": id }))).unwrap()
    };
    // A run asks, and the same run resumed asks the same: answered from the database.
    let first = ask_one(&asker("search-z"), "z");
    assert!(first.is_ok(), "{first:?}");
    assert_eq!(ask_one(&asker("search-z"), "z"), first);
    assert_eq!(cluster.db.count("SELECT count(*) FROM kf_answers"), 1);
    // Two searches at once, over the rest of the budget.
    let (a, b) = (asker("search-a"), asker("search-b"));
    let ask = |asker: &kf_dist::Asker, id: String| {
        let asker = asker.clone();
        std::thread::spawn(move || {
            let q = serde_json::json!({ "id": id });
            (id, futures::executor::block_on(asker.ask(&q)).unwrap())
        })
    };
    let threads: Vec<_> = (0..4)
        .flat_map(|i| [ask(&a, format!("a{i}")), ask(&b, format!("b{i}"))])
        .collect();
    let answers: Vec<(String, Result<serde_json::Value, kf_dist::NoAnswer>)> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    let mut spent = 0;
    for (id, answer) in &answers {
        match answer {
            Ok(v) => assert_eq!(v["echo"]["id"], id.as_str(), "{id} got another's answer"),
            Err(e) => {
                assert!(e.0.contains("budget"), "{id}: {e}");
                spent += 1;
            }
        }
    }
    assert_eq!(
        spent,
        9 - ANSWER_BUDGET,
        "the budget is the worker's, shared by both"
    );
    // One question at a time: every `ask` is followed by its `answered` before the next.
    let lines: Vec<String> = std::fs::read_to_string(cluster.dir.path().join("worker-0.log"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines.len(), 18, "{lines:?}");
    for pair in lines.chunks(2) {
        let id = pair[0].strip_prefix("ask ").expect("an ask line");
        assert_eq!(pair[1], format!("answered {id}"), "{lines:?}");
    }
    assert_eq!(cluster.db.count("SELECT count(*) FROM kf_answers"), 9);
    // A failed answer (the budget is spent by now) is not reused: the resumed run asks again.
    assert!(ask_one(&asker("search-y"), "y").is_err());
    assert!(ask_one(&asker("search-y"), "y").is_err());
    assert_eq!(
        cluster.db.count("SELECT count(*) FROM kf_answers"),
        11,
        "a failed answer is asked again"
    );
}
