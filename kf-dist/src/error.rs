//! [`DistError`]: what can go wrong between the search, the queue and the database.

/// Why a distributed evaluation, a worker or the connection to the servers failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// A configuration value is unusable (an empty URL, a zero limit, a bad subject token).
    #[error("bad distributed-evaluation configuration: {0}")]
    Config(String),
    /// The NATS server could not be reached or refused a request.
    #[error("NATS ({what}): {source}")]
    Nats {
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        source: async_nats::Error,
    },
    /// PostgreSQL could not be reached or refused a statement.
    #[error("PostgreSQL ({what}): {}", server_message(source))]
    Database {
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A message or a stored row did not decode.
    #[error("bad {what}: {source}")]
    Decode {
        /// What was being decoded.
        what: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// A job refers to a kernel or profile the database does not hold.
    #[error("the database holds no {what} with hash {hash}")]
    Missing {
        /// `kernel` or `profile`.
        what: &'static str,
        /// The hash looked up.
        hash: String,
    },
    /// The evaluation was cancelled: the search stopped or the evaluator shut down.
    #[error("the evaluation was cancelled (the distributed evaluator shut down)")]
    Cancelled,
    /// The job failed before reaching a worker (it could not be recorded or published).
    #[error("the job failed: {0}")]
    Failed(String),
    /// A job waited longer than its limit for a result.
    #[error("no result for job {job} after {seconds:.0} s")]
    ResultTimeout {
        /// The job id.
        job: String,
        /// How long it waited.
        seconds: f64,
    },
    /// A worker refused the job unevaluated (unsigned, signed by a key it does not trust,
    /// altered after signing): evaluating it again would be refused again.
    #[error("job {job} was refused by worker {worker}: {reason}")]
    Refused {
        /// The job id.
        job: String,
        /// The worker that refused it.
        worker: String,
        /// Why (as recorded in `kf_refusals`).
        reason: String,
    },
    /// A security setting is missing or unsafe: a plain-text connection beyond loopback, a
    /// credential file others may read, a key that does not parse.
    #[error("security: {0}")]
    Security(String),
    /// The evaluator's own runtime could not start.
    #[error("starting the client runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl DistError {
    pub(crate) fn nats(what: impl Into<String>, source: impl Into<async_nats::Error>) -> Self {
        DistError::Nats {
            what: what.into(),
            source: source.into(),
        }
    }

    pub(crate) fn db(what: impl Into<String>, source: tokio_postgres::Error) -> Self {
        DistError::Database {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn decode(what: impl Into<String>, source: serde_json::Error) -> Self {
        DistError::Decode {
            what: what.into(),
            source,
        }
    }
}

/// Results of this crate.
pub type Result<T, E = DistError> = std::result::Result<T, E>;

/// The server's own words for a statement it refused (the client's `Display` says only "db
/// error"), else the client's error.
fn server_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}
