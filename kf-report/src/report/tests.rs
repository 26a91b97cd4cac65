//! Tests of the report on synthetic archives (fabricated elites, and a real engine run on the
//! synthetic problem of `kf_core::testing`).
//!
//! Set `KF_REPORT_KEEP=/some/folder` to keep the demo report (`demo_report_on_a_gemm_like_archive`)
//! for looking at its pictures.

use std::path::Path;

use kf_core::prelude::*;
use kf_core::testing::{
    synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator, VecArchive,
};
use kf_core::{
    ArchiveMetrics, CandidateId, CorrectnessReport, HistoryPoint, RunSummary, StopReason,
};
use serde_json::Value;

use super::*;

const MANIFEST: &str = "entry = \"gemm\"\nlanguage = \"opencl\"\n[params]\nTS = [8, 16, 32]\n\
                        [launch]\nglobal = [\"M\", \"N\"]\nlocal = [\"TS\", \"TS\"]\n";

/// A deterministic pseudo-random stream (no dependency on rand's algorithms).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn elite(
    id: u64,
    coords: [usize; 3],
    gflops: Option<f64>,
    status: Status,
    language: Language,
) -> Elite {
    let params = ParamValues::new()
        .with("TS", 8 * (1 + coords[0] as i64))
        .with("WPT", 1i64 << coords[1])
        .with("VW", 1i64 << coords[2]);
    let source = KernelSource::new(
        language,
        "gemm",
        format!("__kernel void gemm() {{ /* kernel {id} */ }}\n"),
    )
    .with_manifest(MANIFEST);
    let mut candidate = Candidate::seed(source, params.clone());
    candidate.id = CandidateId(id);
    candidate.origin = if id == 0 {
        Origin::mutator("seed")
    } else {
        Origin::mutator("structural").with_note(format!("tiling step {id}"))
    };
    let evaluation = match (status, gflops) {
        (Status::Correct, g) => {
            let seconds = g.map_or(1e-3, |g| 2.0 * 512f64.powi(3) / (g * 1e9));
            let timing = TimingStats::from_samples(&[seconds]).unwrap();
            let mut e = Evaluation::correct(timing, None);
            e.gflops = g;
            e.params = params;
            e
        }
        (s, _) => {
            let mut e = Evaluation::failed(s, "mismatch at 17");
            e.correctness = Some(CorrectnessReport {
                fraction_within: 0.5,
                ..CorrectnessReport::default()
            });
            e
        }
    };
    Elite {
        fitness: evaluation.fitness(),
        candidate,
        evaluation,
        descriptor: Descriptor::new(coords.to_vec(), "test"),
    }
}

/// An archive like a GEMM search leaves: a naive seed and faster kernels in higher cells.
fn gemm_like() -> Vec<Elite> {
    let mut rng = Lcg(7);
    let mut v = vec![elite(
        0,
        [0, 0, 0],
        Some(4.1),
        Status::Correct,
        Language::OpenCl,
    )];
    let mut id = 1;
    for m in 0..4 {
        for a in 0..4 {
            for p in 0..4 {
                if (m, a, p) == (0, 0, 0) || rng.next() < 0.62 {
                    continue;
                }
                let base = 4.0 + 9.0 * m as f64 + 5.0 * a as f64 + 2.0 * p as f64;
                let g = base * (0.75 + 0.5 * rng.next());
                let status = if rng.next() < 0.08 {
                    Status::WrongValues
                } else {
                    Status::Correct
                };
                v.push(elite(id, [m, a, p], Some(g), status, Language::OpenCl));
                id += 1;
            }
        }
    }
    v
}

