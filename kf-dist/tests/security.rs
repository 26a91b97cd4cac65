//! Cluster security against the real servers of `scripts/dist-servers.sh` (TLS, the roles'
//! credentials, signed jobs and results): who may publish and read what, which jobs a worker
//! refuses before evaluating anything, which stored results a search reuses, and that no
//! secret reaches what a run writes. Skips like the other distributed tests when the servers
//! (or their secrets) are missing, unless `KF_REQUIRE_DIST=1`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use common::{servers, Nats, Servers, TestDb};
use kf_core::testing::{synthetic_seed, SyntheticEvaluator};
use kf_core::{async_trait, BoxError, Candidate, Evaluation, Evaluator, ParamValue};
use kf_dist::{
    job_id, kernel_hash, Credentials, DistConfig, DistError, DistEvaluator, JobHandler, JobMessage,
    Profile, Reuse, Role, Security, SecurityFiles, SigningKey, Store, Worker, WorkerConfig,
    MESSAGE_VERSION, SIGNATURE_HEADER, SIGNER_HEADER,
};

const DEVICE: &str = "synthetic";
const LEVELS: usize = 4;

/// One test at a time (each starts a nats-server and workers).
static SERIAL: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The servers with their secrets, or `None` (skipped) when they run without security.
fn secure_servers(test: &str) -> Option<(Servers, PathBuf)> {
    let s = servers(test)?;
    match s.secrets.clone() {
        Some(dir) => Some((s, dir)),
        None => {
            // Kind `DIST`: KF_REQUIRE_DIST=1 makes this a failure.
            kf_core::testing::skip::skip(
                kf_core::testing::skip::SkipKind::Dist,
                format_args!("{test}: the servers run without security (no secrets)"),
            );
            None
        }
    }
}

fn security(dir: &Path, role: Role) -> Security {
    SecurityFiles::in_dir(dir, role).load().unwrap()
}

/// A secure test's deployment: a nats-server of its own and a database of its own on the
/// servers with their secrets, one test at a time.
struct Deployment {
    /// The folder of the servers' secrets.
    dir: PathBuf,
    db: TestDb,
    nats: Nats,
    /// Held to the end, after the servers above are gone.
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Deployment {
    /// The deployment of test `test` with database `db`, or `None` (skipped) when the servers
    /// are missing or run without security.
    fn start(test: &str, db: &str) -> Option<Deployment> {
        let serial = lock();
        let (s, dir) = secure_servers(test)?;
        let nats = Nats::start(&s);
        let db = TestDb::create(&s.database_url, db);
        Some(Deployment {
            dir,
            db,
            nats,
            _serial: serial,
        })
    }

    /// The deployment's settings, without a role's security.
    fn base(&self) -> DistConfig {
        DistConfig::new(self.nats.url(), self.db.url.clone())
    }

    /// The deployment's settings as `role`: its credentials, signing key and trusted keys.
    fn as_role(&self, role: Role) -> DistConfig {
        self.base().security(security(&self.dir, role))
    }

    /// A search of run `run` with the search role's security.
    fn search(&self, run: &str) -> kf_dist::DistEvaluatorBuilder {
        DistEvaluator::builder(self.as_role(Role::Search), run, DEVICE, profile())
    }
}

/// The synthetic evaluation, writing `start <job id>` to its log before evaluating (what
/// "compiled" means here: the handler ran).
struct LoggingHandler {
    log: PathBuf,
}

#[async_trait]
impl JobHandler for LoggingHandler {
    async fn evaluate(&self, profile: &Profile, c: &Candidate) -> Result<Evaluation, BoxError> {
        let job = job_id(&kernel_hash(&c.source)?, &c.params, &profile.hash, DEVICE)?;
        use std::io::Write;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?
            .write_all(format!("start {job}\n").as_bytes())?;
        Ok(SyntheticEvaluator::with_levels(LEVELS).evaluate(c).await?)
    }
}

/// A worker on threads of its own until dropped.
struct RunningWorker {
    stop: Arc<tokio::sync::Notify>,
    thread: Option<std::thread::JoinHandle<kf_dist::WorkerStats>>,
    log: PathBuf,
}

impl RunningWorker {
    fn start(dist: DistConfig, name: &str, dir: &Path) -> RunningWorker {
        let log = dir.join(format!("{name}.log"));
        std::fs::write(&log, "").unwrap();
        let stop = Arc::new(tokio::sync::Notify::new());
        let (s, l, n) = (stop.clone(), log.clone(), name.to_string());
        let thread = std::thread::spawn(move || {
            let mut config = WorkerConfig::new(DEVICE);
            config.name = n;
            Worker::new(dist, config, LoggingHandler { log: l })
                .run_blocking(async move { s.notified().await })
                .expect("worker")
        });
        RunningWorker {
            stop,
            thread: Some(thread),
            log,
        }
    }

