//! [`LlmGateway`]: what stands between a mutator and an [`LlmClient`]: record/replay, the hard
//! budget (with reservations for requests in flight), the concurrency limit, prices, and
//! usage statistics. It owns no runtime (its semaphore is executor-independent).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::client::{ChatRequest, ChatResponse, LlmClient};
use crate::config::{LlmBudget, ModelSpec};
use crate::error::{FailureKind, LlmFailure, PromptError};
use crate::llm_budget::{BudgetExceeded, BudgetTracker, Reservation, Spend};
use crate::record::{ExchangeKey, ExchangeLog, ExchangeOutcome, ExchangeRecord, RecordMode};

/// Usage statistics of a gateway since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmStats {
    /// Requests sent to the server.
    pub live_requests: u64,
    /// Answers taken from the records instead.
    pub recorded_answers: u64,
    /// Requests that failed after their retries (live or replayed).
    pub failures: u64,
    /// Requests the budget refused (nothing sent).
    pub budget_refusals: u64,
    /// HTTP attempts of live requests, retries included.
    pub attempts: u64,
    /// Prompt tokens of live answers.
    pub prompt_tokens: u64,
    /// Completion tokens of live answers.
    pub completion_tokens: u64,
    /// Cost of live answers, US dollars.
    pub cost_usd: f64,
    /// Summed latency of live requests, milliseconds.
    pub latency_ms: u64,
    /// Replayed requests whose content differed from the recorded request at their position
    /// (they got the recorded answer anyway).
    pub replay_divergences: u64,
}

impl LlmStats {
    /// Prompt plus completion tokens of live answers.
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// An answer from the gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The model's answer.
    pub response: ChatResponse,
    /// What it cost (for a recorded answer: what it cost when it was recorded).
    pub cost_usd: f64,
    /// True when it came from the records.
    pub recorded: bool,
    /// Its record key.
    pub key: ExchangeKey,
}

struct Inner {
    client: Box<dyn LlmClient>,
    budget: BudgetTracker,
    models: IndexMap<String, ModelSpec>,
    semaphore: tokio::sync::Semaphore,
    log: Option<ExchangeLog>,
    occurrences: Mutex<HashMap<(String, String), u32>>,
    stats: Mutex<LlmStats>,
}

/// Record/replay, budget, concurrency and prices around an [`LlmClient`]. Cheap to clone.
///
/// ```
/// use kf_prompt::{async_trait, ChatMessage, ChatRequest, ChatResponse, LlmBudget, LlmClient, LlmFailure, LlmGateway};
///
/// struct Echo;
/// #[async_trait]
/// impl LlmClient for Echo {
///     async fn complete(&self, r: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
///         Ok(ChatResponse::text(r.messages[0].content.clone()))
///     }
/// }
///
/// let gateway = LlmGateway::builder(Echo).budget(LlmBudget::requests(1)).build()?;
/// let ask = |text: &str| ChatRequest::new("m", vec![ChatMessage::user(text)]);
/// let first = futures::executor::block_on(gateway.ask("step-0", ask("hi")))?;
/// assert_eq!(first.response.content, "hi");
/// let second = futures::executor::block_on(gateway.ask("step-1", ask("again")));
/// assert!(second.unwrap_err().is_budget_exhausted());
/// # Ok::<(), kf_prompt::PromptError>(())
/// ```
#[derive(Clone)]
pub struct LlmGateway {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LlmGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmGateway")
            .field("client", &self.inner.client.describe())
            .field("budget", self.inner.budget.limit())
            .field(
                "records",
                &self
                    .inner
                    .log
                    .as_ref()
                    .map(|l| (l.path().to_path_buf(), l.mode())),
            )
            .finish()
    }
}

/// Builds an [`LlmGateway`].
pub struct GatewayBuilder {
    client: Box<dyn LlmClient>,
    budget: LlmBudget,
    models: Vec<ModelSpec>,
    max_concurrency: usize,
    records: Option<(std::path::PathBuf, RecordMode)>,
}

impl GatewayBuilder {
    /// The hard budget (default: none).
    pub fn budget(mut self, budget: LlmBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Models with their prices (unknown models are free).
    pub fn models(mut self, models: &[ModelSpec]) -> Self {
        self.models = models.to_vec();
        self
    }

    /// Requests in flight at most (default 2).
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = n.max(1);
        self
    }

    /// Appends every exchange to `path` and answers from its successful answers.
    pub fn record(mut self, path: impl AsRef<Path>) -> Self {
        self.records = Some((path.as_ref().to_path_buf(), RecordMode::Record));
        self
    }