fn summary_for(elites: &[Elite], evaluations: u64) -> RunSummary {
    let qd: f64 = elites.iter().map(|e| e.fitness.value()).sum();
    let best = elites
        .iter()
        .map(|e| e.fitness)
        .fold(None, |b: Option<Fitness>, f| {
            Some(match b {
                Some(b) if b.value() >= f.value() => b,
                _ => f,
            })
        });
    let history = (1..=evaluations)
        .map(|n| {
            let t = n as f64 / evaluations as f64;
            HistoryPoint {
                evaluations: n,
                qd_score: qd * t.sqrt(),
                coverage: 0.3 * t.sqrt(),
                best: best.and_then(|b| Fitness::new(b.value() * t.sqrt())),
                elapsed_s: n as f64 * 0.5,
            }
        })
        .collect();
    RunSummary {
        stop_reason: StopReason::Evaluations,
        steps: evaluations,
        evaluations,
        replayed_steps: 0,
        failed_steps: 2,
        metrics: ArchiveMetrics {
            cells: 64,
            filled: elites.len(),
            coverage: elites.len() as f64 / 64.0,
            qd_score: qd,
            best,
            mean: None,
            additions: elites.len() as u64,
        },
        usage: Usage::default(),
        wall_seconds: evaluations as f64 * 0.5,
        history,
        novelty: kf_core::novelty::NoveltyCounts::default(),
    }
}

fn trace_for(elites: &[Elite], evaluations: u64) -> Vec<TracePoint> {
    let best = elites
        .iter()
        .filter(|e| e.evaluation.status.is_correct())
        .filter_map(|e| e.evaluation.gflops)
        .fold(0.0, f64::max);
    let mut rng = Lcg(3);
    let mut b = 4.1f64;
    let mut qd = 9.0;
    (1..=evaluations)
        .map(|n| {
            if rng.next() < 0.08 {
                b = (b + (best - b) * rng.next() * 0.6).min(best);
            }
            if n == evaluations {
                b = best;
            }
            qd += rng.next() * 2.0;
            TracePoint {
                evaluations: n,
                best_gflops: Some(b),
                qd_score: qd,
                filled: elites.len().min(n as usize),
                elapsed_s: n as f64 * 0.5,
                device_evaluations: 3 * n,
            }
        })
        .collect()
}

fn png_size(path: &Path) -> (u32, u32) {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    // Not a blank picture: many distinct colours.
    let distinct: std::collections::BTreeSet<&[u8]> = buf[..info.buffer_size()]
        .chunks(info.color_type.samples())
        .collect();
    assert!(distinct.len() > 3, "{} looks blank", path.display());
    (info.width, info.height)
}

