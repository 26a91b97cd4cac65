//! Target `dist_result`: the harness is [`kf_fuzz::dist::dist_result`] (its documentation says what is fuzzed
//! and what an input is), shared with the crate's tests, which run it on the seeds.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kf_fuzz::dist::dist_result(data));
