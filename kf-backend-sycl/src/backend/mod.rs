//! [`SyclBackend`]: the [`Backend`] implementation.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use kf_backend_common::launch::{check_buffer_offset, check_copy, check_work_group, CopyDirection};
use kf_backend_common::{BackendOptions, Flusher};
use kf_core::{
    Backend, CompileOptions, Compiled, CompilerFacts, DeviceFacts, KernelArg, KernelSource,
    Language, LaunchTiming, NdRange, ParamValues,
};
use kf_source::{is_identifier, strip_comments};
use serde::Deserialize;

use crate::cache::{BundleCache, EntryMeta};
use crate::device::{facts, list_devices, DeviceInfo, Limits};
use crate::error::SyclError;
use crate::ffi::{self, ArgKind, Failure, RawArg, KFS_COMPILE, KFS_RESOURCES};
use crate::runtime::{RuntimeInfo, HOW_TO_GET_A_RUNTIME};

mod compile;
mod launch;
mod rewrite;

#[cfg(test)]
use compile::compile_failure;
pub use compile::NO_PCH_ENV;
#[cfg(test)]
use launch::choose_local;
use rewrite::{is_entry_name, known_crasher, mentions_extern_c};
pub use rewrite::{PreparedSource, PARAMS_HEADER, PREAMBLE};

const LANGUAGES: [Language; 1] = [Language::Sycl];

/// Stack of the thread a build runs on (virtual memory; only what the compiler touches is
/// committed).
const BUILD_STACK_BYTES: usize = 256 << 20;

/// Kernels kept built per backend (a search compiles many; each is small).
const MAX_PROGRAMS_IN_MEMORY: usize = 512;

/// How many kernel arguments the runtime counts for one `sycl::local_accessor` parameter (its
/// pointer and three ranges).
const ARGS_PER_LOCAL_ACCESSOR: usize = 4;

/// Writes a whole scratch buffer, 16 bytes per work-item, for [`Backend::flush_caches`].
const FLUSH_KERNEL: &str = r#"#include <sycl/sycl.hpp>
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void kf_flush(sycl::uint4* p, unsigned int v) {
    size_t i = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    p[i] = sycl::uint4(v, v + 1u, v + 2u, (unsigned int)i);
}
"#;

/// Configures a [`SyclBackend`]: device choice, compile cache, cache-flush size, peaks.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct SyclBackendBuilder {
    options: BackendOptions,
}

kf_backend_common::impl_backend_builder!(SyclBackendBuilder => SyclBackend, SyclError);

impl SyclBackendBuilder {
    kf_backend_common::backend_builder_methods!("KF_SYCL_DEVICE");

    /// Loads the shim and the runtime, picks the device and creates its profiling queue.
    pub fn build(self) -> Result<SyclBackend, SyclError> {
        let shim = ffi::shim()?;
        let runtime = crate::runtime::prepare();
        let devices = list_devices()?;
        let Some(info) = self.options.selector.select(&devices) else {
            let none = self.options.selector.no_match(&devices);
            let listed = if none.listed.is_empty() {
                format!(
                    "none (runtime: {}). The Intel CPU device comes from the OpenCL runtime: \
                     scripts/setup.sh --sycl installs it too",
                    runtime.describe()
                )
            } else {
                none.listed.join("; ")
            };
            return Err(SyclError::Unavailable {
                message: format!(
                    "no usable SYCL device matches {}; devices: {listed}. {HOW_TO_GET_A_RUNTIME}",
                    none.wanted
                ),
            });
        };
        let version = shim
            .runtime_version()
            .map_err(|f| f.into_error("querying the SYCL runtime version"))?;
        let version = match &runtime.version {
            Some(wheel) => format!("{version}, intel-sycl-rt {wheel}"),
            None => version,
        };
        let queue = shim
            .open(info.flat_index)
            .map_err(|f| f.into_error("creating the SYCL queue"))?;
        SyclBackend::create(info.clone(), Arc::new(queue), runtime, version, self)
    }
}

