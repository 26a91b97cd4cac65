//! A program's own backend factory reaches its isolated workers: the worker (this test binary,
//! re-executed) serves through a `BackendRegistry`, opens the backend the spec names among
//! those registered, and answers a spec naming another with an error that lists them. Real
//! OpenCL workers; skips only when the runtime is not installed, unless `KF_REQUIRE_OPENCL=1`.

use kf_backend_opencl::{OpenClBackend, OpenClError};
use kf_core::Language;
use kf_eval::task::parse_sizes;
use kf_eval::worker::{TaskRegistry, WORKER_ENV};
use kf_eval::{BackendFactory, BackendRegistry, BackendSpec, IsolatedEvaluator, WorkerCommand};

/// The OpenCL backend under a name of this program's own.
struct MyOpenCl;

impl BackendFactory for MyOpenCl {
    type Backend = OpenClBackend;
    type Error = OpenClError;

    fn name(&self) -> &str {
        "my-opencl"
    }

    fn language(&self) -> Language {
        Language::OpenCl
    }

    fn open(&self, _spec: &BackendSpec) -> Result<OpenClBackend, OpenClError> {
        OpenClBackend::builder().build()
    }
}

/// The worker entry of this test binary: what `kernelfoundry::init_with` does in a program.
#[test]
#[ignore = "a child process of another test: runs only with --ignored"]
fn kf_eval_worker_entry() {
    if std::env::var(WORKER_ENV).is_ok() {
        BackendRegistry::new()
            .with(MyOpenCl)
            .serve_if_requested(&TaskRegistry::builtin());
    }
}

fn evaluator(backend: &str) -> IsolatedEvaluator {
    IsolatedEvaluator::builder(
        BackendSpec::new(backend),
        "softmax",
        parse_sizes("ROWS=8,COLS=32").unwrap(),
    )
    .command(WorkerCommand::test_harness().unwrap())
    .build()
}

#[test]
fn the_worker_opens_the_registered_backend_its_spec_names() {
    if kf_backend_opencl::testing::backend_or_skip().is_none() {
        return;
    }
    let mine = evaluator("my-opencl");
    let device = mine.device().expect("the worker opened my-opencl");
    assert!(!device.name.is_empty());
    mine.shutdown();

    let other = evaluator("cuda");
    let err = other.device().expect_err("cuda is not registered here");
    let text = err.to_string();
    assert!(
        text.contains("no backend named `cuda`") && text.contains("my-opencl"),
        "{text}"
    );
    other.shutdown();
}
