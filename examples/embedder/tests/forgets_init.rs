//! The program that forgets `kernelfoundry::init()` ends within seconds with an error naming
//! it, having started exactly one extra process. Needs no OpenCL runtime: no worker serves.

use std::process::Command;
use std::time::Instant;

#[test]
fn forgetting_init_fails_fast_with_one_extra_process() {
    let dir = std::env::temp_dir().join(format!("kf-embedder-starts-{}", std::process::id()));
    let _ = std::fs::remove_file(&dir);
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_forgets-init"))
        .env("KF_EMBEDDER_STARTS", &dir)
        .env_remove("KF_EVAL_WORKER")
        .output()
        .expect("run forgets-init");
    let elapsed = started.elapsed();
    let starts = std::fs::read_to_string(&dir).unwrap_or_default();
    let _ = std::fs::remove_file(&dir);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!(
        "forgets-init ended after {elapsed:.2?} with {}:\n{stderr}",
        output.status
    );
    assert!(!output.status.success(), "it must fail");
    assert_eq!(
        starts.lines().count(),
        2,
        "the program and one worker attempt: {starts}"
    );
    assert!(stderr.contains("did not enter worker mode"), "{stderr}");
    assert!(stderr.contains("kernelfoundry::init()"), "{stderr}");
}
