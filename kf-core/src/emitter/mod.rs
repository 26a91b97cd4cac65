//! Emitters and their scheduler: parent selection and the choice of mutator, taken out of the
//! archive (pyribs' split). An archive stores elites and answers queries; an [`Emitter`]
//! decides which elite to mutate next and with which mutator; a [`Scheduler`] picks the
//! emitter of each step with a bandit credited by what its children did for the archive (a new
//! cell, an improved elite, QD-score gained per device-second), or by fixed weights.
//!
//! Run an engine over a scheduler with [`Engine::new`](crate::Engine::new) (a plain mutator is
//! a scheduler of one emitter, [`Scheduler::single`]). The
//! scheduler's state is a function of the judged children in step order, so a seeded run is
//! reproducible, and a resumed run rebuilds it exactly by replaying the recorded steps (each
//! [`StepRecord`](crate::StepRecord) names its emitter, and a resume that would choose another
//! is refused as a mismatch).

mod emitters;
mod scheduler;

pub use emitters::{ArchiveView, Emitter, ParentChoice, Selection, SelectionEmitter};
pub use scheduler::{device_seconds, EmitterCredit, EmitterStats, Scheduler, SchedulerPolicy};

#[cfg(test)]
pub(crate) mod tests;
