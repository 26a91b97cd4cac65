//! The per-cell table: the best kernel of every filled cell, fastest first.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, ColumnConstraint, ContentArrangement, Table};
use kf_core::{DescriptorSpace, Elite, ParamValues, Status};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One filled cell of the archive, as the table and `report.json` show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRow {
    /// Position in the table, 1 for the fastest.
    pub rank: usize,
    /// Level index per dimension.
    pub coords: Vec<usize>,
    /// Level name per dimension.
    pub levels: Vec<String>,
    /// Where the elite stands on the result ladder.
    pub status: Status,
    /// What was measured (in `report.json`, its fields stand beside the others).
    #[serde(flatten)]
    pub figures: KernelFigures,
    /// Parameter values the figures were measured with.
    pub params: ParamValues,
    /// Candidate id within the run.
    pub candidate: u64,
    /// Mutator that produced it (`seed` for initial kernels).
    pub mutator: String,
    /// What the mutation did, when the mutator said.
    pub note: String,
    /// Scalar fitness the archive ranked it by.
    pub fitness: f64,
}

/// A kernel's measured figures as the report shows them: one declaration for the table's rows
/// ([`CellRow`], `cells` in `report.json`) and the best kernel (`best_kernel`), derived from its
/// [`kf_core::Evaluation`] ([`KernelFigures::of`]). Non-finite values are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelFigures {
    /// Throughput, GFLOP/s, when measured.
    pub gflops: Option<f64>,
    /// GFLOP/s over the naive seed's GFLOP/s, when both are known.
    pub speedup_vs_seed: Option<f64>,
    /// Speedup over the task's own baseline, measured by the evaluator in the same process.
    pub task_speedup: Option<f64>,
    /// Median kernel time in milliseconds, when timed.
    pub median_ms: Option<f64>,
    /// 95% confidence interval of the median time in milliseconds, `[lo, hi]`, from the
    /// timing samples the evaluation kept (see [`kf_core::noise::median_interval`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ms_interval: Option<[f64; 2]>,
    /// Achieved bandwidth, GB/s, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbs: Option<f64>,
    /// Fraction of the device's roofline reached, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline_fraction: Option<f64>,
    /// Whether the task is memory-bound on the device (its rate is GB/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bound: Option<bool>,
}

impl KernelFigures {
    /// The figures of `ev`, with `gflops` as the throughput it counts for (the measured one, or
    /// only a correct kernel's) and the naive seed's GFLOP/s for the speedup over it.
    pub fn of(ev: &kf_core::Evaluation, gflops: Option<f64>, seed_gflops: Option<f64>) -> Self {
        let seed = finite(seed_gflops).filter(|b| *b > 0.0);
        KernelFigures {
            gflops,
            speedup_vs_seed: gflops.zip(seed).map(|(g, b)| g / b),
            task_speedup: finite(ev.speedup),
            median_ms: finite(ev.timing.map(|t| t.median_s * 1e3)),
            median_ms_interval: median_ms_interval(ev),
            gbs: finite(ev.gbs),
            roofline_fraction: finite(ev.roofline_fraction),
            memory_bound: ev.memory_bound,
        }
    }
}

/// A finite value or `None`.
pub(crate) fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

/// The parameter values an elite was measured with (the evaluation's, which a tuner may have
/// changed, else the candidate's).
/// The 95% interval of an evaluation's median time in milliseconds, when it kept samples.
pub(crate) fn median_ms_interval(ev: &kf_core::Evaluation) -> Option<[f64; 2]> {
    kf_core::noise::median_interval(&ev.samples)
        .map(|m| [m.lo * 1e3, m.hi * 1e3])
        .filter(|[lo, hi]| lo.is_finite() && hi.is_finite())
}

pub(crate) fn measured_params(elite: &Elite) -> &ParamValues {
    if elite.evaluation.params.is_empty() {
        &elite.candidate.params
    } else {
        &elite.evaluation.params
    }
}

/// The name of level `level` of dimension `dim`, or the number when the space does not say.
pub(crate) fn level_name(space: &DescriptorSpace, dim: usize, level: usize) -> String {
    space
        .dimensions
        .get(dim)
        .and_then(|d| d.levels.get(level))
        .cloned()
        .unwrap_or_else(|| level.to_string())
}

/// The GFLOP/s an elite counts for in pictures and rankings: measured, finite, and correct.
pub(crate) fn correct_gflops(elite: &Elite) -> Option<f64> {
    if elite.evaluation.status.is_correct() {
        finite(elite.evaluation.gflops)
    } else {
        None
    }
}

