//! Evaluations: the result ladder, timing statistics, compiler facts and diagnostics.

use std::fmt;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::kernel::ParamValues;

/// The result ladder. Broken kernels still rank, so a kernel that compiles but computes the
/// wrong values is better material for repair than one that does not compile:
/// `extraction_error < compile_error < runtime_error = timeout < wrong_shape < wrong_values <
/// correct`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// No usable kernel could be extracted from the mutator's output.
    ExtractionError,
    /// The kernel did not compile (or its manifest was invalid).
    CompileError,
    /// The kernel crashed, failed to launch, or broke the evaluator's guards.
    RuntimeError,
    /// The kernel did not finish within its time limit.
    Timeout,
    /// The kernel produced output of the wrong extent (wrote too little or too much).
    WrongShape,
    /// The kernel ran but its values are wrong.
    WrongValues,
    /// The kernel's output matched the reference on every input set.
    Correct,
}

impl Status {
    /// Every status, lowest rung first.
    pub const ALL: [Status; 7] = [
        Status::ExtractionError,
        Status::CompileError,
        Status::RuntimeError,
        Status::Timeout,
        Status::WrongShape,
        Status::WrongValues,
        Status::Correct,
    ];

    /// The rung on the ladder, 0 (extraction error) to 5 (correct); runtime errors and timeouts
    /// share rung 2.
    pub fn rank(self) -> u8 {
        match self {
            Status::ExtractionError => 0,
            Status::CompileError => 1,
            Status::RuntimeError | Status::Timeout => 2,
            Status::WrongShape => 3,
            Status::WrongValues => 4,
            Status::Correct => 5,
        }
    }

    /// The snake_case name used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::ExtractionError => "extraction_error",
            Status::CompileError => "compile_error",
            Status::RuntimeError => "runtime_error",
            Status::Timeout => "timeout",
            Status::WrongShape => "wrong_shape",
            Status::WrongValues => "wrong_values",
            Status::Correct => "correct",
        }
    }

    /// True only for [`Status::Correct`].
    pub fn is_correct(self) -> bool {
        self == Status::Correct
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Timing statistics over the measured trials, in seconds (from device profiling events).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimingStats {
    /// Median trial time.
    pub median_s: f64,
    /// Fastest trial.
    pub min_s: f64,
    /// Slowest trial.
    pub max_s: f64,
    /// Mean trial time.
    pub mean_s: f64,
    /// Standard deviation of trial times.
    pub stddev_s: f64,
    /// Number of timed trials (after warm-up).
    pub trials: u32,
}

/// The median of non-empty `sorted` values (the mean of the middle two for an even count).
pub(crate) fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
    }
}

impl TimingStats {
    /// Statistics of a non-empty set of trial times; `None` when `samples` is empty or holds a
    /// non-finite or negative value.
    pub fn from_samples(samples: &[f64]) -> Option<Self> {
        if samples.is_empty() || samples.iter().any(|s| !s.is_finite() || *s < 0.0) {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = median_of_sorted(&sorted);
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let var = sorted.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / n as f64;
        Some(TimingStats {
            median_s: median,
            min_s: sorted[0],
            max_s: sorted[n - 1],
            mean_s: mean,
            stddev_s: var.sqrt(),
            trials: u32::try_from(n).unwrap_or(u32::MAX),
        })
    }

    /// Relative spread, `stddev / median` (0 when the median is 0).
    pub fn relative_spread(&self) -> f64 {
        if self.median_s > 0.0 {
            self.stddev_s / self.median_s
        } else {
            0.0
        }
    }
}

/// Facts the compiler reported about a built kernel. Any may be unknown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompilerFacts {
    /// Registers per work-item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<u32>,
    /// Statically allocated local (shared) memory, bytes per work-group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_mem_bytes: Option<u64>,
    /// Private (stack) memory, bytes per work-item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_mem_bytes: Option<u64>,
    /// Bytes spilled from registers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_bytes: Option<u64>,
    /// Largest work-group the compiled kernel can be launched with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_work_group_size: Option<u64>,
    /// Compile time in seconds (0 for a cache hit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_seconds: Option<f64>,
    /// Whether the binary came from a compile cache.
    #[serde(default)]
    pub cache_hit: bool,
    /// Anything else a backend reports, by name.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub extra: IndexMap<String, String>,
}

