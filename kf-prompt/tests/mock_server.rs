//! The client, the gateway and the LLM mutator against an in-process OpenAI-compatible mock
//! server on 127.0.0.1: malformed replies, no code block, edits that do not apply, 429 with
//! `retry-after`, 500, a timeout, a reply cut off mid-body, budget exhaustion, concurrency,
//! record/replay and resume. Everything is driven by `futures::executor::block_on`, not tokio.

mod common;
mod support;

use std::convert::Infallible;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use kf_archive::{EliteArchive, RunDir, RunMeta};
use kf_core::prelude::*;
use kf_core::{RunResult, StopReason};
use kf_prompt::{
    async_trait, extraction_failure, ApiKey, ChatMessage, ChatRequest, ChatResponse, ExchangeLog,
    ExchangeOutcome, FailureKind, LlmBudget, LlmClient, LlmFailure, LlmGateway, LlmMutator,
    LlmMutatorConfig, MetaConfig, OpenAiClient, OpenAiConfig, PromptError, RetryPolicy,
    EXCHANGES_FILE, VARIANTS_FILE,
};
use serde_json::Value;
use support::{MockServer, Reply};

fn fast_retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(5),
    }
}

fn client(server: &MockServer, attempts: u32, timeout_ms: u64) -> OpenAiClient {
    OpenAiClient::new(
        OpenAiConfig::new(server.base_url())
            .with_timeout(Duration::from_millis(timeout_ms))
            .with_retry(fast_retry(attempts)),
    )
    .unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(
        "mock",
        vec![ChatMessage::system("sys"), ChatMessage::user(text)],
    )
    .with_max_tokens(64)
    .with_seed(7)
}

// ---------------------------------------------------------------------------------------------
// The client

#[test]
fn answers_with_usage_and_sends_the_key_only_in_the_header() {
    let server = MockServer::always(Reply::completion("hello", "stop", 12, 3));
    let config = OpenAiConfig::new(server.base_url()).with_api_key(ApiKey::new("sk-test-secret"));
    assert!(!format!("{config:?}").contains("sk-test-secret"));
    let c = OpenAiClient::new(config).unwrap();
    assert!(!format!("{c:?}").contains("sk-test-secret"));
    let r = block_on(c.complete(&ask("hi"))).unwrap();
    assert_eq!(r.content, "hello");
    assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (12, 3));
    assert_eq!(r.attempts, 1);
    let got = &server.received()[0];
    assert_eq!(got.authorization.as_deref(), Some("Bearer sk-test-secret"));
    assert_eq!(got.body["model"], "mock");
    assert_eq!(got.body["max_tokens"], 64);
    assert_eq!(got.body["seed"], 7);
    assert_eq!(got.body["messages"][1]["content"], "hi");
    assert!(!got.body.to_string().contains("sk-test-secret"));
}

#[test]
fn retries_429_honouring_retry_after() {
    let server = MockServer::sequence(vec![
        Reply::status(429, "slow down").header("retry-after", "1"),
        Reply::ok("finally"),
    ]);
    // A long backoff: if the client waited for it instead of retry-after, this would take 5 s.
    let c = OpenAiClient::new(
        OpenAiConfig::new(server.base_url()).with_retry(RetryPolicy {
            base_delay: Duration::from_secs(5),
            ..fast_retry(3)
        }),
    )
    .unwrap();
    let started = Instant::now();
    let r = block_on(c.complete(&ask("x"))).unwrap();
    let waited = started.elapsed();
    assert_eq!(r.content, "finally");
    assert_eq!(r.attempts, 2);
    assert!(waited >= Duration::from_millis(950), "{waited:?}");
    assert!(waited < Duration::from_secs(4), "{waited:?}");
}

#[test]
fn a_retry_after_beyond_the_limit_fails_at_once() {
    let server =
        MockServer::always(Reply::status(429, "come back tomorrow").header("retry-after", "86400"));
    let err = block_on(client(&server, 5, 2000).complete(&ask("x"))).unwrap_err();
    assert_eq!(err.kind, FailureKind::RateLimited);
    assert_eq!(err.status, Some(429));
    assert!(err.message.contains("come back tomorrow"));
    assert_eq!(server.count(), 1);
}

