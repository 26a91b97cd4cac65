//! `kf eval`: one kernel, evaluated once (`kernelfoundry::search::kernel_eval`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kernelfoundry::search::kernel_eval::{evaluate_kernel, KernelEvalRequest};

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
    /// Backend: opencl, sycl or cuda.
    #[arg(long, default_value = kernelfoundry::backends::DEFAULT_BACKEND, value_parser = kernelfoundry::backends::shipped_name)]
    backend: String,
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

pub(crate) fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let request = KernelEvalRequest {
        task: args.task,
        task_file: args.task_file,
        size: args.size,
        kernel: args.kernel,
        params: args.params,
        backend: args.backend,
        device: args.device,
        timeout: args.timeout,
        input_sets: args.input_sets,
    };
    let outcome = match evaluate_kernel(&request) {
        Ok(outcome) => outcome,
        Err(e) => {
            if let Some(json) = e
                .invalid_manifest_json(&request.kernel)
                .filter(|_| args.json)
            {
                println!("{json}");
            }
            return Err(e.into());
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome.to_json()?)?);
    } else {
        print!("{}", outcome.render_text());
    }
    Ok(ExitCode::SUCCESS)
}
