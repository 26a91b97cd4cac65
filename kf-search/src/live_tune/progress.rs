//! What a live tuning run tells its user while it runs ([`TuneProgress`]), and the terminal's
//! progress bar for it ([`TuneBar`], feature `progress`).

/// Receives a live tuning run's progress. Every method has a default: notes and the resume
/// line go to the log, the rest is ignored.
///
/// ```
/// use kf_search::live_tune::TuneProgress;
///
/// /// Counts the configurations evaluated.
/// #[derive(Default)]
/// struct Count(usize);
///
/// impl TuneProgress for Count {
///     fn evaluated(&mut self, _best: Option<&str>) {
///         self.0 += 1;
///     }
/// }
///
/// let mut count = Count::default();
/// count.evaluated(None);
/// assert_eq!(count.0, 1);
/// ```
pub trait TuneProgress {
    /// Something the user should know before the loop (defaults skipped, a cache file
    /// another run is writing).
    fn note(&mut self, text: &str) {
        tracing::info!("{text}");
    }

    /// The run resumes from configurations an earlier run wrote to the cache file.
    fn resumed(&mut self, text: &str) {
        tracing::info!("{text}");
    }

    /// One configuration was evaluated; `best` describes it when it is the best so far.
    fn evaluated(&mut self, best: Option<&str>) {
        let _ = best;
    }

    /// The tuning loop is over.
    fn finished(&mut self) {}
}

/// No progress reports beyond the log.
impl TuneProgress for () {}

/// The progress bar of `kf tune` on stderr: configurations evaluated out of the budget, the
/// best so far and an ETA; notes are printed on stderr.
#[cfg(feature = "progress")]
#[derive(Debug)]
pub struct TuneBar(indicatif::ProgressBar);

#[cfg(feature = "progress")]
impl TuneBar {
    /// A bar for a run of `budget` configurations.
    pub fn new(budget: usize) -> Self {
        let bar = indicatif::ProgressBar::new(budget as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} configurations · {msg} · ETA {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        TuneBar(bar)
    }
}

#[cfg(feature = "progress")]
impl TuneProgress for TuneBar {
    fn note(&mut self, text: &str) {
        eprintln!("{text}");
    }

    fn resumed(&mut self, text: &str) {
        self.0.println(text);
    }

    fn evaluated(&mut self, best: Option<&str>) {
        if let Some(best) = best {
            self.0.set_message(best.to_owned());
        }
        self.0.inc(1);
    }

    fn finished(&mut self) {
        self.0.finish_and_clear();
    }
}
