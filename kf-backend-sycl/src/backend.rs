//! [`SyclBackend`]: the [`Backend`] implementation.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use kf_backend_common::launch::{check_buffer_offset, check_work_group};
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

const LANGUAGES: [Language; 1] = [Language::Sycl];

/// The name of the virtual header that carries a kernel's parameter definitions (see
/// [`SyclBackend::prepare_source`]).
pub const PARAMS_HEADER: &str = "kernelfoundry_params.h";

/// What [`SyclBackend::prepare_source`] hands to the runtime compiler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedSource {
    /// The source, with its `#include <sycl/sycl.hpp>` line replaced by
    /// `#include "kernelfoundry_params.h"` when there are parameters.
    pub text: String,
    /// The contents of [`PARAMS_HEADER`], when there are parameters.
    pub params_header: Option<String>,
}

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
///   the kernel's `#include <sycl/sycl.hpp>` line is replaced by a virtual header holding that
///   include and the definitions (see [`SyclBackend::prepare_source`] for why not `-D`);
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
            .field("cache", &self.cache.as_ref().map(BundleCache::dir))
            .finish_non_exhaustive()
    }
}

/// Kernel facts from the shim (`kfs_program_info`).
#[derive(Debug, Default, Deserialize)]
struct KernelInfo {
    num_args: Option<u32>,
    work_group_size: Option<u64>,
    private_mem_size: Option<u64>,
    preferred_work_group_size_multiple: Option<u64>,
    max_sub_group_size: Option<u32>,
    compile_sub_group_size: Option<u32>,
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

    /// The source actually compiled for `source` with `params`.
    ///
    /// Parameters are definitions, as in the other backends, but not `-D` options: a `-D`
    /// reaches the SYCL headers too, where the names kernel parameters commonly take are
    /// identifiers (`T`, `N` and `WG` are template or function parameter names in `sycl.hpp`),
    /// so `-DT=float` or `-DWG=16` break the headers. Instead, a virtual header
    /// [`PARAMS_HEADER`] holds `#include <sycl/sycl.hpp>` followed by one `#define NAME value`
    /// per parameter, and the kernel's own `#include <sycl/sycl.hpp>` line is replaced by
    /// `#include "kernelfoundry_params.h"`: the headers never see the definitions, everything
    /// after that line does, and the line numbers of clang's diagnostics stay the kernel's own.
    /// A kernel without that include line gets the header included before its first line
    /// (diagnostics then count one line more). Without parameters the source is unchanged.
    ///
    /// Fails on a parameter name that is not a C identifier, or a value that is empty or holds
    /// a line break or NUL byte.
    pub fn prepare_source(source: &str, params: &ParamValues) -> Result<PreparedSource, String> {
        if params.is_empty() {
            return Ok(PreparedSource {
                text: source.to_owned(),
                params_header: None,
            });
        }
        let mut header = String::from("#include <sycl/sycl.hpp>\n");
        for (name, value) in params.iter() {
            if !is_identifier(name) {
                return Err(format!("parameter name {name:?} is not a C identifier"));
            }
            let value = value.to_string();
            if value.trim().is_empty() || value.contains(['\0', '\n', '\r']) {
                return Err(format!(
                    "parameter {name} has value {value:?}; a definition cannot be empty or hold \
                     a NUL byte or a line break"
                ));
            }
            header.push_str(&format!("#define {name} {value}\n"));
        }
        let include = format!("#include \"{PARAMS_HEADER}\"");
        let mut text = String::with_capacity(source.len() + include.len() + 1);
        let mut replaced = false;
        for line in source.split_inclusive('\n') {
            if !replaced && is_sycl_hpp_include(line) {
                text.push_str(&include);
                text.push_str(if line.ends_with("\r\n") {
                    "\r\n"
                } else if line.ends_with('\n') {
                    "\n"
                } else {
                    ""
                });
                replaced = true;
            } else {
                text.push_str(line);
            }
        }
        if !replaced {
            text = format!("{include}\n{source}");
        }
        Ok(PreparedSource {
            text,
            params_header: Some(header),
        })
    }

    /// The build options for `options`: its flags, verbatim, one option each. Fails on a NUL
    /// byte.
    pub fn build_options(options: &CompileOptions) -> Result<Vec<String>, String> {
        options
            .flags
            .iter()
            .map(|flag| {
                if flag.contains('\0') {
                    Err(format!("compiler flag {flag:?} contains a NUL byte"))
                } else {
                    Ok(flag.clone())
                }
            })
            .collect()
    }