/// How close the output came to the reference, on the worst input set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CorrectnessReport {
    /// Fraction of elements within the relative threshold of the tolerance.
    pub fraction_within: f64,
    /// Largest absolute error.
    pub max_abs_error: f64,
    /// Largest relative error.
    pub max_rel_error: f64,
    /// Cosine similarity between output and reference.
    pub cosine: f64,
    /// First element that broke the per-element rule, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_mismatch: Option<u64>,
    /// Number of input sets checked.
    pub input_sets: u32,
}

/// The result of evaluating one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Where the candidate landed on the ladder.
    pub status: Status,
    /// The parameter values the figures below were measured with (a tuner may have changed
    /// them from the candidate's).
    #[serde(default)]
    pub params: ParamValues,
    /// Candidate timing, when it was timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<TimingStats>,
    /// The candidate's trial times in seconds, ascending, at most
    /// [`crate::noise::MAX_KEPT_SAMPLES`] of them (see [`crate::noise::keep_samples`]); empty
    /// when it was not timed or was recorded before samples were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<f64>,
    /// The task baseline's timing in the same process, interleaved with the candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<TimingStats>,
    /// Baseline median time over candidate median time: over
    /// [`Evaluation::reference_baseline_s`] where it is set (in a search, the run's one
    /// reference, so that every candidate of the run is scored against the same figure),
    /// else over [`Evaluation::baseline`]'s median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// The baseline median time, seconds, that [`Evaluation::speedup`] (and so the fitness)
    /// was computed against when that is not this evaluation's own [`Evaluation::baseline`]:
    /// in a search, the run's reference ([`crate::RunBaseline`]), fixed at the first baseline
    /// the run measured. `None` where the speedup is over the baseline timed beside the
    /// candidate (`kf eval`, tuning on its own, run directories written before the reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_baseline_s: Option<f64>,
    /// Throughput of the candidate, GFLOP/s, when the task declares its work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    /// Achieved bandwidth of the candidate, GB/s (the task's minimum bytes over its median
    /// time), when the task declares its work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbs: Option<f64>,
    /// Fraction of the roofline reached: the achieved rate over `min(peak, intensity ×
    /// bandwidth)` of the device (measured peaks where the device was characterised, else the
    /// backend's estimates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline_fraction: Option<f64>,
    /// Whether the task is memory-bound on this device (its intensity is under the ridge
    /// point): its rate is then [`Evaluation::gbs`], else [`Evaluation::gflops`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bound: Option<bool>,
    /// The worker that evaluated it, in distributed runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// How close the output was, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correctness: Option<CorrectnessReport>,
    /// What the compiler reported.
    #[serde(default)]
    pub compiler: CompilerFacts,
    /// Text for a mutator to learn from: what failed and where (build log excerpt, first
    /// mismatching index, guard violation, …). Bounded by the evaluator.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diagnostics: String,
    /// Device evaluations of the candidate's kernel beyond its first one that a tuner spent
    /// before this evaluation was chosen (other configurations, and re-measurements of close
    /// calls, its own configuration's included; 0 when it was not tuned): the candidate cost
    /// `1 + tuning_evaluations` device evaluations.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tuning_evaluations: u32,
    /// How completely the process that built and ran the kernel was confined (set by the
    /// evaluator that started it; kf-eval's `confine`). Recorded with the evaluation in the
    /// run directory and the cluster's result rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<ConfinementLevel>,
}

/// How complete an untrusted process's confinement was: file rules, the network and UNIX
/// sockets closed, signals scoped, process and file limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ConfinementLevel {
    /// Every layer in place.
    Complete,
    /// File rules in place, another layer missing.
    Partial,
    /// No file rules: the process could open whatever its user can.
    Unconfined,
    /// Confinement turned off.
    #[default]
    Off,
}

impl std::fmt::Display for ConfinementLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConfinementLevel::Complete => "complete",
            ConfinementLevel::Partial => "partial",
            ConfinementLevel::Unconfined => "unconfined",
            ConfinementLevel::Off => "off",
        })
    }
}

