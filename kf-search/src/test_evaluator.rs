//! An evaluator of the crate's own tests, in place of the shipped one (as a user's simulator
//! would be): it judges every kernel correct, faster the shorter its source, and counts what
//! it evaluates. One type, so that the tests of the builder and of the run share it.

use kf_core::{Candidate, Evaluation, TimingStats};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::{EvaluatorFactory, EvaluatorInput, SearchError};

/// Judges every kernel correct, faster the shorter its source (and, where asked, the larger
/// its first parameter, so that tuning has something to find): deterministic, so that a
/// resumed run can be compared with an uninterrupted one.
#[derive(Clone)]
pub(crate) struct SourceLengthEvaluator {
    /// How many kernels it has evaluated, shared by its clones.
    pub(crate) evaluations: Arc<AtomicU64>,
    /// Its [`EvaluatorFactory::name`], which a run records among its parts.
    name: &'static str,
    /// Whether a larger first parameter makes a kernel faster.
    faster_by_first_parameter: bool,
}

impl SourceLengthEvaluator {
    /// Timed by the source's length alone, named `by-length`.
    pub(crate) fn by_length() -> Self {
        Self::named("by-length", false)
    }

    /// Timed by the source's length, divided by the first parameter, named `deterministic`.
    pub(crate) fn deterministic() -> Self {
        Self::named("deterministic", true)
    }

    /// A fresh evaluator (no evaluations counted yet).
    fn named(name: &'static str, faster_by_first_parameter: bool) -> Self {
        SourceLengthEvaluator {
            evaluations: Arc::default(),
            name,
            faster_by_first_parameter,
        }
    }

    /// How many kernels it (and its clones) have evaluated.
    pub(crate) fn count(&self) -> u64 {
        self.evaluations.load(Ordering::Relaxed)
    }

    /// The seconds `c` takes: a microsecond for each byte of source, divided by its first
    /// parameter (at least 1) where that is asked.
    fn seconds(&self, c: &Candidate) -> f64 {
        let by_length = c.source.text.len() as f64 * 1e-6;
        if !self.faster_by_first_parameter {
            return by_length;
        }
        let first = c.params.iter().next().and_then(|(_, v)| v.as_i64());
        by_length / first.unwrap_or(1).max(1) as f64
    }
}

#[kf_core::async_trait]
impl kf_core::Evaluator for SourceLengthEvaluator {
    type Error = std::convert::Infallible;
    async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
        self.evaluations.fetch_add(1, Ordering::Relaxed);
        let seconds = self.seconds(c);
        let timing = TimingStats::from_samples(&[seconds]).expect("one sample");
        let mut e = Evaluation::correct(timing, None);
        e.gflops = Some(1.0 / seconds);
        e.params = c.params.clone();
        Ok(e)
    }
}

impl EvaluatorFactory for SourceLengthEvaluator {
    type Evaluator = SourceLengthEvaluator;
    fn name(&self) -> String {
        self.name.into()
    }
    fn make(
        self,
        input: &EvaluatorInput<'_>,
    ) -> Result<(SourceLengthEvaluator, kf_core::DeviceFacts), SearchError> {
        Ok((self, input.device()?))
    }
}
