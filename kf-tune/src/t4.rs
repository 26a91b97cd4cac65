//! Export of a tuning run in the FAIR "T4" results format (schema 1.0.0, shared by Kernel Tuner,
//! KTT and the autotuning-methodology tools): one object per configuration seen, with its
//! parameter values, the time as a measurement and the objective, and why it was invalid when it
//! failed.
//!
//! Times are written in milliseconds, the unit [`Outcome::Time`] uses by convention. A run records
//! no per-configuration timestamps or compile times, so `timestamp` is left out and `times` holds
//! only the measured runtime (both are optional in the schema).

use std::path::Path;

use serde_json::{json, Value};

use crate::error::{Result, TuneError};
use crate::objective::{Failure, Outcome};
use crate::tuner::TuneResult;

/// The version of the T4 results schema written.
pub const SCHEMA_VERSION: &str = "1.0.0";

/// The T4 `invalidity` of an outcome: `correct` for a time, otherwise the kind of failure
/// (`compile`, `runtime`, `constraints`, `correctness`, or `timeout` for a failure whose name
/// says so).
pub fn invalidity(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Time(t) if t.is_finite() => "correct",
        // A non-finite time is no measurement: the run did not complete normally.
        Outcome::Time(_) => "runtime",
        Outcome::Failed(f) => match f {
            Failure::Compilation => "compile",
            Failure::Runtime => "runtime",
            Failure::Invalid => "constraints",
            Failure::Incorrect => "correctness",
            Failure::Other(name) if name.to_ascii_lowercase().contains("timeout") => "timeout",
            Failure::Other(_) => "runtime",
        },
    }
}

/// The T4 document of a run: `{"schema_version": "1.0.0", "results": [...]}`, one result per
/// configuration seen, in the order seen.
///
/// ```
/// use kf_tune::{strategy, t4, Outcome, Param, Space, Tuner};
/// use kf_core::ParamValues;
///
/// let space = Space::builder().param(Param::range("U", 1, 4, 1).unwrap()).build().unwrap();
/// let mut objective = |_: &ParamValues| Ok(Outcome::Time(1.5));
/// let mut s = strategy::by_name("random").unwrap();
/// let result = Tuner::new(&space, 2).seed(1).run(s.as_mut(), &mut objective).unwrap();
/// let doc = t4::results(&result).unwrap();
/// assert_eq!(doc["schema_version"], "1.0.0");
/// assert_eq!(doc["results"][0]["invalidity"], "correct");
/// assert_eq!(doc["results"][0]["measurements"][0]["value"], 1.5);
/// ```
pub fn results(result: &TuneResult) -> Result<Value> {
    let mut out = Vec::with_capacity(result.trials.len());
    for trial in &result.trials {
        // Parameter values always serialise; the error is passed on rather than assumed away.
        let configuration = serde_json::to_value(&trial.config).map_err(|e| TuneError::Format {
            path: "T4 results".into(),
            message: e.to_string(),
        })?;
        let time = trial.outcome.time();
        let (times, measurements) = match time {
            Some(t) => (
                json!({ "runtimes": [t] }),
                json!([{ "name": "time", "value": t, "unit": "ms" }]),
            ),
            None => (json!({}), json!([])),
        };
        out.push(json!({
            "configuration": configuration,
            "objectives": ["time"],
            "times": times,
            "invalidity": invalidity(&trial.outcome),
            "correctness": if time.is_some() { 1 } else { 0 },
            "measurements": measurements,
        }));
    }
    Ok(json!({ "schema_version": SCHEMA_VERSION, "results": out }))
}

/// Writes the T4 document of a run (see [`results`]) to `path` as pretty-printed JSON.
pub fn write(result: &TuneResult, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let text = serde_json::to_string_pretty(&results(result)?).map_err(|e| TuneError::Format {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    std::fs::write(path, text + "\n").map_err(|source| TuneError::Io {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_map_to_t4_invalidity() {
        assert_eq!(invalidity(&Outcome::Time(1.0)), "correct");
        assert_eq!(invalidity(&Outcome::Time(f64::NAN)), "runtime");
        assert_eq!(
            invalidity(&Outcome::Failed(Failure::Compilation)),
            "compile"
        );
        assert_eq!(invalidity(&Outcome::Failed(Failure::Runtime)), "runtime");
        assert_eq!(
            invalidity(&Outcome::Failed(Failure::Invalid)),
            "constraints"
        );
        assert_eq!(
            invalidity(&Outcome::Failed(Failure::Incorrect)),
            "correctness"
        );
        assert_eq!(
            invalidity(&Outcome::Failed(Failure::Other("TimeoutConfig".into()))),
            "timeout"
        );
    }
}
