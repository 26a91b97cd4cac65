//! The built-in tasks, `gemm` and `softmax`: task files shipped inside this crate
//! (`tasks/gemm.toml`, `tasks/softmax.toml`) whose references are Rust closures over
//! `ndarray`. They go through exactly the path a user's task file does.

use std::sync::Arc;

use indexmap::IndexMap;
use ndarray::{Array2, ArrayD, Ix2};

use super::spec::{KernelTask, Sizes};
use crate::error::EvalError;
use crate::task::file::{
    ArrayOut, FileTask, ReferenceError, ReferenceInputs, ReferenceRegistry, TaskBase, TaskFile,
};

/// The names of the built-in tasks.
pub const BUILTIN_TASKS: [&str; 2] = ["gemm", "softmax"];

/// Files of the built-in tasks, by the relative paths the task files use.
static FILES: &[(&str, &str)] = &[
    ("gemm.toml", include_str!("../../tasks/gemm.toml")),
    ("softmax.toml", include_str!("../../tasks/softmax.toml")),
    (
        "../kernels/gemm_naive.toml",
        include_str!("../../kernels/gemm_naive.toml"),
    ),
    (
        "../kernels/gemm_naive.cl",
        include_str!("../../kernels/gemm_naive.cl"),
    ),
    (
        "../kernels/cuda/gemm_naive.toml",
        include_str!("../../kernels/cuda/gemm_naive.toml"),
    ),
    (
        "../kernels/cuda/gemm_naive.cu",
        include_str!("../../kernels/cuda/gemm_naive.cu"),
    ),
    (
        "../kernels/sycl/gemm_naive.toml",
        include_str!("../../kernels/sycl/gemm_naive.toml"),
    ),
    (
        "../kernels/sycl/gemm_naive.cpp",
        include_str!("../../kernels/sycl/gemm_naive.cpp"),
    ),
    (
        "../kernels/softmax_naive.toml",
        include_str!("../../kernels/softmax_naive.toml"),
    ),
    (
        "../kernels/softmax_naive.cl",
        include_str!("../../kernels/softmax_naive.cl"),
    ),
    (
        "../kernels/cuda/softmax_naive.toml",
        include_str!("../../kernels/cuda/softmax_naive.toml"),
    ),
    (
        "../kernels/cuda/softmax_naive.cu",
        include_str!("../../kernels/cuda/softmax_naive.cu"),
    ),
    (
        "../kernels/sycl/softmax_naive.toml",
        include_str!("../../kernels/sycl/softmax_naive.toml"),
    ),
    (
        "../kernels/sycl/softmax_naive.cpp",
        include_str!("../../kernels/sycl/softmax_naive.cpp"),
    ),
];

/// The built-in task file `name` (`gemm`, `softmax`), parsed and validated.
pub fn builtin_task_file(name: &str) -> Result<TaskFile, EvalError> {
    let file = format!("{name}.toml");
    let Some((_, text)) = FILES.iter().find(|(p, _)| *p == file) else {
        return Err(EvalError::UnknownTask {
            name: name.to_owned(),
            known: BUILTIN_TASKS.join(", "),
        });
    };
    Ok(TaskFile::parse(
        text,
        &format!("<built-in {file}>"),
        TaskBase::Embedded(FILES),
    )?)
}

/// A built-in task by name at the given sizes (missing sizes take the task's defaults).
pub fn builtin_task(name: &str, sizes: &Sizes) -> Result<Box<dyn KernelTask>, EvalError> {
    Ok(Box::new(builtin_file_task(name, sizes)?))
}

fn builtin_file_task(name: &str, sizes: &Sizes) -> Result<FileTask, EvalError> {
    let file = builtin_task_file(name)?;
    Ok(FileTask::with_references(
        Arc::new(file),
        sizes,
        Arc::new(builtin_references()),
    )?)
}

/// The Rust references of the built-in tasks: `gemm` and `softmax`, computed in f64 and
/// returned in f32. Task files may name them too (`[reference] rust = "gemm"`).
pub fn builtin_references() -> ReferenceRegistry {
    ReferenceRegistry::new()
        .with("gemm", gemm_reference)
        .with("softmax", softmax_reference)
}

fn matrix(inputs: &ReferenceInputs<'_>, name: &str) -> Result<Array2<f64>, ReferenceError> {
    inputs
        .array(name)?
        .to_f64()
        .into_dimensionality::<Ix2>()
        .map_err(|source| ReferenceError::NotAMatrix {
            name: name.to_owned(),
            source,
        })
}

