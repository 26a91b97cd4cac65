//! `kf search --distributed --islands 2` with two `kf worker` processes on this machine's OpenCL device,
//! through a nats-server this test starts and the PostgreSQL server of
//! `scripts/dist-servers.sh`: the search reports a correct kernel, both workers evaluated
//! jobs, and the database holds one result per job and the run's final archive; with the
//! servers' security on, a job signed by a key the workers do not trust is refused (the
//! workers' logs and `kf_refusals` say so, nothing is evaluated), and nothing the run wrote
//! (run directory, worker logs, database, NATS store) holds a password or a private key; a seed
//! that includes a planted file is refused on the worker and the file reaches no table. Skips with a
//! message when the servers or an OpenCL runtime are missing (unless `KF_REQUIRE_DIST=1`,
//! respectively `KF_REQUIRE_OPENCL=1`).

#[path = "common/cluster.rs"]
mod cluster;
#[path = "../kf-dist/tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.0 {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// The servers of a test, a nats-server of its own, a database of its own and an output folder.
/// A test binds every field (`nats: _nats`, not `..`): what a pattern leaves out is dropped at
/// once, and the nats-server stops with its handle.
struct Cluster {
    servers: common::Servers,
    nats: common::Nats,
    db: common::TestDb,
    out: tempfile::TempDir,
    /// The arguments that point `kf search` and `kf worker` at the servers.
    args: Vec<String>,
}

/// The test's cluster; `None` (after a message) without the servers or an OpenCL runtime.
fn cluster(test: &str, db_name: &str) -> Option<Cluster> {
    let servers = common::servers(test)?;
    kernelfoundry::opencl::testing::backend_or_skip()?;
    let nats = common::Nats::start(&servers);
    let db = common::TestDb::create(&servers.database_url, db_name);
    let args = cluster::server_args(&servers, &nats, &db);
    Some(Cluster {
        servers,
        nats,
        db,
        out: tempfile::tempdir().unwrap(),
        args,
    })
}

/// `kf search` with `options` (task, sizes, budgets, how it distributes) on the cluster that
/// `server_args` name, into `out/search`, with the environment variables `env`; fails the test,
/// with what it said, unless it succeeds.
fn search_on(options: &[&str], server_args: &[String], out: &Path, env: &[(&str, &str)]) -> Output {
    let search = Command::new(env!("CARGO_BIN_EXE_kf"))
        .arg("search")
        .args(options)
        .args(server_args)
        .arg("--out")
        .arg(out.join("search"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        search.status.success(),
        "kf search failed:\n{}\n{}",
        String::from_utf8_lossy(&search.stdout),
        String::from_utf8_lossy(&search.stderr)
    );
    search
}

/// Waits up to `seconds`, looking every `poll_ms`, until `done`; fails the test otherwise,
/// saying `what` did not happen and what the process logging into `log` said.
fn wait_until(seconds: u64, poll_ms: u64, what: &str, log: &Path, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(poll_ms));
    }
}

/// `kf worker` processes named `names`, logging into `dir`.
fn start_workers(names: &[&str], server_args: &[String], dir: &std::path::Path) -> Workers {
    let with_args: Vec<(&str, Vec<String>)> = names.iter().map(|n| (*n, Vec::new())).collect();
    start_workers_with(&with_args, server_args, dir)
}

