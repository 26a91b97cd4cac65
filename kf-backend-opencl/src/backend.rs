//! [`OpenClBackend`]: the [`Backend`] implementation.

use std::ptr;
use std::sync::Mutex;
use std::time::Instant;

use kf_backend_common::compile_cache::record_load_seconds;
use kf_backend_common::compile_input::{
    check_flags, checked_definitions, is_plain_entry_name, SourceRules,
};
use kf_backend_common::launch::{
    check_buffer_offset, check_copy, check_work_group, describe_arg, CopyDirection,
};
use kf_backend_common::{BackendOptions, CacheSlot, CompileInputError, Flusher};
use kf_core::{
    Backend, CompileOptions, Compiled, CompilerFacts, DeviceFacts, KernelArg, KernelSource,
    Language, LaunchTiming, NdRange, ParamValues,
};
use opencl3::command_queue::{CommandQueue, CL_QUEUE_PROFILING_ENABLE};
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{cl_mem, CL_BLOCKING};

use crate::cache::{BinaryCache, ProgramBinary};
use crate::device::{facts, list_devices, DeviceInfo, Limits};
use crate::error::{cl_error_name, OpenClError};
use crate::runtime::{self, RuntimeInfo};

/// `CL_KERNEL_SPILL_MEM_SIZE_INTEL`.
const CL_KERNEL_SPILL_MEM_SIZE_INTEL: u32 = 0x4109;
/// `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE`.
const CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE: u32 = 0x11B3;

const LANGUAGES: [Language; 1] = [Language::OpenCl];

/// What this backend compiles: OpenCL C, with a kernel looked up by its plain name.
const SOURCE_RULES: SourceRules = SourceRules {
    language: Language::OpenCl,
    compiles: "OpenCL C",
    backend: "OpenCL",
    entry_ok: is_plain_entry_name,
    entry_is: "a C identifier",
};

/// This backend's place for one kernel in its compile cache.
type Slot<'a> = CacheSlot<'a, ProgramBinary>;

/// Writes a whole scratch buffer, 16 bytes per work-item, for [`Backend::flush_caches`].
const FLUSH_KERNEL: &str = "__kernel void kf_flush(__global uint4* p, uint v) {
    size_t i = get_global_id(0);
    p[i] = (uint4)(v, v + 1u, v + 2u, (uint)i);
}";

/// Configures an [`OpenClBackend`]: device choice, compile cache, cache-flush size, peaks.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct OpenClBackendBuilder {
    options: BackendOptions,
}

kf_backend_common::impl_backend_builder!(OpenClBackendBuilder => OpenClBackend, OpenClError);

impl OpenClBackendBuilder {
    kf_backend_common::backend_builder_methods!("KF_OPENCL_DEVICE");

    /// Finds the runtime, picks the device and creates its context and profiling queue.
    pub fn build(self) -> Result<OpenClBackend, OpenClError> {
        let runtime = runtime::prepare();
        let devices = list_devices()?;
        let Some(info) = self.options.selector.select(&devices) else {
            let none = self.options.selector.no_match(&devices);
            return Err(OpenClError::Unavailable {
                message: format!(
                    "no OpenCL device matches {}; available: {}",
                    none.wanted,
                    none.listed.join("; ")
                ),
            });
        };
        OpenClBackend::create(info.clone(), runtime, self)
    }
}

/// A [`Backend`] over any OpenCL driver, loaded at run time.
///
/// ```
/// use kf_backend_opencl::OpenClBackend;
/// use kf_core::prelude::*;
///
/// # fn main() -> Result<(), kf_backend_opencl::OpenClError> {
/// let backend = match OpenClBackend::new() {
///     Ok(backend) => backend,
///     Err(e) if e.kind() == BackendErrorKind::Unavailable => {
///         eprintln!("skipped: {e}");
///         return Ok(());
///     }
///     Err(e) => return Err(e),
/// };
/// println!("{} ({} compute units)", backend.device().name, backend.device().compute_units);
/// let src = KernelSource::new(
///     Language::OpenCl,
///     "scale",
///     "__kernel void scale(__global float* x) { x[get_global_id(0)] *= FACTOR; }",
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
pub struct OpenClBackend {
    // Field order is drop order: buffers and the queue go before the context.
    flusher: Flusher<OpenClBackend>,
    queue: CommandQueue,
    context: Context,
    device: Device,
    info: DeviceInfo,
    facts: DeviceFacts,
    limits: Limits,
    cache: Option<BinaryCache>,
    runtime: &'static RuntimeInfo,
}

