//! What the explorer page shows, extracted from a run directory without taking its lock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use kf_core::{
    Candidate, ChildRecord, CompilerFacts, CorrectnessReport, Dimension, Elite, InsertOutcome,
    ParamValues, StepRecord, TimingStats,
};
use serde::Serialize;
use serde_json::Value;

use super::error::ExplorerError;

/// Unique sources up to this many bytes in all are inlined in `report.html`; above it only the
/// sources of the elites, their parents and the best kernel's lineage are.
pub const DEFAULT_INLINE_LIMIT: usize = 4 << 20;

/// The files of a run the explorer reads: the run directory (`run.json`, `steps.jsonl`) and,
/// when there, the search's `report.json` and `llm_exchanges.jsonl` next to it or one level up.
#[derive(Debug, Clone)]
pub struct RunFiles {
    /// The folder the user named (where `report.html` goes).
    pub out: PathBuf,
    /// The run directory proper (holds `run.json`).
    pub run_dir: PathBuf,
}

impl RunFiles {
    /// Finds the run directory for `path`: `path` itself when it holds `run.json`, else
    /// `path/run` (the output folder of `kf search`).
    pub fn locate(path: impl AsRef<Path>) -> Result<Self, ExplorerError> {
        let out = path.as_ref().to_path_buf();
        if out.join("run.json").is_file() {
            return Ok(RunFiles {
                run_dir: out.clone(),
                out,
            });
        }
        if out.join("run").join("run.json").is_file() {
            return Ok(RunFiles {
                run_dir: out.join("run"),
                out,
            });
        }
        Err(ExplorerError::NotARun(out))
    }

    /// The first of `name` in the folder the user named, the run directory, or the run
    /// directory's parent.
    fn find(&self, name: &str) -> Option<PathBuf> {
        [
            Some(self.out.clone()),
            Some(self.run_dir.clone()),
            self.run_dir.parent().map(Path::to_path_buf),
        ]
        .into_iter()
        .flatten()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
    }

    /// The step log's size, which grows as a search records steps (for live updates).
    pub fn log_len(&self) -> u64 {
        std::fs::metadata(self.run_dir.join("steps.jsonl"))
            .map(|m| m.len())
            .unwrap_or(0)
    }
}

/// One candidate as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateRow {
    /// Candidate id.
    pub id: u64,
    /// The step that produced it.
    pub step: u64,
    /// Its parents (first: the mutated one).
    pub parents: Vec<u64>,
    /// The mutator that produced it (`seed` for seeds).
    pub mutator: String,
    /// The prompt variant, for LLM children.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The model, for LLM children.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The mutator's note (for LLM children: the parse/repair outcome).
    pub note: String,
    /// `correct`, another evaluation status, or `failed` (not judged).
    pub status: String,
    /// What the archive did: `new_cell`, `improved`, `not_added`, or `failed`.
    pub outcome: String,
    /// Fitness, when judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitness: Option<f64>,
    /// Throughput, GFLOP/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gflops: Option<f64>,
    /// Speedup over the task baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// Achieved bandwidth, GB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbs: Option<f64>,
    /// Fraction of the device's roofline reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roofline: Option<f64>,
    /// Whether the task is memory-bound on the device (its rate is GB/s, not GFLOP/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bound: Option<bool>,
    /// The worker that evaluated it, in distributed runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Timing statistics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<TimingStats>,
    /// The baseline's timing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<TimingStats>,
    /// The parameter values it was measured with (or proposed with, when not judged).
    pub params: ParamValues,
    /// Compiler facts.
    pub compiler: CompilerFacts,
    /// The correctness check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correctness: Option<CorrectnessReport>,
    /// Diagnostics of the evaluation, or the error of a child that could not be judged.
    pub diagnostics: String,
    /// Its cell, when classified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coords: Option<Vec<usize>>,
    /// The classifier that placed it.
    pub classifier: String,
    /// The classifier's evidence, one entry per dimension where it has one.
    pub evidence: Vec<String>,
    /// BLAKE3 of the source text: the key in [`RunData::sources`].
    pub src: String,
    /// Source language.
    pub lang: String,
    /// Entry point.
    pub entry: String,
    /// The launch manifest, when the kernel has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

