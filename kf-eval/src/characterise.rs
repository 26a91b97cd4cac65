//! Device characterisation: the measured roofline of a device.
//!
//! Two micro-kernels run through the same [`Backend`] trait as every candidate (so this works
//! for every backend, in the backend's own language: OpenCL C, CUDA or SYCL):
//!
//! * an FMA-bound kernel: independent chains of fused multiply-adds per work-item (enough to
//!   cover the FMA latency on two pipes: eight in CUDA and SYCL, sixteen of explicit vectors in
//!   OpenCL C, whose CPU runtimes vectorise scalar code narrower than the hardware), whose
//!   result is written when it equals a value passed at run time that it never reaches, so the
//!   compiler cannot delete the work;
//! * a STREAM copy (`a[i] = b[i]`) and triad (`a[i] = b[i] + s * c[i]`) over buffers far
//!   larger than any cache (64 MiB each where the device has the memory), counted as 2 and 3
//!   moved floats per element (OpenCL C: float16 per work-item on a CPU, float4 elsewhere).
//!
//! Launch sizes are calibrated (doubled until a launch takes 20 ms), and the best of
//! [`CharacteriseOptions::repetitions`] launches (10) counts: on a shared machine the
//! quiet moments are what measure the hardware. The figures are cached per backend,
//! device name and driver version (and on a CPU device the count of CPUs the process may run
//! on, [`Characterisation::host_cpus`]) in `devices.json`, a sibling of the compile caches
//! (`<.runtime>/cache/devices.json` in a checkout set up by `scripts/setup.sh`, else
//! `$XDG_CACHE_HOME/kernelfoundry/devices.json`), written atomically (a temporary file renamed
//! over it). `KF_DEVICE_CACHE` names another file.
//!
//! Where no characterisation is cached, [`Peaks::for_device`] falls back to the backend's
//! estimated peaks ([`DeviceFacts::peak_gflops`], [`DeviceFacts::peak_bandwidth_gbs`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use kf_core::{
    Backend, CompileOptions, DeviceFacts, KernelArg, KernelSource, Language, NdRange, ParamValues,
    Work,
};
use serde::{Deserialize, Serialize};

/// The variable that names the characterisation cache file instead of the default.
pub const CACHE_ENV: &str = "KF_DEVICE_CACHE";

/// The cache file's name, beside the compile caches.
pub const CACHE_FILE: &str = "devices.json";

/// Why a device could not be characterised.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CharacteriseError {
    /// The backend compiles none of the languages the micro-kernels are written in.
    #[error("backend `{backend}` compiles none of OpenCL C, CUDA or SYCL")]
    Unsupported {
        /// The backend.
        backend: String,
    },
    /// A micro-kernel did not compile.
    #[error("the {kernel} micro-kernel did not compile: {message}")]
    Compile {
        /// Which micro-kernel.
        kernel: &'static str,
        /// The backend's error.
        message: String,
    },
    /// The backend failed (allocation, copy, launch).
    #[error("{what}: {message}")]
    Backend {
        /// What was being done.
        what: String,
        /// The backend's error.
        message: String,
    },
    /// The device reported timings that cannot be used (zero, negative or not finite).
    #[error("the device reported no usable timing for the {kernel} micro-kernel")]
    NoTiming {
        /// Which micro-kernel.
        kernel: &'static str,
    },
    /// The cache file could not be read or written.
    #[error("device cache {path}: {message}")]
    Cache {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// Options of a characterisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CharacteriseOptions {
    /// Timed launches of each micro-kernel; the fastest counts.
    pub repetitions: u32,
    /// Floats per buffer of the bandwidth kernels (the largest the device allows below this).
    pub stream_elements: usize,
    /// Shortest launch, seconds, that calibration aims for.
    pub min_launch_seconds: f64,
}

impl Default for CharacteriseOptions {
    fn default() -> Self {
        CharacteriseOptions {
            repetitions: 10,
            stream_elements: 1 << 24,
            min_launch_seconds: 0.02,
        }
    }
}

/// The measured figures of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Characterisation {
    /// Backend name (`opencl`, `sycl`, `cuda`).
    pub backend: String,
    /// Device name, as the driver reports it.
    pub device: String,
    /// Driver version.
    pub driver_version: String,
    /// Peak fp32 throughput measured with the FMA kernel, GFLOP/s.
    pub peak_gflops: f64,
    /// Sustained bandwidth: the better of copy and triad, GB/s.
    pub bandwidth_gbs: f64,
    /// The copy kernel's bandwidth, GB/s.
    pub copy_gbs: f64,
    /// The triad kernel's bandwidth, GB/s.
    pub triad_gbs: f64,
    /// Floats per buffer of the bandwidth kernels.
    pub stream_elements: usize,
    /// Timed launches per kernel.
    pub repetitions: u32,
    /// When it was measured, seconds since the Unix epoch.
    pub measured_unix: u64,
    /// The host's one-minute load average per CPU when it was measured (Linux), which tells
    /// how much of a CPU device the micro-kernels could have had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_per_cpu: Option<f64>,
    /// On a CPU device, the CPUs the measuring process could run on (its affinity mask and
    /// CPU quota): the runtime's threads share them, so one core moves a different bandwidth
    /// from two (a 32 MiB copy as timed: 43–49 against 52–55 GB/s on this project's 2-core EPYC) and
    /// a run under `taskset -c 0` needs figures measured under it ([`cache_key`]). `None` for
    /// other devices and in caches written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpus: Option<usize>,
    /// The copy kernel's bandwidth at smaller working sets, with warm caches, ascending by
    /// bytes, the full-size copy last (empty in caches written before it was measured). A
    /// timed kernel reuses its buffers trial after trial, so a task whose data fits in a
    /// cache level moves it at that level's bandwidth: its roofline is the curve's, not
    /// DRAM's ([`Peaks::gbs_for`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bandwidth_curve: Vec<BandwidthPoint>,
    /// The copy kernel's bandwidth at the same working sets, timed the way the evaluator times
    /// a candidate: [`TimingConfig::rotation`] copies of its buffers
    /// cycled across launches (so a launch finds in cache only what fits beside the other
    /// copies) and the output refilled from the host before each launch. This is what a
    /// memory-bound candidate can reach under the evaluator's timing, so it is the roofline's
    /// bandwidth ([`Peaks::gbs_for`]); the warm curve above can be several times higher for a
    /// working set near the last-level cache's size (a 32 MiB copy: 86 GB/s warm against
    /// 42 GB/s rotated on a 2-core EPYC with a 32 MiB L3). A cache without it (written before
    /// it was measured) counts as stale ([`cached_in`]).
    ///
    /// [`TimingConfig::rotation`]: crate::TimingConfig::rotation
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timed_curve: Vec<BandwidthPoint>,
}