impl std::fmt::Debug for OpenClBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenClBackend")
            .field("device", &self.info.to_string())
            .field("cache", &self.cache.as_ref().map(|c| c.dir()))
            .finish_non_exhaustive()
    }
}

impl OpenClBackend {
    /// The default backend: finds the runtime (see [`crate::runtime`]), picks the device named
    /// by `KF_OPENCL_DEVICE` or else the best one, caches binaries in the default place.
    ///
    /// The first call in a process may set environment variables for the OpenCL loader; create
    /// the first backend (or call [`crate::runtime::prepare`]) before spawning threads that read
    /// the environment.
    pub fn new() -> Result<Self, OpenClError> {
        Self::builder().build()
    }

    /// A builder for the non-default choices.
    pub fn builder() -> OpenClBackendBuilder {
        OpenClBackendBuilder::default()
    }

    fn create(
        info: DeviceInfo,
        runtime: &'static RuntimeInfo,
        options: OpenClBackendBuilder,
    ) -> Result<Self, OpenClError> {
        let device = Device::new(info.id);
        let (mut facts, limits) = facts(&info);
        let options = options.options;
        options.apply_peaks(&mut facts);
        let context =
            Context::from_device(&device).map_err(|e| OpenClError::cl("clCreateContext", e.0))?;
        let queue = create_profiling_queue(&context, &device)?;
        let cache = options
            .cache_dir(runtime.runtime_dir.as_deref(), "opencl")
            .map(BinaryCache::new);
        let flusher = Flusher::new(options.flush_bytes(limits.cache_bytes, limits.max_alloc));
        Ok(OpenClBackend {
            flusher,
            queue,
            context,
            device,
            info,
            facts,
            limits,
            cache,
            runtime,
        })
    }

    /// Where the runtime came from (see [`crate::runtime`]).
    pub fn runtime(&self) -> &RuntimeInfo {
        self.runtime
    }

    /// The device as listed by [`list_devices`].
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The compile cache, if enabled.
    pub fn cache(&self) -> Option<&BinaryCache> {
        self.cache.as_ref()
    }

    /// The `clBuildProgram` options for `params` and `options`: `-D NAME=value` per parameter,
    /// then the flags verbatim. Fails on a parameter name that is not a C identifier, or a value
    /// or flag OpenCL cannot carry (whitespace in a value, a NUL byte).
    pub fn build_options(
        params: &ParamValues,
        options: &CompileOptions,
    ) -> Result<String, CompileInputError> {
        let value_ok = |value: &str| {
            !value.is_empty() && !value.chars().any(|c| c.is_whitespace() || c == '\0')
        };
        let definitions = checked_definitions(
            params,
            value_ok,
            "OpenCL build options cannot carry empty values or whitespace",
        )?;
        let mut parts = Vec::with_capacity(params.len() + options.flags.len());
        for (name, value) in definitions {
            parts.push(format!("-D {name}={value}"));
        }
        check_flags(&options.flags)?;
        parts.extend(options.flags.iter().cloned());
        Ok(parts.join(" "))
    }

    fn compile_error(entry: &str, reason: impl Into<String>, log: String) -> OpenClError {
        let reason = reason.into();
        let log = if log.trim().is_empty() {
            reason.clone()
        } else {
            log
        };
        OpenClError::Compile {
            entry: entry.to_owned(),
            reason,
            log,
        }
    }

    /// The kernel from the binary cached in `slot`, its build log and facts (a cache hit,
    /// with the load time); `None` when there is none, or the driver refuses it (the entry is
    /// then dropped).
    fn load_cached(
        &self,
        slot: &Slot<'_>,
        build_options: &str,
        entry: &str,
        started: Instant,
    ) -> Option<(Kernel, String, CompilerFacts)> {
        let binary = slot.lookup()?;
        let Some((kernel, log)) = self.load_binary(&binary, build_options, entry) else {
            slot.discard();
            return None;
        };
        let mut facts = self.kernel_facts(&kernel);
        slot.record_hit(&mut facts);
        record_load_seconds(&mut facts, started);
        Some((kernel, log, facts))
    }

