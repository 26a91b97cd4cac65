//! Seeing a run as it goes: the progress bar (feature `progress`), its trace, the logging
//! observer and the writer that keeps log lines from tearing the bar.

use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[cfg(feature = "progress")]
use indicatif::ProgressBar;
use kf_core::{
    BoxError, Budget, DescriptorSpace, EvaluationReport, InsertOutcome, Observe, RunInfo,
    RunSummary,
};
use serde::{Deserialize, Serialize};

use super::table::{finite, level_name};

/// Without the `progress` feature no bar is ever drawn: a type with no values stands in for
/// indicatif's, so the observer's bookkeeping is the same in both builds.
#[cfg(not(feature = "progress"))]
#[derive(Debug, Clone)]
enum ProgressBar {}

#[cfg(not(feature = "progress"))]
impl ProgressBar {
    fn set_position(&self, _: u64) {
        match *self {}
    }
    fn set_message(&self, _: String) {
        match *self {}
    }
    fn finish_with_message(&self, _: String) {
        match *self {}
    }
    fn abandon(&self) {
        match *self {}
    }
    fn is_hidden(&self) -> bool {
        match *self {}
    }
    fn suspend<R>(&self, _: impl FnOnce() -> R) -> R {
        match *self {}
    }
}

/// The progress bar being drawn, if any, so that log lines can step around it, with the id of
/// the observer that drew it.
static ACTIVE_BAR: Mutex<Option<(u64, ProgressBar)>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Search progress after one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TracePoint {
    /// Evaluations done.
    pub evaluations: u64,
    /// Best GFLOP/s of a correct kernel so far, once one was measured.
    pub best_gflops: Option<f64>,
    /// QD-score of the archive.
    pub qd_score: f64,
    /// Cells filled.
    pub filled: usize,
    /// Seconds since the run started.
    pub elapsed_s: f64,
    /// Device evaluations done (every configuration compiled and timed, tuning included).
    #[serde(default)]
    pub device_evaluations: u64,
}

/// The points a [`ProgressObserver`] recorded, shared with whoever keeps a clone: take one with
/// [`ProgressObserver::trace`] before handing the observer to the engine, and read it after the
/// run for [`Report::trace`](super::Report::trace).
#[derive(Debug, Clone, Default)]
pub struct ProgressTrace(Arc<Mutex<Vec<TracePoint>>>);