/// The copy kernel's bandwidth over one working set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BandwidthPoint {
    /// Bytes read and written per launch: the working set.
    pub bytes: f64,
    /// GB/s.
    pub gbs: f64,
}

/// The working sets of the bandwidth curve below the full-size copy: the stream buffers
/// divided by 4^k (at the default 64 MiB per buffer: 16, 4 and 1 MiB), largest last.
const CURVE_SHIFTS: [u32; 3] = [6, 4, 2];

impl Characterisation {
    /// The ridge point: the arithmetic intensity (flop/byte) above which a kernel is
    /// compute-bound on this device.
    pub fn ridge_flop_per_byte(&self) -> f64 {
        if self.bandwidth_gbs > 0.0 {
            self.peak_gflops / self.bandwidth_gbs
        } else {
            f64::INFINITY
        }
    }
}

/// The key of a device in the cache: backend, device name and driver version, and on a CPU
/// device the CPUs this process may run on ([`Characterisation::host_cpus`]).
pub fn cache_key(backend: &str, facts: &DeviceFacts) -> String {
    key(
        backend,
        &facts.name,
        &facts.driver_version,
        cpu_share(facts),
    )
}

fn key(backend: &str, device: &str, driver: &str, host_cpus: Option<usize>) -> String {
    match host_cpus {
        Some(n) => format!("{backend}|{device}|{driver}|cpus={n}"),
        None => format!("{backend}|{device}|{driver}"),
    }
}

/// The CPUs this process may run on, for a CPU device: its affinity mask and CPU quota, as
/// the standard library reads them (`sched_getaffinity` and cgroups on Linux).
fn cpu_share(facts: &DeviceFacts) -> Option<usize> {
    (facts.kind == kf_core::DeviceKind::Cpu)
        .then(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The cache file: `KF_DEVICE_CACHE`, else `devices.json` beside the compile caches.
pub fn cache_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(CACHE_ENV).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if let Some(r) = crate::task::file::python::runtime_dir() {
        return Some(r.join("cache").join(CACHE_FILE));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("kernelfoundry").join(CACHE_FILE))
}

/// The cache file's contents: characterisations by [`cache_key`].
type CacheFile = BTreeMap<String, Characterisation>;

fn read_cache(path: &Path) -> CacheFile {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The cached characterisation of `facts`' device on `backend` in the file at `path`; `None`
/// also for an entry written before the [timed curve](Characterisation::timed_curve) was
/// measured, whose roofline would be the warm-cache one (the next characterisation replaces
/// it).
pub fn cached_in(path: &Path, backend: &str, facts: &DeviceFacts) -> Option<Characterisation> {
    read_cache(path)
        .remove(&cache_key(backend, facts))
        .filter(|c| !c.timed_curve.is_empty())
}

/// The cached characterisation of `facts`' device on `backend` in the default cache file.
pub fn cached(backend: &str, facts: &DeviceFacts) -> Option<Characterisation> {
    cached_in(&cache_path()?, backend, facts)
}

/// Stores `c` in the cache file at `path`, atomically and durably: under an exclusive lock on
/// `<path>.lock` (so that two processes characterising different devices at once both keep
/// their entry: each reads the file after the other's rename), the whole file is written to a
/// temporary file in the same folder, flushed to disk, and renamed over the old one, and the
/// folder is flushed too, so readers see either the old file or the new one, also after a
/// crash.
pub fn store_in(path: &Path, c: &Characterisation) -> Result<(), CharacteriseError> {
    use std::io::Write;
    let err = |message: String| CharacteriseError::Cache {
        path: path.to_path_buf(),
        message,
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension("json.lock"))
        .map_err(|e| err(format!("its lock file: {e}")))?;
    // Released when `lock` is dropped, at the end of this function.
    lock.lock().map_err(|e| err(format!("locking it: {e}")))?;
    let mut all = read_cache(path);
    all.insert(
        key(&c.backend, &c.device, &c.driver_version, c.host_cpus),
        c.clone(),
    );
    let text = serde_json::to_vec_pretty(&all).map_err(|e| err(e.to_string()))?;
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(&text)?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(err(e.to_string()));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e.to_string())
    })?;
    // The rename is durable once the folder's entry is on disk.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| err(format!("flushing its folder: {e}")))
}

/// The cached characterisation of `backend`'s device, or a fresh measurement (stored in the
/// cache when there is one) when none is cached or `refresh` is set. The flag says whether the
/// figures came from the cache.
pub fn characterise<B: Backend>(
    backend: &B,
    options: &CharacteriseOptions,
    refresh: bool,
) -> Result<(Characterisation, bool), CharacteriseError> {
    let path = cache_path();
    if !refresh {
        if let Some(c) = path
            .as_deref()
            .and_then(|p| cached_in(p, backend.name(), backend.device()))
        {
            return Ok((c, true));
        }
    }
    let c = measure(backend, options)?;
    if let Some(p) = &path {
        store_in(p, &c)?;
    }
    Ok((c, false))
}

/// The micro-kernels in one language.
struct MicroKernels {
    language: Language,
    fma: &'static str,
    copy: &'static str,
    triad: &'static str,
}