#[test]
fn retries_500_and_gives_up_after_the_last_attempt() {
    let server = MockServer::sequence(vec![
        Reply::status(500, "boom"),
        Reply::status(503, "busy"),
        Reply::ok("ok"),
    ]);
    let r = block_on(client(&server, 3, 2000).complete(&ask("x"))).unwrap();
    assert_eq!((r.content.as_str(), r.attempts), ("ok", 3));

    let server = MockServer::always(Reply::status(500, "always broken"));
    let err = block_on(client(&server, 3, 2000).complete(&ask("x"))).unwrap_err();
    assert_eq!(err.kind, FailureKind::Server);
    assert_eq!(err.attempts, 3);
    assert_eq!(server.count(), 3);
    assert!(err.to_string().contains("always broken"));
}

#[test]
fn timeouts_are_retried_and_reported() {
    let slow = Reply::Delay(Duration::from_secs(3), Box::new(Reply::ok("late")));
    let server = MockServer::sequence(vec![slow.clone(), Reply::ok("quick")]);
    let r = block_on(client(&server, 2, 400).complete(&ask("x"))).unwrap();
    assert_eq!((r.content.as_str(), r.attempts), ("quick", 2));

    let server = MockServer::always(slow);
    let started = Instant::now();
    let err = block_on(client(&server, 2, 300).complete(&ask("x"))).unwrap_err();
    assert_eq!(err.kind, FailureKind::Timeout);
    assert_eq!(err.attempts, 2);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn a_reply_cut_off_mid_body_is_retried_then_reported() {
    let cut = Reply::CutOff {
        declared: 4000,
        body: r#"{"choices":[{"message":{"content":"__kernel void gemm("#.into(),
    };
    let server = MockServer::sequence(vec![cut.clone(), Reply::ok("whole")]);
    let r = block_on(client(&server, 3, 2000).complete(&ask("x"))).unwrap();
    assert_eq!((r.content.as_str(), r.attempts), ("whole", 2));

    let server = MockServer::always(cut);
    let err = block_on(client(&server, 2, 2000).complete(&ask("x"))).unwrap_err();
    assert_eq!(err.kind, FailureKind::Truncated, "{err}");
    assert_eq!(err.attempts, 2);
}

#[test]
fn malformed_and_rejected_replies_are_not_retried() {
    let server = MockServer::always(Reply::junk("<html>gateway says hi</html>"));
    let err = block_on(client(&server, 4, 2000).complete(&ask("x"))).unwrap_err();
    assert_eq!((err.kind, err.attempts), (FailureKind::Malformed, 1));
    assert_eq!(server.count(), 1);

    let server = MockServer::always(Reply::junk(r#"{"id":"x","choices":[]}"#));
    let err = block_on(client(&server, 4, 2000).complete(&ask("x"))).unwrap_err();
    assert_eq!(err.kind, FailureKind::Malformed);

    let server = MockServer::always(Reply::status(400, "context length exceeded"));
    let err = block_on(client(&server, 4, 2000).complete(&ask("x"))).unwrap_err();
    assert_eq!((err.kind, err.status), (FailureKind::Rejected, Some(400)));
    assert!(err.message.contains("context length exceeded"));
    assert_eq!(server.count(), 1);
}

#[test]
fn nothing_listening_is_a_transport_failure() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = OpenAiClient::new(
        OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1")).with_retry(fast_retry(2)),
    )
    .unwrap();
    let err = block_on(c.complete(&ask("x"))).unwrap_err();
    assert_eq!(err.kind, FailureKind::Transport, "{err}");
    assert!(OpenAiClient::new(OpenAiConfig::new("ftp://x")).is_err());
}

// ---------------------------------------------------------------------------------------------
// The gateway: budget, concurrency, records

#[test]
fn the_budget_counts_requests_in_flight_and_refuses_without_sending() {
    let server = MockServer::always(Reply::Delay(
        Duration::from_millis(300),
        Box::new(Reply::completion("ok", "stop", 10, 10)),
    ));
    let dir = tempfile::tempdir().unwrap();
    // Each request reserves its estimated prompt (a few tokens) plus 64 reply tokens: two fit
    // in 200 tokens, a third does not while they are in flight.
    let gateway = LlmGateway::builder(client(&server, 1, 5000))
        .budget(LlmBudget::unlimited().with_tokens(200))
        .max_concurrency(4)
        .record(dir.path().join("ex.jsonl"))
        .build()
        .unwrap();
    let results =
        block_on(futures::future::join_all((0..3).map(|i| {
            gateway.ask(format!("step-{i}"), ask(&format!("question {i}")))
        })));
    let refused: Vec<&PromptError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(refused.len(), 1, "{results:?}");
    assert!(refused[0].is_budget_exhausted());
    assert!(
        refused[0]
            .to_string()
            .contains("reserved by requests in flight"),
        "{}",
        refused[0]
    );
    assert_eq!(server.count(), 2);
    // Afterwards only the actual spend (20 tokens each) counts.
    assert_eq!(gateway.budget().spent().tokens, 40);
    assert_eq!(gateway.budget().reserved().tokens, 0);
    let s = gateway.stats();
    assert_eq!((s.live_requests, s.budget_refusals, s.tokens()), (2, 1, 40));
    // The refusal is recorded like any other exchange.
    let records = ExchangeLog::read_all(dir.path().join("ex.jsonl")).unwrap();
    assert_eq!(records.len(), 3);
    assert!(records.iter().any(|r| matches!(&r.outcome,
        ExchangeOutcome::Failure { failure } if failure.kind == FailureKind::BudgetExhausted)));
}

#[test]
fn the_concurrency_limit_holds() {
    let server = MockServer::always(Reply::Delay(
        Duration::from_millis(150),
        Box::new(Reply::ok("ok")),
    ));
    let gateway = LlmGateway::builder(client(&server, 1, 5000))
        .max_concurrency(2)
        .build()
        .unwrap();
    let results = block_on(futures::future::join_all(
        (0..6).map(|i| gateway.ask("s", ask(&format!("q{i}")))),
    ));
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(server.count(), 6);
    assert_eq!(server.max_concurrent(), 2);
}

#[test]
fn records_answer_replays_and_failures_replay_as_failures() {
    let server = MockServer::sequence(vec![
        Reply::ok("one"),
        Reply::status(500, "down"),
        Reply::ok("three"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ex.jsonl");
    let gateway = LlmGateway::builder(client(&server, 1, 2000))
        .record(&path)
        .build()
        .unwrap();
    assert_eq!(
        block_on(gateway.ask("a", ask("q")))
            .unwrap()
            .response
            .content,
        "one"
    );
    assert!(
        block_on(gateway.ask("a", ask("q"))).is_err(),
        "second occurrence of the same request"
    );
    assert_eq!(
        block_on(gateway.ask("b", ask("q")))
            .unwrap()
            .response
            .content,
        "three"
    );
    drop(gateway);

    /// A client that must never be called.
    struct NoServer;
    #[async_trait]
    impl LlmClient for NoServer {
        async fn complete(&self, _: &ChatRequest) -> Result<ChatResponse, LlmFailure> {
            panic!("a replayed run sent a request");
        }
    }
    let replay = LlmGateway::builder(NoServer).replay(&path).build().unwrap();
    let first = block_on(replay.ask("a", ask("q"))).unwrap();
    assert!(first.recorded);
    assert_eq!(first.response.content, "one");
    let second = block_on(replay.ask("a", ask("q"))).unwrap_err();
    assert_eq!(
        second.llm_failure().map(|f| f.kind),
        Some(FailureKind::Server)
    );
    assert_eq!(
        block_on(replay.ask("b", ask("q")))
            .unwrap()
            .response
            .content,
        "three"
    );
    assert!(matches!(
        block_on(replay.ask("c", ask("q"))),
        Err(PromptError::ReplayMiss { .. })
    ));

    // Record mode on the same file: answers are reused, the failure is asked again.
    let server2 = MockServer::always(Reply::ok("retried"));
    let again = LlmGateway::builder(client(&server2, 1, 2000))
        .record(&path)
        .build()
        .unwrap();
    assert_eq!(
        block_on(again.ask("a", ask("q"))).unwrap().response.content,
        "one"
    );
    assert_eq!(
        block_on(again.ask("a", ask("q"))).unwrap().response.content,
        "retried"
    );
    assert_eq!(server2.count(), 1);
    assert_eq!(again.stats().recorded_answers, 1);
}

// ---------------------------------------------------------------------------------------------
// The mutator through the engine

/// Deterministic stand-in for the kernel evaluator: the extraction marker gives
/// `extraction_error` (as `kf-eval` does), `BROKEN` a compile error, anything else is correct
/// with a time derived from its text.
struct FakeEvaluator;

#[async_trait]
impl Evaluator for FakeEvaluator {
    type Error = Infallible;

    async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Infallible> {
        if let Some(reason) = extraction_failure(&c.source) {
            return Ok(Evaluation::failed(Status::ExtractionError, reason));
        }
        if c.source.text.contains("BROKEN") || c.source.manifest.is_none() {
            return Ok(Evaluation::failed(
                Status::CompileError,
                "x.cl:1: error: BROKEN is undeclared",
            ));
        }
        let h = blake3::hash(c.source.text.as_bytes()).as_bytes()[0];
        let t = TimingStats::from_samples(&[1e-3 * (1.0 + f64::from(h % 10) / 10.0)]).unwrap_or(
            TimingStats {
                median_s: 1e-3,
                min_s: 1e-3,
                max_s: 1e-3,
                mean_s: 1e-3,
                stddev_s: 0.0,
                trials: 1,
            },
        );
        Ok(Evaluation::correct(t, None))
    }
}

/// One dimension: local memory (2), unrolled (1), neither (0).
struct Style(DescriptorSpace, bool);

impl BehaviorClassifier for Style {
    type Error = Infallible;
    fn space(&self) -> &DescriptorSpace {
        &self.0
    }
    fn classify(&self, c: &Candidate, _: &Evaluation) -> Result<Descriptor, Infallible> {
        let level = if self.1 {
            0
        } else if c.source.text.contains("__local") {
            2
        } else if c.source.text.contains("unrolled") {
            1
        } else {
            0
        };
        Ok(Descriptor::new([level], "style"))
    }
}

fn style(one_cell: bool) -> Style {
    Style(
        DescriptorSpace::new(vec![Dimension::new(
            "memory_access",
            ["global", "unrolled", "local", "multi"],
        )])
        .unwrap(),
        one_cell,
    )
}

const FULL_LOCAL: &str = "Tile through local memory.\n```opencl\n__kernel void gemm(const int M, const int N, const int K,\n  __global const float* A, __global const float* B, __global float* C) {\n  __local float tile[16][17];\n  C[0] = 0.0f;\n}\n```\n```toml\nentry = \"gemm\"\nlanguage = \"opencl\"\n[params]\nTS = [16]\n[launch]\nglobal = [\"N\", \"M\"]\nlocal = [\"TS\", \"TS\"]\n```\n";
const GOOD_EDIT: &str = "Unroll.\nkernel\n<<<<<<< SEARCH\n    float acc = 0.0f;\n=======\n    float acc = -0.0f; // unrolled\n>>>>>>> REPLACE\n";
const BAD_EDIT: &str = "kernel\n<<<<<<< SEARCH\n    this line is not in the kernel;\n=======\n    neither is this;\n>>>>>>> REPLACE\n";
const REWRITE_UNROLLED: &str = "```opencl\n__kernel void gemm(const int M, const int N, const int K, __global const float* A, __global const float* B, __global float* C) { /* unrolled */ }\n```\n";

/// The model of the engine tests: the reply depends only on the request.
fn model(body: &Value, _: usize) -> Reply {
    let system = body["messages"][0]["content"].as_str().unwrap_or("");
    let n = body["messages"].as_array().map_or(0, Vec::len);
    let last = body["messages"][n.saturating_sub(1)]["content"]
        .as_str()
        .unwrap_or("");
    if system.contains("You maintain the instructions") {
        return Reply::ok("```text\n- Evolved advice: coalesce the loads of B first.\n```");
    }
    if last.contains("could not be applied") {
        return Reply::ok(REWRITE_UNROLLED);
    }
    match body["seed"].as_u64().unwrap_or(0) % 5 {
        0 => Reply::ok(FULL_LOCAL),
        1 => Reply::ok("I think tiling the loops would help a lot."),
        2 => Reply::ok(BAD_EDIT),
        3 => Reply::ok(GOOD_EDIT),
        _ => Reply::completion(
            "```opencl\n__kernel void gemm(const int M,",
            "length",
            90,
            64,
        ),
    }
}

/// The same model with latencies that vary with arrival order, so that concurrent steps
/// complete in varying order.
fn jittery(body: &Value, i: usize) -> Reply {
    Reply::Delay(
        Duration::from_millis((i as u64 * 37 % 7) * 15),
        Box::new(model(body, i)),
    )
}

fn mutator_config() -> LlmMutatorConfig {
    LlmMutatorConfig {
        max_reply_tokens: 256,
        meta: MetaConfig {
            every_steps: 3,
            lag_steps: 2,
            ..MetaConfig::default()
        },
        ..LlmMutatorConfig::default()
    }
}

fn task() -> Task {
    Task::new("gemm")
        .with_description("Row-major SGEMM C[M x N] = A[M x K] * B[K x N].")
        .with_size("M", 64)
        .with_size("N", 64)
        .with_size("K", 64)
}

fn run_engine(
    mutator: &LlmMutator,
    seed: u64,
    evaluations: u64,
    in_flight: usize,
    checkpoint: Option<RunDir>,
    one_cell: bool,
) -> RunResult<EliteArchive> {
    let classifier = style(one_cell);
    let archive = EliteArchive::new(classifier.space().clone()).unwrap();
    let mut engine = Engine::new(mutator.clone(), FakeEvaluator, classifier, archive)
        .task(task())
        .seeds(vec![common::naive_gemm()])
        .seed(seed)
        .budget(Budget::evaluations(evaluations))
        .max_in_flight(in_flight)
        // One child per LLM request: reserve one evaluation per step, so that the evaluation
        // budget is used to the last one with steps in flight.
        .configure(|c| kf_core::EngineConfig {
            max_children_per_step: 1,
            ..c
        });
    if let Some(c) = checkpoint {
        engine = engine.checkpoint(c);
    }
    mutator.stop_on_budget(engine.stop_handle());
    engine.run_blocking().unwrap()
}

fn live_mutator(server: &MockServer, dir: &Path) -> LlmMutator {
    LlmMutator::builder(client(server, 2, 5000))
        .config(mutator_config())
        .record_in(dir)
        .build()
        .unwrap()
}

fn archive_json(a: &EliteArchive) -> String {
    serde_json::to_string(a).unwrap()
}

fn statuses(a: &RunResult<EliteArchive>, m: &LlmMutator) -> Vec<Status> {
    let _ = a;
    m.credits().iter().map(|c| c.status).collect()
}

#[test]
fn a_search_records_every_exchange_and_replays_identically_without_a_server() {
    let server = MockServer::start(jittery);
    let dir = tempfile::tempdir().unwrap();
    let m1 = live_mutator(&server, dir.path());
    let r1 = run_engine(&m1, 11, 13, 2, None, false);
    let stats = m1.stats();
    let records = ExchangeLog::read_all(dir.path().join(EXCHANGES_FILE)).unwrap();
    assert_eq!(records.len(), server.count(), "one record per request");
    assert_eq!(stats.live_requests as usize, server.count());
    assert_eq!(
        r1.summary.evaluations, 13,
        "{:?} {:?}",
        r1.summary.stop_reason, r1.summary.failed_steps
    );
    assert!(r1.summary.usage.requests >= 12, "{:?}", r1.summary.usage);
    assert_eq!(
        r1.summary.usage.prompt_tokens + r1.summary.usage.completion_tokens,
        stats.tokens()
    );

    // Failures are classified, and every kind of reply was seen.
    let credits = m1.credits();
    let st = statuses(&r1, &m1);
    assert!(st.contains(&Status::ExtractionError), "{st:?}");
    assert!(st.contains(&Status::Correct), "{st:?}");
    let hows: Vec<&str> = credits.iter().map(|c| c.how.as_str()).collect();
    assert!(hows.contains(&"1 edit"), "{hows:?}");
    assert!(
        hows.iter().any(|h| h.ends_with("after edits failed")),
        "{hows:?}"
    );
    let reasons: Vec<&str> = credits
        .iter()
        .filter(|c| c.status == Status::ExtractionError)
        .map(|c| c.diagnostics.as_str())
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("no fenced code block")),
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r.contains("cut off")), "{reasons:?}");
    // The edits that did not apply led to a follow-up asking for a full rewrite.
    assert!(server
        .received()
        .iter()
        .any(|r| r.last_message().contains("could not be applied")));

    // Meta-prompt evolution: a meta-call opened epoch 1; the new variant was used and recorded.
    assert!(records.iter().any(|r| r.key.scope == "meta-1"));
    let variants = m1.variants();
    assert!(
        variants
            .iter()
            .any(|v| v.variant.id == "v1" && v.variant.changed.is_some()),
        "{variants:?}"
    );
    assert!(
        credits.iter().any(|c| c.variant == "v1"),
        "the bandit tries the new variant"
    );
    assert!(server
        .received()
        .iter()
        .any(|r| r.message(0).contains("Evolved advice")));
    let logged = std::fs::read_to_string(dir.path().join(VARIANTS_FILE)).unwrap();
    assert!(logged.contains("\"id\":\"v1\""));
    for e in r1.archive.elites() {
        if e.candidate.origin.mutator == "llm" {
            assert!(e.candidate.origin.prompt_variant.is_some());
            assert_eq!(e.candidate.origin.model.as_deref(), Some("default"));
        }
    }

    // Replay: no server at all, the same archive.
    let m2 = LlmMutator::builder(common::NoServer("no server in a replay"))
        .config(mutator_config())
        .replay_from(dir.path())
        .build()
        .unwrap();
    let r2 = run_engine(&m2, 11, 13, 2, None, false);
    assert_eq!(archive_json(&r2.archive), archive_json(&r1.archive));
    assert_eq!(r2.summary.usage, r1.summary.usage);
    assert_eq!(m2.stats().live_requests, 0);
    assert_eq!(m2.stats().replay_divergences, 0);
    assert_eq!(m2.stats().recorded_answers, stats.live_requests);
    assert_eq!(m2.credits(), credits);

    // Record mode over complete records: a rerun pays nothing.
    let server3 = MockServer::start(model);
    let m3 = live_mutator(&server3, dir.path());
    let r3 = run_engine(&m3, 11, 13, 2, None, false);
    assert_eq!(server3.count(), 0);
    assert_eq!(archive_json(&r3.archive), archive_json(&r1.archive));
}

#[test]
fn a_resumed_run_asks_each_question_once_and_ends_where_an_unbroken_run_ends() {
    // The unbroken run.
    let server = MockServer::start(model);
    let straight_dir = tempfile::tempdir().unwrap();
    let straight = run_engine(
        &live_mutator(&server, straight_dir.path()),
        5,
        12,
        2,
        None,
        false,
    );

    // The same run in two parts: stopped after 6 evaluations, resumed from its run folder.
    let dir = tempfile::tempdir().unwrap();
    let meta = || RunMeta::new(5, &"mock-test").unwrap();
    let server1 = MockServer::start(jittery);
    let first = run_engine(
        &live_mutator(&server1, dir.path()),
        5,
        6,
        2,
        Some(RunDir::open(dir.path().join("run"), meta()).unwrap()),
        false,
    );
    assert_eq!(first.summary.evaluations, 6);
    let server2 = MockServer::start(model);
    let resumed_mutator = live_mutator(&server2, dir.path());
    let resumed = run_engine(
        &resumed_mutator,
        5,
        12,
        2,
        Some(RunDir::open(dir.path().join("run"), meta()).unwrap()),
        false,
    );
    assert!(resumed.summary.replayed_steps >= 5);
    assert_eq!(
        archive_json(&resumed.archive),
        archive_json(&straight.archive)
    );
    // Every question was asked once over both parts, and the same questions as the unbroken run.
    let records = ExchangeLog::read_all(dir.path().join(EXCHANGES_FILE)).unwrap();
    let mut keys: Vec<String> = records.iter().map(|r| r.key.to_string()).collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "no question was asked twice");
    let mut straight_keys: Vec<String> =
        ExchangeLog::read_all(straight_dir.path().join(EXCHANGES_FILE))
            .unwrap()
            .iter()
            .map(|r| r.key.to_string())
            .collect();
    straight_keys.sort();
    assert_eq!(keys, straight_keys);
    assert_eq!(server1.count() + server2.count(), server.count());
}

#[test]
fn failure_reasons_reach_the_next_prompt() {
    // Replies: no code block, then anything.
    let server = MockServer::start(|_, i| {
        if i == 0 {
            Reply::ok("Sorry, I cannot write kernels.")
        } else {
            Reply::ok(GOOD_EDIT)
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let m = LlmMutator::builder(client(&server, 1, 5000))
        .configure(|c| {
            c.meta = MetaConfig {
                lag_steps: 1,
                ..MetaConfig::off()
            };
        })
        .record_in(dir.path())
        .build()
        .unwrap();
    let r = run_engine(&m, 3, 4, 1, None, true);
    assert_eq!(r.summary.evaluations, 4);
    let got = server.received();
    assert!(!got[0].message(1).contains("Earlier attempts"));
    let second = got[1].message(1);
    assert!(
        second.contains("Earlier attempts from this kernel"),
        "{second}"
    );
    assert!(second.contains("extraction_error"), "{second}");
    assert!(second.contains("no fenced code block"), "{second}");
}

#[test]
fn budget_exhaustion_stops_the_search_cleanly() {
    let server = MockServer::start(model);
    let dir = tempfile::tempdir().unwrap();
    let m = LlmMutator::builder(client(&server, 1, 5000))
        .config(LlmMutatorConfig {
            meta: MetaConfig::off(),
            ..mutator_config()
        })
        .budget(LlmBudget::requests(3))
        .record_in(dir.path())
        .build()
        .unwrap();
    let r = run_engine(&m, 9, 50, 1, None, false);
    assert_eq!(r.summary.stop_reason, StopReason::Stopped);
    assert!(server.count() <= 3, "{}", server.count());
    assert_eq!(m.stats().budget_refusals, 1);
    assert!(r.summary.failed_steps >= 1);
    assert!(r.summary.evaluations < 50);
    let records = ExchangeLog::read_all(dir.path().join(EXCHANGES_FILE)).unwrap();
    assert!(matches!(&records.last().unwrap().outcome,
        ExchangeOutcome::Failure { failure } if failure.kind == FailureKind::BudgetExhausted));
}

#[test]
fn the_marker_agrees_with_kf_eval_and_secrets_are_stripped() {
    assert_eq!(
        kf_prompt::EXTRACTION_ERROR_MARKER,
        kf_eval::EXTRACTION_ERROR_MARKER
    );
    for name in ["KF_LLM_API_KEY", "KF_LLM_BASE_URL", "OPENAI_API_KEY"] {
        assert!(kf_eval::is_secret(name), "{name}");
    }
}

#[test]
fn models_are_chosen_by_weight_or_by_gain_per_cost() {
    use kf_prompt::{ModelPolicy, ModelSpec};
    let count = |m: &LlmMutator, name: &str| m.credits().iter().filter(|c| c.model == name).count();

    let server = MockServer::start(model);
    let dir = tempfile::tempdir().unwrap();
    let weighted = LlmMutator::builder(client(&server, 1, 5000))
        .config(LlmMutatorConfig {
            meta: MetaConfig::off(),
            ..mutator_config()
        })
        .models(vec![
            ModelSpec::new("rare"),
            ModelSpec::new("common").with_weight(4.0),
        ])
        .record_in(dir.path())
        .build()
        .unwrap();
    run_engine(&weighted, 21, 25, 1, None, false);
    let (rare, common) = (count(&weighted, "rare"), count(&weighted, "common"));
    assert!(
        rare > 0 && common > 2 * rare,
        "rare {rare}, common {common}"
    );
    let sent: Vec<String> = server
        .received()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(sent.contains(&"rare".to_owned()) && sent.contains(&"common".to_owned()));

    // The same answers from both: the bandit learns that the cheap model pays more per dollar.
    let server = MockServer::start(model);
    let dir = tempfile::tempdir().unwrap();
    let bandit = LlmMutator::builder(client(&server, 1, 5000))
        .config(LlmMutatorConfig {
            meta: MetaConfig {
                lag_steps: 1,
                ..MetaConfig::off()
            },
            ..mutator_config()
        })
        .models(vec![
            ModelSpec::new("pricey").with_prices(5_000.0, 5_000.0),
            ModelSpec::new("cheap"),
        ])
        .model_policy(ModelPolicy::Bandit {
            exploration: 0.2,
            cost_scale_usd: 0.01,
        })
        .record_in(dir.path())
        .build()
        .unwrap();
    run_engine(&bandit, 21, 25, 1, None, false);
    let (pricey, cheap) = (count(&bandit, "pricey"), count(&bandit, "cheap"));
    assert!(
        pricey >= 1 && cheap > pricey,
        "pricey {pricey}, cheap {cheap}"
    );
    assert!(bandit.stats().cost_usd > 0.0);
}
