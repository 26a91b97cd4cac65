//! The LLM mutator as `kf search --llm` puts it in the search's mix (feature `llm`): the
//! endpoint from the options, else the `KF_LLM_*` environment, else the local server
//! `scripts/llm-server.sh start` runs; its exchanges recorded in `<out>/llm/` (or replayed
//! from there); with feature `dist`, its questions asked through the queue instead.
//!
//! An embedder gets the same mutator from [`LlmOptions::build`] and hands it to the builder
//! beside the offline mutators:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use kf_search::llm::LlmOptions;
//!
//! let out = std::path::Path::new("runs/gemm-llm");
//! let llm = LlmOptions::default().build(out)?;
//! eprintln!("{}", llm.announcement);
//! let search = kf_search::Search::builder()
//!     .task("gemm")
//!     .out(out)
//!     .also_mutator(llm.mutator.clone(), llm.weight)
//!     .build()?;
//! search.run()?;
//! println!("{}", kf_search::llm::stats_line(&llm.mutator));
//! # Ok(())
//! # }
//! ```
//!
//! The prompt carries the task as the evaluator knows it (its description, kernel interface
//! and sizes, through `Task::interface`); nothing is parsed back out of text.

use std::path::{Path, PathBuf};

use kf_prompt::{LlmClient, LlmMutator, LlmSettings, OpenAiClient, RenderLimits, WhenExhausted};

/// Where `scripts/llm-server.sh start` records the local server (relative to the working
/// folder).
pub const LOCAL_SERVER_INFO: &str = ".runtime/llm-server.json";