// OpenCL C: explicit vectors of `floatv` (a typedef the prelude of `opencl_prelude` sets to
// float16 on CPUs, float4 elsewhere). Intel's CPU runtime vectorises scalar kernels across
// work-items only 8 wide on this machine's AVX-512 CPU, and its scalar STREAM kernels moved
// 4–12 GB/s where the same runtime's explicit float16 ones move 25–35 GB/s (and the search's
// own softmax kernels 23 GB/s): scalar micro-kernels measured a roofline below what shipped
// kernels reach, which flagged correct kernels as too fast. The FMA kernel's sixteen chains
// start from lanes read from `out` (zero-filled by the host), so the compiler cannot prove the
// lanes equal and fold them into one scalar chain.
const OPENCL: MicroKernels = MicroKernels {
    language: Language::OpenCl,
    fma: r#"
__kernel void kf_fma(__global float* out, const int iters, const float a, const float b,
                     const float never) {
    const floatv av = (floatv)(a), bv = (floatv)(b);
    floatv x0 = KF_VLOAD(out) + (float)get_global_id(0) * 1e-9f;
    floatv x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    floatv x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
    floatv x8 = x0 + 0.8f, x9 = x0 + 0.9f, x10 = x0 + 1.0f, x11 = x0 + 1.1f;
    floatv x12 = x0 + 1.2f, x13 = x0 + 1.3f, x14 = x0 + 1.4f, x15 = x0 + 1.5f;
    for (int i = 0; i < iters; ++i) {
        x0 = fma(x0, av, bv); x1 = fma(x1, av, bv); x2 = fma(x2, av, bv); x3 = fma(x3, av, bv);
        x4 = fma(x4, av, bv); x5 = fma(x5, av, bv); x6 = fma(x6, av, bv); x7 = fma(x7, av, bv);
        x8 = fma(x8, av, bv); x9 = fma(x9, av, bv); x10 = fma(x10, av, bv); x11 = fma(x11, av, bv);
        x12 = fma(x12, av, bv); x13 = fma(x13, av, bv); x14 = fma(x14, av, bv); x15 = fma(x15, av, bv);
    }
    floatv s = (((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)))
             + (((x8 + x9) + (x10 + x11)) + ((x12 + x13) + (x14 + x15)));
    if (any(s == (floatv)(never))) { out[0] = 1.0f; }
}
"#,
    copy: r#"
__kernel void kf_copy(__global floatv* restrict a, __global const floatv* restrict b, const int n) {
    int i = get_global_id(0);
    if (i < n) { a[i] = b[i]; }
}
"#,
    triad: r#"
__kernel void kf_triad(__global floatv* restrict a, __global const floatv* restrict b,
                       __global const floatv* restrict c, const float s, const int n) {
    int i = get_global_id(0);
    if (i < n) { a[i] = b[i] + s * c[i]; }
}
"#,
};

/// The lanes per work-item of the OpenCL micro-kernels on `facts`' device: 16 on a CPU (the
/// widest vector registers a CPU runtime maps float16 onto), 4 elsewhere (GPUs read float4
/// per lane at full bandwidth; wider vectors only cost registers).
fn opencl_vector_width(facts: &DeviceFacts) -> usize {
    if facts.kind == kf_core::DeviceKind::Cpu {
        16
    } else {
        4
    }
}

/// The definitions the OpenCL micro-kernels are compiled with.
fn opencl_prelude(width: usize) -> String {
    format!("typedef float{width} floatv;\n#define KF_VLOAD(p) vload{width}(0, (p))\n")
}

const CUDA: MicroKernels = MicroKernels {
    language: Language::Cuda,
    fma: r#"
extern "C" __global__ void kf_fma(float* out, const int iters, const float a, const float b,
                                  const float never) {
    float x0 = (float)(blockIdx.x * blockDim.x + threadIdx.x) * 1e-9f;
    float x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    float x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
    for (int i = 0; i < iters; ++i) {
        x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
        x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
        x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
        x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);
    }
    float s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    if (s == never) { out[0] = s; }
}
"#,
    copy: r#"
extern "C" __global__ void kf_copy(float* __restrict__ a, const float* __restrict__ b, const int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { a[i] = b[i]; }
}
"#,
    triad: r#"
extern "C" __global__ void kf_triad(float* __restrict__ a, const float* __restrict__ b,
                                    const float* __restrict__ c, const float s, const int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { a[i] = b[i] + s * c[i]; }
}
"#,
};

const SYCL: MicroKernels = MicroKernels {
    language: Language::Sycl,
    fma: r#"
#include <sycl/sycl.hpp>
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void kf_fma(float* out, const int iters, const float a, const float b, const float never) {
    float x0 = (float)sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0) * 1e-9f;
    float x1 = x0 + 0.1f, x2 = x0 + 0.2f, x3 = x0 + 0.3f;
    float x4 = x0 + 0.4f, x5 = x0 + 0.5f, x6 = x0 + 0.6f, x7 = x0 + 0.7f;
    for (int i = 0; i < iters; ++i) {
        x0 = sycl::fma(x0, a, b); x1 = sycl::fma(x1, a, b); x2 = sycl::fma(x2, a, b); x3 = sycl::fma(x3, a, b);
        x4 = sycl::fma(x4, a, b); x5 = sycl::fma(x5, a, b); x6 = sycl::fma(x6, a, b); x7 = sycl::fma(x7, a, b);
        x0 = sycl::fma(x0, a, b); x1 = sycl::fma(x1, a, b); x2 = sycl::fma(x2, a, b); x3 = sycl::fma(x3, a, b);
        x4 = sycl::fma(x4, a, b); x5 = sycl::fma(x5, a, b); x6 = sycl::fma(x6, a, b); x7 = sycl::fma(x7, a, b);
    }
    float s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    if (s == never) { out[0] = s; }
}
"#,
    copy: r#"
#include <sycl/sycl.hpp>
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void kf_copy(float* a, const float* b, const int n) {
    int i = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    if (i < n) { a[i] = b[i]; }
}
"#,
    triad: r#"
#include <sycl/sycl.hpp>
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void kf_triad(float* a, const float* b, const float* c, const float s, const int n) {
    int i = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    if (i < n) { a[i] = b[i] + s * c[i]; }
}
"#,
};

/// Flop per lane and loop iteration: 16 FMAs of 2 flop (CUDA and SYCL: 8 chains, 2 FMAs each;
/// OpenCL C: 16 chains, one each).
const FLOP_PER_ITER: f64 = 16.0 * 2.0;

/// Work-group size of every micro-kernel launch.
const LOCAL: usize = 64;

fn backend_err(what: impl Into<String>, e: impl std::fmt::Display) -> CharacteriseError {
    CharacteriseError::Backend {
        what: what.into(),
        message: e.to_string(),
    }
}