    fn programs(&self) -> MutexGuard<'_, HashMap<String, Arc<KernelInner>>> {
        self.programs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, key: &str, kernel: &Arc<KernelInner>) {
        let mut programs = self.programs();
        if programs.len() >= MAX_PROGRAMS_IN_MEMORY {
            programs.clear();
        }
        programs.insert(key.to_owned(), Arc::clone(kernel));
    }

    fn kernel_info(&self, program: &ffi::Program) -> KernelInfo {
        self.queue
            .program_info(program)
            .ok()
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default()
    }

    /// Builds (no cache involved): extern "C" kernels plainly (serialisable), others and
    /// kernels not found that way through `registered_names`.
    fn build_program(
        &self,
        source: &PreparedSource,
        options: &[String],
        entry: &str,
    ) -> Result<(ffi::Built, bool), SyclError> {
        let extern_c = mentions_extern_c(&source.text);
        let mut registered = !extern_c;
        let mut result = self.build_on_big_stack(source, options, entry, registered)?;
        if extern_c {
            if let Err(f) = &result {
                if f.code == KFS_COMPILE && f.message.starts_with("no kernel named") {
                    // Not an extern "C" kernel after all: look it up by its C++ name. (When it
                    // does not exist, the compiler then says so with a diagnostic.)
                    registered = true;
                    result = self.build_on_big_stack(source, options, entry, true)?;
                }
            }
        }
        match result {
            Ok(built) => Ok((built, registered)),
            Err(f) if f.code == KFS_COMPILE => Err(compile_failure(entry, f)),
            Err(f) => Err(f.into_error("building SYCL source")),
        }
    }

    /// Runs one build on a thread of its own with [`BUILD_STACK_BYTES`] of stack: the runtime
    /// compiles on the calling thread (clang, deep recursion over `sycl.hpp`), which overflows
    /// the 2 MiB stacks of Rust's spawned threads (test threads, thread pools).
    fn build_on_big_stack(
        &self,
        source: &PreparedSource,
        options: &[String],
        entry: &str,
        register_name: bool,
    ) -> Result<Result<ffi::Built, Failure>, SyclError> {
        let spawn_error = |e: std::io::Error| SyclError::Runtime {
            operation: "starting the SYCL build thread",
            message: e.to_string(),
        };
        std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .name("kf-sycl-build".into())
                .stack_size(BUILD_STACK_BYTES)
                .spawn_scoped(scope, || {
                    let include = source
                        .params_header
                        .as_deref()
                        .map(|header| (PARAMS_HEADER, header));
                    self.queue
                        .build(&source.text, include, options, entry, register_name)
                })
                .map_err(spawn_error)?;
            handle.join().map_err(|_| SyclError::Runtime {
                operation: "building SYCL source",
                message: "the build thread panicked".into(),
            })
        })
    }
}

/// An entry point: a C identifier, optionally namespace-qualified (`ns::kernel`).
fn is_entry_name(name: &str) -> bool {
    name.split("::").all(is_identifier)
}

/// Whether `line` is `#include <sycl/sycl.hpp>` (spaces anywhere, a trailing comment allowed).
fn is_sycl_hpp_include(line: &str) -> bool {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    compact
        .strip_prefix("#include<sycl/sycl.hpp>")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("//") || rest.starts_with("/*"))
}

/// Whether the source declares anything `extern "C"`.
fn mentions_extern_c(source: &str) -> bool {
    let code = strip_comments(source);
    code.match_indices("extern")
        .any(|(i, _)| code[i + "extern".len()..].trim_start().starts_with("\"C\""))
}

/// Why a source cannot be built safely by this runtime, if it cannot.
fn known_crasher(source: &str) -> Option<&'static str> {
    let code = strip_comments(source);
    code.contains("group_local_memory").then_some(
        "sycl::ext::oneapi::group_local_memory / group_local_memory_for_overwrite crash the \
         SYCL runtime's kernel compiler (a segmentation fault in \
         DeviceKernelInfo::setImplicitLocalArgPos, intel-sycl-rt 2026.2); declare static \
         local memory as `static sycl::ext::oneapi::experimental::work_group_static<float[N]> \
         name;` inside the kernel, or take a sycl::local_accessor argument",
    )
}

