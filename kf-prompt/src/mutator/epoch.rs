//! What one epoch's meta-call gives the steps that wait for it (the call itself is `meta`).

use std::sync::Arc;

use futures::future::{BoxFuture, Shared};
use kf_core::Usage;

use crate::population::PromptVariant;

/// What one epoch's meta-call made: a new variant or none, and what it cost.
#[derive(Clone)]
pub(super) struct EpochResult {
    pub(super) variant: Option<Arc<PromptVariant>>,
    pub(super) usage: Usage,
}

impl EpochResult {
    /// No new variant this epoch (the meta-call was not made, failed, or gave nothing usable).
    pub(super) fn nothing(usage: Usage) -> Self {
        EpochResult {
            variant: None,
            usage,
        }
    }
}

/// An epoch's meta-call, shared by every step that waits for it.
pub(super) type EpochFuture = Shared<BoxFuture<'static, EpochResult>>;
