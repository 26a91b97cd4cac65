//! The system of record in PostgreSQL: kernels by content hash, profiles, runs, jobs,
//! candidates with their lineage, one result per job, archive snapshots.
//!
//! Every write is idempotent (`ON CONFLICT DO NOTHING`), and a job's result has the job id as
//! its primary key: a redelivered or duplicated job can never store a second result, and the
//! first stored result is the one every reader sees.

use std::sync::Arc;

use kf_core::{Evaluation, KernelSource};
use tokio::sync::Mutex;
use tokio_postgres::config::Host;
use tokio_postgres::{Client, NoTls};

use crate::error::{DistError, Result};
use crate::job::{self, Hash, JobMessage, Profile, ResultMessage};
use crate::security::{Refusal, Security, TrustedKeys};

/// The schema and the roles' rights (`scripts/dist-servers.sh` applies the same file).
const SCHEMA: &str = include_str!("../sql/schema.sql");

/// The tables of [`SCHEMA`]: when all exist, a client does not try to create them (a role
/// without the right to create tables could not).
const TABLES: [&str; 12] = [
    "kf_kernels",
    "kf_profiles",
    "kf_runs",
    "kf_jobs",
    "kf_candidates",
    "kf_results",
    "kf_workers",
    "kf_refusals",
    "kf_snapshots",
    "kf_binaries",
    "kf_builds",
    "kf_answers",
];

/// What a worker reports with each heartbeat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Jobs it is evaluating now.
    pub in_flight: usize,
    /// Jobs evaluated and answered since it started.
    pub evaluated: u64,
    /// Jobs handed back (its handler failed).
    pub handed_back: u64,
    /// Jobs refused unevaluated.
    pub refused: u64,
    /// Poison jobs recorded as failed.
    pub poisoned: u64,
    /// Jobs compiled and passed on to the execute workers.
    pub compiled: u64,
}

/// What a compile worker did with one request before passing the job on
/// ([`Store::store_build`]); it signs the record's JSON, and an execute worker checks that
/// signature before it uses the binary.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BuildRecord {
    /// The request.
    pub request: String,
    /// Its job.
    pub job: Hash,
    /// Content hash of the binary it built ([`crate::binary_hash`]); `None`: no binary moves
    /// to the execute worker, which compiles the kernel itself (`note` says why).
    pub binary: Option<Hash>,
    /// The binary's name for the execute worker's handler (a compile-cache file name).
    pub name: String,
    /// The compile worker.
    pub worker: String,
    /// Hash of the compile worker's environment.
    pub environment: String,
    /// Why no binary moves (empty when one does).
    pub note: String,
    /// Seconds the compilation took on the compile worker.
    pub seconds: f64,
    /// Id of the key the compile worker signed the record with (empty: unsigned).
    pub worker_key: String,
}

/// A build as the database holds it: the compile worker's signed record, byte for byte, what
/// was decoded from it, and the stored bytes of its binary (unchecked: the reader compares
/// them with the record's hash).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredBuild {
    /// The record, decoded from `signed`.
    pub record: BuildRecord,
    /// The signed record.
    pub signed: String,
    /// Its signature (hex; empty: unsigned).
    pub signature: String,
    /// The binary's stored bytes, if any.
    pub bytes: Option<Vec<u8>>,
}

/// A result as the database holds it: the worker's signed message, byte for byte, and what
/// was decoded from it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResult {
    /// The request it answers (the job id, or a re-evaluation's id).
    pub request: String,
    /// The job.
    pub job: Hash,
    /// The evaluation.
    pub evaluation: Evaluation,
    /// Name of the worker.
    pub worker: String,
    /// Id of the key that signed it (empty: unsigned).
    pub worker_key: String,
    /// Hash of the worker's driver and evaluator versions.
    pub environment: String,
    /// The signed result message.
    pub signed: String,
    /// Its signature (hex; empty: unsigned).
    pub signature: String,
}