/// A compile error from a failed build: the runtime's message is clang's diagnostics.
fn compile_failure(entry: &str, failure: Failure) -> SyclError {
    let log = failure.message;
    let missing_entry = log.contains(&format!("undeclared identifier '{entry}'"))
        && log.contains(&format!("{{\"{entry}\","));
    let reason = if log.starts_with("no kernel named") {
        log.lines().next().unwrap_or("").to_owned()
    } else if missing_entry {
        format!(
            "no kernel named `{entry}`: the source declares no such free function (kernels are \
             found by name: declare the entry point extern \"C\" or give its C++ name)"
        )
    } else {
        let first_error = log
            .lines()
            .find(|l| l.contains("error:"))
            .map(|l| l.trim().to_owned());
        match first_error {
            Some(line) => format!("device compilation failed: {line}"),
            None => log
                .lines()
                .next()
                .unwrap_or("build failed")
                .trim()
                .to_owned(),
        }
    };
    SyclError::Compile {
        entry: entry.to_owned(),
        log: if log.trim().is_empty() {
            reason.clone()
        } else {
            log
        },
        reason,
    }
}

fn compile_error(entry: &str, reason: impl Into<String>) -> SyclError {
    let reason = reason.into();
    SyclError::Compile {
        entry: entry.to_owned(),
        log: reason.clone(),
        reason,
    }
}