/// `kf worker` processes, each with its name and its own further arguments.
fn start_workers_with(
    workers_args: &[(&str, Vec<String>)],
    server_args: &[String],
    dir: &std::path::Path,
) -> Workers {
    let mut workers = Workers(Vec::new());
    for (name, args) in workers_args {
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
        workers.0.push(
            Command::new(env!("CARGO_BIN_EXE_kf"))
                .args(["worker", "--name", name])
                .args(args)
                .args(server_args)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }
    workers
}

/// `kf search --distributed --compile-first` with a `kf worker --role compile` and a
/// `kf worker --role execute`, each with a compile cache of its own: every job is built on the
/// compile worker, whose binary (the OpenCL program binary) the execute worker loads instead of
/// compiling, byte for byte what the compile worker stored; the execute worker answers every
/// job that runs, and the compile worker runs nothing.
#[test]
fn compile_workers_build_what_execute_workers_run() {
    let Some(Cluster {
        servers: _servers,
        nats: _nats,
        db,
        out,
        args,
    }) = cluster(
        "compile_workers_build_what_execute_workers_run",
        "facade_roles",
    )
    else {
        return;
    };
    let cache = |name: &str| out.path().join(name).display().to_string();
    let workers = start_workers_with(
        &[
            (
                "builder",
                vec![
                    "--role".into(),
                    "compile".into(),
                    "--cache-dir".into(),
                    cache("c-cache"),
                ],
            ),
            (
                "runner",
                vec![
                    "--role".into(),
                    "execute".into(),
                    "--cache-dir".into(),
                    cache("e-cache"),
                ],
            ),
        ],
        &args,
        out.path(),
    );
    search_on(
        &[
            "--task",
            "gemm",
            "--size",
            "M=64,N=64,K=64",
            "--evaluations",
            "6",
            "--tune-budget",
            "2",
            "--time",
            "240",
            "--no-progress",
            "--distributed",
            "--compile-first",
            "--in-flight",
            "2",
        ],
        &args,
        out.path(),
        &[],
    );
    drop(workers);
    let jobs = db.count("SELECT count(*) FROM kf_jobs");
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results"),
        jobs,
        "one result per job"
    );
    // The compile worker answered only what does not compile; the execute worker ran the rest.
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results WHERE worker = 'builder' AND status <> 'compile_error'"),
        0
    );
    let ran = db.count("SELECT count(*) FROM kf_results WHERE worker = 'runner'");
    assert!(ran >= 6, "the execute worker ran {ran} jobs");
    assert_eq!(
        db.count("SELECT count(*) FROM kf_builds"),
        ran,
        "every job that ran was built first"
    );
    let shipped = db.count(
        "SELECT count(*) FROM kf_results WHERE worker = 'runner' \
         AND evaluation->'compiler'->'extra'->>'binary' LIKE 'shipped: %' \
         AND (evaluation->'compiler'->>'cache_hit')::boolean",
    );
    assert_eq!(shipped, ran, "every job ran the compile worker's binary");
    assert!(db.count("SELECT count(*) FROM kf_results WHERE status = 'correct'") >= 1);
    // Each row records how the process that produced it was confined: as an untrusted
    // process on this machine is (complete where the kernel has Landlock and seccomp).
    let level = kernelfoundry::eval::confine::probe().level.to_string();
    assert_eq!(
        db.count(&format!(
            "SELECT count(*) FROM kf_results WHERE confinement = '{level}'"
        )),
        jobs,
        "{:?}",
        db.rows("SELECT worker, coalesce(confinement, 'NULL') FROM kf_results")
    );
    // Byte for byte what the compile worker stored.
    let stored = db.rows(
        "SELECT b.name, encode(x.bytes, 'hex') FROM kf_builds b \
         JOIN kf_binaries x ON x.hash = b.binary_hash",
    );
    assert!(!stored.is_empty());
    for row in &stored {
        let received = std::fs::read(out.path().join("e-cache").join(&row[0])).unwrap();
        let hex: String = received.iter().map(|b| format!("{b:02x}")).collect();
        assert!(hex == row[1], "{} differs from the stored binary", row[0]);
    }
}

