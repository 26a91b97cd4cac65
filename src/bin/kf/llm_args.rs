//! `kf search --llm`: the LLM mutator in the search's mix, with the endpoint from the command
//! line, the `KF_LLM_*` environment, or the local server `scripts/llm-server.sh start` runs.
//!
//! The prompt carries the task as the evaluator knows it: the task file's description, its
//! kernel interface (signature, argument order, buffers with dtype/shape/access, scalars) and
//! the sizes, through [`kernelfoundry::core::Task::interface`]; nothing is parsed back out of
//! text.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use kf_prompt::{LlmMutator, LlmSettings, OpenAiClient, RenderLimits, WhenExhausted};

/// Where `scripts/llm-server.sh start` records the local server (relative to the working
/// folder).
const LOCAL_SERVER_INFO: &str = ".runtime/llm-server.json";

/// Options of the LLM mutator (`kf search --llm`).
#[derive(Args, Debug, Clone)]
pub(crate) struct LlmArgs {
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

/// The local server `scripts/llm-server.sh` wrote down, if any.
#[derive(Debug, Clone, PartialEq)]
struct LocalServer {
    base_url: String,
    model: Option<String>,
}

fn local_server(info: &Path) -> Option<LocalServer> {
    let text = std::fs::read_to_string(info).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(LocalServer {
        base_url: v.get("base_url")?.as_str()?.to_owned(),
        model: v.get("model").and_then(|m| m.as_str()).map(str::to_owned),
    })
}

impl LlmArgs {
    /// The settings: the flags over the `KF_LLM_*` variables (`env`), over the local server
    /// named in `info`.
    fn settings(
        &self,
        env: impl Fn(&str) -> Option<String>,
        info: &Path,
    ) -> anyhow::Result<(LlmSettings, bool)> {
        let set = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        let local = if set(&self.llm_base_url).is_none() && set(&env("KF_LLM_BASE_URL")).is_none() {
            local_server(info)
        } else {
            None
        };
        let is_local = local.is_some();
        let get = |name: &str| -> Option<String> {
            match name {
                "KF_LLM_BASE_URL" => set(&self.llm_base_url)
                    .or_else(|| set(&env(name)))
                    .or_else(|| local.as_ref().map(|l| l.base_url.clone())),
                "KF_LLM_MODEL" => set(&self.llm_model)
                    .or_else(|| set(&env(name)))
                    .or_else(|| local.as_ref().and_then(|l| l.model.clone())),
                "KF_LLM_MAX_TOKENS" => self
                    .llm_max_tokens
                    .map(|n| n.to_string())
                    .or_else(|| set(&env(name)))
                    .or_else(|| is_local.then(|| "256".to_owned())),
                _ => env(name),
            }
        };
        let settings =
            LlmSettings::from_vars(get).context("the LLM settings (--llm-*, KF_LLM_*)")?;
        Ok((settings, is_local))
    }

