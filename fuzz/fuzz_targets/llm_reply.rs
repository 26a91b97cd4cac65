//! Target `llm_reply`: the harness is [`kf_fuzz::parsers::llm_reply`] (its documentation says what
//! is fuzzed and what an input is), shared with the crate's tests, which run it on the seeds.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kf_fuzz::parsers::llm_reply::run(data));
