//! Kernel Tuner caches lose nothing: a second writer of one cache waits for the first and
//! keeps its entries, a crash between a temporary file's write and its rename leaves the cache
//! readable, a close that cannot write leaves every entry in place, and gzip caches stay gzip.
//! (`tests/tune_cache_durability.rs` at the workspace root kills real `kf tune` runs.)

use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use kf_core::{ParamValue, ParamValues};
use kf_tune::{Failure, KtCache, KtWriter, Outcome, TuneError};

fn header() -> KtCache {
    KtCache::new(
        "Test GPU",
        "k",
        serde_json::json!([64]),
        vec![(
            "A".to_string(),
            (1..=64).map(ParamValue::Int).collect::<Vec<_>>(),
        )],
    )
}

fn cfg(a: i64) -> ParamValues {
    ParamValues::new().with("A", a)
}

/// A writer of a new cache `c.json` in `dir` that has appended the configurations `A = a` for
/// each `a` of `entries`, each timed at `a` seconds; with the cache's path.
fn writer_with(dir: &Path, entries: RangeInclusive<i64>) -> (PathBuf, KtWriter) {
    let path = dir.join("c.json");
    let (mut w, _) = KtWriter::open(&path, &header()).unwrap();
    for a in entries {
        w.append(&cfg(a), &Outcome::Time(a as f64)).unwrap();
    }
    (path, w)
}

fn keys(path: &Path) -> Vec<String> {
    let mut k: Vec<String> = KtCache::read(path).unwrap().entries.into_keys().collect();
    k.sort_by_key(|k| k.parse::<i64>().unwrap());
    k
}

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

#[test]
fn a_second_writer_waits_for_the_first_and_keeps_its_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json");
    let (mut first, existing) = KtWriter::open(&path, &header()).unwrap();
    assert!(existing.entries.is_empty());
    first.append(&cfg(1), &Outcome::Time(1.0)).unwrap();

    // Held: `try_open` says so (and by whom) instead of waiting.
    match KtWriter::try_open(&path, &header()) {
        Err(TuneError::CacheLocked { path: p, lock }) => {
            assert_eq!(p, path);
            assert_eq!(lock, dir.path().join("c.json.lock"));
        }
        other => panic!("expected CacheLocked, got {other:?}"),
    }

    // `open` waits; when it returns it has read the cache as the first writer closed it.
    let (tx, rx) = mpsc::channel();
    let second = std::thread::spawn({
        let path = path.clone();
        move || {
            let (mut w, existing) = KtWriter::open(&path, &header()).unwrap();
            tx.send(()).unwrap();
            w.append(&cfg(3), &Outcome::Failed(Failure::Runtime))
                .unwrap();
            w.close().unwrap();
            existing.entries.keys().cloned().collect::<Vec<_>>()
        }
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "the second writer opened the cache while the first held it"
    );
    first.append(&cfg(2), &Outcome::Time(2.0)).unwrap();
    first.close().unwrap();
    let resumed = second.join().unwrap();
    assert_eq!(resumed, ["1", "2"]);
    assert_eq!(keys(&path), ["1", "2", "3"]);
    assert!(std::fs::read_to_string(&path).unwrap().ends_with("}}\n}"));
    // Only the cache and its lock file are left; the lock is free again.
    assert_eq!(names(dir.path()), ["c.json", "c.json.lock"]);
    KtWriter::try_open(&path, &header()).unwrap();
}

#[test]
fn a_dropped_writer_releases_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let (path, w) = writer_with(dir.path(), 5..=5);
    drop(w); // as a killed process: the file stays open, the lock goes with the handle
    let (w, existing) = KtWriter::try_open(&path, &header()).unwrap();
    assert_eq!(existing.entries.len(), 1);
    w.close().unwrap();
}

#[test]
fn a_crash_between_write_and_rename_leaves_the_cache_readable() {
    let dir = tempfile::tempdir().unwrap();
    let (path, w) = writer_with(dir.path(), 1..=3);
    drop(w);
    // What a process killed while writing its closed form leaves: a torn temporary file, and
    // (from `KtCache::write`) another one with its process's name.
    let full = KtCache::read(&path).unwrap().to_json_string();
    std::fs::write(dir.path().join("c.json.tmp"), &full[..full.len() / 2]).unwrap();
    std::fs::write(dir.path().join("c.json.999-0.tmp"), &full[..10]).unwrap();
    assert_eq!(keys(&path), ["1", "2", "3"]);

    // The next writer overwrites its leftover and carries on.
    let (mut w, existing) = KtWriter::open(&path, &header()).unwrap();
    assert_eq!(existing.entries.len(), 3);
    w.append(&cfg(4), &Outcome::Time(4.0)).unwrap();
    w.close().unwrap();
    assert_eq!(keys(&path), ["1", "2", "3", "4"]);
    assert_eq!(
        names(dir.path()),
        ["c.json", "c.json.999-0.tmp", "c.json.lock"]
    );
}

#[test]
fn a_close_that_cannot_write_leaves_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (path, w) = writer_with(dir.path(), 1..=2);
    // The temporary file cannot be created (as on a full disk): close fails, and the cache is
    // still the open file with both entries.
    std::fs::create_dir(dir.path().join("c.json.tmp")).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = w.close().unwrap_err();
    assert!(matches!(err, TuneError::Io { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert_eq!(keys(&path), ["1", "2"]);
    // The failed close released the lock; the next writer resumes from both entries.
    std::fs::remove_dir(dir.path().join("c.json.tmp")).unwrap();
    let (w, existing) = KtWriter::try_open(&path, &header()).unwrap();
    assert_eq!(existing.entries.len(), 2);
    w.close().unwrap();
    assert_eq!(keys(&path), ["1", "2"]);
}

#[test]
fn a_gzip_cache_is_appended_in_plain_text_and_closed_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.json.gz");
    let mut seed = header();
    seed.insert(cfg(7), Outcome::Time(7.0));
    seed.write(&path).unwrap();
    assert!(std::fs::read(&path).unwrap().starts_with(&[0x1f, 0x8b]));

    let (mut w, existing) = KtWriter::open(&path, &header()).unwrap();
    assert_eq!(existing.entries.len(), 1);
    w.append(&cfg(8), &Outcome::Time(8.0)).unwrap();
    // Open (as a kill would leave it): plain text, every entry readable.
    assert!(std::fs::read(&path).unwrap().starts_with(b"{"));
    assert_eq!(keys(&path), ["7", "8"]);
    w.close().unwrap();
    assert!(std::fs::read(&path).unwrap().starts_with(&[0x1f, 0x8b]));
    assert_eq!(keys(&path), ["7", "8"]);
    assert_eq!(names(dir.path()), ["c.json.gz", "c.json.gz.lock"]);
}

#[test]
fn concurrent_whole_file_writes_never_mix() {
    // `KtCache::write` takes no lock; each writer's temporary file is its own, so the cache is
    // always one writer's complete file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                for i in 0..20 {
                    let mut c = header();
                    for a in 1..=(1 + (t * 20 + i) % 60) {
                        c.insert(cfg(a), Outcome::Time(t as f64));
                    }
                    c.write(&path).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let back = KtCache::read(&path).unwrap();
    let times: std::collections::BTreeSet<String> = back
        .entries
        .values()
        .map(|e| format!("{:?}", e.outcome))
        .collect();
    assert_eq!(times.len(), 1, "a mix of writers: {times:?}");
    assert_eq!(names(dir.path()), ["w.json"]);
}
