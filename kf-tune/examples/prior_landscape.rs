//! The rule prior's effect on a recorded landscape: replays a Kernel Tuner cache (default: the
//! gemm_blocked landscape in tuning-spaces/) with each strategy, over many seeds and budgets,
//! once without a prior and once with [`RulePrior::family_rules`] for a kernel tagged `matmul`,
//! and prints the mean score (optimum time / best time found) of each with its standard error.
//!
//! ```text
//! cargo run --release -p kf-tune --example prior_landscape -- \
//!     [CACHE] [--seeds 20] [--budgets 0.005,0.01,0.02,0.05] [--strategies default,random]
//! ```

use kf_tune::prior::{PriorContext, RulePrior};
use kf_tune::Replay;
use kf_tune::{strategy, Tuner};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut cache = "tuning-spaces/gemm_blocked_small_EPYC_ocl.json".to_owned();
    let (mut seeds, mut budgets, mut strategies) = (
        20u64,
        vec![0.005, 0.01, 0.02, 0.05],
        vec!["default".to_owned(), "random".to_owned()],
    );
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--seeds" => seeds = value()?.parse()?,
            "--budgets" => {
                budgets = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--strategies" => strategies = value()?.split(',').map(str::to_owned).collect(),
            _ => cache = arg,
        }
    }
    let replay = Replay::load(&cache)?;
    let space = replay.space();
    let weights = RulePrior::family_rules()
        .applied(space, &PriorContext::tagged(["matmul"]))?
        .ok_or("no rule of the matmul prior applies to this space")?;
    println!(
        "{cache}: {} valid configurations; {} seeds per cell",
        replay.valid(),
        seeds
    );
    println!("| strategy | budget | score without prior | score with the matmul prior |");
    println!("|---|---|---|---|");
    for name in &strategies {
        for fraction in &budgets {
            let budget = ((replay.valid() as f64) * fraction).round().max(1.0) as usize;
            let cell = |prior: bool| -> Result<(f64, f64), Box<dyn std::error::Error>> {
                let mut scores = Vec::new();
                for seed in 0..seeds {
                    let mut s = strategy::by_name(name)?;
                    let mut tuner = Tuner::new(space, budget).seed(seed);
                    if prior {
                        tuner = tuner.prior(weights.clone());
                    }
                    let result = tuner.run(s.as_mut(), &mut replay.objective())?;
                    scores.push(replay.score(&result));
                }
                let n = scores.len() as f64;
                let mean = scores.iter().sum::<f64>() / n;
                let var = scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0);
                Ok((mean, (var / n).sqrt()))
            };
            let (plain, plain_se) = cell(false)?;
            let (prior, prior_se) = cell(true)?;
            println!(
                "| {name} | {budget} ({:.1}%) | {plain:.3} ± {plain_se:.3} | {prior:.3} ± {prior_se:.3} |",
                fraction * 100.0
            );
        }
    }
    Ok(())
}