    /// The arguments of an answer worker (`kf worker --role answer`): its model server and
    /// model; everything else from the `KF_LLM_*` variables and the local server.
    pub(crate) fn for_worker(base_url: Option<String>, model: Option<String>) -> Self {
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

    /// The settings from the flags, the `KF_LLM_*` variables and the local server.
    pub(crate) fn resolved_settings(&self) -> anyhow::Result<(LlmSettings, bool)> {
        self.settings(|n| std::env::var(n).ok(), Path::new(LOCAL_SERVER_INFO))
    }

    /// The LLM mutator recording its exchanges in `out/llm/` (or replaying them), if `--llm`
    /// was given; with `--llm-queue`, asking through the queue with `queue`'s settings, as
    /// run `run`.
    pub(crate) fn mutator(
        &self,
        out: &Path,
        queue: Option<(&kernelfoundry::dist::DistConfig, &str)>,
    ) -> anyhow::Result<Option<LlmMutator>> {
        if !self.llm {
            return Ok(None);
        }
        if !(self.llm_weight.is_finite() && self.llm_weight > 0.0) {
            anyhow::bail!("--llm-weight must be a positive number");
        }
        let (settings, is_local) = self.resolved_settings()?;
        let client: Box<dyn kernelfoundry::prompt::LlmClient> = match (&self.llm_queue, queue) {
            (Some(endpoint), Some((dist, run))) => {
                let asker = kernelfoundry::dist::Asker::connect(dist.clone(), run, endpoint)
                    .context("connecting to the queue for --llm-queue")?;
                Box::new(kernelfoundry::dist::QueuedLlm::new(asker, endpoint.clone()))
            }
            (Some(_), None) => anyhow::bail!("--llm-queue needs the servers (--distributed)"),
            (None, _) => {
                Box::new(OpenAiClient::new(settings.openai.clone()).context("the LLM client")?)
            }
        };
        let compact = self.llm_compact || is_local;
        let builder = LlmMutator::builder(client)
            .settings(&settings)
            .configure(|c| {
                // When the LLM budget is spent, the offline mutators carry on.
                c.when_exhausted = WhenExhausted::NoChildren;
                if compact {
                    c.limits = RenderLimits::compact();
                }
            });
        let dir: PathBuf = out.join("llm");
        let builder = if self.llm_replay {
            builder.replay_from(&dir)
        } else {
            builder.record_in(&dir)
        };
        let llm = builder.build().context("the LLM mutator")?;
        eprintln!(
            "LLM: {} ({}){}",
            llm.gateway().describe(),
            settings
                .models
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if self.llm_replay {
                ", replaying recorded answers"
            } else {
                ""
            }
        );
        Ok(Some(llm))
    }
}

/// One line of what the LLM did in a search: requests, tokens, cost.
pub(crate) fn stats_line(llm: &LlmMutator) -> String {
    let s = llm.stats();
    format!(
        "LLM: {} requests ({} answers replayed, {} failed, {} refused by the budget), {} tokens, \
         ${:.4}",
        s.live_requests,
        s.recorded_answers,
        s.failures,
        s.budget_refusals,
        s.tokens(),
        s.cost_usd
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use kernelfoundry::core::{
        ArchiveHints, Candidate, Descriptor, Elite, Evaluation, Fitness, Language, ParamValues,
        Status,
    };
    use kernelfoundry::eval::tasks::KernelTask;
    use kf_prompt::{render_prompt, PromptComponents, PromptInput, PromptTemplates, ReplyFormat};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        llm: LlmArgs,
    }

    fn args(a: &[&str]) -> LlmArgs {
        Cli::parse_from(std::iter::once("kf").chain(a.iter().copied())).llm
    }

    #[test]
    fn the_endpoint_comes_from_flags_then_env_then_the_local_server() {
        let tmp = tempfile::tempdir().unwrap();
        let info = tmp.path().join("llm-server.json");
        std::fs::write(
            &info,
            r#"{"base_url": "http://127.0.0.1:18181/v1", "model": "SmolLM2-135M-Instruct", "pid": 1}"#,
        )
        .unwrap();
        let no_env = |_: &str| None;
        let (s, local) = args(&["--llm"]).settings(no_env, &info).unwrap();
        assert!(local);
        assert_eq!(s.openai.base_url, "http://127.0.0.1:18181/v1");
        assert_eq!(s.models[0].name, "SmolLM2-135M-Instruct");
        assert_eq!(s.max_reply_tokens, 256);

        let env = |n: &str| (n == "KF_LLM_BASE_URL").then(|| "http://env:1/v1".to_owned());
        let (s, local) = args(&["--llm", "--llm-model", "m"])
            .settings(env, &info)
            .unwrap();
        assert!(!local);
        assert_eq!(s.openai.base_url, "http://env:1/v1");
        assert_eq!(s.models[0].name, "m");

        let (s, _) = args(&[
            "--llm",
            "--llm-base-url",
            "http://flag:2/v1",
            "--llm-max-tokens",
            "99",
        ])
        .settings(env, &info)
        .unwrap();
        assert_eq!(s.openai.base_url, "http://flag:2/v1");
        assert_eq!(s.max_reply_tokens, 99);

        let bad = |n: &str| (n == "KF_LLM_TEMPERATURE").then(|| "hot".to_owned());
        let e = args(&["--llm"]).settings(bad, &info).unwrap_err();
        assert!(format!("{e:#}").contains("KF_LLM_TEMPERATURE"), "{e:#}");
        assert!(args(&[]).mutator(tmp.path(), None).unwrap().is_none());
    }

    /// The prompt for a task file carries its description, every buffer (dtype, shape,
    /// access), the scalars, the argument order and the sizes, from the typed task.
    #[test]
    fn the_prompt_for_a_task_file_carries_its_interface() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/examples/scaled_swish");
        let file = kernelfoundry::eval::taskfile::TaskFile::load(&dir.join("scaled_swish.toml"))
            .expect("the example task file loads");
        let sizes = kernelfoundry::eval::tasks::parse_sizes("ROWS=64,COLS=32").unwrap();
        let task = kernelfoundry::eval::taskfile::FileTask::with_references(
            std::sync::Arc::new(file),
            &sizes,
            std::sync::Arc::new(kernelfoundry::eval::tasks::builtin_references()),
        )
        .expect("the example task builds");
        let described = task.describe();
        let baseline = task.baseline(Language::OpenCl).expect("a baseline");
        let candidate = Candidate::seed(baseline, ParamValues::new());
        let evaluation = Evaluation::failed(Status::WrongValues, "");
        let parent = Elite {
            fitness: Fitness::of(&evaluation),
            candidate,
            evaluation,
            descriptor: Descriptor::new(vec![0, 0, 0], "test"),
        };
        let hints = ArchiveHints::default();
        let input = PromptInput {
            task: &described,
            device: None,
            parent: &parent,
            inspirations: &[],
            hints: &hints,
            attempts: &[],
            lessons: &[],
        };
        let messages = render_prompt(
            &PromptComponents::builtin(),
            &PromptTemplates::builtin(),
            &RenderLimits::compact(),
            ReplyFormat::FullRewrite,
            &input,
        );
        let user = &messages[1].content;
        assert!(
            user.contains("y[r][c] = x[r][c] * sigmoid(alpha * x[r][c]) + bias[c]"),
            "{user}"
        );
        assert!(
            user.contains("Argument order: ROWS, COLS, alpha, x, bias, y"),
            "{user}"
        );
        assert!(
            user.contains("- f32 x[ROWS][COLS] (currently [64, 32]): input"),
            "{user}"
        );
        assert!(
            user.contains("- f32 bias[COLS] (currently [32]): input"),
            "{user}"
        );
        assert!(
            user.contains("- f32 y[ROWS][COLS] (currently [64, 32]): output"),
            "{user}"
        );
        assert!(user.contains("Scalars: f32 alpha = 1.5"), "{user}");
        assert!(
            user.contains(
                "(const int ROWS, const int COLS, const float alpha, __global const float* x, \
                 __global const float* bias, __global float* y)"
            ),
            "{user}"
        );
        assert!(user.contains("Problem sizes: ROWS=64, COLS=32."), "{user}");
    }
}