    /// Builds `source` for the device and finds its entry point: the program, the kernel, the
    /// build log and the seconds since `started` the build took; a compile error with the log
    /// when either fails.
    fn build_from_source(
        &self,
        source: &KernelSource,
        build_options: &str,
        started: Instant,
    ) -> Result<(Program, Kernel, String, f64), OpenClError> {
        let entry = source.entry.as_str();
        let mut program = Program::create_from_source(&self.context, &source.text)
            .map_err(|e| OpenClError::cl("clCreateProgramWithSource", e.0))?;
        let built = program.build(&[self.device.id()], build_options);
        let log = self.build_log(&program);
        if let Err(e) = built {
            return Err(Self::compile_error(
                entry,
                format!("{} ({})", cl_error_name(e.0), e.0),
                log,
            ));
        }
        let compile_seconds = started.elapsed().as_secs_f64();
        let kernel = Kernel::create(&program, entry).map_err(|e| {
            let names = program.get_kernel_names().unwrap_or_default();
            Self::compile_error(
                entry,
                format!(
                    "no kernel named `{entry}` ({}); the program defines: {}",
                    cl_error_name(e.0),
                    names.trim_matches('\0')
                ),
                log.clone(),
            )
        })?;
        Ok((program, kernel, log, compile_seconds))
    }

