//! The scheduler: which emitter runs each step, learned from archive improvement.

use std::sync::{Mutex, MutexGuard};

use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};

use super::emitters::{ArchiveView, Emitter, ParentChoice, SelectionEmitter};
use crate::compose::BoxMutator;
use crate::error::CoreError;
use crate::evaluation::Evaluation;
use crate::traits::archive::{Archive, Elite, InsertOutcome};
use crate::traits::mutator::{Mutator, Needs};

/// Device time charged to a child whose evaluation reports none (a compile error, say), so that
/// a rate per device-second stays finite.
const MIN_DEVICE_SECONDS: f64 = 1e-6;

/// How the scheduler picks an emitter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum SchedulerPolicy {
    /// Fixed weights, one per emitter (drawn from the run's random stream): no learning, the
    /// behaviour of a fixed-weight mutator mix.
    Fixed {
        /// Relative weights (positive, finite).
        weights: Vec<f64>,
    },
    /// Discounted UCB1: every emitter once, then the highest
    /// `mean reward + exploration · sqrt(ln N / n)` over discounted counts, so that an emitter
    /// whose moves stopped paying loses its lead (quality-diversity rewards are not
    /// stationary: a frontier emitter pays early, an elite emitter late). Ties go to the
    /// first emitter.
    Ucb {
        /// The exploration constant.
        exploration: f64,
        /// Each credit multiplies every emitter's counts by this (in `(0, 1]`; 1 is plain UCB1).
        discount: f64,
    },
}

impl Default for SchedulerPolicy {
    fn default() -> Self {
        SchedulerPolicy::Ucb {
            exploration: 0.5,
            discount: 0.99,
        }
    }
}

/// What one child did for the archive, as the engine credits it to the child's emitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmitterCredit {
    /// The archive's answer; `None` for a child that could not be judged (or a step that
    /// proposed none).
    pub outcome: Option<InsertOutcome>,
    /// QD-score after minus before the child's insertion.
    pub qd_gain: f64,
    /// Device time the child's evaluation took ([`device_seconds`]).
    pub device_seconds: f64,
    /// Whether there was a child (false for a step that proposed none).
    pub child: bool,
}

impl EmitterCredit {
    /// A step or child that gave the archive nothing at no device cost.
    pub const NOTHING: EmitterCredit = EmitterCredit {
        outcome: None,
        qd_gain: 0.0,
        device_seconds: 0.0,
        child: false,
    };
}

/// The device time of an evaluation: its timed samples (the baseline's are the evaluator's
/// overhead, the same for every emitter), or its median time per trial when it kept no
/// samples; 0 when it never ran.
pub fn device_seconds(evaluation: &Evaluation) -> f64 {
    if !evaluation.samples.is_empty() {
        return evaluation.samples.iter().filter(|s| s.is_finite()).sum();
    }
    evaluation
        .timing
        .as_ref()
        .map_or(0.0, |t| t.median_s * f64::from(t.trials.max(1)))
}

/// One emitter's record in a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmitterStats {
    /// The emitter's name.
    pub name: String,
    /// Steps it was chosen for.
    pub steps: u64,
    /// Children of its steps that were judged or failed.
    pub children: u64,
    /// Children that filled a new cell.
    pub new_cells: u64,
    /// Children that improved an elite.
    pub improved: u64,
    /// QD-score its children added.
    pub qd_gain: f64,
    /// Device time its children took.
    pub device_seconds: f64,
    /// Discounted number of credits (what the bandit counts).
    pub weight: f64,
    /// Discounted sum of rewards.
    pub reward: f64,
}

