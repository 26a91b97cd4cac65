//! Record and replay of LLM exchanges: one JSON line per exchange (request, answer or failure,
//! usage, cost, latency, attempts), appended as it completes, so a killed run loses at most the
//! exchanges in flight.
//!
//! Every exchange has a key: the BLAKE3 hash of the whole request, a scope the caller chooses
//! (the LLM mutator uses the engine step, `step-12`, and the meta-prompt epoch, `meta-3`), the
//! occurrence (how many identical requests this process made before in that scope) and the
//! sequence number (how many requests of any content it made before in that scope). None of it
//! depends on timing:
//!
//! * [`RecordMode::Record`] answers from the records when they hold a successful answer to the
//!   very same request (hash, scope and occurrence), and asks the server otherwise: a resumed
//!   run does not pay twice for answers it already has.
//! * [`RecordMode::Replay`] answers every request from the records by its position (scope and
//!   sequence number) and sends nothing: a run replayed with the same seed gets the same
//!   answers in the same places and builds the same archive. A replayed request whose hash
//!   differs from the recorded one (its prompt showed a timing measured anew) still gets the
//!   recorded answer and is counted as a divergence; a position the records do not hold is an
//!   error.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::client::{ChatRequest, ChatResponse};
use crate::error::{FailureKind, LlmFailure, PromptError};
use crate::llm_budget::Spend;

/// The file name the LLM mutator uses inside a run folder.
pub const EXCHANGES_FILE: &str = "llm_exchanges.jsonl";

/// Format version of a record line.
pub const RECORD_VERSION: u32 = 1;

/// How records are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordMode {
    /// Append every exchange; answer from recorded successful answers when there is one.
    Record,
    /// Answer only from the records; send nothing; write nothing.
    Replay,
}

/// The key of an exchange.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExchangeKey {
    /// BLAKE3 of the request ([`ChatRequest::content_hash`]).
    pub hash: String,
    /// The caller's scope (`step-12`).
    pub scope: String,
    /// How many identical requests this process made in the scope before this one.
    pub occurrence: u32,
    /// How many requests (of any content) this process made in the scope before this one.
    #[serde(default)]
    pub seq: u32,
}

impl std::fmt::Display for ExchangeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            &self.hash[..self.hash.len().min(16)],
            self.scope,
            self.occurrence
        )
    }
}

/// How an exchange ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ExchangeOutcome {
    /// The model answered.
    Answer {
        /// The answer.
        response: ChatResponse,
    },
    /// No answer.
    Failure {
        /// Why.
        failure: LlmFailure,
    },
}

/// One recorded exchange: a line of the records file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExchangeRecord {
    /// Format version.
    pub v: u32,
    /// Its key.
    pub key: ExchangeKey,
    /// When it completed, milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// The request as sent.
    pub request: ChatRequest,
    /// The answer or the failure.
    #[serde(flatten)]
    pub outcome: ExchangeOutcome,
    /// What it cost, US dollars.
    #[serde(default)]
    pub cost_usd: f64,
    /// Wall-clock time of the exchange, retries included.
    #[serde(default)]
    pub latency_ms: u64,
}

impl ExchangeRecord {
    /// A record stamped with the current time.
    pub fn new(
        key: ExchangeKey,
        request: ChatRequest,
        outcome: ExchangeOutcome,
        cost_usd: f64,
        latency_ms: u64,
    ) -> Self {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        ExchangeRecord {
            v: RECORD_VERSION,
            key,
            unix_ms,
            request,
            outcome,
            cost_usd,
            latency_ms,
        }
    }

    /// What this exchange spent: a request if anything was sent, its tokens and cost.
    pub fn spend(&self) -> Spend {
        match &self.outcome {
            ExchangeOutcome::Answer { response } => Spend {
                requests: 1,
                tokens: response.usage.total(),
                cost_usd: self.cost_usd,
            },
            ExchangeOutcome::Failure { failure } => Spend {
                requests: u64::from(
                    failure.attempts > 0 && failure.kind != FailureKind::BudgetExhausted,
                ),
                tokens: 0,
                cost_usd: self.cost_usd,
            },
        }
    }
}

/// (hash, scope, occurrence).
type ContentKey = (String, String, u32);
/// (scope, sequence number).
type PositionKey = (String, u32);