/// One point of the progress curves, after each evaluation in log order.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CurvePoint {
    /// Evaluations so far.
    pub e: u64,
    /// Best GFLOP/s of a correct kernel so far.
    pub best: Option<f64>,
    /// Best fitness so far.
    pub fit: f64,
    /// QD-score: the sum of the elites' fitness.
    pub qd: f64,
    /// Cells filled.
    pub filled: usize,
}

/// A step whose mutator failed before producing children.
#[derive(Debug, Clone, Serialize)]
pub struct StepError {
    /// The step.
    pub step: u64,
    /// The parent it was mutating.
    pub parent: Option<u64>,
    /// The mutator's error.
    pub error: String,
}

/// Everything the page shows of one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunData {
    /// A title for the page.
    pub title: String,
    /// The run's id.
    pub run_id: String,
    /// The engine seed.
    pub seed: u64,
    /// The run's configuration (`run.json`).
    pub config: Value,
    /// The run's budget (`run.json`).
    pub budget: Value,
    /// The behaviour dimensions of the archive.
    pub dimensions: Vec<Dimension>,
    /// Every candidate in log order.
    pub candidates: Vec<CandidateRow>,
    /// The elite of each filled cell (candidate ids).
    pub elites: Vec<u64>,
    /// The best correct elite (highest fitness), if any.
    pub best: Option<u64>,
    /// Steps that failed before producing children.
    pub step_errors: Vec<StepError>,
    /// Progress after each evaluation.
    pub curve: Vec<CurvePoint>,
    /// The search's own trace with wall-clock time (`report.json`), when there.
    pub trace: Value,
    /// Headline figures of `report.json`, when there.
    pub headline: Value,
    /// Source texts by BLAKE3 hash: all of them, or (see [`RunData::sources_complete`]) those
    /// of the elites, their parents and the best kernel's lineage.
    pub sources: BTreeMap<String, String>,
    /// Whether every source is in [`RunData::sources`]; when not, the page loads the others
    /// from `kf serve`.
    pub sources_complete: bool,
    /// Unique source bytes in the whole run.
    pub source_bytes: usize,
    /// LLM exchanges (`llm_exchanges.jsonl`) by step, when recorded.
    pub exchanges: BTreeMap<u64, Vec<Value>>,
    /// Whether the log's last line was still being written.
    pub partial_tail: bool,
    /// Whether the page is served live by `kf serve`.
    pub live: bool,
    /// How to call the run's best kernel from a program (`kf export`), once `report.json`
    /// names one.
    pub export: Option<ExportNote>,
}

/// The explorer's "export" note: the `kf export` commands for the run's best kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportNote {
    /// The candidate `report.json` names as the best kernel (the one `kf export` exports).
    pub candidate: u64,
    /// The commands, with the run's folder as the page was written from it.
    pub commands: Vec<String>,
    /// Why the best kernel does not export, when it does not (kf export writes OpenCL C
    /// kernels run through the OpenCL backend).
    pub unsupported: Option<String>,
}

/// `path` as one shell word.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c));
    if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The export note of the run in `out`, from its `report.json` and `run.json` configuration.
fn export_note(out: &Path, report: &Value, config: &Value) -> Option<ExportNote> {
    let best = report.get("best_kernel")?;
    let candidate = best.get("candidate")?.as_u64()?;
    let language = best
        .get("language")
        .and_then(Value::as_str)
        .unwrap_or("opencl");
    let backend = config
        .pointer("/backend/kind")
        .and_then(Value::as_str)
        .unwrap_or("opencl");
    let unsupported = (language != "opencl" || backend != "opencl").then(|| {
        format!(
            "kf export writes host code for OpenCL C kernels on the OpenCL backend; this run's best kernel is {language} on {backend}"
        )
    });
    let run = shell_word(out);
    Some(ExportNote {
        candidate,
        commands: vec![
            format!("kf export --run {run} --rust kf-kernels"),
            format!("kf export --run {run} --python kf_kernels"),
        ],
        unsupported,
    })
}

/// All source texts of a run by hash (what `kf serve` hands out on demand).
pub type SourceIndex = HashMap<String, String>;

fn outcome_name(o: &InsertOutcome) -> &'static str {
    match o {
        InsertOutcome::NewCell => "new_cell",
        InsertOutcome::Improved { .. } => "improved",
        _ => "not_added",
    }
}

