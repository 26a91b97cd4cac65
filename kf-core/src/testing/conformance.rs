//! A conformance suite for [`Backend`] implementations, written once and run by every backend
//! crate's integration test (as burn runs one test suite against all its backends).
//!
//! The suite holds its test kernels in each [`Language`] (OpenCL C, CUDA C++, SYCL free-function
//! kernels) and picks the first language the backend lists in [`Backend::languages`]. Every check
//! is a function returning `Ok(detail)` or a [`CheckError`] (failed, or skipped where the check
//! does not apply); [`run`] runs them all, turns a panic into a failure ("a backend must return
//! errors, never panic"), and returns a [`ConformanceReport`].
//!
//! A backend crate's `tests/conformance.rs` is typically:
//!
//! ```ignore
//! #[test]
//! fn conformance() {
//!     let backend = match MyBackend::new() {
//!         Ok(b) => b,
//!         Err(e) if e.kind() == BackendErrorKind::Unavailable => {
//!             // Prints `SKIPPED: …` and records it, or fails under KF_REQUIRE_MYBACKEND=1.
//!             kf_core::testing::skip::skip(kf_core::testing::skip::SkipKind::Other("MYBACKEND"), e);
//!             return;
//!         }
//!         Err(e) => panic!("{e}"),
//!     };
//!     let report = kf_core::testing::conformance::run(&backend);
//!     println!("{report}");
//!     assert!(report.passed(), "{report}");
//! }
//! ```
//!
//! # Conventions the kernels rely on
//!
//! * [`NdRange`] sizes are in work-items; dimension 0 is `get_global_id(0)` in OpenCL C,
//!   `blockIdx.x * blockDim.x + threadIdx.x` in CUDA, and `get_nd_item<N>().get_global_id(0)` in
//!   SYCL (a SYCL backend passes the sizes in the same order, unreversed).
//! * Kernel arguments are positional. [`KernelArg::Local`]`(n)` is a `__local` pointer parameter
//!   in OpenCL C, a `sycl::local_accessor<char, 1>` of `n` bytes in SYCL, and the launch's
//!   dynamic shared memory in CUDA (no parameter: `extern __shared__`).
//! * `I32`, `U32`, `I64`, `F32` are `int`, `uint`/`unsigned int`, `long`/`long long`, `float`.
//! * Definitions arrive as `-D NAME=value`; CUDA and SYCL entry points are `extern "C"` so that
//!   the entry name is the function name.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use crate::kernel::{KernelSource, Language, ParamValues};
use crate::traits::backend::{
    Backend, BackendError, BackendErrorKind, CompileOptions, KernelArg, NdRange,
};

/// The test kernels of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TestKernel {
    /// `vector_add(a, b, c, int n)`: `c[i] = a[i] + b[i]` for `i < n`.
    VectorAdd,
    /// `scaled_copy(x, y, float alpha, uint n)`: `y[i] = alpha * x[i]` for `i < n`.
    ScaledCopy,
    /// `defines(const T* x, T* y, int n)`: `y[i] = x[i] * SCALE + OFFSET`, with `T`, `SCALE`,
    /// `OFFSET` given as definitions.
    Defines,
    /// `local_reverse(x, y, local)`: reverses each work-group's slice through local memory.
    LocalReverse,
    /// `fill_2d(out, long stride)`: `out[y * stride + x] = x + 1000 * y` over a 2-D range.
    Fill2d,
    /// `broken(x)`: does not compile (an undeclared identifier).
    Broken,
}

impl TestKernel {
    /// The entry point's name.
    pub fn entry(self) -> &'static str {
        match self {
            TestKernel::VectorAdd => "vector_add",
            TestKernel::ScaledCopy => "scaled_copy",
            TestKernel::Defines => "defines",
            TestKernel::LocalReverse => "local_reverse",
            TestKernel::Fill2d => "fill_2d",
            TestKernel::Broken => "broken",
        }
    }
}

/// The languages the suite has kernels for.
pub const LANGUAGES: [Language; 3] = [Language::OpenCl, Language::Cuda, Language::Sycl];

/// The source of a test kernel in a language.
pub fn test_kernel(language: Language, kernel: TestKernel) -> KernelSource {
    let text = match language {
        Language::OpenCl => opencl(kernel),
        Language::Cuda => cuda(kernel),
        Language::Sycl => sycl(kernel),
    };
    KernelSource::new(language, kernel.entry(), text)
}