/// A work-group shape for a range launched without one: in each dimension (the fastest, i.e.
/// the last, first) the largest divisor of the global size that fits what is left of a
/// budget of at most 256 work-items.
fn choose_local(global: &[usize], limit: u64, item: impl Fn(usize) -> u64) -> Vec<usize> {
    let mut budget = usize::try_from(limit.clamp(1, 256)).unwrap_or(1);
    let mut local = vec![1; global.len()];
    for d in (0..global.len()).rev() {
        let cap = budget
            .min(usize::try_from(item(d)).unwrap_or(usize::MAX))
            .max(1);
        let l = (1..=cap.min(global[d]))
            .rev()
            .find(|l| global[d].is_multiple_of(*l))
            .unwrap_or(1);
        local[d] = l;
        budget = (budget / l).max(1);
    }
    local
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

fn launch_error(failure: Failure) -> SyclError {
    if failure.code == KFS_RESOURCES {
        SyclError::Resources {
            operation: "launching the kernel",
            message: failure.message,
        }
    } else {
        SyclError::Launch {
            message: failure.message,
        }
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
        let entry = source.entry.as_str();
        if source.language != Language::Sycl {
            return Err(compile_error(
                entry,
                format!(
                    "the SYCL backend compiles SYCL free-function kernels, not {}",
                    source.language
                ),
            ));
        }
        if !is_entry_name(entry) {
            return Err(compile_error(
                entry,
                format!("entry point {entry:?} is not a (namespace-qualified) C identifier"),
            ));
        }
        if source.text.contains('\0') {
            return Err(compile_error(entry, "the source contains a NUL byte"));
        }
        if let Some(why) = known_crasher(&source.text) {
            return Err(compile_error(entry, why));
        }
        let prepared = Self::prepare_source(&source.text, params)
            .map_err(|reason| compile_error(entry, reason))?;
        let build_options =
            Self::build_options(options).map_err(|reason| compile_error(entry, reason))?;
        let keyed_text = match &prepared.params_header {
            Some(header) => format!("{header}\0{}", prepared.text),
            None => prepared.text.clone(),
        };
        let key = BundleCache::key(&keyed_text, &build_options, entry, &self.facts);
        let hit = |inner: &Arc<KernelInner>, how: &str, started: Instant| {
            let mut facts = inner.facts.clone();
            facts.cache_hit = true;
            facts.compile_seconds = Some(0.0);
            facts.extra.insert("cache".into(), how.to_owned());
            facts.extra.insert(
                "load_seconds".into(),
                format!("{:.6}", started.elapsed().as_secs_f64()),
            );
            Compiled {
                kernel: SyclKernel {
                    inner: Arc::clone(inner),
                },
                log: inner.log.clone(),
                facts,
            }
        };
        let started = Instant::now();
        if let Some(inner) = self.programs().get(&key).cloned() {
            return Ok(hit(&inner, "memory", started));
        }
        let mut base_facts = CompilerFacts::default();
        base_facts.extra.insert("cache_key".into(), key.clone());
        base_facts
            .extra
            .insert("build_options".into(), build_options.join(" "));
        if !params.is_empty() {
            base_facts.extra.insert(
                "definitions".into(),
                format!(
                    "#define lines in the virtual header {PARAMS_HEADER}, after <sycl/sycl.hpp> \
                     (see SyclBackend::prepare_source)"
                ),
            );
        }

        if let Some(cache) = &self.cache {
            if let Some((bundle, meta)) = cache.get(&key) {
                match self.queue.load(&bundle, entry) {
                    Ok(program) => {
                        let info = self.kernel_info(&program);
                        let mut facts = base_facts.clone();
                        fill_facts(&mut facts, &info);
                        if let Some(s) = meta.build_seconds {
                            facts
                                .extra
                                .insert("original_build_seconds".into(), format!("{s:.3}"));
                        }
                        let inner = Arc::new(KernelInner {
                            program,
                            entry: entry.to_owned(),
                            num_args: meta.num_args.or(info.num_args),
                            max_work_group_size: info.work_group_size,
                            log: meta.log,
                            facts,
                        });
                        self.remember(&key, &inner);
                        return Ok(hit(&inner, "disk", started));
                    }
                    Err(_) => cache.remove(&key),
                }
            }
        }

        let (built, registered) = self.build_program(&prepared, &build_options, entry)?;
        let build_seconds = started.elapsed().as_secs_f64();
        let info = self.kernel_info(&built.program);
        let mut facts = base_facts;
        fill_facts(&mut facts, &info);
        facts.compile_seconds = Some(build_seconds);
        facts.extra.insert(
            "entry_lookup".into(),
            if registered {
                "registered C++ name"
            } else {
                "extern \"C\" name"
            }
            .into(),
        );
        if let Some(cache) = &self.cache {
            if registered {
                facts.extra.insert(
                    "cache_note".into(),
                    "the kernel is not extern \"C\": this SYCL runtime cannot serialise bundles \
                     built with registered names, so it is cached in memory only"
                        .into(),
                );
            } else {
                let meta = EntryMeta {
                    num_args: info.num_args,
                    log: built.log.clone(),
                    build_seconds: Some(build_seconds),
                };
                let stored = built
                    .program
                    .content()
                    .map_err(|f| f.message)
                    .and_then(|bundle| cache.put(&key, &bundle, &meta).map_err(|e| e.to_string()));
                if let Err(e) = stored {
                    facts.extra.insert("cache_error".into(), e);
                }
            }
        }
        let inner = Arc::new(KernelInner {
            program: built.program,
            entry: entry.to_owned(),
            num_args: info.num_args,
            max_work_group_size: info.work_group_size,
            log: built.log,
            facts: facts.clone(),
        });
        self.remember(&key, &inner);
        Ok(Compiled {
            log: inner.log.clone(),
            kernel: SyclKernel { inner },
            facts,
        })
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
        if data.len() > buffer.len {
            return Err(SyclError::InvalidArgument(format!(
                "writing {} bytes into a buffer of {}",
                data.len(),
                buffer.len
            )));
        }
        if data.is_empty() {
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
        if out.len() > buffer.len {
            return Err(SyclError::InvalidArgument(format!(
                "reading {} bytes from a buffer of {}",
                out.len(),
                buffer.len
            )));
        }
        if out.is_empty() {
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
        let bad = |message: String| SyclError::Launch {
            message: format!("bad launch geometry {range}: {message}"),
        };
        range.check().map_err(bad)?;
        let dims = range.global.len();
        let k = &kernel.inner;
        let limit = k
            .max_work_group_size
            .map_or(self.facts.max_work_group_size, |m| {
                m.min(self.facts.max_work_group_size)
            })
            .max(1);
        let local = match &range.local {
            Some(local) => {
                check_work_group(
                    local,
                    limit,
                    &format!("the maximum {limit} for this kernel on this device"),
                    |d| self.limits.item_size(dims, d),
                )
                .map_err(bad)?;
                local.clone()
            }
            None => choose_local(&range.global, limit, |d| self.limits.item_size(dims, d)),
        };

        let mut raw = Vec::with_capacity(args.len());
        let mut locals = 0usize;
        let mut local_bytes = 0usize;
        for (i, arg) in args.iter().enumerate() {
            raw.push(match arg {
                KernelArg::Buffer { buffer, offset } => {
                    if !Arc::ptr_eq(&buffer.queue, &self.queue) {
                        return Err(SyclError::InvalidArgument(format!(
                            "argument {i}: the buffer belongs to another SYCL backend"
                        )));
                    }
                    check_buffer_offset(i, *offset, self.limits.base_align, buffer.len)
                        .map_err(SyclError::InvalidArgument)?;
                    RawArg::new(ArgKind::Ptr, (buffer.ptr as usize + offset) as u64)
                }
                KernelArg::I32(v) => RawArg::new(ArgKind::I32, u64::from(*v as u32)),
                KernelArg::U32(v) => RawArg::new(ArgKind::U32, u64::from(*v)),
                KernelArg::I64(v) => RawArg::new(ArgKind::I64, *v as u64),
                KernelArg::F32(v) => RawArg::new(ArgKind::F32, u64::from(v.to_bits())),
                KernelArg::Local(bytes) => {
                    if *bytes == 0 {
                        return Err(SyclError::InvalidArgument(format!(
                            "argument {i}: zero bytes of local memory"
                        )));
                    }
                    locals += 1;
                    local_bytes += bytes;
                    RawArg::new(ArgKind::Local, *bytes as u64)
                }
            });
        }
        if local_bytes as u64 > self.facts.local_mem_bytes && self.facts.local_mem_bytes > 0 {
            return Err(SyclError::Launch {
                message: format!(
                    "{local_bytes} bytes of local memory requested, the device has {}",
                    self.facts.local_mem_bytes
                ),
            });
        }
        if let Some(n) = k.num_args {
            let counted = args.len() - locals + ARGS_PER_LOCAL_ACCESSOR * locals;
            if counted != n as usize {
                return Err(SyclError::Launch {
                    message: format!(
                        "`{}` takes {n} arguments as the SYCL runtime counts them (a \
                         local_accessor counts {ARGS_PER_LOCAL_ACCESSOR}); {} given ({counted} \
                         counted)",
                        k.entry,
                        args.len()
                    ),
                });
            }
        }
        // SAFETY: pointer arguments are live USM allocations of this queue (checked above:
        // same queue, offsets inside the buffer), borrowed for the whole blocking call.
        let ns = unsafe { self.queue.launch(&k.program, &raw, &range.global, &local) }
            .map_err(launch_error)?;
        Ok(LaunchTiming {
            device_seconds: ns as f64 * 1e-9,
        })
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

fn fill_facts(facts: &mut CompilerFacts, info: &KernelInfo) {
    facts.private_mem_bytes = info.private_mem_size;
    facts.max_work_group_size = info.work_group_size;
    let mut extra = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            facts.extra.insert(k.to_owned(), v);
        }
    };
    extra(
        "preferred_work_group_size_multiple",
        info.preferred_work_group_size_multiple
            .map(|v| v.to_string()),
    );
    extra(
        "max_sub_group_size",
        info.max_sub_group_size.map(|v| v.to_string()),
    );
    extra(
        "compile_sub_group_size",
        info.compile_sub_group_size
            .filter(|v| *v > 0)
            .map(|v| v.to_string()),
    );
    extra("runtime_num_args", info.num_args.map(|v| v.to_string()));
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
            "// gemm\n#include \"kernelfoundry_params.h\"\nvoid k();\n"
        );
        assert_eq!(
            p.params_header.as_deref(),
            Some("#include <sycl/sycl.hpp>\n#define TS 16\n#define T unsigned int\n")
        );
        let bare = SyclBackend::prepare_source("void k();", &params).unwrap();
        assert_eq!(bare.text, "#include \"kernelfoundry_params.h\"\nvoid k();");
        let none = SyclBackend::prepare_source("k", &ParamValues::new()).unwrap();
        assert_eq!((none.text.as_str(), none.params_header), ("k", None));
        let bad = ParamValues::new().with("1X", 1i64);
        assert!(SyclBackend::prepare_source("k", &bad).is_err());
        let bad = ParamValues::new().with("X", "a\nb");
        assert!(SyclBackend::prepare_source("k", &bad).is_err());
        assert!(is_sycl_hpp_include("  #  include <sycl/sycl.hpp>\r\n"));
        assert!(!is_sycl_hpp_include("#include <sycl/sycl.hpp> extra"));
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
