//! The harnesses of the parsers of files and model replies: kernel manifests, their
//! expressions, LLM replies (the reply text: code blocks, edits, a drafted manifest), Kernel
//! Tuner caches, T1 tuning spaces, run directories and task files. Each module's `run` is one
//! target (its documentation says what an input is).

pub mod expr;
pub mod kt_cache;
pub mod llm_reply;
pub mod manifest;
pub mod rundir;
pub mod t1;
pub mod taskfile;
