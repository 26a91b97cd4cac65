//! Re-checking a run (`kf verify RUN_DIR [--all]`): its best kernel (or every elite) from
//! scratch, on fresh inputs drawn from another data seed than the run's, through the same
//! isolated evaluator, each kernel's time next to the recorded one ([`verify_run`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kf_archive::ArchiveError;
use kf_core::noise::median_interval;
use kf_core::{ChildRecord, Elite, Evaluation, InsertOutcome, Status, StepRecord};
use kf_eval::task::{builtin_task, sizes_text, Sizes};
use kf_eval::{
    BackendSpec, EvalConfig, EvalError, IsolatedEvaluator, TimeoutPolicy, WorkerCommand,
};

use crate::task::{ChosenTask, TaskChoiceError};
use crate::BackendError;

/// Mixed into the run's seed for the default data seed, so that the inputs differ from any the
/// run could have drawn from its seed.
const VERIFY_SEED_SALT: u64 = 0x7665_7269_6679_0001;

/// Why a run could not be re-checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// Neither the path nor its `run/` folder holds a `run.json`.
    #[error("{} is not a run directory (no run.json in it or in its run/ folder)", .0.display())]
    NotARun(PathBuf),
    /// The run directory could not be read.
    #[error("reading the run directory {}", path.display())]
    Read {
        /// The run directory.
        path: PathBuf,
        /// Why.
        source: ArchiveError,
    },
    /// `run.json` names no task.
    #[error("run.json names no task")]
    NoTask,
    /// A field of `run.json`'s configuration does not parse.
    #[error("run.json's {field}")]
    Config {
        /// The field (`sizes`, `backend`).
        field: &'static str,
        /// Why.
        source: serde_json::Error,
    },
    /// The task file given defines another task than the run searched.
    #[error("{} defines task `{defined}`, but the run searched `{searched}`", path.display())]
    OtherTask {
        /// The task file.
        path: PathBuf,
        /// The task it defines.
        defined: String,
        /// The task the run searched.
        searched: String,
    },
    /// The run searched a task file's task and no task file was given.
    #[error(
        "the run searched `{task}`, which is not a built-in task ({source}): give the task file \
         it was searched on with --task-file T.toml"
    )]
    NeedsTaskFile {
        /// The task.
        task: String,
        /// Why it is not a built-in task.
        source: Box<EvalError>,
    },
    /// The task file could not be used.
    #[error(transparent)]
    Task(#[from] TaskChoiceError),
    /// The backend is unknown or not in this build.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The run has no elite.
    #[error("the run in {} has no elite yet", .0.display())]
    NoElite(PathBuf),
    /// The evaluator could not start.
    #[error(transparent)]
    Eval(#[from] EvalError),
}

/// What to re-check, and how.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The run: a run directory, or the output folder of a search (which holds one in `run/`).
    pub run_dir: PathBuf,
    /// Every elite, not only the best.
    pub all: bool,
    /// The task file the run searched on (task-file runs record only the task's name).
    pub task_file: Option<PathBuf>,
    /// Seed of the fresh input data (default: derived from the run's seed, different from it).
    pub data_seed: Option<u64>,
    /// Device, overriding the one recorded in the run.
    pub device: Option<String>,
}

/// How a re-check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Kernels re-checked (correct when the run recorded them).
    pub rechecked: usize,
    /// Of those, the ones no longer correct.
    pub broken: usize,
}

impl Verdict {
    /// Every re-checked kernel is still correct, and there was at least one.
    pub fn passed(&self) -> bool {
        self.rechecked > 0 && self.broken == 0
    }

    /// The verdict's line.
    pub fn text(&self) -> String {
        if self.rechecked == 0 {
            "the run recorded no correct kernel: nothing to re-check".to_owned()
        } else if self.broken > 0 {
            format!(
                "{} of {} kernels are no longer correct",
                self.broken, self.rechecked
            )
        } else {
            format!("{} kernel(s) still correct", self.rechecked)
        }
    }
}

/// The run directory proper: `path` itself, or its `run/` folder.
pub fn locate(path: &Path) -> Result<PathBuf, VerifyError> {
    if path.join("run.json").is_file() {
        return Ok(path.to_path_buf());
    }
    let inner = path.join("run");
    if inner.join("run.json").is_file() {
        return Ok(inner);
    }
    Err(VerifyError::NotARun(path.to_path_buf()))
}

/// The candidate `report.json` beside the run directory names the best kernel, when there is
/// such a report (a run still going, or one written elsewhere, has none: the fittest elite is
/// then the best).
fn reported_best(run_dir: &Path) -> Option<u64> {
    let path = run_dir.parent()?.join("report.json");
    let text = std::fs::read(path).ok()?;
    let report: serde_json::Value = serde_json::from_slice(&text).ok()?;
    report.get("best_kernel")?.get("candidate")?.as_u64()
}