/// Writes the report of `elites` after `evaluations` into a fresh folder (the default kernel
/// descriptor space), with or without pictures.
fn report_in_tmp(
    elites: &[Elite],
    evaluations: u64,
    pictures: bool,
) -> (tempfile::TempDir, ReportOutput) {
    let space = DescriptorSpace::kernel_default();
    let summary = summary_for(elites, evaluations);
    let tmp = tempfile::tempdir().unwrap();
    let out = Report::new(&space, &summary, elites)
        .pictures(pictures)
        .write(tmp.path())
        .unwrap();
    (tmp, out)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn demo_report_on_a_gemm_like_archive() {
    let elites = gemm_like();
    let space = DescriptorSpace::kernel_default();
    let summary = summary_for(&elites, 400);
    let keep = std::env::var_os("KF_REPORT_KEEP");
    let tmp = tempfile::tempdir().unwrap();
    let dir = keep.map_or_else(|| tmp.path().to_path_buf(), Into::into);
    let out = Report::new(&space, &summary, &elites)
        .baseline_gflops(Some(4.1))
        .trace(trace_for(&elites, 400))
        .title("SGEMM 512³ (synthetic)")
        .extra("size", [512, 512, 512])
        .write(&dir)
        .unwrap();
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    println!("{}\n{}", out.table, out.summary);
    // What the run prints fits 100 columns and shows the fastest cells only; the files keep
    // every cell.
    let printed = Report::new(&space, &summary, &elites)
        .baseline_gflops(Some(4.1))
        .terminal_text(&out);
    println!("{printed}");
    for line in printed.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    assert!(printed.contains("Fastest 10 of"), "{printed}");
    assert!(
        printed.contains("Every cell: `cells` in report.json"),
        "{printed}"
    );
    assert!(printed.contains("Best kernel"), "{printed}");

    // report.json: the headline fields.
    let doc = read_json(&out.report_json);
    let correct_best = elites
        .iter()
        .filter(|e| e.evaluation.status.is_correct())
        .filter_map(|e| e.evaluation.gflops)
        .fold(0.0, f64::max);
    assert_eq!(doc["best_gflops"].as_f64().unwrap(), correct_best);
    assert_eq!(doc["baseline_gflops"].as_f64().unwrap(), 4.1);
    assert!((doc["speedup"].as_f64().unwrap() - correct_best / 4.1).abs() < 1e-9);
    assert_eq!(doc["evaluations"].as_u64().unwrap(), 400);
    assert_eq!(doc["cells_filled"].as_u64().unwrap(), elites.len() as u64);
    assert_eq!(doc["cells_total"].as_u64().unwrap(), 64);
    assert_eq!(doc["qd_score"].as_f64().unwrap(), summary.metrics.qd_score);
    assert_eq!(doc["wall_seconds"].as_f64().unwrap(), 200.0);
    assert_eq!(doc["best_kernel_path"], "best_kernel.cl");
    assert!(doc["best_params"]["TS"].is_i64());
    assert_eq!(doc["best_kernel"]["manifest_path"], "best_kernel.toml");
    assert_eq!(doc["cells"].as_array().unwrap().len(), elites.len());
    assert_eq!(doc["images"]["heatmap"], "archive_heatmap.png");
    assert_eq!(doc["images"]["curve"], "progress.png");
    assert_eq!(doc["extra"]["size"][0], 512);
    assert_eq!(doc["title"], "SGEMM 512³ (synthetic)");
    // It also parses back into the typed document.
    let typed: ReportJson = serde_json::from_value(doc).unwrap();
    assert_eq!(typed.trace.len(), 400);

    // The best kernel's files.
    let best = elites
        .iter()
        .find(|e| e.evaluation.gflops == Some(correct_best))
        .unwrap();
    let src = std::fs::read_to_string(dir.join("best_kernel.cl")).unwrap();
    assert_eq!(src, &*best.candidate.source.text);
    let manifest = std::fs::read_to_string(dir.join("best_kernel.toml")).unwrap();
    // It stands on its own: it names the source file beside it, and its defaults are the
    // values the best kernel was measured with, so `kf eval` / `kf tune` take it as is.
    let (loaded, kernel) = kf_manifest::Manifest::load(&dir.join("best_kernel.toml")).unwrap();
    assert_eq!(&*kernel.text, &*best.candidate.source.text);
    assert_eq!(
        loaded.default_params().get("TS"),
        best.evaluation.params.get("TS")
    );
    assert_eq!(loaded.entry, "gemm");
    assert!(manifest.starts_with("# Best kernel of the run"));
    assert!(manifest.contains("#   TS = "), "{manifest}");
    let params = read_json(&dir.join("best_params.json"));
    assert_eq!(
        params["TS"].as_i64(),
        best.evaluation
            .params
            .get("TS")
            .and_then(ParamValue::as_i64)
    );

    // The pictures: valid PNGs of the documented sizes.
    assert_eq!(png_size(&dir.join("archive_heatmap.png")), HEATMAP_SIZE);
    assert_eq!(png_size(&dir.join("progress.png")), CURVE_SIZE);

    // No temporary files left behind.
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(!name.starts_with('.'), "left {name}");
    }
}

