//! The end-of-run report: what goes into it and the order it is written in.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use kf_core::{DescriptorSpace, Elite, Language, ParamValues, RunSummary, StopReason, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[cfg(feature = "plot")]
use super::error::PlotError;
use super::error::{names, ReportError};
use super::files::write_atomic;
#[cfg(feature = "plot")]
use super::plot::{self, CurveData};
use super::progress::TracePoint;
use super::table::{self, correct_gflops, finite, measured_params, CellRow, KernelFigures};
use crate::final_selection::FinalSelection;
use crate::reference::ReferenceMeasurement;

/// The best kernel as `report.json` describes it. Paths are relative to the report folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestKernelJson {
    /// Source file (`best_kernel.cl`, `.cpp` or `.cu`).
    pub path: String,
    /// Manifest file, when the kernel has a manifest.
    pub manifest_path: Option<String>,
    /// Parameter values file.
    pub params_path: String,
    /// Source language.
    pub language: Language,
    /// Entry point.
    pub entry: String,
    /// Candidate id within the run.
    pub candidate: u64,
    /// What was measured (in `report.json`, its fields stand beside the others).
    #[serde(flatten)]
    pub figures: KernelFigures,
    /// Its cell, as level indices.
    pub cell: Vec<usize>,
    /// Its cell, as level names.
    pub levels: Vec<String>,
    /// Mutator that produced it.
    pub mutator: String,
    /// What the mutation did.
    pub note: String,
    /// Parameter values it was measured with.
    pub params: ParamValues,
    /// Content hash of its source and manifest.
    pub content_hash: String,
}

