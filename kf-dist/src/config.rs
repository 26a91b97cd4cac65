//! Connection settings and the limits shared by the evaluator and the workers.

use std::time::Duration;

use crate::error::{DistError, Result};
use crate::security::{Security, SecurityFiles};

/// Priorities a job may have: 0 (first) to `PRIORITIES - 1` (last). Workers take every waiting
/// job of a higher priority before one of a lower.
pub const PRIORITIES: u8 = 3;

/// How long a search waits for a job's result by default: far longer than an evaluation takes
/// (the worker heartbeats keep a long one alive on the queue), short enough that a job whose
/// message was deleted, or that every worker lost, does not hold a search forever.
pub const DEFAULT_RESULT_TIMEOUT: Duration = Duration::from_secs(3600);

/// Where the servers are and how the queue behaves. The evaluator and every worker of one
/// deployment must use the same values (they create the same streams and consumers). Its
/// `Debug` prints the servers' URLs without their passwords.
#[derive(Clone, PartialEq)]
pub struct DistConfig {
    /// NATS server, for example `nats://127.0.0.1:4222` (several may be given, comma-separated).
    pub nats_url: String,
    /// PostgreSQL, for example `postgres://kf@db.internal/kf`.
    pub database_url: String,
    /// Prefix of stream names and subjects, so that deployments can share a NATS account and
    /// tests can share a server. Letters, digits, `-` and `_`.
    pub namespace: String,
    /// How long a delivered job may go without an acknowledgement or a heartbeat before it is
    /// given to another worker. Workers heartbeat at a third of it during long evaluations.
    pub ack_wait: Duration,
    /// Deliveries of one job that may end with its worker lost; the next delivery records the
    /// job as failed instead of evaluating it again (a poison job that kills every worker).
    pub max_attempts: u32,
    /// Window in which JetStream drops a job or result published again under the same id.
    pub duplicate_window: Duration,
    /// How long a publish is retried (while the NATS server restarts, for example) before the
    /// evaluation fails.
    pub publish_timeout: Duration,
    /// TLS, credentials and signing keys.
    pub security: Security,
    /// Files to read [`DistConfig::security`] from when connecting (a command line names
    /// files; reading them fails at connection time, with the connection's other errors).
    pub security_files: Option<SecurityFiles>,
    /// When a search answers a job from a result stored before.
    pub reuse: Reuse,
    /// How long a search waits for a published job's result before the evaluation fails with
    /// [`DistError::ResultTimeout`] (and the job leaves the queue): what ends the wait for a
    /// job whose message an operator deleted. `None`: wait as long as it takes.
    pub result_timeout: Option<Duration>,
}

impl std::fmt::Debug for DistConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use kf_core::redact::redact_url;
        let nats: Vec<String> = self.nats_url.split(',').map(redact_url).collect();
        f.debug_struct("DistConfig")
            .field("nats_url", &nats.join(","))
            .field("database_url", &redact_url(&self.database_url))
            .field("namespace", &self.namespace)
            .field("ack_wait", &self.ack_wait)
            .field("max_attempts", &self.max_attempts)
            .field("duplicate_window", &self.duplicate_window)
            .field("publish_timeout", &self.publish_timeout)
            .field("security", &self.security)
            .field("security_files", &self.security_files)
            .field("reuse", &self.reuse)
            .field("result_timeout", &self.result_timeout)
            .finish()
    }
}

/// When a search answers a job from a stored result (of any run) instead of evaluating it.
/// A stored result is reused only when a trusted worker signed it (where the search trusts
/// keys) and it was measured in the environment (driver and evaluator versions) of the most
/// recently started worker of the device kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reuse {
    /// Reuse stored results at all (`--no-reuse`: every job is evaluated again).
    pub enabled: bool,
    /// Fraction of reused results evaluated again anyway, 0–1, chosen by job id (the same
    /// jobs every time for one run); a disagreeing status is logged and the new result wins.
    pub recheck: f64,
}

impl Default for Reuse {
    fn default() -> Self {
        Reuse {
            enabled: true,
            recheck: 0.0,
        }
    }
}

impl DistConfig {
    /// Defaults for the given servers: namespace `kf`, 30 s acknowledgement wait, 3 attempts,
    /// a 10-minute de-duplication window, publishes retried for 5 minutes, results awaited for
    /// an hour ([`DEFAULT_RESULT_TIMEOUT`]).
    pub fn new(nats_url: impl Into<String>, database_url: impl Into<String>) -> Self {
        DistConfig {
            nats_url: nats_url.into(),
            database_url: database_url.into(),
            namespace: "kf".into(),
            ack_wait: Duration::from_secs(30),
            max_attempts: 3,
            duplicate_window: Duration::from_secs(600),
            publish_timeout: Duration::from_secs(300),
            security: Security::default(),
            security_files: None,
            reuse: Reuse::default(),
            result_timeout: Some(DEFAULT_RESULT_TIMEOUT),
        }
    }

    /// Sets how long a search waits for a job's result (`None`: forever).
    pub fn result_timeout(mut self, limit: Option<Duration>) -> Self {
        self.result_timeout = limit;
        self
    }

    /// Sets the files the security settings are read from when connecting.
    pub fn security_files(mut self, files: SecurityFiles) -> Self {
        self.security_files = Some(files);
        self
    }

    /// The settings with [`DistConfig::security_files`] read into [`DistConfig::security`].
    pub fn with_security_loaded(&self) -> Result<DistConfig> {
        let mut config = self.clone();
        if let Some(files) = config.security_files.take() {
            config.security = files.load()?;
        }
        Ok(config)
    }

