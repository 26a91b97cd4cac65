//! The LLM mutator's command-line flags ([`LlmArgs`], `kf search --llm …`), which give
//! [`kf_search::llm::LlmOptions`].

use kf_search::llm::{LlmError, LlmOptions};

/// Options of the LLM mutator as command-line flags (`kf search --llm`), for programs'
/// own parsers (`#[command(flatten)]`).
#[derive(clap::Args, Debug, Clone)]
pub struct LlmArgs {
    /// Add the LLM mutator to the mix (the offline mutators stay). The endpoint comes from
    /// --llm-base-url, else KF_LLM_BASE_URL, else the local server in .runtime/llm-server.json
    /// (scripts/llm-server.sh start), else OpenAI. The API key only from KF_LLM_API_KEY or
    /// OPENAI_API_KEY; every other KF_LLM_* variable applies too (budget, prices, retries).
    #[arg(long)]
    pub llm: bool,
    /// OpenAI-compatible base URL, such as http://127.0.0.1:18181/v1.
    #[arg(long, value_name = "URL", requires = "llm")]
    pub llm_base_url: Option<String>,
    /// Model name, or `a*3,b*1` for several with weights.
    #[arg(long, value_name = "MODEL", requires = "llm")]
    pub llm_model: Option<String>,
    /// Reply token limit (default: KF_LLM_MAX_TOKENS, else 2048; 256 for the local server).
    #[arg(long, value_name = "N", requires = "llm")]
    pub llm_max_tokens: Option<u64>,
    /// Weight of the LLM mutator in the mix (the offline mutators keep theirs).
    #[arg(long, default_value_t = 1.0, requires = "llm")]
    pub llm_weight: f64,
    /// Short prompts, for small local models (the default with the local server).
    #[arg(long, requires = "llm")]
    pub llm_compact: bool,
    /// Replay the answers recorded in `<out>/llm/` instead of asking a server.
    #[arg(long, requires = "llm")]
    pub llm_replay: bool,
    /// Ask through the queue instead of a server: the answer workers of this endpoint
    /// (`kf worker --role answer --endpoint NAME`, next to the model server) answer, with one
    /// budget and concurrency limit for every search that asks them. Needs the servers
    /// (--nats, --db or their defaults).
    #[arg(
        long,
        value_name = "ENDPOINT",
        requires = "llm",
        conflicts_with = "llm_replay"
    )]
    pub llm_queue: Option<String>,
}

impl LlmArgs {
    /// The options these flags give; `None` without `--llm`.
    pub fn options(&self) -> Option<LlmOptions> {
        self.llm.then(|| self.flags())
    }

    /// The options of the flags, whether or not `--llm` was given.
    fn flags(&self) -> LlmOptions {
        LlmOptions {
            base_url: self.llm_base_url.clone(),
            model: self.llm_model.clone(),
            max_tokens: self.llm_max_tokens,
            weight: self.llm_weight,
            compact: self.llm_compact,
            replay: self.llm_replay,
            queue: self.llm_queue.clone(),
        }
    }

    /// The arguments of an answer worker (`kf worker --role answer`): its model server
    /// and model ([`LlmOptions::for_worker`]).
    pub fn for_worker(base_url: Option<String>, model: Option<String>) -> Self {
        LlmArgs {
            llm: true,
            llm_base_url: base_url,
            llm_model: model,
            llm_max_tokens: None,
            llm_weight: 1.0,
            llm_compact: false,
            llm_replay: false,
            llm_queue: None,
        }
    }

    /// The settings from the flags, the `KF_LLM_*` variables and the local server
    /// ([`LlmOptions::settings`]).
    pub fn resolved_settings(&self) -> Result<(kf_prompt::LlmSettings, bool), LlmError> {
        self.flags().settings()
    }

    /// The LLM mutator, if `--llm` was given, recording in `out/llm/` (or replaying);
    /// with `--llm-queue`, asking through `queue`'s servers as the run it names. Prints
    /// the [announcement](kf_search::llm::SearchLlm::announcement) on stderr, as `kf search` does.
    #[cfg(feature = "dist")]
    pub fn mutator(
        &self,
        out: &std::path::Path,
        queue: Option<(&kf_dist::DistConfig, &str)>,
    ) -> Result<Option<kf_prompt::LlmMutator>, LlmError> {
        let Some(options) = self.options() else {
            return Ok(None);
        };
        let llm = match queue {
            Some((dist, run)) => options.build_queued(out, dist, run)?,
            None => options.build(out)?,
        };
        eprintln!("{}", llm.announcement);
        Ok(Some(llm.mutator))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_give_the_options() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            llm: LlmArgs,
        }
        let parse = |a: &[&str]| Cli::parse_from(std::iter::once("kf").chain(a.iter().copied()));
        assert_eq!(parse(&[]).llm.options(), None);
        let o = parse(&[
            "--llm",
            "--llm-model",
            "m",
            "--llm-weight",
            "2",
            "--llm-compact",
        ])
        .llm
        .options()
        .unwrap();
        assert_eq!(o.model.as_deref(), Some("m"));
        assert_eq!(o.weight, 2.0);
        assert!(o.compact && !o.replay);
        assert!(Cli::try_parse_from(["kf", "--llm-model", "m"]).is_err());
    }
}