/// The contents of `report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportJson {
    /// What was searched, as the caller put it.
    pub title: Option<String>,
    /// The best kernel's GFLOP/s as measured in the search (the best kernel is the final
    /// selection's choice when there was one, else the fastest correct elite).
    pub best_gflops: Option<f64>,
    /// GFLOP/s of the naive seed, measured in the same run.
    pub baseline_gflops: Option<f64>,
    /// `best_gflops / baseline_gflops`.
    pub speedup: Option<f64>,
    /// Achieved bandwidth of the best kernel, GB/s (the figure of merit of memory-bound
    /// tasks).
    #[serde(default)]
    pub best_gbs: Option<f64>,
    /// The best kernel's fraction of the device's roofline, `min(peak, intensity ×
    /// bandwidth)`, with measured peaks where the device was characterised.
    #[serde(default)]
    pub roofline_fraction: Option<f64>,
    /// Whether the task is memory-bound on the device.
    #[serde(default)]
    pub memory_bound: Option<bool>,
    /// The reference library's throughput, measured in the same run, GFLOP/s.
    #[serde(default)]
    pub reference_gflops: Option<f64>,
    /// The reference library's bandwidth, measured in the same run, GB/s.
    #[serde(default)]
    pub reference_gbs: Option<f64>,
    /// The best kernel over the reference library, both measured side by side after the search
    /// (alternating rounds, the fastest of each side's): GB/s over GB/s for a memory-bound task,
    /// else GFLOP/s over GFLOP/s. Absent when the best kernel could not be re-timed.
    #[serde(default)]
    pub reference_ratio: Option<f64>,
    /// The reference measurement in full (library, the kernel OpenBLAS chose, threads, time).
    #[serde(default)]
    pub reference: Option<ReferenceMeasurement>,
    /// Why there is no reference measurement, when there is none.
    #[serde(default)]
    pub reference_note: Option<String>,
    /// The fastest elites re-timed after the search, and which of them the report names the
    /// best kernel ([`crate::final_selection`]); absent when there was none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_selection: Option<FinalSelection>,
    /// How the processes that built and ran this run's kernels (and its task's reference)
    /// were confined ([`kf_eval::confine`]): `level` is `complete`, or `partial` /
    /// `unconfined` under `--allow-unconfined`, with what was missing. Absent where the run's
    /// evaluator was not the shipped one on this machine (a distributed run records it on
    /// each evaluation row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<kf_eval::confine::Confinement>,
    /// Candidates evaluated.
    pub evaluations: u64,
    /// Device evaluations: every configuration compiled and timed, the candidates' own and
    /// those tuned for them inside the search.
    #[serde(default)]
    pub device_evaluations: Option<u64>,
    /// The run's limit on device evaluations, when it had one.
    #[serde(default)]
    pub device_evaluation_limit: Option<u64>,
    /// Cells holding an elite.
    pub cells_filled: usize,
    /// Cells in the descriptor space.
    pub cells_total: usize,
    /// `cells_filled / cells_total`.
    pub coverage: f64,
    /// QD-score of the archive at the end.
    pub qd_score: f64,
    /// Wall-clock seconds of the run.
    pub wall_seconds: f64,
    /// Why the run stopped.
    pub stop_reason: StopReason,
    /// Engine steps completed.
    pub steps: u64,
    /// Steps that failed (mutator or evaluator errors).
    pub failed_steps: u64,
    /// Steps replayed from the run folder.
    pub replayed_steps: u64,
    /// Children the novelty filter found: repeats of an evaluated kernel (not evaluated) and
    /// near-duplicates.
    #[serde(default)]
    pub novelty: kf_core::novelty::NoveltyCounts,
    /// Mutator usage (requests, tokens, cost).
    pub usage: Usage,
    /// The best kernel's source file, relative to the report folder.
    pub best_kernel_path: Option<String>,
    /// The best kernel's parameter values.
    pub best_params: Option<ParamValues>,
    /// The best kernel in full.
    pub best_kernel: Option<BestKernelJson>,
    /// The best kernel per filled cell, fastest first.
    pub cells: Vec<CellRow>,
    /// The descriptor space.
    pub space: DescriptorSpace,
    /// Pictures written, by kind (`heatmap`, `curve`), relative to the report folder.
    pub images: BTreeMap<String, String>,
    /// Best GFLOP/s and QD-score after each evaluation, when a progress trace was given.
    pub trace: Vec<TracePoint>,
    /// Anything the caller added (sizes, device, seed, …).
    pub extra: Map<String, Value>,
    /// What could not be produced (a picture that failed to draw, …).
    pub warnings: Vec<String>,
    /// The program that wrote it.
    pub generated_by: String,
}

/// What [`Report::write`] produced.
#[derive(Debug)]
pub struct ReportOutput {
    /// The report folder.
    pub dir: PathBuf,
    /// The per-cell table, as printed.
    pub table: String,
    /// Headline lines (best kernel, archive, run), as printed under the table.
    pub summary: String,
    /// `report.json`.
    pub report_json: PathBuf,
    /// The best kernel's source, when there is a correct kernel.
    pub best_kernel: Option<PathBuf>,
    /// Its manifest, when it has one.
    pub best_manifest: Option<PathBuf>,
    /// Its parameter values.
    pub best_params: Option<PathBuf>,
    /// The archive heatmap, when it was drawn.
    pub heatmap: Option<PathBuf>,
    /// The progress curve, when it was drawn.
    pub curve: Option<PathBuf>,
    /// Whether the pictures have text (false when no usable font was found).
    pub pictures_have_text: bool,
    /// What could not be produced; the rest was written.
    pub warnings: Vec<ReportError>,
}

/// An end-of-run report: build it from the run, then [`write`](Self::write) it into a folder.
#[derive(Debug, Clone)]
pub struct Report<'a> {
    space: &'a DescriptorSpace,
    summary: &'a RunSummary,
    elites: Vec<&'a Elite>,
    baseline_gflops: Option<f64>,
    reference: Option<Result<ReferenceMeasurement, String>>,
    final_selection: Option<FinalSelection>,
    device_evaluations: Option<(u64, Option<u64>)>,
    confinement: Option<kf_eval::confine::Confinement>,
    trace: Vec<TracePoint>,
    title: Option<String>,
    extra: Map<String, Value>,
    table_width: Option<u16>,
    pictures: bool,
}

