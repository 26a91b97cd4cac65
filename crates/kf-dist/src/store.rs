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
    PRIMARY KEY (run_id, candidate_id)
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

    /// Records a job (its kernel, the job, the candidate and its lineage) in one statement and
    /// returns the job's result when one is already stored: the evaluation cache across runs
    /// and machines.
    pub async fn submit(
        &self,
        job: &JobMessage,
        source: &KernelSource,
        device_kind: &str,
    ) -> Result<Option<Evaluation>> {
        let c = self.client().await?;
        let source_json =
            serde_json::to_value(source).map_err(|e| DistError::decode("kernel", e))?;
        let params =
            serde_json::to_value(&job.params).map_err(|e| DistError::decode("parameters", e))?;
        let origin =
            serde_json::to_value(&job.origin).map_err(|e| DistError::decode("origin", e))?;
        let parents: Vec<i64> = job.parents.iter().map(|p| p.0 as i64).collect();
        let language = source.language.to_string();
        let row = c
            .query_opt(
                "WITH k AS (INSERT INTO kf_kernels (hash, language, entry, source) \
                            VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING), \
                      j AS (INSERT INTO kf_jobs (job_id, kernel, profile, device_kind, params) \
                            VALUES ($5, $1, $6, $7, $8) ON CONFLICT DO NOTHING), \
                      c AS (INSERT INTO kf_candidates (run_id, candidate_id, job_id, parents, origin) \
                            VALUES ($9, $10, $5, $11, $12) ON CONFLICT DO NOTHING) \
                 SELECT evaluation FROM kf_results WHERE job_id = $5",
                &[
                    &job.kernel.0,
                    &language,
                    &source.entry,
                    &source_json,
                    &job.job.0,
                    &job.profile.0,
                    &device_kind,
                    &params,
                    &job.run,
                    &(job.candidate.0 as i64),
                    &parents,
                    &origin,
                ],
            )
            .await
            .map_err(|e| DistError::db("recording a job", e))?;
        row.map(|r| evaluation_of(r.get(0))).transpose()
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
