//! What the example checks and prints of the search's output folder and archive.

use std::path::Path;

use anyhow::{ensure, Context};
use kernelfoundry::core::{Archive, BoxError, DescriptorSpace, EvaluationReport};

/// The parts of our own, by their place in `report.json`'s `parts` and their names.
pub const OUR_PARTS: [(&str, &str); 5] = [
    ("backend", "counting-opencl"),
    ("archive", "logging-grid"),
    ("tune_strategy", "best-neighbour"),
    ("classifier", "local-and-outputs"),
    ("evaluator_layers", "counting-evaluations"),
];

/// Checks that the output folder holds the run directory, `report.json` and `report.html`, and
/// that `report.json` names the parts given (`parts` under `extra`); returns those names.
pub fn check_output(out: &Path, expected: &[(&str, &str)]) -> anyhow::Result<serde_json::Value> {
    for file in ["run", "report.json", "report.html"] {
        ensure!(out.join(file).exists(), "the search wrote no {file}");
    }
    let text = std::fs::read_to_string(out.join("report.json")).context("report.json")?;
    let report: serde_json::Value = serde_json::from_str(&text).context("report.json")?;
    let parts = report["extra"]["parts"].clone();
    for (part, name) in expected {
        let recorded = &parts[part];
        let named = recorded == name
            || recorded
                .as_array()
                .is_some_and(|a| a.contains(&(*name).into()));
        ensure!(named, "report.json names the {part} {recorded}, not {name}");
    }
    Ok(parts)
}

/// Prints each elite's cell and throughput; returns the best correct throughput.
pub fn print_elites(archive: &impl Archive, space: &DescriptorSpace) -> Option<f64> {
    let mut best = None::<f64>;
    for elite in archive.elites() {
        let levels: Vec<&str> = (elite.descriptor.coords.iter().zip(&space.dimensions))
            .map(|(c, d)| d.levels[*c].as_str())
            .collect();
        let gflops = (elite.evaluation.gflops).filter(|_| elite.evaluation.status.is_correct());
        println!(
            "  local {:>3}, outputs {:>4}: {:>8} {}  {}",
            levels[0],
            levels[1],
            gflops.map_or_else(|| "-".to_owned(), |g| format!("{g:.1}")),
            elite.evaluation.status,
            elite.effective_params()
        );
        if let Some(g) = gflops {
            best = Some(best.map_or(g, |b: f64| b.max(g)));
        }
    }
    best
}

/// An observer: prints every new best as it happens.
pub fn print_new_best(r: &EvaluationReport<'_>) -> Result<(), BoxError> {
    let speedup = r.evaluation.and_then(|e| e.speedup).unwrap_or(0.0);
    let (id, by) = (r.candidate.id, &r.candidate.origin.mutator);
    println!("new best: {id} {speedup:.2}x by {by}");
    Ok(())
}