#[test]
fn the_table_lists_every_filled_cell_fastest_first() {
    let elites = gemm_like();
    let space = DescriptorSpace::kernel_default();
    let summary = summary_for(&elites, 100);
    let report = Report::new(&space, &summary, &elites)
        .baseline_gflops(Some(4.1))
        .table_width(160);
    let rows = report.rows();
    assert_eq!(rows.len(), elites.len());
    let mut cells: Vec<_> = rows.iter().map(|r| r.coords.clone()).collect();
    cells.sort();
    cells.dedup();
    assert_eq!(cells.len(), elites.len());
    // Correct kernels by GFLOP/s, descending, before incorrect ones.
    let correct: Vec<f64> = rows
        .iter()
        .take_while(|r| r.status.is_correct())
        .map(|r| r.figures.gflops.unwrap())
        .collect();
    assert!(correct.windows(2).all(|w| w[0] >= w[1]));
    assert!(rows[correct.len()..].iter().all(|r| !r.status.is_correct()));
    assert_eq!(
        rows[0].figures.speedup_vs_seed,
        rows[0].figures.gflops.map(|g| g / 4.1)
    );
    assert_eq!(
        rows.iter().map(|r| r.rank).collect::<Vec<_>>(),
        (1..=rows.len()).collect::<Vec<_>>()
    );

    let table = report.table();
    let lines: Vec<&str> = table.lines().collect();
    for r in &rows {
        let origin = format!("#{} ", r.candidate);
        let line = lines
            .iter()
            .find(|l| l.contains(&origin))
            .unwrap_or_else(|| panic!("no line for candidate {}:\n{table}", r.candidate));
        for level in &r.levels {
            assert!(line.contains(level.as_str()), "{level} missing in {line}");
        }
        assert!(line.contains(r.status.as_str()));
        if let Some(g) = r.figures.gflops {
            assert!(
                line.contains(&format!("{g:.1}")),
                "{g:.1} missing in {line}"
            );
        }
    }
    for header in [
        "memory_access",
        "GFLOP/s",
        "vs seed",
        "parameters",
        "origin",
    ] {
        assert!(table.contains(header), "no {header} in\n{table}");
    }
    assert!(lines.iter().all(|l| l.chars().count() <= 160), "{table}");
}

#[test]
fn memory_bound_tasks_report_gb_s_and_the_roofline_fraction() {
    let mut elites = gemm_like();
    for e in elites.iter_mut() {
        if let Some(t) = e.evaluation.timing {
            e.evaluation.gbs = Some(1e-3 / t.median_s);
            e.evaluation.roofline_fraction = Some(0.42);
            e.evaluation.memory_bound = Some(true);
        }
    }
    let space = DescriptorSpace::kernel_default();
    let summary = summary_for(&elites, 100);
    let report = Report::new(&space, &summary, &elites).table_width(200);
    let table = report.table();
    assert!(
        table.contains("GB/s") && !table.contains("GFLOP/s"),
        "{table}"
    );
    assert!(
        table.contains("roofline") && table.contains("42%"),
        "{table}"
    );
    assert!(report
        .summary_text()
        .contains("42% of the bandwidth roofline"));
    let json = serde_json::to_value(report.json()).unwrap();
    assert_eq!(json["roofline_fraction"], Value::from(0.42));
    assert_eq!(json["memory_bound"], Value::Bool(true));
    assert!(json["best_gbs"].as_f64().unwrap() > 0.0);
    // A report.json of the previous format (without these fields) still reads.
    let mut old = json.clone();
    for k in ["roofline_fraction", "memory_bound", "best_gbs"] {
        old.as_object_mut().unwrap().remove(k);
    }
    let back: ReportJson = serde_json::from_value(old).unwrap();
    assert_eq!(back.roofline_fraction, None);
}

