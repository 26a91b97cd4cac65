//! The cluster at scale on loopback: 100 simulated workers (tasks, each with its own
//! connections to both servers, as separate machines would have) answer jobs with a sleep of
//! a realistic length (log-normal: a median and a spread, seeded by the job), while one search
//! keeps a window of jobs outstanding. Reports jobs per second, submit → result latency
//! percentiles, and the CPU per job of this process (search + workers), the nats-server and
//! the PostgreSQL server (its processes' /proc/<pid>/stat before and after).
//!
//! Not run by CI (minutes, and 100 database connections). Run it against servers of its own,
//! so that its connections and load do not disturb anything else:
//!
//! ```sh
//! KF_DIST_DIR=/tmp/kf-scale KF_NATS_PORT=24222 KF_PG_PORT=25432 scripts/dist-servers.sh start
//! KF_DIST_DIR=/tmp/kf-scale cargo bench -p kf-dist --bench scale -- --jobs 20000 --workers 100
//! KF_DIST_DIR=/tmp/kf-scale KF_NATS_PORT=24222 KF_PG_PORT=25432 scripts/dist-servers.sh stop
//! ```
//!
//! Options: `--jobs N` (20000), `--workers N` (100), `--window N` jobs outstanding (2000),
//! `--median-ms M` (100) and `--sigma S` (0.6) of the evaluation time, `--security on|off`
//! (on: TLS, the roles' credentials, signed jobs and results), `--max-poll 2,30`: one round
//! per value of the search's longest gap between two database looks for a waiting job
//! (`DistEvaluatorBuilder::max_poll_interval`; 2 s is every poll, as before it doubled),
//! `--linger 0,500`: how long the search's result reader waits for a batch of results to
//! fill (`DistEvaluatorBuilder::result_linger`; 500 ms is what it always did before);
//! `--overlap on,off`: whether a worker gives its slot back when the evaluation ends, before
//! storing and publishing the result (`WorkerConfig::overlap_answers`); `--roles all,split`:
//! every worker compiles and runs (`all`), or half the workers compile and half execute
//! (`split`: the search sends its jobs to be compiled first, each compile worker stores a
//! binary of `--binary-kb` KiB (32) per job in PostgreSQL and passes the job on, the execute
//! worker fetches and checks it, then sleeps); every combination is one round, side by side on
//! the same servers.

#[path = "../tests/common/mod.rs"]
mod common;
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kf_core::{async_trait, BoxError, Candidate, Evaluation, Evaluator, ParamValue, TimingStats};
use kf_dist::{
    Binary, CompileOutcome, DistConfig, DistEvaluator, JobHandler, Profile, Worker, WorkerConfig,
    WorkerRole,
};
use support::{arg, cpu_seconds};

/// Sleeps for a log-normal time drawn from the job's parameter `I` (the same job always
/// sleeps the same), then answers correct. As a compile worker, builds a binary of
/// `binary_bytes` bytes that only its job has, at once; as an execute worker, checks it.
struct SleepHandler {
    median_s: f64,
    sigma: f64,
    binary_bytes: usize,
}

/// The job number of a scale job.
fn job_number(c: &Candidate) -> u64 {
    match c.params.0.get("I") {
        Some(ParamValue::Int(i)) => *i as u64,
        _ => 0,
    }
}

/// The simulated binary of job `i`.
fn binary_of(i: u64, bytes: usize) -> Vec<u8> {
    let seed = i.to_le_bytes();
    (0..bytes).map(|k| seed[k % 8] ^ (k as u8)).collect()
}

/// A uniform number in (0, 1) from `x` (SplitMix64).
fn uniform(x: u64) -> f64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

impl SleepHandler {
    fn seconds(&self, i: u64) -> f64 {
        // Box–Muller: a standard normal from two uniforms.
        let (u1, u2) = (uniform(2 * i), uniform(2 * i + 1));
        let normal = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        self.median_s * (self.sigma * normal).exp()
    }
}

#[async_trait]
impl JobHandler for SleepHandler {
    async fn evaluate(&self, _: &Profile, c: &Candidate) -> Result<Evaluation, BoxError> {
        let s = self.seconds(job_number(c));
        // The worker runs the handler on a blocking thread: a thread sleep is what a compiler
        // or a device wait would be.
        std::thread::sleep(Duration::from_secs_f64(s));
        let t = TimingStats::from_samples(&[s]).ok_or("timing")?;
        Ok(Evaluation::correct(t, None))
    }