    /// Answers only from the records at `path`; sends nothing.
    pub fn replay(mut self, path: impl AsRef<Path>) -> Self {
        self.records = Some((path.as_ref().to_path_buf(), RecordMode::Replay));
        self
    }

    /// The gateway. In record mode the spend of the records already there counts against the
    /// budget.
    pub fn build(self) -> Result<LlmGateway, PromptError> {
        let budget = BudgetTracker::new(self.budget);
        let log = match self.records {
            Some((path, mode)) => Some(ExchangeLog::open(path, mode)?),
            None => None,
        };
        if let Some(log) = log.as_ref().filter(|l| l.mode() == RecordMode::Record) {
            budget.preload(log.preloaded_spend());
        }
        Ok(LlmGateway {
            inner: Arc::new(Inner {
                client: self.client,
                budget,
                models: self
                    .models
                    .into_iter()
                    .map(|m| (m.name.clone(), m))
                    .collect(),
                semaphore: tokio::sync::Semaphore::new(self.max_concurrency),
                log,
                occurrences: Mutex::new(HashMap::new()),
                stats: Mutex::new(LlmStats::default()),
            }),
        })
    }
}

impl LlmGateway {
    /// A builder around `client`.
    pub fn builder(client: impl LlmClient + 'static) -> GatewayBuilder {
        GatewayBuilder {
            client: Box::new(client),
            budget: LlmBudget::unlimited(),
            models: Vec::new(),
            max_concurrency: 2,
            records: None,
        }
    }

    /// Statistics so far.
    pub fn stats(&self) -> LlmStats {
        *self.inner.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The budget tracker.
    pub fn budget(&self) -> &BudgetTracker {
        &self.inner.budget
    }

    /// The records, if any.
    pub fn records(&self) -> Option<&ExchangeLog> {
        self.inner.log.as_ref()
    }

    /// What the client is (for logs).
    pub fn describe(&self) -> String {
        self.inner.client.describe()
    }

    /// The price of `usage` with `model`.
    pub fn cost_usd(&self, model: &str, usage: &crate::client::TokenUsage) -> f64 {
        self.inner
            .models
            .get(model)
            .map_or(0.0, |m| m.cost_usd(usage))
    }

    fn stats_mut(&self) -> std::sync::MutexGuard<'_, LlmStats> {
        self.inner.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The key the next `request` in `scope` gets.
    fn next_key(&self, scope: &str, request: &ChatRequest) -> ExchangeKey {
        let hash = request.content_hash();
        let mut occ = self
            .inner
            .occurrences
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let n = occ.entry((hash.clone(), scope.to_owned())).or_insert(0);
        let occurrence = *n;
        *n += 1;
        // The empty hash (no real hash is empty) counts every request of the scope.
        let s = occ.entry((String::new(), scope.to_owned())).or_insert(0);
        let seq = *s;
        *s += 1;
        ExchangeKey {
            hash,
            scope: scope.to_owned(),
            occurrence,
            seq,
        }
    }

    fn record(&self, record: &ExchangeRecord) {
        if let Some(log) = &self.inner.log {
            if let Err(e) = log.append(record) {
                tracing::error!("cannot record an LLM exchange: {e}");
            }
        }
    }

    /// Asks `request` within `scope` (a name the answer is recorded under, such as `step-12`):
    /// from the records when they hold the answer, otherwise from the client within the budget
    /// and the concurrency limit. Every live exchange, failures included, is recorded.
    pub async fn ask(
        &self,
        scope: impl Into<String>,
        request: ChatRequest,
    ) -> Result<Exchange, PromptError> {
        let scope: String = scope.into();
        let key = self.next_key(&scope, &request);
        if let Some(recorded) = self.recorded_outcome(&key, &request) {
            return recorded;
        }
        let _permit = self
            .inner
            .semaphore
            .acquire()
            .await
            .map_err(|_| LlmFailure::new(FailureKind::Cancelled, "the gateway is closed"))?;
        let reservation = match self.reserve(&request) {
            Ok(r) => r,
            Err(why) => return Err(self.budget_refused(key, request, &why)),
        };
        let started = Instant::now();
        let result = self.inner.client.complete(&request).await;
        let latency_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(response) => Ok(self.answered(key, request, response, reservation, latency_ms)),
            Err(failure) => Err(self.failed(key, request, failure, reservation, latency_ms)),
        }
    }

