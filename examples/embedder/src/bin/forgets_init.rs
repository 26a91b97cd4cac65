//! A program that forgets `kernelfoundry::init()`: its evaluation worker re-executes this
//! `main`, which must not start workers of its own. It fails within seconds at its first
//! evaluation with an error that names `init()`, having started one extra process.
//!
//! When `KF_EMBEDDER_STARTS` names a file, every start of this program appends its pid to it,
//! so a test can count the processes.

use std::io::Write;

use kernelfoundry::core::{KernelSource, Language, ParamValues};
use kernelfoundry::eval::task::parse_sizes;
use kernelfoundry::eval::{BackendSpec, IsolatedEvaluator};

fn main() -> anyhow::Result<()> {
    // Deliberately no `kernelfoundry::init()` here.
    if let Some(path) = std::env::var_os("KF_EMBEDDER_STARTS") {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        f.write_all(format!("{}\n", std::process::id()).as_bytes())?;
        // Only with a broken guard: keep a runaway chain short for the test that counts.
        if std::fs::read_to_string(&path)?.lines().count() > 6 {
            std::process::exit(4);
        }
    }
    let sizes = parse_sizes("M=64,N=64,K=64")?;
    let evaluator = IsolatedEvaluator::builder(BackendSpec::new("opencl"), "gemm", sizes).build();
    let kernel = KernelSource::new(Language::OpenCl, "gemm", "__kernel void gemm() {}");
    let evaluation = evaluator.evaluate_blocking(&kernel, &ParamValues::new())?;
    println!("evaluated: {}", evaluation.status);
    Ok(())
}