#[test]
fn the_reference_measured_in_the_run_is_in_report_json_and_under_the_table() {
    if !kf_eval::task::file::python::numpy_or_skip() {
        return;
    }
    let elites = gemm_like();
    let space = DescriptorSpace::kernel_default();
    let summary = summary_for(&elites, 100);
    let sizes = kf_eval::task::parse_sizes("M=128,N=128,K=128").unwrap();
    let work = kf_core::Work {
        flops: 2.0 * 128f64.powi(3),
        bytes: 3.0 * 4.0 * 128f64.powi(2),
    };
    // The best kernel "re-timed" at 1 ms, then 0.5 ms: the faster round counts.
    let mut rounds = [1e-3, 5e-4].into_iter();
    let measured =
        crate::reference::measure_side_by_side("gemm", &sizes, &work, 2, || rounds.next()).unwrap();
    let reference_gflops = measured.gflops.unwrap();
    let retimed = measured.best_retimed.clone().unwrap();
    assert_eq!((retimed.rounds, retimed.median_s), (2, 5e-4));
    let report = Report::new(&space, &summary, &elites).reference(Ok(measured.clone()));
    let dir = tempfile::tempdir().unwrap();
    let out = report.pictures(false).write(dir.path()).unwrap();
    let json: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(json["reference_gflops"].as_f64(), Some(reference_gflops));
    // The ratio is the re-timed kernel's over the reference's, not the search's own figure
    // (measured at another moment).
    let ratio = json["reference_ratio"].as_f64().unwrap();
    let side_by_side = retimed.gflops.unwrap() / reference_gflops;
    assert!(
        (ratio - side_by_side).abs() < 1e-9 * ratio,
        "{ratio} vs {side_by_side}"
    );
    assert_ne!(
        ratio,
        json["best_gflops"].as_f64().unwrap() / reference_gflops
    );
    // Without a re-timed kernel there is a reference figure but no ratio.
    let mut alone = measured;
    alone.best_retimed = None;
    let json = serde_json::to_value(
        Report::new(&space, &summary, &elites)
            .reference(Ok(alone))
            .json(),
    )
    .unwrap();
    assert!(json["reference_gflops"].as_f64().is_some() && json["reference_ratio"].is_null());
    assert!(!json["reference"]["library"].as_str().unwrap().is_empty());
    assert!(json["reference_note"].is_null());
    assert!(
        out.summary.contains("Reference: ") && out.summary.contains("measured in the same run"),
        "{}",
        out.summary
    );
}

