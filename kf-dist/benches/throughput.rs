//! Jobs per second end to end — search → PostgreSQL → JetStream → worker → JetStream →
//! PostgreSQL → search — with N workers and a no-op evaluator on loopback.
//!
//! `cargo bench -p kf-dist --bench throughput [-- --jobs 4000 --workers 1,2,4 --slots 1]`
//! needs `scripts/dist-servers.sh start` (PostgreSQL; the bench starts its own nats-server).
//! Workers run in this process, each on a runtime of its own with its own connections to
//! both servers, exactly as separate processes would talk to them.
//!
//! Each worker count runs twice, side by side: security on (TLS to both servers, the roles'
//! credentials, every job and result signed and verified) and off (plain text on loopback,
//! a nats-server without users, nothing signed; PostgreSQL still asks the role's password).
//! Without the script's secrets only the second runs.
//!
//! `--previous` also runs (before each current round) the search and workers as they were before results were read as they
//! arrive and workers gave their slot back before answering (a 500 ms result linger, slots
//! held until the answer, every waiting job looked up every 2 s), for a side-by-side ratio.

#[path = "../tests/common/mod.rs"]
mod common;
mod support;

use std::time::{Duration, Instant};

use kf_core::{async_trait, BoxError, Candidate, Evaluation, Evaluator, TimingStats};
use kf_dist::{DistConfig, DistEvaluator, JobHandler, Profile, Worker, WorkerConfig};
use support::{arg, cpu_seconds};

struct NoOp;

#[async_trait]
impl JobHandler for NoOp {
    async fn evaluate(&self, _: &Profile, _: &Candidate) -> Result<Evaluation, BoxError> {
        let t = TimingStats::from_samples(&[1e-3]).ok_or("timing")?;
        Ok(Evaluation::correct(t, None))
    }
}

fn main() {
    let Some(servers) = common::servers("throughput") else {
        return;
    };
    let jobs: usize = arg("--jobs").and_then(|v| v.parse().ok()).unwrap_or(3000);
    let slots: usize = arg("--slots").and_then(|v| v.parse().ok()).unwrap_or(1);
    let compare = std::env::args().any(|a| a == "--previous");
    let versions: &[bool] = if compare { &[true, false] } else { &[false] };
    let counts: Vec<usize> = arg("--workers")
        .unwrap_or_else(|| "1,2,4".into())
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    println!("| search and workers | security | workers | slots each | jobs | seconds | jobs/s | CPU ms per 1000 jobs: search + workers / nats-server / PostgreSQL |");
    println!("|---|---|---|---|---|---|---|---|");
    let modes: &[bool] = if servers.secrets.is_some() {
        &[true, false]
    } else {
        &[false]
    };
    for (round, ((&n, &secure), &previous)) in counts
        .iter()
        .flat_map(|n| modes.iter().map(move |m| (n, m)))
        .flat_map(|nm| versions.iter().map(move |v| (nm, v)))
        .enumerate()
    {
        let (nats, search, worker) = support::secured(&servers, secure);
        let db = common::TestDb::create(&servers.database_url, &format!("bench{round}"));
        let url = match std::env::var("KF_BENCH_PG_OPTIONS") {
            Ok(o) => format!("{}?options={o}", db.url),
            Err(_) => db.url.clone(),
        };
        let dist = DistConfig::new(nats.url(), url);
        let worker_dist = dist.clone().security(worker);
        let dist = dist.security(search);
        let stop = tokio_util_stop();
        let mut threads = Vec::new();
        for i in 0..n {
            let (dist, stop) = (worker_dist.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                let mut config = WorkerConfig::new("bench");
                config.name = format!("bench-{i}");
                config.jobs = slots;
                config.overlap_answers = !previous;
                Worker::new(dist, config, NoOp)
                    .run_blocking(async move { stop.notified().await })
                    .expect("worker")
            }));
        }
        let evaluator = DistEvaluator::builder(
            dist,
            format!("bench{round}"),
            "bench",
            serde_json::json!({}),
        )
        .max_in_flight(1024);
        let evaluator = if previous {
            evaluator
                .result_linger(Duration::from_millis(500))
                .max_poll_interval(Duration::from_secs(2))
        } else {
            evaluator
        }
        .connect()
        .expect("evaluator");
        let candidates: Vec<Candidate> = (0..jobs).map(support::numbered_job).collect();
        // Warm-up: connections, consumers, prepared statements.
        let _ = futures::executor::block_on(evaluator.evaluate_batch(&candidates[..20.min(jobs)]));
        let before = (
            cpu_seconds("self"),
            nats.pid().map(|p| cpu_seconds(&p.to_string())),
            postgres_cpu_seconds(),
        );
        let start = Instant::now();
        let results =
            futures::executor::block_on(evaluator.evaluate_batch(&candidates[20.min(jobs)..]));
        let seconds = start.elapsed().as_secs_f64();
        let after = (
            cpu_seconds("self"),
            nats.pid().map(|p| cpu_seconds(&p.to_string())),
            postgres_cpu_seconds(),
        );
        let per_k = |a: f64, b: f64| (b - a) * 1e6 / results.len() as f64;
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, results.len(), "every job answered");
        println!(
            "| {} | {} | {n} | {slots} | {} | {seconds:.2} | {:.0} | {:.0} / {:.0} / {:.0} |",
            if previous { "previous" } else { "current" },
            if secure { "on" } else { "off" },
            results.len(),
            results.len() as f64 / seconds,
            per_k(before.0, after.0),
            per_k(before.1.unwrap_or(0.0), after.1.unwrap_or(0.0)),
            per_k(before.2, after.2),
        );
        stop.notify_waiters();
        for t in threads {
            let _ = t.join();
        }
        evaluator.shutdown();
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tokio_util_stop() -> std::sync::Arc<tokio::sync::Notify> {
    std::sync::Arc::new(tokio::sync::Notify::new())
}

/// CPU seconds of every PostgreSQL process (the server and its backends).
fn postgres_cpu_seconds() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|p| p.chars().all(|c| c.is_ascii_digit()))
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "postgres")
        })
        .map(|p| cpu_seconds(&p))
        .sum()
}