fn opencl(kernel: TestKernel) -> String {
    match kernel {
        TestKernel::VectorAdd => "\
__kernel void vector_add(__global const float* a, __global const float* b,
                         __global float* c, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
"
        .into(),
        TestKernel::ScaledCopy => "\
__kernel void scaled_copy(__global const float* x, __global float* y, float alpha, uint n) {
    uint i = get_global_id(0);
    if (i < n) y[i] = alpha * x[i];
}
"
        .into(),
        TestKernel::Defines => "\
__kernel void defines(__global const T* x, __global T* y, int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = x[i] * (T)(SCALE) + (T)(OFFSET);
}
"
        .into(),
        TestKernel::LocalReverse => "\
__kernel void local_reverse(__global const float* x, __global float* y, __local float* tmp) {
    size_t lid = get_local_id(0), lsz = get_local_size(0), gid = get_global_id(0);
    tmp[lid] = x[gid];
    barrier(CLK_LOCAL_MEM_FENCE);
    y[gid] = tmp[lsz - 1 - lid];
}
"
        .into(),
        TestKernel::Fill2d => "\
__kernel void fill_2d(__global float* out, long stride) {
    size_t x = get_global_id(0), y = get_global_id(1);
    out[y * stride + x] = (float)(x + 1000 * y);
}
"
        .into(),
        TestKernel::Broken => "\
__kernel void broken(__global float* x) {
    x[0] = this_identifier_is_not_declared;
}
"
        .into(),
    }
}

fn cuda(kernel: TestKernel) -> String {
    match kernel {
        TestKernel::VectorAdd => "\
extern \"C\" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"
        .into(),
        TestKernel::ScaledCopy => "\
extern \"C\" __global__ void scaled_copy(const float* x, float* y, float alpha, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i];
}
"
        .into(),
        TestKernel::Defines => "\
extern \"C\" __global__ void defines(const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * (T)(SCALE) + (T)(OFFSET);
}
"
        .into(),
        TestKernel::LocalReverse => "\
extern \"C\" __global__ void local_reverse(const float* x, float* y) {
    extern __shared__ float tmp[];
    unsigned int lid = threadIdx.x, lsz = blockDim.x;
    unsigned int gid = blockIdx.x * blockDim.x + threadIdx.x;
    tmp[lid] = x[gid];
    __syncthreads();
    y[gid] = tmp[lsz - 1 - lid];
}
"
        .into(),
        TestKernel::Fill2d => "\
extern \"C\" __global__ void fill_2d(float* out, long long stride) {
    size_t x = blockIdx.x * blockDim.x + threadIdx.x;
    size_t y = blockIdx.y * blockDim.y + threadIdx.y;
    out[y * stride + x] = (float)(x + 1000 * y);
}
"
        .into(),
        TestKernel::Broken => "\
extern \"C\" __global__ void broken(float* x) {
    x[0] = this_identifier_is_not_declared;
}
"
        .into(),
    }
}

fn sycl(kernel: TestKernel) -> String {
    const PRELUDE: &str = "\
#include <sycl/sycl.hpp>
namespace syclext = sycl::ext::oneapi;
namespace syclexp = sycl::ext::oneapi::experimental;

";
    let body = match kernel {
        TestKernel::VectorAdd => {
            "\
extern \"C\" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void vector_add(const float* a, const float* b, float* c, int n) {
    size_t i = syclext::this_work_item::get_nd_item<1>().get_global_id(0);
    if (i < (size_t)n) c[i] = a[i] + b[i];
}
"
        }
        TestKernel::ScaledCopy => {
            "\
extern \"C\" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void scaled_copy(const float* x, float* y, float alpha, unsigned int n) {
    size_t i = syclext::this_work_item::get_nd_item<1>().get_global_id(0);
    if (i < n) y[i] = alpha * x[i];
}
"
        }
        TestKernel::Defines => {
            "\
extern \"C\" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void defines(const T* x, T* y, int n) {
    size_t i = syclext::this_work_item::get_nd_item<1>().get_global_id(0);
    if (i < (size_t)n) y[i] = x[i] * (T)(SCALE) + (T)(OFFSET);
}
"
        }
        TestKernel::LocalReverse => {
            "\
extern \"C\" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void local_reverse(const float* x, float* y, sycl::local_accessor<char, 1> scratch) {
    sycl::nd_item<1> it = syclext::this_work_item::get_nd_item<1>();
    float* tmp = reinterpret_cast<float*>(
        scratch.get_multi_ptr<sycl::access::decorated::no>().get());
    size_t lid = it.get_local_id(0), lsz = it.get_local_range(0), gid = it.get_global_id(0);
    tmp[lid] = x[gid];
    sycl::group_barrier(it.get_group());
    y[gid] = tmp[lsz - 1 - lid];
}
"
        }
        TestKernel::Fill2d => {
            "\
extern \"C\" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void fill_2d(float* out, long long stride) {
    sycl::nd_item<2> it = syclext::this_work_item::get_nd_item<2>();
    size_t x = it.get_global_id(0), y = it.get_global_id(1);
    out[y * stride + x] = (float)(x + 1000 * y);
}
"
        }
        TestKernel::Broken => {
            "\
extern \"C\" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void broken(float* x) {
    x[0] = this_identifier_is_not_declared;
}
"
        }
    };
    format!("{PRELUDE}{body}")
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The check passed; the text says what was measured.
    Passed(String),
    /// The check failed, with the reason.
    Failed(String),
    /// The check did not apply to this backend.
    Skipped(String),
}

/// One check's name, outcome and duration.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The check's name (one of [`CHECKS`]).
    pub name: &'static str,
    /// What happened.
    pub outcome: Outcome,
    /// Wall-clock seconds the check took.
    pub seconds: f64,
}