impl<'a> Report<'a> {
    /// A report on a finished run: its descriptor space, summary and the archive's elites.
    pub fn new(
        space: &'a DescriptorSpace,
        summary: &'a RunSummary,
        elites: impl IntoIterator<Item = &'a Elite>,
    ) -> Self {
        Report {
            space,
            summary,
            elites: elites.into_iter().collect(),
            baseline_gflops: None,
            reference: None,
            final_selection: None,
            device_evaluations: None,
            confinement: None,
            trace: Vec::new(),
            title: None,
            extra: Map::new(),
            table_width: None,
            pictures: true,
        }
    }

    /// The naive seed's GFLOP/s, measured in the same run: speedups are relative to it.
    pub fn baseline_gflops(mut self, gflops: Option<f64>) -> Self {
        self.baseline_gflops = finite(gflops).filter(|g| *g > 0.0);
        self
    }

    /// The reference library measured in the same run ([`crate::reference::measure`]), or
    /// why there is none (the report says so in a line and in `reference_note`).
    pub fn reference(mut self, reference: Result<ReferenceMeasurement, String>) -> Self {
        self.reference = Some(reference);
        self
    }

    /// The device evaluations the run spent (every configuration compiled and timed, tuning
    /// included) and its limit on them, when it had one.
    pub fn device_evaluations(mut self, spent: u64, limit: Option<u64>) -> Self {
        self.device_evaluations = Some((spent, limit));
        self
    }

    /// How the run's untrusted processes were confined ([`ReportJson::confinement`]).
    pub fn confinement(mut self, confinement: Option<kf_eval::confine::Confinement>) -> Self {
        self.confinement = confinement;
        self
    }

    /// The final selection among the fastest elites ([`crate::final_selection::select`]):
    /// its chosen elite becomes [`best`](Self::best) when it is in the archive and correct.
    pub fn final_selection(mut self, selection: FinalSelection) -> Self {
        self.final_selection = Some(selection);
        self
    }

    /// The measured reference, when there is one.
    fn measured_reference(&self) -> Option<&ReferenceMeasurement> {
        self.reference.as_ref().and_then(|r| r.as_ref().ok())
    }

    /// The best kernel over the reference: `(ratio, unit)`, by GB/s for a memory-bound
    /// best kernel, else by GFLOP/s; only from the best kernel re-timed beside the reference
    /// ([`ReferenceMeasurement::best_retimed`]): the search's own figure was measured at
    /// another moment of a shared machine, so a ratio from it would not be side by side.
    fn reference_ratio(&self) -> Option<(f64, &'static str)> {
        let r = self.measured_reference()?;
        let retimed = r.best_retimed.as_ref()?;
        let ratio = |mine: Option<f64>, theirs: Option<f64>| {
            finite(mine)
                .zip(finite(theirs).filter(|t| *t > 0.0))
                .map(|(m, t)| m / t)
        };
        if self.best()?.evaluation.memory_bound == Some(true) {
            if let Some(x) = ratio(retimed.gbs, r.gbs) {
                return Some((x, "GB/s"));
            }
        }
        ratio(retimed.gflops, r.gflops).map(|x| (x, "GFLOP/s"))
    }