fn gemm_reference(
    inputs: &ReferenceInputs<'_>,
) -> Result<IndexMap<String, ArrayOut>, ReferenceError> {
    let c = matrix(inputs, "A")?.dot(&matrix(inputs, "B")?);
    let mut out = IndexMap::new();
    out.insert(
        "C".to_owned(),
        ArrayOut::F32(c.mapv(|v| v as f32).into_dyn()),
    );
    Ok(out)
}

fn softmax_reference(
    inputs: &ReferenceInputs<'_>,
) -> Result<IndexMap<String, ArrayOut>, ReferenceError> {
    let mut x = matrix(inputs, "X")?;
    for mut row in x.rows_mut() {
        let m = row.fold(f64::NEG_INFINITY, |a, v| a.max(*v));
        row.mapv_inplace(|v| (v - m).exp());
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    let y: ArrayD<f32> = x.mapv(|v| v as f32).into_dyn();
    let mut out = IndexMap::new();
    out.insert("Y".to_owned(), ArrayOut::F32(y));
    Ok(out)
}

/// The built-in `gemm`: row-major SGEMM `C[M×N] = A[M×K] · B[K×N]`, kernel signature
/// `(int M, int N, int K, const float* A, const float* B, float* C)`.
#[derive(Debug, Clone, Copy)]
pub struct Gemm;

impl Gemm {
    /// `gemm` at `M`, `N`, `K` (the task file `tasks/gemm.toml`).
    #[allow(clippy::new_ret_no_self)] // the task is a FileTask: one path for every task
    pub fn new(m: usize, n: usize, k: usize) -> Result<FileTask, EvalError> {
        let sizes: Sizes = [("M", m), ("N", n), ("K", k)]
            .into_iter()
            .map(|(name, v)| (name.to_owned(), i64::try_from(v).unwrap_or(i64::MAX)))
            .collect();
        Self::from_sizes(&sizes)
    }

    /// `gemm` at `M`, `N`, `K` (each defaulting to 1024).
    pub fn from_sizes(sizes: &Sizes) -> Result<FileTask, EvalError> {
        builtin_file_task("gemm", sizes)
    }
}

/// The built-in `softmax`: row-wise softmax of a row-major `X[ROWS×COLS]` into `Y`, kernel
/// signature `(int ROWS, int COLS, const float* X, float* Y)`.
#[derive(Debug, Clone, Copy)]
pub struct Softmax;

impl Softmax {
    /// `softmax` at `ROWS` (default 4096) and `COLS` (default 1024).
    pub fn from_sizes(sizes: &Sizes) -> Result<FileTask, EvalError> {
        builtin_file_task("softmax", sizes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::Role;
    use crate::task::host::HostBuffer;
    use kf_core::Language;

    #[test]
    fn builtin_task_files_load_with_baselines_in_every_language() {
        for name in BUILTIN_TASKS {
            let t = builtin_task(name, &Sizes::new()).unwrap();
            assert_eq!(t.name(), name);
            for l in [Language::OpenCl, Language::Cuda, Language::Sycl] {
                assert!(t.baseline(l).is_some(), "{name} has no {l:?} baseline");
            }
        }
        assert!(matches!(
            builtin_task("conv", &Sizes::new()),
            Err(EvalError::UnknownTask { .. })
        ));
    }

    #[test]
    fn gemm_reference_is_the_matrix_product() {
        let g = Gemm::new(2, 2, 3).unwrap();
        assert_eq!(g.buffers()[2].role, Role::Output);
        let a = HostBuffer::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = HostBuffer::F32(vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        let r = g.reference(&[a, b, HostBuffer::F32(Vec::new())]).unwrap();
        assert_eq!(r[2], HostBuffer::F32(vec![4.0, 5.0, 10.0, 11.0]));
        // Alternatives: the same shapes the hand-written task gave, in its order.
        let alts = Gemm::new(8, 6, 4).unwrap().alternative_sizes();
        let first: Vec<i64> = alts[0].values().copied().collect();
        assert_eq!(first, vec![4, 6, 2]);
        assert_eq!(alts.len(), 7);
    }

    #[test]
    fn softmax_reference_rows_sum_to_one() {
        let s =
            Softmax::from_sizes(&crate::task::spec::parse_sizes("ROWS=2,COLS=3").unwrap()).unwrap();
        let x = HostBuffer::F32(vec![1.0, 2.0, 3.0, 100.0, 100.0, 100.0]);
        let r = s.reference(&[x, HostBuffer::F32(Vec::new())]).unwrap();
        let y = r[1].to_f64();
        assert!((y[0] + y[1] + y[2] - 1.0).abs() < 1e-6);
        assert!((y[3] - 1.0 / 3.0).abs() < 1e-6);
    }
}
