//! `kf search --distributed` with two `kf worker` processes on this machine's OpenCL device,
//! through a nats-server this test starts and the PostgreSQL server of
//! `scripts/dist-servers.sh`: the search reports a correct kernel, both workers evaluated
//! jobs, and the database holds one result per job and the run's final archive. Skips with a
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
    let nats = common::Nats::start(&servers.nats_server);
    let db = common::TestDb::create(&servers.database_url, "facade_search");
    let out = tempfile::tempdir().unwrap();
    let kf = env!("CARGO_BIN_EXE_kf");
    let server_args = ["--nats", &nats.url(), "--db", &db.url];
    let mut workers = Workers(Vec::new());
    for name in ["wa", "wb"] {
        let log = std::fs::File::create(out.path().join(format!("{name}.log"))).unwrap();
        workers.0.push(
            Command::new(kf)
                .args(["worker", "--name", name])
                .args(server_args)
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
        .args(["--distributed", "--in-flight", "4"])
        .args(server_args)
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
}
