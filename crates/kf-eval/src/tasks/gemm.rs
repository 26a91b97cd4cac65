//! `gemm`: row-major `C = A × B` in fp32.

use kf_core::{KernelSource, Language, Task, Tolerance};
use ndarray::{Array2, ArrayView2};
use rand::{Rng, RngCore};

use super::{
    check_elements, check_names, shipped_kernel, size, ArgSpec, BufferSpec, HostBuffer, KernelTask,
    Role, Sizes,
};
use crate::error::EvalError;

/// Row-major SGEMM, `C[M×N] = A[M×K] · B[K×N]`, kernel signature
/// `(int M, int N, int K, const float* A, const float* B, float* C)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gemm {
    m: usize,
    n: usize,
    k: usize,
}

impl Gemm {
    /// A GEMM of the given sizes.
    pub fn new(m: usize, n: usize, k: usize) -> Result<Self, EvalError> {
        let sizes: Sizes = [("M", m), ("N", n), ("K", k)]
            .into_iter()
            .map(|(name, v)| (name.to_owned(), i64::try_from(v).unwrap_or(i64::MAX)))
            .collect();
        Self::from_sizes(&sizes)
    }

    /// From `M`, `N`, `K` (each defaulting to 1024).
    pub fn from_sizes(sizes: &Sizes) -> Result<Self, EvalError> {
        check_names("gemm", sizes, &["M", "N", "K"])?;
        let g = Gemm {
            m: size(sizes, "M", 1024)?,
            n: size(sizes, "N", 1024)?,
            k: size(sizes, "K", 1024)?,
        };
        for e in [g.m * g.k, g.k * g.n, g.m * g.n] {
            check_elements("gemm", e)?;
        }
        Ok(g)
    }
}

fn sizes_of(m: usize, n: usize, k: usize) -> Sizes {
    [("M", m), ("N", n), ("K", k)]
        .into_iter()
        .map(|(name, v)| (name.to_owned(), v as i64))
        .collect()
}

impl KernelTask for Gemm {
    fn name(&self) -> &str {
        "gemm"
    }

    fn sizes(&self) -> Sizes {
        sizes_of(self.m, self.n, self.k)
    }

    fn describe(&self) -> Task {
        let (m, n, k) = (self.m as f64, self.n as f64, self.k as f64);
        let mut t = Task::new("gemm")
            .with_work(2.0 * m * n * k, 4.0 * (m * k + k * n + m * n))
            .with_description(
                "Row-major single-precision matrix product C[M x N] = A[M x K] * B[K x N]. \
                 Kernel signature: (const int M, const int N, const int K, \
                 __global const float* A, __global const float* B, __global float* C). \
                 A and B must not be modified; every element of C must be written.",
            );
        t.sizes = self.sizes();
        t.tolerance = Tolerance::fp32();
        t
    }

    fn resized(&self, sizes: &Sizes) -> Result<Box<dyn KernelTask>, EvalError> {
        Ok(Box::new(Gemm::from_sizes(sizes)?))
    }

    fn alternative_sizes(&self) -> Vec<Sizes> {
        let (m, n, k) = (self.m, self.n, self.k);
        let mut out = Vec::new();
        for (a, b, c) in [
            (m / 2, n, k / 2),
            (m, n / 2, k / 2),
            (m / 2, n / 2, k),
            (n, m, k),
            (m / 2, n, k),
            (m, n / 2, k),
            (m, n, k / 2),
        ] {
            if a > 0 && b > 0 && c > 0 && (a, b, c) != (m, n, k) {
                out.push(sizes_of(a, b, c));
            }
        }
        out
    }

    fn buffers(&self) -> Vec<BufferSpec> {
        vec![
            BufferSpec::f32("A", self.m * self.k, Role::Input),
            BufferSpec::f32("B", self.k * self.n, Role::Input),
            BufferSpec::f32("C", self.m * self.n, Role::Output),
        ]
    }

    fn args(&self) -> Vec<ArgSpec> {
        vec![
            ArgSpec::Size("M".into()),
            ArgSpec::Size("N".into()),
            ArgSpec::Size("K".into()),
            ArgSpec::Buffer(0),
            ArgSpec::Buffer(1),
            ArgSpec::Buffer(2),
        ]
    }

    fn generate(&self, rng: &mut dyn RngCore, variant: u32) -> Vec<HostBuffer> {
        // Positive values keep sums away from zero so that the relative tolerance is
        // meaningful; the variants change the scale and add a sparse set of zeros.
        let (lo, hi) = match variant % 3 {
            0 => (0.0f32, 1.0f32),
            1 => (0.5, 2.0),
            _ => (0.0, 0.25),
        };
        let mut fill = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| {
                    if variant % 3 == 2 && rng.random::<f32>() < 0.05 {
                        0.0
                    } else {
                        rng.random_range(lo..hi)
                    }
                })
                .collect()
        };
        let a = fill(self.m * self.k);
        let b = fill(self.k * self.n);
        vec![a.into(), b.into(), HostBuffer::F32(Vec::new())]
    }

    fn reference(&self, data: &[HostBuffer]) -> Result<Vec<HostBuffer>, EvalError> {
        let to64 = |v: &[f32], r: usize, c: usize| -> Option<Array2<f64>> {
            ArrayView2::from_shape((r, c), v)
                .ok()
                .map(|a| a.mapv(f64::from))
        };
        let (Some(a), Some(b)) = (
            data.first()
                .and_then(HostBuffer::as_f32)
                .and_then(|a| to64(a, self.m, self.k)),
            data.get(1)
                .and_then(HostBuffer::as_f32)
                .and_then(|b| to64(b, self.k, self.n)),
        ) else {
            return Err(EvalError::Backend(
                "gemm reference: inputs of the wrong shape or type".into(),
            ));
        };
        let c = a.dot(&b);
        Ok(vec![
            HostBuffer::F32(Vec::new()),
            HostBuffer::F32(Vec::new()),
            c.iter().map(|v| *v as f32).collect::<Vec<_>>().into(),
        ])
    }

    fn baseline(&self, language: Language) -> Option<KernelSource> {
        match language {
            Language::OpenCl => shipped_kernel(
                include_str!("../../kernels/gemm_naive.toml"),
                include_str!("../../kernels/gemm_naive.cl"),
            ),
            Language::Cuda => shipped_kernel(
                include_str!("../../kernels/cuda/gemm_naive.toml"),
                include_str!("../../kernels/cuda/gemm_naive.cu"),
            ),
            Language::Sycl => shipped_kernel(
                include_str!("../../kernels/sycl/gemm_naive.toml"),
                include_str!("../../kernels/sycl/gemm_naive.cpp"),
            ),
            _ => None,
        }
    }
}
