//! `kf worker`: evaluates distributed searches' jobs on this machine's device.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use kernelfoundry::cli::ServerArgs;
use kernelfoundry::dist::{Worker, WorkerConfig, WorkerRole};
use kernelfoundry::distributed::EvaluationWorker;

/// Arguments of `kf worker`.
#[derive(Args)]
pub(crate) struct WorkerArgs {
    /// Backend: opencl, sycl or cuda.
    #[arg(long, default_value = kernelfoundry::backends::DEFAULT_BACKEND, value_parser = kernelfoundry::backends::shipped_name)]
    backend: String,
    /// Device (a name substring, an index, cpu or gpu).
    #[arg(long)]
    device: Option<String>,
    /// Queue name of the device (default: backend and device name, as searches name it).
    #[arg(long)]
    device_kind: Option<String>,
    /// Jobs evaluated at once (one device: 1).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// What this worker does: `all` (compile and run the jobs of searches; the default),
    /// `compile` (a CPU machine: build the jobs of searches run with --compile-first, answer
    /// those that cannot run, pass the others on with their binaries) or `execute` (a device
    /// machine: run the jobs compile workers built, with their binaries, and the others).
    #[arg(long, default_value_t = WorkerRole::All)]
    role: WorkerRole,
    /// The backend's compile cache folder (default: the backend's usual place). An execute
    /// worker puts the binaries it is sent there; give each worker on one machine its own, so
    /// that what it runs is what it was sent or what it built.
    #[arg(long)]
    cache_dir: Option<std::path::PathBuf>,
    /// Where the task files that searches ship with their jobs are written, one folder per
    /// task's content hash (default: `shipped-tasks/` in the runtime folder).
    #[arg(long)]
    task_dir: Option<std::path::PathBuf>,
    /// Name in results and logs (default: host and process id).
    #[arg(long)]
    name: Option<String>,
    /// Seconds a job may go without a heartbeat before another worker gets it.
    #[arg(long, default_value_t = 30.0)]
    ack_wait: f64,
    /// Deliveries that may end with the worker lost before a job is recorded as failed.
    #[arg(long, default_value_t = 3)]
    max_attempts: u32,
    /// Servers.
    #[command(flatten)]
    servers: ServerArgs,
    /// The endpoint an answer worker serves (`--role answer`): searches run with
    /// `--llm --llm-queue NAME` ask it. The model server comes from --llm-base-url, else
    /// KF_LLM_BASE_URL, else the local server (scripts/llm-server.sh start); the budget,
    /// concurrency and prices from the KF_LLM_* variables, for every search that asks.
    #[arg(long, value_name = "NAME")]
    endpoint: Option<String>,
    /// The answer worker's model server (an OpenAI-compatible base URL).
    #[arg(long, value_name = "URL", requires = "endpoint")]
    llm_base_url: Option<String>,
    /// The answer worker's model.
    #[arg(long, value_name = "MODEL", requires = "endpoint")]
    llm_model: Option<String>,
    /// More log output (-v debug).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// `kf worker --role answer`: answers the questions searches ask an endpoint through the
/// queue, with one LLM gateway (budget, concurrency limit) in front of the model server.
/// The connection to the servers a worker of either role has: the worker role, with the
/// acknowledgement wait and the attempts per job the command line gives.
fn worker_dist_config(args: &WorkerArgs) -> kernelfoundry::dist::DistConfig {
    args.servers
        .dist_config(kernelfoundry::dist::Role::Worker)
        .ack_wait(std::time::Duration::from_secs_f64(args.ack_wait))
        .max_attempts(args.max_attempts)
}

/// A signal that Ctrl-C was pressed (the first time): the worker then stops taking jobs and
/// finishes the ones in hand.
fn stop_on_ctrl_c() -> anyhow::Result<futures::channel::oneshot::Receiver<()>> {
    let (tx, stop) = futures::channel::oneshot::channel::<()>();
    let tx = std::sync::Mutex::new(Some(tx));
    ctrlc::set_handler(move || {
        if let Some(tx) = tx.lock().ok().and_then(|mut t| t.take()) {
            let _ = tx.send(());
        }
    })?;
    Ok(stop)
}

fn run_answer_worker(
    args: &WorkerArgs,
    dist: kernelfoundry::dist::DistConfig,
) -> anyhow::Result<ExitCode> {
    let endpoint = args
        .endpoint
        .clone()
        .context("an answer worker needs --endpoint NAME")?;
    let llm =
        crate::llm_args::LlmArgs::for_worker(args.llm_base_url.clone(), args.llm_model.clone());
    let (settings, _) = llm.resolved_settings()?;
    let client = kernelfoundry::prompt::OpenAiClient::new(settings.openai.clone())
        .context("the LLM client")?;
    let gateway = kernelfoundry::prompt::LlmGateway::builder(client)
        .budget(settings.budget)
        .models(&settings.models)
        .max_concurrency(settings.max_concurrency)
        .build()
        .context("the LLM gateway")?;
    let mut config = WorkerConfig::new(endpoint.clone());
    if let Some(name) = &args.name {
        config.name = name.clone();
    }
    config.role = WorkerRole::Answer;
    config.jobs = args.jobs.max(settings.max_concurrency);
    eprintln!(
        "kf worker {} (answer role): endpoint {endpoint} → {} ({} at a time), NATS {}, database {}",
        config.name,
        gateway.describe(),
        config.jobs,
        redact(&args.servers.nats_url()),
        redact(&args.servers.database_url())
    );
    let answerer = kernelfoundry::dist::LlmAnswerer::new(gateway);
    let stop = stop_on_ctrl_c()?;
    let stats = Worker::new(dist, config, answerer).run_blocking(async move {
        let _ = stop.await;
    })?;
    eprintln!(
        "kf worker: {} questions answered, {} already answered, {} handed back, {} refused",
        stats.evaluated, stats.already_done, stats.handed_back, stats.refused
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    kernelfoundry::search::logging::init(args.verbose);
    anyhow::ensure!(
        args.ack_wait.is_finite() && args.ack_wait > 0.0,
        "--ack-wait must be a positive number of seconds"
    );
    if args.role == WorkerRole::Answer {
        return run_answer_worker(&args, worker_dist_config(&args));
    }
    anyhow::ensure!(
        args.endpoint.is_none(),
        "--endpoint is for answer workers (--role answer)"
    );
    let mut spec =
        kernelfoundry::eval::BackendSpec::new(&args.backend).with_device(args.device.clone());
    spec.cache_dir = args.cache_dir.clone();
    let dist = worker_dist_config(&args);
    let worker = EvaluationWorker::new(
        &kernelfoundry::backends::shipped(),
        spec,
        dist,
        args.device_kind.clone(),
        |kind| {
            let mut config = WorkerConfig::new(kind);
            if let Some(name) = &args.name {
                config.name = name.clone();
            }
            config.jobs = args.jobs;
            config.role = args.role;
            config
        },
    )?;
    let worker = match &args.task_dir {
        Some(dir) => worker.task_dir(dir),
        None => worker,
    };
    let config = worker.config();
    eprintln!(
        "kf worker {} ({} role): device {} ({}), {} job(s) at a time, NATS {}, database {}",
        config.name,
        config.role,
        worker.device().name,
        worker.device_kind(),
        config.jobs,
        redact(&args.servers.nats_url()),
        redact(&args.servers.database_url())
    );
    let stop = stop_on_ctrl_c()?;
    let stats = worker.run_blocking(async move {
        let _ = stop.await;
    })?;
    eprintln!(
        "kf worker: {} evaluated, {} compiled and passed on, {} already answered, {} recorded as \
         poison, {} handed back, {} refused (unsigned, untrusted or altered)",
        stats.evaluated,
        stats.compiled,
        stats.already_done,
        stats.poisoned,
        stats.handed_back,
        stats.refused
    );
    Ok(ExitCode::SUCCESS)
}

/// The URL without its password.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}