/// Measures `backend`'s device: peak fp32 GFLOP/s and sustained GB/s (nothing is cached).
pub fn measure<B: Backend>(
    backend: &B,
    options: &CharacteriseOptions,
) -> Result<Characterisation, CharacteriseError> {
    let kernels = [OPENCL, CUDA, SYCL]
        .into_iter()
        .find(|k| backend.languages().contains(&k.language))
        .ok_or_else(|| CharacteriseError::Unsupported {
            backend: backend.name().to_owned(),
        })?;
    let facts = backend.device();
    let bench = Bench::new(backend, kernels, facts, options.repetitions.max(1));
    let peak_gflops = bench.peak_gflops(facts, options)?;
    let stream = bench.stream(facts, options)?;
    let timed_curve = timed_curve(
        backend,
        &stream.copy,
        &stream.bandwidth_curve,
        bench.width,
        bench.reps,
    )?;
    Ok(Characterisation {
        backend: backend.name().to_owned(),
        device: facts.name.clone(),
        driver_version: facts.driver_version.clone(),
        peak_gflops,
        bandwidth_gbs: stream.copy_gbs.max(stream.triad_gbs),
        copy_gbs: stream.copy_gbs,
        triad_gbs: stream.triad_gbs,
        stream_elements: stream.elements,
        repetitions: bench.reps,
        measured_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        load_per_cpu: load_per_cpu(),
        host_cpus: cpu_share(facts),
        bandwidth_curve: stream.bandwidth_curve,
        timed_curve,
    })
}

/// The micro-kernels in one backend's language, and how they are compiled and timed.
struct Bench<'a, B: Backend> {
    backend: &'a B,
    kernels: MicroKernels,
    /// Floats per work-item (see `OPENCL`); the CUDA and SYCL kernels are scalar.
    width: usize,
    /// The definitions the kernels are compiled with (OpenCL C only).
    prelude: String,
    /// Timed launches per figure, after a warm-up: the best counts.
    reps: u32,
}

/// What the STREAM kernels measured.
struct StreamFigures<K> {
    /// Floats per buffer.
    elements: usize,
    copy_gbs: f64,
    triad_gbs: f64,
    /// The copy over prefixes of the buffers, warm in whichever cache holds them, then over
    /// the whole buffers.
    bandwidth_curve: Vec<BandwidthPoint>,
    /// The compiled copy kernel, for the rotated curve ([`timed_curve`]).
    copy: K,
}

impl<'a, B: Backend> Bench<'a, B> {
    fn new(backend: &'a B, kernels: MicroKernels, facts: &DeviceFacts, reps: u32) -> Self {
        let (width, prelude) = if kernels.language == Language::OpenCl {
            let w = opencl_vector_width(facts);
            (w, opencl_prelude(w))
        } else {
            (1, String::new())
        };
        Bench {
            backend,
            kernels,
            width,
            prelude,
            reps,
        }
    }

    /// Compiles the micro-kernel `entry` (`name` in errors).
    fn compile(
        &self,
        name: &'static str,
        entry: &str,
        text: &'static str,
    ) -> Result<B::Kernel, CharacteriseError> {
        let source = KernelSource::new(
            self.kernels.language,
            entry,
            format!("{}{text}", self.prelude),
        );
        self.backend
            .compile(&source, &ParamValues::new(), &CompileOptions::default())
            .map(|c| c.kernel)
            .map_err(|e| CharacteriseError::Compile {
                kernel: name,
                message: e.to_string(),
            })
    }

    /// The best usable time of `reps` launches after a warm-up.
    fn best_of(
        &self,
        kernel: &'static str,
        launch: &mut dyn FnMut() -> Result<f64, CharacteriseError>,
    ) -> Result<f64, CharacteriseError> {
        launch()?; // warm-up
        let mut best = f64::INFINITY;
        for _ in 0..self.reps {
            let t = launch()?;
            if t.is_finite() && t > 0.0 {
                best = best.min(t);
            }
        }
        if best.is_finite() {
            Ok(best)
        } else {
            Err(CharacteriseError::NoTiming { kernel })
        }
    }

    /// Compute: the FMA kernel's GFLOP/s, its work-items calibrated (doubled) until a launch
    /// takes long enough.
    fn peak_gflops(
        &self,
        facts: &DeviceFacts,
        options: &CharacteriseOptions,
    ) -> Result<f64, CharacteriseError> {
        let backend = self.backend;
        let width = self.width;
        let fma = self.compile("FMA", "kf_fma", self.kernels.fma)?;
        let out_bytes = backend.buffer_alignment().max(64);
        let mut out = backend
            .alloc(out_bytes)
            .map_err(|e| backend_err("allocating the FMA output", e))?;
        // The OpenCL kernel reads its starting lanes from `out`: zeros, never denormals or NaNs.
        backend
            .write(&mut out, &vec![0u8; out_bytes])
            .map_err(|e| backend_err("clearing the FMA output", e))?;
        let iters: i32 = 1024;
        // Work-items; each computes `width` lanes.
        let mut global = LOCAL * 64 * facts.compute_units.max(1) as usize / width.max(1);
        global = global.max(LOCAL) / LOCAL * LOCAL;
        let launch_fma = |global: usize| -> Result<f64, CharacteriseError> {
            let args = [
                KernelArg::Buffer {
                    buffer: &out,
                    offset: 0,
                },
                KernelArg::I32(iters),
                KernelArg::F32(0.999_999),
                KernelArg::F32(1e-6),
                KernelArg::F32(-1.0),
            ];
            backend
                .launch(&fma, &args, &NdRange::new([global], [LOCAL]))
                .map(|t| t.device_seconds)
                .map_err(|e| backend_err("launching the FMA micro-kernel", e))
        };
        while launch_fma(global)? < options.min_launch_seconds && global < (1 << 28) {
            global *= 2;
        }
        let fma_s = self.best_of("FMA", &mut || launch_fma(global))?;
        Ok((global * width) as f64 * f64::from(iters) * FLOP_PER_ITER / fma_s / 1e9)
    }

