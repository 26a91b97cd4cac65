//! [`ClusterStatus`]: what `kf cluster status` shows — the workers by role and device kind
//! (alive, gone, stopped), the jobs on the queue by device kind and priority, the jobs being
//! evaluated, the recent throughput and the failures.
//!
//! Everything comes from the servers the searches and workers already use: the workers'
//! heartbeats and the results in PostgreSQL, the message counts of the jobs stream in
//! JetStream. It needs the search role's rights only.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::config::DistConfig;
use crate::error::{DistError, Result};
use crate::queue::Queue;
use crate::store::Store;

/// Heartbeat periods a worker may miss before it counts as gone.
pub const GONE_AFTER_PERIODS: f64 = 3.0;

/// Whether a worker is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// It reported within [`GONE_AFTER_PERIODS`] heartbeat periods.
    Alive,
    /// It stopped reporting without saying it stops: killed, crashed, cut off. Jobs it held
    /// go to other workers after the acknowledgement wait.
    Gone,
    /// It shut down cleanly.
    Stopped,
}

impl fmt::Display for WorkerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WorkerState::Alive => "alive",
            WorkerState::Gone => "gone",
            WorkerState::Stopped => "stopped",
        })
    }
}

/// One worker (one row per device kind it serves).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerStatus {
    /// Its name.
    pub name: String,
    /// What it does (`all`: compiles and runs).
    pub role: String,
    /// The device kind.
    pub device_kind: String,
    /// Alive, gone or stopped.
    pub state: WorkerState,
    /// Seconds since its last heartbeat.
    pub silent_s: f64,
    /// Jobs in hand at its last heartbeat.
    pub in_flight: u64,
    /// Jobs it evaluated since it started.
    pub evaluated: u64,
    /// Jobs it handed back (its evaluator failed).
    pub handed_back: u64,
    /// Jobs it refused unevaluated.
    pub refused: u64,
    /// Poison jobs it recorded as failed.
    pub poisoned: u64,
    /// Jobs it compiled and passed on to the execute workers (a compile worker).
    pub compiled: u64,
}

/// Jobs on the queue for one device kind and priority: waiting, or delivered to a worker and
/// not yet answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueDepth {
    /// The device kind.
    pub device_kind: String,
    /// The priority (0 first).
    pub priority: u8,
    /// Messages on the queue.
    pub jobs: u64,
}

/// The cluster at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterStatus {
    /// Every worker that ever registered, alive ones first.
    pub workers: Vec<WorkerStatus>,
    /// Jobs on the queue by device kind and priority (those with none left out).
    pub queue: Vec<QueueDepth>,
    /// Jobs being evaluated now: the sum over alive workers.
    pub in_flight: u64,
    /// The window the rates and failures below cover, seconds.
    pub window_s: f64,
    /// Results stored within the window.
    pub results_in_window: u64,
    /// Results stored per second over the window.
    pub jobs_per_second: f64,
    /// Results stored ever.
    pub results_total: u64,
    /// Results within the window by status, the failed ones only (status name → count).
    pub failures: BTreeMap<String, u64>,
    /// Jobs refused by workers within the window.
    pub refusals: u64,
}

impl ClusterStatus {
    /// Reads the status from both servers; rates and failures over the last `window`.
    pub async fn read(config: &DistConfig, window: Duration) -> Result<ClusterStatus> {
        config.validate()?;
        if window.is_zero() {
            return Err(DistError::Config(
                "the status window must be longer than zero".into(),
            ));
        }
        let config = config.with_security_loaded()?;
        let queue = Queue::connect(&config, "kf-cluster-status").await?;
        let store = Store::connect(&config.database_url, &config.security).await?;
        let c = store.client().await?;
        let seconds = window.as_secs_f64();
        let workers = read_workers(&c).await?;
        let in_flight = workers
            .iter()
            .filter(|w| w.state == WorkerState::Alive)
            .map(|w| w.in_flight)
            .sum();
        let since = format!("now() - make_interval(secs => {seconds})");
        let (results_in_window, failures) = read_recent_results(&c, &since).await?;
        let total = c
            .query_one("SELECT count(*) FROM kf_results", &[])
            .await
            .map_err(|e| DistError::db("counting results", e))?;
        let refusals = c
            .query_one(
                &format!("SELECT count(*) FROM kf_refusals WHERE refused_at > {since}"),
                &[],
            )
            .await
            .map_err(|e| DistError::db("counting refusals", e))?;
        Ok(ClusterStatus {
            workers,
            queue: queue
                .depths()
                .await?
                .into_iter()
                .map(|(device_kind, priority, jobs)| QueueDepth {
                    device_kind,
                    priority,
                    jobs,
                })
                .collect(),
            in_flight,
            window_s: seconds,
            results_in_window,
            jobs_per_second: results_in_window as f64 / seconds,
            results_total: count(total.get(0)),
            failures,
            refusals: count(refusals.get(0)),
        })
    }

    /// [`ClusterStatus::read`] on a runtime of its own.
    pub fn read_blocking(config: &DistConfig, window: Duration) -> Result<ClusterStatus> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(DistError::Runtime)?
            .block_on(Self::read(config, window))
    }

    /// The workers of one state.
    pub fn count(&self, state: WorkerState) -> usize {
        self.workers.iter().filter(|w| w.state == state).count()
    }
}

