//! `kf search --llm`: the flags and the mutator are `kernelfoundry::search::llm`'s.

pub(crate) use kernelfoundry::cli::LlmArgs;
pub(crate) use kernelfoundry::search::llm::stats_line;