    /// The reference line under the table: the library, its rate and the best kernel's ratio.
    fn reference_line(&self) -> Option<String> {
        match self.reference.as_ref()? {
            Err(why) => Some(format!("Reference: none ({why})")),
            Ok(r) => {
                let mut line = format!("Reference: {}, measured in the same run:", r.describe());
                // The figure of merit of the task: GB/s for a memory-bound one, else GFLOP/s.
                let memory_bound = self.best().and_then(|e| e.evaluation.memory_bound);
                match (memory_bound, finite(r.gflops), finite(r.gbs)) {
                    (Some(true), _, Some(b)) | (_, None, Some(b)) => {
                        let _ = write!(line, " {b:.2} GB/s");
                    }
                    (_, Some(g), _) => {
                        let _ = write!(line, " {g:.2} GFLOP/s");
                    }
                    _ => {}
                }
                let _ = write!(line, " ({:.3} ms)", r.median_s * 1e3);
                match (&r.best_retimed, self.reference_ratio()) {
                    (Some(t), Some((x, unit))) => {
                        let _ = write!(
                            line,
                            "; the best kernel re-timed beside it ({} rounds, alternating): \
                             {:.3} ms, {x:.2}x the reference ({unit})",
                            t.rounds,
                            t.median_s * 1e3
                        );
                    }
                    _ => line.push_str("; the best kernel was not re-timed beside it: no ratio"),
                }
                Some(line)
            }
        }
    }

    /// The progress trace (from [`ProgressObserver::trace`](super::ProgressObserver::trace)),
    /// for a best-GFLOP/s curve; without it the curve shows the engine's best fitness.
    pub fn trace(mut self, points: Vec<TracePoint>) -> Self {
        self.trace = points;
        self
    }

