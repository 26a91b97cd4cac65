//! Does meta-prompt evolution help? Three arms under one fixed budget of LLM calls:
//!
//! * **fixed**: one prompt (the first variant), no meta-rewrites;
//! * **bandit**: several initial prompt variants, chosen per request by the mutator's bandit on
//!   archive credit, no meta-rewrites;
//! * **co-evolution**: the same variants plus a meta-call every `--meta-every` steps that
//!   rewrites one component of the best variant (meta-calls spend calls from the same budget).
//!
//! Every arm runs the project's real `LlmMutator` (prompt population, UCB bandit, meta-calls,
//! credit), the real engine and the real MAP-Elites archive; only the model and the evaluator
//! differ between the two modes.
//!
//! ```sh
//! # The simulation (no GPU, no server, a few seconds): 24 seeds, 80 calls per run.
//! cargo run --release --example llm_ablation -- --simulate
//! cargo run --release --example llm_ablation -- --simulate --seeds 40 --calls 120
//! # A real endpoint on the real SGEMM task (OpenCL), a hard budget per arm:
//! KF_LLM_BASE_URL=https://api.openai.com/v1 KF_LLM_API_KEY=sk-… KF_LLM_MODEL=gpt-4o-mini \
//!   KF_LLM_PRICES=gpt-4o-mini=0.15/0.6 KF_LLM_BUDGET_USD=1.00 \
//!   cargo run --release --example llm_ablation -- --endpoint --calls 40 --seeds 3
//! ```
//!
//! ## How far the simulation says anything about real models
//!
//! In `--simulate` mode the model is `kf_prompt::simulate::SimulatedLlm`: its chance of writing
//! an improving, correct child is a logistic function of which advice lines the prompt shows
//! (and whether it shows a pitfalls section), plus noise; its meta-rewrites add or drop one
//! line, picking the most helpful line with a fixed probability. Every one of those numbers is
//! a choice made by hand (`SimModel::default`). So the table shows whether the credit
//! assignment, the bandit and the meta-rewrites *can* find and keep prompt contents that
//! matter, and what the meta-calls cost out of the budget, when prompt contents matter that
//! much. It does not show that real models respond to prompt contents this way, nor by how
//! much, nor that real meta-rewrites are this good: it cannot confirm or refute the seed
//! article's "37 % more efficient" for any real model. `--endpoint` runs the same three arms
//! against a real model and the real evaluator; with a handful of seeds and a small budget its
//! spread is large, so read it with the printed standard deviations.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use kernelfoundry::archive::{EliteArchive, GridConfig};
use kernelfoundry::core::prelude::*;
use kernelfoundry::core::{EngineConfig, StopHandle};
use kernelfoundry::prompt::simulate::{
    parse_marker, sim_seed, sim_variants, SimClassifier, SimEvaluator, SimModel, SimulatedLlm,
};
use kernelfoundry::prompt::{
    async_trait, LlmBudget, LlmMutator, LlmSettings, MetaConfig, ModelSpec, OpenAiClient,
    PromptComponents, WhenExhausted,
};

#[derive(Parser)]
#[command(
    about = "Fixed prompt vs bandit-chosen variants vs meta-prompt co-evolution, at a fixed LLM call budget"
)]
struct Args {
    /// Run the seeded simulation (the default when --endpoint is not given).
    #[arg(long)]
    simulate: bool,
    /// Run against the endpoint of the KF_LLM_* variables on the real SGEMM task.
    #[arg(long, conflicts_with = "simulate")]
    endpoint: bool,
    /// Seeds per arm.
    #[arg(long, default_value_t = 24)]
    seeds: u64,
    /// LLM calls per run (meta-calls included).
    #[arg(long, default_value_t = 80)]
    calls: u64,
    /// Steps per meta-prompt epoch in the co-evolution arm.
    #[arg(long, default_value_t = 8)]
    meta_every: u64,
    /// SGEMM size for --endpoint (M=N=K).
    #[arg(long, default_value_t = 256)]
    size: i64,
    /// Output folder of --endpoint runs.
    #[arg(long, default_value = "runs/llm_ablation")]
    out: std::path::PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arm {
    Fixed,
    Bandit,
    CoEvolution,
}

impl Arm {
    const ALL: [Arm; 3] = [Arm::Fixed, Arm::Bandit, Arm::CoEvolution];

