//! The search as a library user builds it (issue 46): `kf-search` with `default-features =
//! false, features = ["opencl"]` runs a whole search (run directory, `report.json`, the run
//! explorer; no pictures, no progress bar), and the library installs no logging subscriber and
//! no signal handler: the program stops a search through the `StopHandle` it gives
//! `SearchBuilder::stop_on` (`kf` and the examples trigger it on Ctrl-C), and the same search
//! run again resumes from the run directory.
//!
//! Run it both ways: `cargo test -p kf-search --test embedded_search` (default features: the
//! pictures are drawn) and with `--no-default-features --features opencl` (they are not).
//! Skips (printing `SKIPPED: …`) without an OpenCL runtime unless `KF_REQUIRE_OPENCL=1`.

use std::path::Path;

use kf_core::{BoxError, EvaluationReport, Observe, ObserverMode, StopHandle, StopReason};
use kf_eval::task::parse_sizes;
use kf_search::report::names;
use kf_search::{Search, SearchOutcome};

mod common;
use common::{run_folder_or_skip, short_search};

kf_eval::worker_test_entry!(|spec: &kf_eval::BackendSpec| {
    kf_eval::BackendFactory::open(&kf_search::backends::OpenClFactory, spec)
        .map_err(|e| e.to_string())
});

/// Stops the run after `after` evaluations, as a Ctrl-C handler would.
struct StopAfter {
    after: u64,
    stop: StopHandle,
}

impl Observe for StopAfter {
    fn observe_evaluation(&mut self, r: &EvaluationReport<'_>) -> Result<(), BoxError> {
        if r.evaluations >= self.after {
            self.stop.stop();
        }
        Ok(())
    }
}

fn search(out: &Path, stop: Option<StopHandle>) -> SearchOutcome {
    let sizes = parse_sizes("ROWS=64,COLS=256").unwrap();
    let mut config = short_search("softmax", sizes, out, 8);
    config.reference = false;
    config.final_rounds = 0;
    config.in_flight = 1;
    let mut builder = Search::builder().config(config);
    if let Some(stop) = stop {
        builder = builder
            .observer(
                StopAfter {
                    after: 3,
                    stop: stop.clone(),
                },
                ObserverMode::Always,
            )
            .stop_on(stop);
    }
    builder.build().unwrap().run().unwrap()
}

#[test]
fn a_stopped_search_resumes_and_reports_without_the_presentation_features() {
    let Some((_tmp, out)) = run_folder_or_skip("softmax") else {
        return;
    };

    let stopped = search(&out, Some(StopHandle::new()));
    assert_eq!(stopped.summary.stop_reason, StopReason::Stopped);
    assert!(
        stopped.summary.evaluations >= 3 && stopped.summary.evaluations < 8,
        "{}",
        stopped.summary_text()
    );

    let resumed = search(&out, None);
    assert_eq!(
        resumed.summary.stop_reason,
        StopReason::Evaluations,
        "{}",
        resumed.summary_text()
    );
    assert_eq!(resumed.summary.evaluations, 8);
    assert!(
        resumed.summary.replayed_steps > 0,
        "the second run started afresh instead of resuming: {}",
        resumed.summary_text()
    );

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join(names::REPORT_JSON)).unwrap()).unwrap();
    assert_eq!(report["evaluations"], 8);
    assert!(out.join("report.html").is_file(), "no run explorer page");
    // The pictures are the `report` feature's; without it they are not drawn.
    for picture in [names::HEATMAP, names::CURVE] {
        assert_eq!(
            out.join(picture).is_file(),
            cfg!(feature = "report"),
            "{picture}"
        );
    }
    // The library emitted its events into no subscriber of its own making.
    assert!(
        !tracing::dispatcher::has_been_set(),
        "the search installed a global tracing subscriber"
    );
}
