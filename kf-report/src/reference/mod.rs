//! The reference library measured in the same run: what a user would call instead of a
//! searched kernel (NumPy's OpenBLAS for gemm, NumPy's row softmax for softmax), timed at the
//! task's size in a child Python process after the search, so that the report can say how close
//! the best kernel came.
//!
//! OpenBLAS is measured as a user would get it: `OPENBLAS_CORETYPE` and `OPENBLAS_L2_SIZE` are
//! removed from the child's environment only (the runtimes' setup pins them for other tools),
//! and the core kernel OpenBLAS picked is recorded.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kf_core::Work;
use kf_eval::task::Sizes;
use serde::{Deserialize, Serialize};

/// The measuring script (run with `python -c`).
const SCRIPT: &str = include_str!("measure.py");

/// Environment variables that pin OpenBLAS's kernel choice; removed for the reference only.
pub const OPENBLAS_PINS: [&str; 2] = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"];

/// Seconds of timing the reference gets (at least 5 calls).
const MIN_SECONDS: f64 = 1.0;

/// The longest a reference measurement may take, start-up and input generation included.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Why no reference was measured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReferenceError {
    /// No reference library is known for the task.
    #[error("no reference library for the {0} task")]
    NoReference(String),
    /// The Python interpreter could not be started, or it has no NumPy.
    #[error(
        "no Python with NumPy at {interpreter} (run scripts/setup.sh, or set KF_PYTHON): {reason}"
    )]
    NoNumpy {
        /// The interpreter tried.
        interpreter: String,
        /// What happened.
        reason: String,
    },
    /// The measurement failed or did not finish in time.
    #[error("measuring the reference failed: {0}")]
    Failed(String),
    /// The kernels ran on distributed workers: the library cannot run beside them here.
    #[error("the kernels ran on distributed workers, not on this machine")]
    Distributed,
    /// A task file's operation has no known reference library.
    #[error("no reference library is known for task files")]
    TaskFile,
}

/// One reference measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceMeasurement {
    /// The library, as NumPy names it (`scipy-openblas 0.3.31.188.0`).
    pub library: String,
    /// NumPy's version.
    pub numpy: String,
    /// The core kernel OpenBLAS chose (`SkylakeX`, `Haswell`), when the library is OpenBLAS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// OpenBLAS's build configuration line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// Threads OpenBLAS ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Median time of one call, seconds.
    pub median_s: f64,
    /// Calls timed.
    pub trials: u64,
    /// Throughput for the task's work, GFLOP/s.
    pub gflops: Option<f64>,
    /// Bandwidth for the task's minimum traffic, GB/s.
    pub gbs: Option<f64>,
    /// The search's best kernel re-timed beside the reference, alternating with it
    /// ([`measure_side_by_side`]); `reference_ratio` is taken from these two only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_retimed: Option<Retimed>,
}

/// The best kernel re-timed beside the reference by the run's own evaluator (the full protocol:
/// fresh inputs verified, then timed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retimed {
    /// The fastest of the rounds' median times, seconds.
    pub median_s: f64,
    /// Throughput for the task's work at that time, GFLOP/s.
    pub gflops: Option<f64>,
    /// Bandwidth for the task's minimum traffic at that time, GB/s.
    pub gbs: Option<f64>,
    /// Rounds in which the kernel was re-timed (correct and timed).
    pub rounds: u32,
}

/// Rounds of [`measure_side_by_side`]: kernel, reference, kernel, reference.
pub const SIDE_BY_SIDE_ROUNDS: u32 = 2;

/// Throughput and bandwidth of `work` done in `seconds`.
pub(crate) fn rates(work: &Work, seconds: f64) -> (Option<f64>, Option<f64>) {
    let rate = |amount: f64| (amount > 0.0 && seconds > 0.0).then(|| amount / seconds / 1e9);
    (rate(work.flops), rate(work.bytes))
}

