//! The OpenAI client and the gateway against a fault-injecting OpenAI-compatible server on
//! 127.0.0.1 (`fault_server`): 429 with `Retry-After`, 500s, a stream that stalls, a connection
//! closed mid-reply, replies over the size cap, the total timeout, the endpoint's concurrency
//! limit, and the hard budget across retries and across a resume from recorded exchanges.
//!
//! Every request loop is bounded by the retry policy. Timing assertions are lower bounds ("waited
//! at least the `Retry-After`") or generous upper bounds that only catch a hang, so a loaded
//! machine does not make them fail.

mod common;
mod fault_server;

use std::time::{Duration, Instant};

use fault_server::{completion, delta, error, stream_head, streamed, FaultServer, Step};
use futures::executor::block_on;
use kf_prompt::{
    ChatMessage, ChatRequest, ExchangeLog, FailureKind, LlmBudget, LlmClient, LlmGateway,
    ModelSpec, OpenAiClient, OpenAiConfig, RetryPolicy, EXCHANGES_FILE,
};

fn retry(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts: attempts,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        max_retry_after: Duration::from_secs(5),
    }
}

fn config(server: &FaultServer, attempts: u32) -> OpenAiConfig {
    OpenAiConfig::new(server.base_url())
        .with_timeout(Duration::from_secs(5))
        .with_idle_timeout(Duration::from_secs(5))
        .with_retry(retry(attempts))
}

fn client(config: OpenAiConfig) -> OpenAiClient {
    OpenAiClient::new(config).expect("client")
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new("fault-model", vec![ChatMessage::user(text)]).with_max_tokens(64)
}

#[test]
fn a_429_with_retry_after_is_retried_after_at_least_that_delay() {
    let server = FaultServer::sequence(vec![
        error(429, &[("retry-after", "1")], "slow down"),
        streamed(&["fine ", "now"], Duration::ZERO, 10, 2),
    ]);
    let c = client(config(&server, 3));
    let started = Instant::now();
    let r = block_on(c.complete(&ask("hi"))).expect("the retry succeeds");
    let waited = started.elapsed();
    assert_eq!(r.content, "fine now");
    assert_eq!(r.attempts, 2);
    assert_eq!(server.count(), 2);
    assert!(
        waited >= Duration::from_millis(950),
        "the Retry-After of 1 s was not honoured: {waited:?}"
    );
    // The request asked for a stream with token counts.
    let body = &server.received()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!((r.usage.prompt_tokens, r.usage.completion_tokens), (10, 2));
}

#[test]
fn http_500s_are_retried_then_reported_as_a_typed_server_failure() {
    let recovering = FaultServer::sequence(vec![
        error(500, &[], "boom"),
        error(503, &[], "overloaded"),
        completion("ok", 5, 1),
    ]);
    let r = block_on(client(config(&recovering, 4)).complete(&ask("hi"))).expect("recovers");
    assert_eq!((r.content.as_str(), r.attempts), ("ok", 3));

    let broken = FaultServer::sequence(vec![error(500, &[], "still broken")]);
    let f = block_on(client(config(&broken, 3)).complete(&ask("hi"))).unwrap_err();
    assert_eq!(f.kind, FailureKind::Server);
    assert_eq!(f.status, Some(500));
    assert_eq!(f.attempts, 3);
    assert!(f.message.contains("still broken"), "{f}");
    assert_eq!(broken.count(), 3, "the loop stops after the last attempt");
}

#[test]
fn a_stalled_stream_times_out_cleanly_with_a_typed_error() {
    let server = FaultServer::sequence(vec![vec![
        stream_head(),
        delta("__kernel void k("),
        Step::Sleep(Duration::from_secs(30)),
        delta("never sent in time"),
    ]]);
    let c = client(config(&server, 2).with_idle_timeout(Duration::from_millis(400)));
    let started = Instant::now();
    let f = block_on(c.complete(&ask("hi"))).unwrap_err();
    let took = started.elapsed();
    assert_eq!(f.kind, FailureKind::Timeout, "{f}");
    assert!(f.message.contains("stalled"), "{f}");
    assert!(f.message.contains("bytes of reply text"), "{f}");
    assert_eq!(
        (f.attempts, server.count()),
        (2, 2),
        "a stall is retried once"
    );
    assert!(
        took >= Duration::from_millis(800),
        "two idle timeouts: {took:?}"
    );
    assert!(
        took < Duration::from_secs(25),
        "it did not wait for the stall: {took:?}"
    );
}