    async fn compile(&self, _: &Profile, c: &Candidate) -> Result<CompileOutcome, BoxError> {
        let i = job_number(c);
        Ok(CompileOutcome::Binary(Binary {
            name: format!("job-{i}.bin"),
            bytes: binary_of(i, self.binary_bytes),
        }))
    }

    async fn evaluate_built(
        &self,
        profile: &Profile,
        c: &Candidate,
        binary: &Binary,
    ) -> Result<Evaluation, BoxError> {
        if binary.bytes != binary_of(job_number(c), self.binary_bytes) {
            return Err("another job's binary".into());
        }
        let mut e = self.evaluate(profile, c).await?;
        e.compiler.cache_hit = true;
        Ok(e)
    }
}

fn parsed<T: std::str::FromStr>(name: &str, default: T) -> T {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let Some(servers) = common::servers("scale") else {
        return;
    };
    let jobs: usize = parsed("--jobs", 20_000);
    let workers: usize = parsed("--workers", 100);
    let window: usize = parsed("--window", 2000);
    let median_ms: f64 = parsed("--median-ms", 100.0);
    let sigma: f64 = parsed("--sigma", 0.6);
    let binary_kb: usize = parsed("--binary-kb", 32);
    let secure = arg("--security").as_deref() != Some("off") && servers.secrets.is_some();
    let (nats, search, worker) = support::secured(&servers, secure);
    let db = common::TestDb::create(&servers.database_url, "scale");
    let dist = DistConfig::new(nats.url(), db.url.clone()).ack_wait(Duration::from_secs(30));
    let worker_dist = dist.clone().security(worker);
    let dist = dist.security(search);

    // The workers: tasks on one runtime of two threads (the machine's cores), each with its
    // own NATS and PostgreSQL connections.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(workers + 16)
        .thread_name("kf-sim-worker")
        .enable_all()
        .build()
        .expect("runtime");
    let settings = Settings {
        jobs,
        workers,
        window,
        median_ms,
        sigma,
        secure,
        binary_bytes: binary_kb * 1024,
    };
    // Rounds side by side, on the same workers and servers: each its own run and profile (so
    // no job of one is answered from another's results).
    let polls: Vec<f64> = arg("--max-poll")
        .unwrap_or_else(|| "30".into())
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    println!(
        "| security | workers | window | max poll gap s | eval median / mean ms | jobs | failed | seconds | jobs/s | \
         ideal jobs/s (workers / mean eval) | latency p50 / p90 / p99 / max s | CPU ms per job: \
         search / workers / nats-server / PostgreSQL | PostgreSQL per job: transactions / rows fetched by index / rows and index entries returned | load before → after | search lingers for a batch of results, ms | worker gives its slot back before answering | roles |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let lingers: Vec<f64> = arg("--linger")
        .unwrap_or_else(|| "0".into())
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    let overlaps: Vec<bool> = arg("--overlap")
        .unwrap_or_else(|| "on".into())
        .split(',')
        .map(|v| v != "off")
        .collect();
    let roles: Vec<bool> = arg("--roles")
        .unwrap_or_else(|| "all".into())
        .split(',')
        .map(|v| v == "split")
        .collect();
    let mut round = 0;
    for max_poll in &polls {
        for linger in &lingers {
            for overlap in &overlaps {
                for split in &roles {
                    let workers =
                        Workers::start(&runtime, &worker_dist, &settings, *overlap, *split);
                    let this = Round {
                        index: round,
                        max_poll_s: *max_poll,
                        linger_ms: *linger,
                        split: *split,
                    };
                    let row = measure(&settings, &dist, &db, &servers, &nats, this);
                    let roles = if *split {
                        format!(
                            "{} compile + {} execute, {} KiB binaries",
                            settings.workers / 2,
                            settings.workers - settings.workers / 2,
                            settings.binary_bytes / 1024
                        )
                    } else {
                        "all".into()
                    };
                    println!(
                        "{row} {linger} | {} | {roles} |",
                        if *overlap { "on" } else { "off" }
                    );
                    workers.stop(&runtime);
                    round += 1;
                }
            }
        }
    }
}

/// The simulated workers of one round.
struct Workers {
    stop: Arc<tokio::sync::Notify>,
    handles: Vec<tokio::task::JoinHandle<kf_dist::Result<kf_dist::WorkerStats>>>,
}

impl Workers {
    fn start(
        runtime: &tokio::runtime::Runtime,
        dist: &DistConfig,
        s: &Settings,
        overlap: bool,
        split: bool,
    ) -> Workers {
        let stop = Arc::new(tokio::sync::Notify::new());
        let mut handles = Vec::new();
        for i in 0..s.workers {
            let (dist, stop) = (dist.clone(), stop.clone());
            let handler = SleepHandler {
                median_s: s.median_ms / 1000.0,
                sigma: s.sigma,
                binary_bytes: s.binary_bytes,
            };
            // Split: the first half compile, the others execute.
            let role = match (split, i < s.workers / 2) {
                (false, _) => WorkerRole::All,
                (true, true) => WorkerRole::Compile,
                (true, false) => WorkerRole::Execute,
            };
            handles.push(runtime.spawn(async move {
                let mut config = WorkerConfig::new("scale");
                config.name = format!("sim-{i:03}");
                config.overlap_answers = overlap;
                config.role = role;
                Worker::new(dist, config, handler)
                    .run(async move { stop.notified().await })
                    .await
            }));
        }
        Workers { stop, handles }
    }

    fn stop(self, runtime: &tokio::runtime::Runtime) {
        self.stop.notify_waiters();
        for h in self.handles {
            let _ = runtime.block_on(h);
        }
    }
}

/// What one round varies.
struct Round {
    index: usize,
    max_poll_s: f64,
    linger_ms: f64,
    /// Compile workers and execute workers instead of workers that do both.
    split: bool,
}

struct Settings {
    jobs: usize,
    workers: usize,
    window: usize,
    median_ms: f64,
    sigma: f64,
    secure: bool,
    /// Size of a simulated binary (split roles).
    binary_bytes: usize,
}

/// One round: warm-up, then `jobs` jobs with `window` outstanding; its table row.
fn measure(
    s: &Settings,
    dist: &DistConfig,
    db: &common::TestDb,
    servers: &common::Servers,
    nats: &common::Nats,
    round: Round,
) -> String {
    let Round {
        index: round,
        max_poll_s,
        linger_ms,
        split,
    } = round;
    let run = format!("scale{round}");
    let mut builder = DistEvaluator::builder(
        dist.clone(),
        &run,
        "scale",
        serde_json::json!({"round": round}),
    )
    .compile_first(split)
    .max_in_flight(s.window + 16)
    .max_poll_interval(Duration::from_secs_f64(max_poll_s))
    .result_timeout(Duration::from_secs(3600));
    if linger_ms > 0.0 {
        builder = builder.result_linger(Duration::from_secs_f64(linger_ms / 1000.0));
    }
    let evaluator = builder.connect().expect("evaluator");
    let candidate = support::numbered_job;
    let jobs = s.jobs;
    // Warm-up, not measured: every worker connected, consumers and statements in place.
    let warm: Vec<Candidate> = (0..s.workers.max(20))
        .map(|i| candidate(jobs + i))
        .collect();
    let warmed = futures::executor::block_on(evaluator.evaluate_batch(&warm));
    assert!(
        warmed.iter().all(|r| r.is_ok()),
        "warm-up failed: {:?}",
        warmed.iter().find(|r| r.is_err())
    );
    let postmaster = postmaster_pid(&servers.database_url);
    let pg_before = pg_activity(db);
    let load_before = loadavg();
    let cpu = || {
        (
            search_cpu_seconds(),
            nats.pid()
                .map(|p| cpu_seconds(&p.to_string()))
                .unwrap_or(0.0),
            postmaster.map(server_cpu_seconds).unwrap_or(0.0),
        )
    };
    let before = cpu();
    let process_before = cpu_seconds("self");
    let start = Instant::now();
    let mut done = 0usize;
    let mut last_report = Instant::now();
    let latencies: Vec<(f64, bool)> = futures::executor::block_on(
        futures::stream::iter(0..jobs)
            .map(|i| {
                let (evaluator, c) = (evaluator.clone(), candidate(i));
                async move {
                    let t = Instant::now();
                    let ok = evaluator.evaluate(&c).await.is_ok();
                    (t.elapsed().as_secs_f64(), ok)
                }
            })
            .buffer_unordered(s.window)
            .inspect(|_| {
                done += 1;
                if last_report.elapsed() > Duration::from_secs(15) {
                    last_report = Instant::now();
                    eprintln!(
                        "{run}: {done} of {jobs} answered, {:.0} jobs/s so far",
                        done as f64 / start.elapsed().as_secs_f64()
                    );
                }
            })
            .collect(),
    );
    let seconds = start.elapsed().as_secs_f64();
    let after = cpu();
    let process_after = cpu_seconds("self");
    let load_after = loadavg();
    // The server's counters reach its statistics within a second or so.
    std::thread::sleep(Duration::from_secs(2));
    let pg_after = pg_activity(db);
    let failed = latencies.iter().filter(|(_, ok)| !ok).count();
    let mut sorted: Vec<f64> = latencies.iter().map(|(t, _)| *t).collect();
    sorted.sort_by(f64::total_cmp);
    let pct = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
    let per_job_ms = |a: f64, b: f64| (b - a) * 1e3 / jobs as f64;
    let per_job = |a: i64, b: i64| (b - a) as f64 / jobs as f64;
    let handler = SleepHandler {
        median_s: s.median_ms / 1000.0,
        sigma: s.sigma,
        binary_bytes: 0,
    };
    let mean_eval: f64 = (0..jobs).map(|i| handler.seconds(i as u64)).sum::<f64>() / jobs as f64;
    evaluator.shutdown();
    format!(
        "| {} | {} | {} | {max_poll_s:.0} | {:.0} / {:.0} | {jobs} | {failed} | {seconds:.1} | {:.0} | {:.0} | \
         {:.2} / {:.2} / {:.2} / {:.2} | {:.2} / {:.2} / {:.2} / {:.2} | {:.2} / {:.1} / {:.1} | {load_before} → {load_after} |",
        if s.secure { "on" } else { "off" },
        s.workers,
        s.window,
        s.median_ms,
        mean_eval * 1e3,
        jobs as f64 / seconds,
        // Only execute workers evaluate when the roles are split.
        if split { s.workers - s.workers / 2 } else { s.workers } as f64 / mean_eval,
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0),
        per_job_ms(before.0, after.0),
        per_job_ms(process_before, process_after) - per_job_ms(before.0, after.0),
        per_job_ms(before.1, after.1),
        per_job_ms(before.2, after.2),
        per_job(pg_before[0], pg_after[0]),
        per_job(pg_before[1], pg_after[1]),
        per_job(pg_before[2], pg_after[2]),
    )
}