impl StoredResult {
    /// Whether `trusted` (a search's trusted worker keys; `None`: trust every result) accepts
    /// it: a trusted key signed exactly this message, and the message is this result's.
    pub fn trusted_by(&self, trusted: Option<&TrustedKeys>) -> Result<(), Refusal> {
        let Some(keys) = trusted else {
            return Ok(());
        };
        keys.verify(&self.worker_key, self.signed.as_bytes(), &self.signature)?;
        let m: ResultMessage = job::decode("result", self.signed.as_bytes())
            .map_err(|e| Refusal::Inconsistent(e.to_string()))?;
        if m.request != self.request || m.job != self.job || m.worker_key != self.worker_key {
            return Err(Refusal::Inconsistent(
                "the stored columns are not the signed message's".into(),
            ));
        }
        Ok(())
    }
}

/// A connection to the system of record; reconnects when the server dropped it. Cheap to
/// share: statements from concurrent tasks are pipelined on the one connection.
#[derive(Clone)]
pub struct Store {
    config: Arc<tokio_postgres::Config>,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    client: Arc<Mutex<Arc<Client>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

/// The connection settings: the URL, with the role's user and password from the credentials
/// (never from the URL's text in logs: errors name the host only).
fn pg_config(url: &str, security: &Security) -> Result<tokio_postgres::Config> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| DistError::db("reading the database URL", e))?;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            #[cfg(unix)]
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    // A Unix socket never leaves the machine: TLS is for TCP only.
    let tcp = config.get_hosts().iter().any(|h| matches!(h, Host::Tcp(_)));
    security.check_plain_text("PostgreSQL", &hosts)?;
    if let Some(c) = &security.credentials {
        config.user(&c.database_user);
        config.password(c.database_password.expose());
    }
    if security.tls() && tcp {
        config.ssl_mode(tokio_postgres::config::SslMode::Require);
    }
    Ok(config)
}

/// A TLS connector that verifies the server against the deployment's CA.
fn tls_connector(security: &Security) -> Result<Option<tokio_postgres_rustls::MakeRustlsConnect>> {
    let Some(ca) = &security.ca else {
        return Ok(None);
    };
    use rustls_pki_types::pem::PemObject;
    let bad = |e: String| DistError::Security(format!("CA file {}: {e}", ca.display()));
    let mut roots = rustls::RootCertStore::empty();
    for cert in
        rustls_pki_types::CertificateDer::pem_file_iter(ca).map_err(|e| bad(e.to_string()))?
    {
        roots
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad("holds no certificate".into()));
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| bad(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Some(tokio_postgres_rustls::MakeRustlsConnect::new(config)))
}

async fn open(
    config: &tokio_postgres::Config,
    tls: &Option<tokio_postgres_rustls::MakeRustlsConnect>,
) -> Result<Client> {
    let client = match tls {
        Some(tls) => {
            let (client, connection) = config
                .connect(tls.clone())
                .await
                .map_err(|e| DistError::db("connecting with TLS", e))?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!("PostgreSQL connection ended: {e}");
                }
            });
            client
        }
        None => {
            let (client, connection) = config
                .connect(NoTls)
                .await
                .map_err(|e| DistError::db("connecting", e))?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!("PostgreSQL connection ended: {e}");
                }
            });
            client
        }
    };
    Ok(client)
}

fn to_json<T: serde::Serialize + ?Sized>(what: &str, value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| DistError::decode(what, e))
}

/// The columns [`stored_result`] reads.
const RESULT_COLUMNS: &str = "request, job_id, worker, worker_key, environment, signed, signature";

/// A result row; the evaluation comes from the signed message (exactly what the worker sent).
fn stored_result(r: &tokio_postgres::Row) -> Result<StoredResult> {
    let signed: String = r.get(5);
    let message: ResultMessage = job::decode("stored result", signed.as_bytes())?;
    Ok(StoredResult {
        request: r.get(0),
        job: Hash(r.get(1)),
        evaluation: message.evaluation,
        worker: r.get(2),
        worker_key: r.get(3),
        environment: r.get(4),
        signed,
        signature: r.get(6),
    })
}