    /// Bandwidth: copy and triad over buffers much larger than any cache (freed again before
    /// this returns).
    fn stream(
        &self,
        facts: &DeviceFacts,
        options: &CharacteriseOptions,
    ) -> Result<StreamFigures<B::Kernel>, CharacteriseError> {
        let width = self.width;
        let limit = (facts.global_mem_bytes / 16).max(1 << 22) as usize / 4;
        let group_floats = LOCAL * width;
        let n = options.stream_elements.min(limit).max(group_floats) / group_floats * group_floats;
        // The kernels index vectors of `width` floats.
        let n_i32 = i32::try_from(n / width).map_err(|e| backend_err("stream size", e))?;
        let bytes = n * 4;
        let bufs = self.stream_buffers(n)?;
        let copy = self.compile("copy", "kf_copy", self.kernels.copy)?;
        // Copies the first `elements` floats of buffer 1 into buffer 0.
        let launch_copy =
            |elements: usize| copy_once(self.backend, &copy, &bufs[0], &bufs[1], elements, width);
        let copy_s = self.best_of("copy", &mut || launch_copy(n))?;
        let triad_s = self.triad_seconds(&bufs, n, n_i32)?;
        let copy_gbs = 2.0 * bytes as f64 / copy_s / 1e9;
        let triad_gbs = 3.0 * bytes as f64 / triad_s / 1e9;
        // The same copy over prefixes of the buffers: after the warm-up launch they sit in
        // whichever cache holds them.
        let mut bandwidth_curve = Vec::new();
        for shift in CURVE_SHIFTS {
            let m = (n >> shift) / group_floats * group_floats;
            if m < group_floats || m >= n {
                continue;
            }
            let s = self.best_of("copy", &mut || launch_copy(m))?;
            let moved = 2.0 * (m * 4) as f64;
            bandwidth_curve.push(BandwidthPoint {
                bytes: moved,
                gbs: moved / s / 1e9,
            });
        }
        bandwidth_curve.push(BandwidthPoint {
            bytes: 2.0 * bytes as f64,
            gbs: copy_gbs,
        });
        drop(bufs);
        Ok(StreamFigures {
            elements: n,
            copy_gbs,
            triad_gbs,
            bandwidth_curve,
            copy,
        })
    }

    /// The three STREAM buffers of `n` floats, filled with 0, 1 and 2.
    fn stream_buffers(&self, n: usize) -> Result<Vec<B::Buffer>, CharacteriseError> {
        let bytes = n * 4;
        let mut bufs = Vec::new();
        for (i, fill) in [0.0f32, 1.0, 2.0].into_iter().enumerate() {
            let mut b = self.backend.alloc(bytes).map_err(|e| {
                backend_err(format!("allocating stream buffer {i} ({bytes} bytes)"), e)
            })?;
            let data: Vec<u8> = std::iter::repeat_n(fill.to_ne_bytes(), n)
                .flatten()
                .collect();
            self.backend
                .write(&mut b, &data)
                .map_err(|e| backend_err("writing a stream buffer", e))?;
            bufs.push(b);
        }
        Ok(bufs)
    }

    /// The best time of the triad kernel over the `n` floats of the stream buffers
    /// (`vectors` vectors of `width`).
    fn triad_seconds(
        &self,
        bufs: &[B::Buffer],
        n: usize,
        vectors: i32,
    ) -> Result<f64, CharacteriseError> {
        let range = NdRange::new([n / self.width], [LOCAL]);
        let triad = self.compile("triad", "kf_triad", self.kernels.triad)?;
        let buffer = |i: usize| KernelArg::Buffer {
            buffer: &bufs[i],
            offset: 0,
        };
        self.best_of("triad", &mut || {
            let args = [
                buffer(0),
                buffer(1),
                buffer(2),
                KernelArg::F32(3.0),
                KernelArg::I32(vectors),
            ];
            self.backend
                .launch(&triad, &args, &range)
                .map(|t| t.device_seconds)
                .map_err(|e| backend_err("launching the triad micro-kernel", e))
        })
    }
}

/// One launch of the copy micro-kernel: the first `elements` floats of `src` into `dst`, in
/// vectors of `width`; its device seconds.
fn copy_once<B: Backend>(
    backend: &B,
    copy: &B::Kernel,
    dst: &B::Buffer,
    src: &B::Buffer,
    elements: usize,
    width: usize,
) -> Result<f64, CharacteriseError> {
    let vectors = i32::try_from(elements / width).map_err(|e| backend_err("stream size", e))?;
    let args = [
        KernelArg::Buffer {
            buffer: dst,
            offset: 0,
        },
        KernelArg::Buffer {
            buffer: src,
            offset: 0,
        },
        KernelArg::I32(vectors),
    ];
    backend
        .launch(copy, &args, &NdRange::new([elements / width], [LOCAL]))
        .map(|t| t.device_seconds)
        .map_err(|e| backend_err("launching the copy micro-kernel", e))
}

/// The copy kernel timed at each working set of `warm` the way the evaluator times a candidate
/// (see [`Characterisation::timed_curve`]): fresh buffers per rotation copy, each launch on the
/// next copy after its output was refilled from the host; the fastest of `reps` rounds counts.
fn timed_curve<B: Backend>(
    backend: &B,
    copy: &B::Kernel,
    warm: &[BandwidthPoint],
    width: usize,
    reps: u32,
) -> Result<Vec<BandwidthPoint>, CharacteriseError> {
    let rotation = crate::rotation::DEFAULT_ROTATION;
    let mut out = Vec::new();
    for point in warm {
        // Bytes moved are read + written: one buffer each way.
        let buffer_bytes = (point.bytes / 2.0) as usize;
        let elements = buffer_bytes / 4 / (LOCAL * width) * (LOCAL * width);
        if elements == 0 {
            continue;
        }
        let buffer_bytes = elements * 4;
        let copies = crate::rotation::rotation_copies(2 * buffer_bytes, rotation);
        let zeros = vec![0u8; buffer_bytes];
        let ones: Vec<u8> = std::iter::repeat_n(1.0f32.to_ne_bytes(), elements)
            .flatten()
            .collect();
        let mut sets = Vec::with_capacity(copies);
        for i in 0..copies {
            let mut src = backend
                .alloc(buffer_bytes)
                .map_err(|e| backend_err(format!("allocating rotation copy {i}"), e))?;
            backend
                .write(&mut src, &ones)
                .map_err(|e| backend_err("writing a rotation copy", e))?;
            let dst = backend
                .alloc(buffer_bytes)
                .map_err(|e| backend_err(format!("allocating rotation copy {i}"), e))?;
            sets.push((dst, src));
        }
        let mut best = f64::INFINITY;
        // One warm-up round, then `reps` rounds over every copy.
        for round in 0..=reps {
            for (dst, src) in &mut sets {
                backend
                    .write(dst, &zeros)
                    .map_err(|e| backend_err("refilling a rotation copy's output", e))?;
                let t = copy_once(backend, copy, dst, src, elements, width)?;
                if round > 0 && t.is_finite() && t > 0.0 {
                    best = best.min(t);
                }
            }
        }
        if !best.is_finite() {
            return Err(CharacteriseError::NoTiming { kernel: "copy" });
        }
        let moved = 2.0 * buffer_bytes as f64;
        out.push(BandwidthPoint {
            bytes: moved,
            gbs: moved / best / 1e9,
        });
    }
    Ok(out)
}

