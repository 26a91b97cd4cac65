//! `kf tune --profile-time`: where the time of a live tuning run went, per phase of one
//! configuration's evaluation and for the run around them.

use std::fmt::Write as _;

use kf_eval::EvalProfile;

use super::objective::CompileAhead;
use serde_json::{json, Value};

/// The time of one `kf tune` run.
#[derive(Debug, Default, Clone)]
pub struct RunProfile {
    /// Sum over the evaluated configurations.
    pub evaluations: EvalProfile,
    /// Configurations evaluated.
    pub configurations: usize,
    /// From the start of `kf tune` until the worker's backend was open.
    pub startup_s: f64,
    /// The tuning loop: strategy, evaluations, cache file.
    pub tuning_s: f64,
    /// The confirmation of the best configuration after the loop (zero when it was measured
    /// in this run).
    pub confirm_s: f64,
    /// Batches compiled at once before they were timed (`--compile-ahead`).
    pub compile_ahead: CompileAhead,
}

/// Rows of the table: label, seconds, and what it covers.
fn rows(p: &EvalProfile) -> [(&'static str, f64); 8] {
    [
        (
            "compile (after compile-ahead: loading the binary)",
            p.compile_s,
        ),
        ("input sets and references", p.inputs_s),
        ("verification launches and checks", p.verify_s),
        (
            "baseline (compile once, interleaved launches)",
            p.baseline_s,
        ),
        ("timing: warm-up, trials, timed-output checks", p.timing_s),
        ("  of which device kernel time", p.kernel_s),
        ("  data transfer (within the phases above)", p.transfer_s),
        ("process hop (job, reply, task rebuild)", p.hop_s),
    ]
}

impl RunProfile {
    /// Seconds of the loop not spent in evaluations or compiling ahead: the strategy, the
    /// cache file, the progress bar.
    pub fn tuner_s(&self) -> f64 {
        (self.tuning_s
            - self.evaluations.total_s
            - self.evaluations.hop_s
            - self.compile_ahead.wall_s)
            .max(0.0)
    }

    /// Configurations per minute of the tuning loop.
    pub fn per_minute(&self) -> Option<f64> {
        (self.tuning_s > 0.0).then(|| 60.0 * self.configurations as f64 / self.tuning_s)
    }

    /// The profile as JSON (for `kf tune --json`).
    pub fn to_json(&self) -> Value {
        let p = &self.evaluations;
        json!({
            "configurations": self.configurations,
            "startup_s": self.startup_s,
            "tuning_s": self.tuning_s,
            "confirm_s": self.confirm_s,
            "tuner_s": self.tuner_s(),
            "configurations_per_minute": self.per_minute(),
            "evaluations": p,
            "compile_ahead": {
                "width": self.compile_ahead.width,
                "batches": self.compile_ahead.batches,
                "configurations": self.compile_ahead.configurations,
                "wall_s": self.compile_ahead.wall_s,
            },
        })
    }

    /// The table `--profile-time` prints.
    pub fn render(&self) -> String {
        let p = &self.evaluations;
        let n = self.configurations.max(1) as f64;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "time of {} evaluated configurations (seconds; per configuration = total / {}):",
            self.configurations, self.configurations
        );
        let _ = writeln!(out, "  {:<48} {:>9} {:>9}", "phase", "total", "per conf");
        for (label, s) in rows(p) {
            let _ = writeln!(out, "  {label:<48} {s:>9.3} {:>9.4}", s / n);
        }
        let ahead = &self.compile_ahead;
        if ahead.batches > 0 {
            let _ = writeln!(
                out,
                "  {:<48} {:>9.3} {:>9.4}",
                format!(
                    "compile-ahead, wall ({} batches of up to {})",
                    ahead.batches, ahead.width
                ),
                ahead.wall_s,
                ahead.wall_s / n
            );
        }
        let _ = writeln!(
            out,
            "  {:<48} {:>9.3} {:>9.4}",
            "tuner (strategy, cache file)",
            self.tuner_s(),
            self.tuner_s() / n
        );
        let _ = writeln!(
            out,
            "  {:<48} {:>9.3} {:>9.4}",
            "tuning loop, wall",
            self.tuning_s,
            self.tuning_s / n
        );
        let _ = writeln!(
            out,
            "  trials {} ({:.1} per configuration), baseline launches {}, input sets drawn {} / reused {}",
            p.trials,
            f64::from(p.trials) / n,
            p.baseline_launches,
            p.inputs_generated,
            p.inputs_reused
        );
        let _ = writeln!(
            out,
            "  start-up (process, worker, backend) {:.3} s; confirmation {:.3} s; {:.1} configurations/min in the loop",
            self.startup_s,
            self.confirm_s,
            self.per_minute().unwrap_or(0.0)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_time_not_in_evaluations_is_the_tuners() {
        let profile = RunProfile {
            evaluations: EvalProfile {
                total_s: 8.0,
                compile_s: 3.0,
                hop_s: 0.5,
                trials: 40,
                ..EvalProfile::default()
            },
            configurations: 4,
            startup_s: 1.0,
            tuning_s: 10.0,
            confirm_s: 0.0,
            compile_ahead: CompileAhead::default(),
        };
        assert_eq!(profile.tuner_s(), 1.5);
        assert_eq!(profile.per_minute(), Some(24.0));
        let text = profile.render();
        assert!(text.contains("compile"), "{text}");
        assert!(text.contains("0.7500"), "compile per configuration: {text}");
        assert!(text.contains("10.0 per configuration"), "{text}");
        assert_eq!(profile.to_json()["tuner_s"], 1.5);
    }
}