/// Why the LLM mutator could not be assembled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The weight in the mix is not a positive number.
    #[error("--llm-weight must be a positive number")]
    BadWeight,
    /// A setting (option or `KF_LLM_*` variable) is malformed.
    #[error("the LLM settings (--llm-*, KF_LLM_*)")]
    Settings(#[source] kf_prompt::PromptError),
    /// The OpenAI-compatible client could not be made.
    #[error("the LLM client")]
    Client(#[source] kf_prompt::PromptError),
    /// The mutator (its records or replay folder) could not be made.
    #[error("the LLM mutator")]
    Mutator(#[source] kf_prompt::PromptError),
    /// Asking through the queue needs the distributed servers.
    #[error("--llm-queue needs the servers (--distributed)")]
    QueueNeedsServers,
    /// The queue could not be reached.
    #[cfg(feature = "dist")]
    #[error("connecting to the queue for --llm-queue")]
    Queue(#[source] kf_dist::DistError),
}

/// What the LLM in a search is: where it is asked, how much it weighs in the mix, how its
/// prompts are rendered. `Default` is `kf search --llm` with no other LLM flag.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmOptions {
    /// OpenAI-compatible base URL (over `KF_LLM_BASE_URL` and the local server).
    pub base_url: Option<String>,
    /// Model name, or `a*3,b*1` for several with weights (over `KF_LLM_MODEL`).
    pub model: Option<String>,
    /// Reply token limit (over `KF_LLM_MAX_TOKENS`; 256 for the local server, else 2048).
    pub max_tokens: Option<u64>,
    /// Weight of the LLM mutator in the mix (the offline mutators keep theirs).
    pub weight: f64,
    /// Short prompts, for small local models (always on with the local server).
    pub compact: bool,
    /// Replay the answers recorded in `<out>/llm/` instead of asking a server.
    pub replay: bool,
    /// Ask the answer workers of this endpoint through the queue instead of a server.
    pub queue: Option<String>,
}

impl Default for LlmOptions {
    fn default() -> Self {
        LlmOptions {
            base_url: None,
            model: None,
            max_tokens: None,
            weight: 1.0,
            compact: false,
            replay: false,
            queue: None,
        }
    }
}

/// The LLM mutator of a search, ready for [`crate::SearchBuilder::also_mutator`].
#[derive(Debug)]
pub struct SearchLlm {
    /// The mutator (recording in, or replaying from, `<out>/llm/`).
    pub mutator: LlmMutator,
    /// Its weight in the mix.
    pub weight: f64,
    /// One line saying where it asks and which models: `LLM: <endpoint> (<models>)`.
    pub announcement: String,
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

impl LlmOptions {
    /// The options of an answer worker (`kf worker --role answer`): its model server and
    /// model; everything else from the `KF_LLM_*` variables and the local server.
    pub fn for_worker(base_url: Option<String>, model: Option<String>) -> Self {
        LlmOptions {
            base_url,
            model,
            ..LlmOptions::default()
        }
    }

    /// The settings: these options over the variables `env` gives (`KF_LLM_*`), over the local
    /// server recorded in `info`; and whether the local server is the endpoint.
    pub fn settings_from(
        &self,
        env: impl Fn(&str) -> Option<String>,
        info: &Path,
    ) -> Result<(LlmSettings, bool), LlmError> {
        let set = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
        let local = if set(&self.base_url).is_none() && set(&env("KF_LLM_BASE_URL")).is_none() {
            local_server(info)
        } else {
            None
        };
        let is_local = local.is_some();
        let get = |name: &str| -> Option<String> {
            match name {
                "KF_LLM_BASE_URL" => set(&self.base_url)
                    .or_else(|| set(&env(name)))
                    .or_else(|| local.as_ref().map(|l| l.base_url.clone())),
                "KF_LLM_MODEL" => set(&self.model)
                    .or_else(|| set(&env(name)))
                    .or_else(|| local.as_ref().and_then(|l| l.model.clone())),
                "KF_LLM_MAX_TOKENS" => self
                    .max_tokens
                    .map(|n| n.to_string())
                    .or_else(|| set(&env(name)))
                    .or_else(|| is_local.then(|| "256".to_owned())),
                _ => env(name),
            }
        };
        let settings = LlmSettings::from_vars(get).map_err(LlmError::Settings)?;
        Ok((settings, is_local))
    }

    /// The settings from these options, the process's `KF_LLM_*` variables and the local
    /// server ([`LOCAL_SERVER_INFO`]); and whether the local server is the endpoint.
    pub fn settings(&self) -> Result<(LlmSettings, bool), LlmError> {
        self.settings_from(|n| std::env::var(n).ok(), Path::new(LOCAL_SERVER_INFO))
    }

    /// The mutator asking a server (or replaying `out/llm/`), recording in `out/llm/`.
    /// Options naming a queue need [`LlmOptions::build_queued`].
    pub fn build(&self, out: &Path) -> Result<SearchLlm, LlmError> {
        self.assemble(out, |settings| {
            if self.queue.is_some() {
                return Err(LlmError::QueueNeedsServers);
            }
            OpenAiClient::new(settings.openai.clone())
                .map(|c| Box::new(c) as Box<dyn LlmClient>)
                .map_err(LlmError::Client)
        })
    }

    /// As [`LlmOptions::build`], but with [`LlmOptions::queue`] set the questions go through
    /// the queue of `dist`, as a run of their own named `run`.
    #[cfg(feature = "dist")]
    pub fn build_queued(
        &self,
        out: &Path,
        dist: &kf_dist::DistConfig,
        run: &str,
    ) -> Result<SearchLlm, LlmError> {
        let Some(endpoint) = &self.queue else {
            return self.build(out);
        };
        self.assemble(out, |_| {
            let asker =
                kf_dist::Asker::connect(dist.clone(), run, endpoint).map_err(LlmError::Queue)?;
            Ok(Box::new(kf_dist::QueuedLlm::new(asker, endpoint.clone())) as Box<dyn LlmClient>)
        })
    }

    fn assemble(
        &self,
        out: &Path,
        client: impl FnOnce(&LlmSettings) -> Result<Box<dyn LlmClient>, LlmError>,
    ) -> Result<SearchLlm, LlmError> {
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(LlmError::BadWeight);
        }
        let (settings, is_local) = self.settings()?;
        let client = client(&settings)?;
        let compact = self.compact || is_local;
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
        let builder = if self.replay {
            builder.replay_from(&dir)
        } else {
            builder.record_in(&dir)
        };
        let mutator = builder.build().map_err(LlmError::Mutator)?;
        let models: Vec<&str> = settings.models.iter().map(|m| m.name.as_str()).collect();
        let announcement = format!(
            "LLM: {} ({}){}",
            mutator.gateway().describe(),
            models.join(", "),
            if self.replay {
                ", replaying recorded answers"
            } else {
                ""
            }
        );
        Ok(SearchLlm {
            mutator,
            weight: self.weight,
            announcement,
        })
    }
}

/// One line of what the LLM did in a search: requests, tokens, cost.
pub fn stats_line(llm: &LlmMutator) -> String {
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
    use kf_core::{
        ArchiveHints, Candidate, Descriptor, Elite, Evaluation, Fitness, Language, ParamValues,
        Status,
    };
    use kf_eval::task::KernelTask;
    use kf_prompt::{render_prompt, PromptComponents, PromptInput, PromptTemplates, ReplyFormat};

    fn options(f: impl FnOnce(&mut LlmOptions)) -> LlmOptions {
        let mut o = LlmOptions::default();
        f(&mut o);
        o
    }

    #[test]
    fn the_endpoint_comes_from_options_then_env_then_the_local_server() {
        let tmp = tempfile::tempdir().unwrap();
        let info = tmp.path().join("llm-server.json");
        std::fs::write(
            &info,
            r#"{"base_url": "http://127.0.0.1:18181/v1", "model": "SmolLM2-135M-Instruct", "pid": 1}"#,
        )
        .unwrap();
        let no_env = |_: &str| None;
        let (s, local) = LlmOptions::default().settings_from(no_env, &info).unwrap();
        assert!(local);
        assert_eq!(s.openai.base_url, "http://127.0.0.1:18181/v1");
        assert_eq!(s.models[0].name, "SmolLM2-135M-Instruct");
        assert_eq!(s.max_reply_tokens, 256);

        let env = |n: &str| (n == "KF_LLM_BASE_URL").then(|| "http://env:1/v1".to_owned());
        let (s, local) = options(|o| o.model = Some("m".into()))
            .settings_from(env, &info)
            .unwrap();
        assert!(!local);
        assert_eq!(s.openai.base_url, "http://env:1/v1");
        assert_eq!(s.models[0].name, "m");

        let (s, _) = options(|o| {
            o.base_url = Some("http://flag:2/v1".into());
            o.max_tokens = Some(99);
        })
        .settings_from(env, &info)
        .unwrap();
        assert_eq!(s.openai.base_url, "http://flag:2/v1");
        assert_eq!(s.max_reply_tokens, 99);

        let bad = |n: &str| (n == "KF_LLM_TEMPERATURE").then(|| "hot".to_owned());
        let e = LlmOptions::default().settings_from(bad, &info).unwrap_err();
        let chain = format!("{e}: {}", std::error::Error::source(&e).unwrap());
        assert!(chain.contains("KF_LLM_TEMPERATURE"), "{chain}");

        let weightless = options(|o| o.weight = 0.0).build(tmp.path()).unwrap_err();
        assert!(matches!(weightless, LlmError::BadWeight), "{weightless}");
        let queued = options(|o| o.queue = Some("e".into()))
            .build(tmp.path())
            .unwrap_err();
        assert!(matches!(queued, LlmError::QueueNeedsServers), "{queued}");
    }

    /// The prompt for a task file carries its description, every buffer (dtype, shape,
    /// access), the scalars, the argument order and the sizes, from the typed task.
    #[test]
    fn the_prompt_for_a_task_file_carries_its_interface() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/examples/scaled_swish");
        let file = kf_eval::task::file::TaskFile::load(&dir.join("scaled_swish.toml"))
            .expect("the example task file loads");
        let sizes = kf_eval::task::parse_sizes("ROWS=64,COLS=32").unwrap();
        let task = kf_eval::task::file::FileTask::with_references(
            std::sync::Arc::new(file),
            &sizes,
            std::sync::Arc::new(kf_eval::task::builtin_references()),
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
        for expected in [
            "y[r][c] = x[r][c] * sigmoid(alpha * x[r][c]) + bias[c]",
            "Argument order: ROWS, COLS, alpha, x, bias, y",
            "- f32 x[ROWS][COLS] (currently [64, 32]): input",
            "- f32 bias[COLS] (currently [32]): input",
            "- f32 y[ROWS][COLS] (currently [64, 32]): output",
            "Scalars: f32 alpha = 1.5",
            "(const int ROWS, const int COLS, const float alpha, __global const float* x, \
             __global const float* bias, __global float* y)",
            "Problem sizes: ROWS=64, COLS=32.",
        ] {
            assert!(user.contains(expected), "{expected} not in {user}");
        }
    }
}