impl EmitterStats {
    /// Discounted mean reward (0 before any credit).
    pub fn mean_reward(&self) -> f64 {
        if self.weight > 0.0 {
            self.reward / self.weight
        } else {
            0.0
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct State {
    arms: Vec<EmitterStats>,
    /// QD-score gained and device time over all credited children: the reference rate a
    /// child's rate is compared with.
    total_gain: f64,
    total_device_seconds: f64,
}

/// Picks the emitter of each step and learns from what its children did.
///
/// A reward lies in `[0, 1]`: half for the event (1 for a new cell, ½ for an improved elite),
/// half for the QD-score gained per device-second, as `r / (r + r̄)` against the run's mean
/// rate `r̄` so far (unit-free: a fast kernel's microseconds and a slow one's seconds weigh
/// alike). See [`Emitter`] for an example.
///
/// A single mutator is a scheduler too ([`Scheduler::single`], or `From` any [`Mutator`]): one
/// emitter whose parents the archive selects, which is what
/// [`Engine::new`](crate::Engine::new) makes of a mutator.
pub struct Scheduler {
    emitters: Vec<Box<dyn Emitter>>,
    policy: SchedulerPolicy,
    /// Made from one mutator: its steps name no emitter, and it draws nothing from the run's
    /// random stream to choose one.
    single: bool,
    state: Mutex<State>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field(
                "emitters",
                &self.emitters.iter().map(|e| e.name()).collect::<Vec<_>>(),
            )
            .field("policy", &self.policy)
            .field("single", &self.single)
            .finish()
    }
}

impl Scheduler {
    /// A scheduler over `emitters` with `policy`; refuses no emitters, emitters with the same
    /// name (records name them), fixed weights that do not match the emitters or are not
    /// positive, and UCB constants out of range.
    pub fn new(
        emitters: Vec<Box<dyn Emitter>>,
        policy: SchedulerPolicy,
    ) -> Result<Self, CoreError> {
        if emitters.is_empty() {
            return Err(CoreError::InvalidConfig(
                "a scheduler needs at least one emitter".into(),
            ));
        }
        for (i, e) in emitters.iter().enumerate() {
            if emitters[..i].iter().any(|o| o.name() == e.name()) {
                return Err(CoreError::InvalidConfig(format!(
                    "two emitters are named `{}`",
                    e.name()
                )));
            }
        }
        match &policy {
            SchedulerPolicy::Fixed { weights } => {
                if weights.len() != emitters.len()
                    || weights.iter().any(|w| !(w.is_finite() && *w > 0.0))
                {
                    return Err(CoreError::InvalidConfig(format!(
                        "fixed weights {weights:?} must be {} positive numbers, one per emitter",
                        emitters.len()
                    )));
                }
            }
            SchedulerPolicy::Ucb {
                exploration,
                discount,
            } => {
                let usable = exploration.is_finite()
                    && *exploration >= 0.0
                    && *discount > 0.0
                    && *discount <= 1.0;
                if !usable {
                    return Err(CoreError::InvalidConfig(format!(
                        "UCB needs exploration >= 0 and discount in (0, 1], got {exploration} and {discount}"
                    )));
                }
            }
        }
        let arms = emitters
            .iter()
            .map(|e| EmitterStats {
                name: e.name().to_owned(),
                ..EmitterStats::default()
            })
            .collect();
        Ok(Scheduler {
            emitters,
            policy,
            single: false,
            state: Mutex::new(State {
                arms,
                ..State::default()
            }),
        })
    }

    /// One mutator whose parents the archive selects ([`Archive::select_parent`]): the
    /// scheduler an engine over a plain mutator runs. Its steps record no emitter, its name is
    /// the mutator's, and choosing its one emitter draws nothing from the run's random stream,
    /// so a run is what it was when engines took a mutator directly (and resumes the same run
    /// directories).
    ///
    /// ```
    /// use kf_core::emitter::Scheduler;
    /// use kf_core::testing::SyntheticMutator;
    ///
    /// let scheduler = Scheduler::single(SyntheticMutator::new(0.1));
    /// assert!(scheduler.is_single());
    /// assert_eq!(scheduler.name(), "synthetic-gaussian");
    /// ```
    pub fn single(mutator: impl Mutator + 'static) -> Self {
        let emitter = SelectionEmitter::archive(BoxMutator::new(mutator));
        let arms = vec![EmitterStats {
            name: emitter.name().to_owned(),
            ..EmitterStats::default()
        }];
        Scheduler {
            emitters: vec![Box::new(emitter)],
            policy: SchedulerPolicy::Fixed { weights: vec![1.0] },
            single: true,
            state: Mutex::new(State {
                arms,
                ..State::default()
            }),
        }
    }

    /// Whether this is one mutator ([`Scheduler::single`]) rather than emitters.
    pub fn is_single(&self) -> bool {
        self.single
    }

    /// The name a run directory records for what proposes the children: the mutator's name
    /// for [`Scheduler::single`], else `scheduler:` and the emitters' names.
    pub fn name(&self) -> String {
        if self.single {
            return self.emitters[0].mutator().name().to_owned();
        }
        let names: Vec<&str> = self.emitters.iter().map(|e| e.name()).collect();
        format!("scheduler:{}", names.join(","))
    }

    /// What the emitters' mutators need, together.
    pub fn needs(&self) -> Needs {
        self.emitters
            .iter()
            .fold(Needs::NOTHING, |n, e| n.union(e.mutator().needs()))
    }

    /// A scheduler with the default bandit ([`SchedulerPolicy::default`]).
    pub fn bandit(emitters: Vec<Box<dyn Emitter>>) -> Result<Self, CoreError> {
        Self::new(emitters, SchedulerPolicy::default())
    }

    /// The emitters, in order.
    pub fn emitters(&self) -> &[Box<dyn Emitter>] {
        &self.emitters
    }

    /// The policy.
    pub fn policy(&self) -> &SchedulerPolicy {
        &self.policy
    }

    /// Each emitter's record so far, in emitter order.
    pub fn stats(&self) -> Vec<EmitterStats> {
        self.lock().arms.clone()
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The emitter for the next step.
    pub(super) fn choose_emitter(&self, state: &State, rng: &mut dyn RngCore) -> usize {
        match &self.policy {
            SchedulerPolicy::Fixed { weights } => {
                let total: f64 = weights.iter().sum();
                let mut x = rng.random::<f64>() * total;
                for (i, w) in weights.iter().enumerate() {
                    if x < *w {
                        return i;
                    }
                    x -= w;
                }
                weights.len() - 1
            }
            SchedulerPolicy::Ucb { exploration, .. } => {
                // Never chosen first (credit lags the choice when steps are in flight).
                if let Some(i) = state.arms.iter().position(|a| a.steps == 0) {
                    return i;
                }
                let total: f64 = state.arms.iter().map(|a| a.weight).sum();
                let ln = total.max(1.0).ln();
                let score = |a: &EmitterStats| {
                    if a.weight <= 0.0 {
                        return f64::INFINITY;
                    }
                    a.mean_reward() + exploration * (ln / a.weight).sqrt()
                };
                let mut best = 0;
                for i in 1..state.arms.len() {
                    if score(&state.arms[i]) > score(&state.arms[best]) {
                        best = i;
                    }
                }
                best
            }
        }
    }

    /// Chooses the emitter of a step and its parent; `None` when the archive is empty.
    pub(crate) fn choose<A: Archive>(
        &self,
        archive: &mut A,
        rng: &mut dyn RngCore,
    ) -> Option<(usize, Elite)> {
        if self.single {
            // The archive's choice, with nothing else drawn (see `Scheduler::single`).
            let parent = archive.select_parent(rng)?.clone();
            self.lock().arms[0].steps += 1;
            return Some((0, parent));
        }
        if archive.elites().is_empty() {
            return None;
        }
        let mut state = self.lock();
        let index = self.choose_emitter(&state, rng);
        let choice = {
            let view = ArchiveView {
                space: archive.space(),
                elites: archive.elites(),
                metrics: archive.metrics(),
            };
            match self.emitters[index].parent(&view, rng) {
                ParentChoice::Elite(i) => view.elites.get(i).map(|e| Elite::clone(e)),
                ParentChoice::Archive => None,
            }
        };
        let parent = match choice {
            Some(p) => p,
            None => archive.select_parent(rng)?.clone(),
        };
        state.arms[index].steps += 1;
        Some((index, parent))
    }

    /// The name a step of emitter `index` records: none for [`Scheduler::single`].
    pub(crate) fn recorded_name(&self, index: usize) -> Option<&str> {
        (!self.single).then(|| self.emitters[index].name())
    }

    /// The mutator of emitter `index`.
    pub(crate) fn mutator(&self, index: usize) -> &BoxMutator {
        self.emitters[index].mutator()
    }

    /// Credits emitter `index` with one child (its mutator too, when the child was judged).
    pub(crate) fn credit(&self, index: usize, child: Option<&Elite>, credit: EmitterCredit) {
        if let (Some(elite), Some(outcome)) = (child, credit.outcome.as_ref()) {
            self.emitters[index].mutator().credit(elite, outcome);
        }
        let mut state = self.lock();
        let device = credit.device_seconds.max(0.0);
        let gain = if credit.qd_gain.is_finite() {
            credit.qd_gain.max(0.0)
        } else {
            0.0
        };
        let mean_rate = state.total_gain / state.total_device_seconds.max(MIN_DEVICE_SECONDS);
        let rate = gain / device.max(MIN_DEVICE_SECONDS);
        let rate_reward = if rate <= 0.0 {
            0.0
        } else if mean_rate <= 0.0 {
            1.0
        } else {
            rate / (rate + mean_rate)
        };
        let event = match credit.outcome {
            Some(InsertOutcome::NewCell) => 1.0,
            Some(InsertOutcome::Improved { .. }) => 0.5,
            _ => 0.0,
        };
        let reward = 0.5 * event + 0.5 * rate_reward;
        state.total_gain += gain;
        state.total_device_seconds += device;
        let discount = match self.policy {
            SchedulerPolicy::Ucb { discount, .. } => discount,
            SchedulerPolicy::Fixed { .. } => 1.0,
        };
        for arm in state.arms.iter_mut() {
            arm.weight *= discount;
            arm.reward *= discount;
        }
        let arm = &mut state.arms[index];
        arm.weight += 1.0;
        arm.reward += reward;
        arm.children += u64::from(credit.child);
        arm.new_cells += u64::from(matches!(credit.outcome, Some(InsertOutcome::NewCell)));
        arm.improved += u64::from(matches!(
            credit.outcome,
            Some(InsertOutcome::Improved { .. })
        ));
        arm.qd_gain += gain;
        arm.device_seconds += device;
    }
}

/// Any mutator is a scheduler of one ([`Scheduler::single`]), so that
/// [`Engine::new`](crate::Engine::new) takes either.
impl<M: Mutator + 'static> From<M> for Scheduler {
    fn from(mutator: M) -> Self {
        Scheduler::single(mutator)
    }
}
