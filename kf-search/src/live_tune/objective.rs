//! The objective `kf tune` runs: every configuration through the isolated evaluator, with the
//! run's bookkeeping (the Kernel Tuner cache file, the progress bar, the profile, the incumbent
//! that clearly slower configurations stop early against), and compile-ahead: the
//! configurations of a batch are compiled at once, one worker process each, before the timing
//! worker measures them one after another.
//!
//! Why batches and not a compile thread beside the timing: on the CPU device the host cores
//! are the device, so a compile running while a configuration is timed would slow that
//! configuration's trials. Compiling the batch first keeps every timed trial alone on the
//! machine and still spreads compilation (single-threaded in the OpenCL CPU compiler) over
//! the cores.

use std::collections::BTreeMap;
use std::time::Instant;

use super::progress::TuneProgress;
use kf_core::{Evaluation, KernelSource, ParamValues};
use kf_eval::{CompileCheck, EarlyStop, EvalError, EvalProfile, IsolatedEvaluator};
use kf_tune::{outcome_of, KtWriter, Objective, Outcome, TuneError};

/// What compile-ahead did in a run.
#[derive(Debug, Default, Clone, Copy)]
pub struct CompileAhead {
    /// Configurations compiled together at most (1: compile-ahead off).
    pub width: usize,
    /// Batches compiled ahead.
    pub batches: usize,
    /// Configurations compiled ahead.
    pub configurations: usize,
    /// Wall seconds the batches' compilations took (they run at once).
    pub wall_s: f64,
}

/// Evaluates configurations of one kernel for the tuner; see the module documentation.
pub struct LiveObjective<'a> {
    /// Times (and verifies) every configuration, one at a time.
    evaluator: &'a IsolatedEvaluator,
    /// Compiles a batch's other configurations while the timing worker compiles its first;
    /// `None`: compile-ahead is off.
    compilers: Option<&'a IsolatedEvaluator>,
    source: &'a KernelSource,
    /// Stop timing configurations that are clearly slower than the best so far.
    early_stop: bool,
    writer: KtWriter,
    progress: &'a mut dyn TuneProgress,
    /// Floating-point operations of one launch, for the progress message.
    flops: f64,
    /// Every evaluation of the run, by the configuration's canonical key.
    pub evaluations: BTreeMap<String, Evaluation>,
    /// Where the evaluations' time went, summed.
    pub spent: EvalProfile,
    /// What compile-ahead did.
    pub ahead: CompileAhead,
    best_ms: f64,
    /// The best configuration's trial times, against which the next ones may stop early.
    incumbent: Option<Vec<f64>>,
}

impl<'a> LiveObjective<'a> {
    /// An objective over `evaluator` (one worker: it times) that appends every outcome to
    /// `writer`. `compilers` (a pool of `width - 1` workers on the same backend and binary
    /// cache) turns compile-ahead on for batches of up to `width` configurations.
    pub fn new(
        evaluator: &'a IsolatedEvaluator,
        compilers: Option<(&'a IsolatedEvaluator, usize)>,
        source: &'a KernelSource,
        writer: KtWriter,
        progress: &'a mut dyn TuneProgress,
        flops: f64,
    ) -> Self {
        LiveObjective {
            evaluator,
            compilers: compilers.map(|(pool, _)| pool),
            source,
            early_stop: true,
            writer,
            progress,
            flops,
            evaluations: BTreeMap::new(),
            spent: EvalProfile::default(),
            ahead: CompileAhead {
                width: compilers.map_or(1, |(_, width)| width.max(1)),
                ..CompileAhead::default()
            },
            best_ms: f64::INFINITY,
            incumbent: None,
        }
    }

    /// Times every configuration in full (`kf tune --full-timing`).
    pub fn full_timing(mut self) -> Self {
        self.early_stop = false;
        self
    }

    /// The Kernel Tuner cache file the run appended to.
    pub fn into_writer(self) -> KtWriter {
        self.writer
    }

    /// Keeps an evaluation: the cache file, the incumbent, the progress bar.
    fn record(&mut self, config: &ParamValues, e: Evaluation) -> kf_tune::Result<Outcome> {
        let outcome = outcome_of(&e);
        self.writer.append(config, &outcome)?;
        let mut best = None;
        if let Outcome::Time(ms) = outcome {
            if ms < self.best_ms {
                self.best_ms = ms;
                self.incumbent = Some(e.samples.clone());
                best = Some(format!(
                    "best {:.2} GFLOP/s ({config})",
                    self.flops / (ms * 1e-3) / 1e9
                ));
            }
        }
        self.evaluations.insert(config.canonical_key(), e);
        self.progress.evaluated(best.as_deref());
        Ok(outcome)
    }

    /// Compiles `configs` at once: the first in the timing worker, the others in the pool.
    /// Each answer is what compiling found, or the error of a lost worker.
    fn compile_batch(
        &self,
        pool: &IsolatedEvaluator,
        configs: &[ParamValues],
    ) -> Vec<Result<CompileCheck, EvalError>> {
        let (evaluator, source) = (self.evaluator, self.source);
        std::thread::scope(|scope| {
            let handles: Vec<_> = configs
                .iter()
                .enumerate()
                .map(|(i, config)| {
                    let worker = if i == 0 { evaluator } else { pool };
                    scope.spawn(move || worker.compile_only_blocking(source, config))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(EvalError::Worker("a compile-ahead thread panicked".into()))
                    })
                })
                .collect()
        })
    }
}

