//! The landscape benchmark: the default strategy against every single strategy on landscapes
//! unlike the shipped GPU caches, without held-out data.
//!
//! Landscapes: the seeded synthetic kinds of `kf_tune::synthetic` (a fresh instance per seed:
//! seed `s` replays instance `s` with tuner seed `s`), the Kernel Tuner caches measured on this
//! project's own machines in the repository's `tuning-spaces/` folder, and with `--shared DIR`
//! the shared GPU caches (`gemm_RTX_3090.json.gz`, …). Budgets are fractions of each
//! landscape's valid configurations (default 0.5%, 1%, 2%, 5%). Each cell is the mean, over the
//! seeds, of `optimum time / best time found`, with the standard deviation.
//!
//! ```text
//! cargo run --release -p kf-tune --example landscapes -- [--seeds 10] [--seed0 0] \
//!     [--strategies default,random,...] [--budgets 0.005,0.01,0.02,0.05] [--only NAME] \
//!     [--dir tuning-spaces] [--shared ../shared/tuning-spaces] [--no-synthetic] [--threads 2] \
//!     [--write-kt DIR] [--json FILE]
//! ```
//!
//! A strategy written `NAME/W` (`default/8`) asks for `W` configurations at a time, as tuning
//! spread over `W` workers does (`Tuner::fan_out`): `--strategies default,default/4,default/8`
//! measures what fanning out costs at the same budget.
//!
//! `--write-kt DIR` writes the synthetic instances of every seed as Kernel Tuner cache files
//! (`KIND_SEED.json`, for Kernel Tuner's simulation mode: `scripts/bench-landscapes-vs-kt.sh`)
//! and exits. `--json FILE` also writes every cell's per-seed scores as JSON
//! (`{"cells": [{"landscape", "budget", "valid", "strategy", "scores"}]}`), the form
//! `scripts/kt_landscapes.py` writes Kernel Tuner's in.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use kf_tune::synthetic::LandscapeKind;
use kf_tune::{strategy, KtCache, Replay};

/// Where a landscape's instance for a seed comes from.
enum Source {
    /// A synthetic kind: a new instance per seed.
    Synthetic(LandscapeKind),
    /// A measured cache: the same landscape for every seed.
    Measured(Box<Replay>),
}

struct Landscape {
    name: String,
    source: Source,
}

/// A landscape's instance for one seed: built for it, or the one measured cache.
enum Instance<'a> {
    Built(Box<Replay>),
    Shared(&'a Replay),
}

impl std::ops::Deref for Instance<'_> {
    type Target = Replay;

    fn deref(&self) -> &Replay {
        match self {
            Instance::Built(r) => r,
            Instance::Shared(r) => r,
        }
    }
}

impl Landscape {
    fn replay_for(&self, seed: u64) -> Result<Instance<'_>, String> {
        match &self.source {
            Source::Synthetic(kind) => Replay::from_cache(kind.build(seed))
                .map(|r| Instance::Built(Box::new(r)))
                .map_err(|e| e.to_string()),
            Source::Measured(r) => Ok(Instance::Shared(r.as_ref())),
        }
    }
}

struct Options {
    seeds: u64,
    seed0: u64,
    strategies: Vec<String>,
    budgets: Vec<f64>,
    only: Option<String>,
    dir: Option<PathBuf>,
    shared: Option<PathBuf>,
    synthetic: bool,
    threads: usize,
    write_kt: Option<PathBuf>,
    json: Option<PathBuf>,
}

fn parse() -> Result<Options, Box<dyn std::error::Error>> {
    let mut o = Options {
        seeds: 10,
        seed0: 0,
        strategies: strategy::STRATEGY_NAMES
            .iter()
            .filter(|s| **s != "exhaustive")
            .map(|s| s.to_string())
            .collect(),
        budgets: vec![0.005, 0.01, 0.02, 0.05],
        only: None,
        dir: Some(PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tuning-spaces"
        ))),
        shared: None,
        synthetic: true,
        threads: 2,
        write_kt: None,
        json: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--seeds" => o.seeds = value()?.parse()?,
            "--seed0" => o.seed0 = value()?.parse()?,
            "--strategies" => o.strategies = value()?.split(',').map(str::to_owned).collect(),
            "--budgets" => {
                o.budgets = value()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--only" => o.only = Some(value()?),
            "--dir" => o.dir = Some(PathBuf::from(value()?)),
            "--no-dir" => o.dir = None,
            "--shared" => o.shared = Some(PathBuf::from(value()?)),
            "--no-synthetic" => o.synthetic = false,
            "--threads" => o.threads = value()?.parse()?,
            "--write-kt" => o.write_kt = Some(PathBuf::from(value()?)),
            "--json" => o.json = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(o)
}