impl ProgressTrace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a point.
    pub fn push(&self, point: TracePoint) {
        lock(&self.0).push(point);
    }

    /// A copy of the points, in the order they were recorded.
    pub fn points(&self) -> Vec<TracePoint> {
        lock(&self.0).clone()
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        lock(&self.0).len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether to draw the bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Draw {
    /// When stderr is a terminal.
    Auto,
    /// Never; log lines instead.
    Never,
}

/// A progress bar on stderr: evaluations / budget, best GFLOP/s, cells filled and ETA.
///
/// When stderr is not a terminal (or after [`without_bar`](Self::without_bar), or in a build
/// without the `progress` feature) nothing is drawn;
/// a `tracing` info line is logged every [`log_every`](Self::log_every) evaluations instead, so
/// CI logs stay short. Either way it records a [`ProgressTrace`]. Add it to the engine with
/// `ObserverMode::Always` so the trace has every evaluation.
#[derive(Debug)]
pub struct ProgressObserver {
    id: u64,
    cells: usize,
    total: Option<u64>,
    max_wall: Option<Duration>,
    log_every: Option<u64>,
    draw: Draw,
    bar: Option<ProgressBar>,
    best_gflops: Option<f64>,
    filled: usize,
    evaluations: u64,
    device_evaluations: u64,
    trace: ProgressTrace,
    started: Instant,
    next_log: u64,
}

impl ProgressObserver {
    /// An observer for an archive over `space`.
    pub fn new(space: &DescriptorSpace) -> Self {
        Self::with_cells(space.cells())
    }

    /// An observer for an archive of `cells` cells.
    pub fn with_cells(cells: usize) -> Self {
        ProgressObserver {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            cells,
            total: None,
            max_wall: None,
            log_every: None,
            draw: Draw::Auto,
            bar: None,
            best_gflops: None,
            filled: 0,
            evaluations: 0,
            device_evaluations: 0,
            trace: ProgressTrace::new(),
            started: Instant::now(),
            next_log: 0,
        }
    }

    /// Takes the evaluation and wall-clock limits from the run's budget, for the bar's length and
    /// ETA (the evaluation limit also arrives with the run's start).
    pub fn with_budget(mut self, budget: &Budget) -> Self {
        self.total = budget.max_evaluations.or(self.total);
        self.max_wall = budget.max_wall.or(self.max_wall);
        self
    }

    /// Logs a line every `n` evaluations when no bar is drawn (default: about 20 lines per run
    /// when the evaluation budget is known, else every 25).
    pub fn log_every(mut self, n: u64) -> Self {
        self.log_every = Some(n.max(1));
        self
    }

    /// Never draws the bar, even on a terminal; logs lines instead.
    pub fn without_bar(mut self) -> Self {
        self.draw = Draw::Never;
        self
    }

    /// A handle on the recorded trace.
    pub fn trace(&self) -> ProgressTrace {
        self.trace.clone()
    }

    fn interval(&self) -> u64 {
        self.log_every
            .or_else(|| self.total.map(|t| t.div_ceil(20)))
            .unwrap_or(25)
            .max(1)
    }

    fn message(&self) -> String {
        let best = self.best_gflops.map_or_else(|| "-".to_owned(), gflops_text);
        format!(
            "{} device evals · best {best} GFLOP/s · cells {}/{}",
            self.device_evaluations, self.filled, self.cells
        )
    }

    fn eta(&self) -> Option<Duration> {
        eta(
            self.total,
            self.evaluations,
            self.started.elapsed(),
            self.max_wall,
        )
    }

    fn start_bar(&mut self) {
        let wanted = self.draw == Draw::Auto && io::stderr().is_terminal();
        #[cfg(feature = "progress")]
        if wanted {
            self.draw_bar();
        }
        #[cfg(not(feature = "progress"))]
        let _ = wanted;
    }

    #[cfg(feature = "progress")]
    fn draw_bar(&mut self) {
        use indicatif::{ProgressDrawTarget, ProgressState, ProgressStyle};
        let bar = ProgressBar::with_draw_target(self.total, ProgressDrawTarget::stderr());
        let template = if self.total.is_some() {
            "{spinner:.green} [{elapsed_precise}] {bar:30.cyan/blue} {pos}/{len} candidates · {msg} · {eta_kf}"
        } else {
            "{spinner:.green} [{elapsed_precise}] {pos} candidates · {msg} · {eta_kf}"
        };
        let (total, max_wall, started) = (self.total, self.max_wall, self.started);
        let style = ProgressStyle::with_template(template)
            .map(|s| {
                s.progress_chars("=> ").with_key(
                    "eta_kf",
                    move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&format_eta(eta(
                            total,
                            state.pos(),
                            started.elapsed(),
                            max_wall,
                        )));
                    },
                )
            })
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_message(self.message());
        bar.enable_steady_tick(Duration::from_millis(250));
        *lock(&ACTIVE_BAR) = Some((self.id, bar.clone()));
        self.bar = Some(bar);
    }

    fn stop_bar(&mut self, finish: bool) {
        if let Some(bar) = self.bar.take() {
            if finish {
                bar.finish_with_message(self.message());
            } else {
                bar.abandon();
            }
            let mut active = lock(&ACTIVE_BAR);
            if active.as_ref().is_some_and(|(id, _)| *id == self.id) {
                *active = None;
            }
        }
    }
}

/// GFLOP/s with three significant figures or so.
fn gflops_text(g: f64) -> String {
    if g >= 100.0 {
        format!("{g:.0}")
    } else if g >= 1.0 {
        format!("{g:.1}")
    } else {
        format!("{g:.2}")
    }
}