    /// Stores the program's binary in `slot`'s cache, when there is one; `facts` get the file
    /// it went to, or why it did not (`cache_error`).
    fn store_binary(program: &Program, slot: &Slot<'_>, facts: &mut CompilerFacts) {
        slot.store(
            || match program.get_binaries() {
                Ok(binaries) => binaries
                    .into_iter()
                    .next()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| "the driver returned no binary".to_owned()),
                Err(e) => Err(format!("clGetProgramInfo(CL_PROGRAM_BINARIES): {e}")),
            },
            facts,
        );
    }

    /// Checks a launch's geometry against the device and its argument count against the
    /// kernel; the work-group sizes to pass (null when the runtime chooses).
    fn check_launch(
        &self,
        kernel: &OpenClKernel,
        args: &[KernelArg<'_, OpenClBuffer>],
        range: &NdRange,
    ) -> Result<*const usize, OpenClError> {
        let bad = |message: String| OpenClError::Launch {
            message: format!("bad launch geometry {range}: {message}"),
        };
        range.check().map_err(|e| bad(e.to_string()))?;
        let dims = range.global.len();
        if dims > self.limits.max_dims {
            return Err(bad(format!(
                "{dims} dimensions, the device supports {}",
                self.limits.max_dims
            )));
        }
        let local_ptr = match &range.local {
            Some(local) => {
                let max = self.facts.max_work_group_size;
                check_work_group(local, max, &format!("the device maximum {max}"), |d| {
                    self.facts
                        .max_work_item_sizes
                        .get(d)
                        .copied()
                        .unwrap_or(u64::MAX)
                })
                .map_err(|e| bad(e.to_string()))?;
                local.as_ptr()
            }
            None => ptr::null(),
        };
        if args.len() != kernel.num_args as usize {
            return Err(OpenClError::Launch {
                message: format!(
                    "`{}` takes {} arguments, {} given",
                    kernel.entry,
                    kernel.num_args,
                    args.len()
                ),
            });
        }
        Ok(local_ptr)
    }

    /// Sets every argument of `k`; returns the sub-buffers made for buffers passed at an
    /// offset, which must outlive the launch.
    fn set_args(
        &self,
        k: &Kernel,
        args: &[KernelArg<'_, OpenClBuffer>],
    ) -> Result<Vec<Buffer<u8>>, OpenClError> {
        let mut views: Vec<Buffer<u8>> = Vec::new();
        for (i, arg) in args.iter().enumerate() {
            let index = i as u32;
            let arg_error = |e: opencl3::error_codes::ClError| {
                OpenClError::launch(
                    "clSetKernelArg",
                    e.0,
                    &format!("argument {i} ({})", describe_arg(arg, "local memory")),
                )
            };
            // SAFETY: each value has the size OpenCL expects for its C type; memory objects are
            // passed as cl_mem handles that stay alive until the launch completes (`views`).
            unsafe {
                match arg {
                    KernelArg::Buffer { buffer, offset } => {
                        let mem = self.buffer_arg(i, buffer, *offset, &mut views)?;
                        k.set_arg(index, &mem)
                    }
                    KernelArg::I32(v) => k.set_arg(index, v),
                    KernelArg::U32(v) => k.set_arg(index, v),
                    KernelArg::I64(v) => k.set_arg(index, v),
                    KernelArg::F32(v) => k.set_arg(index, v),
                    KernelArg::Local(bytes) => k.set_arg_local_buffer(index, *bytes),
                }
            }
            .map_err(arg_error)?;
        }
        Ok(views)
    }

    /// The memory object argument `i` passes: the buffer itself at offset 0, else a checked
    /// sub-buffer from `offset`, kept in `views`.
    fn buffer_arg(
        &self,
        i: usize,
        buffer: &OpenClBuffer,
        offset: usize,
        views: &mut Vec<Buffer<u8>>,
    ) -> Result<cl_mem, OpenClError> {
        if offset == 0 {
            return Ok(buffer.mem.get());
        }
        check_buffer_offset(i, offset, self.limits.base_align, buffer.len)
            .map_err(|e| OpenClError::InvalidArgument(e.to_string()))?;
        // SAFETY: the region starts inside the buffer (checked above) and ends at its end.
        let view = unsafe {
            buffer
                .mem
                .create_sub_buffer(CL_MEM_READ_WRITE, offset, buffer.len - offset)
        }
        .map_err(|e| {
            OpenClError::launch(
                "clCreateSubBuffer",
                e.0,
                &format!("argument {i} at offset {offset}"),
            )
        })?;
        let mem = view.get();
        views.push(view);
        Ok(mem)
    }

    fn build_log(&self, program: &Program) -> String {
        program
            .get_build_log(self.device.id())
            .unwrap_or_default()
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
            .to_owned()
    }

    /// Loads a cached binary; `None` (and the entry dropped) if the driver refuses it.
    fn load_binary(&self, binary: &[u8], options: &str, entry: &str) -> Option<(Kernel, String)> {
        // SAFETY: the device belongs to the context.
        let mut program =
            unsafe { Program::create_from_binary(&self.context, &[self.device.id()], &[binary]) }
                .ok()?;
        program.build(&[self.device.id()], options).ok()?;
        let log = self.build_log(&program);
        let kernel = Kernel::create(&program, entry).ok()?;
        Some((kernel, log))
    }

    fn kernel_facts(&self, kernel: &Kernel) -> CompilerFacts {
        let id = self.device.id();
        let mut facts = CompilerFacts {
            local_mem_bytes: kernel.get_local_mem_size(id).ok(),
            private_mem_bytes: kernel.get_private_mem_size(id).ok(),
            max_work_group_size: kernel.get_work_group_size(id).ok().map(|v| v as u64),
            ..CompilerFacts::default()
        };
        let size_t = |param| {
            kernel
                .get_work_group_data(id, param)
                .ok()
                .filter(|b| b.len() == std::mem::size_of::<usize>())
                .map(|b| {
                    let mut a = [0u8; 8];
                    a[..b.len()].copy_from_slice(&b);
                    u64::from_ne_bytes(a)
                })
        };
        facts.spill_bytes = size_t(CL_KERNEL_SPILL_MEM_SIZE_INTEL);
        if let Some(m) = size_t(CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE) {
            facts
                .extra
                .insert("preferred_work_group_size_multiple".into(), m.to_string());
        }
        facts
    }
}

fn create_profiling_queue(context: &Context, device: &Device) -> Result<CommandQueue, OpenClError> {
    // SAFETY: the device belongs to the context.
    let queue = unsafe {
        CommandQueue::create_with_properties(context, device.id(), CL_QUEUE_PROFILING_ENABLE, 0)
    };
    match queue {
        Ok(q) => Ok(q),
        // OpenCL 1.x drivers lack clCreateCommandQueueWithProperties.
        Err(_) => {
            #[allow(deprecated)]
            // SAFETY: as above.
            let q =
                unsafe { CommandQueue::create(context, device.id(), CL_QUEUE_PROFILING_ENABLE) };
            q.map_err(|e| OpenClError::cl("clCreateCommandQueue", e.0))
        }
    }
}

/// The device time of a finished command, from its profiling event.
fn profiled_seconds(event: &Event) -> Result<LaunchTiming, OpenClError> {
    let start = event
        .profiling_command_start()
        .map_err(|e| OpenClError::cl("clGetEventProfilingInfo", e.0))?;
    let end = event
        .profiling_command_end()
        .map_err(|e| OpenClError::cl("clGetEventProfilingInfo", e.0))?;
    Ok(LaunchTiming {
        device_seconds: end.saturating_sub(start) as f64 * 1e-9,
    })
}

/// A compiled OpenCL kernel. Launches from several threads are serialised (OpenCL kernel
/// arguments are per kernel object).
pub struct OpenClKernel {
    kernel: Mutex<Kernel>,
    entry: String,
    num_args: u32,
}

impl OpenClKernel {
    /// A built (or loaded) kernel with what compiling it found; `facts` gains the cache key and
    /// build options it was made with, whichever way it was made.
    fn compiled(
        kernel: Kernel,
        entry: &str,
        log: String,
        mut facts: CompilerFacts,
        cache_key: String,
        build_options: String,
    ) -> Compiled<OpenClKernel> {
        facts.extra.insert("cache_key".into(), cache_key);
        facts.extra.insert("build_options".into(), build_options);
        let num_args = kernel.num_args().unwrap_or(0);
        Compiled {
            kernel: OpenClKernel {
                kernel: Mutex::new(kernel),
                entry: entry.to_owned(),
                num_args,
            },
            log,
            facts,
        }
    }
}

impl std::fmt::Debug for OpenClKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenClKernel")
            .field("entry", &self.entry)
            .field("num_args", &self.num_args)
            .finish()
    }
}