fn hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// The row of candidate `c` of step `step` as far as its record alone tells: failed, until
/// [`fill_judged`] adds what its evaluation found.
fn unjudged_row(step: u64, c: &Candidate) -> CandidateRow {
    CandidateRow {
        id: c.id.0,
        step,
        parents: c.parents.iter().map(|p| p.0).collect(),
        mutator: c.origin.mutator.clone(),
        variant: c.origin.prompt_variant.clone(),
        model: c.origin.model.clone(),
        note: c.origin.note.clone(),
        status: "failed".into(),
        outcome: "failed".into(),
        fitness: None,
        gflops: None,
        speedup: None,
        gbs: None,
        roofline: None,
        memory_bound: None,
        worker: None,
        timing: None,
        baseline: None,
        params: c.params.clone(),
        compiler: CompilerFacts::default(),
        correctness: None,
        diagnostics: String::new(),
        coords: None,
        classifier: String::new(),
        evidence: Vec::new(),
        src: hash(&c.source.text),
        lang: c.source.language.as_str().to_owned(),
        entry: c.source.entry.clone(),
        manifest: c.source.manifest.as_deref().map(str::to_owned),
    }
}

/// Adds a judged candidate's evaluation (finite figures only) and descriptor to its row.
fn fill_judged(row: &mut CandidateRow, elite: &Elite, outcome: &InsertOutcome) {
    let ev = &elite.evaluation;
    row.status = ev.status.as_str().into();
    row.outcome = outcome_name(outcome).into();
    row.fitness = Some(elite.fitness.value());
    row.gflops = ev.gflops.filter(|g| g.is_finite());
    row.speedup = ev.speedup.filter(|s| s.is_finite());
    row.gbs = ev.gbs.filter(|g| g.is_finite());
    row.roofline = ev.roofline_fraction.filter(|f| f.is_finite());
    row.memory_bound = ev.memory_bound;
    row.worker = ev.worker.clone();
    row.timing = ev.timing;
    row.baseline = ev.baseline;
    if !ev.params.0.is_empty() {
        row.params = ev.params.clone();
    }
    row.compiler = ev.compiler.clone();
    row.correctness = ev.correctness;
    row.diagnostics = ev.diagnostics.clone();
    row.coords = Some(elite.descriptor.coords.clone());
    row.classifier = elite.descriptor.source.clone();
    row.evidence = elite.descriptor.evidence.clone();
}

/// The archive as the records rebuild it, candidate by candidate, for the curve.
#[derive(Default)]
struct Tally {
    /// Each filled cell's elite: its id and fitness.
    cells: HashMap<Vec<usize>, (u64, f64)>,
    /// The best GFLOP/s of a correct candidate so far.
    best_gflops: Option<f64>,
    /// The best fitness so far.
    best_fit: f64,
    /// The highest level seen per dimension (the grid's shape when no space is known).
    max_coords: Vec<usize>,
}

impl Tally {
    /// Counts a judged candidate, whose row is filled in.
    fn add(&mut self, row: &CandidateRow, elite: &Elite, outcome: &InsertOutcome) {
        let fit = elite.fitness.value();
        for (i, &x) in elite.descriptor.coords.iter().enumerate() {
            if self.max_coords.len() <= i {
                self.max_coords.push(0);
            }
            self.max_coords[i] = self.max_coords[i].max(x);
        }
        if matches!(
            outcome,
            InsertOutcome::NewCell | InsertOutcome::Improved { .. }
        ) {
            self.cells
                .insert(elite.descriptor.coords.clone(), (row.id, fit));
        }
        self.best_fit = self.best_fit.max(fit);
        if elite.evaluation.status.is_correct() {
            if let Some(g) = row.gflops {
                self.best_gflops = Some(self.best_gflops.map_or(g, |b| b.max(g)));
            }
        }
    }

    /// The curve's point after `e` candidates.
    fn point(&self, e: u64) -> CurvePoint {
        CurvePoint {
            e,
            best: self.best_gflops,
            fit: self.best_fit,
            qd: self.cells.values().map(|(_, f)| f).sum(),
            filled: self.cells.len(),
        }
    }
}

/// The dimensions the report names, when they fit the levels the records reach.
fn report_dimensions(report: &Value, max_coords: &[usize]) -> Option<Vec<Dimension>> {
    report
        .get("space")
        .and_then(|s| s.get("dimensions"))
        .and_then(|d| serde_json::from_value::<Vec<Dimension>>(d.clone()).ok())
        .filter(|d| {
            d.len() == max_coords.len()
                && d.iter().zip(max_coords).all(|(d, m)| *m < d.levels.len())
        })
}