/// A [`Backend`] for SYCL free-function kernels, compiled at run time by the DPC++ SYCL
/// runtime (`intel-sycl-rt`, or any DPC++ installation) and run on any device it offers —
/// here, Intel's CPU OpenCL device.
///
/// Kernel conventions (the conformance suite's, and what the shipped SYCL kernels follow):
///
/// * the entry point is a free function declared with
///   `SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<N>))`,
///   preferably `extern "C"` (its bundle is then cached on disk; a C++-named kernel is found
///   through `registered_names` and, because the runtime cannot serialise such bundles, cached
///   in memory only);
/// * [`NdRange`] sizes are passed to `sycl::nd_range<N>` in the given order, so dimension `d`
///   of the range is `get_global_id(d)`; SYCL's *last* dimension moves fastest (consecutive
///   work-items), so a kernel over a row-major matrix puts columns last;
/// * [`KernelArg::Buffer`] is a USM pointer (`float*`), scalars are `int`, `unsigned int`,
///   `long long`, `float`, and [`KernelArg::Local`]`(n)` is a `sycl::local_accessor<char, 1>`
///   of `n` bytes; static local memory is `sycl::ext::oneapi::experimental::work_group_static`
///   (`group_local_memory` crashes this runtime's kernel compiler and is refused);
/// * parameters arrive as definitions (`#define NAME value`) that the SYCL headers do not see:
///   `<sycl/sycl.hpp>` is included first, then a virtual header holding the definitions, then
///   the kernel's own text (see [`SyclBackend::prepare_source`] for why not `-D`); the headers'
///   precompiled form is shared by every kernel (`KF_SYCL_NO_PCH=1` turns that off);
///   compiler flags from [`CompileOptions`] are passed as build options.
///
/// ```
/// use kf_backend_sycl::SyclBackend;
/// use kf_core::prelude::*;
///
/// # fn main() -> Result<(), kf_backend_sycl::SyclError> {
/// let backend = match SyclBackend::new() {
///     Ok(backend) => backend,
///     Err(e) if e.kind() == BackendErrorKind::Unavailable => {
///         eprintln!("skipped: {e}");
///         return Ok(());
///     }
///     Err(e) => return Err(e),
/// };
/// let src = KernelSource::new(
///     Language::Sycl,
///     "scale",
///     r#"#include <sycl/sycl.hpp>
/// extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
/// void scale(float* x) {
///     size_t i = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
///     x[i] *= FACTOR;
/// }"#,
/// );
/// let compiled = backend.compile(
///     &src,
///     &ParamValues::new().with("FACTOR", 2.0),
///     &CompileOptions::default(),
/// )?;
/// let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
/// let mut buf = backend.alloc(data.len())?;
/// backend.write(&mut buf, &data)?;
/// let timing = backend.launch(
///     &compiled.kernel,
///     &[KernelArg::Buffer { buffer: &buf, offset: 0 }],
///     &NdRange::new([4], [4]),
/// )?;
/// let mut out = vec![0u8; data.len()];
/// backend.read(&buf, &mut out)?;
/// assert_eq!(&out[4..8], &4.0f32.to_ne_bytes());
/// println!("took {:.3} us, cache hit: {}", timing.device_seconds * 1e6, compiled.facts.cache_hit);
/// # Ok(())
/// # }
/// ```
pub struct SyclBackend {
    // Field order is drop order: the scratch buffer and kernels go before the queue.
    flusher: Flusher<SyclBackend>,
    programs: Mutex<HashMap<String, Arc<KernelInner>>>,
    queue: Arc<ffi::Queue>,
    info: DeviceInfo,
    facts: DeviceFacts,
    limits: Limits,
    cache: Option<BundleCache>,
    runtime: &'static RuntimeInfo,
}

impl std::fmt::Debug for SyclBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyclBackend")
            .field("device", &self.info.to_string())
            .field("cache", &self.cache.as_ref().map(|c| c.dir()))
            .finish_non_exhaustive()
    }
}

impl SyclBackend {
    /// The default backend: loads the runtime (see [`crate::runtime`]), picks the device named
    /// by `KF_SYCL_DEVICE` or else the best usable one, caches bundles in the default place.
    pub fn new() -> Result<Self, SyclError> {
        Self::builder().build()
    }

    /// A builder for the non-default choices.
    pub fn builder() -> SyclBackendBuilder {
        SyclBackendBuilder::default()
    }

    fn create(
        info: DeviceInfo,
        queue: Arc<ffi::Queue>,
        runtime: &'static RuntimeInfo,
        version: String,
        options: SyclBackendBuilder,
    ) -> Result<Self, SyclError> {
        let (mut facts, limits) = facts(&info, &version);
        let options = options.options;
        options.apply_peaks(&mut facts);
        let cache = options
            .cache_dir(runtime.runtime_dir.as_deref(), "sycl")
            .map(BundleCache::new);
        let flusher = Flusher::new(options.flush_bytes(limits.cache_bytes, limits.max_alloc));
        Ok(SyclBackend {
            flusher,
            programs: Mutex::new(HashMap::new()),
            queue,
            info,
            facts,
            limits,
            cache,
            runtime,
        })
    }

    /// Where the shim and the runtime came from (see [`crate::runtime`]).
    pub fn runtime(&self) -> &RuntimeInfo {
        self.runtime
    }

    /// The device as listed by [`list_devices`].
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The persistent compile cache, if enabled.
    pub fn cache(&self) -> Option<&BundleCache> {
        self.cache.as_ref()
    }
}

