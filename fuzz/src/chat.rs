//! The chat-completion wire decoders of `kf-prompt`, as the OpenAI-compatible client reads a
//! model server's HTTP reply: one JSON body ([`kf_prompt::decode_chat_reply`]), an error
//! reply ([`kf_prompt::decode_error_reply`]) and a streamed reply of server-sent events
//! ([`kf_prompt::ChatStreamDecoder`]). What the reply *text* then goes through (code blocks,
//! edits, manifests) is the `llm_reply` target's.

use kf_prompt::{
    decode_chat_reply, decode_error_reply, ChatMessage, ChatRequest, ChatResponse,
    ChatStreamDecoder, FailureKind, LlmFailure,
};

use crate::MAX_INPUT;

/// The longest failure message a decoder may produce: the decoders bound what they quote of
/// a body (600 bytes) and add a short sentence.
pub const MAX_MESSAGE: usize = 1024;

/// The reply cap of a stream decoded without one: more than any input's reply text.
const NO_CAP: usize = 1 << 20;

/// The request every reply answers (its model name and prompt size fill in what a reply
/// leaves out).
pub fn request() -> ChatRequest {
    ChatRequest::new(
        "fuzz-model",
        vec![ChatMessage::user("Write a faster kernel.")],
    )
}

fn check_failure(failure: &LlmFailure) {
    assert!(
        failure.message.len() <= MAX_MESSAGE,
        "a failure message of {} bytes",
        failure.message.len()
    );
}

/// Reply text comes from the body's JSON strings: at most three bytes (U+FFFD for an invalid
/// byte) per byte of input.
fn check_reply(reply: &ChatResponse, input: usize) {
    assert!(reply.content.len() <= 3 * input);
    assert_eq!(reply.attempts, 1);
    // What the gateway does with every reply: count its tokens against the budget.
    let _ = reply.usage.total();
    let _ = reply.hit_token_limit();
}

/// Target `chat_reply`: the input is the body of a chat completion that was not streamed. It
/// is decoded as a reply (success status) and as an error reply (under several statuses).
pub fn chat_reply(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let request = request();
    match decode_chat_reply(data, &request) {
        Ok(reply) => check_reply(&reply, data.len()),
        Err(failure) => {
            check_failure(&failure);
            assert!(matches!(
                failure.kind,
                FailureKind::Truncated | FailureKind::Malformed | FailureKind::Server
            ));
        }
    }
    for (status, kind) in [
        (400, FailureKind::Rejected),
        (408, FailureKind::Timeout),
        (429, FailureKind::RateLimited),
        (503, FailureKind::Server),
    ] {
        let failure = decode_error_reply(data, status);
        check_failure(&failure);
        assert_eq!(failure.kind, kind);
        assert_eq!(failure.status, Some(status));
    }
}

/// Decodes `wire` fed in `chunks` (lengths, cycled; the whole wire at once when empty) with
/// a reply cap of `cap` bytes, as the client does until the body ends or the decoder says the
/// reply is complete.
pub fn decode_stream(
    wire: &[u8],
    chunks: &[usize],
    cap: usize,
) -> Result<ChatResponse, LlmFailure> {
    let mut decoder = ChatStreamDecoder::new(cap);
    let mut rest = wire;
    let mut sizes = chunks.iter().copied().filter(|n| *n > 0).cycle();
    while !rest.is_empty() {
        let n = sizes.next().unwrap_or(rest.len()).min(rest.len());
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        if decoder.feed(chunk)? {
            assert!(decoder.is_complete());
            break;
        }
    }
    decoder.finish(&request())
}

/// Target `chat_stream`: `CAP SPLIT WIRE…`, a streamed chat completion (`WIRE`) as the network
/// hands it over. `CAP` below 128 is the reply cap in bytes, otherwise there is none;
/// `SPLIT` seeds the lengths (1 to 64 bytes) of the chunks the wire arrives in. Without a cap,
/// the reply must not depend on where the wire is split: decoded in chunks, byte by byte and
/// whole, the outcome is the same.
pub fn chat_stream(data: &[u8]) {
    if data.len() > MAX_INPUT || data.len() < 2 {
        return;
    }
    let (cap, split, wire) = (data[0], data[1], &data[2..]);
    let mut state = u32::from(split) | 0x100;
    let chunks: Vec<usize> = (0..16)
        .map(|_| {
            // xorshift: the chunk lengths.
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 64) as usize + 1
        })
        .collect();
    let cap = if cap < 128 { usize::from(cap) } else { NO_CAP };
    let whole = decode_stream(wire, &[], cap);
    let split = decode_stream(wire, &chunks, cap);
    for outcome in [&whole, &split] {
        match outcome {
            Ok(reply) => {
                check_reply(reply, wire.len());
                assert!(reply.content.len() <= cap);
            }
            Err(failure) => check_failure(failure),
        }
    }
    if cap == NO_CAP {
        assert_eq!(whole, split, "the reply depends on how the wire was split");
        if wire.len() <= 4096 {
            assert_eq!(whole, decode_stream(wire, &[1], cap), "fed byte by byte");
        }
    }
}