/// The run's elites as its log left them: per cell, the last candidate recorded as filling or
/// improving it.
fn final_elites(records: &[StepRecord]) -> Vec<Elite> {
    let mut cells: BTreeMap<Vec<usize>, Elite> = BTreeMap::new();
    for record in records {
        for child in &record.children {
            if let ChildRecord::Judged { elite, outcome } = child {
                if matches!(
                    outcome,
                    InsertOutcome::NewCell | InsertOutcome::Improved { .. }
                ) {
                    cells.insert(elite.descriptor.coords.clone(), Elite::clone(elite));
                }
            }
        }
    }
    cells.into_values().collect()
}

/// `median [lo–hi]` in milliseconds, from the samples where kept, else the median alone.
fn time_text(e: &Evaluation) -> String {
    match (median_interval(&e.samples), e.timing) {
        (Some(m), _) => format!(
            "{:.4} [{:.4}–{:.4}]",
            m.median * 1e3,
            m.lo * 1e3,
            m.hi * 1e3
        ),
        (None, Some(t)) => format!("{:.4}", t.median_s * 1e3),
        (None, None) => "-".to_owned(),
    }
}

fn row(best: bool, elite: &Elite, status: &str, recorded: &str, now: &str, ratio: &str) -> String {
    let cell: Vec<String> = elite
        .descriptor
        .coords
        .iter()
        .map(ToString::to_string)
        .collect();
    format!(
        "{:<4} {:<10} {:>6} {:<12} {:>28} {:>28} {:>9}",
        if best { "best" } else { "" },
        cell.join("-"),
        format!("#{}", elite.candidate.id.0),
        status,
        recorded,
        now,
        ratio,
    )
}

/// The task the run searched: the task file given (which must define it), else the built-in
/// task of that name.
fn run_task(
    task_name: &str,
    sizes: &Sizes,
    task_file: Option<&Path>,
) -> Result<ChosenTask, VerifyError> {
    let Some(path) = task_file else {
        return builtin_task(task_name, sizes)
            .map(ChosenTask::builtin)
            .map_err(|source| VerifyError::NeedsTaskFile {
                task: task_name.to_owned(),
                source: Box::new(source),
            });
    };
    let chosen = ChosenTask::resolve(None, Some(path), &sizes_text(sizes))?;
    if chosen.name() != task_name {
        return Err(VerifyError::OtherTask {
            path: path.to_path_buf(),
            defined: chosen.name(),
            searched: task_name.to_owned(),
        });
    }
    Ok(chosen)
}

/// What a run directory records of the run that `kf verify` needs again: the task's name, its
/// sizes and the backend (with `--device` in its place when given).
struct RecordedRun {
    task: String,
    sizes: Sizes,
    spec: BackendSpec,
}

impl RecordedRun {
    fn of(config: &serde_json::Value, options: &VerifyOptions) -> Result<Self, VerifyError> {
        let task = config
            .get("task")
            .and_then(|t| t.as_str())
            .ok_or(VerifyError::NoTask)?
            .to_owned();
        let field = |field: &'static str| move |source| VerifyError::Config { field, source };
        let sizes: Sizes = match config.get("sizes") {
            Some(s) => serde_json::from_value(s.clone()).map_err(field("sizes"))?,
            None => Sizes::new(),
        };
        let mut spec: BackendSpec = match config.get("backend") {
            Some(b) => serde_json::from_value(b.clone()).map_err(field("backend"))?,
            None => BackendSpec::new(crate::backends::DEFAULT_BACKEND),
        };
        if options.device.is_some() {
            spec.device = options.device.clone();
        }
        Ok(RecordedRun { task, sizes, spec })
    }
}

/// The run's final elites in the order they are re-checked: the report's best kernel first
/// (after a final selection it is the elite that was fastest when re-timed, not necessarily
/// the fittest by its single measurement), then fittest first, among equals the earliest
/// candidate (the archive's notion of the best); only the first unless `all`.
fn elites_to_check(
    records: &[StepRecord],
    dir: &Path,
    all: bool,
) -> Result<Vec<Elite>, VerifyError> {
    let mut elites = final_elites(records);
    if elites.is_empty() {
        return Err(VerifyError::NoElite(dir.to_path_buf()));
    }
    elites.sort_by(|a, b| {
        b.fitness
            .cmp(&a.fitness)
            .then(a.candidate.id.0.cmp(&b.candidate.id.0))
    });
    if let Some(reported) = reported_best(dir) {
        if let Some(i) = elites.iter().position(|e| e.candidate.id.0 == reported) {
            let best = elites.remove(i);
            elites.insert(0, best);
        }
    }
    if !all {
        elites.truncate(1);
    }
    Ok(elites)
}

