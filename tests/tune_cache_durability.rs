//! `kf tune`'s Kernel Tuner cache loses nothing: a real run killed with SIGKILL while it
//! rewrites the cache as it opens it, while it appends entries, and in the middle of writing
//! the closed file at the end leaves a cache that reads back with every earlier entry (never a
//! partial or mixed file); and two runs on one cache take turns, the second resuming from the
//! first, so both runs' entries are kept. Skips (printing `SKIPPED: …`) when no OpenCL runtime
//! is present and `KF_REQUIRE_OPENCL` is not `1`.
//!
//! How a kill lands inside a write every time: the cache is replaced through one temporary
//! sibling, `<cache>.tmp`. The test puts a named pipe there, so the run's write into it blocks
//! once the pipe's buffer is full; the test reads the first bytes (the run is now mid-write)
//! and kills it. The cache is larger than the pipe's buffer for this.

#![cfg(unix)]

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kernelfoundry::core::ParamValues;
use kernelfoundry::tune::{KtCache, KtWriter, Outcome};

mod common;
use common::{opencl_scratch, tiled_gemm_with};

/// Entries of the earlier run the cache starts with: about 250 kB, well over a pipe's 64 kB.
const PRIOR: i64 = 5000;

/// The shipped tiled GEMM kernel: 12 valid configurations at 32³.
fn shipped_kernel() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kf-eval/kernels/gemm_tiled.toml")
}

/// The tiled GEMM with a parameter its source ignores, `PAD` (10 values): 120 valid
/// configurations at 32³, so a run has configurations enough left to be busy tuning when the
/// test stops it.
fn padded_kernel(dir: &Path) -> PathBuf {
    tiled_gemm_with(dir, "PAD = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "")
}

/// Starts `kf tune` on `kernel` at 32³ with `extra` arguments; its standard error goes to
/// `<cache>.<tag>.err`.
fn start(kernel: &Path, cache: &Path, tag: &str, extra: &[&str]) -> (Child, PathBuf) {
    let err = cache.with_extension(format!("{tag}.err"));
    let child = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(["tune", "--task", "gemm", "--size", "M=32,N=32,K=32"])
        .arg("--kernel")
        .arg(kernel)
        .arg("--cache")
        .arg(cache)
        .arg("--json")
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .expect("running kf");
    (child, err)
}

/// The cache's entry keys; every read must succeed, whatever the run is doing.
fn keys(cache: &Path) -> BTreeSet<String> {
    KtCache::read(cache)
        .unwrap_or_else(|e| panic!("the cache does not read back: {e}"))
        .entries
        .into_keys()
        .collect()
}

/// A cache from an earlier run: [`PRIOR`] entries, with tile sizes no run here measures.
fn write_prior(cache: &Path) -> BTreeSet<String> {
    let ints = |v: &[i64]| v.iter().map(|&i| i.into()).collect::<Vec<_>>();
    let mut kt = KtCache::new(
        "an earlier device",
        "gemm",
        serde_json::json!([32, 32, 32]),
        vec![
            ("TS".into(), ints(&[8, 16, 32, 64])),
            ("WPT".into(), ints(&[1, 2, 4, 8])),
            ("PAD".into(), ints(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])),
        ],
    );
    for ts in 1000..1000 + PRIOR {
        let config = ParamValues::new()
            .with("TS", ts)
            .with("WPT", 1i64)
            .with("PAD", 0i64);
        kt.insert(config, Outcome::Time(ts as f64));
    }
    kt.write(cache).unwrap();
    keys(cache)
}

