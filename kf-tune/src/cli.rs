//! The library side of `kf tune replay`: its options as a plain struct and the replay that
//! returns a JSON summary, so that any binary can mount them with its own argument parser
//! (the `kf` binary's clap parser is in `src/bin/kf/tune_cmd.rs`; kf-tune does not depend on
//! clap).

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::error::{Result, TuneError};
use crate::replay::Replay;
use crate::strategy;
use crate::t4;

/// Options of `kf tune replay`: replay a Kernel Tuner cache with a strategy.
#[derive(Debug, Clone)]
pub struct ReplayArgs {
    /// Kernel Tuner cache file (JSON, plain or gzip-compressed).
    pub cache: PathBuf,
    /// Strategy name (default, exhaustive, random, simulated_annealing, genetic_algorithm,
    /// greedy_ils, bayes_opt, forest, bandit).
    pub strategy: String,
    /// Budget: distinct configurations evaluated (default: 2% of the valid configurations).
    pub budget: Option<usize>,
    /// Random seed.
    pub seed: u64,
    /// Print one JSON object (otherwise a short text summary).
    pub json: bool,
    /// Also write every configuration of the run to this file in the FAIR T4 results format.
    pub t4: Option<PathBuf>,
}

impl ReplayArgs {
    /// Replay `cache` with the default strategy, budget and seed, printing text.
    pub fn new(cache: impl Into<PathBuf>) -> Self {
        ReplayArgs {
            cache: cache.into(),
            strategy: "default".into(),
            budget: None,
            seed: 0,
            json: false,
            t4: None,
        }
    }
}

/// Runs a replay and returns its summary: `best_time`, `best_config`, `evaluations` (never
/// more than the budget), `budget`, `strategy`, `seed`, `optimum_time`, `score`
/// (optimum / best), `failures`, `valid_configurations`, `configurations`, `cache`. With
/// `--t4 PATH`, the run is also written to `PATH` in the FAIR T4 results format.
pub fn replay_main(args: &ReplayArgs) -> Result<Value> {
    let replay = Replay::load(&args.cache)?;
    let budget = args
        .budget
        .unwrap_or_else(|| ((replay.valid() as f64) * 0.02).round().max(1.0) as usize);
    let mut s = strategy::by_name(&args.strategy)?;
    let result = replay.run(s.as_mut(), budget, args.seed)?;
    if let Some(path) = &args.t4 {
        t4::write(&result, path)?;
    }
    let best_config = match &result.best_config {
        Some(c) => serde_json::to_value(c).map_err(|e| TuneError::Objective(e.to_string()))?,
        None => Value::Null,
    };
    Ok(json!({
        "cache": args.cache.display().to_string(),
        "device_name": replay.cache().device_name,
        "kernel_name": replay.cache().kernel_name,
        "strategy": result.strategy,
        "seed": args.seed,
        "budget": budget,
        "evaluations": result.evaluations,
        "failures": result.failures,
        "best_time": result.best_time,
        "best_config": best_config,
        "optimum_time": replay.optimum().map(|(_, t)| t),
        "score": replay.score(&result),
        "valid_configurations": replay.valid(),
        "configurations": replay.total(),
    }))
}

/// A few human-readable lines for a [`replay_main`] summary.
pub fn render_text(summary: &Value) -> String {
    let get = |k: &str| summary.get(k).cloned().unwrap_or(Value::Null);
    format!(
        "{} on {} ({}): strategy {} seed {}\n{} of {} evaluations, best time {} (optimum {}), score {:.4}\nbest config {}",
        get("kernel_name"),
        get("device_name"),
        get("cache"),
        get("strategy"),
        get("seed"),
        get("evaluations"),
        get("budget"),
        get("best_time"),
        get("optimum_time"),
        get("score").as_f64().unwrap_or(0.0),
        get("best_config"),
    )
}