/// The Kernel Tuner caches (`*.json`, `*.json.gz`) of a folder, by name.
fn measured(dir: &Path) -> Result<Vec<Landscape>, Box<dyn std::error::Error>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.to_string_lossy();
            (n.ends_with(".json") || n.ends_with(".json.gz")) && !n.ends_with(".T1.json")
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let cache = KtCache::read(&f)?;
        let name = f
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_end_matches(".gz")
                    .trim_end_matches(".json")
                    .to_owned()
            })
            .unwrap_or_default();
        out.push(Landscape {
            name,
            source: Source::Measured(Box::new(Replay::from_cache(cache)?)),
        });
    }
    Ok(out)
}

/// A strategy by name; `default@polish=0.1,warmup=2,memory=0.9` is the default strategy with
/// other settings (for trying changes to it on this benchmark).
/// `NAME/W`: strategy `NAME` asking for `W` configurations at a time (`Tuner::fan_out`), as a
/// tuning spread over `W` workers would; plain `NAME` asks for one.
fn fan_out_of(name: &str) -> Result<(&str, usize), String> {
    match name.rsplit_once('/') {
        None => Ok((name, 1)),
        Some((strategy, width)) => match width.parse::<usize>() {
            Ok(w) if w >= 1 => Ok((strategy, w)),
            _ => Err(format!(
                "{name}: the fan-out after `/` must be a whole number ≥ 1"
            )),
        },
    }
}