/// The result of [`run`].
#[derive(Debug, Clone)]
pub struct ConformanceReport {
    /// The backend's name.
    pub backend: String,
    /// The device's name.
    pub device: String,
    /// The language whose kernels were used, if the backend offers one the suite knows.
    pub language: Option<Language>,
    /// One entry per check, in order.
    pub checks: Vec<CheckReport>,
}

impl ConformanceReport {
    /// True when no check failed.
    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &CheckReport> {
        self.checks
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed(_)))
    }

    /// The report of one check, by name.
    pub fn check(&self, name: &str) -> Option<&CheckReport> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// `Ok(self)` when every check passed or was skipped, else the report as an error.
    pub fn into_result(self) -> Result<Self, ConformanceFailure> {
        if self.passed() {
            Ok(self)
        } else {
            Err(ConformanceFailure(self))
        }
    }
}

impl fmt::Display for ConformanceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lang = self.language.map_or("none", Language::as_str);
        writeln!(
            f,
            "conformance of backend `{}` on `{}` ({lang} kernels):",
            self.backend, self.device
        )?;
        for c in &self.checks {
            let (tag, text) = match &c.outcome {
                Outcome::Passed(t) => ("ok  ", t),
                Outcome::Failed(t) => ("FAIL", t),
                Outcome::Skipped(t) => ("skip", t),
            };
            writeln!(f, "  [{tag}] {:<22} {:>8.3}s  {text}", c.name, c.seconds)?;
        }
        let failed = self.failures().count();
        write!(f, "  {} checks, {} failed", self.checks.len(), failed)
    }
}

/// A report with at least one failed check.
#[derive(Debug, Clone)]
pub struct ConformanceFailure(pub ConformanceReport);

impl fmt::Display for ConformanceFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ConformanceFailure {}

/// The result of one check: `Ok(detail)`, or why it failed or did not apply.
pub type CheckResult = Result<String, CheckError>;

/// Why a check did not pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The check does not apply to this backend (a capability it does not offer).
    #[error("skip: {0}")]
    Skipped(String),
    /// The backend failed the check: what went wrong.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for CheckError {
    fn from(reason: String) -> Self {
        CheckError::Failed(reason)
    }
}

impl From<&str> for CheckError {
    fn from(reason: &str) -> Self {
        CheckError::Failed(reason.to_owned())
    }
}

/// A check: takes the backend and the language of the kernels to use.
pub type Check<B> = fn(&B, Language) -> CheckResult;

/// The names of the checks, in the order [`run`] runs them.
pub const CHECKS: [&str; 12] = [
    "device_facts",
    "buffer_round_trip",
    "compile_with_definitions",
    "compile_error",
    "vector_add",
    "scaled_copy",
    "buffer_offsets",
    "local_memory",
    "nd_range_2d",
    "launch_timing",
    "bad_launch_geometry",
    "flush_caches",
];

