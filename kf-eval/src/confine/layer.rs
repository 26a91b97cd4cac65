//! Why one layer of the confinement is missing here.

/// Why one layer of the confinement is not available on this machine (the reason goes into
/// [`super::Confinement::missing`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LayerUnavailable(pub String);
