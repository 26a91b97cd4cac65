//! How the shipped search proposes each step's children (`--scheduler mix|bandit`): one
//! mutator whose parents the archive selects, or emitters picked by a bandit. Either is a
//! [`kf_core::emitter::Scheduler`].

use std::fmt;
use std::str::FromStr;

use kf_core::emitter::SchedulerPolicy;

/// How the shipped search picks each step's parent and mutator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SchedulerKind {
    /// Emitters (structural moves from the frontier and from the archive's choice,
    /// parameter moves from the fittest and from the archive's choice) picked by a
    /// discounted-UCB bandit credited with new cells, improved elites and QD-score gained per
    /// device-second: the shipped search's, as measured best (see `examples/qd_tasks.rs`).
    #[default]
    Bandit,
    /// One fixed-weight mix of the mutators (structural 3, parameter moves 1), parents from
    /// the archive's 70/20/10 exploit/explore/random selection.
    Mix,
}

impl SchedulerKind {
    /// Every kind.
    pub const ALL: [SchedulerKind; 2] = [SchedulerKind::Bandit, SchedulerKind::Mix];

    /// The name on the command line and in run directories.
    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::Bandit => "bandit",
            SchedulerKind::Mix => "mix",
        }
    }

    /// The bandit's policy (the kf-core default: exploration 0.5, discount 0.99).
    pub fn policy() -> SchedulerPolicy {
        SchedulerPolicy::default()
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheduler name that is not one of [`SchedulerKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheduler `{0}`; the schedulers are: bandit, mix")]
pub struct UnknownScheduler(pub String);

impl FromStr for SchedulerKind {
    type Err = UnknownScheduler;

    /// ```
    /// use kf_search::SchedulerKind;
    ///
    /// assert_eq!("mix".parse::<SchedulerKind>(), Ok(SchedulerKind::Mix));
    /// assert!("ucb".parse::<SchedulerKind>().unwrap_err().to_string().contains("bandit, mix"));
    /// ```
    fn from_str(s: &str) -> Result<Self, UnknownScheduler> {
        SchedulerKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownScheduler(s.to_owned()))
    }
}

impl serde::Serialize for SchedulerKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}