fn checks<B: Backend>() -> [(&'static str, Check<B>); 12] {
    [
        ("device_facts", check_device_facts::<B>),
        ("buffer_round_trip", check_buffer_round_trip::<B>),
        (
            "compile_with_definitions",
            check_compile_with_definitions::<B>,
        ),
        ("compile_error", check_compile_error::<B>),
        ("vector_add", check_vector_add::<B>),
        ("scaled_copy", check_scaled_copy::<B>),
        ("buffer_offsets", check_buffer_offsets::<B>),
        ("local_memory", check_local_memory::<B>),
        ("nd_range_2d", check_nd_range_2d::<B>),
        ("launch_timing", check_launch_timing::<B>),
        ("bad_launch_geometry", check_bad_launch_geometry::<B>),
        ("flush_caches", check_flush_caches::<B>),
    ]
}

/// The language of the suite's kernels to use with `backend`: the first of its languages the
/// suite has kernels for.
pub fn pick_language<B: Backend>(backend: &B) -> Option<Language> {
    backend
        .languages()
        .iter()
        .copied()
        .find(|l| LANGUAGES.contains(l))
}

/// Runs every check (see [`CHECKS`]) against `backend`.
pub fn run<B: Backend>(backend: &B) -> ConformanceReport {
    run_only(backend, &CHECKS)
}

/// Runs the named checks (unknown names are ignored).
pub fn run_only<B: Backend>(backend: &B, names: &[&str]) -> ConformanceReport {
    let language = pick_language(backend);
    let mut report = ConformanceReport {
        backend: backend.name().to_owned(),
        device: backend.device().name.clone(),
        language,
        checks: Vec::new(),
    };
    for (name, check) in checks::<B>() {
        if !names.contains(&name) {
            continue;
        }
        let started = Instant::now();
        let outcome = match language {
            None => Outcome::Failed(format!(
                "the suite has no kernels in any of the backend's languages {:?}",
                backend.languages()
            )),
            Some(lang) => match catch_unwind(AssertUnwindSafe(|| check(backend, lang))) {
                Ok(Ok(detail)) => Outcome::Passed(detail),
                Ok(Err(CheckError::Skipped(why))) => Outcome::Skipped(why.trim().to_owned()),
                Ok(Err(CheckError::Failed(reason))) => Outcome::Failed(reason),
                Err(panic) => Outcome::Failed(format!("panicked: {}", panic_text(&*panic))),
            },
        };
        report.checks.push(CheckReport {
            name,
            outcome,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    report
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_owned()
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn e<E: BackendError>(what: &str) -> impl FnOnce(E) -> CheckError + '_ {
    move |err| CheckError::Failed(format!("{what}: {err} (kind {:?})", err.kind()))
}

fn bytes_of(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

fn floats_of(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Deterministic values in [-1, 1) (a 64-bit LCG; no dependency).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn close(got: f32, want: f32) -> bool {
    got.is_finite() && (got - want).abs() <= 1e-6 + 1e-5 * want.abs()
}

fn compare(got: &[f32], want: &[f32]) -> Result<(), CheckError> {
    if got.len() != want.len() {
        return Err(format!("{} values, expected {}", got.len(), want.len()).into());
    }
    match got.iter().zip(want).position(|(g, w)| !close(*g, *w)) {
        None => Ok(()),
        Some(i) => Err(format!("element {i}: got {}, expected {}", got[i], want[i]).into()),
    }
}

fn upload<B: Backend>(backend: &B, data: &[f32]) -> Result<B::Buffer, CheckError> {
    let bytes = bytes_of(data);
    let mut buffer = backend.alloc(bytes.len()).map_err(e("alloc"))?;
    backend.write(&mut buffer, &bytes).map_err(e("write"))?;
    Ok(buffer)
}

fn download<B: Backend>(backend: &B, buffer: &B::Buffer, n: usize) -> Result<Vec<f32>, CheckError> {
    let mut bytes = vec![0u8; n * 4];
    backend.read(buffer, &mut bytes).map_err(e("read"))?;
    Ok(floats_of(&bytes))
}

fn compile<B: Backend>(
    backend: &B,
    language: Language,
    kernel: TestKernel,
    params: &ParamValues,
) -> Result<crate::traits::backend::Compiled<B::Kernel>, CheckError> {
    backend
        .compile(
            &test_kernel(language, kernel),
            params,
            &CompileOptions::default(),
        )
        .map_err(|err| {
            let log = err.build_log().unwrap_or("");
            CheckError::Failed(format!(
                "compiling {}: {err} (kind {:?}){}",
                kernel.entry(),
                err.kind(),
                if log.is_empty() {
                    String::new()
                } else {
                    format!("\n{log}")
                }
            ))
        })
}

/// [`compile`] with no parameter values.
fn compile_plain<B: Backend>(
    backend: &B,
    language: Language,
    kernel: TestKernel,
) -> Result<crate::traits::backend::Compiled<B::Kernel>, CheckError> {
    compile(backend, language, kernel, &ParamValues::new())
}

/// An uninitialised device buffer of `n` floats.
fn alloc_floats<B: Backend>(backend: &B, n: usize) -> Result<B::Buffer, CheckError> {
    backend.alloc(n * 4).map_err(e("alloc"))
}

fn buf<B>(buffer: &B) -> KernelArg<'_, B> {
    KernelArg::Buffer { buffer, offset: 0 }
}

/// A work-group size that divides 1024, fits the device, and is at least 1.
fn group_size<B: Backend>(backend: &B) -> usize {
    let max = backend.device().max_work_group_size.max(1);
    let first = backend
        .device()
        .max_work_item_sizes
        .first()
        .copied()
        .unwrap_or(1);
    let limit = max.min(first).clamp(1, 64) as usize;
    // Largest power of two not above the limit.
    1 << (usize::BITS - 1 - limit.leading_zeros())
}

// ---------------------------------------------------------------------------------------------
// Checks

/// The device facts are plausible: a name, positive sizes, peaks finite and positive when
/// given, a power-of-two buffer alignment.
pub fn check_device_facts<B: Backend>(backend: &B, _language: Language) -> CheckResult {
    let d = backend.device();
    let mut problems = Vec::new();
    if d.name.trim().is_empty() {
        problems.push("empty device name".to_owned());
    }
    if d.compute_units == 0 {
        problems.push("0 compute units".into());
    }
    if d.max_work_group_size == 0 {
        problems.push("max_work_group_size 0".into());
    }
    if d.max_work_item_sizes.is_empty() || d.max_work_item_sizes.contains(&0) {
        problems.push(format!("max_work_item_sizes {:?}", d.max_work_item_sizes));
    }
    if d.local_mem_bytes == 0 {
        problems.push("no local memory".into());
    }
    if d.global_mem_bytes == 0 {
        problems.push("no global memory".into());
    }
    if d.preferred_vector_width_float == 0 {
        problems.push("preferred_vector_width_float 0".into());
    }
    for (what, v) in [
        ("peak_gflops", d.peak_gflops),
        ("peak_bandwidth_gbs", d.peak_bandwidth_gbs),
    ] {
        if let Some(v) = v {
            if !v.is_finite() || v <= 0.0 {
                problems.push(format!("{what} {v}"));
            }
        }
    }
    let align = backend.buffer_alignment();
    if align == 0 || !align.is_power_of_two() {
        problems.push(format!("buffer_alignment {align} is not a power of two"));
    }
    if backend.languages().is_empty() {
        problems.push("no languages".into());
    }
    if !problems.is_empty() {
        return Err(problems.join("; ").into());
    }
    Ok(format!(
        "{} [{:?}] {} CU, max WG {}, local {} KiB, global {} MiB, {} MHz, sub-groups {:?}, \
         peak {:?} GFLOP/s {:?} GB/s, align {align}",
        d.name,
        d.kind,
        d.compute_units,
        d.max_work_group_size,
        d.local_mem_bytes >> 10,
        d.global_mem_bytes >> 20,
        d.max_clock_mhz,
        d.sub_group_sizes,
        d.peak_gflops.map(|v| v.round()),
        d.peak_bandwidth_gbs.map(|v| v.round()),
    ))
}

/// Bytes written come back unchanged, a shorter prefix can be read and written, and writing
/// past the end is an error.
pub fn check_buffer_round_trip<B: Backend>(backend: &B, _language: Language) -> CheckResult {
    let len = 4096 + 13;
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let mut buffer = backend.alloc(len).map_err(e("alloc"))?;
    backend.write(&mut buffer, &data).map_err(e("write"))?;
    let mut back = vec![0u8; len];
    backend.read(&buffer, &mut back).map_err(e("read"))?;
    if back != data {
        let i = back
            .iter()
            .zip(&data)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!("byte {i} differs after a round trip").into());
    }
    backend
        .write(&mut buffer, &[0xEE; 100])
        .map_err(e("short write"))?;
    let mut prefix = vec![0u8; 200];
    backend
        .read(&buffer, &mut prefix)
        .map_err(e("short read"))?;
    if prefix[..100].iter().any(|b| *b != 0xEE) || prefix[100..] != data[100..200] {
        return Err("a short write changed bytes beyond its length, or did not land".into());
    }
    if backend.write(&mut buffer, &vec![0u8; len + 1]).is_ok() {
        return Err("writing past the end of a buffer succeeded".into());
    }
    let mut too_long = vec![0u8; len + 1];
    if backend.read(&buffer, &mut too_long).is_ok() {
        return Err("reading past the end of a buffer succeeded".into());
    }
    Ok(format!(
        "{len} bytes round trip; oversize read/write refused"
    ))
}

/// Definitions reach the source (`T`, `SCALE`, `OFFSET`), and a second identical compile
/// reports its compile facts (a cache hit where the backend caches).
pub fn check_compile_with_definitions<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let defines = |scale: i64, offset: f64| {
        ParamValues::new()
            .with("T", "float")
            .with("SCALE", scale)
            .with("OFFSET", offset)
    };
    let params = defines(3, 0.5);
    let first = compile(backend, language, TestKernel::Defines, &params)?;
    let n = 1000;
    let x = values(n, 1);
    let xb = upload(backend, &x)?;
    let yb = alloc_floats(backend, n)?;
    let range = NdRange::new([1024], [group_size(backend)]);
    let launch_and_read = |kernel: &B::Kernel| {
        backend
            .launch(
                kernel,
                &[buf(&xb), buf(&yb), KernelArg::I32(n as i32)],
                &range,
            )
            .map_err(e("launch"))?;
        download(backend, &yb, n)
    };
    let want: Vec<f32> = x.iter().map(|v| v * 3.0 + 0.5).collect();
    compare(&launch_and_read(&first.kernel)?, &want)?;
    // Other values must give another kernel (no stale cache entry).
    let second = compile(backend, language, TestKernel::Defines, &defines(2, 0.0))?;
    let want: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    compare(&launch_and_read(&second.kernel)?, &want)
        .map_err(|m| CheckError::Failed(format!("with other definitions: {m}")))?;
    let again = compile(backend, language, TestKernel::Defines, &params)?;
    Ok(format!(
        "first compile {:?} s (cache hit {}), repeated compile {:?} s (cache hit {})",
        first.facts.compile_seconds,
        first.facts.cache_hit,
        again.facts.compile_seconds,
        again.facts.cache_hit
    ))
}

/// A kernel that does not compile gives an error of kind `Compile` with a non-empty log; so
/// does a missing entry point.
pub fn check_compile_error<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let src = test_kernel(language, TestKernel::Broken);
    let err = match backend.compile(&src, &ParamValues::new(), &CompileOptions::default()) {
        Ok(_) => return Err("a broken kernel compiled".into()),
        Err(err) => err,
    };
    if err.kind() != BackendErrorKind::Compile {
        return Err(format!("kind {:?}, expected Compile: {err}", err.kind()).into());
    }
    let log = err.build_log().unwrap_or("");
    if log.trim().is_empty() {
        return Err("the compile error has an empty build log".into());
    }
    let mut missing = test_kernel(language, TestKernel::VectorAdd);
    missing.entry = "no_such_kernel".into();
    match backend.compile(&missing, &ParamValues::new(), &CompileOptions::default()) {
        Ok(_) => return Err("a missing entry point compiled".into()),
        Err(err) if err.kind() != BackendErrorKind::Compile => {
            return Err(format!(
                "missing entry point: kind {:?}, expected Compile: {err}",
                err.kind()
            )
            .into())
        }
        Err(_) => {}
    }
    let line = log
        .lines()
        .find(|l| l.to_lowercase().contains("error"))
        .or_else(|| log.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("");
    Ok(format!("log: {}", line.trim()))
}

/// `c = a + b` over a range larger than `n` (the kernel guards), and once with the
/// work-group size left to the runtime.
pub fn check_vector_add<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let k = compile_plain(backend, language, TestKernel::VectorAdd)?;
    let n = 1000;
    let (a, b) = (values(n, 2), values(n, 3));
    let (ab, bb) = (upload(backend, &a)?, upload(backend, &b)?);
    let cb = alloc_floats(backend, n)?;
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let args = [buf(&ab), buf(&bb), buf(&cb), KernelArg::I32(n as i32)];
    backend
        .launch(
            &k.kernel,
            &args,
            &NdRange::new([1024], [group_size(backend)]),
        )
        .map_err(e("launch"))?;
    compare(&download(backend, &cb, n)?, &want)?;
    let runtime_local = NdRange {
        global: vec![n],
        local: None,
    };
    let mut cb = cb;
    backend
        .write(&mut cb, &vec![0u8; n * 4])
        .map_err(e("write"))?;
    backend
        .launch(&k.kernel, &args_with(&ab, &bb, &cb, n), &runtime_local)
        .map_err(e("launch without a work-group size"))?;
    compare(&download(backend, &cb, n)?, &want)
        .map_err(|m| CheckError::Failed(format!("runtime-chosen work-group size: {m}")))?;
    Ok(format!("{n} elements, with and without a work-group size"))
}

fn args_with<'a, B>(a: &'a B, b: &'a B, c: &'a B, n: usize) -> [KernelArg<'a, B>; 4] {
    [buf(a), buf(b), buf(c), KernelArg::I32(n as i32)]
}

/// `y = alpha * x` with `F32` and `U32` arguments.
pub fn check_scaled_copy<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let k = compile_plain(backend, language, TestKernel::ScaledCopy)?;
    let n = 4096;
    let x = values(n, 4);
    let xb = upload(backend, &x)?;
    let yb = alloc_floats(backend, n)?;
    let alpha = -1.75f32;
    backend
        .launch(
            &k.kernel,
            &[
                buf(&xb),
                buf(&yb),
                KernelArg::F32(alpha),
                KernelArg::U32(n as u32),
            ],
            &NdRange::new([n], [group_size(backend)]),
        )
        .map_err(e("launch"))?;
    let want: Vec<f32> = x.iter().map(|v| alpha * v).collect();
    compare(&download(backend, &yb, n)?, &want)?;
    Ok(format!("{n} elements"))
}

