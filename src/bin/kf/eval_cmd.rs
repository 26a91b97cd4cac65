//! `kf eval`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use kernelfoundry::core::{Evaluation, ParamValue, ParamValues};
use kernelfoundry::eval::{EvalConfig, TimeoutPolicy, WorkerCommand};
use kernelfoundry::manifest::Manifest;
use serde_json::json;

/// Arguments of `kf eval`.
#[derive(Args)]
pub(crate) struct EvalArgs {
    /// Built-in task: gemm or softmax.
    #[arg(long, conflicts_with = "task_file")]
    task: Option<String>,
    /// A task file (TOML): your own operator with a Python, kernel or Rust reference.
    #[arg(long, value_name = "T.toml")]
    task_file: Option<PathBuf>,
    /// Problem sizes, such as M=256,N=192,K=128 (missing ones take the task's defaults).
    #[arg(long, default_value = "")]
    size: String,
    /// The kernel's TOML manifest.
    #[arg(long)]
    kernel: PathBuf,
    /// A parameter value, NAME=value; repeat for several (others take the manifest's first value).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Print one JSON object instead of a summary.
    #[arg(long)]
    json: bool,
    /// Backend.
    #[arg(long, default_value_t = kernelfoundry::search::BackendKind::OpenCl)]
    backend: kernelfoundry::search::BackendKind,
    /// Device: a name substring, an index, or cpu/gpu (default: KF_OPENCL_DEVICE or the first).
    #[arg(long)]
    device: Option<String>,
    /// Hard limit on the evaluation, seconds (default: scaled from the baseline, at most 60).
    #[arg(long)]
    timeout: Option<f64>,
    /// Number of input sets to verify on (at least 3).
    #[arg(long, default_value_t = 3)]
    input_sets: u32,
}

/// Parses `NAME=value` into a typed parameter value.
pub(crate) fn parse_param(text: &str) -> anyhow::Result<(String, ParamValue)> {
    let Some((name, value)) = text.split_once('=') else {
        bail!("--param `{text}` is not NAME=value");
    };
    let value = value.trim();
    let parsed = if let Ok(i) = value.parse::<i64>() {
        ParamValue::Int(i)
    } else if let Ok(f) = value.parse::<f64>() {
        ParamValue::Float(f)
    } else if let Ok(b) = value.parse::<bool>() {
        ParamValue::Bool(b)
    } else {
        ParamValue::Text(value.to_owned())
    };
    Ok((name.trim().to_owned(), parsed))
}

fn summary(e: &Evaluation) -> String {
    let mut out = format!("status: {}\nparams: {}\n", e.status, e.params);
    if let Some(t) = e.timing {
        out.push_str(&format!(
            "time: median {:.4} ms (min {:.4}, spread {:.1}%, {} trials)\n",
            t.median_s * 1e3,
            t.min_s * 1e3,
            100.0 * t.relative_spread(),
            t.trials
        ));
    }
    if let Some(g) = e.gflops {
        out.push_str(&format!("throughput: {g:.2} GFLOP/s\n"));
    }
    if let Some(s) = e.speedup {
        out.push_str(&format!("speedup over the task baseline: {s:.2}x\n"));
    }
    out.push_str(&format!("diagnostics: {}\n", e.diagnostics));
    out
}

pub(crate) fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let chosen = crate::task_arg::ChosenTask::resolve(
        args.task.as_deref(),
        args.task_file.as_deref(),
        &args.size,
    )?;
    let task = &chosen.task;
    let spec = args.backend.spec(args.device.clone());
    kernelfoundry::backends::check(&spec)?;
    let (manifest, source) = match Manifest::load(&args.kernel) {
        Ok(loaded) => loaded,
        Err(e) => {
            if args.json {
                println!(
                    "{}",
                    json!({"status": "invalid_manifest", "error": e.to_string(), "kernel": args.kernel})
                );
            }
            return Err(e.into());
        }
    };
    let mut overrides = ParamValues::new();
    for p in &args.params {
        let (name, value) = parse_param(p)?;
        overrides.set(name, value);
    }
    // Unknown or disallowed parameters are the user's mistake, not the kernel's: say so.
    let params = manifest.resolve_params(&overrides)?;
    if args.input_sets < 3 {
        bail!("--input-sets must be at least 3");
    }
    let config = EvalConfig {
        input_sets: args.input_sets,
        ..EvalConfig::default()
    };
    let timeout = match args.timeout {
        Some(s) if s.is_finite() && s > 0.0 => TimeoutPolicy::fixed(Duration::from_secs_f64(s)),
        Some(s) => bail!("--timeout {s} is not a positive number of seconds"),
        None => TimeoutPolicy::default(),
    };
    let evaluator = chosen
        .evaluator(spec)
        .command(WorkerCommand::current_exe()?)
        .config(config)
        .timeout(chosen.timeout(timeout))
        .build();
    let device = evaluator.device()?;
    let evaluation = evaluator.evaluate_blocking(&source, &params)?;
    evaluator.shutdown();
    if args.json {
        let mut value = serde_json::to_value(&evaluation)?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("task".into(), json!(chosen.name()));
            if let Some((path, _)) = &chosen.file {
                obj.insert("task_file".into(), json!(path));
            }
            obj.insert("sizes".into(), json!(task.sizes()));
            obj.insert("kernel".into(), json!(args.kernel));
            obj.insert("device".into(), json!(device.name));
            obj.insert("backend".into(), json!(args.backend));
            if let Some(t) = evaluation.timing {
                obj.insert("median_ms".into(), json!(t.median_s * 1e3));
            }
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!(
            "kernel: {} on {} ({})",
            args.kernel.display(),
            device.name,
            args.backend
        );
        print!("{}", summary(&evaluation));
    }
    Ok(ExitCode::SUCCESS)
}
