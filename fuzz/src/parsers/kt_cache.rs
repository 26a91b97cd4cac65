//! Kernel Tuner cache files (`kf_tune::KtCache::from_json_str`, including the repair of a
//! cache left open by a killed run) and what is built from one: its parameters, the replay
//! space and the replay itself. Bounded to 64 KiB.

use crate::MAX_INPUT;
use kf_tune::{KtCache, Replay};

/// The target: one input.
pub fn run(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(cache) = KtCache::from_json_str(text, "fuzz.json") else {
        return;
    };
    let _ = cache.params();
    // What is written must read back.
    let written = cache.to_json_string();
    if let Err(e) = KtCache::from_json_str(&written, "rewritten.json") {
        panic!("a cache that was read does not read back after writing: {e}\n{written}");
    }
    if let Ok(replay) = Replay::from_cache(cache) {
        assert!(replay.valid() <= replay.total());
        let _ = replay.optimum();
    }
}