impl Store {
    /// Connects with the security settings (TLS, the role's credentials) and creates the
    /// schema if the database has none (which needs the right to create tables). Must run on
    /// a tokio runtime.
    pub async fn connect(url: &str, security: &Security) -> Result<Self> {
        if let Some(pw) = kf_core::redact::url_password(url) {
            kf_core::redact::register_secret(pw);
        }
        let config = pg_config(url, security)?;
        let tls = tls_connector(security)?;
        let client = open(&config, &tls).await?;
        let store = Store {
            config: Arc::new(config),
            tls,
            client: Arc::new(Mutex::new(Arc::new(client))),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// The client, reconnected first if the server dropped the connection.
    pub async fn client(&self) -> Result<Arc<Client>> {
        let mut guard = self.client.lock().await;
        if guard.is_closed() {
            *guard = Arc::new(open(&self.config, &self.tls).await?);
        }
        Ok(guard.clone())
    }

    async fn migrate(&self) -> Result<()> {
        let c = self.client().await?;
        let row = c
            .query_one(
                "SELECT count(*) FROM unnest($1::text[]) AS t(name) WHERE to_regclass(t.name) IS NOT NULL",
                &[&TABLES.as_slice()],
            )
            .await
            .map_err(|e| DistError::db("looking for the schema", e))?;
        // The newest column: a database of the previous format has the tables without it.
        let current = c
            .query_one(
                "SELECT count(*) FROM information_schema.columns \
                 WHERE table_name = 'kf_results' AND column_name = 'confinement'",
                &[],
            )
            .await
            .map_err(|e| DistError::db("looking for the schema", e))?;
        if row.get::<_, i64>(0) == TABLES.len() as i64 && current.get::<_, i64>(0) > 0 {
            return Ok(());
        }
        let sql = format!("BEGIN; SELECT pg_advisory_xact_lock(7243115); {SCHEMA} COMMIT;");
        let what = if row.get::<_, i64>(0) == TABLES.len() as i64 {
            "updating the schema of the previous format (as the database's owner: \
             `scripts/dist-servers.sh start` applies kf-dist/sql/schema.sql)"
        } else {
            "creating the schema (as the database's owner)"
        };
        let result = c.batch_execute(&sql).await;
        if result.is_err() {
            // The failed transaction must not stay open on the shared connection.
            let _ = c.batch_execute("ROLLBACK").await;
        }
        result.map_err(|e| DistError::db(what, e))
    }

    /// Records a profile and a run that uses it.
    pub async fn ensure_run(&self, run: &str, profile: &Profile, device_kind: &str) -> Result<()> {
        let c = self.client().await?;
        let value: serde_json::Value = profile.value.clone();
        c.execute(
            "WITH p AS (INSERT INTO kf_profiles (hash, profile) VALUES ($1, $2) ON CONFLICT DO NOTHING) \
             INSERT INTO kf_runs (run_id, profile, device_kind) VALUES ($3, $1, $4) ON CONFLICT DO NOTHING",
            &[&profile.hash.0, &value, &run, &device_kind],
        )
        .await
        .map_err(|e| DistError::db("recording the run", e))?;
        Ok(())
    }

    /// Records jobs (their kernels, the jobs, the candidates and their lineage) in one
    /// statement and returns the stored results of the jobs that already have some (of any
    /// request): the evaluation cache across runs and machines, which the caller filters by
    /// trust. `kernels` holds the sources to store (those the caller has not stored before),
    /// by hash.
    pub async fn submit(
        &self,
        jobs: &[JobMessage],
        kernels: &[(Hash, KernelSource)],
        device_kind: &str,
    ) -> Result<Vec<StoredResult>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let mut k_hash = Vec::new();
        let mut k_lang = Vec::new();
        let mut k_entry = Vec::new();
        let mut k_source = Vec::new();
        for (hash, source) in kernels {
            k_hash.push(hash.0.clone());
            k_lang.push(source.language.to_string());
            k_entry.push(source.entry.clone());
            // The text that was hashed, kept verbatim (see the schema).
            k_source
                .push(serde_json::to_string(source).map_err(|e| DistError::decode("kernel", e))?);
        }
        let mut ids = Vec::with_capacity(jobs.len());
        let mut kernel = Vec::with_capacity(jobs.len());
        let mut profile = Vec::with_capacity(jobs.len());
        let mut params = Vec::with_capacity(jobs.len());
        let mut run = Vec::with_capacity(jobs.len());
        let mut candidate = Vec::with_capacity(jobs.len());
        let mut parents = Vec::with_capacity(jobs.len());
        let mut origin = Vec::with_capacity(jobs.len());
        for j in jobs {
            ids.push(j.job.0.clone());
            kernel.push(j.kernel.0.clone());
            profile.push(j.profile.0.clone());
            params.push(to_json("parameters", &j.params)?);
            run.push(j.run.clone());
            candidate.push(j.candidate.0.min(i64::MAX as u64) as i64);
            let p: Vec<u64> = j.parents.iter().map(|p| p.0).collect();
            parents.push(to_json("parents", &p)?);
            origin.push(to_json("origin", &j.origin)?);
        }
        let rows = c
            .query(
                &format!("WITH k AS (INSERT INTO kf_kernels (hash, language, entry, source) \
                            SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[]) \
                            ON CONFLICT DO NOTHING), \
                      j AS (INSERT INTO kf_jobs (job_id, kernel, profile, device_kind, params) \
                            SELECT t.id, t.kernel, t.profile, $8, t.params \
                            FROM UNNEST($5::text[], $6::text[], $7::text[], $9::jsonb[]) \
                                AS t(id, kernel, profile, params) \
                            ON CONFLICT DO NOTHING), \
                      c AS (INSERT INTO kf_candidates (run_id, candidate_id, job_id, parents, origin) \
                            SELECT t.run, t.cid, t.id, \
                                   ARRAY(SELECT jsonb_array_elements_text(t.parents)::bigint), t.origin \
                            FROM UNNEST($10::text[], $11::int8[], $5::text[], $12::jsonb[], $13::jsonb[]) \
                                AS t(run, cid, id, parents, origin) \
                            ON CONFLICT DO NOTHING) \
                 SELECT {RESULT_COLUMNS} FROM kf_results WHERE job_id = ANY($5) ORDER BY stored_at"),
                &[
                    &k_hash, &k_lang, &k_entry, &k_source, &ids, &kernel, &profile,
                    &device_kind, &params, &run, &candidate, &parents, &origin,
                ],
            )
            .await
            .map_err(|e| DistError::db("recording jobs", e))?;
        rows.iter().map(stored_result).collect()
    }

    /// Stores a worker's result (an existing result of the same request wins; a result of a
    /// job the database does not know is dropped). `signed` is the result message as signed.
    pub async fn store_result(
        &self,
        result: &ResultMessage,
        signed: &str,
        signature: &str,
    ) -> Result<()> {
        let c = self.client().await?;
        let evaluation = to_json("evaluation", &result.evaluation)?;
        let delivery = result.delivery.min(i32::MAX as u32) as i32;
        c.execute(
            "INSERT INTO kf_results (request, job_id, status, evaluation, worker, worker_key, \
                 environment, signed, signature, delivery, seconds, confinement) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 \
             WHERE EXISTS (SELECT 1 FROM kf_jobs j WHERE j.job_id = $2) \
             ON CONFLICT (request) DO NOTHING",
            &[
                &result.request,
                &result.job.0,
                &result.evaluation.status.to_string(),
                &evaluation,
                &result.worker,
                &result.worker_key,
                &result.environment,
                &signed,
                &signature,
                &delivery,
                &result.seconds,
                &result.evaluation.confinement.map(|c| c.to_string()),
            ],
        )
        .await
        .map_err(|e| DistError::db("storing a result", e))?;
        Ok(())
    }

    /// The stored results of the requests named that have one.
    pub async fn results_for(&self, requests: &[String]) -> Result<Vec<StoredResult>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let rows = c
            .query(
                &format!("SELECT {RESULT_COLUMNS} FROM kf_results WHERE request = ANY($1)"),
                &[&requests],
            )
            .await
            .map_err(|e| DistError::db("reading results", e))?;
        rows.iter().map(stored_result).collect()
    }

