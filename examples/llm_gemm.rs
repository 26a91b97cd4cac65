//! The SGEMM search with an LLM in the mix: MAP-Elites over the 64-cell kernel space, each
//! mutation drawn by weight from the LLM mutator (prompts that co-evolve with the kernels) and
//! the offline mutators (structural transformations of kernel templates, parameter moves).
//! Every kernel is judged by the cheat-proof evaluator in worker processes. At the end it
//! prints the LLM's token use and cost, and how each prompt variant fared.
//!
//! Any OpenAI-compatible endpoint, configured by the environment (see
//! `kernelfoundry::prompt::LlmSettings::from_vars` for every variable):
//!
//! ```sh
//! scripts/setup.sh
//! # OpenAI
//! KF_LLM_API_KEY=sk-… KF_LLM_MODEL=gpt-4o-mini KF_LLM_PRICE_IN=0.15 KF_LLM_PRICE_OUT=0.6 \
//!   KF_LLM_BUDGET_USD=0.50 cargo run --release --example llm_gemm
//! # a local llama.cpp server (scripts/llm-server.sh install && scripts/llm-server.sh start)
//! KF_LLM_BASE_URL=http://127.0.0.1:18181/v1 KF_LLM_MODEL=SmolLM2-135M-Instruct KF_LLM_MAX_TOKENS=256 \
//!   cargo run --release --example llm_gemm -- --size 256 --evaluations 12 --compact
//! # the same run again from its records, with no server
//! cargo run --release --example llm_gemm -- --size 256 --evaluations 12 --compact --replay
//! ```
//!
//! Every exchange is recorded in `<out>/llm/`; interrupt with Ctrl-C and run the same command
//! again to resume without paying twice for answers already received.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use kernelfoundry::core::{Language, Status, StopHandle};
use kernelfoundry::eval::task::{builtin_task, parse_sizes_or_number};
use kernelfoundry::mutate::{MixMutator, ParamMutator, StructuralMutator, TemplateLibrary};
use kernelfoundry::prompt::{LlmMutator, LlmSettings, OpenAiClient, RenderLimits, WhenExhausted};
use kernelfoundry::search::{logging, seeds_for, Search, SearchConfig};

#[derive(Parser)]
#[command(about = "Evolve fast SGEMM kernels with MAP-Elites, an LLM and offline mutators")]
struct Args {
    /// Problem size: one number for M=N=K, or M=…,N=…,K=….
    #[arg(long, default_value = "512")]
    size: String,
    /// Candidates evaluated at most (seeds included).
    #[arg(long, default_value_t = 40)]
    evaluations: u64,
    /// Wall-clock limit, seconds.
    #[arg(long, default_value_t = 900)]
    time: u64,
    /// Weight of the LLM mutator in the mix.
    #[arg(long, default_value_t = 1.0)]
    llm_weight: f64,
    /// Weight of each offline mutator (structural, parameter) in the mix.
    #[arg(long, default_value_t = 1.0)]
    offline_weight: f64,
    /// Configurations tuned per new kernel (1 = no tuning).
    #[arg(long, default_value_t = 3)]
    tune_budget: usize,
    /// Steps per meta-prompt epoch (0: no prompt evolution).
    #[arg(long, default_value_t = 6)]
    meta_every: u64,
    /// Short prompts, for small local models.
    #[arg(long)]
    compact: bool,
    /// Replay the LLM's answers from `<out>/llm` instead of asking a server.
    #[arg(long)]
    replay: bool,
    /// Run seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output folder.
    #[arg(long, default_value = "runs/llm_gemm")]
    out: PathBuf,
    /// No progress bar (log lines instead).
    #[arg(long)]
    no_progress: bool,
    /// More log output (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> anyhow::Result<()> {
    // Evaluation workers are this program, re-executed: serve first if we are one.
    kernelfoundry::init();
    let args = Args::parse();
    logging::init(args.verbose);
    let sizes = parse_sizes_or_number(&args.size, |n| format!("M={n},N={n},K={n}"))
        .context("--size is a number or M=…,N=…,K=…")?;