/// `kf search --distributed --fan-out 6` with three workers: one kernel's tuning configurations
/// are sent out together (all of a step's jobs are on the queue before the first of their
/// results is stored) and answered by more than one worker; every job still has one result.
#[test]
fn a_kernel_s_tuning_fans_out_over_the_workers() {
    let Some(Cluster {
        servers: _servers,
        nats: _nats,
        db,
        out,
        args,
    }) = cluster(
        "a_kernel_s_tuning_fans_out_over_the_workers",
        "facade_fan_out",
    )
    else {
        return;
    };
    let workers = start_workers(&["fa", "fb", "fc"], &args, out.path());
    search_on(
        &[
            "--task",
            "gemm",
            "--size",
            "M=64,N=64,K=64",
            "--evaluations",
            "2",
            "--tune-budget",
            "7",
            "--time",
            "240",
            "--no-progress",
            "--distributed",
            "--in-flight",
            "1",
            "--fan-out",
            "6",
        ],
        &args,
        out.path(),
        &[],
    );
    drop(workers);
    // Per kernel: when each job was queued and answered, and by whom.
    let rows = db.rows(
        "SELECT j.kernel, extract(epoch FROM j.created_at)::text, \
                extract(epoch FROM r.stored_at)::text, r.worker \
         FROM kf_jobs j JOIN kf_results r USING (job_id)",
    );
    assert_eq!(
        rows.len() as i64,
        db.count("SELECT count(*) FROM kf_jobs"),
        "one result per job"
    );
    let mut kernels: std::collections::BTreeMap<&str, Vec<(f64, f64, &str)>> = Default::default();
    for r in &rows {
        let t = |s: &str| s.parse::<f64>().unwrap();
        kernels
            .entry(r[0].as_str())
            .or_default()
            .push((t(&r[1]), t(&r[2]), r[3].as_str()));
    }
    // The most jobs of one kernel on the queue or being evaluated at one moment.
    let widest = kernels
        .values()
        .map(|jobs| {
            jobs.iter()
                .map(|(queued, _, _)| {
                    jobs.iter()
                        .filter(|(q, answered, _)| q <= queued && queued < answered)
                        .count()
                })
                .max()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0);
    assert!(
        widest >= 4,
        "a tuning step's configurations were sent one after another: at most {widest} at once \
         ({kernels:?})"
    );
    let spread = kernels
        .values()
        .map(|jobs| {
            jobs.iter()
                .map(|(_, _, w)| *w)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        })
        .max()
        .unwrap_or(0);
    assert!(
        spread >= 2,
        "one kernel's tuning stayed on one worker: {kernels:?}"
    );
}

#[test]
fn a_distributed_search_runs_on_kf_workers() {
    let Some(Cluster {
        servers,
        nats,
        db,
        out,
        args: server_args,
    }) = cluster("a_distributed_search_runs_on_kf_workers", "facade_search")
    else {
        return;
    };
    let kf = env!("CARGO_BIN_EXE_kf");
    let workers = start_workers(&["wa", "wb"], &server_args, out.path());
    search_on(
        &[
            "--task",
            "gemm",
            "--size",
            "M=96,N=64,K=80",
            "--evaluations",
            "10",
            "--tune-budget",
            "2",
            "--time",
            "240",
            "--no-progress",
            // Two islands (and the shipped emitters) share the one distributed evaluator.
            "--distributed",
            "--in-flight",
            "4",
            "--islands",
            "2",
        ],
        &server_args,
        out.path(),
        &[],
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
    wait_until(
        60,
        200,
        "no refusal recorded; the rogue search said",
        &rogue_log,
        || db.count("SELECT count(*) FROM kf_refusals") > 0,
    );
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

/// Host-file probes on a cluster (issue 47): `kf search --distributed` seeded with a kernel
/// that includes a planted secret file, evaluated by a `kf worker`. The worker refuses it
/// before compilation (a `compile_error` naming the directive, stored in `kf_results`), and
/// neither the file's contents nor the secret-looking variables of the search and the worker
/// appear in any row of any table of the database, in the run directory or in the worker's log.
#[test]
fn host_file_probes_reach_no_database_row() {
    let Some(Cluster {
        servers: _servers,
        nats: _nats,
        db,
        out,
        args,
    }) = cluster("host_file_probes_reach_no_database_row", "facade_probes")
    else {
        return;
    };
    let file_secret = ["PLANTED", "CLUSTER", "FILE"].join("_");
    let env_secret = ["planted", "cluster", "token", "1701"].join("-");
    let vault = out.path().join("vault");
    std::fs::create_dir_all(&vault).unwrap();
    let secret = vault.join("creds.h");
    std::fs::write(&secret, format!("#error {file_secret}\n")).unwrap();
    // The probe: the shipped naive kernel behind an include of the planted file.
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kf-eval/kernels");
    let naive = std::fs::read_to_string(shipped.join("gemm_naive.cl")).unwrap();
    std::fs::write(
        out.path().join("probe.cl"),
        format!("#include \"{}\"\n{naive}", secret.display()),
    )
    .unwrap();
    let manifest = std::fs::read_to_string(shipped.join("gemm_naive.toml"))
        .unwrap()
        .replace("gemm_naive.cl", "probe.cl");
    std::fs::write(out.path().join("probe.toml"), manifest).unwrap();

    // Both the worker and the search hold a secret-looking variable.
    let log = std::fs::File::create(out.path().join("prober.log")).unwrap();
    let worker = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(["worker", "--name", "prober"])
        .args(&args)
        .env("KF_PLANTED_CLUSTER_TOKEN", &env_secret)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let workers = Workers(vec![worker]);
    let probe = out.path().join("probe.toml");
    let search = search_on(
        &[
            "--task",
            "gemm",
            "--size",
            "M=64,N=64,K=64",
            // The probe is the sixth seed (after the baseline and four templates).
            "--evaluations",
            "6",
            "--tune-budget",
            "1",
            "--time",
            "240",
            "--no-progress",
            "--distributed",
            "--kernel",
            probe.to_str().unwrap(),
        ],
        &args,
        out.path(),
        &[("KF_PLANTED_CLUSTER_TOKEN", env_secret.as_str())],
    );
    drop(workers);
    let said = format!(
        "{}\n{}",
        String::from_utf8_lossy(&search.stdout),
        String::from_utf8_lossy(&search.stderr)
    );
    assert!(
        db.count(
            "SELECT count(*) FROM kf_results WHERE status = 'compile_error' \
             AND evaluation->>'diagnostics' LIKE '%refused before compilation%'"
        ) >= 1,
        "the probe was not refused on the worker: {:?}",
        db.rows("SELECT status, evaluation->>'diagnostics' FROM kf_results")
    );
    let tables = db.rows(
        "SELECT table_name FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    );
    assert!(tables.len() >= 3, "{tables:?}");
    for row in &tables {
        for s in [&file_secret, &env_secret] {
            let hits = db.count(&format!(
                "SELECT count(*) FROM {} AS t WHERE t::text LIKE '%{s}%'",
                row[0]
            ));
            assert_eq!(hits, 0, "table {} holds a planted secret", row[0]);
        }
    }
    let mut files = Vec::new();
    let mut stack = vec![out.path().join("search"), out.path().join("prober.log")];
    while let Some(p) = stack.pop() {
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else {
            files.push(p);
        }
    }
    assert!(files.len() > 3, "{files:?}");
    for f in files {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        for s in [&file_secret, &env_secret] {
            assert!(
                !text.contains(s.as_str()),
                "{} holds a planted secret",
                f.display()
            );
        }
    }
    assert!(!said.contains(&file_secret) && !said.contains(&env_secret));
}

/// What a run directory says about a search, timings and error figures left out: every
/// evaluation's kernel, parameters, status, number of input sets checked and cell, in the order of the kernels' text, and the
/// final archive's cells with their elites' kernels, parameters and statuses.
fn search_outcome(out: &std::path::Path) -> (Vec<String>, Vec<String>) {
    let steps = std::fs::read_to_string(out.join("run/steps.jsonl")).unwrap();
    let mut evaluations = Vec::new();
    for line in steps.lines() {
        let step: serde_json::Value = serde_json::from_str(line).unwrap();
        for child in step["record"]["children"].as_array().unwrap() {
            let elite = &child["elite"];
            let evaluation = &elite["evaluation"];
            // The verdict, not its error figures: every evaluation draws fresh input sets
            // (so the largest errors differ between two runs in one process too), and the
            // worker's name and the timings may differ.
            evaluations.push(
                serde_json::json!({
                    "kernel": elite["candidate"]["source"]["text"],
                    "params": elite["candidate"]["params"],
                    "status": evaluation["status"],
                    "input_sets": evaluation["correctness"]["input_sets"],
                    "cell": elite["descriptor"]["coords"],
                })
                .to_string(),
            );
        }
    }
    evaluations.sort();
    let snapshot: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run/snapshot.json")).unwrap())
            .unwrap();
    let mut cells: Vec<String> = snapshot["archive"]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            serde_json::json!({
                "coords": c["coords"],
                "kernel": c["payload"]["candidate"]["source"]["text"],
                "params": c["payload"]["candidate"]["params"],
                "status": c["payload"]["evaluation"]["status"],
            })
            .to_string()
        })
        .collect();
    cells.sort();
    (evaluations, cells)
}

/// Issue 49: `kf search --task-file … --distributed` with two `kf worker`s. The task file, its
/// Python reference and its kernels travel with the jobs (inside the signed profile); each
/// worker writes them into a folder of its own and runs the reference confined. The search
/// judges every kernel as the same search in one process does (same statuses, verdicts and
/// cells, the same archive; timings aside). Then the reference script stored in the database
/// is altered: a fresh worker refuses the job before evaluating anything, the refusal (in
/// `kf_refusals` and the worker's log) names the script and says it does not match its
/// signed hash, and no result is stored.
#[test]
fn a_task_file_search_on_workers_gives_the_in_process_archive() {
    let Some(Cluster {
        db,
        out,
        args: server_args,
        servers: _servers,
        nats: _nats,
    }) = cluster(
        "a_task_file_search_on_workers_gives_the_in_process_archive",
        "facade_task_file",
    )
    else {
        return;
    };
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    let kf = env!("CARGO_BIN_EXE_kf");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/examples/scaled_swish");
    // Shipped tasks go into a folder of the test's own.
    let worker_args = |name: &str| {
        (
            name.to_string(),
            vec![
                "--task-dir".to_string(),
                out.path()
                    .join(format!("{name}-tasks"))
                    .display()
                    .to_string(),
            ],
        )
    };
    let named: Vec<(String, Vec<String>)> = ["wa", "wb"].iter().map(|n| worker_args(n)).collect();
    let with_args: Vec<(&str, Vec<String>)> =
        named.iter().map(|(n, a)| (n.as_str(), a.clone())).collect();
    let workers = start_workers_with(&with_args, &server_args, out.path());
    // The task's naive baseline and two kernels of the example (one fast, one that writes
    // half the output): the seeds are the whole budget, so the archive does not depend on
    // which kernel timed faster by a hair.
    let search = |target: &str, distributed: bool| {
        let mut c = Command::new(kf);
        c.arg("search")
            .arg("--task-file")
            .arg(dir.join("scaled_swish.toml"))
            .arg("--kernel")
            .arg(dir.join("scaled_swish_fast.toml"))
            .arg("--kernel")
            .arg(dir.join("scaled_swish_halfwork.toml"))
            .args(["--size", "ROWS=64,COLS=48", "--evaluations", "3"])
            .args(["--tune-budget", "1", "--seed", "3", "--time", "240"])
            .arg("--no-progress")
            .arg("--out")
            .arg(out.path().join(target));
        if distributed {
            c.args(["--distributed", "--in-flight", "2"])
                .args(&server_args);
        }
        c
    };
    let local = search("local", false).output().unwrap();
    assert!(
        local.status.success(),
        "in-process search failed:\n{}",
        String::from_utf8_lossy(&local.stderr)
    );
    let distributed = search("dist", true).output().unwrap();
    assert!(
        distributed.status.success(),
        "distributed search failed:\n{}\n{}",
        String::from_utf8_lossy(&distributed.stdout),
        String::from_utf8_lossy(&distributed.stderr)
    );
    let (local_evaluations, local_cells) = search_outcome(&out.path().join("local"));
    let (dist_evaluations, dist_cells) = search_outcome(&out.path().join("dist"));
    assert_eq!(local_evaluations.len(), 3, "{local_evaluations:?}");
    assert!(
        local_evaluations.iter().any(|e| e.contains("\"correct\"")),
        "{local_evaluations:?}"
    );
    assert!(
        local_evaluations.iter().any(|e| !e.contains("\"correct\"")),
        "the half-work kernel is judged wrong: {local_evaluations:?}"
    );
    assert_eq!(dist_evaluations, local_evaluations, "evaluations differ");
    assert_eq!(dist_cells, local_cells, "archives differ");
    // The workers evaluated every job against the shipped files, in folders named by hash.
    assert_eq!(db.count("SELECT count(*) FROM kf_results"), 3);
    assert_eq!(db.count("SELECT count(*) FROM kf_refusals"), 0);
    let shipped: Vec<std::path::PathBuf> = ["wa", "wb"]
        .iter()
        .flat_map(|w| std::fs::read_dir(out.path().join(format!("{w}-tasks"))).into_iter())
        .flatten()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!shipped.is_empty(), "no worker wrote the shipped task");
    for folder in &shipped {
        assert_eq!(
            std::fs::read(folder.join("scaled_swish_ref.py")).unwrap(),
            std::fs::read(dir.join("scaled_swish_ref.py")).unwrap()
        );
    }
    drop(workers);

    // A second search of the task (its profile is its own: the time limits scale with this
    // machine's measured compile time). While its jobs wait for a worker, the reference script
    // as the database holds it is altered; its signed hash is not.
    let first_profile = db.rows("SELECT hash FROM kf_profiles");
    assert_eq!(first_profile.len(), 1);
    let log = out.path().join("altered-search.log");
    let mut altered_search = search("altered", true);
    altered_search
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut altered_search = Workers(vec![altered_search.spawn().unwrap()]);
    wait_until(
        60,
        100,
        "the second search recorded no profile",
        &log,
        || db.count("SELECT count(*) FROM kf_profiles") >= 2,
    );
    let altered = db.count(&format!(
        "WITH u AS (UPDATE kf_profiles SET profile = jsonb_set(profile, \
         '{{task_file,files,scaled_swish_ref.py,text}}', \
         to_jsonb((profile #>> '{{task_file,files,scaled_swish_ref.py,text}}') || \
         E'\\nimport os\\n')) WHERE hash <> '{}' RETURNING 1) SELECT count(*) FROM u",
        first_profile[0][0]
    ));
    assert_eq!(altered, 1);
    let fresh = [worker_args("wc")];
    let fresh: Vec<(&str, Vec<String>)> =
        fresh.iter().map(|(n, a)| (n.as_str(), a.clone())).collect();
    let workers = start_workers_with(&fresh, &server_args, out.path());
    wait_until(
        120,
        200,
        "no refusal recorded; the search said",
        &log,
        || db.count("SELECT count(*) FROM kf_refusals") > 0,
    );
    let reasons = db.rows("SELECT reason FROM kf_refusals");
    assert!(
        reasons
            .iter()
            .all(|r| r[0].contains("`scaled_swish_ref.py`")
                && r[0].contains("does not match its signed hash")),
        "{reasons:?}"
    );
    assert_eq!(
        db.count("SELECT count(*) FROM kf_results"),
        3,
        "nothing was evaluated against the altered reference"
    );
    altered_search.0[0].kill().ok();
    altered_search.0[0].wait().ok();
    drop(workers);
    let worker_log = std::fs::read_to_string(out.path().join("wc.log")).unwrap();
    assert!(
        worker_log.contains("job refused, not evaluated")
            && worker_log.contains("scaled_swish_ref.py"),
        "{worker_log}"
    );
    assert!(
        !out.path()
            .join("wc-tasks")
            .read_dir()
            .is_ok_and(|mut d| d
                .any(|e| e.is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.')))),
        "the altered task was written out"
    );
}