struct KernelInner {
    program: ffi::Program,
    entry: String,
    /// Arguments as the runtime counts them (a local accessor counts
    /// [`ARGS_PER_LOCAL_ACCESSOR`]).
    num_args: Option<u32>,
    max_work_group_size: Option<u64>,
    log: String,
    facts: CompilerFacts,
}

/// A compiled SYCL kernel (an executable kernel bundle and its kernel). Cheap to clone;
/// launches from several threads are fine (arguments are set per submission).
#[derive(Clone)]
pub struct SyclKernel {
    inner: Arc<KernelInner>,
}

impl std::fmt::Debug for SyclKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyclKernel")
            .field("entry", &self.inner.entry)
            .field("num_args", &self.inner.num_args)
            .finish()
    }
}

impl SyclKernel {
    /// The entry point's name.
    pub fn entry(&self) -> &str {
        &self.inner.entry
    }

    /// How many arguments the runtime counts (each `sycl::local_accessor` parameter counts
    /// four), when it says.
    pub fn runtime_num_args(&self) -> Option<u32> {
        self.inner.num_args
    }
}

/// A USM device allocation of a fixed size.
pub struct SyclBuffer {
    queue: Arc<ffi::Queue>,
    ptr: *mut c_void,
    len: usize,
}

// SAFETY: the pointer is a USM allocation owned by this value, only passed to the shim.
unsafe impl Send for SyclBuffer {}
// SAFETY: as above; `&SyclBuffer` only reads the pointer value.
unsafe impl Sync for SyclBuffer {}

impl std::fmt::Debug for SyclBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyclBuffer")
            .field("len", &self.len)
            .finish()
    }
}

impl Drop for SyclBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by kfs_malloc on this queue (kept alive by the Arc), freed once.
        unsafe { self.queue.free(self.ptr) }
    }
}