impl OpenClKernel {
    /// The entry point's name.
    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// How many arguments the kernel takes.
    pub fn num_args(&self) -> u32 {
        self.num_args
    }
}

/// A device buffer of a fixed size.
#[derive(Debug)]
pub struct OpenClBuffer {
    mem: Buffer<u8>,
    len: usize,
}

impl OpenClBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer has no bytes (never true: zero-size buffers are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Backend for OpenClBackend {
    type Error = OpenClError;
    type Kernel = OpenClKernel;
    type Buffer = OpenClBuffer;

    fn name(&self) -> &str {
        "opencl"
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
    ) -> Result<Compiled<OpenClKernel>, OpenClError> {
        let entry = source.entry.as_str();
        SOURCE_RULES
            .check(source)
            .map_err(|rejected| Self::compile_error(entry, rejected.to_string(), String::new()))?;
        let build_options = Self::build_options(params, options)
            .map_err(|reason| Self::compile_error(entry, reason.to_string(), String::new()))?;
        let key = BinaryCache::key(&source.text, &build_options, &self.facts);
        let started = Instant::now();
        // The binary's place in the cache; its `cache_file` is what a compile worker ships.
        let slot = Slot::new(self.cache.as_deref(), &key);
        if let Some((kernel, log, facts)) = self.load_cached(&slot, &build_options, entry, started)
        {
            return Ok(OpenClKernel::compiled(
                kernel,
                entry,
                log,
                facts,
                key,
                build_options,
            ));
        }
        let (program, kernel, log, compile_seconds) =
            self.build_from_source(source, &build_options, started)?;
        let mut facts = self.kernel_facts(&kernel);
        facts.compile_seconds = Some(compile_seconds);
        Self::store_binary(&program, &slot, &mut facts);
        Ok(OpenClKernel::compiled(
            kernel,
            entry,
            log,
            facts,
            key,
            build_options,
        ))
    }

    fn alloc(&self, bytes: usize) -> Result<OpenClBuffer, OpenClError> {
        if bytes == 0 {
            return Err(OpenClError::InvalidArgument(
                "OpenCL buffers cannot have zero size".into(),
            ));
        }
        if bytes as u64 > self.limits.max_alloc {
            return Err(OpenClError::Resources {
                operation: "clCreateBuffer",
                message: format!(
                    "{bytes} bytes exceed CL_DEVICE_MAX_MEM_ALLOC_SIZE ({})",
                    self.limits.max_alloc
                ),
            });
        }
        // SAFETY: no host pointer is passed.
        let mem = unsafe {
            Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, bytes, ptr::null_mut())
        }
        .map_err(|e| OpenClError::cl("clCreateBuffer", e.0))?;
        Ok(OpenClBuffer { mem, len: bytes })
    }

    fn write(&self, buffer: &mut OpenClBuffer, data: &[u8]) -> Result<(), OpenClError> {
        if !check_copy(CopyDirection::Write, data.len(), buffer.len)
            .map_err(|e| OpenClError::InvalidArgument(e.to_string()))?
        {
            return Ok(());
        }
        // SAFETY: blocking write of `data`, which outlives the call, into a buffer large enough.
        unsafe {
            self.queue
                .enqueue_write_buffer(&mut buffer.mem, CL_BLOCKING, 0, data, &[])
        }
        .map_err(|e| OpenClError::cl("clEnqueueWriteBuffer", e.0))?;
        Ok(())
    }

    fn read(&self, buffer: &OpenClBuffer, out: &mut [u8]) -> Result<(), OpenClError> {
        if !check_copy(CopyDirection::Read, out.len(), buffer.len)
            .map_err(|e| OpenClError::InvalidArgument(e.to_string()))?
        {
            return Ok(());
        }
        // SAFETY: blocking read into `out`, which outlives the call.
        unsafe {
            self.queue
                .enqueue_read_buffer(&buffer.mem, CL_BLOCKING, 0, out, &[])
        }
        .map_err(|e| OpenClError::cl("clEnqueueReadBuffer", e.0))?;
        Ok(())
    }

    fn launch(
        &self,
        kernel: &OpenClKernel,
        args: &[KernelArg<'_, OpenClBuffer>],
        range: &NdRange,
    ) -> Result<LaunchTiming, OpenClError> {
        let local_ptr = self.check_launch(kernel, args, range)?;
        let k = kernel.kernel.lock().unwrap_or_else(|p| p.into_inner());
        // Sub-buffers for offset views; they must live until the kernel has finished.
        let views = self.set_args(&k, args)?;
        let dims = range.global.len();
        // SAFETY: all arguments are set; the size arrays have `dims` entries and outlive the
        // call.
        let event: Event = unsafe {
            self.queue.enqueue_nd_range_kernel(
                k.get(),
                dims as u32,
                ptr::null(),
                range.global.as_ptr(),
                local_ptr,
                &[],
            )
        }
        .map_err(|e| OpenClError::launch("clEnqueueNDRangeKernel", e.0, &range.to_string()))?;
        event
            .wait()
            .map_err(|e| OpenClError::launch("clWaitForEvents", e.0, "the kernel failed"))?;
        drop(views);
        profiled_seconds(&event)
    }

    fn buffer_alignment(&self) -> usize {
        self.limits.base_align
    }

    /// Overwrites a scratch buffer (twice the largest cache, at least 64 MiB, allocated on first
    /// use) with a fresh pattern on the device, evicting earlier data from its caches. A small
    /// kernel writes it (about 20x faster than `clEnqueueFillBuffer` on Intel's CPU runtime);
    /// `clEnqueueFillBuffer` is the fallback when that kernel does not build.
    fn flush_caches(&self) -> Result<(), OpenClError> {
        let source = KernelSource::new(Language::OpenCl, "kf_flush", FLUSH_KERNEL);
        self.flusher.flush(self, &source, |buffer, size, stamp| {
            let pattern = stamp.to_ne_bytes();
            // SAFETY: the pattern outlives the call (we wait on the event below).
            let event = unsafe {
                self.queue
                    .enqueue_fill_buffer(&mut buffer.mem, &pattern, 0, size, &[])
            }
            .map_err(|e| OpenClError::cl("clEnqueueFillBuffer", e.0))?;
            event
                .wait()
                .map_err(|e| OpenClError::cl("clEnqueueFillBuffer", e.0))
        })
    }
}