/// The fittest of `elites` (id, fitness) whose candidate is correct.
fn best_correct(elites: &[(u64, f64)], candidates: &[CandidateRow]) -> Option<u64> {
    elites
        .iter()
        .filter(|(id, _)| {
            candidates
                .iter()
                .any(|c| c.id == *id && c.status == "correct")
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|e| e.0)
}

impl RunData {
    /// Reads the run at `files` (without its lock). Sources are inlined in full while their
    /// unique bytes stay within `inline_limit`. `dimensions` names the archive's dimensions when
    /// the caller knows them; otherwise `report.json`'s space is used, or numbered levels sized
    /// to the coordinates found.
    pub fn read(
        files: &RunFiles,
        dimensions: Option<Vec<Dimension>>,
        inline_limit: usize,
    ) -> Result<(RunData, SourceIndex), ExplorerError> {
        let log = kf_archive::read_run(&files.run_dir)?;
        let report: Value = match files.find("report.json") {
            Some(p) => {
                let bytes = std::fs::read(&p).map_err(|e| ExplorerError::Io(p.clone(), e))?;
                serde_json::from_slice(&bytes).map_err(|e| ExplorerError::Json(p, e))?
            }
            None => Value::Null,
        };
        let exchanges = match files.find("llm_exchanges.jsonl") {
            Some(p) => read_exchanges(&p)?,
            None => BTreeMap::new(),
        };
        let mut data = Self::from_records(&log.records, dimensions, &report);
        data.run_id = log.meta.run_id.clone();
        data.seed = log.meta.seed;
        data.config = log.meta.config.clone();
        data.budget = log.meta.budget.clone();
        data.export = export_note(&files.out, &report, &data.config);
        data.partial_tail = log.partial_tail;
        data.exchanges = exchanges;
        data.title = report
            .get("title")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| {
                log.meta
                    .config
                    .get("task")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| format!("run {}", log.meta.run_id));
        let index = source_index(&log.records);
        data.source_bytes = index.values().map(String::len).sum();
        data.sources_complete = data.source_bytes <= inline_limit;
        let wanted: HashSet<&str> = if data.sources_complete {
            index.keys().map(String::as_str).collect()
        } else {
            data.key_sources()
        };
        data.sources = index
            .iter()
            .filter(|(k, _)| wanted.contains(k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok((data, index))
    }

    /// Builds the page's data from step records alone.
    pub fn from_records(
        records: &[StepRecord],
        dimensions: Option<Vec<Dimension>>,
        report: &Value,
    ) -> RunData {
        let mut candidates = Vec::new();
        let mut step_errors = Vec::new();
        let mut tally = Tally::default();
        let mut curve = Vec::new();
        for r in records {
            if let Some(error) = &r.error {
                step_errors.push(StepError {
                    step: r.step,
                    parent: r.parent.map(|p| p.0),
                    error: error.clone(),
                });
            }
            for child in &r.children {
                let c = child.candidate();
                let mut row = unjudged_row(r.step, c);
                match child {
                    ChildRecord::Judged { elite, outcome } => {
                        fill_judged(&mut row, elite, outcome);
                        tally.add(&row, elite, outcome);
                    }
                    ChildRecord::Failed { error, .. } => row.diagnostics = error.clone(),
                }
                candidates.push(row);
                curve.push(tally.point(candidates.len() as u64));
            }
        }
        let dimensions = dimensions
            .or_else(|| report_dimensions(report, &tally.max_coords))
            .unwrap_or_else(|| {
                tally
                    .max_coords
                    .iter()
                    .enumerate()
                    .map(|(i, m)| Dimension::numbered(format!("dim {i}"), m + 1))
                    .collect()
            });
        let mut elites: Vec<(u64, f64)> = tally.cells.into_values().collect();
        elites.sort_by_key(|e| e.0);
        let best = best_correct(&elites, &candidates);
        RunData {
            title: String::new(),
            run_id: String::new(),
            seed: 0,
            config: Value::Null,
            budget: Value::Null,
            dimensions,
            elites: elites.into_iter().map(|e| e.0).collect(),
            best,
            candidates,
            step_errors,
            curve,
            trace: report.get("trace").cloned().unwrap_or(Value::Null),
            headline: headline(report),
            sources: BTreeMap::new(),
            sources_complete: false,
            export: None,
            source_bytes: 0,
            exchanges: BTreeMap::new(),
            partial_tail: false,
            live: false,
        }
    }

    /// The hashes of the sources always inlined: the elites', their parents', and the whole
    /// lineage of the best kernel.
    fn key_sources(&self) -> HashSet<&str> {
        let by_id: HashMap<u64, &CandidateRow> =
            self.candidates.iter().map(|c| (c.id, c)).collect();
        let mut keep = HashSet::new();
        for id in &self.elites {
            if let Some(c) = by_id.get(id) {
                keep.insert(c.src.as_str());
                for p in &c.parents {
                    if let Some(p) = by_id.get(p) {
                        keep.insert(p.src.as_str());
                    }
                }
            }
        }
        let mut next = self.best;
        let mut seen = HashSet::new();
        while let Some(id) = next.filter(|id| seen.insert(*id)) {
            let Some(c) = by_id.get(&id) else { break };
            keep.insert(c.src.as_str());
            next = c.parents.first().copied();
        }
        keep
    }
}

fn headline(report: &Value) -> Value {
    let keys = [
        "best_gflops",
        "best_gbs",
        "roofline_fraction",
        "memory_bound",
        "baseline_gflops",
        "speedup",
        "evaluations",
        "cells_filled",
        "cells_total",
        "coverage",
        "qd_score",
        "wall_seconds",
        "stop_reason",
        "usage",
        "extra",
    ];
    match report {
        Value::Object(m) => Value::Object(
            keys.iter()
                .filter_map(|k| m.get(*k).map(|v| ((*k).to_owned(), v.clone())))
                .collect(),
        ),
        _ => Value::Null,
    }
}

/// Every source text of `records` by its BLAKE3 hash.
pub fn source_index(records: &[StepRecord]) -> SourceIndex {
    let mut index = SourceIndex::new();
    for r in records {
        for child in &r.children {
            let text = &child.candidate().source.text;
            index.entry(hash(text)).or_insert_with(|| text.to_string());
        }
    }
    index
}

/// LLM exchanges by the step their scope names (`step-12`); lines that do not parse (a line
/// still being written) are skipped.
fn read_exchanges(path: &Path) -> Result<BTreeMap<u64, Vec<Value>>, ExplorerError> {
    let text = std::fs::read_to_string(path).map_err(|e| ExplorerError::Io(path.into(), e))?;
    let mut by_step: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let step = v
            .pointer("/key/scope")
            .and_then(Value::as_str)
            .and_then(|s| s.strip_prefix("step-"))
            .and_then(|s| s.parse::<u64>().ok());
        if let Some(step) = step {
            by_step.entry(step).or_default().push(v);
        }
    }
    Ok(by_step)
}

#[cfg(test)]
mod export_note_tests {
    use super::*;

    #[test]
    fn the_note_names_the_reports_best_kernel_with_a_quoted_folder() {
        let report = serde_json::json!({"best_kernel": {"candidate": 7, "language": "opencl"}});
        let config = serde_json::json!({"backend": {"kind": "opencl"}});
        let note = export_note(Path::new("/tmp/it's a run"), &report, &config).unwrap();
        assert_eq!(note.candidate, 7);
        assert_eq!(
            note.commands[0],
            "kf export --run '/tmp/it'\\''s a run' --rust kf-kernels"
        );
        assert!(note.unsupported.is_none());
        let plain = export_note(Path::new("runs/gemm-1"), &report, &config).unwrap();
        assert_eq!(
            plain.commands[1],
            "kf export --run runs/gemm-1 --python kf_kernels"
        );
    }

    #[test]
    fn a_sycl_best_kernel_says_why_it_does_not_export_and_no_report_no_note() {
        let report = serde_json::json!({"best_kernel": {"candidate": 3, "language": "sycl"}});
        let config = serde_json::json!({"backend": {"kind": "sycl"}});
        let note = export_note(Path::new("r"), &report, &config).unwrap();
        assert!(note.unsupported.unwrap().contains("sycl on sycl"));
        assert!(export_note(Path::new("r"), &Value::Null, &config).is_none());
    }
}