    fn name(self) -> &'static str {
        match self {
            Arm::Fixed => "fixed prompt",
            Arm::Bandit => "bandit, no meta",
            Arm::CoEvolution => "co-evolution",
        }
    }

    fn meta(self, every: u64) -> MetaConfig {
        match self {
            Arm::CoEvolution => MetaConfig {
                every_steps: every,
                lag_steps: 1,
                ..MetaConfig::default()
            },
            _ => MetaConfig {
                lag_steps: 1,
                ..MetaConfig::off()
            },
        }
    }

    fn variants(self, all: &[PromptComponents]) -> Vec<PromptComponents> {
        match self {
            Arm::Fixed => all[..1].to_vec(),
            _ => all.to_vec(),
        }
    }
}

/// One run's results.
#[derive(Debug, Clone, Default)]
struct RunStats {
    /// Best speedup and QD-score after each call (index = calls made − 1).
    best_by_call: Vec<f64>,
    qd_by_call: Vec<f64>,
    best: f64,
    qd: f64,
    meta_calls: u64,
    tokens: u64,
    cost_usd: f64,
    /// Mean hidden success chance of the child prompts in the first and the last third.
    value_first: f64,
    value_last: f64,
    /// Share of child prompts showing a helpful / a harmful line, first and last third.
    helpful: (f64, f64),
    harmful: (f64, f64),
    /// Share of child requests that went to the truly best initial variant.
    best_variant_share: f64,
    /// Spearman correlation of the variants' hidden value with their posterior mean.
    rank_corr: Option<f64>,
    /// Whether a meta-made variant is worth more than every initial one.
    meta_beat_initial: bool,
}

/// Records, after each evaluation, how many LLM calls had been made and the archive-relevant
/// result, so curves can be drawn per call.
struct Recording {
    llm: Arc<SimulatedLlm>,
    log: Arc<Mutex<Vec<CallRecord>>>,
}

/// LLM calls made so far, and the speedup and cell of a correct child (`None` otherwise).
type CallRecord = (usize, Option<(f64, usize)>);

#[async_trait]
impl Evaluator for Recording {
    type Error = std::convert::Infallible;

    async fn evaluate(&self, c: &Candidate) -> Result<Evaluation, Self::Error> {
        let e = SimEvaluator.evaluate(c).await?;
        let placed = (e.status == Status::Correct)
            .then(|| parse_marker(&c.source.text))
            .flatten();
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((self.llm.calls().len(), placed));
        Ok(e)
    }
}