    /// Sets the security settings.
    pub fn security(mut self, security: Security) -> Self {
        self.security = security;
        self
    }

    /// Sets when stored results are reused.
    pub fn reuse(mut self, reuse: Reuse) -> Self {
        self.reuse = reuse;
        self
    }

    /// Sets the namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Sets the acknowledgement wait.
    pub fn ack_wait(mut self, ack_wait: Duration) -> Self {
        self.ack_wait = ack_wait;
        self
    }

    /// Sets the number of attempts before a job is recorded as failed.
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Checks the values.
    pub fn validate(&self) -> Result<()> {
        if self.nats_url.trim().is_empty() {
            return Err(DistError::Config("the NATS URL is empty".into()));
        }
        if self.database_url.trim().is_empty() {
            return Err(DistError::Config("the database URL is empty".into()));
        }
        check_token("namespace", &self.namespace)?;
        if self.ack_wait < Duration::from_millis(300) {
            return Err(DistError::Config(format!(
                "ack_wait {:?} is too short for heartbeats (at least 300 ms)",
                self.ack_wait
            )));
        }
        if self.max_attempts == 0 {
            return Err(DistError::Config("max_attempts must be at least 1".into()));
        }
        if self.result_timeout.is_some_and(|t| t.is_zero()) {
            return Err(DistError::Config(
                "the result timeout must be longer than zero".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.reuse.recheck) {
            return Err(DistError::Config(format!(
                "the re-check fraction {} is not between 0 and 1",
                self.reuse.recheck
            )));
        }
        Ok(())
    }

    pub(crate) fn jobs_stream(&self) -> String {
        format!("{}_JOBS", self.namespace.to_uppercase())
    }

    pub(crate) fn results_stream(&self) -> String {
        format!("{}_RESULTS", self.namespace.to_uppercase())
    }

    pub(crate) fn job_subject(&self, device_kind: &str, priority: u8) -> String {
        format!("{}.eval.{device_kind}.p{priority}", self.namespace)
    }

    /// Where a job goes first when compile workers build it for the execute workers
    /// (`<namespace>.compile.<device kind>.p<priority>`; same stream as the jobs).
    pub(crate) fn compile_subject(&self, device_kind: &str, priority: u8) -> String {
        format!("{}.compile.{device_kind}.p{priority}", self.namespace)
    }

    /// Where a compile worker passes a built job on to the execute workers
    /// (`<namespace>.built.<device kind>.p<priority>`; same stream). Apart from the jobs of
    /// searches, so that a worker's credentials never allow publishing a search's kind of job.
    pub(crate) fn built_subject(&self, device_kind: &str, priority: u8) -> String {
        format!("{}.built.{device_kind}.p{priority}", self.namespace)
    }

    /// Where a search's questions to an endpoint go (`<namespace>.ask.<endpoint>`; same
    /// stream as the jobs).
    pub(crate) fn ask_subject(&self, endpoint: &str) -> String {
        format!("{}.ask.{endpoint}", self.namespace)
    }

    pub(crate) fn result_subject(&self, run_id: &str) -> String {
        format!("{}.result.{run_id}", self.namespace)
    }

    /// The redelivery delays after a lost worker: the acknowledgement wait, then doubling.
    pub(crate) fn backoff(&self) -> Vec<Duration> {
        (0..self.max_attempts)
            .map(|i| self.ack_wait.saturating_mul(1 << i.min(6)))
            .collect()
    }

    /// Heartbeat period during an evaluation.
    pub(crate) fn heartbeat(&self) -> Duration {
        self.ack_wait / 3
    }
}

/// Checks that `value` can be one token of a NATS subject and a stream or consumer name.
pub(crate) fn check_token(what: &str, value: &str) -> Result<()> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(DistError::Config(format!(
            "{what} '{value}' must be 1–64 letters, digits, '-' or '_'"
        )))
    }
}

/// Turns any text into a subject token: other characters become `-`, and an empty or long
/// result is replaced by a hash.
pub fn subject_token(text: &str) -> String {
    let token: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if token.is_empty() || token.len() > 64 {
        blake3::hash(text.as_bytes()).to_hex()[..32].to_string()
    } else {
        token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_a_url_password() {
        let c = DistConfig::new(
            "nats://w:nats-pw-1234@a:4222,nats://w:nats-pw-1234@b:4222",
            "postgres://kf:db-pw-5678@db/kf",
        );
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("nats-pw-1234") && !shown.contains("db-pw-5678"),
            "{shown}"
        );
        assert!(shown.contains("postgres://kf:[redacted]@db/kf"), "{shown}");
    }

    #[test]
    fn tokens_are_checked_and_made() {
        assert!(check_token("x", "opencl-cpu_1").is_ok());
        assert!(check_token("x", "a.b").is_err());
        assert!(check_token("x", "").is_err());
        assert_eq!(subject_token("Intel(R) CPU"), "intel-r--cpu");
        assert_eq!(subject_token("").len(), 32);
    }

    #[test]
    fn backoff_doubles_and_validation_rejects_nonsense() {
        let c = DistConfig::new("nats://x", "postgres://y").ack_wait(Duration::from_secs(1));
        assert_eq!(
            c.backoff(),
            vec![
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(4)
            ]
        );
        assert!(c.validate().is_ok());
        assert!(c.clone().max_attempts(0).validate().is_err());
        assert!(c.clone().namespace("a b").validate().is_err());
        assert!(c.ack_wait(Duration::from_millis(10)).validate().is_err());
    }
}