#[derive(Debug, Default)]
struct Index {
    /// Last record per position.
    last: HashMap<PositionKey, ExchangeRecord>,
    /// Last successful answer per request.
    answers: HashMap<ContentKey, ExchangeRecord>,
}

impl Index {
    fn add(&mut self, record: &ExchangeRecord) {
        let k = &record.key;
        if matches!(record.outcome, ExchangeOutcome::Answer { .. }) {
            self.answers.insert(
                (k.hash.clone(), k.scope.clone(), k.occurrence),
                record.clone(),
            );
        }
        self.last.insert((k.scope.clone(), k.seq), record.clone());
    }
}

/// An exchange records file: loaded once, then appended to.
#[derive(Debug)]
pub struct ExchangeLog {
    path: PathBuf,
    mode: RecordMode,
    file: Mutex<Option<File>>,
    index: Mutex<Index>,
    loaded: usize,
    skipped: usize,
    preloaded: Spend,
    scope_costs: HashMap<String, f64>,
}

impl ExchangeLog {
    /// Opens (and in [`RecordMode::Record`], creates) the records at `path`. A torn last line
    /// (a run killed while writing) is skipped, and the next record starts on a fresh line.
    pub fn open(path: impl AsRef<Path>, mode: RecordMode) -> Result<Self, PromptError> {
        let path = path.as_ref().to_path_buf();
        let io = |source: std::io::Error| PromptError::Records {
            path: path.clone(),
            source,
        };
        if mode == RecordMode::Replay && !path.exists() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no records to replay",
            )));
        }
        let mut index = Index::default();
        let mut loaded = 0;
        let mut skipped = 0;
        let mut preloaded = Spend::default();
        let mut scope_costs: HashMap<String, f64> = HashMap::new();
        if path.exists() {
            let reader = BufReader::new(File::open(&path).map_err(io)?);
            for line in reader.split(b'\n') {
                let line = line.map_err(io)?;
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match serde_json::from_slice::<ExchangeRecord>(&line) {
                    Ok(record) => {
                        loaded += 1;
                        let s = record.spend();
                        preloaded.add(&s);
                        *scope_costs.entry(record.key.scope.clone()).or_insert(0.0) +=
                            record.cost_usd;
                        index.add(&record);
                    }
                    Err(e) => {
                        skipped += 1;
                        tracing::warn!(path = %path.display(), "skipping an unreadable exchange record: {e}");
                    }
                }
            }
        }
        let file = match mode {
            RecordMode::Replay => None,
            RecordMode::Record => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(io)?;
                }
                let mut f = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .read(true)
                    .open(&path)
                    .map_err(io)?;
                // A torn last line must not swallow the next record.
                let len = f.metadata().map_err(io)?.len();
                if len > 0 {
                    let mut last = [0u8; 1];
                    f.seek(SeekFrom::Start(len - 1)).map_err(io)?;
                    f.read_exact(&mut last).map_err(io)?;
                    if last[0] != b'\n' {
                        f.write_all(b"\n").map_err(io)?;
                    }
                }
                Some(f)
            }
        };
        Ok(ExchangeLog {
            path,
            mode,
            file: Mutex::new(file),
            index: Mutex::new(index),
            loaded,
            skipped,
            preloaded,
            scope_costs,
        })
    }

    /// The records file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How the records are used.
    pub fn mode(&self) -> RecordMode {
        self.mode
    }

    /// Records read when opened.
    pub fn loaded(&self) -> usize {
        self.loaded
    }

    /// Unreadable lines skipped when opened.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// What the records read when opened had spent.
    pub fn preloaded_spend(&self) -> Spend {
        self.preloaded
    }

    /// What the exchanges of `scope` read when opened cost, US dollars.
    pub fn recorded_cost(&self, scope: &str) -> f64 {
        self.scope_costs.get(scope).copied().unwrap_or(0.0)
    }

    /// The recorded exchange that answers `key` in this mode: in [`RecordMode::Record`] a
    /// successful answer to the same request (hash, scope, occurrence), in
    /// [`RecordMode::Replay`] whatever happened last at the same position (scope, sequence
    /// number), whatever its hash.
    pub fn lookup(&self, key: &ExchangeKey) -> Option<ExchangeRecord> {
        let index = self.index.lock().unwrap_or_else(|p| p.into_inner());
        match self.mode {
            RecordMode::Record => index
                .answers
                .get(&(key.hash.clone(), key.scope.clone(), key.occurrence))
                .cloned(),
            RecordMode::Replay => index.last.get(&(key.scope.clone(), key.seq)).cloned(),
        }
    }

    /// Appends a record as one line, flushed before returning (nothing in
    /// [`RecordMode::Replay`]).
    pub fn append(&self, record: &ExchangeRecord) -> Result<(), PromptError> {
        let io = |source: std::io::Error| PromptError::Records {
            path: self.path.clone(),
            source,
        };
        self.index
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(record);
        let mut guard = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let Some(file) = guard.as_mut() else {
            return Ok(());
        };
        let json = serde_json::to_string(record)
            .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        // No secret of this process in a record (a prompt quoting a compiler log, say): the
        // replacement is plain text inside a JSON string, so the line stays valid JSON.
        let mut line = kf_core::redact::redact(&json).into_owned().into_bytes();
        line.push(b'\n');
        // One write per record: with O_APPEND the line lands whole or (killed mid-write) torn
        // at the end, which the next open skips.
        file.write_all(&line).map_err(io)?;
        file.flush().map_err(io)
    }

    /// Every readable record in the file, in order.
    pub fn read_all(path: impl AsRef<Path>) -> Result<Vec<ExchangeRecord>, PromptError> {
        let path = path.as_ref();
        let io = |source: std::io::Error| PromptError::Records {
            path: path.to_path_buf(),
            source,
        };
        let reader = BufReader::new(File::open(path).map_err(io)?);
        let mut out = Vec::new();
        for line in reader.split(b'\n') {
            let line = line.map_err(io)?;
            if let Ok(r) = serde_json::from_slice::<ExchangeRecord>(&line) {
                out.push(r);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{ChatMessage, TokenUsage};

    fn record(scope: &str, content: &str) -> ExchangeRecord {
        let request = ChatRequest::new("m", vec![ChatMessage::user(content)]);
        let mut response = ChatResponse::text(format!("answer to {content}"));
        response.usage = TokenUsage {
            prompt_tokens: 10,
            completion_tokens: 5,
            estimated: false,
        };
        ExchangeRecord::new(
            ExchangeKey {
                hash: request.content_hash(),
                scope: scope.into(),
                occurrence: 0,
                seq: 0,
            },
            request,
            ExchangeOutcome::Answer { response },
            0.25,
            7,
        )
    }

    #[test]
    fn survives_a_torn_line_and_keeps_appending() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x/ex.jsonl");
        {
            let log = ExchangeLog::open(&path, RecordMode::Record).unwrap();
            log.append(&record("step-1", "a")).unwrap();
        }
        // A kill in the middle of the second line.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"v":1,"key":{"hash":"ab"#).unwrap();
        drop(f);
        let log = ExchangeLog::open(&path, RecordMode::Record).unwrap();
        assert_eq!((log.loaded(), log.skipped()), (1, 1));
        assert_eq!(log.preloaded_spend().tokens, 15);
        assert!((log.preloaded_spend().cost_usd - 0.25).abs() < 1e-12);
        let b = record("step-2", "b");
        log.append(&b).unwrap();
        drop(log);
        let all = ExchangeLog::read_all(&path).unwrap();
        assert_eq!(all.len(), 2);
        let replay = ExchangeLog::open(&path, RecordMode::Replay).unwrap();
        assert_eq!(replay.lookup(&b.key), Some(b));
    }

    #[test]
    fn record_mode_reuses_only_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ex.jsonl");
        let log = ExchangeLog::open(&path, RecordMode::Record).unwrap();
        let a = record("s", "a");
        let failed = ExchangeRecord {
            outcome: ExchangeOutcome::Failure {
                failure: LlmFailure::new(FailureKind::Timeout, "slow").with_attempts(2),
            },
            ..a.clone()
        };
        log.append(&failed).unwrap();
        assert!(log.lookup(&a.key).is_none());
        drop(log);
        let replay = ExchangeLog::open(&path, RecordMode::Replay).unwrap();
        assert!(matches!(
            replay.lookup(&a.key).map(|r| r.outcome),
            Some(ExchangeOutcome::Failure { .. })
        ));
        assert_eq!(replay.preloaded_spend().requests, 1);
        assert!(ExchangeLog::open(dir.path().join("none"), RecordMode::Replay).is_err());
    }
}