/// Buffers bound at an aligned offset: the kernel sees the view, and the guard regions before
/// and after it are untouched; the input is unchanged.
pub fn check_buffer_offsets<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let k = compile_plain(backend, language, TestKernel::ScaledCopy)?;
    let align = backend.buffer_alignment().max(4);
    let n = 1000;
    let x = values(n, 5);
    let (x_off, y_off) = (align, 2 * align);
    let mut x_bytes = vec![0xABu8; x_off + n * 4 + align];
    x_bytes[x_off..x_off + n * 4].copy_from_slice(&bytes_of(&x));
    let y_bytes = vec![0xCDu8; y_off + n * 4 + align];
    let mut xb = backend.alloc(x_bytes.len()).map_err(e("alloc"))?;
    backend.write(&mut xb, &x_bytes).map_err(e("write"))?;
    let mut yb = backend.alloc(y_bytes.len()).map_err(e("alloc"))?;
    backend.write(&mut yb, &y_bytes).map_err(e("write"))?;
    let args = [
        KernelArg::Buffer {
            buffer: &xb,
            offset: x_off,
        },
        KernelArg::Buffer {
            buffer: &yb,
            offset: y_off,
        },
        KernelArg::F32(2.0),
        KernelArg::U32(n as u32),
    ];
    backend
        .launch(
            &k.kernel,
            &args,
            &NdRange::new([1024], [group_size(backend)]),
        )
        .map_err(e("launch with offsets"))?;
    let mut y_back = vec![0u8; y_bytes.len()];
    backend.read(&yb, &mut y_back).map_err(e("read"))?;
    if let Some(i) = y_back[..y_off].iter().position(|b| *b != 0xCD) {
        return Err(format!("guard before the output changed at byte {i}").into());
    }
    if let Some(i) = y_back[y_off + n * 4..].iter().position(|b| *b != 0xCD) {
        return Err(format!(
            "guard after the output changed at byte {}",
            y_off + n * 4 + i
        )
        .into());
    }
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
    compare(&floats_of(&y_back[y_off..y_off + n * 4]), &want)?;
    let mut x_back = vec![0u8; x_bytes.len()];
    backend.read(&xb, &mut x_back).map_err(e("read"))?;
    if x_back != x_bytes {
        return Err("the input buffer changed".into());
    }
    Ok(format!("offsets {x_off} and {y_off} bytes, guards intact"))
}