    fn started(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("start ").map(String::from))
            .collect()
    }

    fn stop(mut self) -> kf_dist::WorkerStats {
        self.stop.notify_waiters();
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        self.stop.notify_waiters();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn profile() -> serde_json::Value {
    serde_json::json!({"problem": "synthetic", "levels": LEVELS})
}

fn candidate(x: i64) -> Candidate {
    let mut c = synthetic_seed(6);
    c.params.0.insert("X".into(), ParamValue::Int(x));
    c
}

fn evaluate(e: &DistEvaluator, c: &Candidate) -> Result<Evaluation, DistError> {
    futures::executor::block_on(e.evaluate(c))
}

/// Waits until `n` workers registered.
fn wait_for_workers(db: &TestDb, n: i64) {
    for _ in 0..2400 {
        if db.count("SELECT count(*) FROM kf_workers") >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("workers did not register");
}

/// A NATS client with the CA and, if given, a role's credentials.
async fn nats_client(
    url: &str,
    ca: &Path,
    creds: Option<&Credentials>,
) -> Result<async_nats::Client, String> {
    let mut o = async_nats::ConnectOptions::new()
        .require_tls(true)
        .add_root_certificates(ca.to_path_buf())
        .connection_timeout(Duration::from_secs(5));
    if let Some(c) = creds {
        o = o.user_and_password(c.nats_user.clone(), c.nats_password.expose().to_string());
    }
    o.connect(url).await.map_err(|e| e.to_string())
}

fn rt() -> tokio::runtime::Runtime {
    common::runtime()
}

#[test]
fn nats_lets_each_role_do_its_part_only() {
    let Some(d) = Deployment::start("nats_lets_each_role_do_its_part_only", "sec_nats") else {
        return;
    };
    let (dir, nats) = (&d.dir, &d.nats);
    // A search creates the streams (and is allowed to).
    let search = d.search("r1").connect().unwrap();
    let ca = dir.join("ca.crt");
    let worker_creds = Credentials::from_file(&dir.join("worker.cred")).unwrap();
    let search_creds = Credentials::from_file(&dir.join("search.cred")).unwrap();
    rt().block_on(async {
        // No credentials: refused at the door, so it can neither publish nor read.
        let anonymous = nats_client(&nats.url(), &ca, None).await;
        assert!(anonymous.is_err(), "a client without credentials connected");
        let wrong = Credentials {
            nats_password: kf_dist::Secret::new("not-the-password"),
            ..search_creds.clone()
        };
        assert!(nats_client(&nats.url(), &ca, Some(&wrong)).await.is_err());
        // Plain text to the TLS server: refused.
        let plain = async_nats::ConnectOptions::new()
            .user_and_password(
                search_creds.nats_user.clone(),
                search_creds.nats_password.expose().into(),
            )
            .connection_timeout(Duration::from_secs(3))
            .connect(format!("nats://127.0.0.1:{}", nats.port))
            .await;
        assert!(plain.is_err(), "a plain-text client connected");

        // A worker's credentials cannot publish a job.
        let worker = nats_client(&nats.url(), &ca, Some(&worker_creds))
            .await
            .unwrap();
        let worker_js = jetstream::new(worker.clone());
        // A search's credentials cannot take jobs.
        let searcher = nats_client(&nats.url(), &ca, Some(&search_creds))
            .await
            .unwrap();
        let search_js = jetstream::new(searcher);
        // A refused publish is never acknowledged and a refused JetStream request never
        // answered, so each check below waits out a timeout: they all run at once.
        let publish = |js: &jetstream::Context, subject: &'static str| {
            let js = js.clone();
            async move {
                tokio::time::timeout(Duration::from_secs(5), async {
                    js.publish(subject, "{}".into()).await?.await
                })
                .await
            }
        };
        // Nor read results.
        let spy = async {
            match worker_js.get_stream("KF_RESULTS").await {
                Ok(st) => st
                    .create_consumer(jetstream::consumer::pull::Config {
                        durable_name: Some("spy".into()),
                        ..Default::default()
                    })
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        };
        let thief = async {
            search_js
                .get_stream("KF_JOBS")
                .await
                .unwrap()
                .create_consumer(jetstream::consumer::pull::Config {
                    durable_name: Some("thief".into()),
                    ..Default::default()
                })
                .await
        };
        let (published, to_compile, question, consumer, built, taken) = tokio::join!(
            publish(&worker_js, "kf.eval.synthetic.p1"),
            // Nor a job to compile (a compile worker passes built jobs on to their own subjects).
            publish(&worker_js, "kf.compile.synthetic.p1"),
            // Nor a question (only searches ask).
            publish(&worker_js, "kf.ask.llm"),
            spy,
            // A search cannot pass a job on as built (only compile workers do).
            publish(&search_js, "kf.built.synthetic.p1"),
            thief,
        );
        assert!(
            !matches!(published, Ok(Ok(_))),
            "a worker published a job: {published:?}"
        );
        assert!(
            !matches!(to_compile, Ok(Ok(_))),
            "a worker published a job to compile: {to_compile:?}"
        );
        assert!(
            !matches!(question, Ok(Ok(_))),
            "a worker published a question: {question:?}"
        );
        assert!(consumer.is_err(), "a worker read the results stream");
        assert!(
            !matches!(built, Ok(Ok(_))),
            "a search published a built job: {built:?}"
        );
        assert!(taken.is_err(), "a search created a consumer of the jobs");
        let mut jobs = search_js.get_stream("KF_JOBS").await.unwrap();
        assert_eq!(
            jobs.info().await.unwrap().state.messages,
            0,
            "no job got in"
        );
    });
    search.shutdown();
}

#[test]
fn postgres_roles_cannot_alter_what_is_not_theirs() {
    let _serial = lock();
    let Some((s, dir)) = secure_servers("postgres_roles_cannot_alter_what_is_not_theirs") else {
        return;
    };
    let db = TestDb::create(&s.database_url, "sec_pg");
    rt().block_on(async {
        let worker = Store::connect(&db.url, &security(&dir, Role::Worker))
            .await
            .unwrap();
        let c = worker.client().await.unwrap();
        for sql in [
            "UPDATE kf_kernels SET entry = 'evil'",
            "DELETE FROM kf_kernels",
            "INSERT INTO kf_kernels (hash, language, entry, source) VALUES ('h', 'opencl', 'k', '{}')",
            "UPDATE kf_results SET status = 'correct'",
            "DELETE FROM kf_results",
            "UPDATE kf_jobs SET params = '{}'",
            // A stored binary and its build are written once, never altered.
            "UPDATE kf_binaries SET bytes = '\\x00'",
            "DELETE FROM kf_binaries",
            "UPDATE kf_builds SET binary_hash = 'h'",
            "DELETE FROM kf_builds",
            "UPDATE kf_answers SET signed = ''",
            "DELETE FROM kf_answers",
        ] {
            let e = c.execute(sql, &[]).await.expect_err(sql);
            // 42501: insufficient_privilege.
            assert_eq!(
                e.as_db_error().map(|d| d.code().code().to_string()),
                Some("42501".into()),
                "{sql}: {e}"
            );
        }
        let search = Store::connect(&db.url, &security(&dir, Role::Search))
            .await
            .unwrap();
        let c = search.client().await.unwrap();
        for sql in [
            "INSERT INTO kf_results (request, job_id, status, evaluation, worker, worker_key, \
             environment, signed, signature, delivery, seconds) \
             VALUES ('r', 'j', 'correct', '{}', 'w', '', '', '', '', 1, 0)",
            "UPDATE kf_results SET status = 'correct'",
            "DELETE FROM kf_kernels",
            "INSERT INTO kf_binaries (hash, bytes) VALUES ('h', '\\x00')",
            "INSERT INTO kf_builds (request, job_id, name, worker, environment, note, seconds) \
             VALUES ('r', 'j', 'n', 'w', '', '', 0)",
            "INSERT INTO kf_answers (request, run_id, endpoint, worker, signed, signature, seconds) \
             VALUES ('r', 'run', 'e', 'w', '', '', 0)",
        ] {
            let e = c.execute(sql, &[]).await.expect_err(sql);
            assert_eq!(
                e.as_db_error().map(|d| d.code().code().to_string()),
                Some("42501".into()),
                "{sql}: {e}"
            );
        }
        // Without the role's password there is no login at all.
        let mut nobody = security(&dir, Role::Worker);
        nobody.credentials = None;
        assert!(Store::connect(&db.url, &nobody).await.is_err());
    });
}

#[test]
fn plain_text_beyond_loopback_is_refused_before_connecting() {
    // 192.0.2.1 is TEST-NET-1: nothing is sent there, the refusal comes first.
    let search = Security {
        signing_key: Some(SigningKey::from_seed([3; 32])),
        ..Security::default()
    };
    let config = DistConfig::new("nats://192.0.2.1:4222", "postgres://192.0.2.1:5432/kf");
    let started = std::time::Instant::now();
    let e = search_refusal(config.clone().security(search.clone()));
    assert_security_refusal(&e, "plain-text NATS connection to 192.0.2.1");
    let e = rt()
        .block_on(Store::connect("postgres://kf@192.0.2.1:5432/kf", &search))
        .unwrap_err();
    assert_security_refusal(&e, "PostgreSQL");
    let worker = Security {
        trusted_keys: Some(SigningKey::from_seed([3; 32]).public()),
        ..Security::default()
    };
    let e = Worker::new(
        config.clone().security(worker),
        WorkerConfig::new(DEVICE),
        LoggingHandler {
            log: PathBuf::from("/nonexistent"),
        },
    )
    .run_blocking(async {})
    .unwrap_err();
    assert!(matches!(&e, DistError::Security(_)), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "it tried to connect"
    );
    // Without a key or trusted keys, nothing starts either (unless insecure).
    let e = search_refusal(DistConfig::new(
        "nats://127.0.0.1:1",
        "postgres://127.0.0.1:1/kf",
    ));
    assert_security_refusal(&e, "signing key");
}

/// The error a search with `config` fails to start with (it must fail).
fn search_refusal(config: DistConfig) -> DistError {
    DistEvaluator::builder(config, "r", DEVICE, profile())
        .connect()
        .unwrap_err()
}

/// Asserts that `e` is a refusal for security's sake that mentions `what`.
#[track_caller]
fn assert_security_refusal(e: &DistError, what: &str) {
    assert!(
        matches!(e, DistError::Security(m) if m.contains(what)),
        "{e}"
    );
}

/// Publishes a job message as the search role would, with the given signature headers.
async fn publish_raw(
    nats_url: &str,
    dir: &Path,
    message: &[u8],
    headers: &[(&str, String)],
    id: &str,
) {
    let creds = Credentials::from_file(&dir.join("search.cred")).unwrap();
    let client = nats_client(nats_url, &dir.join("ca.crt"), Some(&creds))
        .await
        .unwrap();
    let js = jetstream::new(client);
    let mut m = jetstream::message::PublishMessage::build()
        .payload(message.to_vec().into())
        .message_id(id);
    for (k, v) in headers {
        m = m.header(*k, v.as_str());
    }
    js.send_publish("kf.eval.synthetic.p1", m)
        .await
        .unwrap()
        .await
        .unwrap();
}

#[test]
fn unsigned_untrusted_and_tampered_jobs_are_refused_unevaluated() {
    let Some(d) = Deployment::start(
        "unsigned_untrusted_and_tampered_jobs_are_refused",
        "sec_jobs",
    ) else {
        return;
    };
    let (dir, nats, db) = (&d.dir, &d.nats, &d.db);
    let tmp = tempfile::tempdir().unwrap();
    let worker = RunningWorker::start(d.as_role(Role::Worker), "w1", tmp.path());
    wait_for_workers(db, 1);
    // A trusted search's job is evaluated.
    let trusted = d
        .search("trusted")
        .result_timeout(Duration::from_secs(60))
        .connect()
        .unwrap();
    let good = candidate(1);
    assert!(evaluate(&trusted, &good).is_ok());
    assert_eq!(worker.started().len(), 1);

    // A search whose key the worker does not trust: refused, never evaluated.
    let mut rogue_security = security(dir, Role::Search);
    rogue_security.signing_key = Some(SigningKey::from_seed([9; 32]));
    let rogue = DistEvaluator::builder(
        d.base().security(rogue_security),
        "rogue",
        DEVICE,
        profile(),
    )
    .result_timeout(Duration::from_secs(120))
    .connect()
    .unwrap();
    // The worker tells the run it refused the job: the search fails it now, with the reason,
    // not when the result timeout ends the wait.
    let t = std::time::Instant::now();
    let e = evaluate(&rogue, &candidate(2)).unwrap_err();
    let waited = t.elapsed();
    match &e {
        DistError::Refused { worker, reason, .. } => {
            assert_eq!(worker, "w1");
            assert!(reason.contains("untrusted key"), "{reason}");
        }
        other => panic!("expected a refusal, got {other}"),
    }
    assert!(
        waited < Duration::from_secs(60),
        "the refusal took {waited:?}: it came from the timeout, not from the worker"
    );
    assert_eq!(rogue.pending(), 0, "nothing left waiting");

    // A job signed by the trusted key, its parameters changed after signing; and one unsigned.
    let key = security(dir, Role::Search).signing_key.unwrap();
    let kernel = kernel_hash(&good.source).unwrap();
    let profile_hash = Profile::from_value(profile()).hash;
    let mut params = good.params.clone();
    params.0.insert("X".into(), ParamValue::Int(3));
    let job = job_id(&kernel, &params, &profile_hash, DEVICE).unwrap();
    let message = JobMessage {
        v: MESSAGE_VERSION,
        job: job.clone(),
        request: job.0.clone(),
        run: "trusted".into(),
        kernel,
        profile: profile_hash,
        candidate: good.id,
        parents: vec![],
        params,
        origin: Default::default(),
    };
    let signed = serde_json::to_vec(&message).unwrap();
    let signature = key.sign(&signed);
    let tampered = String::from_utf8(signed.clone())
        .unwrap()
        .replace("\"X\":{\"Int\":3}", "\"X\":{\"Int\":4}")
        .replace("\"X\":3", "\"X\":4");
    assert_ne!(
        tampered.as_bytes(),
        signed.as_slice(),
        "the parameters were changed"
    );
    rt().block_on(async {
        let headers = [
            (SIGNER_HEADER, key.id().to_string()),
            (SIGNATURE_HEADER, signature.clone()),
        ];
        publish_raw(&nats.url(), dir, tampered.as_bytes(), &headers, "tampered").await;
        publish_raw(&nats.url(), dir, &signed, &[], "unsigned").await;
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while db.count("SELECT count(*) FROM kf_refusals") < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            db.rows("SELECT reason FROM kf_refusals")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let reasons: Vec<String> = db
        .rows("SELECT reason FROM kf_refusals ORDER BY refused_at")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert!(reasons[0].contains("untrusted key"), "{reasons:?}");
    assert!(reasons[1].contains("does not match"), "{reasons:?}");
    assert_eq!(reasons[2], "unsigned", "{reasons:?}");
    assert_eq!(worker.started().len(), 1, "nothing refused was evaluated");
    assert_eq!(db.count("SELECT count(*) FROM kf_results"), 1);
    rogue.shutdown();
    trusted.shutdown();
    let stats = worker.stop();
    assert_eq!(stats.refused, 3);
    assert_eq!(stats.evaluated, 1);
}

#[test]
fn only_trusted_workers_results_are_reused_and_reuse_can_be_refused() {
    let Some(d) = Deployment::start("only_trusted_workers_results_are_reused", "sec_reuse") else {
        return;
    };
    let (dir, nats, db) = (&d.dir, &d.nats, &d.db);
    let tmp = tempfile::tempdir().unwrap();
    let base = d.base();
    let search = |run: &str, reuse: Reuse, trust_all: bool| {
        let mut sec = security(dir, Role::Search);
        if trust_all {
            sec.trusted_keys = None;
        }
        DistEvaluator::builder(
            base.clone().security(sec).reuse(reuse),
            run,
            DEVICE,
            profile(),
        )
        .result_timeout(Duration::from_secs(60))
        .connect()
        .unwrap()
    };
    let c = candidate(5);
    // A worker with a key nobody trusts evaluates the job for a search that trusts anyone.
    let mut rogue_worker = security(dir, Role::Worker);
    rogue_worker.signing_key = Some(SigningKey::from_seed([11; 32]));
    let rogue = RunningWorker::start(base.clone().security(rogue_worker), "rogue", tmp.path());
    wait_for_workers(db, 1);
    let e = search("r1", Reuse::default(), true);
    assert!(evaluate(&e, &c).is_ok());
    e.shutdown();
    assert_eq!(rogue.started().len(), 1);
    rogue.stop();
    // The trusted worker: a search that trusts only it evaluates the job again.
    let honest = RunningWorker::start(
        base.clone().security(security(dir, Role::Worker)),
        "honest",
        tmp.path(),
    );
    wait_for_workers(db, 2);
    let e = search("r2", Reuse::default(), false);
    assert!(evaluate(&e, &c).is_ok());
    e.shutdown();
    assert_eq!(
        honest.started().len(),
        1,
        "the untrusted result was not reused"
    );
    // Now a trusted result is there: reused.
    let e = search("r3", Reuse::default(), false);
    assert!(evaluate(&e, &c).is_ok());
    e.shutdown();
    assert_eq!(honest.started().len(), 1, "the trusted result was reused");
    // --no-reuse, and a re-check of every reused result: evaluated again each.
    let e = search(
        "r4",
        Reuse {
            enabled: false,
            recheck: 0.0,
        },
        false,
    );
    assert!(evaluate(&e, &c).is_ok());
    e.shutdown();
    assert_eq!(honest.started().len(), 2);
    let e = search(
        "r5",
        Reuse {
            enabled: true,
            recheck: 1.0,
        },
        false,
    );
    assert!(evaluate(&e, &c).is_ok());
    e.shutdown();
    assert_eq!(honest.started().len(), 3);
    let workers: Vec<String> = db
        .rows("SELECT worker FROM kf_results ORDER BY stored_at")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(workers, ["rogue", "honest", "honest", "honest"]);
    honest.stop();

    // Nothing this wrote holds a secret: the database, the NATS store, the logs.
    let written = common::everything_written(db, &[tmp.path(), nats.store_dir()], &[]);
    assert!(written.contains("honest"), "the dump holds the results");
    assert!(written.contains("start "), "the dump holds the logs");
    for secret in common::secret_strings(dir) {
        assert!(!written.contains(secret.as_str()), "a secret was written");
    }
}

#[test]
fn a_kernel_declaring_parameters_out_of_sorted_order_is_evaluated_not_refused() {
    let Some(d) = Deployment::start("parameters_in_declaration_order", "sec_param_order") else {
        return;
    };
    let db = &d.db;
    let tmp = tempfile::tempdir().unwrap();
    let worker = RunningWorker::start(d.as_role(Role::Worker), "w", tmp.path());
    wait_for_workers(db, 1);
    let e = d
        .search("order")
        .result_timeout(Duration::from_secs(60))
        .connect()
        .unwrap();
    // Declared as a template would (`WG0` before `TM`): a store that reordered object keys
    // (JSONB sorts them by length, then bytes) made the worker's re-hash of the kernel differ
    // from the job's, and every such job was refused while the search waited for it.
    let mut c = candidate(5);
    c.source = c
        .source
        .clone()
        .with_param("WG0", [8, 16])
        .with_param("TM", [1, 2]);
    let declared: Vec<&str> = c.source.params.keys().map(String::as_str).collect();
    assert!(
        declared.windows(2).any(|w| w[0].len() > w[1].len()),
        "{declared:?}"
    );
    let result = evaluate(&e, &c);
    e.shutdown();
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(db.count("SELECT count(*) FROM kf_refusals"), 0);
    assert_eq!(worker.started().len(), 1);
    worker.stop();
}

/// The jobs stream, through a client with the search role's credentials.
async fn jobs_stream(url: &str, dir: &Path) -> jetstream::stream::Stream {
    let creds = security(dir, Role::Search);
    let client = nats_client(url, &dir.join("ca.crt"), creds.credentials.as_ref())
        .await
        .unwrap();
    jetstream::new(client).get_stream("KF_JOBS").await.unwrap()
}

/// The jobs stream as the search role sees it: (messages, last sequence).
async fn jobs_on_queue(url: &str, dir: &Path) -> (u64, u64) {
    let mut stream = jobs_stream(url, dir).await;
    let state = stream.info().await.unwrap().state.clone();
    (state.messages, state.last_sequence)
}

#[test]
fn a_job_whose_message_was_deleted_fails_at_its_result_timeout() {
    let Some(d) = Deployment::start("a_job_whose_message_was_deleted_fails", "sec_deleted") else {
        return;
    };
    let (dir, nats, db) = (&d.dir, &d.nats, &d.db);
    // No worker: the job stays on the queue until the operator deletes it.
    let search = d
        .search("deleted")
        .result_timeout(Duration::from_secs(4))
        .connect()
        .unwrap();
    let handle = search.clone();
    let waiting = std::thread::spawn(move || evaluate(&handle, &candidate(7)));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let sequence = loop {
        let (messages, last) = rt().block_on(jobs_on_queue(&nats.url(), dir));
        if messages == 1 {
            break last;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job was not published"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    rt().block_on(async {
        let stream = jobs_stream(&nats.url(), dir).await;
        assert!(stream.delete_message(sequence).await.unwrap(), "deleted");
    });
    let e = waiting.join().unwrap().unwrap_err();
    assert!(matches!(e, DistError::ResultTimeout { .. }), "{e}");
    assert_eq!(search.pending(), 0, "the timed-out job is forgotten");

    // A job that times out while still on the queue is taken off it: no worker evaluates a job
    // nobody waits for.
    let e = evaluate(&search, &candidate(8)).unwrap_err();
    assert!(matches!(e, DistError::ResultTimeout { .. }), "{e}");
    let (messages, _) = rt().block_on(jobs_on_queue(&nats.url(), dir));
    assert_eq!(messages, 0, "the abandoned job left the queue");
    assert_eq!(db.count("SELECT count(*) FROM kf_results"), 0);
    search.shutdown();
}