    /// Whether the request has a stored result.
    pub async fn has_result(&self, request: &str) -> Result<bool> {
        let c = self.client().await?;
        let row = c
            .query_opt("SELECT 1 FROM kf_results WHERE request = $1", &[&request])
            .await
            .map_err(|e| DistError::db("looking up a result", e))?;
        Ok(row.is_some())
    }

    /// Records a job a worker refused before evaluating it.
    pub async fn record_refusal(
        &self,
        worker: &str,
        job: &JobMessage,
        signer: &str,
        reason: &Refusal,
    ) -> Result<()> {
        let c = self.client().await?;
        c.execute(
            "INSERT INTO kf_refusals (worker, job_id, run_id, signer, reason) VALUES ($1, $2, $3, $4, $5)",
            &[&worker, &job.job.0, &job.run, &signer, &reason.to_string()],
        )
        .await
        .map_err(|e| DistError::db("recording a refused job", e))?;
        Ok(())
    }

    /// The refusals recorded for jobs of a run: (job id, worker, reason), the first per job.
    pub async fn refusals_for(
        &self,
        run: &str,
        jobs: &[String],
    ) -> Result<Vec<(Hash, String, String)>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT DISTINCT ON (job_id) job_id, worker, reason FROM kf_refusals \
                 WHERE run_id = $1 AND job_id = ANY($2) ORDER BY job_id, refused_at",
                &[&run, &jobs],
            )
            .await
            .map_err(|e| DistError::db("reading refusals", e))?;
        Ok(rows
            .iter()
            .map(|r| (Hash(r.get(0)), r.get(1), r.get(2)))
            .collect())
    }

    /// The environment (driver and evaluator versions) of the most recently started worker of
    /// a device kind: stored results measured in another are not reused.
    pub async fn worker_environment(&self, device_kind: &str) -> Result<Option<String>> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT environment FROM kf_workers WHERE device_kind = $1 \
                 AND role NOT IN ('compile', 'answer') \
                 ORDER BY started_at DESC LIMIT 1",
                &[&device_kind],
            )
            .await
            .map_err(|e| DistError::db("reading worker environments", e))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// A kernel by hash.
    pub async fn kernel(&self, hash: &Hash) -> Result<KernelSource> {
        let c = self.client().await?;
        let row = c
            .query_opt("SELECT source FROM kf_kernels WHERE hash = $1", &[&hash.0])
            .await
            .map_err(|e| DistError::db("reading a kernel", e))?
            .ok_or_else(|| DistError::Missing {
                what: "kernel",
                hash: hash.0.clone(),
            })?;
        let text: String = row.get(0);
        serde_json::from_str(&text).map_err(|e| DistError::decode("stored kernel", e))
    }

    /// A profile by hash.
    pub async fn profile(&self, hash: &Hash) -> Result<Profile> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT profile FROM kf_profiles WHERE hash = $1",
                &[&hash.0],
            )
            .await
            .map_err(|e| DistError::db("reading a profile", e))?
            .ok_or_else(|| DistError::Missing {
                what: "profile",
                hash: hash.0.clone(),
            })?;
        Ok(Profile::from_value(row.get(0)))
    }

    /// Records a worker starting, with the facts of its device, the hash of its environment
    /// (driver and evaluator versions), how often it will report ([`Store::heartbeat`]) and
    /// its role (`all`, `compile`, `execute`, `answer`; a compile worker's environment and
    /// device never decide which stored results are reused).
    pub async fn register_worker(
        &self,
        name: &str,
        device_kind: &str,
        device: Option<&serde_json::Value>,
        environment: &str,
        heartbeat: std::time::Duration,
        role: &str,
    ) -> Result<()> {
        let c = self.client().await?;
        c.execute(
            "INSERT INTO kf_workers (name, device_kind, device, environment, heartbeat_s, role) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (name, device_kind) DO UPDATE SET device = $3, environment = $4, \
                 started_at = now(), last_seen = now(), heartbeat_s = $5, stopped_at = NULL, \
                 in_flight = 0, evaluated = 0, handed_back = 0, refused = 0, poisoned = 0, \
                 compiled = 0, role = $6",
            &[
                &name,
                &device_kind,
                &device,
                &environment,
                &heartbeat.as_secs_f64(),
                &role,
            ],
        )
        .await
        .map_err(|e| DistError::db("registering a worker", e))?;
        Ok(())
    }

    /// A worker's heartbeat: it is alive, with these jobs in hand and these counters since it
    /// started; `stopped` when it is shutting down cleanly.
    pub async fn heartbeat(&self, name: &str, report: &WorkerReport, stopped: bool) -> Result<()> {
        let c = self.client().await?;
        let n = |v: u64| v.min(i64::MAX as u64) as i64;
        c.execute(
            "UPDATE kf_workers SET last_seen = now(), in_flight = $2, evaluated = $3, \
                 handed_back = $4, refused = $5, poisoned = $6, \
                 stopped_at = CASE WHEN $7 THEN now() ELSE NULL END, compiled = $8 \
             WHERE name = $1",
            &[
                &name,
                &(report.in_flight.min(i32::MAX as usize) as i32),
                &n(report.evaluated),
                &n(report.handed_back),
                &n(report.refused),
                &n(report.poisoned),
                &stopped,
                &n(report.compiled),
            ],
        )
        .await
        .map_err(|e| DistError::db("recording a worker's heartbeat", e))?;
        Ok(())
    }

    /// The device facts of the most recently started worker of a device kind, if any.
    pub async fn worker_device(&self, device_kind: &str) -> Result<Option<serde_json::Value>> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT device FROM kf_workers WHERE device_kind = $1 AND device IS NOT NULL \
                 AND role NOT IN ('compile', 'answer') ORDER BY started_at DESC LIMIT 1",
                &[&device_kind],
            )
            .await
            .map_err(|e| DistError::db("reading worker devices", e))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Stores a worker's signed answer to a question (a second answer to the request is
    /// ignored: the first stands).
    pub async fn store_answer(
        &self,
        answer: &crate::AnswerMessage,
        endpoint: &str,
        signed: &str,
        signature: &str,
    ) -> Result<()> {
        let c = self.client().await?;
        c.execute(
            "INSERT INTO kf_answers (request, run_id, endpoint, worker, signed, signature, seconds) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
            &[
                &answer.request,
                &answer.run,
                &endpoint,
                &answer.worker,
                &signed,
                &signature,
                &answer.seconds,
            ],
        )
        .await
        .map_err(|e| DistError::db("storing an answer", e))?;
        Ok(())
    }

    /// The signed answer stored for a question's request, with its signature.
    pub async fn answer(&self, request: &str) -> Result<Option<(String, String)>> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT signed, signature FROM kf_answers WHERE request = $1",
                &[&request],
            )
            .await
            .map_err(|e| DistError::db("reading an answer", e))?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Records what a compile worker did with a request (its record signed as `signed`, with
    /// `signature`), and the binary it built (stored once per content hash). A second record
    /// for the request is ignored: the first stands.
    pub async fn store_build(
        &self,
        build: &BuildRecord,
        signed: &str,
        signature: &str,
        bytes: Option<&[u8]>,
    ) -> Result<()> {
        let c = self.client().await?;
        let hash = build.binary.as_ref().map(|h| h.0.clone());
        c.execute(
            "WITH b AS (INSERT INTO kf_binaries (hash, bytes) SELECT $1, $2 \
                 WHERE $1::text IS NOT NULL AND $2::bytea IS NOT NULL ON CONFLICT DO NOTHING) \
             INSERT INTO kf_builds (request, job_id, binary_hash, name, worker, environment, \
                 note, seconds, worker_key, signed, signature) \
             VALUES ($3, $4, $1, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING",
            &[
                &hash,
                &bytes,
                &build.request,
                &build.job.0,
                &build.name,
                &build.worker,
                &build.environment,
                &build.note,
                &build.seconds,
                &build.worker_key,
                &signed,
                &signature,
            ],
        )
        .await
        .map_err(|e| DistError::db("storing a build", e))?;
        Ok(())
    }

    /// What a compile worker recorded for a request: its signed record and the stored bytes of
    /// its binary.
    pub async fn build(&self, request: &str) -> Result<Option<StoredBuild>> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT b.signed, b.signature, x.bytes \
                 FROM kf_builds b LEFT JOIN kf_binaries x ON x.hash = b.binary_hash \
                 WHERE b.request = $1",
                &[&request],
            )
            .await
            .map_err(|e| DistError::db("reading a build", e))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let signed: String = row.get(0);
        let record: BuildRecord = job::decode("stored build", signed.as_bytes())?;
        Ok(Some(StoredBuild {
            record,
            signed,
            signature: row.get(1),
            bytes: row.get(2),
        }))
    }

    /// Stores a snapshot of a run's archive after `evaluations` evaluations (a second snapshot
    /// at the same count is ignored).
    pub async fn store_snapshot(
        &self,
        run: &str,
        evaluations: u64,
        archive: &serde_json::Value,
    ) -> Result<()> {
        let c = self.client().await?;
        c.execute(
            "INSERT INTO kf_snapshots (run_id, evaluations, archive) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
            &[&run, &(evaluations.min(i64::MAX as u64) as i64), archive],
        )
        .await
        .map_err(|e| DistError::db("storing a snapshot", e))?;
        Ok(())
    }
}