/// A dynamically sized local-memory argument: each work-group reverses its slice.
pub fn check_local_memory<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let k = compile_plain(backend, language, TestKernel::LocalReverse)?;
    let wg = group_size(backend);
    let n = wg * 16;
    let x = values(n, 6);
    let xb = upload(backend, &x)?;
    let yb = alloc_floats(backend, n)?;
    backend
        .launch(
            &k.kernel,
            &[buf(&xb), buf(&yb), KernelArg::Local(wg * 4)],
            &NdRange::new([n], [wg]),
        )
        .map_err(e("launch"))?;
    let want: Vec<f32> = x.chunks(wg).flat_map(|c| c.iter().rev().copied()).collect();
    compare(&download(backend, &yb, n)?, &want)?;
    Ok(format!(
        "{} work-groups of {wg}, {} bytes local each",
        n / wg,
        wg * 4
    ))
}

/// A 2-D range (`I64` argument): every element written once with its coordinates.
pub fn check_nd_range_2d<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let k = compile_plain(backend, language, TestKernel::Fill2d)?;
    let (w, h) = (64usize, 48usize);
    let stride = w + 8;
    let mut out = backend.alloc(stride * h * 4).map_err(e("alloc"))?;
    backend
        .write(&mut out, &bytes_of(&vec![-1.0; stride * h]))
        .map_err(e("write"))?;
    let max = backend.device().max_work_group_size;
    let sizes = &backend.device().max_work_item_sizes;
    let ly = if max >= 64 && sizes.get(1).copied().unwrap_or(1) >= 8 {
        8
    } else {
        1
    };
    let lx = if max >= 64 { 8 } else { 1 };
    backend
        .launch(
            &k.kernel,
            &[buf(&out), KernelArg::I64(stride as i64)],
            &NdRange::new([w, h], [lx, ly]),
        )
        .map_err(e("launch"))?;
    let got = download(backend, &out, stride * h)?;
    for y in 0..h {
        for x in 0..stride {
            let want = if x < w { (x + 1000 * y) as f32 } else { -1.0 };
            if got[y * stride + x] != want {
                return Err(format!(
                    "element ({x}, {y}): got {}, expected {want}",
                    got[y * stride + x]
                )
                .into());
            }
        }
    }
    Ok(format!("{w}x{h} with work-groups {lx}x{ly}"))
}