/// The one-minute load average over the CPU count, from `/proc/loadavg` (Linux only).
pub fn load_per_cpu() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cpus = std::thread::available_parallelism().ok()?.get() as f64;
    Some(load / cpus)
}

/// The safety margin of the evaluator's anti-cheat check over measured peaks: a timing is
/// rejected when it beats the roofline of `margin × busy ×` the measured peaks, where `busy` is
/// the host's load per CPU at measurement time (at least 1). The characterisation is a
/// best-of-ten that may have run on a busier machine (or at a lower clock) than the
/// evaluation, and a genuine kernel can keep the FMA pipes a little busier than eight chains
/// do; 1.5× covers that, while the timing cheats the check exists for (work skipped, results
/// cached across launches) come out 10× to 1000× too fast. Where the backend has an estimated
/// peak (an upper bound from the hardware's width, clock and turbo), the bound is that
/// estimate, or the margin over the measurement when the device was measured faster: a
/// micro-kernel does not reach the hardware's peak (Intel's CPU OpenCL runtime: 233 GFLOP/s
/// on a quiet 2-core AVX-512 machine where a searched GEMM reached 375), so a bound below the
/// estimate would reject genuine kernels, and a characterisation taken on a busy machine
/// more so. The load allowance applies only without an estimate. On the memory side the
/// estimate (which counts cache bandwidth: a working set that fits in cache genuinely beats
/// the measured DRAM bandwidth) is kept when there is one.
pub const ANTI_CHEAT_MARGIN: f64 = 1.5;

/// The bandwidth of `curve`'s smallest working set of at least `bytes`, never below `floor`.
fn at_working_set(curve: &[BandwidthPoint], bytes: f64, floor: f64) -> f64 {
    curve
        .iter()
        .find(|p| p.bytes >= bytes)
        .map_or(floor, |p| p.gbs)
        .max(floor)
}

/// The peaks a roofline is computed against, and whether they were measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peaks {
    /// Peak fp32 throughput, GFLOP/s.
    pub gflops: f64,
    /// Sustained (measured) or peak (estimated) bandwidth, GB/s.
    pub gbs: f64,
    /// Whether these came from a characterisation (else from the backend's estimates).
    pub measured: bool,
    /// The compute peak the anti-cheat check allows, GFLOP/s (see [`ANTI_CHEAT_MARGIN`]).
    pub check_gflops: f64,
    /// The bandwidth the anti-cheat check allows, GB/s.
    pub check_gbs: f64,
    /// Bandwidth by working set with warm caches, when measured
    /// ([`Characterisation::bandwidth_curve`]): the anti-cheat check's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<BandwidthPoint>,
    /// Bandwidth by working set as the evaluator times, when measured
    /// ([`Characterisation::timed_curve`]): the roofline's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timed_curve: Vec<BandwidthPoint>,
}

impl Peaks {
    /// Peaks from a characterisation, with the anti-cheat bounds of [`ANTI_CHEAT_MARGIN`].
    pub fn measured(c: &Characterisation, facts: &DeviceFacts) -> Self {
        let busy = c.load_per_cpu.unwrap_or(0.0).max(1.0);
        let margin = ANTI_CHEAT_MARGIN * busy;
        // The hardware's upper bound where there is one (never below the margin over what
        // was measured: a device measured faster than its estimate proves the estimate
        // wrong); else the margin over the measurement, widened by the load it was taken at.
        let check_gflops = match facts.peak_gflops {
            Some(estimate) => estimate.max(c.peak_gflops * ANTI_CHEAT_MARGIN),
            None => c.peak_gflops * margin,
        };
        let check_gbs = facts.peak_bandwidth_gbs.unwrap_or(c.bandwidth_gbs * margin);
        Peaks {
            gflops: c.peak_gflops,
            gbs: c.bandwidth_gbs,
            measured: true,
            check_gflops,
            check_gbs,
            curve: c.bandwidth_curve.clone(),
            timed_curve: c.timed_curve.clone(),
        }
    }

    /// The bandwidth a task moving `bytes` per run can reach as the evaluator times it: that
    /// of the smallest working set of the [timed curve](Self::timed_curve) at least as large
    /// (so a task whose rotated copies fit a cache level gets that level's bandwidth, and one
    /// between two points the lower one's), the largest one's for a larger task; the warm
    /// curve's where no timed curve was measured ([`warm_gbs_for`](Self::warm_gbs_for)); just
    /// `gbs` without either. (Not floored by the warm sustained [`gbs`](Self::gbs): that is a
    /// different measurement, of buffers reused launch after launch.)
    pub fn gbs_for(&self, bytes: f64) -> f64 {
        match self.timed_curve.last() {
            Some(largest) => {
                self.timed_curve
                    .iter()
                    .find(|p| p.bytes >= bytes)
                    .unwrap_or(largest)
                    .gbs
            }
            None => self.warm_gbs_for(bytes),
        }
    }

    /// The bandwidth of the smallest working set of the warm-cache curve at least as large as
    /// `bytes`, never below the sustained [`gbs`](Self::gbs): what a kernel that reuses its
    /// buffers launch after launch can reach (the anti-cheat check's allowance).
    pub fn warm_gbs_for(&self, bytes: f64) -> f64 {
        at_working_set(&self.curve, bytes, self.gbs)
    }