impl Evaluation {
    /// Replaces every secret this process knows ([`crate::redact`]) in the evaluation's text
    /// (diagnostics, compiler facts, worker name): evaluators call it before an evaluation
    /// leaves them.
    pub fn redact_secrets(&mut self) {
        let clean = |s: &mut String| {
            if let std::borrow::Cow::Owned(r) = crate::redact::redact(s) {
                *s = r;
            }
        };
        clean(&mut self.diagnostics);
        for value in self.compiler.extra.values_mut() {
            clean(value);
        }
        if let Some(w) = self.worker.as_mut() {
            clean(w);
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Evaluation {
    /// Device evaluations this candidate cost: its own and every configuration tuned for it.
    pub fn device_evaluations(&self) -> u64 {
        1 + u64::from(self.tuning_evaluations)
    }

    /// An evaluation with the given status and diagnostics and nothing measured.
    pub fn failed(status: Status, diagnostics: impl Into<String>) -> Self {
        Evaluation {
            status,
            params: ParamValues::new(),
            timing: None,
            samples: Vec::new(),
            baseline: None,
            speedup: None,
            reference_baseline_s: None,
            gflops: None,
            gbs: None,
            roofline_fraction: None,
            memory_bound: None,
            worker: None,
            correctness: None,
            compiler: CompilerFacts::default(),
            diagnostics: diagnostics.into(),
            tuning_evaluations: 0,
            confinement: None,
        }
    }

    /// A correct evaluation with a timing and, when the baseline is known, a speedup.
    pub fn correct(timing: TimingStats, baseline: Option<TimingStats>) -> Self {
        let speedup = baseline
            .filter(|b| timing.median_s > 0.0 && b.median_s > 0.0)
            .map(|b| b.median_s / timing.median_s);
        Evaluation {
            status: Status::Correct,
            timing: Some(timing),
            baseline,
            speedup,
            ..Evaluation::failed(Status::Correct, "")
        }
    }

    /// The parameter values `candidate` was measured with: the candidate's own, overridden by
    /// those this evaluation reports (a tuner may have changed some, and reports the values it
    /// measured with). The one notion of "an elite's parameters" that classifiers, mutators and
    /// reports share.
    ///
    /// ```
    /// use kf_core::prelude::*;
    ///
    /// let source = KernelSource::new(Language::OpenCl, "gemm", "/* … */");
    /// let candidate = Candidate::seed(source, ParamValues::new().with("TS", 16i64).with("WPT", 2i64));
    /// let mut evaluation = Evaluation::failed(Status::WrongValues, "");
    /// evaluation.params = ParamValues::new().with("TS", 32i64);
    /// let params = evaluation.effective_params(&candidate);
    /// assert_eq!(params.get("TS").and_then(ParamValue::as_i64), Some(32));
    /// assert_eq!(params.get("WPT").and_then(ParamValue::as_i64), Some(2));
    /// ```
    pub fn effective_params(&self, candidate: &crate::Candidate) -> ParamValues {
        let mut params = candidate.params.clone();
        for (k, v) in self.params.iter() {
            params.set(k, v.clone());
        }
        params
    }

    /// The scalar fitness of this evaluation.
    pub fn fitness(&self) -> crate::Fitness {
        crate::Fitness::of(self)
    }

    /// The baseline median, seconds, this evaluation's speedup is over: its
    /// [`Evaluation::reference_baseline_s`] when set, else the median of the baseline timed
    /// beside it; `None` when it has neither (or neither is a positive finite time).
    pub fn speedup_reference_s(&self) -> Option<f64> {
        self.reference_baseline_s
            .or(self.baseline.map(|b| b.median_s))
            .filter(|s| s.is_finite() && *s > 0.0)
    }

    /// Scores this evaluation against the baseline median `reference_s` (seconds) instead of
    /// the baseline timed beside it: a correct, timed evaluation's speedup becomes
    /// `reference_s` over its median time and [`Evaluation::reference_baseline_s`] records
    /// the reference. An evaluation that is not correct, has no positive timing, or a
    /// `reference_s` that is not a positive finite time is left as it is. The measured
    /// [`Evaluation::baseline`] is kept.
    ///
    /// ```
    /// use kf_core::{Evaluation, TimingStats};
    ///
    /// let timed = |s: f64| TimingStats::from_samples(&[s]).unwrap();
    /// // The baseline happened to run fast beside this candidate (2 ms instead of 4 ms).
    /// let mut e = Evaluation::correct(timed(1e-3), Some(timed(2e-3)));
    /// assert_eq!(e.speedup, Some(2.0));
    /// e.score_against(4e-3);
    /// assert_eq!(e.speedup, Some(4.0));
    /// assert_eq!(e.reference_baseline_s, Some(4e-3));
    /// assert_eq!(e.baseline.map(|b| b.median_s), Some(2e-3));
    /// ```
    pub fn score_against(&mut self, reference_s: f64) {
        if self.status != Status::Correct || !(reference_s.is_finite() && reference_s > 0.0) {
            return;
        }
        let Some(median_s) = self
            .timing
            .map(|t| t.median_s)
            .filter(|s| s.is_finite() && *s > 0.0)
        else {
            return;
        };
        self.speedup = Some(reference_s / median_s);
        self.reference_baseline_s = Some(reference_s);
    }
}