/// Device-event timings are positive and finite.
pub fn check_launch_timing<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let k = compile_plain(backend, language, TestKernel::VectorAdd)?;
    let n = 1 << 20;
    let (a, b) = (values(n, 7), values(n, 8));
    let (ab, bb) = (upload(backend, &a)?, upload(backend, &b)?);
    let cb = alloc_floats(backend, n)?;
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = backend
            .launch(
                &k.kernel,
                &args_with(&ab, &bb, &cb, n),
                &NdRange::new([n], [group_size(backend)]),
            )
            .map_err(e("launch"))?;
        if !(t.device_seconds.is_finite() && t.device_seconds > 0.0 && t.device_seconds < 60.0) {
            return Err(format!("device time {} s", t.device_seconds).into());
        }
        times.push(t.device_seconds);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    Ok(format!(
        "vector_add of {n} floats: median {:.1} us ({:.1} GB/s)",
        median * 1e6,
        (3 * n * 4) as f64 / median / 1e9
    ))
}

/// Launches that cannot run return errors (no panic, no silent success): a work-group that
/// does not divide the range, a zero size, four dimensions, an oversized work-group, a wrong
/// number of arguments, a misaligned buffer offset.
pub fn check_bad_launch_geometry<B: Backend>(backend: &B, language: Language) -> CheckResult {
    let k = compile_plain(backend, language, TestKernel::VectorAdd)?;
    let n = 1024;
    let a = values(n, 9);
    let (ab, bb, cb) = (
        upload(backend, &a)?,
        upload(backend, &a)?,
        upload(backend, &a)?,
    );
    let args = args_with(&ab, &bb, &cb, n);
    let too_big = usize::try_from(backend.device().max_work_group_size.saturating_mul(2))
        .unwrap_or(usize::MAX / 2)
        .max(2);
    type Case<'a, T> = (&'static str, NdRange, Vec<KernelArg<'a, T>>);
    let mut cases: Vec<Case<'_, B::Buffer>> = vec![
        (
            "local not dividing global",
            NdRange::new([1000], [64]),
            args.to_vec(),
        ),
        ("zero global size", NdRange::new([0], [1]), args.to_vec()),
        (
            "four dimensions",
            NdRange::new([4, 4, 4, 4], [1, 1, 1, 1]),
            args.to_vec(),
        ),
        (
            "oversized work-group",
            NdRange::new([too_big], [too_big]),
            args.to_vec(),
        ),
        (
            "too few arguments",
            NdRange::new([n], [1]),
            args[..2].to_vec(),
        ),
    ];
    let align = backend.buffer_alignment();
    if align > 1 {
        let mut misaligned = args.to_vec();
        misaligned[2] = KernelArg::Buffer {
            buffer: &cb,
            offset: 1,
        };
        cases.push((
            "misaligned buffer offset",
            NdRange::new([64], [1]),
            misaligned,
        ));
    }
    let mut kinds = Vec::new();
    for (what, range, case_args) in &cases {
        match backend.launch(&k.kernel, case_args, range) {
            Ok(_) => return Err(format!("{what} ({range}) launched successfully").into()),
            Err(err) => kinds.push(format!("{what}: {:?}", err.kind())),
        }
    }
    Ok(kinds.join(", "))
}

