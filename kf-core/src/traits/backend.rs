//! [`Backend`]: a compiler plus a device runtime.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::device::DeviceFacts;
use crate::evaluation::CompilerFacts;
use crate::kernel::{KernelSource, Language, ParamValues};

/// What went wrong in a backend, in terms the evaluator can rank on the result ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum BackendErrorKind {
    /// The kernel did not compile; the error carries the build log.
    Compile,
    /// The kernel failed to launch or to run (bad launch geometry, a fault on the device).
    Launch,
    /// Out of device memory or another resource.
    Resources,
    /// No runtime or device is available; the message says how to get one.
    Unavailable,
    /// The backend does not offer this capability.
    Unsupported,
    /// Anything else, including bad arguments from the caller.
    Other,
}

/// The error type of a [`Backend`]: classifiable, and able to say "unsupported" for optional
/// capabilities (which default to that, as burn's backends do).
pub trait BackendError: std::error::Error + Send + Sync + 'static {
    /// What kind of failure this is.
    fn kind(&self) -> BackendErrorKind;

    /// The error for a capability this backend does not offer.
    fn unsupported(capability: &'static str) -> Self;

    /// The compiler's log, for compile errors.
    fn build_log(&self) -> Option<&str> {
        None
    }
}

/// Options for one compilation besides the parameter definitions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompileOptions {
    /// Extra compiler flags, passed verbatim (`-cl-fast-relaxed-math`, `--use_fast_math`).
    pub flags: Vec<String>,
    /// Target architecture where the backend needs one (`sm_90`); `None` for the device's own.
    pub arch: Option<String>,
}

/// A compiled kernel with its build log and what the compiler reported.
#[derive(Debug)]
pub struct Compiled<K> {
    /// The launchable kernel.
    pub kernel: K,
    /// Build log (warnings), possibly empty.
    pub log: String,
    /// Registers, local memory, compile time, cache hit, ….
    pub facts: CompilerFacts,
}

/// One kernel argument.
#[derive(Debug)]
pub enum KernelArg<'a, B> {
    /// A device buffer, bound from `offset` bytes on (a multiple of
    /// [`Backend::buffer_alignment`]); the evaluator uses this to put guard regions around data.
    Buffer {
        /// The buffer.
        buffer: &'a B,
        /// Byte offset of the kernel's view into it.
        offset: usize,
    },
    /// A 32-bit signed integer.
    I32(i32),
    /// A 32-bit unsigned integer.
    U32(u32),
    /// A 64-bit signed integer.
    I64(i64),
    /// A 32-bit float.
    F32(f32),
    /// Dynamically sized local (shared) memory, bytes.
    Local(usize),
}

impl<B> Clone for KernelArg<'_, B> {
    fn clone(&self) -> Self {
        match self {
            KernelArg::Buffer { buffer, offset } => KernelArg::Buffer {
                buffer,
                offset: *offset,
            },
            KernelArg::I32(v) => KernelArg::I32(*v),
            KernelArg::U32(v) => KernelArg::U32(*v),
            KernelArg::I64(v) => KernelArg::I64(*v),
            KernelArg::F32(v) => KernelArg::F32(*v),
            KernelArg::Local(v) => KernelArg::Local(*v),
        }
    }
}

/// Launch geometry: global size and optional work-group size, 1 to 3 dimensions, in work-items
/// (OpenCL's convention; CUDA backends divide to get the grid).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NdRange {
    /// Global size per dimension.
    pub global: Vec<usize>,
    /// Work-group size per dimension; `None` lets the runtime choose.
    pub local: Option<Vec<usize>>,
}

impl NdRange {
    /// A range with a work-group size.
    pub fn new(global: impl Into<Vec<usize>>, local: impl Into<Vec<usize>>) -> Self {
        NdRange {
            global: global.into(),
            local: Some(local.into()),
        }
    }

    /// Total work-items.
    pub fn work_items(&self) -> usize {
        self.global.iter().product()
    }