#[test]
fn a_slow_stream_that_keeps_coming_outlives_the_first_chunk_timeout() {
    // Eight pieces 250 ms apart: two seconds in all, four times the attempt timeout, yet
    // never silent for longer than the idle timeout.
    let pieces = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let server = FaultServer::sequence(vec![streamed(&pieces, Duration::from_millis(250), 3, 8)]);
    let c = client(
        config(&server, 1)
            .with_timeout(Duration::from_millis(500))
            .with_idle_timeout(Duration::from_secs(3)),
    );
    let started = Instant::now();
    let r = block_on(c.complete(&ask("hi"))).expect("the slow stream completes");
    assert_eq!(r.content, "abcdefgh");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert!(started.elapsed() >= Duration::from_millis(1750));

    // The same reply as one body is bound by the attempt timeout.
    let slow_body = FaultServer::sequence(vec![vec![
        Step::Sleep(Duration::from_millis(1500)),
        completion("late", 1, 1)[0].clone(),
    ]]);
    let f = block_on(
        client(
            config(&slow_body, 1)
                .with_stream(false)
                .with_timeout(Duration::from_millis(300)),
        )
        .complete(&ask("hi")),
    )
    .unwrap_err();
    assert_eq!(f.kind, FailureKind::Timeout, "{f}");
    assert_eq!(slow_body.received()[0].body["stream"], false);
}

#[test]
fn a_connection_closed_mid_reply_is_retried_and_then_typed_as_truncated() {
    let cut = vec![stream_head(), delta("__kernel void k() {"), Step::Close];
    let server = FaultServer::sequence(vec![
        cut.clone(),
        streamed(&["whole"], Duration::ZERO, 1, 1),
    ]);
    let r = block_on(client(config(&server, 3)).complete(&ask("hi"))).expect("second try");
    assert_eq!((r.content.as_str(), r.attempts), ("whole", 2));

    let always_cut = FaultServer::sequence(vec![cut]);
    let f = block_on(client(config(&always_cut, 2)).complete(&ask("hi"))).unwrap_err();
    assert_eq!(f.kind, FailureKind::Truncated, "{f}");
    assert_eq!(always_cut.count(), 2);

    // A stream that ends cleanly at the HTTP level but without a finish reason or [DONE].
    let unfinished = FaultServer::sequence(vec![vec![
        stream_head(),
        delta("half a kernel"),
        Step::EndChunks,
    ]]);
    let f = block_on(client(config(&unfinished, 1)).complete(&ask("hi"))).unwrap_err();
    assert_eq!(f.kind, FailureKind::Truncated, "{f}");
    assert!(f.message.contains("before the reply was complete"), "{f}");
}

#[test]
fn an_oversized_reply_is_capped() {
    // 64 events of 4 KiB: 256 KiB of text against a 16 KiB cap.
    let piece = "x".repeat(4096);
    let mut script = vec![stream_head()];
    for _ in 0..64 {
        script.push(delta(&piece));
    }
    script.extend(fault_server::stream_end(10, 70_000));
    let server = FaultServer::sequence(vec![script]);
    let c = client(config(&server, 3).with_max_reply_bytes(16 * 1024));
    let r = block_on(c.complete(&ask("hi"))).expect("a capped reply is still an answer");
    assert!(r.content.len() <= 16 * 1024, "{}", r.content.len());
    assert!(r.content.len() >= 12 * 1024, "{}", r.content.len());
    assert!(r.hit_token_limit(), "the cut reply says it was cut");
    assert_eq!(server.count(), 1, "a capped reply is not retried");
    assert!(r.usage.estimated, "the usage event was never read");

    // One JSON body over the cap cannot be parsed half-read: a typed failure, not retried.
    let big = FaultServer::sequence(vec![completion(&"y".repeat(200_000), 1, 1)]);
    let f = block_on(
        client(
            config(&big, 3)
                .with_stream(false)
                .with_max_reply_bytes(16 * 1024),
        )
        .complete(&ask("hi")),
    )
    .unwrap_err();
    assert_eq!(f.kind, FailureKind::Malformed, "{f}");
    assert!(f.message.contains("cap"), "{f}");
    assert_eq!(big.count(), 1);
}