fn build_strategy(name: &str) -> Result<Box<dyn strategy::Strategy>, String> {
    let Some(settings) = name.strip_prefix("default@") else {
        return strategy::by_name(name).map_err(|e| e.to_string());
    };
    let mut auto = strategy::Auto::new();
    for kv in settings.split(';') {
        let (k, v) = kv
            .split_once('=')
            .ok_or(format!("{kv}: expected key=value"))?;
        let bad = |e: std::num::ParseFloatError| format!("{kv}: {e}");
        match k {
            "polish" => auto.polish = v.parse().map_err(bad)?,
            "memory" => auto.memory = v.parse().map_err(bad)?,
            "forest_margin" => auto.forest_margin = v.parse().map_err(bad)?,
            "warmup" => auto.warmup = v.parse::<f64>().map_err(bad)? as usize,
            other => return Err(format!("unknown setting {other}")),
        }
    }
    Ok(Box::new(auto))
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (m, var.sqrt())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let o = parse()?;
    if let Some(dir) = &o.write_kt {
        std::fs::create_dir_all(dir)?;
        for kind in LandscapeKind::ALL {
            for seed in o.seed0..o.seed0 + o.seeds {
                let path = dir.join(format!("{}_{seed}.json", kind.as_str()));
                kind.build(seed).write(&path)?;
                println!("{}", path.display());
            }
        }
        return Ok(());
    }
    let mut landscapes = Vec::new();
    if o.synthetic {
        for kind in LandscapeKind::ALL {
            landscapes.push(Landscape {
                name: format!("synthetic {kind}"),
                source: Source::Synthetic(kind),
            });
        }
    }
    for dir in o.dir.iter().chain(o.shared.iter()) {
        if dir.exists() {
            landscapes.extend(measured(dir)?);
        } else {
            eprintln!("SKIPPED: {} does not exist", dir.display());
        }
    }
    if let Some(only) = &o.only {
        landscapes.retain(|l| l.name.contains(only.as_str()));
    }
    let start = Instant::now();
    println!("| landscape | budget | {} |", o.strategies.join(" | "));
    println!("|---|---|{}", "---|".repeat(o.strategies.len()));
    // Per strategy: every cell's mean, to compare over the whole benchmark.
    let mut cell_means: Vec<Vec<f64>> = vec![Vec::new(); o.strategies.len()];
    let mut json_cells = Vec::new();
    let mut behind: Vec<String> = Vec::new();
    for land in &landscapes {
        let valid = land.replay_for(o.seed0)?.valid();
        for &fraction in &o.budgets {
            let budget = ((valid as f64) * fraction).floor().max(2.0) as usize;
            let mut row = format!(
                "| {} ({valid} valid) | {:.1}% ({budget}) |",
                land.name,
                fraction * 100.0
            );
            let mut means = Vec::new();
            for (si, name) in o.strategies.iter().enumerate() {
                let scores = Mutex::new(vec![0.0; o.seeds as usize]);
                let next = AtomicUsize::new(0);
                let failed = Mutex::new(None);
                std::thread::scope(|s| {
                    for _ in 0..o.threads.max(1) {
                        s.spawn(|| loop {
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            if i >= o.seeds as usize {
                                break;
                            }
                            let seed = o.seed0 + i as u64;
                            let run = land.replay_for(seed).and_then(|replay| {
                                let (strategy, width) = fan_out_of(name)?;
                                let mut st = build_strategy(strategy)?;
                                let r = replay
                                    .run_fanned_out(st.as_mut(), budget, seed, width)
                                    .map_err(|e| e.to_string())?;
                                Ok(replay.score(&r))
                            });
                            match run {
                                Ok(score) => {
                                    if let Ok(mut sc) = scores.lock() {
                                        sc[i] = score;
                                    }
                                }
                                Err(e) => {
                                    if let Ok(mut f) = failed.lock() {
                                        *f = Some(e);
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
                let (m, sd) = mean_sd(&scores);
                json_cells.push(serde_json::json!({
                    "landscape": land.name,
                    "budget": fraction,
                    "valid": valid,
                    "strategy": name,
                    "scores": scores,
                }));
                cell_means[si].push(m);
                means.push(m);
                row.push_str(&format!(" {m:.3} ± {sd:.3} |"));
            }
            if let Some(d) = o.strategies.iter().position(|s| s == "default") {
                let best = means.iter().copied().fold(f64::MIN, f64::max);
                if means[d] + 1e-12 < best {
                    let who =
                        o.strategies[means.iter().position(|m| *m == best).unwrap_or(0)].clone();
                    behind.push(format!(
                        "{} at {:.1}%: default {:.3} < {who} {best:.3}",
                        land.name,
                        fraction * 100.0,
                        means[d]
                    ));
                }
            }
            println!("{row}");
        }
    }
    println!();
    println!(
        "Mean over all {} cells:",
        cell_means.first().map_or(0, Vec::len)
    );
    println!("| strategy | mean of cell means | worst cell |");
    println!("|---|---|---|");
    let mut overall: Vec<(String, f64)> = Vec::new();
    for (name, cells) in o.strategies.iter().zip(&cell_means) {
        let (m, _) = mean_sd(cells);
        let worst = cells.iter().copied().fold(f64::INFINITY, f64::min);
        println!("| {name} | {m:.4} | {worst:.3} |");
        overall.push((name.clone(), m));
    }
    if let Some((_, d)) = overall.iter().find(|(n, _)| n == "default") {
        let ahead = overall
            .iter()
            .filter(|(n, m)| n != "default" && *m > *d)
            .count();
        println!(
            "\ndefault: {} strategies ahead of it in the overall mean; behind the best single strategy in {} of {} cells{}",
            ahead,
            behind.len(),
            cell_means.first().map_or(0, Vec::len),
            if behind.is_empty() { String::new() } else { format!(":\n  {}", behind.join("\n  ")) }
        );
    }
    if let Some(path) = &o.json {
        let doc = serde_json::json!({ "tool": "kf-tune", "cells": json_cells });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
    }
    println!(
        "\n{} seeds from {}; {:.1} s",
        o.seeds,
        o.seed0,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
