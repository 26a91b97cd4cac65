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
//! - A job's id is the hash of (kernel, parameter values, profile, device kind). It is the
//!   JetStream de-duplication id of the job and of its result, and the primary key of the
//!   result row, so a redelivered or duplicated job can never produce a second result; and a
//!   job evaluated before, by any run on any machine, is answered from the database.
//! - Messages stay small: they carry hashes and parameter values; kernel sources and profiles
//!   are fetched from the database by hash (and cached by the workers).
//!
//! The servers for tests and single-machine clusters come from `scripts/dist-servers.sh`
//! (nats-server from PyPI, PostgreSQL from Debian, both on loopback).

mod config;
mod error;
mod evaluator;
mod job;
mod queue;
mod store;
mod worker;

pub use config::{subject_token, DistConfig, PRIORITIES};
pub use error::{DistError, Result};
pub use evaluator::{DistEvaluator, DistEvaluatorBuilder};
pub use job::{job_id, kernel_hash, Hash, JobMessage, Profile, ResultMessage, MESSAGE_VERSION};
pub use store::Store;
pub use worker::{EvaluatorHandler, JobHandler, Worker, WorkerConfig, WorkerStats};
