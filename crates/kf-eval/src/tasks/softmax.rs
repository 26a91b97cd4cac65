//! `softmax`: row-wise softmax in fp32.

use kf_core::{KernelSource, Language, Task, Tolerance};
use rand::{Rng, RngCore};

use super::{
    check_elements, check_names, shipped_kernel, size, ArgSpec, BufferSpec, HostBuffer, KernelTask,
    Role, Sizes,
};
use crate::error::EvalError;

/// Row-wise softmax of a row-major `X[ROWS×COLS]` into `Y`, kernel signature
/// `(int ROWS, int COLS, const float* X, float* Y)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Softmax {
    rows: usize,
    cols: usize,
}

impl Softmax {
    /// From `ROWS` (default 4096) and `COLS` (default 1024).
    pub fn from_sizes(sizes: &Sizes) -> Result<Self, EvalError> {
        check_names("softmax", sizes, &["ROWS", "COLS"])?;
        let s = Softmax {
            rows: size(sizes, "ROWS", 4096)?,
            cols: size(sizes, "COLS", 1024)?,
        };
        check_elements("softmax", s.rows * s.cols)?;
        Ok(s)
    }
}

fn sizes_of(rows: usize, cols: usize) -> Sizes {
    [("ROWS", rows), ("COLS", cols)]
        .into_iter()
        .map(|(name, v)| (name.to_owned(), v as i64))
        .collect()
}

impl KernelTask for Softmax {
    fn name(&self) -> &str {
        "softmax"
    }

    fn sizes(&self) -> Sizes {
        sizes_of(self.rows, self.cols)
    }

    fn describe(&self) -> Task {
        let n = (self.rows * self.cols) as f64;
        let mut t = Task::new("softmax")
            .with_work(5.0 * n, 8.0 * n)
            .with_description(
                "Row-wise softmax of a row-major matrix: Y[r][c] = exp(X[r][c] - max_r) / \
                 sum_c exp(X[r][c] - max_r). Kernel signature: (const int ROWS, const int COLS, \
                 __global const float* X, __global float* Y). X must not be modified.",
            );
        t.sizes = self.sizes();
        t.tolerance = Tolerance::fp32();
        t
    }

    fn resized(&self, sizes: &Sizes) -> Result<Box<dyn KernelTask>, EvalError> {
        Ok(Box::new(Softmax::from_sizes(sizes)?))
    }

    fn alternative_sizes(&self) -> Vec<Sizes> {
        let (r, c) = (self.rows, self.cols);
        [(r / 2, c), (r, c / 2), (r / 2, c * 2), (r * 2, c / 2)]
            .into_iter()
            .filter(|(a, b)| *a > 0 && *b > 0 && (*a, *b) != (r, c))
            .map(|(a, b)| sizes_of(a, b))
            .collect()
    }

    fn buffers(&self) -> Vec<BufferSpec> {
        vec![
            BufferSpec::f32("X", self.rows * self.cols, Role::Input),
            BufferSpec::f32("Y", self.rows * self.cols, Role::Output),
        ]
    }

    fn args(&self) -> Vec<ArgSpec> {
        vec![
            ArgSpec::Size("ROWS".into()),
            ArgSpec::Size("COLS".into()),
            ArgSpec::Buffer(0),
            ArgSpec::Buffer(1),
        ]
    }

    fn generate(&self, rng: &mut dyn RngCore, variant: u32) -> Vec<HostBuffer> {
        // Variant 1 shifts rows by a large offset: a kernel that skips the max subtraction
        // overflows `exp` and is caught.
        let n = self.rows * self.cols;
        let x = (0..n)
            .map(|i| {
                let v = rng.random_range(-4.0f32..4.0);
                match variant % 3 {
                    1 => v + 60.0 + (i / self.cols.max(1)) as f32 % 7.0,
                    2 => v * 0.1,
                    _ => v,
                }
            })
            .collect::<Vec<f32>>();
        vec![x.into(), HostBuffer::F32(Vec::new())]
    }

    fn reference(&self, data: &[HostBuffer]) -> Result<Vec<HostBuffer>, EvalError> {
        let Some(x) = data
            .first()
            .and_then(HostBuffer::as_f32)
            .filter(|x| x.len() == self.rows * self.cols)
        else {
            return Err(EvalError::Backend(
                "softmax reference: input of the wrong shape or type".into(),
            ));
        };
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks(self.cols.max(1)) {
            let m = row
                .iter()
                .fold(f64::NEG_INFINITY, |a, v| a.max(f64::from(*v)));
            let s: f64 = row.iter().map(|v| (f64::from(*v) - m).exp()).sum();
            y.extend(row.iter().map(|v| ((f64::from(*v) - m).exp() / s) as f32));
        }
        Ok(vec![HostBuffer::F32(Vec::new()), y.into()])
    }

    fn baseline(&self, language: Language) -> Option<KernelSource> {
        match language {
            Language::OpenCl => shipped_kernel(
                include_str!("../../kernels/softmax_naive.toml"),
                include_str!("../../kernels/softmax_naive.cl"),
            ),
            Language::Cuda => shipped_kernel(
                include_str!("../../kernels/cuda/softmax_naive.toml"),
                include_str!("../../kernels/cuda/softmax_naive.cu"),
            ),
            Language::Sycl => shipped_kernel(
                include_str!("../../kernels/sycl/softmax_naive.toml"),
                include_str!("../../kernels/sycl/softmax_naive.cpp"),
            ),
            _ => None,
        }
    }
}
