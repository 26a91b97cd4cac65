//! The system of record in PostgreSQL: kernels by content hash, profiles, runs, jobs,
//! candidates with their lineage, one result per job, archive snapshots.
//!
//! Every write is idempotent (`ON CONFLICT DO NOTHING`), and a job's result has the job id as
//! its primary key: a redelivered or duplicated job can never store a second result, and the
//! first stored result is the one every reader sees.

use std::sync::Arc;

use kf_core::{Evaluation, KernelSource};
use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls};

use crate::error::{DistError, Result};
use crate::job::{Hash, JobMessage, Profile, ResultMessage};

/// The schema, created once per database (under an advisory lock, so that several processes
/// starting together do not race).
const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS kf_kernels (
    hash        TEXT PRIMARY KEY,
    language    TEXT NOT NULL,
    entry       TEXT NOT NULL,
    source      JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS kf_profiles (
    hash        TEXT PRIMARY KEY,
    profile     JSONB NOT NULL
);
CREATE TABLE IF NOT EXISTS kf_runs (
    run_id      TEXT PRIMARY KEY,
    profile     TEXT NOT NULL REFERENCES kf_profiles (hash),
    device_kind TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS kf_jobs (
    job_id      TEXT PRIMARY KEY,
    kernel      TEXT NOT NULL REFERENCES kf_kernels (hash),
    profile     TEXT NOT NULL REFERENCES kf_profiles (hash),
    device_kind TEXT NOT NULL,
    params      JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS kf_candidates (
    run_id       TEXT NOT NULL REFERENCES kf_runs (run_id),
    candidate_id BIGINT NOT NULL,
    job_id       TEXT NOT NULL REFERENCES kf_jobs (job_id),
    parents      BIGINT[] NOT NULL,
    origin       JSONB NOT NULL,
    -- A candidate is one job per parameter configuration a tuner tried.
    PRIMARY KEY (run_id, candidate_id, job_id)
);
CREATE INDEX IF NOT EXISTS kf_candidates_job ON kf_candidates (job_id);
CREATE TABLE IF NOT EXISTS kf_results (
    job_id      TEXT PRIMARY KEY REFERENCES kf_jobs (job_id),
    status      TEXT NOT NULL,
    evaluation  JSONB NOT NULL,
    worker      TEXT NOT NULL,
    delivery    INTEGER NOT NULL,
    seconds     DOUBLE PRECISION NOT NULL,
    stored_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS kf_workers (
    name        TEXT NOT NULL,
    device_kind TEXT NOT NULL,
    device      JSONB,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (name, device_kind)
);
CREATE TABLE IF NOT EXISTS kf_snapshots (
    run_id      TEXT NOT NULL REFERENCES kf_runs (run_id),
    evaluations BIGINT NOT NULL,
    archive     JSONB NOT NULL,
    taken_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, evaluations)
);
"#;

/// A connection to the system of record; reconnects when the server dropped it. Cheap to
/// share: statements from concurrent tasks are pipelined on the one connection.
#[derive(Clone)]
pub struct Store {
    url: Arc<str>,
    client: Arc<Mutex<Arc<Client>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

async fn open(url: &str) -> Result<Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| DistError::db("connecting", e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!("PostgreSQL connection ended: {e}");
        }
    });
    Ok(client)
}

fn to_json<T: serde::Serialize + ?Sized>(what: &str, value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| DistError::decode(what, e))
}

fn evaluation_of(value: serde_json::Value) -> Result<Evaluation> {
    serde_json::from_value(value).map_err(|e| DistError::decode("stored evaluation", e))
}

