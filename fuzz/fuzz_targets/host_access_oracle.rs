//! Target `host_access_oracle`: the harness is [`kf_fuzz::oracle::host_access_oracle`] (its
//! module documentation says what is fuzzed, what an input is and what the oracle is), shared
//! with the crate's tests, which run it on the seeds. Needs clang: without it the fuzzer stops
//! before the first input.
#![no_main]

libfuzzer_sys::fuzz_target!(
    init: {
        if kf_fuzz::oracle::clang().is_none() {
            eprintln!(
                "host_access_oracle: no clang to use as the oracle \
                 (apt-get install clang, or KF_ORACLE_CLANG=/path/to/clang)"
            );
            std::process::exit(2);
        }
    },
    |data: &[u8]| kf_fuzz::oracle::host_access_oracle(data)
);
