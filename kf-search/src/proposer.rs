//! How the shipped search proposes each step's children ([`ShippedScheduler`]; `--scheduler
//! mix|bandit`): one mutator whose parents the archive selects, or emitters picked by a
//! bandit. Either becomes a [`kf_core::emitter::Scheduler`].

use kf_core::emitter::SchedulerPolicy;

/// How the shipped search picks each step's parent and mutator: a value to give
/// [`crate::SearchBuilder::scheduler`].
///
/// ```
/// use kf_search::ShippedScheduler;
///
/// assert_eq!(ShippedScheduler::default(), ShippedScheduler::bandit());
/// assert_eq!(ShippedScheduler::named("mix").unwrap(), ShippedScheduler::mix());
/// let e = ShippedScheduler::named("ucb").unwrap_err();
/// assert!(e.to_string().contains("bandit, mix"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ShippedScheduler {
    /// The bandit's policy; `None`: the fixed mix.
    bandit: Option<SchedulerPolicy>,
}

impl ShippedScheduler {
    /// Emitters (structural moves from the frontier and from the archive's choice, parameter
    /// moves from the fittest and from the archive's choice) picked by a discounted-UCB bandit
    /// (kf-core's default policy: exploration 0.5, discount 0.99) credited with new cells,
    /// improved elites and QD-score gained per device-second: the shipped search's, as
    /// measured best (see `examples/qd_tasks.rs`).
    pub fn bandit() -> Self {
        Self::bandit_with(SchedulerPolicy::default())
    }

    /// [`bandit`](Self::bandit) under another policy.
    pub fn bandit_with(policy: SchedulerPolicy) -> Self {
        ShippedScheduler {
            bandit: Some(policy),
        }
    }

    /// One fixed-weight mix of the mutators (structural 3, parameter moves 1), parents from
    /// the archive's 70/20/10 exploit/explore/random selection.
    pub fn mix() -> Self {
        ShippedScheduler { bandit: None }
    }

    /// The scheduler a command line names: `bandit` or `mix`.
    pub fn named(name: &str) -> Result<Self, UnknownScheduler> {
        match name {
            "bandit" => Ok(Self::bandit()),
            "mix" => Ok(Self::mix()),
            other => Err(UnknownScheduler(other.to_owned())),
        }
    }

    /// The name on the command line: `bandit` or `mix`.
    pub fn name(&self) -> &'static str {
        if self.bandit.is_some() {
            "bandit"
        } else {
            "mix"
        }
    }

    /// The bandit's policy; `None` for the fixed mix.
    pub fn policy(&self) -> Option<&SchedulerPolicy> {
        self.bandit.as_ref()
    }
}

impl Default for ShippedScheduler {
    /// [`ShippedScheduler::bandit`].
    fn default() -> Self {
        Self::bandit()
    }
}

/// A scheduler name that is neither `bandit` nor `mix`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduler `{0}`; the schedulers are: bandit, mix")]
pub struct UnknownScheduler(pub String);