/// Measures the reference and re-times the search's best kernel side by side: `rounds` times
/// (at least once) `retime` (the kernel's median seconds, `None` when it could not be timed or
/// was not correct) and then [`measure`]. Each side keeps the fastest of its rounds' medians, so
/// a burst of load on a shared machine during one round penalises neither side; the ratio of
/// the two is the report's `reference_ratio`. Without a re-timed kernel the measurement has no
/// [`ReferenceMeasurement::best_retimed`] and the report gives no ratio.
///
/// # Errors
/// As [`measure`].
pub fn measure_side_by_side(
    task: &str,
    sizes: &Sizes,
    work: &Work,
    rounds: u32,
    mut retime: impl FnMut() -> Option<f64>,
) -> Result<ReferenceMeasurement, ReferenceError> {
    let mut kernel_s: Vec<f64> = Vec::new();
    let mut fastest: Option<ReferenceMeasurement> = None;
    for _ in 0..rounds.max(1) {
        if let Some(s) = retime().filter(|s| s.is_finite() && *s > 0.0) {
            kernel_s.push(s);
        }
        let r = measure(task, sizes, work)?;
        if fastest.as_ref().is_none_or(|f| r.median_s < f.median_s) {
            fastest = Some(r);
        }
    }
    let mut reference =
        fastest.ok_or_else(|| ReferenceError::Failed("no round was measured".into()))?;
    reference.best_retimed = kernel_s.iter().copied().reduce(f64::min).map(|median_s| {
        let (gflops, gbs) = rates(work, median_s);
        Retimed {
            median_s,
            gflops,
            gbs,
            rounds: kernel_s.len() as u32,
        }
    });
    Ok(reference)
}

impl ReferenceMeasurement {
    /// `library (kernel kernel, n threads) via NumPy v`.
    pub fn describe(&self) -> String {
        let mut s = self.library.clone();
        let mut how = Vec::new();
        if let Some(k) = &self.kernel {
            how.push(format!("{k} kernel"));
        }
        if let Some(t) = self.threads {
            how.push(format!("{t} threads"));
        }
        if !how.is_empty() {
            s.push_str(&format!(" ({})", how.join(", ")));
        }
        s.push_str(&format!(" via NumPy {}", self.numpy));
        s
    }
}

/// What the script prints.
#[derive(Deserialize)]
struct ScriptOutput {
    library: String,
    numpy: String,
    median_s: f64,
    trials: u64,
    kernel: Option<String>,
    config: Option<String>,
    threads: Option<u32>,
    pins_seen: Vec<String>,
}

/// Whether a reference library is known for `task` (a built-in task name).
pub fn has_reference(task: &str) -> bool {
    matches!(task, "gemm" | "softmax")
}

/// Measures the reference library for `task` at `sizes` with the Python of
/// [`kf_eval::task::file::python::python_interpreter`]; `work` turns its time into GFLOP/s and
/// GB/s the same way the evaluator does for kernels.
///
/// # Errors
/// [`ReferenceError::NoReference`] for a task without one, [`ReferenceError::NoNumpy`] when
/// the interpreter or NumPy is missing, [`ReferenceError::Failed`] when the script fails, prints
/// something else, or runs past two minutes.
pub fn measure(
    task: &str,
    sizes: &Sizes,
    work: &Work,
) -> Result<ReferenceMeasurement, ReferenceError> {
    if !has_reference(task) {
        return Err(ReferenceError::NoReference(task.to_owned()));
    }
    let interpreter = kf_eval::task::file::python::python_interpreter();
    let sizes_json =
        serde_json::to_string(sizes).map_err(|e| ReferenceError::Failed(e.to_string()))?;
    let mut command = Command::new(&interpreter);
    command
        .arg("-c")
        .arg(SCRIPT)
        .arg(task)
        .arg(sizes_json)
        .arg(MIN_SECONDS.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The child gets this process's environment without its secrets (an LLM key, database
    // credentials: the rule the evaluation workers follow) and without the OpenBLAS pins.
    command
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| {
            let k = k.to_string_lossy();
            !kf_eval::is_secret(&k) && !OPENBLAS_PINS.contains(&k.as_ref())
        }));
    let no_numpy = |reason: String| ReferenceError::NoNumpy {
        interpreter: interpreter.display().to_string(),
        reason,
    };
    let mut child = command.spawn().map_err(|e| no_numpy(e.to_string()))?;
    // The pipes are read on threads so that a chatty child cannot block on a full pipe.
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || read_all(stdout.as_mut()));
    let err_reader = std::thread::spawn(move || read_all(stderr.as_mut()));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ReferenceError::Failed(format!(
                    "did not finish within {} s",
                    TIMEOUT.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(ReferenceError::Failed(format!("waiting for python: {e}"))),
        }
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    match status.code() {
        Some(0) => {}
        Some(4) => return Err(no_numpy("numpy cannot be imported".into())),
        Some(3) => return Err(ReferenceError::NoReference(task.to_owned())),
        _ => {
            return Err(ReferenceError::Failed(format!(
                "python exited with {status}: {}",
                kf_eval::bounded(stderr.trim(), 2000)
            )))
        }
    }
    let out: ScriptOutput = serde_json::from_str(stdout.trim()).map_err(|e| {
        ReferenceError::Failed(format!(
            "unexpected output ({e}): {}",
            kf_eval::bounded(stdout.trim(), 500)
        ))
    })?;
    if !out.pins_seen.is_empty() {
        return Err(ReferenceError::Failed(format!(
            "the measurement saw {} set",
            out.pins_seen.join(", ")
        )));
    }
    if !(out.median_s.is_finite() && out.median_s > 0.0) {
        return Err(ReferenceError::Failed(format!(
            "a median time of {} s",
            out.median_s
        )));
    }
    let (gflops, gbs) = rates(work, out.median_s);
    Ok(ReferenceMeasurement {
        library: out.library,
        numpy: out.numpy,
        kernel: out.kernel,
        config: out.config,
        threads: out.threads,
        median_s: out.median_s,
        trials: out.trials,
        gflops,
        gbs,
        best_retimed: None,
    })
}

