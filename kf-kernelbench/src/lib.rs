//! KernelBench for KernelFoundry: importing its problem files as task files
//! ([`import_kernelbench`]) and benchmarking searches over task folders ([`run_bench`], the
//! `kf bench kernelbench` command).
//!
//! The importer runs third-party Python (the problem file, its reference): always in a child
//! process without this process's secrets and confined with Linux Landlock
//! ([`kf_eval::confine`]) to the Python installation, the runtimes and the problem's folder.
//!
//! The importer's rules (which constants become sizes, how output shapes are inferred) are
//! documented in [`import`](self::import_kernelbench) and in `import_helper.py` beside this file.

mod bench;
mod bench_run;
mod error;
mod import;
mod python;
mod size_constraints;
mod torch_time;

pub use bench::{shipped_tasks, BenchSummary, SpeedupReference, TaskResult};
pub use bench_run::{run_bench, BenchOptions};
pub use error::KernelBenchError;
pub use import::{
    import_kernelbench, parse_size_assignments, ImportOptions, ImportReport, ImportTolerance,
    ReferenceKind, ReferencePreference, SizeBudget, BASELINE_FILE_NAME, KERNELBENCH_TOLERANCE,
    TASK_FILE_NAME,
};
pub use python::{default_python, numpy_available, torch_available};
pub use torch_time::torch_cpu_seconds;