impl SyclBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes (never true: zero-size buffers are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Backend for SyclBackend {
    type Error = SyclError;
    type Kernel = SyclKernel;
    type Buffer = SyclBuffer;

    fn name(&self) -> &str {
        "sycl"
    }

    fn languages(&self) -> &[Language] {
        &LANGUAGES
    }

    fn device(&self) -> &DeviceFacts {
        &self.facts
    }

    fn compile(
        &self,
        source: &KernelSource,
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<Compiled<SyclKernel>, SyclError> {
        self.compile_kernel(source, params, options)
    }

    fn alloc(&self, bytes: usize) -> Result<SyclBuffer, SyclError> {
        if bytes == 0 {
            return Err(SyclError::InvalidArgument(
                "SYCL buffers cannot have zero size".into(),
            ));
        }
        if bytes as u64 > self.limits.max_alloc {
            return Err(SyclError::Resources {
                operation: "sycl::malloc_device",
                message: format!(
                    "{bytes} bytes exceed the device's max_mem_alloc_size ({})",
                    self.limits.max_alloc
                ),
            });
        }
        let ptr = self
            .queue
            .malloc(bytes)
            .map_err(|f| f.into_error("sycl::malloc_device"))?;
        Ok(SyclBuffer {
            queue: Arc::clone(&self.queue),
            ptr,
            len: bytes,
        })
    }

    fn write(&self, buffer: &mut SyclBuffer, data: &[u8]) -> Result<(), SyclError> {
        if !check_copy(CopyDirection::Write, data.len(), buffer.len)
            .map_err(|e| SyclError::InvalidArgument(e.to_string()))?
        {
            return Ok(());
        }
        // SAFETY: the buffer holds at least data.len() bytes; `data` outlives the blocking copy.
        unsafe {
            self.queue
                .memcpy(buffer.ptr, data.as_ptr().cast(), data.len())
        }
        .map_err(|f| f.into_error("queue::memcpy to the device"))
    }

    fn read(&self, buffer: &SyclBuffer, out: &mut [u8]) -> Result<(), SyclError> {
        if !check_copy(CopyDirection::Read, out.len(), buffer.len)
            .map_err(|e| SyclError::InvalidArgument(e.to_string()))?
        {
            return Ok(());
        }
        // SAFETY: the buffer holds at least out.len() bytes; `out` outlives the blocking copy.
        unsafe {
            self.queue
                .memcpy(out.as_mut_ptr().cast(), buffer.ptr, out.len())
        }
        .map_err(|f| f.into_error("queue::memcpy from the device"))
    }

    fn launch(
        &self,
        kernel: &SyclKernel,
        args: &[KernelArg<'_, SyclBuffer>],
        range: &NdRange,
    ) -> Result<LaunchTiming, SyclError> {
        self.launch_kernel(kernel, args, range)
    }

    fn buffer_alignment(&self) -> usize {
        self.limits.base_align
    }

    /// Overwrites a scratch buffer (twice the largest cache, at least 64 MiB, allocated on first
    /// use) with a fresh pattern on the device, evicting earlier data from its caches. A small
    /// SYCL kernel writes it (built once, then cached like any kernel); `queue::fill` is the
    /// fallback when that kernel does not build.
    fn flush_caches(&self) -> Result<(), SyclError> {
        let source = KernelSource::new(Language::Sycl, "kf_flush", FLUSH_KERNEL);
        self.flusher.flush(self, &source, |buffer, size, stamp| {
            // SAFETY: the scratch buffer holds `size` bytes, a multiple of 16.
            unsafe { self.queue.fill_u32(buffer.ptr, stamp, size / 4) }
                .map_err(|f| f.into_error("queue::fill"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_stripped_but_strings_kept() {
        let src = "a // group_local_memory\nb /* extern \"C\" */ c \"// not a comment\" d";
        let out = strip_comments(src);
        assert!(!out.contains("group_local_memory"), "{out}");
        assert!(!out.contains("extern"), "{out}");
        assert!(
            out.contains("\"// not a comment\"") && out.ends_with(" d"),
            "{out}"
        );
        assert!(mentions_extern_c("extern  \"C\" void k();"));
        assert!(mentions_extern_c("extern \"C\" {\n void k();\n}"));
        assert!(!mentions_extern_c("// extern \"C\"\nvoid k();"));
        assert!(known_crasher("auto& t = *group_local_memory_for_overwrite<int[4]>(g);").is_some());
        assert!(known_crasher("// group_local_memory is broken\n").is_none());
    }

    #[test]
    fn entry_names() {
        assert!(is_entry_name("gemm"));
        assert!(is_entry_name("ns::gemm_2"));
        assert!(!is_entry_name("2gemm"));
        assert!(!is_entry_name("gemm<float>"));
        assert!(!is_entry_name(""));
    }

    #[test]
    fn runtime_chosen_work_groups_divide_the_range() {
        let local = choose_local(&[1000], 8192, |_| 8192);
        assert_eq!(local, vec![250]);
        let local = choose_local(&[48, 64], 8192, |_| 8192);
        assert_eq!(local, vec![4, 64]);
        assert_eq!(choose_local(&[7], 8192, |_| 8192), vec![7]);
        assert_eq!(choose_local(&[1024], 32, |_| 8192), vec![32]);
        let local = choose_local(&[4, 4, 4], 8192, |_| 2);
        assert_eq!(local, vec![2, 2, 2]);
    }

    #[test]
    fn definitions_follow_the_sycl_headers() {
        let params = ParamValues::new()
            .with("TS", 16i64)
            .with("T", "unsigned int");
        let src = "// gemm\n#include <sycl/sycl.hpp>  // the runtime\nvoid k();\n";
        let p = SyclBackend::prepare_source(src, &params).unwrap();
        assert_eq!(
            p.text,
            format!("{PREAMBLE}#include \"kernelfoundry_params.h\"\n#line 1\n{src}")
        );
        assert_eq!(
            p.params_header.as_deref(),
            Some("#define TS 16\n#define T unsigned int\n")
        );
        // The compiler's locations count the prepared text's lines; the log names the kernel's.
        assert_eq!(
            p.kernel_lines(
                "rtc_0.cpp:11:12: error: x\n    7 | y\nrtc_12.cpp:3:1: rtc_ rtc_9.cpp:x"
            ),
            "rtc_0.cpp:7:12: error: x\n    7 | y\nrtc_12.cpp:3:1: rtc_ rtc_9.cpp:x"
        );
        // Without parameters only the preamble and the line marker come first.
        let none = SyclBackend::prepare_source("k", &ParamValues::new()).unwrap();
        assert_eq!(
            (none.text, none.params_header),
            (format!("{PREAMBLE}#line 1\nk"), None)
        );
        let bad = ParamValues::new().with("1X", 1i64);
        assert!(SyclBackend::prepare_source("k", &bad).is_err());
        let bad = ParamValues::new().with("X", "a\nb");
        assert!(SyclBackend::prepare_source("k", &bad).is_err());
        let flags = CompileOptions {
            flags: vec!["-O3".into()],
            arch: None,
        };
        assert_eq!(SyclBackend::build_options(&flags).unwrap(), vec!["-O3"]);
    }

    #[test]
    fn missing_entries_are_named() {
        let e = compile_failure(
            "nothere",
            Failure {
                code: KFS_COMPILE,
                message: "Device compilation failed\nDetailed information:\n\trtc_0.cpp:13:15: \
                          error: use of undeclared identifier 'nothere'\n   13 |   \
                          {\"nothere\", nothere}"
                    .into(),
            },
        );
        match e {
            SyclError::Compile { reason, log, .. } => {
                assert!(reason.starts_with("no kernel named `nothere`"), "{reason}");
                assert!(log.contains("rtc_0.cpp:13:15"), "{log}");
            }
            other => panic!("{other:?}"),
        }
    }
}