    /// Peaks from the backend's estimates, when it has both.
    pub fn estimated(facts: &DeviceFacts) -> Option<Self> {
        let (gflops, gbs) = (facts.peak_gflops?, facts.peak_bandwidth_gbs?);
        Some(Peaks {
            gflops,
            gbs,
            measured: false,
            check_gflops: gflops,
            check_gbs: gbs,
            curve: Vec::new(),
            timed_curve: Vec::new(),
        })
    }

    /// The cached characterisation of the device, else the estimates.
    pub fn for_device(backend: &str, facts: &DeviceFacts) -> Option<Self> {
        cached(backend, facts)
            .map(|c| Peaks::measured(&c, facts))
            .or_else(|| Peaks::estimated(facts))
    }

    /// The shortest genuine time for `work`: its roofline at the anti-cheat bounds.
    pub fn anti_cheat_seconds(&self, work: &Work) -> f64 {
        work.roofline_seconds(self.check_gflops, self.check_gbs_for(work.bytes))
    }

    /// The bandwidth the anti-cheat check allows a task moving `bytes`: [`check_gbs`](Self::check_gbs),
    /// or the margin over its working set's measured bandwidth when that is higher (data in
    /// a cache moves faster than the sustained figure).
    pub fn check_gbs_for(&self, bytes: f64) -> f64 {
        self.check_gbs
            .max(self.warm_gbs_for(bytes).max(self.gbs_for(bytes)) * ANTI_CHEAT_MARGIN)
    }
}

/// Where one timed run of a task stands against the roofline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RooflinePoint {
    /// Achieved rate over the attainable one, `min(peak, intensity × bandwidth)`.
    pub fraction: f64,
    /// Whether the task's intensity puts it under the ridge point (memory-bound: its rate is
    /// GB/s), else compute-bound (GFLOP/s).
    pub memory_bound: bool,
    /// Achieved bandwidth, GB/s (minimum bytes over time).
    pub gbs: f64,
}

