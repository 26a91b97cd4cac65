//! End to end against a real LLM server on 127.0.0.1: llama.cpp's server (the `xllamacpp`
//! wheel) serving SmolLM2-135M-Instruct, installed and started by `scripts/llm-server.sh`. A
//! short gemm search runs through the engine with the LLM mutator and the isolated OpenCL
//! evaluator, then is replayed from its records with no server.
//!
//! The tiny model writes nonsense kernels: this checks the structure — every exchange
//! recorded, failures classified and fed back into later prompts, the budget respected, no
//! crash, the replay identical — not the quality.
//!
//! Skips (with a message) when no server answers or no OpenCL runtime is installed, unless
//! `KF_REQUIRE_LLM=1`, respectively `KF_REQUIRE_OPENCL=1`. The server is found through `KF_LLM_TEST_BASE_URL` or the
//! `.runtime/llm-server.json` that `scripts/llm-server.sh start` writes.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use kf_archive::EliteArchive;
use kf_backend_opencl::{DeviceSelector, OpenClBackend};
use kf_classify::StaticClassifier;
use kf_core::prelude::*;
use kf_core::{EngineConfig, RunResult};
use kf_eval::task::parse_sizes;
use kf_eval::{BackendSpec, EvalConfig, IsolatedEvaluator, TimeoutPolicy, WorkerCommand};
use kf_prompt::{
    CreditEvent, ExchangeLog, ExchangeOutcome, LlmBudget, LlmMutator, LlmMutatorConfig, MetaConfig,
    ModelSpec, OpenAiClient, OpenAiConfig, PromptComponents, PromptTemplates, RenderLimits,
    RetryPolicy, EXCHANGES_FILE,
};

kf_eval::worker_test_entry!(|spec: &BackendSpec| {
    let mut b = OpenClBackend::builder();
    if let Some(d) = &spec.device {
        b = b.device(DeviceSelector::parse(d));
    }
    b.build().map_err(|e| e.to_string())
});

const MODEL: &str = "SmolLM2-135M-Instruct";
const MAX_REQUESTS: u64 = 8;
const MAX_TOKENS: u64 = 16_000;

/// Short components: a 135M model on one thread reads about 75 prompt tokens per second.
fn components() -> PromptComponents {
    PromptComponents::from_toml_str(
        r#"
[[component]]
name = "philosophy"
title = "Philosophy"
text = "- Correctness first, then speed.\n- Memory bandwidth before compute."
[[component]]
name = "strategies"
title = "Strategies"
text = "- Tile A and B through __local memory.\n- Let each work-item compute several outputs (register blocking)."
[[component]]
name = "pitfalls"
title = "Pitfalls"
text = "- Keep the signature.\n- Every work-item must reach every barrier."
"#,
        "real-server test",
    )
    .unwrap()
}

/// The shipped templates with a shorter preamble (prompt reading dominates the run time).
fn templates() -> PromptTemplates {
    let mut t = PromptTemplates::builtin();
    t.system = "You write fast, correct {language} kernels with a TOML manifest.".into();
    t.manifest_help = "The manifest keeps `entry`, `language`, `[params]` and `[launch]`.".into();
    t
}

fn config() -> LlmMutatorConfig {
    LlmMutatorConfig {
        limits: RenderLimits {
            max_prompt_chars: 4_500,
            max_source_chars: 1_400,
            max_diagnostics_chars: 300,
            max_inspirations: 1,
            max_inspiration_chars: 500,
            max_attempts: 2,
            max_attempt_chars: 160,
            max_hints: 1,
            max_lessons: 2,
        },
        max_reply_tokens: 96,
        temperature: 0.7,
        meta: MetaConfig {
            every_steps: 2,
            lag_steps: 1,
            max_reply_tokens: 64,
            max_component_chars: 400,
            ..MetaConfig::default()
        },
        ..LlmMutatorConfig::default()
    }
}

fn evaluator() -> IsolatedEvaluator {
    let mut config = EvalConfig::default();
    config.timing.min_trials = 3;
    config.timing.min_seconds = 0.002;
    config.timing.max_seconds = 0.3;
    config.timing.baseline_trials = 2;
    IsolatedEvaluator::builder(
        BackendSpec::new("opencl"),
        "gemm",
        parse_sizes("M=128,N=128,K=128").unwrap(),
    )
    .command(WorkerCommand::test_harness().unwrap())
    .config(config)
    .timeout(TimeoutPolicy::fixed(Duration::from_secs(10)))
    .build()
}