#[test]
fn the_total_timeout_bounds_a_request_and_its_retries() {
    let server = FaultServer::sequence(vec![error(503, &[("retry-after", "1")], "busy")]);
    let c = client(config(&server, 10).with_total_timeout(Duration::from_millis(2500)));
    let started = Instant::now();
    let f = block_on(c.complete(&ask("hi"))).unwrap_err();
    let took = started.elapsed();
    assert_eq!(f.kind, FailureKind::Server, "{f}");
    assert!(f.message.contains("total limit"), "{f}");
    assert!(
        server.count() < 10,
        "stopped before the attempts ran out: {}",
        server.count()
    );
    assert!(server.count() >= 2, "{}", server.count());
    assert!(took < Duration::from_secs(9), "{took:?}");

    // A stall inside the total limit ends at the total limit.
    let stall = FaultServer::sequence(vec![vec![
        stream_head(),
        Step::Sleep(Duration::from_secs(30)),
    ]]);
    let c = client(
        config(&stall, 5)
            .with_timeout(Duration::from_secs(20))
            .with_total_timeout(Duration::from_millis(600)),
    );
    let started = Instant::now();
    let f = block_on(c.complete(&ask("hi"))).unwrap_err();
    assert_eq!(f.kind, FailureKind::Timeout, "{f}");
    assert!(started.elapsed() >= Duration::from_millis(550));
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn the_endpoint_concurrency_limit_holds_across_clones() {
    let server = FaultServer::start(|_, _| {
        vec![
            Step::Sleep(Duration::from_millis(200)),
            completion("ok", 1, 1)[0].clone(),
            completion("ok", 1, 1)[1].clone(),
        ]
    });
    let c = client(config(&server, 1).with_max_concurrency(2));
    let clones: Vec<OpenAiClient> = (0..6).map(|_| c.clone()).collect();
    let requests: Vec<_> = clones
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let r = ask(&format!("q{i}"));
            async move { c.complete(&r).await }
        })
        .collect();
    let results = block_on(futures::future::join_all(requests));
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(server.count(), 6);
    assert!(server.max_concurrent() <= 2, "{}", server.max_concurrent());
}

#[test]
fn the_budget_holds_across_retries() {
    // Each request fails once with a 500, then answers with 40 + 20 tokens.
    let server = FaultServer::start(|_, i| {
        if i % 2 == 0 {
            error(500, &[], "flaky")
        } else {
            completion("ok", 40, 20)
        }
    });
    let prices = [ModelSpec::new("fault-model").with_prices(1000.0, 2000.0)];
    let gateway = LlmGateway::builder(client(config(&server, 3)))
        .models(&prices)
        .budget(LlmBudget::requests(2).with_cost_usd(1.0))
        .build()
        .unwrap();
    for i in 0..2 {
        let x = block_on(gateway.ask(format!("step-{i}"), ask(&format!("q{i}")))).unwrap();
        assert_eq!(x.response.attempts, 2);
        // 40 * 1000 / 1e6 + 20 * 2000 / 1e6 = 0.08 USD
        assert!((x.cost_usd - 0.08).abs() < 1e-9, "{}", x.cost_usd);
    }
    let spent = gateway.budget().spent();
    assert_eq!(
        (spent.requests, spent.tokens),
        (2, 120),
        "a retried request counts once"
    );
    assert!((spent.cost_usd - 0.16).abs() < 1e-9);
    let refused = block_on(gateway.ask("step-2", ask("q2"))).unwrap_err();
    assert!(refused.is_budget_exhausted(), "{refused}");
    assert_eq!(server.count(), 4, "nothing sent once the budget is spent");
    let stats = gateway.stats();
    assert_eq!((stats.live_requests, stats.attempts), (2, 4));
}

#[test]
fn the_budget_holds_across_a_resume_from_recorded_exchanges() {
    let server = FaultServer::start(|_, _| completion("ok", 100, 50));
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join(EXCHANGES_FILE);
    let prices = [ModelSpec::new("fault-model").with_prices(1000.0, 1000.0)];
    // 150 tokens at 1000 USD per million: 0.15 USD a request; 0.5 USD covers three.
    let budget = LlmBudget::unlimited()
        .with_cost_usd(0.5)
        .with_tokens(100_000);
    let run = |asks: usize| {
        let g = LlmGateway::builder(client(config(&server, 2)))
            .models(&prices)
            .budget(budget)
            .record(&records)
            .build()
            .unwrap();
        let answers: Vec<bool> = (0..asks)
            .map(|i| block_on(g.ask(format!("step-{i}"), ask(&format!("q{i}")))).is_ok())
            .collect();
        (answers, g.budget().spent(), g.stats())
    };
    let (first, spent, _) = run(2);
    assert_eq!(first, [true, true]);
    assert!((spent.cost_usd - 0.3).abs() < 1e-9);
    assert_eq!(server.count(), 2);

    // The resumed run asks the same two questions and three more: the two are answered from
    // the records, one more is sent, and the budget refuses the rest.
    let (resumed, spent, stats) = run(5);
    assert_eq!(resumed, [true, true, true, false, false]);
    assert_eq!(stats.recorded_answers, 2);
    assert_eq!(server.count(), 3, "only one new request was sent");
    assert!(spent.cost_usd <= 0.5 + 1e-9, "{spent:?}");
    let log = ExchangeLog::read_all(&records).unwrap();
    let paid: f64 = log.iter().map(|r| r.cost_usd).sum();
    assert!((paid - 0.45).abs() < 1e-9, "{paid}");
}

