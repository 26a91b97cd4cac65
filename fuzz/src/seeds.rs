//! The committed seeds of the wire-decoder targets (`fuzz/corpus/TARGET/`), made here with the
//! crates' own encoders and signing key, so that they stay what the code sends: a test checks
//! that every seed below is committed as written, and
//! `KF_FUZZ_WRITE_SEEDS=1 cargo test --manifest-path fuzz/Cargo.toml seeds` writes them again
//! (after a change of the message format, say).

use kf_core::{CandidateId, Evaluation, Origin, ParamValue, ParamValues, Status, TimingStats};
use kf_dist::{
    job_id, kernel_hash, AnswerMessage, AskMessage, JobMessage, RefusalMessage, ResultMessage,
    MESSAGE_VERSION, REFUSAL_KIND,
};
use kf_prompt::{ChatMessage, ChatRequest, ChatResponse, FailureKind, LlmFailure, TokenUsage};

use crate::dist::{kernel, profile, signing_key, SUBJECT};
use crate::SEPARATOR;

/// One seed: its target, file name and bytes.
pub struct Seed {
    /// The target whose corpus holds it.
    pub target: &'static str,
    /// Its file name in `fuzz/corpus/TARGET/`.
    pub name: &'static str,
    /// Its content.
    pub bytes: Vec<u8>,
}

fn seed(target: &'static str, name: &'static str, bytes: impl Into<Vec<u8>>) -> Seed {
    Seed {
        target,
        name,
        bytes: bytes.into(),
    }
}

/// Parts joined with the targets' separator.
fn joined(parts: &[&[u8]]) -> Vec<u8> {
    parts.join(&SEPARATOR)
}

const KERNEL_REPLY: &str = "Tiling the K loop in local memory:\n\n```c\n__kernel void gemm_tiled(__global const float* A, __global const float* B, __global float* C, int M, int N, int K) {\n    int row = get_global_id(1), col = get_global_id(0);\n    float acc = 0.0f;\n    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];\n    C[row * N + col] = acc;\n}\n```\n";

fn chat_reply() -> Vec<Seed> {
    let completion = serde_json::json!({
        "id": "chatcmpl-9", "object": "chat.completion", "created": 1_718_000_000u64,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": KERNEL_REPLY},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 812, "completion_tokens": 164, "total_tokens": 976},
        "system_fingerprint": "fp_0ba0d124f1"
    });
    let parts = serde_json::json!({
        "model": "local",
        "choices": [{"message": {"role": "assistant", "content": [
            {"type": "text", "text": "```c\n__kernel void k() {}\n"},
            {"type": "text", "text": "```\n"}]}, "finish_reason": "length"}]
    });
    let llama = serde_json::json!({
        "choices": [{"finish_reason": "length", "index": 0,
                     "message": {"content": "<think>\n", "role": "assistant"}}],
        "created": 1_718_000_001u64, "model": "SmolLM2-135M-Instruct-Q8_0.gguf",
        "object": "chat.completion",
        "usage": {"completion_tokens": 16, "prompt_tokens": 40, "total_tokens": 56},
        "id": "chatcmpl-x", "timings": {"prompt_n": 40, "predicted_n": 16, "predicted_ms": 91.5}
    });
    let error = serde_json::json!({"error": {"message": "The server is overloaded", "type": "server_error", "code": null}});
    let completion = serde_json::to_vec_pretty(&completion).unwrap();
    let cut = completion[..completion.len() / 2].to_vec();
    vec![
        seed("chat_reply", "completion.json", completion),
        seed(
            "chat_reply",
            "parts.json",
            serde_json::to_vec(&parts).unwrap(),
        ),
        seed(
            "chat_reply",
            "llama-cpp.json",
            serde_json::to_vec(&llama).unwrap(),
        ),
        seed(
            "chat_reply",
            "error.json",
            serde_json::to_vec(&error).unwrap(),
        ),
        seed("chat_reply", "cut-off.json", cut),
        // A server's token counts are its word (kf-prompt's TokenUsage::total overflowed).
        seed(
            "chat_reply",
            "huge-usage.json",
            r#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":1}}"#,
        ),
    ]
}

/// `data:` events of a chunked completion, as OpenAI sends them.
fn sse(events: &[serde_json::Value], done: bool, line_end: &str) -> String {
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("data: {e}{line_end}{line_end}"));
    }
    if done {
        out.push_str(&format!("data: [DONE]{line_end}{line_end}"));
    }
    out
}

fn delta(content: &str) -> serde_json::Value {
    serde_json::json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
                       "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
}