/// Re-checks one elite with fresh inputs and hands `out` its row (and the diagnostics of a
/// kernel no longer correct). An archive keeps the best attempt per cell even when none of its
/// kernels was correct (the status ladder ranks a compile error below wrong values): such an
/// elite is listed, not re-checked.
fn recheck(
    evaluator: &IsolatedEvaluator,
    best: bool,
    elite: &Elite,
    verdict: &mut Verdict,
    out: &mut impl FnMut(&str),
) {
    if elite.evaluation.status != Status::Correct {
        let status = format!("({})", elite.evaluation.status.as_str());
        out(&row(best, elite, &status, "-", "not re-checked", "-"));
        return;
    }
    verdict.rechecked += 1;
    let params = elite.effective_params();
    let now = match evaluator.evaluate_blocking(&elite.candidate.source, &params) {
        Ok(e) => e,
        Err(e) => Evaluation::failed(Status::RuntimeError, format!("evaluator: {e}")),
    };
    let ratio = now
        .timing
        .zip(elite.evaluation.timing)
        .filter(|(_, r)| r.median_s > 0.0)
        .map(|(n, r)| n.median_s / r.median_s);
    out(&row(
        best,
        elite,
        now.status.as_str(),
        &time_text(&elite.evaluation),
        &time_text(&now),
        &ratio.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}x")),
    ));
    if now.status != Status::Correct {
        verdict.broken += 1;
        out(&format!("     {}", now.diagnostics));
    }
}

/// Re-checks the run `options` names, handing `out` its lines as they come: what is
/// re-checked where, a table header, one row per kernel (with the diagnostics of a kernel no
/// longer correct), and the verdict's line. A kernel the run never had correct is listed and
/// not re-checked: it cannot have become incorrect.
pub fn verify_run(
    options: &VerifyOptions,
    mut out: impl FnMut(&str),
) -> Result<Verdict, VerifyError> {
    let dir = locate(&options.run_dir)?;
    let log = kf_archive::read_run(&dir).map_err(|source| VerifyError::Read {
        path: dir.clone(),
        source,
    })?;
    let recorded = RecordedRun::of(&log.meta.config, options)?;
    let (task_name, sizes, spec) = (recorded.task, recorded.sizes, recorded.spec);
    let chosen = run_task(&task_name, &sizes, options.task_file.as_deref())?;
    crate::backends::factory_for(&spec)?;
    let elites = elites_to_check(&log.records, &dir, options.all)?;

    let data_seed = options
        .data_seed
        .unwrap_or(log.meta.seed ^ VERIFY_SEED_SALT);
    // The full protocol (the default timing, fresh data for every evaluation), from a data seed
    // the run did not use.
    let eval_config = EvalConfig {
        data_seed: Some(data_seed),
        reuse_inputs: 0,
        ..EvalConfig::default()
    };
    let evaluator = chosen
        .evaluator(spec.clone())
        .command(WorkerCommand::current_exe()?)
        .config(eval_config)
        .timeout(chosen.timeout(TimeoutPolicy::default()))
        .build();
    let device = evaluator.device()?;
    out(&format!(
        "run {}: task {} ({}), {} on {}; fresh inputs from data seed {data_seed}",
        dir.display(),
        task_name,
        sizes_text(&chosen.task.sizes()),
        spec.kind,
        device.name
    ));
    out(&format!(
        "{:<4} {:<10} {:>6} {:<12} {:>28} {:>28} {:>9}",
        "", "cell", "cand", "status", "recorded ms [95%]", "now ms [95%]", "now/rec"
    ));
    let mut verdict = Verdict {
        rechecked: 0,
        broken: 0,
    };
    for (i, elite) in elites.iter().enumerate() {
        recheck(&evaluator, i == 0, elite, &mut verdict, &mut out);
    }
    evaluator.shutdown();
    out(&verdict.text());
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_found_in_its_folder_or_the_output_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let e = locate(tmp.path()).unwrap_err();
        assert!(e.to_string().contains("is not a run directory"), "{e}");
        std::fs::create_dir(tmp.path().join("run")).unwrap();
        std::fs::write(tmp.path().join("run/run.json"), "{}").unwrap();
        assert_eq!(locate(tmp.path()).unwrap(), tmp.path().join("run"));
        assert_eq!(
            locate(&tmp.path().join("run")).unwrap(),
            tmp.path().join("run")
        );
    }

    #[test]
    fn the_verdict_passes_only_when_every_rechecked_kernel_is_correct() {
        let v = |rechecked, broken| Verdict { rechecked, broken };
        assert!(v(2, 0).passed());
        assert_eq!(v(2, 0).text(), "2 kernel(s) still correct");
        assert!(!v(2, 1).passed());
        assert_eq!(v(2, 1).text(), "1 of 2 kernels are no longer correct");
        assert!(!v(0, 0).passed());
    }
}