/// Polls until the cache holds an entry that `before` lacks (the run has opened the cache and
/// appended); returns what it then holds. Every read on the way must succeed.
fn wait_for_new_entry(
    cache: &Path,
    before: &BTreeSet<String>,
    run: &mut Child,
) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = keys(cache);
        if now.len() > before.len() {
            assert!(now.is_superset(before));
            return now;
        }
        if let Some(s) = run.try_wait().unwrap() {
            panic!("the run ended ({s}) before it appended an entry")
        }
        assert!(Instant::now() < deadline, "no entry appended in 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Polls until the run has replaced the cache (another inode than `before`): it has opened
/// the cache and is tuning, with its whole budget still ahead.
fn wait_for_reopen(cache: &Path, before: u64, run: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(cache).unwrap().ino() == before {
        if let Some(s) = run.try_wait().unwrap() {
            panic!("the run ended ({s}) before it opened the cache")
        }
        assert!(
            Instant::now() < deadline,
            "the cache was not reopened in 60 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Kills `run` with SIGKILL and checks that the kill, not the run, ended it.
fn kill(run: &mut Child) {
    run.kill().unwrap();
    let status = run.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the run ended by itself ({status}) before the test killed it"
    );
}

/// Puts a named pipe where the run writes its next whole-file replacement, waits until the run
/// has written the first bytes into it (it is now blocked mid-write), kills it, and removes the
/// pipe (a real leftover temporary file is an ordinary file that the next run overwrites).
fn kill_mid_write(tmp: &Path, run: &mut Child) {
    let status = Command::new("mkfifo").arg(tmp).status().expect("mkfifo");
    assert!(status.success());
    let (tx, rx) = mpsc::channel();
    let pipe = tmp.to_path_buf();
    // Opening a pipe for reading blocks until a writer opens it: a thread does it.
    std::thread::spawn(move || {
        let mut f = File::open(&pipe).unwrap();
        let mut buf = [0u8; 4096];
        let n = f.read(&mut buf).unwrap();
        tx.send((n, f)).unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let reader = loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok((n, f)) => {
                assert!(n > 0, "the run opened the temporary file and wrote nothing");
                break f;
            }
            Err(_) => {
                if let Some(s) = run.try_wait().unwrap() {
                    panic!("the run ended ({s}) before it wrote the cache's temporary file")
                }
                assert!(Instant::now() < deadline, "no cache write in 60 s");
            }
        }
    };
    kill(run);
    drop(reader);
    std::fs::remove_file(tmp).unwrap();
}

#[test]
fn killed_runs_lose_no_entry() {
    let Some(dir) = opencl_scratch() else {
        return;
    };
    let kernel = padded_kernel(dir.path());
    let cache = dir.path().join("gemm.json");
    let tmp = dir.path().join("gemm.json.tmp");
    let prior = write_prior(&cache);
    let prior_bytes = std::fs::read(&cache).unwrap();

    // 1. Killed while it rewrites the existing cache in the open form: the cache is the
    //    earlier run's file, byte for byte.
    let (mut run, _) = start(&kernel, &cache, "open", &["--budget", "6"]);
    kill_mid_write(&tmp, &mut run);
    assert_eq!(std::fs::read(&cache).unwrap(), prior_bytes);

    // 2. Killed while it appends: every entry it had appended is there. (The budget is far
    //    more than the run gets to spend.)
    let (mut run, _) = start(&kernel, &cache, "append", &["--budget", "60"]);
    let seen = wait_for_new_entry(&cache, &prior, &mut run);
    kill(&mut run);
    let after_append = keys(&cache);
    assert!(after_append.is_superset(&seen));

    // 3. Killed in the middle of writing the closed file at the end: the cache is still the
    //    open file, with every entry of the earlier runs and all 10 of this one.
    //    The pipe goes in once the run has reopened the cache: the only whole-file write
    //    left is then the closed file's.
    let before = std::fs::metadata(&cache).unwrap().ino();
    let (mut run, _) = start(&kernel, &cache, "close", &["--budget", "10"]);
    wait_for_reopen(&cache, before, &mut run);
    kill_mid_write(&tmp, &mut run);
    let after_close = keys(&cache);
    assert!(after_close.is_superset(&after_append));
    assert_eq!(
        after_close.len(),
        after_append.len() + 10,
        "the killed close lost entries"
    );
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(text.trim_end().ends_with(','), "not the open file");

    // 4. A run left alone resumes from all of it and closes the cache.
    let (run, err) = start(&kernel, &cache, "last", &["--budget", "4"]);
    let out = run.wait_with_output().unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(out.status.success(), "{stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let last = keys(&cache);
    assert!(last.is_superset(&after_close));
    assert_eq!(last.len(), after_close.len() + 4, "{summary}");
    assert_eq!(summary["evaluations"], 4, "{summary}");
    assert!(std::fs::read_to_string(&cache).unwrap().ends_with("}}\n}"));
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("gemm.json"))
        .collect();
    left.sort();
    assert_eq!(left, ["gemm.json", "gemm.json.lock"]);
}

#[test]
fn two_runs_on_one_cache_keep_both_runs_entries() {
    let Some(dir) = opencl_scratch() else {
        return;
    };
    let cache = dir.path().join("gemm.json");
    // The test holds the cache's lock while both runs start, so they surely overlap: each
    // must wait for it and say so.
    let lock = File::create(KtWriter::lock_path(&cache)).unwrap();
    lock.lock().unwrap();
    let args = |seed: &'static str| {
        [
            "--strategy",
            "random",
            "--start",
            "none",
            "--budget",
            "3",
            "--seed",
            seed,
        ]
    };
    let kernel = shipped_kernel();
    let (a, a_err) = start(&kernel, &cache, "a", &args("1"));
    let (b, b_err) = start(&kernel, &cache, "b", &args("2"));
    let deadline = Instant::now() + Duration::from_secs(60);
    for err in [&a_err, &b_err] {
        while !std::fs::read_to_string(err)
            .unwrap()
            .contains("waiting for")
        {
            assert!(Instant::now() < deadline, "a run did not wait for the lock");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    assert!(!cache.exists(), "a run wrote the cache without its lock");
    drop(lock);

    let mut evaluations = 0;
    let mut bests = Vec::new();
    for (run, err) in [(a, a_err), (b, b_err)] {
        let out = run.wait_with_output().unwrap();
        let stderr = std::fs::read_to_string(&err).unwrap();
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("another kf tune run is writing it"),
            "{stderr}"
        );
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        evaluations += summary["evaluations"].as_u64().unwrap() as usize;
        bests.push(summary["best_config"].clone());
    }
    // Every configuration either run measured is in the cache, once: the second run read the
    // first one's entries (a configuration both drew is a free cache hit for the second).
    assert_eq!(evaluations, 6);
    let kt = KtCache::read(&cache).unwrap();
    assert_eq!(kt.entries.len(), evaluations);
    for best in bests {
        let key = format!("{},{}", best["TS"], best["WPT"]);
        assert!(kt.entries.contains_key(&key), "{key} is missing");
    }
    assert!(std::fs::read_to_string(&cache).unwrap().ends_with("}}\n}"));
}