/// A stream seed: the cap byte (0x80: none), the split byte, the wire.
fn stream(cap: u8, split: u8, wire: &str) -> Vec<u8> {
    let mut out = vec![cap, split];
    out.extend_from_slice(wire.as_bytes());
    out
}

fn chat_stream() -> Vec<Seed> {
    let mut openai = vec![
        serde_json::json!({"id": "chatcmpl-9", "object": "chat.completion.chunk",
        "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    ];
    for piece in KERNEL_REPLY.split_inclusive('\n').take(6) {
        openai.push(delta(piece));
    }
    openai
        .push(serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    openai.push(serde_json::json!({"choices": [], "usage": {"prompt_tokens": 812, "completion_tokens": 64}}));
    let openai = sse(&openai, true, "\n");
    // llama.cpp: CRLF, comments, event and id lines, content parts, no usage, no [DONE].
    let llama = format!(
        ": keep-alive\r\n\r\nevent: message\r\nid: 1\r\n{}{}",
        sse(
            &[
                delta("__kernel void k() {"),
                serde_json::json!({"choices": [{"delta": {"content": [{"type": "text", "text": " }"}]}}]})
            ],
            false,
            "\r\n"
        ),
        sse(
            &[serde_json::json!({"choices": [{"delta": {}, "finish_reason": "length"}]})],
            false,
            "\r\n"
        ),
    );
    let error = sse(
        &[
            delta("__kernel"),
            serde_json::json!({"error": {"message": "upstream timed out"}}),
        ],
        true,
        "\n",
    );
    let cut = sse(&[delta("__kernel void k"), delta("() {}")], false, "\n");
    vec![
        seed("chat_stream", "openai.sse", stream(0x80, 7, &openai)),
        seed("chat_stream", "llama-cpp.sse", stream(0x80, 200, &llama)),
        seed("chat_stream", "capped.sse", stream(24, 3, &openai)),
        seed(
            "chat_stream",
            "error-mid-stream.sse",
            stream(0x80, 1, &error),
        ),
        seed("chat_stream", "cut-off.sse", stream(0x80, 42, &cut)),
    ]
}

fn params() -> ParamValues {
    [
        ("TS", ParamValue::Int(16)),
        ("WPT", ParamValue::Int(4)),
        ("UNROLL", ParamValue::Bool(true)),
        ("ALPHA", ParamValue::Float(0.5)),
        ("VEC", ParamValue::Text("float4".into())),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A job as a search publishes it, signed: `PAYLOAD NUL SIGNER NUL SIGNATURE NUL SUBJECT`.
fn signed_job(request_suffix: Option<&str>, origin: Origin) -> Vec<u8> {
    let (source, profile) = (kernel(), profile());
    let kernel = kernel_hash(&source).unwrap();
    let params = params();
    let kind = SUBJECT.rsplit('.').nth(1).unwrap();
    let job = job_id(&kernel, &params, &profile.hash, kind).unwrap();
    let run = "run-2024-06-10".to_owned();
    let request = match request_suffix {
        Some(s) => format!("{job}-{s}"),
        None => job.0.clone(),
    };
    let message = JobMessage {
        v: MESSAGE_VERSION,
        job,
        request,
        run,
        kernel,
        profile: profile.hash,
        candidate: CandidateId(42),
        parents: vec![CandidateId(7), CandidateId(11)],
        params,
        origin,
    };
    let payload = serde_json::to_vec(&message).unwrap();
    let key = signing_key();
    let signature = key.sign(&payload);
    joined(&[
        &payload,
        key.id().as_bytes(),
        signature.as_bytes(),
        SUBJECT.as_bytes(),
    ])
}

fn dist_job() -> Vec<Seed> {
    let llm = Origin {
        prompt_variant: Some("tiling".into()),
        model: Some("gpt-4o-mini".into()),
        llm_step: Some(12),
        ..Origin::mutator("llm").with_note("llm step 12: tile K")
    };
    vec![
        seed(
            "dist_job",
            "job.bin",
            signed_job(None, Origin::mutator("tune")),
        ),
        seed(
            "dist_job",
            "re-evaluation.bin",
            signed_job(Some("run-2024-06-10"), llm),
        ),
    ]
}

fn evaluation() -> Evaluation {
    let timing = TimingStats::from_samples(&[1.2e-4, 1.25e-4, 1.3e-4]).unwrap();
    let baseline = TimingStats::from_samples(&[4.0e-4, 4.1e-4]).unwrap();
    let mut e = Evaluation::correct(timing, Some(baseline));
    e.params = params();
    e.samples = vec![1.2e-4, 1.25e-4, 1.3e-4];
    e.gflops = Some(1234.5);
    e.roofline_fraction = Some(0.41);
    e.memory_bound = Some(false);
    e.worker = Some("gpu-node-3".into());
    e.compiler.registers = Some(40);
    e.compiler.compile_seconds = Some(0.31);
    e.tuning_evaluations = 5;
    e
}

fn result(evaluation: Evaluation, worker_key: &str) -> Vec<u8> {
    let message = ResultMessage {
        v: MESSAGE_VERSION,
        job: kf_dist::Hash("4f1c2a9e0b7d3c5a6e8f9a0b1c2d3e4f".into()),
        request: "4f1c2a9e0b7d3c5a6e8f9a0b1c2d3e4f".into(),
        run: "run-2024-06-10".into(),
        evaluation,
        worker: "gpu-node-3".into(),
        worker_key: worker_key.into(),
        environment: "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f".into(),
        delivery: 1,
        seconds: 2.75,
    };
    serde_json::to_vec(&message).unwrap()
}

fn dist_result() -> Vec<Seed> {
    let key = signing_key();
    let refusal = RefusalMessage {
        v: MESSAGE_VERSION,
        job: kf_dist::Hash("4f1c2a9e0b7d3c5a6e8f9a0b1c2d3e4f".into()),
        request: "4f1c2a9e0b7d3c5a6e8f9a0b1c2d3e4f".into(),
        run: "run-2024-06-10".into(),
        worker: "gpu-node-3".into(),
    };
    vec![
        seed("dist_result", "result.json", result(evaluation(), key.id())),
        seed(
            "dist_result",
            "compile-error.json",
            result(
                Evaluation::failed(
                    Status::CompileError,
                    "error: use of undeclared identifier 'TS'",
                ),
                "",
            ),
        ),
        seed(
            "dist_result",
            "refusal.bin",
            joined(&[
                REFUSAL_KIND.as_bytes(),
                &serde_json::to_vec(&refusal).unwrap(),
            ]),
        ),
    ]
}

fn question(number: u64) -> Vec<u8> {
    let request = ChatRequest::new(
        "gpt-4o-mini",
        vec![
            ChatMessage::system("You write OpenCL kernels."),
            ChatMessage::user("Make this GEMM faster."),
        ],
    )
    .with_max_tokens(2048)
    .with_seed(number);
    let message = AskMessage {
        v: MESSAGE_VERSION,
        request: format!("{:032x}", 0x5eed_0000 + number),
        run: "run-2024-06-10".into(),
        endpoint: "openai".into(),
        question: serde_json::to_value(&request).unwrap(),
    };
    serde_json::to_vec(&message).unwrap()
}

fn answer(number: u64, answer: Result<serde_json::Value, String>) -> Vec<u8> {
    let message = AnswerMessage {
        v: MESSAGE_VERSION,
        request: format!("{:032x}", 0x5eed_0000 + number),
        run: "run-2024-06-10".into(),
        answer,
        worker: "llm-gateway-1".into(),
        worker_key: signing_key().id().into(),
        seconds: 3.5,
    };
    serde_json::to_vec(&message).unwrap()
}

fn dist_question() -> Vec<Seed> {
    let reply = ChatResponse {
        content: KERNEL_REPLY.into(),
        finish_reason: Some("stop".into()),
        model: "gpt-4o-mini-2024-07-18".into(),
        usage: TokenUsage {
            prompt_tokens: 812,
            completion_tokens: 164,
            estimated: false,
        },
        attempts: 1,
    };
    let budget = LlmFailure::new(
        FailureKind::BudgetExhausted,
        "the run's token budget is spent",
    )
    .with_attempts(0);
    vec![
        seed(
            "dist_question",
            "answered.bin",
            joined(&[
                &question(0),
                &answer(0, Ok(serde_json::to_value(&reply).unwrap())),
            ]),
        ),
        seed(
            "dist_question",
            "failed.bin",
            joined(&[
                &question(1),
                &answer(1, Err(serde_json::to_string(&budget).unwrap())),
            ]),
        ),
        seed(
            "dist_question",
            "refused.bin",
            joined(&[
                &question(2),
                &answer(2, Err("refused by llm-gateway-1: unsigned".into())),
            ]),
        ),
    ]
}

/// Every seed of the wire-decoder targets.
pub fn all() -> Vec<Seed> {
    let mut all = chat_reply();
    all.extend(chat_stream());
    all.extend(dist_job());
    all.extend(dist_result());
    all.extend(dist_question());
    all
}