    /// Checks the shape: 1–3 dimensions, non-zero sizes, local dividing global.
    ///
    /// ```
    /// use kf_core::NdRange;
    /// assert!(NdRange::new([64, 64], [16, 16]).check().is_ok());
    /// let e = NdRange::new([64], [48]).check().unwrap_err();
    /// assert_eq!(e.to_string(), "local size [48] does not divide global size [64]");
    /// ```
    pub fn check(&self) -> Result<(), NdRangeError> {
        if self.global.is_empty() || self.global.len() > 3 {
            return Err(NdRangeError::Dimensions {
                dimensions: self.global.len(),
            });
        }
        if self.global.contains(&0) {
            return Err(NdRangeError::ZeroGlobal {
                global: self.global.clone(),
            });
        }
        if let Some(local) = &self.local {
            if local.len() != self.global.len() {
                return Err(NdRangeError::LocalDimensions {
                    local: local.clone(),
                    global: self.global.clone(),
                });
            }
            for (g, l) in self.global.iter().zip(local) {
                if *l == 0 || g % l != 0 {
                    return Err(NdRangeError::LocalDoesNotDivide {
                        local: local.clone(),
                        global: self.global.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// What is wrong with an [`NdRange`]'s shape ([`NdRange::check`]); the message is the detail
/// of a backend's "bad launch geometry" error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NdRangeError {
    /// Not 1 to 3 dimensions.
    #[error("{dimensions} dimensions (expected 1 to 3)")]
    Dimensions {
        /// How many the global size has.
        dimensions: usize,
    },
    /// A global size of zero in some dimension.
    #[error("global size {global:?} has a zero")]
    ZeroGlobal {
        /// The global size.
        global: Vec<usize>,
    },
    /// The local size has another number of dimensions than the global size.
    #[error("local size {local:?} has {} dimensions, global {global:?} has {}", local.len(), global.len())]
    LocalDimensions {
        /// The local size.
        local: Vec<usize>,
        /// The global size.
        global: Vec<usize>,
    },
    /// A local size of zero, or one that does not divide the global size.
    #[error("local size {local:?} does not divide global size {global:?}")]
    LocalDoesNotDivide {
        /// The local size.
        local: Vec<usize>,
        /// The global size.
        global: Vec<usize>,
    },
}

impl fmt::Display for NdRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "global {:?}", self.global)?;
        if let Some(l) = &self.local {
            write!(f, " local {l:?}")?;
        }
        Ok(())
    }
}

/// A compiler plus a device runtime: device facts, compile with definitions, buffers, ND-range
/// launches timed by device events. Calls block; the evaluator runs them in a child process with
/// a timeout, so a backend need not guard against hanging kernels itself.
///
/// Optional capabilities ([`Backend::flush_caches`]) default to an "unsupported" error.
///
/// # Example
///
/// A backend is used like this (generic over any implementation):
///
/// ```
/// use kf_core::prelude::*;
///
/// /// Adds one to every element of `data` and returns the device time of the launch.
/// fn add_one<B: Backend>(backend: &B, data: &mut [f32]) -> Result<f64, B::Error> {
///     let src = KernelSource::new(
///         Language::OpenCl,
///         "add_one",
///         "__kernel void add_one(__global float* x) { x[get_global_id(0)] += ONE; }",
///     );
///     let params = ParamValues::new().with("ONE", 1i64);
///     let compiled = backend.compile(&src, &params, &CompileOptions::default())?;
///     let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_ne_bytes()).collect();
///     let mut buffer = backend.alloc(bytes.len())?;
///     backend.write(&mut buffer, &bytes)?;
///     let args = [KernelArg::Buffer { buffer: &buffer, offset: 0 }];
///     let timing = backend.launch(&compiled.kernel, &args, &NdRange::new([data.len()], [1]))?;
///     let mut out = vec![0u8; bytes.len()];
///     backend.read(&buffer, &mut out)?;
///     for (v, chunk) in data.iter_mut().zip(out.chunks_exact(4)) {
///         *v = f32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
///     }
///     Ok(timing.device_seconds)
/// }
/// ```
pub trait Backend {
    /// Backend failure, classifiable by kind.
    type Error: BackendError;
    /// A compiled, launchable kernel.
    type Kernel;
    /// A device buffer.
    type Buffer;

    /// Short name (`opencl`, `sycl`, `cuda`).
    fn name(&self) -> &str;

    /// Languages this backend compiles.
    fn languages(&self) -> &[Language];

    /// Facts of the device this backend drives.
    fn device(&self) -> &DeviceFacts;

    /// Compiles `source` with each parameter passed as `-D NAME=value`.
    fn compile(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<Compiled<Self::Kernel>, Self::Error>;

    /// Allocates a device buffer of `bytes` bytes (contents unspecified).
    fn alloc(&self, bytes: usize) -> Result<Self::Buffer, Self::Error>;

    /// Copies `data` to the start of `buffer`.
    fn write(&self, buffer: &mut Self::Buffer, data: &[u8]) -> Result<(), Self::Error>;

    /// Copies the start of `buffer` into `out`.
    fn read(&self, buffer: &Self::Buffer, out: &mut [u8]) -> Result<(), Self::Error>;

    /// Launches `kernel` over `range`, waits for it, and returns its device-event timing.
    fn launch(
        &self,
        kernel: &Self::Kernel,
        args: &[KernelArg<'_, Self::Buffer>],
        range: &NdRange,
    ) -> Result<LaunchTiming, Self::Error>;

    /// Byte alignment required of [`KernelArg::Buffer`] offsets.
    fn buffer_alignment(&self) -> usize {
        256
    }

    /// Evicts the device caches between timing trials (for example by touching a large
    /// buffer). Unsupported by default.
    fn flush_caches(&self) -> Result<(), Self::Error> {
        Err(Self::Error::unsupported("flush_caches"))
    }
}

/// Timing of one launch, from device profiling events.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LaunchTiming {
    /// Time between the start and end events of the kernel on the device, seconds.
    pub device_seconds: f64,
}