/// Extraction failures as `kf-eval` ranks them; every other child is correct.
struct MarkerEvaluator;

#[kf_prompt::async_trait]
impl kf_core::Evaluator for MarkerEvaluator {
    type Error = std::convert::Infallible;

    async fn evaluate(
        &self,
        c: &kf_core::Candidate,
    ) -> Result<kf_core::Evaluation, std::convert::Infallible> {
        if let Some(reason) = kf_prompt::extraction_failure(&c.source) {
            return Ok(kf_core::Evaluation::failed(
                kf_core::Status::ExtractionError,
                reason,
            ));
        }
        let t = kf_core::TimingStats::from_samples(&[1e-3]).expect("one sample");
        Ok(kf_core::Evaluation::correct(t, None))
    }
}

/// Every kernel in one cell.
struct OneCell(kf_core::DescriptorSpace);

impl kf_core::BehaviorClassifier for OneCell {
    type Error = std::convert::Infallible;
    fn space(&self) -> &kf_core::DescriptorSpace {
        &self.0
    }
    fn classify(
        &self,
        _: &kf_core::Candidate,
        _: &kf_core::Evaluation,
    ) -> Result<kf_core::Descriptor, std::convert::Infallible> {
        Ok(kf_core::Descriptor::new([0], "one cell"))
    }
}

#[test]
fn a_reply_cut_off_in_every_attempt_becomes_an_extraction_failure_whose_reason_is_fed_back() {
    use kf_core::prelude::*;
    let cut = vec![
        stream_head(),
        delta("```opencl\n__kernel void gemm("),
        Step::Close,
    ];
    // Both attempts of the first request are cut off; later requests get a plain answer.
    let server = FaultServer::sequence(vec![
        cut.clone(),
        cut,
        streamed(&["Sorry, no kernel today."], Duration::ZERO, 5, 5),
    ]);
    let m = kf_prompt::LlmMutator::builder(client(config(&server, 2)))
        .configure(|c| {
            c.meta = kf_prompt::MetaConfig {
                lag_steps: 1,
                ..kf_prompt::MetaConfig::off()
            }
        })
        .build()
        .unwrap();
    let space = DescriptorSpace::new(vec![Dimension::new("all", ["one"])]).unwrap();
    let archive = kf_archive::EliteArchive::new(space.clone()).unwrap();
    let seed = common::naive_gemm();
    let result = Engine::new(m.clone(), MarkerEvaluator, OneCell(space), archive)
        .task(Task::new("gemm").with_description("SGEMM"))
        .seeds(vec![seed])
        .seed(1)
        .budget(Budget::evaluations(3))
        .max_in_flight(1)
        .configure(|c| kf_core::EngineConfig {
            max_children_per_step: 1,
            ..c
        })
        .run_blocking()
        .unwrap();
    assert_eq!(result.summary.evaluations, 3, "no step failed");
    let credits = m.credits();
    let first = &credits[0];
    assert_eq!(first.status, Status::ExtractionError);
    assert!(
        first.diagnostics.contains("could not be read"),
        "{}",
        first.diagnostics
    );
    assert!(
        first.diagnostics.contains("truncated"),
        "{}",
        first.diagnostics
    );
    // The next prompt from the same parent shows the reason.
    let got = server.received();
    assert_eq!(
        got.len(),
        3,
        "the seed, then two LLM steps: two cut attempts and one request"
    );
    let second_prompt = got[2].body["messages"][1]["content"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        second_prompt.contains("Earlier attempts from this kernel"),
        "{second_prompt}"
    );
    assert!(
        second_prompt.contains("could not be read"),
        "{second_prompt}"
    );
}