impl Store {
    /// Connects and creates the schema if the database has none. Must run on a tokio runtime.
    pub async fn connect(url: &str) -> Result<Self> {
        let client = open(url).await?;
        let store = Store {
            url: url.into(),
            client: Arc::new(Mutex::new(Arc::new(client))),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// The client, reconnected first if the server dropped the connection.
    pub async fn client(&self) -> Result<Arc<Client>> {
        let mut guard = self.client.lock().await;
        if guard.is_closed() {
            *guard = Arc::new(open(&self.url).await?);
        }
        Ok(guard.clone())
    }

    async fn migrate(&self) -> Result<()> {
        let c = self.client().await?;
        let sql = format!("BEGIN; SELECT pg_advisory_xact_lock(7243115); {SCHEMA} COMMIT;");
        c.batch_execute(&sql)
            .await
            .map_err(|e| DistError::db("creating the schema", e))
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
    /// statement and returns the stored result of each job that already has one: the
    /// evaluation cache across runs and machines. `kernels` holds the sources to store (those
    /// the caller has not stored before), by hash.
    pub async fn submit(
        &self,
        jobs: &[JobMessage],
        kernels: &[(Hash, KernelSource)],
        device_kind: &str,
    ) -> Result<Vec<(Hash, Evaluation)>> {
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
            k_source.push(to_json("kernel", source)?);
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
                "WITH k AS (INSERT INTO kf_kernels (hash, language, entry, source) \
                            SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::jsonb[]) \
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
                 SELECT job_id, evaluation FROM kf_results WHERE job_id = ANY($5)",
                &[
                    &k_hash, &k_lang, &k_entry, &k_source, &ids, &kernel, &profile,
                    &device_kind, &params, &run, &candidate, &parents, &origin,
                ],
            )
            .await
            .map_err(|e| DistError::db("recording jobs", e))?;
        rows.into_iter()
            .map(|r| Ok((Hash(r.get(0)), evaluation_of(r.get(1))?)))
            .collect()
    }

    /// Stores results (existing results win) and returns the stored evaluation of each job
    /// named, in no particular order.
    pub async fn store_results(
        &self,
        results: &[ResultMessage],
    ) -> Result<Vec<(Hash, Evaluation)>> {
        if results.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let mut jobs = Vec::with_capacity(results.len());
        let mut status = Vec::with_capacity(results.len());
        let mut evaluation = Vec::with_capacity(results.len());
        let mut worker = Vec::with_capacity(results.len());
        let mut delivery = Vec::with_capacity(results.len());
        let mut seconds = Vec::with_capacity(results.len());
        for r in results {
            jobs.push(r.job.0.clone());
            status.push(r.evaluation.status.to_string());
            evaluation.push(
                serde_json::to_value(&r.evaluation)
                    .map_err(|e| DistError::decode("evaluation", e))?,
            );
            worker.push(r.worker.clone());
            delivery.push(r.delivery.min(i32::MAX as u32) as i32);
            seconds.push(r.seconds);
        }
        // Only jobs the database knows: a stray result (another deployment's, a corrupted
        // message) is dropped instead of failing the whole batch on the foreign key.
        c.execute(
            "INSERT INTO kf_results (job_id, status, evaluation, worker, delivery, seconds) \
             SELECT t.* FROM UNNEST($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::int[], $6::float8[]) \
                 AS t(job_id, status, evaluation, worker, delivery, seconds) \
             WHERE EXISTS (SELECT 1 FROM kf_jobs j WHERE j.job_id = t.job_id) \
             ON CONFLICT (job_id) DO NOTHING",
            &[&jobs, &status, &evaluation, &worker, &delivery, &seconds],
        )
        .await
        .map_err(|e| DistError::db("storing results", e))?;
        self.results_for_ids(&c, &jobs).await
    }

    /// The stored evaluations of the jobs named that have one.
    pub async fn results_for(&self, jobs: &[Hash]) -> Result<Vec<(Hash, Evaluation)>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let ids: Vec<String> = jobs.iter().map(|h| h.0.clone()).collect();
        self.results_for_ids(&c, &ids).await
    }

    async fn results_for_ids(&self, c: &Client, ids: &[String]) -> Result<Vec<(Hash, Evaluation)>> {
        let rows = c
            .query(
                "SELECT job_id, evaluation FROM kf_results WHERE job_id = ANY($1)",
                &[&ids],
            )
            .await
            .map_err(|e| DistError::db("reading results", e))?;
        rows.into_iter()
            .map(|r| Ok((Hash(r.get(0)), evaluation_of(r.get(1))?)))
            .collect()
    }

    /// Whether the job has a stored result.
    pub async fn has_result(&self, job: &Hash) -> Result<bool> {
        let c = self.client().await?;
        let row = c
            .query_opt("SELECT 1 FROM kf_results WHERE job_id = $1", &[&job.0])
            .await
            .map_err(|e| DistError::db("looking up a result", e))?;
        Ok(row.is_some())
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
        serde_json::from_value(row.get(0)).map_err(|e| DistError::decode("stored kernel", e))
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

    /// Records a worker starting, with the facts of its device.
    pub async fn register_worker(
        &self,
        name: &str,
        device_kind: &str,
        device: Option<&serde_json::Value>,
    ) -> Result<()> {
        let c = self.client().await?;
        c.execute(
            "INSERT INTO kf_workers (name, device_kind, device) VALUES ($1, $2, $3) \
             ON CONFLICT (name, device_kind) DO UPDATE SET device = $3, started_at = now()",
            &[&name, &device_kind, &device],
        )
        .await
        .map_err(|e| DistError::db("registering a worker", e))?;
        Ok(())
    }

    /// The device facts of the most recently started worker of a device kind, if any.
    pub async fn worker_device(&self, device_kind: &str) -> Result<Option<serde_json::Value>> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT device FROM kf_workers WHERE device_kind = $1 AND device IS NOT NULL \
                 ORDER BY started_at DESC LIMIT 1",
                &[&device_kind],
            )
            .await
            .map_err(|e| DistError::db("reading worker devices", e))?;
        Ok(row.map(|r| r.get(0)))
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
