//! Target `kt_cache`: the harness is [`kf_fuzz::parsers::kt_cache`] (its documentation says what
//! is fuzzed and what an input is), shared with the crate's tests, which run it on the seeds.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kf_fuzz::parsers::kt_cache::run(data));