fn search(mutator: &LlmMutator, evaluator: &IsolatedEvaluator) -> RunResult<EliteArchive> {
    let task = evaluator.task().unwrap().describe();
    let device = evaluator.device().unwrap();
    let classifier = StaticClassifier::new();
    let archive = EliteArchive::new(classifier.space().clone()).unwrap();
    let engine = Engine::new(mutator.clone(), evaluator.clone(), classifier, archive)
        .task(task)
        .device(device)
        .seeds(vec![common::naive_gemm()])
        .seed(42)
        .budget(Budget::evaluations(5).with_wall(Duration::from_secs(150)))
        .configure(|c| EngineConfig {
            max_children_per_step: 1,
            ..c
        });
    mutator.stop_on_budget(engine.stop_handle());
    engine.run_blocking().unwrap()
}

/// What must be identical in a replay: per child, its step, id, variant, model, how it was
/// made, its status and its source.
fn fingerprint(credits: &[CreditEvent], archive: &EliteArchive) -> (Vec<String>, Vec<String>) {
    let children = credits
        .iter()
        .map(|c| {
            format!(
                "{} {} {} {} {} {}",
                c.step, c.child, c.variant, c.model, c.how, c.status
            )
        })
        .collect();
    let cells = archive
        .elites()
        .iter()
        .map(|e| {
            format!(
                "{:?} {} {} {}",
                e.descriptor.coords,
                e.candidate.id,
                e.evaluation.status,
                e.candidate.source.content_hash()
            )
        })
        .collect();
    (children, cells)
}