impl Objective for LiveObjective<'_> {
    fn evaluate(&mut self, config: &ParamValues) -> kf_tune::Result<Outcome> {
        let mut protocol = self.evaluator.config().clone();
        if self.early_stop {
            protocol.timing.early_stop = self.incumbent.as_deref().map(EarlyStop::against);
        }
        let (e, p) = self
            .evaluator
            .evaluate_blocking_profiled(self.source, config, Some(&protocol))
            .map_err(|e| TuneError::Objective(e.to_string()))?;
        self.spent.add(&p);
        self.record(config, e)
    }

    /// Compiles the batch at once, then evaluates its configurations one after another: each
    /// evaluation finds its binary in the backend's cache. A configuration that cannot run
    /// (a compile error, a launch geometry the compiled kernel refuses) is answered with the
    /// protocol's own verdict from compiling, without a second compile. An error of the
    /// evaluator itself ends the batch there (the tuner stops), with or without a pool.
    fn evaluate_batch(&mut self, configs: &[ParamValues]) -> Vec<kf_tune::Result<Outcome>> {
        // Without a pool (or for a batch of one) each configuration compiles in the timing
        // worker as it is evaluated.
        let checks: Vec<Option<Result<CompileCheck, EvalError>>> = match self.compilers {
            Some(pool) if configs.len() > 1 => {
                let started = Instant::now();
                let checks = self.compile_batch(pool, configs);
                self.ahead.wall_s += started.elapsed().as_secs_f64();
                self.ahead.batches += 1;
                self.ahead.configurations += configs.len();
                checks.into_iter().map(Some).collect()
            }
            _ => configs.iter().map(|_| None).collect(),
        };
        let mut outcomes = Vec::with_capacity(configs.len());
        for (config, check) in configs.iter().zip(checks) {
            let outcome = match check {
                None => self.evaluate(config),
                Some(Ok(CompileCheck::Failed(e))) => self.record(config, *e),
                Some(Ok(CompileCheck::Compiled(facts))) => {
                    if !facts.extra.contains_key("cache_file") {
                        // No binary cache: the evaluation compiles again, so compiling ahead
                        // only costs. Off for the rest of the run.
                        tracing::warn!(
                            "compile-ahead is off: the backend keeps no binary cache ({})",
                            facts
                                .extra
                                .get("cache_error")
                                .map_or("no cache directory", String::as_str)
                        );
                        self.compilers = None;
                        self.ahead.width = 1;
                    }
                    self.evaluate(config)
                }
                // A lost compile worker: the evaluation compiles the configuration itself.
                Some(Err(_)) => self.evaluate(config),
            };
            let failed = outcome.is_err();
            outcomes.push(outcome);
            if failed {
                break;
            }
        }
        outcomes
    }
}