    /// The recorded outcome of the request `key` names, if the records hold one (`None`: ask
    /// the client); a replay that misses is an error, as nothing may be sent then.
    fn recorded_outcome(
        &self,
        key: &ExchangeKey,
        request: &ChatRequest,
    ) -> Option<Result<Exchange, PromptError>> {
        let log = self.inner.log.as_ref()?;
        let Some(record) = log.lookup(key) else {
            return (log.mode() == RecordMode::Replay).then(|| {
                Err(PromptError::ReplayMiss {
                    key: key.to_string(),
                    model: request.model.clone(),
                })
            });
        };
        if record.key.hash != key.hash {
            self.stats_mut().replay_divergences += 1;
            tracing::debug!(%key, recorded = %record.key, "replayed request differs from the recorded one");
        }
        Some(match record.outcome {
            ExchangeOutcome::Answer { response } => {
                self.stats_mut().recorded_answers += 1;
                Ok(Exchange {
                    response,
                    cost_usd: record.cost_usd,
                    recorded: true,
                    key: key.clone(),
                })
            }
            ExchangeOutcome::Failure { failure } => {
                let mut s = self.stats_mut();
                s.failures += 1;
                if failure.kind == FailureKind::BudgetExhausted {
                    s.budget_refusals += 1;
                }
                Err(PromptError::Llm(failure))
            }
        })
    }

    /// Reserves what `request` may cost at most (its prompt estimate plus every reply token)
    /// against the budget, until its actual spend is known.
    fn reserve(&self, request: &ChatRequest) -> Result<Reservation, BudgetExceeded> {
        let estimate_usage = crate::client::TokenUsage {
            prompt_tokens: request.estimated_prompt_tokens(),
            completion_tokens: u64::from(request.max_tokens),
            estimated: true,
        };
        let estimate = Spend {
            requests: 1,
            tokens: estimate_usage.total(),
            cost_usd: self.cost_usd(&request.model, &estimate_usage),
        };
        self.inner.budget.reserve(estimate)
    }

    /// Records and counts a request the budget refused (nothing was sent).
    fn budget_refused(
        &self,
        key: ExchangeKey,
        request: ChatRequest,
        why: &BudgetExceeded,
    ) -> PromptError {
        let failure = LlmFailure::new(FailureKind::BudgetExhausted, why.to_string());
        self.record_failure(key, request, &failure, 0);
        let mut s = self.stats_mut();
        s.budget_refusals += 1;
        s.failures += 1;
        PromptError::Llm(failure)
    }

    /// Settles a live answer: its actual spend, the statistics, the record.
    fn answered(
        &self,
        key: ExchangeKey,
        request: ChatRequest,
        response: ChatResponse,
        reservation: Reservation,
        latency_ms: u64,
    ) -> Exchange {
        let cost_usd = self.cost_usd(&request.model, &response.usage);
        reservation.commit(Spend {
            requests: 1,
            tokens: response.usage.total(),
            cost_usd,
        });
        {
            let mut s = self.stats_mut();
            s.live_requests += 1;
            s.attempts += u64::from(response.attempts.max(1));
            // Saturating: the counts are the server's word.
            s.prompt_tokens = s.prompt_tokens.saturating_add(response.usage.prompt_tokens);
            s.completion_tokens = s
                .completion_tokens
                .saturating_add(response.usage.completion_tokens);
            s.cost_usd += cost_usd;
            s.latency_ms += latency_ms;
        }
        self.record(&ExchangeRecord::new(
            key.clone(),
            request,
            ExchangeOutcome::Answer {
                response: response.clone(),
            },
            cost_usd,
            latency_ms,
        ));
        Exchange {
            response,
            cost_usd,
            recorded: false,
            key,
        }
    }

    /// Settles a live request that failed after its retries: a request spent if any attempt
    /// reached the server, the statistics, the record.
    fn failed(
        &self,
        key: ExchangeKey,
        request: ChatRequest,
        failure: LlmFailure,
        reservation: Reservation,
        latency_ms: u64,
    ) -> PromptError {
        reservation.commit(Spend {
            requests: u64::from(failure.attempts > 0),
            tokens: 0,
            cost_usd: 0.0,
        });
        {
            let mut s = self.stats_mut();
            s.live_requests += u64::from(failure.attempts > 0);
            s.attempts += u64::from(failure.attempts);
            s.failures += 1;
            s.latency_ms += latency_ms;
        }
        self.record_failure(key, request, &failure, latency_ms);
        PromptError::Llm(failure)
    }

    /// Records a request that got no answer (nothing spent on it).
    fn record_failure(
        &self,
        key: ExchangeKey,
        request: ChatRequest,
        failure: &LlmFailure,
        latency_ms: u64,
    ) {
        self.record(&ExchangeRecord::new(
            key,
            request,
            ExchangeOutcome::Failure {
                failure: failure.clone(),
            },
            0.0,
            latency_ms,
        ));
    }
}