/// The roofline point of `work` done in `seconds` on a device with `peaks`; `None` when the
/// work or the time is unknown.
pub fn roofline_point(work: &Work, seconds: f64, peaks: &Peaks) -> Option<RooflinePoint> {
    if !(seconds > 0.0 && seconds.is_finite()) || work.bytes <= 0.0 && work.flops <= 0.0 {
        return None;
    }
    let gbs = work.bytes / seconds / 1e9;
    let gflops = work.flops / seconds / 1e9;
    let peak_gbs = peaks.gbs_for(work.bytes);
    let memory_bound = work.flops <= 0.0
        || work.flops / work.bytes.max(1e-300) < {
            if peak_gbs > 0.0 {
                peaks.gflops / peak_gbs
            } else {
                f64::INFINITY
            }
        };
    let fraction = if memory_bound {
        (peak_gbs > 0.0).then(|| gbs / peak_gbs)?
    } else {
        let attainable = peaks
            .gflops
            .min(work.flops / work.bytes.max(1e-300) * peak_gbs);
        (attainable > 0.0).then(|| gflops / attainable)?
    };
    Some(RooflinePoint {
        fraction,
        memory_bound,
        gbs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn characterisation() -> Characterisation {
        Characterisation {
            backend: "opencl".into(),
            device: "dev".into(),
            driver_version: "1.0".into(),
            peak_gflops: 100.0,
            bandwidth_gbs: 10.0,
            copy_gbs: 9.0,
            triad_gbs: 10.0,
            stream_elements: 1024,
            repetitions: 5,
            measured_unix: 0,
            load_per_cpu: None,
            host_cpus: None,
            bandwidth_curve: Vec::new(),
            timed_curve: Vec::new(),
        }
    }

    fn facts() -> DeviceFacts {
        let mut f = DeviceFacts::unknown("dev");
        f.driver_version = "1.0".into();
        f.peak_gflops = Some(400.0);
        f.peak_bandwidth_gbs = Some(50.0);
        f
    }

    fn peaks() -> Peaks {
        Peaks::measured(&characterisation(), &facts())
    }

    #[test]
    fn compute_bound_point() {
        // 2 GFLOP over 16 MB: intensity 125 > ridge 10, so compute-bound.
        let w = Work {
            flops: 2e9,
            bytes: 16e6,
        };
        let p = roofline_point(&w, 0.04, &peaks()).unwrap();
        assert!(!p.memory_bound);
        assert!((p.fraction - 0.5).abs() < 1e-12);
    }

    #[test]
    fn memory_bound_point() {
        // 1 flop/byte < ridge 10: memory-bound, 5 GB/s of 10.
        let w = Work {
            flops: 1e8,
            bytes: 1e8,
        };
        let p = roofline_point(&w, 0.02, &peaks()).unwrap();
        assert!(p.memory_bound);
        assert!((p.gbs - 5.0).abs() < 1e-9);
        assert!((p.fraction - 0.5).abs() < 1e-12);
        assert!(roofline_point(&w, 0.0, &peaks()).is_none());
    }

    #[test]
    fn anti_cheat_keeps_a_margin() {
        let w = Work {
            flops: 1.5e9,
            bytes: 1.0,
        };
        // Without an estimate: 1.5 GFLOP at 100 GFLOP/s × 1.5 is 10 ms, so a 9 ms timing is
        // rejected and 11 ms is not.
        let mut no_estimate = facts();
        no_estimate.peak_gflops = None;
        let p = Peaks::measured(&characterisation(), &no_estimate);
        assert!((p.anti_cheat_seconds(&w) - 0.01).abs() < 1e-12);
        // With one (400 GFLOP/s), the hardware's bound: 3.75 ms.
        assert!((peaks().anti_cheat_seconds(&w) - 1.5e9 / 400e9).abs() < 1e-15);
        // With an estimate (400), the bound is the estimate however low the measurement (a
        // micro-kernel below the hardware's peak, a busy machine): genuine kernels beat a
        // measured FMA peak by more than the margin.
        let mut busy = characterisation();
        assert_eq!(Peaks::measured(&busy, &facts()).check_gflops, 400.0);
        busy.load_per_cpu = Some(5.0);
        let p = Peaks::measured(&busy, &facts());
        assert_eq!(p.check_gflops, 400.0);
        // Without one, the margin over the measurement, widened by the load it was taken at.
        busy.load_per_cpu = Some(2.0);
        assert!((Peaks::measured(&busy, &no_estimate).check_gflops - 300.0).abs() < 1e-9);
        // Measured above the estimate (a base clock taken for the top one): the margin holds.
        busy.peak_gflops = 450.0;
        assert!((Peaks::measured(&busy, &facts()).check_gflops - 675.0).abs() < 1e-9);
        // The memory side keeps the estimate (cache bandwidth).
        assert_eq!(p.check_gbs, 50.0);
        let est = Peaks::estimated(&facts()).unwrap();
        assert!((est.anti_cheat_seconds(&w) - 1.5e9 / 400e9).abs() < 1e-15);
    }

    /// A task whose data fits a measured cache level is judged against that level's
    /// bandwidth, in its roofline and in the anti-cheat check; a larger one against DRAM's.
    #[test]
    fn the_bandwidth_curve_sets_the_roofline_by_working_set() {
        let mut c = characterisation();
        c.bandwidth_curve = vec![
            BandwidthPoint {
                bytes: 2e6,
                gbs: 80.0,
            },
            BandwidthPoint {
                bytes: 32e6,
                gbs: 30.0,
            },
            BandwidthPoint {
                bytes: 128e6,
                gbs: 9.0,
            },
        ];
        let p = Peaks::measured(&c, &facts());
        assert_eq!(p.gbs_for(1e6), 80.0);
        assert_eq!(p.gbs_for(32e6), 30.0);
        assert_eq!(p.gbs_for(33e6), 10.0, "never below the sustained figure");
        assert_eq!(p.gbs_for(1e9), 10.0);
        // 30 MB in 1 ms is 30 GB/s: all of the 32 MB level's roofline, three of DRAM's.
        let w = Work {
            flops: 1e6,
            bytes: 30e6,
        };
        let point = roofline_point(&w, 1e-3, &p).unwrap();
        assert!(point.memory_bound);
        assert!((point.fraction - 1.0).abs() < 1e-9, "{point:?}");
        // The check allows the margin over the cache level: 45 GB/s, not the estimate's 50…
        assert_eq!(p.check_gbs_for(30e6), 50.0);
        // …and 1.5 × 80 for a task in the smallest level.
        assert_eq!(p.check_gbs_for(1e6), 120.0);
        assert!((p.anti_cheat_seconds(&w) - 30e6 / 50e9).abs() < 1e-15);
        // A cache written before the curve was measured keeps one bandwidth.
        assert_eq!(peaks().gbs_for(1e3), 10.0);
    }

    /// With a timed curve, the roofline takes the bandwidth the evaluator's rotated timing
    /// allows, while the anti-cheat check keeps the warm curve's (the higher) allowance.
    #[test]
    fn the_timed_curve_sets_the_roofline_and_the_warm_one_the_check() {
        let mut c = characterisation();
        let point = |bytes: f64, gbs: f64| BandwidthPoint { bytes, gbs };
        c.bandwidth_curve = vec![point(2e6, 80.0), point(32e6, 60.0), point(128e6, 9.0)];
        c.timed_curve = vec![point(2e6, 70.0), point(32e6, 20.0), point(128e6, 8.0)];
        let p = Peaks::measured(&c, &facts());
        assert_eq!(p.gbs_for(30e6), 20.0);
        assert_eq!(p.warm_gbs_for(30e6), 60.0);
        assert_eq!(p.gbs_for(1e9), 8.0, "the largest timed working set's");
        let w = Work {
            flops: 1e6,
            bytes: 30e6,
        };
        // 30 MB in 1.5 ms: 20 GB/s, all of the timed roofline (a third of the warm one's).
        let point = roofline_point(&w, 1.5e-3, &p).unwrap();
        assert!((point.fraction - 1.0).abs() < 1e-9, "{point:?}");
        assert_eq!(p.check_gbs_for(30e6), 90.0);
    }

    #[test]
    fn cache_round_trip_is_keyed_by_driver() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(CACHE_FILE);
        let mut facts = DeviceFacts::unknown("dev");
        facts.driver_version = "1.0".into();
        let mut c = characterisation();
        c.timed_curve = vec![BandwidthPoint {
            bytes: 1e6,
            gbs: 5.0,
        }];
        store_in(&path, &c).unwrap();
        assert_eq!(cached_in(&path, "opencl", &facts), Some(c));
        assert_eq!(cached_in(&path, "sycl", &facts), None);
        facts.driver_version = "2.0".into();
        assert_eq!(cached_in(&path, "opencl", &facts), None);
        // A corrupt file reads as empty and is replaced on the next store.
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(cached_in(&path, "opencl", &facts), None);
    }

    /// Writers storing different devices at once each keep their entry (each reads the file
    /// under the lock, after the last rename), and no temporary file is left behind.
    #[test]
    fn concurrent_stores_lose_no_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CACHE_FILE);
        let writers: Vec<_> = (0..8)
            .map(|k| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut c = characterisation();
                    c.device = format!("device {k}");
                    c.timed_curve = vec![BandwidthPoint {
                        bytes: 1e6,
                        gbs: f64::from(k + 1),
                    }];
                    for _ in 0..5 {
                        store_in(&path, &c).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(read_cache(&path).len(), 8, "an entry was lost");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn evaluations_of_the_previous_format_still_load() {
        // An evaluation line as run directories before the roofline fields held it.
        let old = r#"{"status":"correct","params":{"TS":16},"timing":{"median_s":0.01,"min_s":0.009,
            "max_s":0.012,"mean_s":0.01,"stddev_s":0.001,"trials":10},"speedup":2.0,
            "gflops":200.0,"compiler":{"cache_hit":false}}"#;
        let e: kf_core::Evaluation = serde_json::from_str(old).unwrap();
        assert_eq!(e.gflops, Some(200.0));
        assert_eq!(
            (e.gbs, e.roofline_fraction, e.memory_bound),
            (None, None, None)
        );
        assert_eq!(e.worker, None);
        // And the new fields are left out when absent, so the format does not change for them.
        let text = serde_json::to_string(&e).unwrap();
        assert!(!text.contains("roofline") && !text.contains("worker"));
    }
}