/// A count from the database as a count (a negative one, which cannot happen, as zero).
fn count(v: i64) -> u64 {
    v.max(0) as u64
}

/// Every registered worker, from its heartbeat row, alive ones first (then by role, device
/// kind and name).
async fn read_workers(c: &tokio_postgres::Client) -> Result<Vec<WorkerStatus>> {
    let rows = c
        .query(
            "SELECT name, role, device_kind, \
                    EXTRACT(EPOCH FROM now() - last_seen)::float8, heartbeat_s, \
                    stopped_at IS NOT NULL, in_flight::int8, evaluated, handed_back, refused, \
                    poisoned, compiled \
             FROM kf_workers ORDER BY role, device_kind, name",
            &[],
        )
        .await
        .map_err(|e| DistError::db("reading the workers", e))?;
    let mut workers: Vec<WorkerStatus> = rows.iter().map(worker_from_row).collect();
    workers.sort_by(|a, b| {
        (a.state, &a.role, &a.device_kind, &a.name).cmp(&(
            b.state,
            &b.role,
            &b.device_kind,
            &b.name,
        ))
    });
    Ok(workers)
}

/// One row of [`read_workers`]' query; the state follows from the row's silence measured in
/// the worker's own heartbeat periods.
fn worker_from_row(r: &tokio_postgres::Row) -> WorkerStatus {
    let silent_s: f64 = r.get(3);
    let period: f64 = r.get(4);
    let state = if r.get::<_, bool>(5) {
        WorkerState::Stopped
    } else if silent_s > GONE_AFTER_PERIODS * period {
        WorkerState::Gone
    } else {
        WorkerState::Alive
    };
    WorkerStatus {
        name: r.get(0),
        role: r.get(1),
        device_kind: r.get(2),
        state,
        silent_s,
        in_flight: count(r.get(6)),
        evaluated: count(r.get(7)),
        handed_back: count(r.get(8)),
        refused: count(r.get(9)),
        poisoned: count(r.get(10)),
        compiled: count(r.get(11)),
    }
}

/// The results stored after `since` (an SQL time expression): how many, and the failed ones
/// by status.
async fn read_recent_results(
    c: &tokio_postgres::Client,
    since: &str,
) -> Result<(u64, BTreeMap<String, u64>)> {
    let by_status = c
        .query(
            &format!(
                "SELECT status, count(*) FROM kf_results WHERE stored_at > {since} GROUP BY status"
            ),
            &[],
        )
        .await
        .map_err(|e| DistError::db("reading recent results", e))?;
    let mut results_in_window = 0;
    let mut failures = BTreeMap::new();
    for r in &by_status {
        let (status, n): (String, i64) = (r.get(0), r.get(1));
        results_in_window += count(n);
        if status != kf_core::Status::Correct.to_string() {
            failures.insert(status, count(n));
        }
    }
    Ok((results_in_window, failures))
}

impl fmt::Display for ClusterStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Workers by role and device kind: alive / gone / stopped.
        let mut groups: BTreeMap<(&str, &str), [usize; 3]> = BTreeMap::new();
        for w in &self.workers {
            let g = groups.entry((&w.role, &w.device_kind)).or_default();
            g[w.state as usize] += 1;
        }
        writeln!(f, "workers")?;
        writeln!(
            f,
            "  {:<8} {:<40} {:>6} {:>5} {:>8}",
            "role", "device kind", "alive", "gone", "stopped"
        )?;
        for ((role, kind), [alive, gone, stopped]) in &groups {
            writeln!(
                f,
                "  {role:<8} {kind:<40} {alive:>6} {gone:>5} {stopped:>8}"
            )?;
        }
        if groups.is_empty() {
            writeln!(f, "  (none registered)")?;
        }
        for w in &self.workers {
            if w.state == WorkerState::Stopped {
                continue;
            }
            writeln!(
                f,
                "  {:<7} {} ({}, {}): {} in hand, {} evaluated, {} compiled and passed on, {} handed back, {} refused, {} poison; last heard {:.0} s ago",
                w.state, w.name, w.role, w.device_kind, w.in_flight, w.evaluated, w.compiled,
                w.handed_back, w.refused, w.poisoned, w.silent_s
            )?;
        }
        writeln!(f, "queue (waiting or being evaluated)")?;
        for q in &self.queue {
            writeln!(f, "  {:<40} p{} {:>8}", q.device_kind, q.priority, q.jobs)?;
        }
        if self.queue.is_empty() {
            writeln!(f, "  (empty)")?;
        }
        writeln!(f, "in flight: {} job(s) on alive workers", self.in_flight)?;
        writeln!(
            f,
            "throughput: {:.2} jobs/s over the last {:.0} s ({} results; {} ever)",
            self.jobs_per_second, self.window_s, self.results_in_window, self.results_total
        )?;
        let failed: u64 = self.failures.values().sum();
        write!(f, "failures in the last {:.0} s: {failed}", self.window_s)?;
        for (status, n) in &self.failures {
            write!(f, ", {status} {n}")?;
        }
        writeln!(f, "; {} refused", self.refusals)
    }
}
