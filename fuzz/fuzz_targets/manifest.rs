//! Target `manifest`: the harness is [`kf_fuzz::parsers::manifest`] (its documentation says what
//! is fuzzed and what an input is), shared with the crate's tests, which run it on the seeds.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kf_fuzz::parsers::manifest::run(data));
