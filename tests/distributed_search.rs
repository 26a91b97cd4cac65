//! `kf search --distributed --islands 2` with two `kf worker` processes on this machine's OpenCL device,
//! through a nats-server this test starts and the PostgreSQL server of
//! `scripts/dist-servers.sh`: the search reports a correct kernel, both workers evaluated
//! jobs, and the database holds one result per job and the run's final archive; with the
//! servers' security on, a job signed by a key the workers do not trust is refused (the
//! workers' logs and `kf_refusals` say so, nothing is evaluated), and nothing the run wrote
//! (run directory, worker logs, database, NATS store) holds a password or a private key. Skips with a
//! message when the servers or an OpenCL runtime are missing (unless `KF_REQUIRE_DIST=1`,
//! respectively `KF_REQUIRE_OPENCL=1`).

#[path = "../kf-dist/tests/common/mod.rs"]
mod common;

use std::process::{Child, Command, Stdio};

struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.0 {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

#[test]
fn a_distributed_search_runs_on_kf_workers() {
    let Some(servers) = common::servers("a_distributed_search_runs_on_kf_workers") else {
        return;
    };
    if kernelfoundry::opencl::testing::backend_or_skip().is_none() {
        return;
    }
    let nats = common::Nats::start(&servers);
    let db = common::TestDb::create(&servers.database_url, "facade_search");
    let out = tempfile::tempdir().unwrap();
    let kf = env!("CARGO_BIN_EXE_kf");
    let secrets = servers.secrets.as_ref().map(|d| d.display().to_string());
    let mut server_args = vec![
        "--nats".to_string(),
        nats.url(),
        "--db".into(),
        db.url.clone(),
    ];
    match &secrets {
        Some(dir) => server_args.extend(["--secrets".to_string(), dir.clone()]),
        None => server_args.push("--insecure".into()),
    }
    let mut workers = Workers(Vec::new());
    for name in ["wa", "wb"] {
        let log = std::fs::File::create(out.path().join(format!("{name}.log"))).unwrap();
        workers.0.push(
            Command::new(kf)
                .args(["worker", "--name", name])
                .args(&server_args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }
    let search = Command::new(kf)
        .args(["search", "--task", "gemm", "--size", "M=96,N=64,K=80"])
        .args([
            "--evaluations",
            "10",
            "--tune-budget",
            "2",
            "--time",
            "240",
            "--no-progress",
        ])
        // Two islands (and the shipped emitters) share the one distributed evaluator.
        .args(["--distributed", "--in-flight", "4", "--islands", "2"])
        .args(&server_args)
        .arg("--out")
        .arg(out.path().join("search"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&search.stdout);
    let stderr = String::from_utf8_lossy(&search.stderr);
    assert!(
        search.status.success(),
        "kf search failed:\n{stdout}\n{stderr}"
    );
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("search/report.json")).unwrap(),
    )
    .unwrap();
    assert!(
        report["best_gflops"].as_f64().is_some_and(|g| g > 0.0),
        "{report}"
    );
    assert_eq!(report["evaluations"].as_u64(), Some(10));
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("search/run/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        run["config"]["archive"]["islands"].as_u64(),
        Some(2),
        "{run}"
    );
    assert!(
        run["config"]["mutator"]
            .as_str()
            .is_some_and(|m| m.starts_with("scheduler:")),
        "{run}"
    );
    // Both workers answered jobs, each job once.
    let per_worker =
        db.rows("SELECT worker, count(*)::text FROM kf_results GROUP BY worker ORDER BY worker");
    assert_eq!(per_worker.len(), 2, "jobs per worker: {per_worker:?}");
    let jobs = db.count("SELECT count(*) FROM kf_jobs");
    assert!(
        jobs >= 10,
        "each evaluation (and tuning configuration) is a job: {jobs}"
    );
    assert_eq!(db.count("SELECT count(*) FROM kf_results"), jobs);
    assert_eq!(
        db.count("SELECT count(DISTINCT candidate_id) FROM kf_candidates"),
        10,
        "every candidate's lineage is recorded"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM kf_snapshots"),
        1,
        "the final archive is stored"
    );
    assert!(db.count("SELECT count(*) FROM kf_results WHERE status = 'correct'") >= 1);
    let Some(dir) = &servers.secrets else {
        return;
    };
    // A search whose key the workers do not trust: its job is refused, nothing evaluated.
    let rogue_key = out.path().join("rogue.key");
    let made = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519", "-out"])
        .arg(&rogue_key)
        .status()
        .unwrap();
    assert!(made.success());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&rogue_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let results_before = db.count("SELECT count(*) FROM kf_results");
    let rogue_log = out.path().join("rogue-search.log");
    let mut rogue = Workers(vec![Command::new(kf)
        .args(["search", "--task", "gemm", "--size", "M=32,N=32,K=32"])
        .args([
            "--evaluations",
            "1",
            "--tune-budget",
            "1",
            "--time",
            "60",
            "--no-progress",
        ])
        .args(["--distributed"])
        .args(&server_args)
        .arg("--signing-key")
        .arg(&rogue_key)
        .arg("--out")
        .arg(out.path().join("rogue"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&rogue_log).unwrap())
        .spawn()
        .unwrap()]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while db.count("SELECT count(*) FROM kf_refusals") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no refusal recorded; the rogue search said: {}",
            std::fs::read_to_string(&rogue_log).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results"),
        results_before,
        "nothing of the rogue search was evaluated"
    );
    let reasons = db.rows("SELECT reason FROM kf_refusals");
    assert!(
        reasons.iter().all(|r| r[0].contains("untrusted key")),
        "{reasons:?}"
    );
    // Stopped, having waited in vain (its wall-time limit is longer than this test waits).
    rogue.0[0].kill().ok();
    rogue.0[0].wait().ok();
    drop(workers);
    let logs: String = ["wa", "wb"]
        .iter()
        .map(|w| std::fs::read_to_string(out.path().join(format!("{w}.log"))).unwrap())
        .collect();
    assert!(logs.contains("job refused, not evaluated"), "{logs}");
    // No secret in anything the runs wrote: run folders, worker logs, NATS store, database.
    let written = common::everything_written(&db, &[out.path(), nats.store_dir()], &[&rogue_key]);
    assert!(written.contains("best_gflops"), "the run's report was read");
    for secret in common::secret_strings(dir) {
        assert!(
            !written.contains(secret.as_str()),
            "a secret was written by the run"
        );
    }
}
