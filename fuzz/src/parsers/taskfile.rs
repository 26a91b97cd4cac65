//! Task files (`kf_eval::task::file::TaskFile::parse`): the TOML schema, its validation (names,
//! args, dtypes, shapes, init distributions, tolerances, work and alternative-size
//! expressions), and what the evaluator derives from a task file before allocating anything:
//! completed sizes, buffer shapes and element counts (checked against `MAX_ELEMENTS` and
//! `MAX_BUFFER_BYTES`), work, alternative sizes and the baseline kernel's manifest. Files the
//! task names are resolved among the repository's example files compiled in (no file system
//! access). Bounded to 64 KiB.

use crate::MAX_INPUT;
use kf_eval::task::file::{TaskBase, TaskFile, MAX_BUFFER_BYTES, MAX_ELEMENTS};
use kf_eval::task::Sizes;

macro_rules! file {
    ($dir:literal, $name:literal) => {
        ($name, include_str!(concat!("../../../", $dir, "/", $name)))
    };
}

static FILES: &[(&str, &str)] = &[
    file!("tasks/examples/scaled_swish", "scaled_swish_ref.py"),
    file!("tasks/examples/scaled_swish", "scaled_swish_naive.toml"),
    file!("tasks/examples/scaled_swish", "scaled_swish_naive.cl"),
    file!("tasks/examples/scaled_swish", "scaled_swish_fast.toml"),
    file!("tasks/examples/scaled_swish", "scaled_swish_fast.cl"),
    file!("kf-eval/tests/taskfiles", "affine_i32_ref.py"),
    file!("kf-eval/tests/taskfiles", "affine_i32_kernel.toml"),
    file!("kf-eval/tests/taskfiles", "affine_i32.cl"),
    file!("kf-eval/tests/taskfiles", "scale_f16_kernel.toml"),
    file!("kf-eval/tests/taskfiles", "scale_f16.cl"),
];

/// The target: one input.
pub fn run(data: &[u8]) {
    if data.len() > MAX_INPUT {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(task) = TaskFile::parse(text, "fuzz.toml", TaskBase::Embedded(FILES)) else {
        return;
    };
    let _ = task.content_hash();
    for name in &task.spec.args {
        let _ = task.arg_kind(name);
    }
    for i in 0..task.spec.buffers.len() {
        let _ = task.inits(i);
    }
    let Ok(sizes) = task.complete_sizes(&Sizes::new()) else {
        return;
    };
    let mut all = vec![sizes.clone()];
    for i in 0..task.alternative_count().min(8) {
        if let Ok(alt) = task.alternative(i, &sizes) {
            all.push(alt);
        }
    }
    for sizes in &all {
        // Whatever the evaluator is told to allocate is within the stated limits.
        if let Ok(counts) = task.buffer_elements(sizes) {
            for (n, b) in counts.iter().zip(&task.spec.buffers) {
                assert!(*n <= MAX_ELEMENTS && n * b.dtype.size() <= MAX_BUFFER_BYTES);
            }
        }
        if let Ok(shapes) = task.buffer_shapes(sizes) {
            assert_eq!(shapes.len(), task.spec.buffers.len());
        }
        let _ = task.work(sizes);
    }
    if let Some(baseline) = &task.spec.baseline {
        for rel in baseline.kernel.to_vec().iter().take(4) {
            let _ = task.kernel_manifest(rel, "baseline.kernel");
        }
    }
}
