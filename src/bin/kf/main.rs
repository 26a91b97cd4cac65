//! `kf`: the KernelFoundry command line.

mod bench_cmd;
mod cluster_cmd;
mod devices_cmd;
mod eval_cmd;
mod export_cmd;
mod llm_args;
mod report_cmd;
mod run_cmd;
mod search_cmd;
mod serve_cmd;
mod setup_cmd;
mod task_arg;
mod task_cmd;
mod task_import;
mod tune_cmd;
mod verify_cmd;
mod worker_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kf",
    version,
    about = "KernelFoundry: evaluate, tune and evolve GPU kernels"
)]
struct Cli {
    /// Run untrusted code (kernel builds and launches, task references, imported problem
    /// files) even where its confinement is incomplete (no Landlock, no seccomp, no process
    /// limit). Prints a warning; the confinement each process had is recorded (report.json,
    /// `kf eval --json`, the cluster's evaluation rows).
    #[arg(long, global = true)]
    allow_unconfined: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate one kernel: compile, verify on fresh inputs, time against the task baseline.
    Eval(eval_cmd::EvalArgs),
    /// Tune a kernel's parameters, or replay a recorded tuning landscape.
    Tune(tune_cmd::TuneArgs),
    /// Evolve kernels for a task with MAP-Elites (offline mutators), here or on workers.
    Search(search_cmd::SearchCmdArgs),
    /// Task files: `kf task check T.toml` validates one and runs its reference once;
    /// `kf task import-kernelbench PROBLEM.py --out DIR` imports a KernelBench problem.
    Task(task_cmd::TaskArgs),
    /// Evaluate distributed searches' jobs on this machine's device.
    Worker(worker_cmd::WorkerArgs),
    /// Look at the distributed evaluation: `kf cluster status`.
    Cluster(cluster_cmd::ClusterArgs),
    /// List the devices of every backend, with the queue name `kf worker` gives each;
    /// `--characterise` measures their peak GFLOP/s and GB/s.
    Devices(devices_cmd::DevicesArgs),
    /// Look after run directories (`kf run repair DIR`).
    Run(run_cmd::RunArgs),
    /// Benchmarks: `kf bench kernelbench` searches the shipped KernelBench tasks.
    Bench(bench_cmd::BenchArgs),
    /// Write RUN_DIR/report.html: the run explorer as one self-contained page.
    Report(report_cmd::ReportArgs),
    /// Serve the run explorer on 127.0.0.1, updated live while a search writes the run.
    Serve(serve_cmd::ServeArgs),
    /// Re-check a run's best kernel (--all: every elite) on fresh inputs and re-time it.
    Verify(verify_cmd::VerifyArgs),
    /// Write a Rust crate that calls runs' best kernels, with a per-device, per-size dispatch.
    Export(export_cmd::ExportArgs),
    /// Install runtimes (Intel CPU OpenCL; --cuda, --sycl, --numpy) into the per-user folder.
    Setup(setup_cmd::SetupArgs),
}

fn main() -> ExitCode {
    // Evaluation workers are this same binary, re-executed.
    kernelfoundry::init();
    let cli = Cli::parse();
    if cli.allow_unconfined {
        eprintln!(
            "kf: warning: --allow-unconfined: kernels' builds, task references and imported \
             problem files run even where they cannot be fully confined; their code may read, \
             write and send what this user can"
        );
        kernelfoundry::eval::confine::set_process_policy(
            kernelfoundry::eval::confine::ConfinementPolicy::AllowUnconfined,
        );
    }
    let result = match cli.command {
        Command::Eval(args) => eval_cmd::run(args),
        Command::Tune(args) => tune_cmd::run(args),
        Command::Search(args) => search_cmd::run(args),
        Command::Task(args) => task_cmd::run(args),
        Command::Worker(args) => worker_cmd::run(args),
        Command::Cluster(args) => cluster_cmd::run(args),
        Command::Devices(args) => devices_cmd::run(args),
        Command::Run(args) => run_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Verify(args) => verify_cmd::run(args),
        Command::Export(args) => export_cmd::run(args),
        Command::Setup(args) => setup_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One clear line, never a panic.
            eprintln!("kf: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::from(2)
        }
    }
}