fn simulate_run(arm: Arm, seed: u64, args: &Args) -> anyhow::Result<RunStats> {
    let model = SimModel::default();
    let all = sim_variants(&model);
    let llm = Arc::new(SimulatedLlm::new(model.clone(), seed));
    let variants = arm.variants(&all);
    let mut builder = LlmMutator::builder(Arc::clone(&llm)).components(variants[0].clone());
    for v in &variants[1..] {
        builder = builder.add_variant(v.clone());
    }
    let mutator = builder
        .models(vec![ModelSpec::new("sim").with_prices(0.15, 0.6)])
        .budget(LlmBudget::requests(args.calls))
        .configure(|c| {
            c.meta = arm.meta(args.meta_every);
            c.seed = seed;
            c.max_reply_tokens = 256;
            c.when_exhausted = WhenExhausted::Fail;
        })
        .build()?;
    let classifier = SimClassifier::new(model.cells);
    let archive = EliteArchive::with_config(
        classifier.space().clone(),
        GridConfig::default().with_qd_offset(Fitness::CORRECT_BASE),
    )?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let evaluator = Recording {
        llm: Arc::clone(&llm),
        log: Arc::clone(&log),
    };
    let engine = Engine::new(mutator.clone(), evaluator, classifier, archive)
        .task(Task::new("sim").with_description("A simulated kernel; its speed is its quality."))
        .seeds(vec![sim_seed()])
        .seed(seed)
        // The LLM call budget ends the run; this only bounds it.
        .budget(Budget::evaluations(args.calls * 4 + 10))
        .max_in_flight(1)
        .configure(|c| EngineConfig {
            max_children_per_step: 1,
            ..c
        });
    mutator.stop_on_budget(engine.stop_handle());
    let result = engine.run_blocking()?;

    // Curves per call, from the evaluation log (the archive keeps the best per cell).
    let calls = llm.calls();
    let mut stats = RunStats {
        meta_calls: calls.iter().filter(|c| c.meta).count() as u64,
        ..RunStats::default()
    };
    let mut per_cell = vec![0.0f64; model.cells];
    let mut best_by_call = vec![0.0; args.calls as usize];
    let mut qd_by_call = vec![0.0; args.calls as usize];
    let log = log.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut next = 0usize;
    for call in 0..args.calls as usize {
        while next < log.len() && log[next].0 <= call + 1 {
            if let Some((q, cell)) = log[next].1 {
                let slot = &mut per_cell[cell.min(model.cells - 1)];
                *slot = slot.max(q);
            }
            next += 1;
        }
        best_by_call[call] = per_cell.iter().copied().fold(0.0, f64::max);
        qd_by_call[call] = per_cell.iter().sum();
    }
    stats.best = per_cell.iter().copied().fold(0.0, f64::max);
    stats.qd = per_cell.iter().sum();
    let metrics = &result.summary.metrics;
    let archive_best = metrics
        .best
        .map_or(0.0, |b| b.value() - Fitness::CORRECT_BASE);
    if (archive_best - stats.best).abs() > 1e-6 || (metrics.qd_score - stats.qd).abs() > 1e-6 {
        bail!(
            "the per-call curve disagrees with the archive: best {} vs {archive_best}, QD {} vs {}",
            stats.best,
            stats.qd,
            metrics.qd_score
        );
    }
    stats.best_by_call = best_by_call;
    stats.qd_by_call = qd_by_call;
    let st = mutator.stats();
    stats.tokens = st.tokens();
    stats.cost_usd = st.cost_usd;

    // Credit assignment: what the prompts shown were worth, early and late.
    let children: Vec<_> = calls.iter().filter(|c| !c.meta).collect();
    let third = (children.len() / 3).max(1);
    let value = |c: &kernelfoundry::prompt::simulate::SimCall| {
        let logit: f64 = model.base_logit
            + c.shown
                .iter()
                .map(|&i| model.advice[i].success_logit)
                .sum::<f64>()
            + if c.pitfalls {
                model.pitfalls_logit
            } else {
                0.0
            };
        1.0 / (1.0 + (-logit).exp())
    };
    let share = |part: &[&kernelfoundry::prompt::simulate::SimCall], helpful: bool| {
        let hit = part
            .iter()
            .filter(|c| {
                c.shown.iter().any(|&i| {
                    let e = model.advice[i].success_logit;
                    if helpful {
                        e > 0.0
                    } else {
                        e < 0.0
                    }
                })
            })
            .count();
        hit as f64 / part.len().max(1) as f64
    };
    let first = &children[..third.min(children.len())];
    let last = &children[children.len().saturating_sub(third)..];
    let mean = |part: &[&kernelfoundry::prompt::simulate::SimCall]| {
        part.iter().map(|c| value(c)).sum::<f64>() / part.len().max(1) as f64
    };
    stats.value_first = mean(first);
    stats.value_last = mean(last);
    stats.helpful = (share(first, true), share(last, true));
    stats.harmful = (share(first, false), share(last, false));

    let reports = mutator.variants();
    let values: Vec<f64> = reports
        .iter()
        .map(|r| model.value(&r.variant.components))
        .collect();
    let best_initial = (0..all.len())
        .max_by(|a, b| model.value(&all[*a]).total_cmp(&model.value(&all[*b])))
        .unwrap_or(0);
    let pulls: u64 = reports.iter().map(|r| r.stats.pulls).sum();
    stats.best_variant_share = reports
        .iter()
        .find(|r| r.variant.components == all[best_initial])
        .map_or(0.0, |r| r.stats.pulls as f64 / pulls.max(1) as f64);
    let tried: Vec<(f64, f64)> = reports
        .iter()
        .zip(&values)
        .filter(|(r, _)| r.stats.pulls > 0)
        .map(|(r, v)| (*v, r.stats.mean()))
        .collect();
    stats.rank_corr = spearman(&tried);
    let initial_best_value = all.iter().map(|c| model.value(c)).fold(0.0, f64::max);
    stats.meta_beat_initial = reports
        .iter()
        .zip(&values)
        .any(|(r, v)| r.variant.epoch > 0 && *v > initial_best_value + 1e-9);
    Ok(stats)
}

fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|a, b| xs[*a].total_cmp(&xs[*b]));
    let mut r = vec![0.0; xs.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && xs[idx[j + 1]] == xs[idx[i]] {
            j += 1;
        }
        for k in i..=j {
            r[idx[k]] = (i + j) as f64 / 2.0;
        }
        i = j + 1;
    }
    r
}

fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 3 {
        return None;
    }
    let a = ranks(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    let b = ranks(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(&b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len().max(1) as f64;
    let m = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (m, var.sqrt())
}

fn pm(xs: &[f64]) -> String {
    let (m, s) = mean_sd(xs);
    format!("{m:.3} ± {s:.3}")
}

fn simulate(args: &Args) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut runs: Vec<(Arm, Vec<RunStats>)> = Vec::new();
    for arm in Arm::ALL {
        let mut v = Vec::new();
        for seed in 0..args.seeds {
            v.push(
                simulate_run(arm, seed, args)
                    .with_context(|| format!("{} seed {seed}", arm.name()))?,
            );
        }
        runs.push((arm, v));
    }
    let half = (args.calls / 2).max(1) as usize - 1;
    let end = args.calls as usize - 1;
    println!(
        "Simulated LLM, {} seeds per arm, {} calls per run (meta-calls included), meta every {} steps; mean ± sd over seeds\n",
        args.seeds, args.calls, args.meta_every
    );
    println!(
        "| arm | best speedup @{} calls | best speedup @{} | QD-score @{} | QD-score @{} | meta-calls | tokens | cost USD |",
        half + 1,
        end + 1,
        half + 1,
        end + 1
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (arm, v) in &runs {
        let col = |f: &dyn Fn(&RunStats) -> f64| pm(&v.iter().map(f).collect::<Vec<_>>());
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.0} | {:.5} |",
            arm.name(),
            col(&|r| r.best_by_call[half]),
            col(&|r| r.best_by_call[end]),
            col(&|r| r.qd_by_call[half]),
            col(&|r| r.qd_by_call[end]),
            col(&|r| r.meta_calls as f64),
            mean_sd(&v.iter().map(|r| r.tokens as f64).collect::<Vec<_>>()).0,
            mean_sd(&v.iter().map(|r| r.cost_usd).collect::<Vec<_>>()).0,
        );
    }
    println!("\nPaired by seed, against the fixed prompt (same seed, same call budget):\n");
    println!(
        "| arm | best speedup ratio @{} | QD-score ratio @{} | seeds better (best) |",
        end + 1,
        end + 1
    );
    println!("|---|---|---|---|");
    let fixed = &runs[0].1;
    for (arm, v) in &runs[1..] {
        let best: Vec<f64> = v.iter().zip(fixed).map(|(a, b)| a.best / b.best).collect();
        let qd: Vec<f64> = v
            .iter()
            .zip(fixed)
            .map(|(a, b)| a.qd / b.qd.max(1e-12))
            .collect();
        let wins = v.iter().zip(fixed).filter(|(a, b)| a.best > b.best).count();
        println!(
            "| {} | {} | {} | {wins}/{} |",
            arm.name(),
            pm(&best),
            pm(&qd),
            v.len()
        );
    }
    println!("\nCredit assignment (hidden success chance of the prompts shown; shares of child prompts):\n");
    println!("| arm | success chance, first third → last third | with a helpful line | with a harmful line | requests to the best initial variant | Spearman(value, posterior) | a meta variant beats every initial one |");
    println!("|---|---|---|---|---|---|---|");
    for (arm, v) in &runs {
        let m = |f: &dyn Fn(&RunStats) -> f64| mean_sd(&v.iter().map(f).collect::<Vec<_>>()).0;
        let corr: Vec<f64> = v.iter().filter_map(|r| r.rank_corr).collect();
        println!(
            "| {} | {:.3} → {:.3} | {:.2} → {:.2} | {:.2} → {:.2} | {:.2} | {} | {}/{} |",
            arm.name(),
            m(&|r| r.value_first),
            m(&|r| r.value_last),
            m(&|r| r.helpful.0),
            m(&|r| r.helpful.1),
            m(&|r| r.harmful.0),
            m(&|r| r.harmful.1),
            m(&|r| r.best_variant_share),
            if corr.is_empty() {
                "n/a".to_owned()
            } else {
                format!("{} (n={})", pm(&corr), corr.len())
            },
            v.iter().filter(|r| r.meta_beat_initial).count(),
            v.len()
        );
    }
    let model = SimModel::default();
    let all = sim_variants(&model);
    println!(
        "\nHidden value (chance of an improving child, no noise) of the initial variants: {}",
        all.iter()
            .enumerate()
            .map(|(i, c)| format!("v{i} {:.3}", model.value(c)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "({} runs in {:.1} s)",
        runs.len() as u64 * args.seeds,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The arms against a real endpoint on SGEMM with the real OpenCL evaluator.
fn endpoint(args: &Args) -> anyhow::Result<()> {
    use kernelfoundry::eval::task::{builtin_task, parse_sizes};
    use kernelfoundry::search::{seeds_for, Search, SearchConfig};
    let settings = LlmSettings::from_env().context("reading the KF_LLM_* settings")?;
    if settings.budget == LlmBudget::unlimited() {
        bail!("--endpoint spends real money or time: set KF_LLM_BUDGET_USD, KF_LLM_BUDGET_TOKENS or KF_LLM_BUDGET_REQUESTS (it holds for all arms together)");
    }
    let client = OpenAiClient::new(settings.openai.clone())?;
    // Initial variants for the bandit arms: the built-in prompt and three ablations of it.
    let builtin = PromptComponents::builtin();
    let mut all = vec![builtin.clone()];
    for name in ["strategies", "pitfalls", "analysis"] {
        if let Some(v) = builtin.with_text(name, "") {
            all.push(v);
        }
    }
    let n = args.size;
    let sizes = parse_sizes(&format!("M={n},N={n},K={n}"))?;
    let task = builtin_task("gemm", &sizes)?;
    println!("| arm | seed | best speedup | QD-score | LLM calls | tokens | cost USD |");
    println!("|---|---|---|---|---|---|---|");
    let mut table: Vec<(Arm, f64, f64)> = Vec::new();
    for seed in 0..args.seeds {
        for arm in Arm::ALL {
            let variants = arm.variants(&all);
            let mut b = LlmMutator::builder(client.clone())
                .settings(&settings)
                .components(variants[0].clone());
            for v in &variants[1..] {
                b = b.add_variant(v.clone());
            }
            let tag = format!("{}-{seed}", arm.name().replace([' ', ','], "_"));
            let out = args.out.join(&tag);
            let llm = b
                .budget(settings.budget.with_requests(args.calls))
                .configure(|c| {
                    c.meta = arm.meta(args.meta_every);
                    c.seed = seed;
                })
                .record_in(out.join("llm"))
                .build()?;
            let stop = StopHandle::new();
            llm.stop_on_budget(stop.clone());
            let mut config = SearchConfig::new("gemm", sizes.clone());
            config.evaluations = args.calls * 2 + 2;
            config.wall = Some(Duration::from_secs(3600));
            config.tune_budget = 1;
            config.seed = seed;
            config.out = out;
            config.progress = false;
            let seeds = seeds_for(task.as_ref(), Language::OpenCl, Vec::new());
            let outcome = Search::builder()
                .config(config)
                .mutator(llm.clone())
                .seeds(seeds)
                .stop_on(stop)
                .build()?
                .run()?;
            let m = &outcome.summary.metrics;
            let best = m
                .best
                .map_or(0.0, |b| (b.value() - Fitness::CORRECT_BASE).max(0.0));
            let st = llm.stats();
            println!(
                "| {} | {seed} | {best:.3} | {:.3} | {} | {} | {:.4} |",
                arm.name(),
                m.qd_score,
                st.live_requests + st.recorded_answers,
                st.tokens(),
                st.cost_usd
            );
            table.push((arm, best, m.qd_score));
        }
    }
    println!("\n| arm | best speedup | QD-score |\n|---|---|---|");
    for arm in Arm::ALL {
        let b: Vec<f64> = table.iter().filter(|t| t.0 == arm).map(|t| t.1).collect();
        let q: Vec<f64> = table.iter().filter(|t| t.0 == arm).map(|t| t.2).collect();
        println!("| {} | {} | {} |", arm.name(), pm(&b), pm(&q));
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    // Evaluation workers of --endpoint are this program, re-executed: serve first if we are one.
    kernelfoundry::init();
    let args = Args::parse();
    if args.calls < 3 || args.seeds == 0 {
        bail!("--calls must be at least 3 and --seeds at least 1");
    }
    if args.endpoint {
        endpoint(&args)
    } else {
        simulate(&args)
    }
}