/// Time left: by the evaluation rate when the evaluation budget is known, by the wall-clock
/// budget when that is known, the sooner of the two when both are.
fn eta(
    total: Option<u64>,
    done: u64,
    elapsed: Duration,
    max_wall: Option<Duration>,
) -> Option<Duration> {
    let by_evals = total.filter(|_| done > 0).map(|t| {
        let left = t.saturating_sub(done) as f64;
        Duration::from_secs_f64((elapsed.as_secs_f64() / done as f64 * left).min(1e9))
    });
    let by_wall = max_wall.map(|m| m.saturating_sub(elapsed));
    match (by_evals, by_wall) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn format_eta(eta: Option<Duration>) -> String {
    match eta {
        None => "ETA -".to_owned(),
        Some(d) => {
            let s = d.as_secs();
            if s >= 3600 {
                format!("ETA {}h{:02}m", s / 3600, (s % 3600) / 60)
            } else {
                format!("ETA {}m{:02}s", s / 60, s % 60)
            }
        }
    }
}

impl Observe for ProgressObserver {
    fn observe_start(&mut self, info: &RunInfo<'_>) -> Result<(), BoxError> {
        self.total = self.total.or(info.max_evaluations);
        self.started = Instant::now();
        self.next_log = self.interval();
        if info.replaying_steps > 0 {
            tracing::info!(
                "resuming: replaying {} recorded steps",
                info.replaying_steps
            );
        }
        self.start_bar();
        Ok(())
    }

    fn observe_evaluation(&mut self, r: &EvaluationReport<'_>) -> Result<(), BoxError> {
        if let Some(ev) = r.evaluation.filter(|e| e.status.is_correct()) {
            if let Some(g) = finite(ev.gflops) {
                if self.best_gflops.is_none_or(|b| g > b) {
                    self.best_gflops = Some(g);
                }
            }
        }
        self.filled = r.metrics.filled;
        self.evaluations = r.evaluations;
        if let Some(ev) = r.evaluation {
            self.device_evaluations += ev.device_evaluations();
        }
        self.trace.push(TracePoint {
            evaluations: r.evaluations,
            best_gflops: self.best_gflops,
            qd_score: r.metrics.qd_score,
            filled: r.metrics.filled,
            elapsed_s: r.elapsed_s,
            device_evaluations: self.device_evaluations,
        });
        if let Some(bar) = &self.bar {
            bar.set_position(r.evaluations);
            bar.set_message(self.message());
        } else if r.evaluations >= self.next_log {
            self.next_log = r.evaluations + self.interval();
            let done = match self.total {
                Some(t) => format!("{}/{t}", r.evaluations),
                None => r.evaluations.to_string(),
            };
            tracing::info!(
                "progress: {done} candidates · {} · {:.0} s · {}",
                self.message(),
                r.elapsed_s,
                format_eta(self.eta())
            );
        }
        Ok(())
    }

    fn observe_end(&mut self, summary: &RunSummary) -> Result<(), BoxError> {
        let drew = self.bar.is_some();
        self.stop_bar(true);
        if !drew {
            tracing::info!(
                "finished: {} evaluations in {:.0} s · {} ({:?})",
                summary.evaluations,
                summary.wall_seconds,
                self.message(),
                summary.stop_reason
            );
        }
        Ok(())
    }
}

impl Drop for ProgressObserver {
    fn drop(&mut self) {
        self.stop_bar(false);
    }
}

/// Logs every evaluation at `debug` level (status, cell, GFLOP/s, what the archive did), each
/// new best at `info`, and evaluations that could not be judged at `warn`.
#[derive(Debug, Clone)]
pub struct LogObserver {
    space: DescriptorSpace,
}

impl LogObserver {
    /// A logger naming the cells of `space` by their level names.
    pub fn new(space: &DescriptorSpace) -> Self {
        LogObserver {
            space: space.clone(),
        }
    }

    fn cell(&self, coords: &[usize]) -> String {
        let names: Vec<String> = coords
            .iter()
            .enumerate()
            .map(|(d, l)| level_name(&self.space, d, *l))
            .collect();
        format!("[{}]", names.join(", "))
    }
}

fn outcome_text(outcome: Option<InsertOutcome>) -> String {
    match outcome {
        None => "not offered".to_owned(),
        Some(InsertOutcome::NewCell) => "new cell".to_owned(),
        Some(InsertOutcome::Improved { gain, .. }) => format!("improved cell (+{gain:.3})"),
        Some(InsertOutcome::NotAdded { .. }) => "not added".to_owned(),
    }
}

impl Observe for LogObserver {
    fn observe_evaluation(&mut self, r: &EvaluationReport<'_>) -> Result<(), BoxError> {
        let c = r.candidate;
        let mut who = format!("{} {}", c.id, c.origin.mutator);
        if !c.origin.note.is_empty() {
            let _ = write!(who, " ({})", c.origin.note);
        }
        if r.replayed {
            who.push_str(" [replayed]");
        }
        let Some(ev) = r.evaluation else {
            tracing::warn!(
                evaluation = r.evaluations,
                "{who}: not judged: {}",
                r.error.unwrap_or("unknown error")
            );
            return Ok(());
        };
        let cell = r
            .descriptor
            .map_or_else(|| "unclassified".to_owned(), |d| self.cell(&d.coords));
        let speed = match finite(ev.gflops) {
            Some(g) => format!("{g:.2} GFLOP/s"),
            None => "-".to_owned(),
        };
        tracing::debug!(
            evaluation = r.evaluations,
            "{who}: {} {cell} {speed} → {}",
            ev.status,
            outcome_text(r.outcome)
        );
        // Only a child the archive took can be the new best (the archive's best changed).
        if r.new_best && r.outcome.is_some_and(|o| o.is_added()) {
            tracing::info!(
                evaluation = r.evaluations,
                "new best: {speed} in {cell} by {who} ({})",
                ev.params
            );
        }
        Ok(())
    }
}

/// Standard error for log lines: while a [`ProgressObserver`] draws its bar, each write hides
/// the bar, writes, and draws it again, so lines do not tear it (without the `progress`
/// feature, plain stderr).
///
/// A program that installs its own `tracing` subscriber gives it this writer:
/// `tracing_subscriber::fmt().with_writer(BarAwareStderr::default)` (what
/// `kf_search::logging::init` does, feature `logging`).
#[derive(Debug, Clone, Copy, Default)]
pub struct BarAwareStderr;

impl Write for BarAwareStderr {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let bar = lock(&ACTIVE_BAR).as_ref().map(|(_, bar)| bar.clone());
        match bar {
            Some(bar) if !bar.is_hidden() => bar.suspend(|| io::stderr().write_all(buf))?,
            _ => io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// The filter for a `-v` count: 0 → `info`, 1 → `debug` (one line per evaluation), 2 or more
/// → `trace`.
pub fn verbosity_filter(verbosity: u8) -> &'static str {
    match verbosity {
        0 => "info",
        1 => "debug",
        _ => "trace",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_takes_the_sooner_limit() {
        let e = |t, d, el, w: Option<u64>| {
            eta(t, d, Duration::from_secs(el), w.map(Duration::from_secs))
        };
        assert_eq!(e(None, 5, 10, None), None);
        assert_eq!(e(Some(100), 0, 10, None), None);
        assert_eq!(e(Some(100), 50, 10, None), Some(Duration::from_secs(10)));
        assert_eq!(e(Some(100), 50, 10, Some(15)), Some(Duration::from_secs(5)));
        assert_eq!(e(None, 50, 10, Some(15)), Some(Duration::from_secs(5)));
        assert_eq!(format_eta(Some(Duration::from_secs(125))), "ETA 2m05s");
        assert_eq!(format_eta(Some(Duration::from_secs(3725))), "ETA 1h02m");
        assert_eq!(format_eta(None), "ETA -");
    }

    #[test]
    fn verbosity_maps_to_levels() {
        assert_eq!(verbosity_filter(0), "info");
        assert_eq!(verbosity_filter(1), "debug");
        assert_eq!(verbosity_filter(7), "trace");
    }
}
