//! The capability traits embedders implement. Each is small and carries its own error type.

pub mod archive;
pub mod backend;
pub mod classifier;
pub mod evaluator;
pub mod mutator;
pub mod param_space;