fn read_all(pipe: Option<&mut impl Read>) -> String {
    let mut text = String::new();
    if let Some(p) = pipe {
        let _ = p.read_to_string(&mut text);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm_work(n: f64) -> Work {
        Work {
            flops: 2.0 * n * n * n,
            bytes: 3.0 * n * n * 4.0,
        }
    }

    #[test]
    fn a_task_without_a_reference_is_a_typed_error() {
        let err = measure("nosuchtask", &Sizes::new(), &gemm_work(8.0)).unwrap_err();
        assert!(matches!(err, ReferenceError::NoReference(t) if t == "nosuchtask"));
    }

    #[test]
    fn gemm_reference_is_measured_with_openblas_unpinned() {
        if !kf_eval::task::file::python::numpy_or_skip() {
            return;
        }
        let sizes = kf_eval::task::parse_sizes("M=128,N=96,K=64").unwrap();
        let work = Work {
            flops: 2.0 * 128.0 * 96.0 * 64.0,
            bytes: 4.0 * (128.0 * 64.0 + 64.0 * 96.0 + 128.0 * 96.0),
        };
        let r = measure("gemm", &sizes, &work).unwrap();
        assert!(r.trials >= 5, "{r:?}");
        assert!(r.median_s > 0.0 && r.median_s < 1.0, "{r:?}");
        let gflops = r.gflops.unwrap();
        assert!((gflops - work.flops / r.median_s / 1e9).abs() < 1e-9 * gflops);
        assert!(!r.library.is_empty() && !r.numpy.is_empty());
        // The venv's NumPy ships OpenBLAS: its core kernel is recorded (the measurement
        // itself refuses to report when it saw an OpenBLAS pin in its environment).
        if r.library.contains("openblas") {
            assert!(!r.kernel.as_deref().unwrap_or_default().is_empty(), "{r:?}");
            assert!(r.config.as_deref().unwrap_or_default().contains("OpenBLAS"));
            assert!(r.threads.unwrap_or(0) >= 1);
        }
    }

    #[test]
    fn softmax_reference_reports_bandwidth() {
        if !kf_eval::task::file::python::numpy_or_skip() {
            return;
        }
        let sizes = kf_eval::task::parse_sizes("ROWS=64,COLS=256").unwrap();
        let work = Work {
            flops: 5.0 * 64.0 * 256.0,
            bytes: 2.0 * 4.0 * 64.0 * 256.0,
        };
        let r = measure("softmax", &sizes, &work).unwrap();
        assert!(r.gbs.unwrap() > 0.0);
        assert!(r.kernel.is_none());
    }
}