#[test]
fn a_short_search_against_a_real_llm_server() {
    let Some(server) = kf_prompt::testing::server_or_skip(Path::new(env!("CARGO_MANIFEST_DIR")))
    else {
        return;
    };
    let url = server.base_url;
    // Skips only when OpenCL is not installed and KF_REQUIRE_OPENCL is not 1.
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }

    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let client = OpenAiClient::new(
        OpenAiConfig::new(&url)
            .with_timeout(Duration::from_secs(90))
            .with_retry(RetryPolicy {
                max_attempts: 2,
                ..RetryPolicy::default()
            }),
    )
    .unwrap();
    let mutator = LlmMutator::builder(client)
        .models(vec![ModelSpec::new(MODEL)])
        .budget(LlmBudget::requests(MAX_REQUESTS).with_tokens(MAX_TOKENS))
        .max_concurrency(1)
        .components(components())
        .templates(templates())
        .config(config())
        .record_in(dir.path())
        .build()
        .unwrap();
    let eval = evaluator();
    let result = search(&mutator, &eval);
    let live_seconds = started.elapsed().as_secs_f64();
    let stats = mutator.stats();
    let credits = mutator.credits();
    let records = ExchangeLog::read_all(dir.path().join(EXCHANGES_FILE)).unwrap();

    eprintln!(
        "real server {url}: {} evaluations in {live_seconds:.1} s (stop: {:?}); {} requests ({} attempts), {} prompt + {} completion tokens, {:.1} s in LLM calls, {} budget refusals",
        result.summary.evaluations,
        result.summary.stop_reason,
        stats.live_requests,
        stats.attempts,
        stats.prompt_tokens,
        stats.completion_tokens,
        stats.latency_ms as f64 / 1e3,
        stats.budget_refusals,
    );
    for c in &credits {
        eprintln!(
            "  step {} {} [{} / {}] {} -> {} ({}): {}",
            c.step,
            c.child,
            c.variant,
            c.how,
            c.status,
            c.outcome,
            c.model,
            c.diagnostics.lines().next().unwrap_or("")
        );
    }
    for r in &records {
        match &r.outcome {
            ExchangeOutcome::Answer { response } => eprintln!(
                "  exchange {} {} ms, {}+{} tokens, finish {:?}",
                r.key,
                r.latency_ms,
                response.usage.prompt_tokens,
                response.usage.completion_tokens,
                response.finish_reason
            ),
            ExchangeOutcome::Failure { failure } => {
                eprintln!("  exchange {} failed: {failure}", r.key)
            }
        }
    }

    if let Ok(keep) = std::env::var("KF_LLM_TEST_KEEP") {
        // For a look at the prompts and replies: copy the records out of the temporary folder.
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::fs::copy(
            dir.path().join(EXCHANGES_FILE),
            Path::new(&keep).join(EXCHANGES_FILE),
        );
    }

    // Every exchange is recorded, with its usage and latency.
    assert!(stats.live_requests >= 1);
    assert_eq!(
        records.len() as u64,
        stats.live_requests + stats.budget_refusals
    );
    for r in &records {
        if let ExchangeOutcome::Answer { response } = &r.outcome {
            assert!(r.latency_ms > 0);
            assert!(response.usage.prompt_tokens > 0 && !response.usage.estimated);
            assert!(
                r.request
                    .messages
                    .iter()
                    .map(|m| m.content.len())
                    .sum::<usize>()
                    <= 4_500 + 2_000
            );
        }
    }
    // The budget held.
    assert!(stats.live_requests <= MAX_REQUESTS);
    assert!(mutator.gateway().budget().spent().tokens <= MAX_TOKENS);
    // Every LLM child was judged and classified on the ladder; unusable replies are
    // extraction errors with a reason.
    assert!(!credits.is_empty());
    let elites = result.archive.elites();
    for c in &credits {
        assert_eq!(c.model, MODEL);
        assert!(
            c.parent.is_some(),
            "an LLM child without a parent: {}",
            c.child
        );
        // The credited status is the evaluation the archive holds for the child.
        if let Some(e) = elites.iter().find(|e| e.candidate.id == c.child) {
            assert_eq!(e.evaluation.status, c.status, "child {}", c.child);
        }
        if c.status != Status::Correct {
            assert!(
                !c.diagnostics.is_empty(),
                "{} failed without a reason",
                c.child
            );
        }
        if c.status == Status::ExtractionError {
            assert!(!c.diagnostics.is_empty());
            assert_eq!(c.how, "extraction error");
        }
    }
    for e in result.archive.elites() {
        if e.candidate.origin.mutator == "llm" {
            assert!(e.candidate.origin.prompt_variant.is_some());
            assert_eq!(e.candidate.origin.model.as_deref(), Some(MODEL));
        }
    }
    // Failures are fed back: the next request from the same parent after a failed child
    // shows that failure among its earlier attempts. The tiny model fails nearly always, so
    // every run has such a pair; none would mean the check could not be made.
    let mut feedback_checked = 0;
    for (i, failed) in credits.iter().enumerate() {
        if failed.status == Status::Correct {
            continue;
        }
        let Some(next) = credits[i + 1..]
            .iter()
            .find(|c| c.parent == failed.parent && c.step > failed.step)
        else {
            continue;
        };
        let scope = format!("step-{}", next.step);
        let Some(prompt) = records
            .iter()
            .find(|r| r.key.scope == scope && r.key.seq == 0)
            .map(|r| r.request.messages[1].content.clone())
        else {
            continue;
        };
        assert!(
            prompt.contains("Earlier attempts from this kernel")
                && prompt.contains(failed.status.as_str()),
            "step {} does not show the {} of step {} from the same parent:\n{prompt}",
            next.step,
            failed.status,
            failed.step
        );
        feedback_checked += 1;
    }
    assert!(
        feedback_checked > 0,
        "no failed child was followed by a request from the same parent: the feedback of \
         failures could not be checked ({} credits)",
        credits.len()
    );

    // Replay with no server: the same children, statuses and cells.
    let replay_started = Instant::now();
    let replayed = LlmMutator::builder(common::NoServer("a replay must not reach a server"))
        .models(vec![ModelSpec::new(MODEL)])
        .budget(LlmBudget::requests(MAX_REQUESTS).with_tokens(MAX_TOKENS))
        .components(components())
        .templates(templates())
        .config(config())
        .replay_from(dir.path())
        .build()
        .unwrap();
    let again = search(&replayed, &eval);
    eprintln!(
        "replay: {} evaluations in {:.1} s, {} recorded answers, {} prompts differed from the recorded ones (timings measured anew)",
        again.summary.evaluations,
        replay_started.elapsed().as_secs_f64(),
        replayed.stats().recorded_answers,
        replayed.stats().replay_divergences
    );
    assert_eq!(replayed.stats().live_requests, 0);
    assert_eq!(again.summary.evaluations, result.summary.evaluations);
    assert_eq!(again.summary.usage, result.summary.usage);
    assert_eq!(
        fingerprint(&replayed.credits(), &again.archive),
        fingerprint(&credits, &result.archive)
    );
    eval.shutdown();
}