#[test]
fn the_final_selection_names_the_best_kernel_and_its_files() {
    let elites = gemm_like();
    let space = DescriptorSpace::kernel_default();
    let summary = summary_for(&elites, 100);
    let mut by_speed: Vec<&Elite> = elites
        .iter()
        .filter(|e| e.evaluation.status.is_correct())
        .collect();
    by_speed.sort_by(|a, b| {
        let g = |e: &Elite| e.evaluation.gflops.unwrap_or(0.0);
        g(b).total_cmp(&g(a))
    });
    let (fastest, runner_up) = (by_speed[0], by_speed[1]);
    let work = kf_core::Work {
        flops: 2.0 * 512f64.powi(3),
        bytes: 0.0,
    };
    // Re-timed, the search's fastest turns out slower than the runner-up.
    let selection = crate::final_selection::select(&[fastest, runner_up], 3, &work, |e| {
        Ok(if e.candidate.id == fastest.candidate.id {
            2e-3
        } else {
            1e-3
        })
    });
    assert_eq!(selection.chosen, Some(runner_up.candidate.id));
    let dir = tempfile::tempdir().unwrap();
    let out = Report::new(&space, &summary, &elites)
        .final_selection(selection.clone())
        .pictures(false)
        .write(dir.path())
        .unwrap();
    let json = read_json(&out.report_json);
    assert_eq!(
        json["best_kernel"]["candidate"].as_u64(),
        Some(runner_up.candidate.id.0)
    );
    // best_gflops is the chosen kernel's search figure, not the archive's maximum.
    assert_eq!(json["best_gflops"].as_f64(), runner_up.evaluation.gflops);
    assert_eq!(
        std::fs::read_to_string(out.best_kernel.unwrap()).unwrap(),
        &*runner_up.candidate.source.text
    );
    assert_eq!(
        json["final_selection"]["chosen"].as_u64(),
        Some(runner_up.candidate.id.0)
    );
    assert_eq!(
        json["final_selection"]["contenders"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(out.summary.contains("Final selection: "), "{}", out.summary);
    // A choice that is not a correct elite of the archive is ignored: the fastest stays best.
    let mut stray = selection;
    stray.chosen = Some(CandidateId(u64::MAX));
    let report = Report::new(&space, &summary, &elites).final_selection(stray);
    assert_eq!(
        report.best().map(|e| e.candidate.id),
        Some(fastest.candidate.id)
    );
}

#[test]
fn a_missing_reference_is_a_note_not_a_figure() {
    let elites = gemm_like();
    let space = DescriptorSpace::kernel_default();
    let summary = summary_for(&elites, 100);
    let report =
        Report::new(&space, &summary, &elites).reference(Err("no Python with NumPy".into()));
    let json = serde_json::to_value(report.json()).unwrap();
    assert!(json["reference_gflops"].is_null() && json["reference_ratio"].is_null());
    assert_eq!(json["reference_note"], Value::from("no Python with NumPy"));
    assert!(report
        .summary_text()
        .contains("Reference: none (no Python with NumPy)"));
    // A report.json without the reference fields (the previous format) still reads.
    let mut old = json.clone();
    for k in [
        "reference_gflops",
        "reference_gbs",
        "reference_ratio",
        "reference",
        "reference_note",
    ] {
        old.as_object_mut().unwrap().remove(k);
    }
    let back: ReportJson = serde_json::from_value(old).unwrap();
    assert_eq!(back.reference_note, None);
}

#[test]
fn an_archive_without_a_correct_kernel_still_reports() {
    let elites = vec![
        elite(1, [0, 1, 0], None, Status::WrongValues, Language::OpenCl),
        elite(2, [2, 1, 3], None, Status::CompileError, Language::OpenCl),
    ];
    let (tmp, out) = report_in_tmp(&elites, 5, true);
    assert!(out.best_kernel.is_none() && out.best_params.is_none());
    let doc = read_json(&out.report_json);
    assert!(doc["best_gflops"].is_null());
    assert!(doc["best_kernel_path"].is_null());
    assert_eq!(doc["cells_filled"], 2);
    assert_eq!(
        png_size(&tmp.path().join("archive_heatmap.png")),
        HEATMAP_SIZE
    );
    // The curve falls back to the engine's best fitness.
    assert_eq!(png_size(&tmp.path().join("progress.png")), CURVE_SIZE);
    assert!(out.summary.contains("no correct kernel"));
}

#[test]
fn an_empty_archive_still_reports() {
    let (_tmp, out) = report_in_tmp(&[], 0, true);
    let doc = read_json(&out.report_json);
    assert_eq!(doc["cells_filled"], 0);
    assert_eq!(doc["cells"].as_array().unwrap().len(), 0);
    assert!(out.heatmap.is_some() && out.curve.is_some());
}

#[test]
fn what_the_novelty_filter_found_is_in_the_report() {
    let elites = gemm_like();
    let space = DescriptorSpace::kernel_default();
    let mut summary = summary_for(&elites, 40);
    let quiet = Report::new(&space, &summary, &elites).summary_text();
    assert!(
        !quiet.contains("Novelty filter"),
        "nothing found, nothing said: {quiet}"
    );
    summary.novelty = kf_core::novelty::NoveltyCounts {
        duplicates: 7,
        near_duplicates: 2,
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = Report::new(&space, &summary, &elites)
        .write(tmp.path())
        .unwrap();
    assert!(
        out.summary.contains(
            "Novelty filter: 7 repeats of an evaluated kernel not evaluated, 2 near-duplicates"
        ),
        "{}",
        out.summary
    );
    let doc = read_json(&out.report_json);
    assert_eq!(doc["novelty"]["duplicates"], 7);
    assert_eq!(doc["novelty"]["near_duplicates"], 2);
}

#[test]
fn the_source_extension_follows_the_language() {
    for (language, name) in [
        (Language::Sycl, "best_kernel.cpp"),
        (Language::Cuda, "best_kernel.cu"),
    ] {
        let elites = [elite(3, [1, 1, 1], Some(10.0), Status::Correct, language)];
        let (tmp, out) = report_in_tmp(&elites, 3, false);
        assert_eq!(out.best_kernel.unwrap(), tmp.path().join(name));
        assert_eq!(read_json(&out.report_json)["best_kernel_path"], name);
        assert!(out.heatmap.is_none());
    }
}

#[test]
fn a_kernel_without_manifest_gets_params_only() {
    let mut e = elite(3, [1, 1, 1], Some(10.0), Status::Correct, Language::OpenCl);
    e.candidate.source.manifest = None;
    let (tmp, out) = report_in_tmp(&[e], 3, false);
    assert!(out.best_manifest.is_none());
    assert!(!tmp.path().join("best_kernel.toml").exists());
    assert!(read_json(&tmp.path().join("best_params.json"))["WPT"].is_i64());
}

#[test]
fn pictures_without_text_are_still_written() {
    let elites = gemm_like();
    let refs: Vec<&Elite> = elites.iter().collect();
    let space = DescriptorSpace::kernel_default();
    let (heat, size) = plot::draw_heatmap(&refs, &space, Some(4.1), None, false).unwrap();
    assert!(!heat.has_text());
    let bytes = plot::encode(heat, size).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = std::env::var_os("KF_REPORT_KEEP")
        .map(|k| Path::new(&k).join("no-text"))
        .unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&tmp_path).unwrap();
    let p = tmp_path.join("h.png");
    std::fs::write(&p, bytes).unwrap();
    assert_eq!(png_size(&p), HEATMAP_SIZE);

    let summary = summary_for(&elites, 50);
    let data = plot::CurveData::new(&trace_for(&elites, 50), &summary.history, Some(4.1));
    let (curve, size) = plot::draw_curve(&data, false).unwrap();
    let p = tmp_path.join("c.png");
    std::fs::write(&p, plot::encode(curve, size).unwrap()).unwrap();
    assert_eq!(png_size(&p), CURVE_SIZE);
}

#[test]
fn spaces_of_other_dimensions_get_one_panel_per_pair() {
    let two = DescriptorSpace::new(vec![
        Dimension::new("a", ["x", "y"]),
        Dimension::numbered("b", 3),
    ])
    .unwrap();
    let one = DescriptorSpace::new(vec![Dimension::numbered("only", 5)]).unwrap();
    let four = DescriptorSpace::new(
        (0..4)
            .map(|i| Dimension::numbered(format!("d{i}"), 2))
            .collect(),
    )
    .unwrap();
    assert_eq!(plot::heatmap_size(&two), (400, 440));
    assert_eq!(plot::heatmap_size(&one), (400, 440));
    assert_eq!(plot::heatmap_size(&four), (2400, 440));
    let mut e = elite(1, [1, 2, 0], Some(3.0), Status::Correct, Language::OpenCl);
    e.descriptor.coords = vec![1, 2];
    let refs = [&e];
    for space in [&two, &one, &four] {
        let (r, size) =
            plot::draw_heatmap(&refs, space, None, Some("t"), fonts_available()).unwrap();
        assert_eq!(
            plot::encode(r, size).map(|b| b.len() > 100).ok(),
            Some(true)
        );
    }
}

#[test]
fn an_unwritable_folder_is_a_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let space = DescriptorSpace::kernel_default();
    let summary = summary_for(&[], 0);
    match Report::new(&space, &summary, []).write(&file) {
        Err(ReportError::CreateDir { path, .. }) => assert_eq!(path, file),
        other => panic!("expected CreateDir, got {other:?}"),
    }
}

/// The synthetic evaluator with a GFLOP/s figure (4 GFLOP/s per unit of speedup).
struct WithGflops(SyntheticEvaluator);

#[kf_core::async_trait]
impl Evaluator for WithGflops {
    type Error = std::convert::Infallible;
    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, Self::Error> {
        let mut e = self.0.evaluate(candidate).await?;
        e.gflops = e.speedup.map(|s| 4.0 * s);
        Ok(e)
    }
}

#[test]
fn a_real_engine_run_reports_end_to_end() {
    let classifier = SyntheticClassifier::new(4);
    let space = classifier.space().clone();
    let progress = ProgressObserver::new(&space).without_bar().log_every(50);
    let trace = progress.trace();
    let result = Engine::new(
        SyntheticMutator::new(0.15),
        WithGflops(SyntheticEvaluator::new()),
        classifier,
        VecArchive::new(space.clone()),
    )
    .seeds(vec![synthetic_seed(6)])
    .seed(5)
    .budget(Budget::evaluations(150))
    .add_observer(progress, ObserverMode::Always)
    .add_observer(LogObserver::new(&space), ObserverMode::Always)
    .run_blocking()
    .unwrap();
    assert_eq!(trace.len(), 150);
    let points = trace.points();
    assert!(points
        .windows(2)
        .all(|w| w[0].best_gflops <= w[1].best_gflops));

    let elites = result.archive.elites();
    let tmp = tempfile::tempdir().unwrap();
    let out = write_report(
        elites.iter().copied(),
        &space,
        &result.summary,
        Some(4.0),
        tmp.path(),
    )
    .unwrap();
    let doc = read_json(&out.report_json);
    assert_eq!(doc["evaluations"], 150);
    assert_eq!(
        doc["cells_filled"].as_u64().unwrap(),
        result.summary.metrics.filled as u64
    );
    let best = doc["best_gflops"].as_f64().unwrap();
    assert_eq!(Some(best), points.last().unwrap().best_gflops);
    assert_eq!(doc["cells"].as_array().unwrap().len(), elites.len());
    assert!(out.best_kernel.unwrap().ends_with("best_kernel.cl"));
    assert_eq!(png_size(&tmp.path().join("progress.png")), CURVE_SIZE);
}

/// The synthetic evaluator, slowed down so that a person can watch the bar.
struct Slow(WithGflops);

#[kf_core::async_trait]
impl Evaluator for Slow {
    type Error = std::convert::Infallible;
    async fn evaluate(&self, candidate: &Candidate) -> Result<Evaluation, Self::Error> {
        std::thread::sleep(std::time::Duration::from_millis(15));
        self.0.evaluate(candidate).await
    }
}

/// Run by hand in a terminal to watch the bar and the logs:
/// `cargo test -p kf-report --lib report::tests::watch_the_bar -- --ignored --nocapture`.
#[test]
#[ignore = "for people: draws a progress bar for a few seconds"]
fn watch_the_bar() {
    let _ = tracing_subscriber::fmt()
        .with_writer(BarAwareStderr::default)
        .try_init();
    let classifier = SyntheticClassifier::new(4);
    let space = DescriptorSpace::kernel_default();
    let result = Engine::new(
        SyntheticMutator::new(0.15),
        Slow(WithGflops(SyntheticEvaluator::new())),
        classifier,
        VecArchive::new(space.clone()),
    )
    .seeds(vec![synthetic_seed(6)])
    .budget(Budget::evaluations(300))
    .add_observer(ProgressObserver::new(&space), ObserverMode::Always)
    .add_observer(LogObserver::new(&space), ObserverMode::Always)
    .run_blocking()
    .unwrap();
    assert_eq!(result.summary.evaluations, 300);
}
