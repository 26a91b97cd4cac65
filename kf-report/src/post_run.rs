//! Post-run hooks: what happens to a search once its engine has stopped.
//!
//! A search hands each [`PostRun`] hook, in order, the assembled run ([`FinishedRun`]). The
//! shipped ones ([`shipped`]) are the shipped search's end: [`SelectFinal`] re-times the
//! fastest elites and names the best kernel, [`CompareReference`] measures the reference
//! library beside it, [`WriteReport`] writes the table, `report.json`, the best kernel's files
//! and the pictures, and [`WriteExplorer`] writes the explorer page (`report.html`) beside
//! them. Hooks of one's own run after them (`kf_search::SearchBuilder::post_run`), and see the
//! report as written ([`FinishedRun::output`]).

use std::path::Path;

use kf_core::{DescriptorSpace, DeviceFacts, Elite, RunSummary, Work};
use kf_eval::task::Sizes;
use kf_eval::IsolatedEvaluator;

use crate::final_selection::{self, RetimeError};
use crate::reference::{self, ReferenceError};
use crate::report::{Report, ReportOutput};
use crate::Error;

/// Something to do once a search has stopped: write a file, measure, publish.
///
/// # Example
///
/// A hook that writes the number of elites into the output folder:
///
/// ```
/// use kf_report::{FinishedRun, PostRun};
///
/// struct CountElites;
///
/// impl PostRun for CountElites {
///     fn name(&self) -> &str {
///         "count-elites"
///     }
///     fn after_run(&mut self, run: &mut FinishedRun<'_>) -> Result<(), kf_report::Error> {
///         std::fs::write(run.out.join("elites.txt"), run.elites.len().to_string())
///             .map_err(|e| kf_report::Error::Hook { hook: self.name().into(), source: e.into() })
///     }
/// }
/// # let _: Box<dyn PostRun> = Box::new(CountElites);
/// ```
pub trait PostRun: Send {
    /// A stable name, for logs and errors.
    fn name(&self) -> &str;

    /// Runs after the search, with the run as the hooks before this one left it.
    ///
    /// # Errors
    /// An error ends the search with it (the run directory is complete by then: running the
    /// search again replays it and runs the hooks anew).
    fn after_run(&mut self, run: &mut FinishedRun<'_>) -> Result<(), Error>;
}

/// Evaluates an elite again with the run's own evaluator (the full protocol: fresh inputs
/// checked, then timed), for the final selection and the reference comparison.
pub trait Retime {
    /// The elite's median seconds now, or why it is not a correct, timed kernel now.
    ///
    /// # Errors
    /// [`RetimeError`]: the evaluation failed, or the kernel is not correct or not timed.
    fn retime(&self, elite: &Elite) -> Result<f64, RetimeError>;
}

impl Retime for IsolatedEvaluator {
    fn retime(&self, elite: &Elite) -> Result<f64, RetimeError> {
        let evaluation =
            self.evaluate_blocking(&elite.candidate.source, &elite.effective_params())?;
        if !evaluation.status.is_correct() {
            return Err(RetimeError::NotCorrect {
                status: evaluation.status,
                diagnostics: evaluation.diagnostics,
            });
        }
        evaluation
            .timing
            .map(|t| t.median_s)
            .ok_or(RetimeError::NotTimed)
    }
}

/// A finished search, as its post-run hooks see it.
pub struct FinishedRun<'a> {
    /// The task's name (a built-in task, or the task file's name).
    pub task: &'a str,
    /// Whether the task came from a task file (the reference library knows built-in tasks
    /// only).
    pub task_file: bool,
    /// The problem sizes.
    pub sizes: &'a Sizes,
    /// The work of one kernel run at those sizes (GFLOP/s and GB/s from seconds).
    pub work: &'a Work,
    /// The output folder (the report's files; the run directory is its `run` folder).
    pub out: &'a Path,
    /// Whether the search evaluated on distributed workers (nothing is measured on this
    /// machine then).
    pub distributed: bool,
    /// The device the search evaluated on.
    pub device: &'a DeviceFacts,
    /// The behaviour space.
    pub space: &'a DescriptorSpace,
    /// The engine's summary.
    pub summary: &'a RunSummary,
    /// The archive's elites.
    pub elites: &'a [&'a Elite],
    /// The run's own evaluator, still up, for re-timing on this machine; `None` for a
    /// distributed search or another evaluator.
    pub retimer: Option<&'a dyn Retime>,
    /// The report being assembled; [`WriteReport`] writes it.
    pub report: Report<'a>,
    /// The report as written, once a hook has written it.
    pub output: Option<ReportOutput>,
}