/// Rows for `elites`, fastest first: correct kernels by GFLOP/s, then the rest by fitness.
pub(crate) fn rows(
    elites: &[&Elite],
    space: &DescriptorSpace,
    baseline_gflops: Option<f64>,
) -> Vec<CellRow> {
    let mut sorted: Vec<&Elite> = elites.to_vec();
    sorted.sort_by(|a, b| {
        let key = |e: &Elite| correct_gflops(e).unwrap_or(f64::NEG_INFINITY);
        key(b)
            .total_cmp(&key(a))
            .then(b.fitness.value().total_cmp(&a.fitness.value()))
            .then(a.descriptor.coords.cmp(&b.descriptor.coords))
    });
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let ev = &e.evaluation;
            CellRow {
                rank: i + 1,
                coords: e.descriptor.coords.clone(),
                levels: e
                    .descriptor
                    .coords
                    .iter()
                    .enumerate()
                    .map(|(d, l)| level_name(space, d, *l))
                    .collect(),
                status: ev.status,
                figures: KernelFigures::of(ev, finite(ev.gflops), baseline_gflops),
                params: measured_params(e).clone(),
                candidate: e.candidate.id.0,
                mutator: e.candidate.origin.mutator.clone(),
                note: e.candidate.origin.note.clone(),
                fitness: e.fitness.value(),
            }
        })
        .collect()
}

fn opt(v: Option<f64>, digits: usize, suffix: &str) -> String {
    v.map_or_else(|| "-".to_owned(), |x| format!("{x:.digits$}{suffix}"))
}

/// Renders rows as a text table at most `width` characters wide (long cells wrap).
pub(crate) fn render(rows: &[CellRow], space: &DescriptorSpace, width: u16) -> String {
    let mut table = Table::new();
    table
        .load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width);
    let ndim = rows
        .iter()
        .map(|r| r.coords.len())
        .max()
        .unwrap_or(space.ndim());
    let mut header = vec![Cell::new("#")];
    header.extend((0..ndim).map(|d| {
        Cell::new(
            space
                .dimensions
                .get(d)
                .map_or_else(|| format!("dim {d}"), |x| x.name.clone()),
        )
    }));
    // Memory-bound tasks are measured in GB/s, the others in GFLOP/s.
    let memory_bound = rows.iter().any(|r| r.figures.memory_bound == Some(true));
    let rate = if memory_bound { "GB/s" } else { "GFLOP/s" };
    header.extend(
        [
            "status",
            rate,
            "roofline",
            "vs seed",
            "ms [95%]",
            "parameters",
            "origin",
        ]
        .into_iter()
        .map(Cell::new),
    );
    table.set_header(header);
    for r in rows {
        let mut cells = vec![Cell::new(r.rank).set_alignment(CellAlignment::Right)];
        cells.extend(
            (0..ndim).map(|d| Cell::new(r.levels.get(d).map_or("", String::as_str).to_owned())),
        );
        let origin = if r.note.is_empty() {
            format!("#{} {}", r.candidate, r.mutator)
        } else {
            format!("#{} {}: {}", r.candidate, r.mutator, r.note)
        };
        cells.extend([
            Cell::new(r.status.as_str()),
            Cell::new(opt(
                if memory_bound {
                    r.figures.gbs
                } else {
                    r.figures.gflops
                },
                1,
                "",
            ))
            .set_alignment(CellAlignment::Right),
            Cell::new(opt(r.figures.roofline_fraction.map(|f| f * 100.0), 0, "%"))
                .set_alignment(CellAlignment::Right),
            Cell::new(opt(r.figures.speedup_vs_seed, 1, "x")).set_alignment(CellAlignment::Right),
            Cell::new(match (r.figures.median_ms, r.figures.median_ms_interval) {
                (Some(m), Some([lo, hi])) => format!("{m:.3} [{lo:.3}–{hi:.3}]"),
                (m, _) => opt(m, 3, ""),
            })
            .set_alignment(CellAlignment::Right),
            Cell::new(r.params.to_string()),
            Cell::new(origin),
        ]);
        table.add_row(cells);
    }
    // Level names, status and figures never wrap; parameters and origin take what is left.
    for i in 0..ndim + 6 {
        if let Some(column) = table.column_mut(i) {
            column.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    table.to_string()
}

/// The rows as a plain table of at most 99 columns, for a terminal: rank, the cell's levels
/// (joined, shortened with `…` past 48 characters), status, GFLOP/s, over the seed, and the
/// median time. The full table ([`render`]) has every column.
pub(crate) fn render_compact(rows: &[CellRow]) -> String {
    const CELL: usize = 48;
    let fmt = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |x| format!("{x:.digits$}"));
    let mut out = format!(
        "{:>3}  {:<CELL$}  {:<10}  {:>8}  {:>7}  {:>9}\n",
        "#", "cell", "status", "GFLOP/s", "vs seed", "ms"
    );
    for r in rows {
        let mut cell = r.levels.join(" / ");
        if cell.chars().count() > CELL {
            cell = cell.chars().take(CELL - 1).collect::<String>() + "…";
        }
        let status: String = r.status.to_string().chars().take(10).collect();
        let _ = writeln!(
            out,
            "{:>3}  {:<CELL$}  {:<10}  {:>8}  {:>7}  {:>9}",
            r.rank,
            cell,
            status,
            fmt(r.figures.gflops, 1),
            r.figures
                .speedup_vs_seed
                .map_or("-".to_owned(), |x| format!("{x:.1}x")),
            fmt(r.figures.median_ms, 3),
        );
    }
    out
}
