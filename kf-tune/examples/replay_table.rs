//! Prints the replay table of issue 4: for each cache in `../shared/tuning-spaces/` and budgets
//! of 0.5% and 2% of its valid configurations, the mean over seeds of
//! `optimum time / best time found` for each strategy, next to Kernel Tuner's best.
//!
//! ```text
//! cargo run --release -p kf-tune --example replay_table -- [--seeds 20] [--seed0 0] \
//!     [--strategies default,random,...] [--only conv] [--dir PATH] [--threads 2] [--per-seed]
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use kf_tune::{strategy, Replay};

/// Kernel Tuner 1.5's best strategy per cache and budget (issue 4's table, 10 seeds).
const KT_BEST: [(&str, [(&str, f64); 2]); 3] = [
    (
        "gemm_RTX_3090.json.gz",
        [("diff_evo", 0.883), ("genetic_algorithm", 0.990)],
    ),
    (
        "conv_A100.json.gz",
        [
            ("simulated_annealing", 0.651),
            ("simulated_annealing", 0.820),
        ],
    ),
    (
        "dedisp_A100.json.gz",
        [("genetic_algorithm", 0.995), ("genetic_algorithm", 0.998)],
    ),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut seeds = 20u64;
    let mut strategies: Vec<String> = strategy::STRATEGY_NAMES
        .iter()
        .filter(|s| **s != "exhaustive")
        .map(|s| s.to_string())
        .collect();
    let mut dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/tuning-spaces"
    ));
    let mut threads = 2usize;
    let mut only: Option<String> = None;
    let mut seed0 = 0u64;
    let mut per_seed = false;
    let mut only_budget: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seeds" => seeds = args.next().ok_or("--seeds N")?.parse()?,
            "--strategies" => {
                strategies = args
                    .next()
                    .ok_or("--strategies a,b")?
                    .split(',')
                    .map(str::to_owned)
                    .collect()
            }
            "--dir" => dir = PathBuf::from(args.next().ok_or("--dir PATH")?),
            "--threads" => threads = args.next().ok_or("--threads N")?.parse()?,
            "--only" => only = Some(args.next().ok_or("--only NAME")?),
            "--seed0" => seed0 = args.next().ok_or("--seed0 N")?.parse()?,
            "--per-seed" => per_seed = true,
            "--budget-index" => {
                only_budget = Some(args.next().ok_or("--budget-index 0|1")?.parse()?)
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if !dir.exists() {
        dir = PathBuf::from("../shared/tuning-spaces");
    }
    let start = Instant::now();
    println!("| cache | budget | KT best | {} |", strategies.join(" | "));
    println!("|---|---|---|{}", "---|".repeat(strategies.len()));
    let mut wins = 0;
    let mut cells = 0;
    for (file, kt) in KT_BEST {
        if only.as_deref().is_some_and(|o| !file.contains(o)) {
            continue;
        }
        let replay = Replay::load(dir.join(file))?;
        let valid = replay.valid();
        for (b, (fraction, (kt_name, kt_score))) in [0.005, 0.02].into_iter().zip(kt).enumerate() {
            if only_budget.is_some_and(|o| o != b) {
                continue;
            }
            let budget = ((valid as f64) * fraction).floor() as usize;
            let mut row = format!(
                "| {} ({} valid) | {:.1}% ({budget}) | {kt_score:.3} ({kt_name}) |",
                file.trim_end_matches(".json.gz"),
                valid,
                fraction * 100.0
            );
            for name in &strategies {
                let t0 = Instant::now();
                let scores = Mutex::new(vec![0.0; seeds as usize]);
                let next = AtomicUsize::new(0);
                let failed = Mutex::new(None);
                std::thread::scope(|s| {
                    for _ in 0..threads.max(1) {
                        s.spawn(|| loop {
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            if i >= seeds as usize {
                                break;
                            }
                            let run = strategy::by_name(name).and_then(|mut st| {
                                replay.run(st.as_mut(), budget, seed0 + i as u64)
                            });
                            match run {
                                Ok(r) => {
                                    assert!(r.evaluations <= budget);
                                    if let Ok(mut sc) = scores.lock() {
                                        sc[i] = replay.score(&r);
                                    }
                                }
                                Err(e) => {
                                    if let Ok(mut f) = failed.lock() {
                                        *f = Some(e.to_string());
                                    }
                                }
                            }
                        });
                    }
                });
                if let Some(e) = failed.into_inner().ok().flatten() {
                    return Err(e.into());
                }
                let scores = scores.into_inner().map_err(|e| e.to_string())?;
                let mean = scores.iter().sum::<f64>() / scores.len().max(1) as f64;
                let min = scores.iter().copied().fold(f64::INFINITY, f64::min);
                if per_seed {
                    let list: Vec<String> = scores.iter().map(|s| format!("{s:.3}")).collect();
                    eprintln!("{file} {budget} {name}: {}", list.join(" "));
                }
                let mark = if mean > kt_score { "**" } else { "" };
                if name == "default" {
                    cells += 1;
                    if mean > kt_score {
                        wins += 1;
                    }
                }
                row.push_str(&format!(
                    " {mark}{mean:.4}{mark} (min {min:.2}, {:.0}s) |",
                    t0.elapsed().as_secs_f64()
                ));
            }
            println!("{row}");
        }
    }
    println!(
        "\n{seeds} seeds from {seed0}; bold: ahead of Kernel Tuner's best. default ahead in {wins}/{cells} cells. {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
