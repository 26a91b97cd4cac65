-- kf-dist's system of record. Created by `scripts/dist-servers.sh start` (as the database's
-- owner) or by the first client with the rights to create tables (a private test database);
-- the roles' rights are granted here when the roles exist (the script creates them).
--
-- Roles: kf_search records kernels, profiles, runs, jobs, candidates and snapshots and reads
-- results; kf_worker reads kernels, profiles and jobs and adds results, refusals, and (compile
-- workers) binaries and builds. Neither
-- may update or delete anything but a worker's own registration: a worker cannot alter a
-- kernel or a stored result, and a search cannot write a result.
-- A database of an older format cannot be reused: its kernels are stored as JSONB (whose key
-- order is not the hashed text's), and its results are not signed.
DO $format$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns
               WHERE table_name = 'kf_kernels' AND column_name = 'source' AND data_type = 'jsonb') THEN
        RAISE EXCEPTION 'this database holds kf-dist tables of an older format (kf_kernels.source is JSONB); use a new database (with scripts/dist-servers.sh: stop, remove .runtime/pg, start)';
    END IF;
END
$format$;
CREATE TABLE IF NOT EXISTS kf_kernels (
    hash        TEXT PRIMARY KEY,
    language    TEXT NOT NULL,
    entry       TEXT NOT NULL,
    -- The exact JSON text the kernel hash covers: JSONB would reorder object keys (the declared
    -- parameters among them), and a worker re-hashing what it read would refuse the job.
    source      TEXT NOT NULL,
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
-- One result per request: a job's first request has the job id as its request id (shared by
-- every run, so that a job evaluated once is answered from here); a re-evaluation a search
-- asks for (no reuse, a re-check, a result from an untrusted worker) has a request id of its
-- own. `signed` is the result message exactly as the worker signed it.
CREATE TABLE IF NOT EXISTS kf_results (
    request     TEXT PRIMARY KEY,
    job_id      TEXT NOT NULL REFERENCES kf_jobs (job_id),
    status      TEXT NOT NULL,
    evaluation  JSONB NOT NULL,
    worker      TEXT NOT NULL,
    worker_key  TEXT NOT NULL,
    environment TEXT NOT NULL,
    signed      TEXT NOT NULL,
    signature   TEXT NOT NULL,
    delivery    INTEGER NOT NULL,
    seconds     DOUBLE PRECISION NOT NULL,
    -- How the process that built and ran the kernel was confined: complete, partial,
    -- unconfined (a worker under --allow-unconfined) or off; NULL from older workers.
    confinement TEXT,
    stored_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- Databases made before the column.
ALTER TABLE kf_results ADD COLUMN IF NOT EXISTS confinement TEXT;
CREATE INDEX IF NOT EXISTS kf_results_job ON kf_results (job_id);
CREATE TABLE IF NOT EXISTS kf_workers (
    name        TEXT NOT NULL,
    device_kind TEXT NOT NULL,
    device      JSONB,
    environment TEXT NOT NULL DEFAULT '',
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (name, device_kind)
);
-- A worker's heartbeat (`kf cluster status`): what it does (`role`: `all` compiles and runs),
-- when it last reported, how often it reports (a worker silent for three periods is gone),
-- and its counters since it started. Added to databases of the previous format in place.
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS role TEXT NOT NULL DEFAULT 'all';
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS last_seen TIMESTAMPTZ NOT NULL DEFAULT now();
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS heartbeat_s DOUBLE PRECISION NOT NULL DEFAULT 10;
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS stopped_at TIMESTAMPTZ;
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS in_flight INTEGER NOT NULL DEFAULT 0;
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS evaluated BIGINT NOT NULL DEFAULT 0;
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS handed_back BIGINT NOT NULL DEFAULT 0;
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS refused BIGINT NOT NULL DEFAULT 0;
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS poisoned BIGINT NOT NULL DEFAULT 0;
ALTER TABLE kf_workers ADD COLUMN IF NOT EXISTS compiled BIGINT NOT NULL DEFAULT 0;
-- Jobs a worker refused before evaluating anything (unsigned, signed by a key it does not
-- trust, or altered after signing).
CREATE TABLE IF NOT EXISTS kf_refusals (
    worker      TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    signer      TEXT NOT NULL,
    reason      TEXT NOT NULL,
    refused_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- Binaries compile workers built for execute workers, by content hash (`binary_hash`): an
-- execute worker hashes the bytes it fetched and, on a mismatch, compiles the kernel itself.
CREATE TABLE IF NOT EXISTS kf_binaries (
    hash        TEXT PRIMARY KEY,
    bytes       BYTEA NOT NULL,
    stored_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- What a compile worker did with a request before passing it on: the binary it built (NULL:
-- none moves to the execute worker, `note` says why), its file name for the execute worker's
-- handler, and who built it in which environment. `signed` is the build record exactly as the
-- compile worker signed it: an execute worker uses a binary only when a worker key it trusts
-- signed its record, so that neither a row nor bytes written by another hand are ever run.
CREATE TABLE IF NOT EXISTS kf_builds (
    request     TEXT PRIMARY KEY,
    job_id      TEXT NOT NULL,
    binary_hash TEXT,
    name        TEXT NOT NULL,
    worker      TEXT NOT NULL,
    environment TEXT NOT NULL,
    note        TEXT NOT NULL,
    seconds     DOUBLE PRECISION NOT NULL,
    worker_key  TEXT NOT NULL,
    signed      TEXT NOT NULL,
    signature   TEXT NOT NULL,
    stored_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- Answers to the questions searches ask an endpoint through the queue (an LLM's replies), one
-- per request; `signed` is the answer message exactly as the worker signed it.
CREATE TABLE IF NOT EXISTS kf_answers (
    request     TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    endpoint    TEXT NOT NULL,
    worker      TEXT NOT NULL,
    signed      TEXT NOT NULL,
    signature   TEXT NOT NULL,
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
DO $grants$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kf_search') THEN
        REVOKE ALL ON kf_kernels, kf_profiles, kf_runs, kf_jobs, kf_candidates, kf_results,
            kf_workers, kf_refusals, kf_snapshots, kf_binaries, kf_builds, kf_answers FROM kf_search;
        GRANT SELECT, INSERT ON kf_kernels, kf_profiles, kf_runs, kf_jobs, kf_candidates,
            kf_snapshots TO kf_search;
        GRANT SELECT ON kf_results, kf_workers, kf_refusals, kf_builds, kf_answers TO kf_search;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'kf_worker') THEN
        REVOKE ALL ON kf_kernels, kf_profiles, kf_runs, kf_jobs, kf_candidates, kf_results,
            kf_workers, kf_refusals, kf_snapshots, kf_binaries, kf_builds, kf_answers FROM kf_worker;
        GRANT SELECT ON kf_kernels, kf_profiles, kf_jobs TO kf_worker;
        GRANT SELECT, INSERT ON kf_results, kf_refusals, kf_binaries, kf_builds, kf_answers
            TO kf_worker;
        GRANT SELECT, INSERT, UPDATE ON kf_workers TO kf_worker;
    END IF;
END
$grants$;