/// The database's counters: committed transactions, rows fetched (index), rows returned
/// (scans), rows inserted.
fn pg_activity(db: &common::TestDb) -> [i64; 4] {
    let row = db.rows(
        "SELECT xact_commit::text, tup_fetched::text, tup_returned::text, tup_inserted::text \
         FROM pg_stat_database WHERE datname = current_database()",
    );
    let mut out = [0; 4];
    for (o, v) in out.iter_mut().zip(&row[0]) {
        *o = v.parse().unwrap_or(0);
    }
    out
}

/// The 1-minute load average.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(String::from))
        .unwrap_or_default()
}

/// CPU seconds of this process's threads that serve the search: the evaluator's runtime
/// (`kf-dist` threads). The rest of the process is the simulated workers.
fn search_cpu_seconds() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|t| {
            std::fs::read_to_string(format!("/proc/self/task/{t}/comm"))
                .is_ok_and(|c| c.starts_with("kf-dist"))
        })
        .map(|t| cpu_seconds(&format!("self/task/{t}")))
        .sum()
}

/// The parent pid of a process.
fn parent(pid: &str) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The PostgreSQL server's process id, from `postmaster.pid` in its data folder (the URL's
/// socket folder, `…/pg`, holds `data/`).
fn postmaster_pid(admin_url: &str) -> Option<u32> {
    let socket = admin_url
        .split('@')
        .nth(1)?
        .split(':')
        .next()?
        .replace("%2F", "/");
    let text = std::fs::read_to_string(format!("{socket}/data/postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// CPU seconds of one PostgreSQL server: the postmaster and its children (backends, WAL
/// writer, checkpointer), and no other server's.
fn server_cpu_seconds(postmaster: u32) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let own = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|p| p.chars().all(|c| c.is_ascii_digit()))
        .filter(|p| parent(p) == Some(postmaster))
        .map(|p| cpu_seconds(&p))
        .sum::<f64>();
    own + cpu_seconds(&postmaster.to_string())
}
