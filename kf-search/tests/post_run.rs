//! Post-run hooks of one's own on the shipped search (issue 46): a hook added with
//! `SearchBuilder::post_run` runs after the shipped ones (the report is written by then) while
//! the run's own evaluation workers are still up, so it can re-time a kernel with them; a hook's
//! failure ends the search with `SearchError::PostRun`, naming the hook, after the shipped
//! report was written. The second search replays the first one's run directory (no new
//! evaluations). Skips (printing `SKIPPED: …`) without an OpenCL runtime unless
//! `KF_REQUIRE_OPENCL=1`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use kf_eval::task::parse_sizes;
use kf_search::{FinishedRun, PostRun, Search, SearchConfig, SearchError};

mod common;
use common::{run_folder_or_skip, short_search};

kf_eval::worker_test_entry!(|spec: &kf_eval::BackendSpec| {
    kf_eval::BackendFactory::open(&kf_search::backends::OpenClFactory, spec)
        .map_err(|e| e.to_string())
});

/// What the hook saw of the finished run.
#[derive(Debug, Default)]
struct Seen {
    report_json_written: bool,
    elites: usize,
    best_retimed_s: Option<f64>,
}

/// Records what it sees, and re-times the best kernel with the run's own evaluator.
struct Inspect(Arc<Mutex<Seen>>);

impl PostRun for Inspect {
    fn name(&self) -> &str {
        "inspect"
    }

    fn after_run(&mut self, run: &mut FinishedRun<'_>) -> Result<(), kf_report::Error> {
        let mut seen = self.0.lock().unwrap();
        seen.report_json_written = run.output.as_ref().is_some_and(|o| o.report_json.is_file());
        seen.elites = run.elites.len();
        if let (Some(retimer), Some(best)) = (run.retimer, run.report.best()) {
            seen.best_retimed_s = Some(retimer.retime(best)?);
        }
        Ok(())
    }
}

/// Fails, as a hook of one's own may.
struct Fails;

impl PostRun for Fails {
    fn name(&self) -> &str {
        "fails"
    }

    fn after_run(&mut self, _: &mut FinishedRun<'_>) -> Result<(), kf_report::Error> {
        Err(kf_report::Error::Hook {
            hook: self.name().into(),
            source: "the publishing server is down".into(),
        })
    }
}

fn config(out: &Path) -> SearchConfig {
    let sizes = parse_sizes("ROWS=64,COLS=256").unwrap();
    let mut config = short_search("softmax", sizes, out, 5);
    config.reference = false;
    config.final_rounds = 0;
    config.progress = false;
    config
}

#[test]
fn hooks_of_ones_own_run_after_the_report_with_the_workers_up() {
    let Some((_tmp, out)) = run_folder_or_skip("softmax") else {
        return;
    };

    let seen = Arc::new(Mutex::new(Seen::default()));
    let outcome = Search::builder()
        .config(config(&out))
        .post_run(Inspect(Arc::clone(&seen)))
        .build()
        .unwrap()
        .run()
        .unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.report_json_written, "the shipped report comes first");
    assert!(seen.elites >= 1);
    assert_eq!(
        seen.elites,
        kf_core::Archive::elites(&outcome.archive).len()
    );
    let retimed = seen
        .best_retimed_s
        .expect("a correct kernel, re-timed by the hook");
    assert!(retimed.is_finite() && retimed > 0.0, "{retimed}");
    assert!(out.join("report.html").is_file());

    // The same search again replays the run directory; a failing hook ends it, by name.
    std::fs::remove_file(out.join("report.json")).unwrap();
    let failed = Search::builder()
        .config(config(&out))
        .post_run(Fails)
        .build()
        .unwrap()
        .run();
    match failed {
        Err(e @ SearchError::PostRun(_)) => {
            assert!(e.to_string().contains("`fails`"), "{e}")
        }
        other => panic!("expected a post-run hook's error, got {other:?}"),
    }
    assert!(
        out.join("report.json").is_file(),
        "the shipped hooks ran first"
    );
}