/// `flush_caches` works or says `Unsupported`.
pub fn check_flush_caches<B: Backend>(backend: &B, _language: Language) -> CheckResult {
    let started = Instant::now();
    match backend.flush_caches() {
        Ok(()) => {
            let first = started.elapsed().as_secs_f64();
            let again = Instant::now();
            backend.flush_caches().map_err(e("second flush"))?;
            Ok(format!(
                "first flush {:.1} ms, second {:.1} ms",
                first * 1e3,
                again.elapsed().as_secs_f64() * 1e3
            ))
        }
        Err(err) if err.kind() == BackendErrorKind::Unsupported => {
            Err(CheckError::Skipped(err.to_string()))
        }
        Err(err) => Err(format!("flush_caches: {err} (kind {:?})", err.kind()).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_exists_in_every_language() {
        for lang in LANGUAGES {
            for k in [
                TestKernel::VectorAdd,
                TestKernel::ScaledCopy,
                TestKernel::Defines,
                TestKernel::LocalReverse,
                TestKernel::Fill2d,
                TestKernel::Broken,
            ] {
                let src = test_kernel(lang, k);
                assert!(src.text.contains(k.entry()), "{lang} {k:?}");
                assert_eq!(src.language, lang);
            }
        }
    }

    #[test]
    fn check_names_match() {
        let names: Vec<&str> = checks::<NoBackend>().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, CHECKS);
    }

    #[test]
    fn values_are_deterministic_and_bounded() {
        let v = values(1000, 3);
        assert_eq!(v, values(1000, 3));
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert!(compare(&[1.0, 2.0], &[1.0, 2.000001]).is_ok());
        assert!(compare(&[1.0, f32::NAN], &[1.0, 2.0]).is_err());
    }

    /// A backend with no device, to check the report's shape without hardware.
    struct NoBackend(crate::device::DeviceFacts);

    #[derive(Debug, thiserror::Error)]
    #[error("no device: {0}")]
    struct NoDevice(&'static str);

    impl BackendError for NoDevice {
        fn kind(&self) -> BackendErrorKind {
            if self.0 == "flush_caches" {
                BackendErrorKind::Unsupported
            } else {
                BackendErrorKind::Unavailable
            }
        }
        fn unsupported(capability: &'static str) -> Self {
            NoDevice(capability)
        }
    }

    impl Backend for NoBackend {
        type Error = NoDevice;
        type Kernel = ();
        type Buffer = ();
        fn name(&self) -> &str {
            "none"
        }
        fn languages(&self) -> &[Language] {
            &[Language::OpenCl]
        }
        fn device(&self) -> &crate::device::DeviceFacts {
            &self.0
        }
        fn compile(
            &self,
            _: &KernelSource,
            _: &ParamValues,
            _: &CompileOptions,
        ) -> Result<crate::traits::backend::Compiled<()>, NoDevice> {
            Err(NoDevice("compile"))
        }
        fn alloc(&self, _: usize) -> Result<(), NoDevice> {
            panic!("alloc panics on purpose")
        }
        fn write(&self, _: &mut (), _: &[u8]) -> Result<(), NoDevice> {
            Err(NoDevice("write"))
        }
        fn read(&self, _: &(), _: &mut [u8]) -> Result<(), NoDevice> {
            Err(NoDevice("read"))
        }
        fn launch(
            &self,
            _: &(),
            _: &[KernelArg<'_, ()>],
            _: &NdRange,
        ) -> Result<crate::traits::backend::LaunchTiming, NoDevice> {
            Err(NoDevice("launch"))
        }
    }

    #[test]
    fn a_broken_backend_fails_without_aborting_the_suite() {
        let backend = NoBackend(crate::device::DeviceFacts::unknown("nothing"));
        let report = run(&backend);
        assert_eq!(report.checks.len(), CHECKS.len());
        assert!(!report.passed());
        let round_trip = report.check("buffer_round_trip").unwrap();
        assert!(
            matches!(&round_trip.outcome, Outcome::Failed(m) if m.contains("panicked")),
            "{round_trip:?}"
        );
        assert!(matches!(
            report.check("flush_caches").unwrap().outcome,
            Outcome::Skipped(_)
        ));
        assert!(report.to_string().contains("FAIL"));
        assert!(report.into_result().is_err());
    }
}