    // The LLM: endpoint, models, prices, reply length and budget from KF_LLM_* variables.
    let settings = LlmSettings::from_env().context("reading the KF_LLM_* settings")?;
    let client = OpenAiClient::new(settings.openai.clone())?;
    let llm_dir = args.out.join("llm");
    let mut builder = LlmMutator::builder(client)
        .settings(&settings)
        .configure(|c| {
            c.meta.every_steps = args.meta_every;
            // When the budget is spent, the mix carries on with the offline mutators.
            c.when_exhausted = WhenExhausted::NoChildren;
            if args.compact {
                c.limits = RenderLimits::compact();
            }
        });
    builder = if args.replay {
        builder.replay_from(&llm_dir)
    } else {
        builder.record_in(&llm_dir)
    };
    let llm = builder.build()?;
    println!(
        "LLM: {} ({}), budget {:?}{}",
        llm.gateway().describe(),
        settings
            .models
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        settings.budget,
        if args.replay {
            ", replaying recorded answers"
        } else {
            ""
        }
    );

    let mutator = MixMutator::new()
        .with(llm.clone(), args.llm_weight)
        .with(StructuralMutator::builtin()?, args.offline_weight)
        .with(ParamMutator::new(), args.offline_weight);

    let mut config = SearchConfig::new("gemm", sizes.clone());
    config.evaluations = args.evaluations;
    config.wall = Some(Duration::from_secs(args.time));
    config.tune_budget = args.tune_budget;
    config.seed = args.seed;
    config.out = args.out.clone();
    config.progress = !args.no_progress;

    // Seeds: the naive task baseline and the base variant of every GEMM template.
    let library = TemplateLibrary::builtin()?;
    let mut extra = Vec::new();
    for template in library.for_task("gemm") {
        let variant = template.instantiate(template.base())?;
        let params = variant.manifest.default_params();
        extra.push((variant.source, params));
    }
    let task = builtin_task("gemm", &sizes)?;
    let seeds = seeds_for(task.as_ref(), Language::OpenCl, extra);

    let stop = StopHandle::new();
    let on_ctrl_c = stop.clone();
    ctrlc::set_handler(move || on_ctrl_c.stop()).context("installing the Ctrl-C handler")?;

    let outcome = Search::builder()
        .config(config)
        .mutator(mutator)
        .seeds(seeds)
        .stop_on(stop)
        .build()?
        .run()?;
    println!(
        "
{}",
        outcome.summary_text()
    );

    // What the LLM cost and did.
    let st = llm.stats();
    println!(
        "LLM: {} requests sent ({} attempts, {} failed, {} refused by the budget), {} answers from the records; \
         {} prompt + {} completion tokens = {} tokens, ${:.4}; {:.1} s waiting for replies",
        st.live_requests,
        st.attempts,
        st.failures,
        st.budget_refusals,
        st.recorded_answers,
        st.prompt_tokens,
        st.completion_tokens,
        st.tokens(),
        st.cost_usd,
        st.latency_ms as f64 / 1e3
    );
    let spent = llm.gateway().budget().spent();
    println!(
        "LLM spend over the whole run (resumed parts included): {} requests, {} tokens, ${:.4}",
        spent.requests, spent.tokens, spent.cost_usd
    );
    let credits = llm.credits();
    let count = |s: Status| credits.iter().filter(|c| c.status == s).count();
    println!(
        "LLM children: {} judged: {} correct, {} wrong values, {} wrong shape, {} runtime errors or timeouts, {} compile errors, {} extraction errors",
        credits.len(),
        count(Status::Correct),
        count(Status::WrongValues),
        count(Status::WrongShape),
        count(Status::RuntimeError) + count(Status::Timeout),
        count(Status::CompileError),
        count(Status::ExtractionError),
    );
    for v in llm.variants() {
        println!(
            "  prompt variant {:<4} {:<32} {} children, {} new cells, {} improvements, mean reward {:.2}",
            v.variant.id,
            match (&v.variant.changed, &v.variant.strategy) {
                (Some(c), Some(s)) => format!("({s} `{c}` of {})", v.variant.parent.as_deref().unwrap_or("?")),
                _ => "(initial)".to_owned(),
            },
            v.stats.pulls,
            v.new_cells,
            v.improvements,
            v.stats.mean()
        );
    }
    println!(
        "LLM exchanges: {}",
        llm_dir
            .join(kernelfoundry::prompt::EXCHANGES_FILE)
            .display()
    );
    println!("report: {}", args.out.join("report.json").display());
    Ok(())
}