impl<'a> FinishedRun<'a> {
    /// Changes the report being assembled with one of its builder methods.
    pub fn amend_report(&mut self, change: impl FnOnce(Report<'a>) -> Report<'a>) {
        let placeholder = Report::new(self.space, self.summary, std::iter::empty());
        let report = std::mem::replace(&mut self.report, placeholder);
        self.report = change(report);
    }

    /// Runs `hooks` in order on this run, stopping at the first error.
    ///
    /// # Errors
    /// The first hook's error.
    pub fn run_hooks(&mut self, hooks: &mut [Box<dyn PostRun>]) -> Result<(), Error> {
        for hook in hooks {
            tracing::debug!("post-run hook {}", hook.name());
            hook.after_run(self)?;
        }
        Ok(())
    }

    /// The report as written: by a hook, or now (quietly, when no hook wrote it).
    ///
    /// # Errors
    /// [`Error::Report`] when it has to be written now and cannot be.
    pub fn into_output(self) -> Result<ReportOutput, Error> {
        match self.output {
            Some(output) => Ok(output),
            None => Ok(self.report.write(self.out)?),
        }
    }
}

/// The shipped search's hooks, in order: [`SelectFinal`] with `final_rounds`,
/// [`CompareReference`] when `reference`, [`WriteReport`], [`WriteExplorer`].
pub fn shipped(final_rounds: u32, reference: bool) -> Vec<Box<dyn PostRun>> {
    vec![
        Box::new(SelectFinal {
            rounds: final_rounds,
        }),
        Box::new(CompareReference { enabled: reference }),
        Box::new(WriteReport),
        Box::new(WriteExplorer),
    ]
}

/// The final selection ([`final_selection`]): the fastest elites re-timed by the run's own
/// evaluator in `rounds` alternating rounds; the report names the one with the smallest
/// median as the best kernel. Nothing without a re-timer, with 0 rounds, or with fewer than
/// two contenders.
#[derive(Debug, Clone, Copy)]
pub struct SelectFinal {
    /// Rounds (0: the fastest by its single measurement in the search is the best).
    pub rounds: u32,
}

impl PostRun for SelectFinal {
    fn name(&self) -> &str {
        "final-selection"
    }

    fn after_run(&mut self, run: &mut FinishedRun<'_>) -> Result<(), Error> {
        let Some(retimer) = run.retimer.filter(|_| self.rounds > 0) else {
            return Ok(());
        };
        let contenders =
            final_selection::contenders(run.elites.iter().copied(), final_selection::CONTENDERS);
        if contenders.len() < 2 {
            return Ok(());
        }
        let selection = final_selection::select(&contenders, self.rounds, run.work, |e| {
            retimer.retime(e).inspect_err(|why| {
                tracing::warn!("final selection: {} is out: {why}", e.candidate.id)
            })
        });
        tracing::info!("{}", selection.describe());
        run.amend_report(|r| r.final_selection(selection));
        Ok(())
    }
}

/// The reference library at the task's size and the best kernel, measured side by side
/// ([`reference::measure_side_by_side`]: the kernel re-timed by the run's own evaluator, then
/// the library, twice); when there is no reference to measure, the report says why.
#[derive(Debug, Clone, Copy)]
pub struct CompareReference {
    /// Whether to measure (`false`: the report has no reference line).
    pub enabled: bool,
}

impl PostRun for CompareReference {
    fn name(&self) -> &str {
        "reference"
    }

    fn after_run(&mut self, run: &mut FinishedRun<'_>) -> Result<(), Error> {
        if !self.enabled {
            return Ok(());
        }
        let measured = if run.distributed {
            Err(ReferenceError::Distributed)
        } else if run.task_file {
            Err(ReferenceError::TaskFile)
        } else {
            let best = run.report.best();
            let retimer = run.retimer;
            let retime = || {
                retimer?
                    .retime(best?)
                    .map_err(|e| {
                        tracing::warn!("re-timing the best kernel beside the reference: {e}")
                    })
                    .ok()
            };
            let measured = reference::measure_side_by_side(
                run.task,
                run.sizes,
                run.work,
                reference::SIDE_BY_SIDE_ROUNDS,
                retime,
            );
            if let Err(why) = &measured {
                tracing::warn!("reference library: {why}");
            }
            measured
        };
        run.amend_report(|r| r.reference(measured.map_err(|e| e.to_string())));
        Ok(())
    }
}

/// Writes the report into the output folder and prints its table and headline lines
/// ([`Report::write_and_print`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteReport;

impl PostRun for WriteReport {
    fn name(&self) -> &str {
        "report"
    }

    fn after_run(&mut self, run: &mut FinishedRun<'_>) -> Result<(), Error> {
        run.output = Some(run.report.write_and_print(run.out)?);
        Ok(())
    }
}

/// Writes the run explorer page (`report.html`) next to `report.json` and prints its path; a
/// page that cannot be written is a warning, never a lost run.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteExplorer;

impl PostRun for WriteExplorer {
    fn name(&self) -> &str {
        "explorer"
    }

    fn after_run(&mut self, run: &mut FinishedRun<'_>) -> Result<(), Error> {
        match crate::explorer::write_report_with(
            run.out,
            Some(run.space.dimensions.clone()),
            crate::explorer::DEFAULT_INLINE_LIMIT,
        ) {
            Ok(path) => {
                use std::io::Write;
                let _ = writeln!(std::io::stdout(), "Explorer: {}", path.display());
            }
            Err(e) => tracing::warn!("could not write the run explorer page: {e}"),
        }
        Ok(())
    }
}