    /// A title, such as `"SGEMM 1024³ on Intel(R) OpenCL CPU"`.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Adds a field under `extra` in `report.json` (a value that cannot be serialised is
    /// recorded as `null`).
    pub fn extra(mut self, key: impl Into<String>, value: impl Serialize) -> Self {
        self.extra.insert(
            key.into(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
        self
    }

    /// Width of the text table in characters; long cells wrap. By default the terminal's width
    /// when stdout is a terminal, else 200.
    pub fn table_width(mut self, width: u16) -> Self {
        self.table_width = Some(width.max(40));
        self
    }

    /// Whether to draw the pictures (default true).
    pub fn pictures(mut self, draw: bool) -> Self {
        self.pictures = draw;
        self
    }

    /// The best kernel per filled cell, fastest first.
    pub fn rows(&self) -> Vec<CellRow> {
        table::rows(&self.elites, self.space, self.baseline_gflops)
    }

    /// The best correct kernel: the one the final selection chose, when there was one; else
    /// the fastest by GFLOP/s, else (when none reports GFLOP/s) the fittest; `None` when no
    /// elite is correct.
    pub fn best(&self) -> Option<&'a Elite> {
        let chosen = self.final_selection.as_ref().and_then(|s| s.chosen);
        if let Some(e) = chosen.and_then(|id| {
            self.elites
                .iter()
                .copied()
                .find(|e| e.candidate.id == id && e.evaluation.status.is_correct())
        }) {
            return Some(e);
        }
        let correct = self
            .elites
            .iter()
            .copied()
            .filter(|e| e.evaluation.status.is_correct());
        let by_gflops = correct
            .clone()
            .filter_map(|e| correct_gflops(e).map(|g| (e, g)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(e, _)| e);
        by_gflops.or_else(|| correct.max_by(|a, b| a.fitness.value().total_cmp(&b.fitness.value())))
    }

    fn cells_filled(&self) -> usize {
        self.elites
            .iter()
            .map(|e| &e.descriptor.coords)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// The per-cell table with a heading line.
    pub fn table(&self) -> String {
        let rows = self.rows();
        let mut s = format!(
            "Best kernel per filled cell ({}/{} cells), fastest first",
            self.cells_filled(),
            self.space.cells()
        );
        if let Some(b) = self.baseline_gflops {
            let _ = write!(s, "; \"vs seed\" is GFLOP/s over the naive seed's {b:.2}");
        }
        s.push('\n');
        let width = self.table_width.unwrap_or_else(default_width);
        s.push_str(&table::render(&rows, self.space, width));
        s.push('\n');
        s
    }

    /// Headline lines: the best kernel, the archive, the run.
    pub fn summary_text(&self) -> String {
        let mut s = String::new();
        match self.best() {
            Some(e) => {
                let cell: Vec<String> = e
                    .descriptor
                    .coords
                    .iter()
                    .enumerate()
                    .map(|(d, l)| table::level_name(self.space, d, *l))
                    .collect();
                let speed = match correct_gflops(e) {
                    Some(g) => {
                        let mut t = format!("{g:.2} GFLOP/s");
                        if let Some(b) = self.baseline_gflops {
                            let _ = write!(t, ", {:.1}x the naive seed's {b:.2}", g / b);
                        }
                        if let Some(f) = finite(e.evaluation.roofline_fraction) {
                            let _ = match (e.evaluation.memory_bound, finite(e.evaluation.gbs)) {
                                (Some(true), Some(gbs)) => write!(
                                    t,
                                    "; {gbs:.2} GB/s, {:.0}% of the bandwidth roofline",
                                    f * 100.0
                                ),
                                _ => write!(t, "; {:.0}% of the roofline", f * 100.0),
                            };
                        }
                        t
                    }
                    None => format!("fitness {:.3}", e.fitness.value()),
                };
                let _ = writeln!(
                    s,
                    "Best kernel: {speed} in [{}] ({} {}{}) with {}",
                    cell.join(", "),
                    e.candidate.id,
                    e.candidate.origin.mutator,
                    if e.candidate.origin.note.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", e.candidate.origin.note)
                    },
                    measured_params(e)
                );
            }
            None => s.push_str("Best kernel: none (no correct kernel in the archive)\n"),
        }
        if let Some(selection) = &self.final_selection {
            s.push_str(&selection.describe());
            s.push('\n');
        }
        if let Some(line) = self.reference_line() {
            s.push_str(&line);
            s.push('\n');
        }
        let m = &self.summary.metrics;
        let device = match self.device_evaluations {
            Some((spent, Some(limit))) => format!(" ({spent} of {limit} device evaluations)"),
            Some((spent, None)) => format!(" ({spent} device evaluations)"),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "Archive: {}/{} cells filled, QD-score {:.2}; {} evaluations{device} in {:.1} s (stopped: {:?})",
            self.cells_filled(),
            self.space.cells(),
            m.qd_score,
            self.summary.evaluations,
            self.summary.wall_seconds,
            self.summary.stop_reason
        );
        let n = self.summary.novelty;
        if !n.is_zero() {
            let _ = writeln!(
                s,
                "Novelty filter: {} repeats of an evaluated kernel not evaluated, {} near-duplicates",
                n.duplicates, n.near_duplicates
            );
        }
        s
    }

    /// The `report.json` document (without images or warnings, which [`write`](Self::write)
    /// adds).
    pub fn json(&self) -> ReportJson {
        let rows = self.rows();
        let best = self.best();
        let best_json = best.map(|e| {
            let gflops = correct_gflops(e);
            BestKernelJson {
                path: source_name(e.candidate.source.language),
                manifest_path: e
                    .candidate
                    .source
                    .manifest
                    .as_ref()
                    .map(|_| names::BEST_MANIFEST.to_owned()),
                params_path: names::BEST_PARAMS.to_owned(),
                language: e.candidate.source.language,
                entry: e.candidate.source.entry.clone(),
                candidate: e.candidate.id.0,
                figures: KernelFigures::of(&e.evaluation, gflops, self.baseline_gflops),
                cell: e.descriptor.coords.clone(),
                levels: e
                    .descriptor
                    .coords
                    .iter()
                    .enumerate()
                    .map(|(d, l)| table::level_name(self.space, d, *l))
                    .collect(),
                mutator: e.candidate.origin.mutator.clone(),
                note: e.candidate.origin.note.clone(),
                params: measured_params(e).clone(),
                content_hash: e.candidate.source.content_hash(),
            }
        });
        let best_gflops = best_json.as_ref().and_then(|b| b.figures.gflops);
        let s = self.summary;
        let cells_total = self.space.cells();
        let cells_filled = self.cells_filled();
        ReportJson {
            title: self.title.clone(),
            best_gflops,
            baseline_gflops: self.baseline_gflops,
            speedup: best_gflops.zip(self.baseline_gflops).map(|(g, b)| g / b),
            best_gbs: best_json.as_ref().and_then(|b| b.figures.gbs),
            roofline_fraction: best_json.as_ref().and_then(|b| b.figures.roofline_fraction),
            memory_bound: best_json.as_ref().and_then(|b| b.figures.memory_bound),
            reference_gflops: self.measured_reference().and_then(|r| finite(r.gflops)),
            reference_gbs: self.measured_reference().and_then(|r| finite(r.gbs)),
            reference_ratio: self.reference_ratio().map(|(x, _)| x),
            reference: self.measured_reference().cloned(),
            reference_note: self
                .reference
                .as_ref()
                .and_then(|r| r.as_ref().err().cloned()),
            final_selection: self.final_selection.clone(),
            confinement: self.confinement.clone(),
            evaluations: s.evaluations,
            device_evaluations: self.device_evaluations.map(|(spent, _)| spent),
            device_evaluation_limit: self.device_evaluations.and_then(|(_, limit)| limit),
            cells_filled,
            cells_total,
            coverage: if cells_total > 0 {
                cells_filled as f64 / cells_total as f64
            } else {
                0.0
            },
            qd_score: s.metrics.qd_score,
            wall_seconds: s.wall_seconds,
            stop_reason: s.stop_reason,
            steps: s.steps,
            failed_steps: s.failed_steps,
            replayed_steps: s.replayed_steps,
            novelty: s.novelty,
            usage: s.usage,
            best_kernel_path: best_json.as_ref().map(|b| b.path.clone()),
            best_params: best_json.as_ref().map(|b| b.params.clone()),
            best_kernel: best_json,
            cells: rows,
            space: self.space.clone(),
            images: BTreeMap::new(),
            trace: self.trace.clone(),
            extra: self.extra.clone(),
            warnings: Vec::new(),
            generated_by: format!("kernelfoundry {}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// Writes the report into `dir` (created if needed): `report.json` first, then the best
    /// kernel's files, then the pictures, then `report.json` again with the pictures listed.
    ///
    /// Fails only when the folder, `report.json` or the best kernel's files cannot be written;
    /// a picture that cannot be drawn is a warning in [`ReportOutput::warnings`].
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<ReportOutput, ReportError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| ReportError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut doc = self.json();
        let report_json = dir.join(names::REPORT_JSON);
        write_json(&report_json, &doc, "report.json")?;

        let mut out = ReportOutput {
            dir: dir.to_path_buf(),
            table: self.table(),
            summary: self.summary_text(),
            report_json: report_json.clone(),
            best_kernel: None,
            best_manifest: None,
            best_params: None,
            heatmap: None,
            curve: None,
            pictures_have_text: false,
            warnings: Vec::new(),
        };

        if let (Some(best), Some(info)) = (self.best(), doc.best_kernel.as_ref()) {
            let src = dir.join(&info.path);
            write_atomic(&src, best.candidate.source.text.as_bytes())?;
            out.best_kernel = Some(src);
            if let Some(manifest) = &best.candidate.source.manifest {
                let path = dir.join(names::BEST_MANIFEST);
                // A manifest that stands on its own: it names the source file beside it and
                // makes the measured parameter values its defaults, so `kf eval` and `kf tune`
                // take it as is. One that cannot be rewritten is kept as the kernel carried it.
                let body = kf_manifest::standalone_manifest(manifest, &info.path, &info.params)
                    .unwrap_or_else(|e| {
                        out.warnings.push(ReportError::Manifest { source: e });
                        manifest.to_string()
                    });
                let text = format!("{}{body}", manifest_header(info));
                write_atomic(&path, text.as_bytes())?;
                out.best_manifest = Some(path);
            }
            let path = dir.join(names::BEST_PARAMS);
            write_json(&path, &info.params, "best_params.json")?;
            out.best_params = Some(path);
        }

        // The pictures need the `report` feature (plotters); without it they are not drawn.
        #[cfg(feature = "plot")]
        if self.pictures {
            let text = plot::fonts_available();
            out.pictures_have_text = text;
            let heatmap = dir.join(names::HEATMAP);
            let drawn = plot::draw_heatmap(
                &self.elites,
                self.space,
                self.baseline_gflops,
                self.title.as_deref(),
                text,
            );
            match picture(&heatmap, drawn) {
                Ok(with_text) => {
                    out.pictures_have_text &= with_text;
                    doc.images.insert("heatmap".into(), names::HEATMAP.into());
                    out.heatmap = Some(heatmap);
                }
                Err(e) => out.warnings.push(e),
            }
            let curve = dir.join(names::CURVE);
            let mut data = CurveData::new(&self.trace, &self.summary.history, self.baseline_gflops);
            data.title = self.title.clone();
            match picture(&curve, plot::draw_curve(&data, text)) {
                Ok(with_text) => {
                    out.pictures_have_text &= with_text;
                    doc.images.insert("curve".into(), names::CURVE.into());
                    out.curve = Some(curve);
                }
                Err(e) => out.warnings.push(e),
            }
            if !out.pictures_have_text && (out.heatmap.is_some() || out.curve.is_some()) {
                doc.warnings
                    .push("pictures drawn without text: no usable font".to_owned());
            }
        }
        for w in &out.warnings {
            tracing::warn!("report: {w}");
            doc.warnings.push(w.to_string());
        }
        if !doc.images.is_empty() || !doc.warnings.is_empty() {
            if let Err(e) = write_json(&report_json, &doc, "report.json") {
                tracing::warn!("report: {e}");
                out.warnings.push(e);
            }
        }
        Ok(out)
    }

    /// [`write`](Self::write)s the report, then prints [`terminal_text`](Self::terminal_text)
    /// to stdout.
    pub fn write_and_print(&self, dir: impl AsRef<Path>) -> Result<ReportOutput, ReportError> {
        let out = self.write(dir)?;
        // A closed stdout (a pipe into `head`) must not fail the run.
        let _ = std::io::stdout()
            .lock()
            .write_all(self.terminal_text(&out).as_bytes());
        Ok(out)
    }

    /// What a run prints at its end, every line within [`TERMINAL_COLUMNS`]: the fastest
    /// [`TERMINAL_ROWS`] cells of the table, the headline lines and the files written. The
    /// whole table (every filled cell, every column) is in `report.json` (`cells`) and the
    /// explorer's `report.html`.
    pub fn terminal_text(&self, out: &ReportOutput) -> String {
        let rows = self.rows();
        let shown = rows.len().min(TERMINAL_ROWS);
        let mut text = format!(
            "\nFastest {shown} of {} filled cells ({} in all):\n",
            rows.len(),
            self.space.cells()
        );
        text.push_str(&table::render_compact(&rows[..shown]));
        if rows.len() > shown {
            let _ = writeln!(
                text,
                "Every cell: `cells` in report.json (and the run explorer, report.html)"
            );
        }
        text.push_str(&out.summary);
        let _ = writeln!(text, "Report: {}", out.report_json.display());
        for (what, path) in [
            ("Best kernel", &out.best_kernel),
            ("Manifest", &out.best_manifest),
            ("Parameters", &out.best_params),
            ("Heatmap", &out.heatmap),
            ("Curve", &out.curve),
        ] {
            if let Some(p) = path {
                let _ = writeln!(text, "{what}: {}", p.display());
            }
        }
        wrap_lines(&text, usize::from(TERMINAL_COLUMNS))
    }
}

/// Columns of what a run prints at its end ([`Report::terminal_text`]).
pub const TERMINAL_COLUMNS: u16 = 100;

/// Table rows a run prints at its end: the fastest cells.
pub const TERMINAL_ROWS: usize = 10;

/// `text` with every line longer than `width` characters broken at spaces (a continuation
/// indented by two); a word longer than the line (a path) is broken where it must be.
fn wrap_lines(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let mut rest: Vec<char> = body.chars().collect();
        let mut first = true;
        loop {
            let indent = if first { 0 } else { 2 };
            let room = width - indent;
            if rest.len() <= room {
                out.extend(std::iter::repeat_n(' ', indent));
                out.extend(rest.iter());
                break;
            }
            let cut = rest[..=room]
                .iter()
                .rposition(|c| *c == ' ')
                .filter(|&i| i > 0)
                .unwrap_or(room);
            out.extend(std::iter::repeat_n(' ', indent));
            out.extend(rest[..cut].iter());
            out.push('\n');
            let skip = usize::from(rest.get(cut) == Some(&' '));
            rest.drain(..cut + skip);
            first = false;
        }
        out.push_str(newline);
    }
    out
}

/// Writes the report on a finished run into `dir` and prints the table: the one-call form of
/// [`Report`].
pub fn write_report<'a>(
    elites: impl IntoIterator<Item = &'a Elite>,
    space: &'a DescriptorSpace,
    summary: &'a RunSummary,
    baseline_gflops: Option<f64>,
    dir: impl AsRef<Path>,
) -> Result<ReportOutput, ReportError> {
    Report::new(space, summary, elites)
        .baseline_gflops(baseline_gflops)
        .write_and_print(dir)
}

/// The terminal's width when stdout is one, else 200 (logs and files do not wrap).
fn default_width() -> u16 {
    let term = console::Term::stdout();
    if term.is_term() {
        term.size_checked()
            .map_or(120, |(_, cols)| cols.clamp(80, 250))
    } else {
        200
    }
}

fn source_name(language: Language) -> String {
    let ext = match language {
        Language::OpenCl => "cl",
        Language::Sycl => "cpp",
        Language::Cuda => "cu",
        _ => "txt",
    };
    format!("{}.{ext}", names::BEST_KERNEL_STEM)
}

fn manifest_header(info: &BestKernelJson) -> String {
    let mut s = String::from("# Best kernel of the run");
    if let Some(g) = info.figures.gflops {
        let _ = write!(s, ": {g:.2} GFLOP/s");
        if let Some(x) = info.figures.speedup_vs_seed {
            let _ = write!(s, " ({x:.1}x the naive seed)");
        }
    }
    let _ = writeln!(
        s,
        ", cell [{}], candidate #{}.",
        info.levels.join(", "),
        info.candidate
    );
    let _ = writeln!(
        s,
        "# Parameter values it was measured with (also in {}):",
        info.params_path
    );
    if info.params.is_empty() {
        s.push_str("#   (none)\n");
    }
    for (k, v) in info.params.iter() {
        let _ = writeln!(s, "#   {k} = {v}");
    }
    s.push('\n');
    s
}

fn write_json(path: &Path, value: &impl Serialize, what: &'static str) -> Result<(), ReportError> {
    let mut bytes =
        serde_json::to_vec_pretty(value).map_err(|source| ReportError::Json { what, source })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Encodes and writes a drawn picture; returns whether it has text.
#[cfg(feature = "plot")]
fn picture(
    path: &Path,
    drawn: Result<(plot::Rendered, (u32, u32)), PlotError>,
) -> Result<bool, ReportError> {
    let (rendered, size) = drawn.map_err(|source| ReportError::Plot {
        path: path.to_path_buf(),
        source,
    })?;
    let with_text = rendered.has_text();
    let bytes = plot::encode(rendered, size).map_err(|source| ReportError::Png {
        path: path.to_path_buf(),
        source,
    })?;
    write_atomic(path, &bytes)?;
    Ok(with_text)
}
