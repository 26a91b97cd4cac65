//! Buffers and launches: allocation, copies, argument marshalling, timed launches, the L2
//! flush.

use super::*;
use kf_backend_common::launch::{check_copy, CopyDirection};

impl CudaBackend {
    pub(super) fn alloc_inner(&self, bytes: usize) -> Result<CudaBuffer, CudaError> {
        if bytes == 0 {
            return Err(CudaError::InvalidArgument(
                "CUDA buffers cannot have zero size".into(),
            ));
        }
        let Some(gpu) = &self.gpu else {
            if self.host_buffers {
                return Ok(CudaBuffer {
                    memory: Memory::Host(Mutex::new(vec![0u8; bytes])),
                    len: bytes,
                });
            }
            return Err(self.no_device("allocate device memory"));
        };
        Self::bind(gpu)?;
        // SAFETY: a plain allocation in the bound context.
        let ptr = unsafe { result::malloc_sync(bytes) }
            .map_err(|e| CudaError::driver("cuMemAlloc", e, format!("{bytes} bytes")))?;
        Ok(CudaBuffer {
            memory: Memory::Device(DeviceMemory {
                ptr,
                ctx: gpu.ctx.clone(),
            }),
            len: bytes,
        })
    }

    pub(super) fn write_inner(
        &self,
        buffer: &mut CudaBuffer,
        data: &[u8],
    ) -> Result<(), CudaError> {
        if !check_copy(CopyDirection::Write, data.len(), buffer.len)
            .map_err(|e| CudaError::InvalidArgument(e.to_string()))?
        {
            return Ok(());
        }
        match (&buffer.memory, &self.gpu) {
            (Memory::Host(host), _) => {
                let mut host = host.lock().unwrap_or_else(|p| p.into_inner());
                host[..data.len()].copy_from_slice(data);
                Ok(())
            }
            (Memory::Device(mem), Some(gpu)) => {
                Self::bind(gpu)?;
                // SAFETY: `data` outlives the copy (the stream is synchronised before return);
                // the buffer holds at least `data.len()` bytes.
                unsafe {
                    result::memcpy_htod_async(mem.ptr, data, gpu.stream)
                        .map_err(|e| CudaError::driver("cuMemcpyHtoDAsync", e, ""))?;
                    result::stream::synchronize(gpu.stream)
                        .map_err(|e| CudaError::driver("cuStreamSynchronize", e, "after a write"))
                }
            }
            (Memory::Device(_), None) => Err(self.no_device("write device memory")),
        }
    }

    pub(super) fn read_inner(&self, buffer: &CudaBuffer, out: &mut [u8]) -> Result<(), CudaError> {
        if !check_copy(CopyDirection::Read, out.len(), buffer.len)
            .map_err(|e| CudaError::InvalidArgument(e.to_string()))?
        {
            return Ok(());
        }
        match (&buffer.memory, &self.gpu) {
            (Memory::Host(host), _) => {
                let host = host.lock().unwrap_or_else(|p| p.into_inner());
                let n = out.len();
                out.copy_from_slice(&host[..n]);
                Ok(())
            }
            (Memory::Device(mem), Some(gpu)) => {
                Self::bind(gpu)?;
                // SAFETY: `out` outlives the copy (synchronised before return) and the buffer
                // holds at least `out.len()` bytes.
                unsafe {
                    result::memcpy_dtoh_async(out, mem.ptr, gpu.stream)
                        .map_err(|e| CudaError::driver("cuMemcpyDtoHAsync", e, ""))?;
                    result::stream::synchronize(gpu.stream)
                        .map_err(|e| CudaError::driver("cuStreamSynchronize", e, "after a read"))
                }
            }
            (Memory::Device(_), None) => Err(self.no_device("read device memory")),
        }
    }

    pub(super) fn launch_inner(
        &self,
        kernel: &CudaKernel,
        args: &[KernelArg<'_, CudaBuffer>],
        range: &NdRange,
    ) -> Result<LaunchTiming, CudaError> {
        range
            .check()
            .map_err(|e| bad_geometry(range, e.to_string()))?;
        let (gpu, loaded) = self.launch_target(kernel)?;
        let shape = self.launch_shape(range, loaded)?;
        let (mut slots, dynamic_shared) = marshal_args(kernel, args)?;
        let mut pointers: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| (s as *mut u64).cast::<c_void>())
            .collect();
        Self::bind(gpu)?;
        self.raise_dynamic_shared_limit(kernel, loaded, dynamic_shared)?;
        Self::timed_launch(gpu, kernel, loaded, &shape, dynamic_shared, &mut pointers)
    }

    /// The GPU and the kernel's loaded module, or why the kernel cannot run here (no device,
    /// or compiled without one).
    fn launch_target<'a>(
        &'a self,
        kernel: &'a CudaKernel,
    ) -> Result<(&'a Gpu, &'a Loaded), CudaError> {
        match (&self.gpu, &kernel.loaded) {
            (Some(gpu), Some(loaded)) => Ok((gpu, loaded)),
            _ => Err(CudaError::NoDevice {
                operation: "run it",
                detail: format!(
                    "`{}` compiled for {} with NVRTC {}: {} ({})",
                    kernel.entry,
                    kernel.arch,
                    self.nvrtc.version(),
                    kernel.summary,
                    self.no_device_reason
                        .as_deref()
                        .unwrap_or("the kernel was compiled without a device")
                ),
            }),
        }
    }

    /// The grid and block of a launch over `range` (the default block when it gives none),
    /// checked against the kernel's and the device's limits.
    fn launch_shape(&self, range: &NdRange, loaded: &Loaded) -> Result<LaunchShape, CudaError> {
        let block: Vec<u64> = match &range.local {
            Some(local) => local.iter().map(|l| *l as u64).collect(),
            None => default_block(&range.global, &self.limits, loaded.max_threads),
        };
        let threads: u64 = block.iter().product();
        let kernel_max = if loaded.max_threads > 0 {
            loaded.max_threads
        } else {
            u64::MAX
        };
        let max_threads = self.limits.max_threads_per_block.min(kernel_max);
        if threads > max_threads {
            return Err(bad_geometry(
                range,
                format!(
                    "a block of {threads} threads exceeds the {max_threads} this kernel allows \
                     on {} ({} registers per thread)",
                    self.facts.name, loaded.registers
                ),
            ));
        }
        let mut shape = LaunchShape {
            grid: [1; 3],
            block: [1; 3],
        };
        // Which extent, in which dimension, exceeds the device's maximum.
        let too_large = |what: &str, extent: u64, d: usize, max: u64| {
            bad_geometry(
                range,
                format!("{what} extent {extent} in dimension {d} exceeds the device maximum {max}"),
            )
        };
        for (d, (&extent, &global)) in block.iter().zip(&range.global).enumerate() {
            let grid = global as u64 / extent;
            if extent > self.limits.max_block[d] {
                return Err(too_large("block", extent, d, self.limits.max_block[d]));
            }
            if grid > self.limits.max_grid[d] {
                return Err(too_large("grid", grid, d, self.limits.max_grid[d]));
            }
            shape.block[d] = extent;
            shape.grid[d] = grid;
        }
        Ok(shape)
    }

    /// Raises the function's dynamic shared memory limit when this launch asks for more than
    /// it was last set to, after checking the device's opt-in limit allows it.
    fn raise_dynamic_shared_limit(
        &self,
        kernel: &CudaKernel,
        loaded: &Loaded,
        dynamic_shared: u64,
    ) -> Result<(), CudaError> {
        if dynamic_shared <= kernel.dynamic_shared.load(Ordering::Relaxed) {
            return Ok(());
        }
        let limit = self
            .limits
            .shared_optin
            .saturating_sub(loaded.static_shared);
        if dynamic_shared > limit {
            return Err(CudaError::Resources {
                operation: "cuLaunchKernel",
                message: format!(
                    "{dynamic_shared} bytes of dynamic shared memory requested; {} allows at \
                     most {limit} beside the kernel's {} static bytes",
                    self.facts.name, loaded.static_shared
                ),
            });
        }
        // SAFETY: a function of a live module; the value is within the device's opt-in
        // limit.
        unsafe {
            result::function::set_function_attribute(
                loaded.function,
                FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                i32::try_from(dynamic_shared).unwrap_or(i32::MAX),
            )
        }
        .map_err(|e| CudaError::launch("cuFuncSetAttribute", e, "dynamic shared memory size"))?;
        kernel
            .dynamic_shared
            .store(dynamic_shared, Ordering::Relaxed);
        Ok(())
    }

    /// Launches between the GPU's two events (held for the whole launch) and returns the time
    /// between them once the end event has completed.
    fn timed_launch(
        gpu: &Gpu,
        kernel: &CudaKernel,
        loaded: &Loaded,
        shape: &LaunchShape,
        dynamic_shared: u64,
        pointers: &mut [*mut c_void],
    ) -> Result<LaunchTiming, CudaError> {
        let (grid, blk) = (shape.grid, shape.block);
        let events = gpu.events.lock().unwrap_or_else(|p| p.into_inner());
        let to_u32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        // SAFETY: the function belongs to a live module of the bound context; `pointers` has
        // one pointer per kernel parameter, each to an 8-byte slot holding a value of the
        // parameter's size (checked by `marshal_args` against the PTX signature); every buffer
        // address stays allocated until the launch has completed (synchronised below).
        unsafe {
            result::event::record(events.0, gpu.stream)
                .map_err(|e| CudaError::driver("cuEventRecord", e, "start"))?;
            result::launch_kernel(
                loaded.function,
                (to_u32(grid[0]), to_u32(grid[1]), to_u32(grid[2])),
                (to_u32(blk[0]), to_u32(blk[1]), to_u32(blk[2])),
                to_u32(dynamic_shared),
                gpu.stream,
                pointers,
            )
            .map_err(|e| {
                CudaError::launch(
                    "cuLaunchKernel",
                    e,
                    &format!("grid {grid:?} block {blk:?}, {dynamic_shared} bytes dynamic shared"),
                )
            })?;
            result::event::record(events.1, gpu.stream)
                .map_err(|e| CudaError::driver("cuEventRecord", e, "end"))?;
            result::event::synchronize(events.1).map_err(|e| {
                CudaError::launch(
                    "cuEventSynchronize",
                    e,
                    &format!("`{}` failed", kernel.entry),
                )
            })?;
            let ms = result::event::elapsed(events.0, events.1)
                .map_err(|e| CudaError::driver("cuEventElapsedTime", e, ""))?;
            Ok(LaunchTiming {
                device_seconds: f64::from(ms) * 1e-3,
            })
        }
    }

    pub(super) fn flush_inner(&self) -> Result<(), CudaError> {
        let Some(gpu) = &self.gpu else {
            return Err(self.no_device("flush its caches"));
        };
        Self::bind(gpu)?;
        let mut scratch = Self::scratch(gpu);
        if scratch.is_none() {
            // SAFETY: a plain allocation in the bound context.
            let ptr = unsafe { result::malloc_sync(self.flush_bytes.max(1)) }.map_err(|e| {
                CudaError::driver(
                    "cuMemAlloc",
                    e,
                    format!("{} bytes to flush the L2 cache", self.flush_bytes),
                )
            })?;
            *scratch = Some(DeviceMemory {
                ptr,
                ctx: gpu.ctx.clone(),
            });
        }
        let Some(mem) = scratch.as_ref() else {
            return Err(CudaError::Unsupported("flush_caches"));
        };
        let stamp = self.flush_counter.fetch_add(1, Ordering::Relaxed) as u8;
        // SAFETY: the scratch buffer holds `flush_bytes` bytes; the stream is synchronised.
        unsafe {
            result::memset_d8_async(mem.ptr, stamp, self.flush_bytes.max(1), gpu.stream)
                .map_err(|e| CudaError::driver("cuMemsetD8Async", e, "L2 flush"))?;
            result::stream::synchronize(gpu.stream)
                .map_err(|e| CudaError::driver("cuStreamSynchronize", e, "L2 flush"))
        }
    }
}

/// The grid (in blocks) and block (in threads) of a launch, 1 in unused dimensions.
struct LaunchShape {
    grid: [u64; 3],
    block: [u64; 3],
}

/// A "bad launch geometry" error for `range`.
fn bad_geometry(range: &NdRange, message: String) -> CudaError {
    CudaError::Launch {
        message: format!("bad launch geometry {range}: {message}"),
    }
}

/// The kernel's value arguments in 8-byte slots (the driver copies each parameter's size from
/// its slot), checked in number and size against the kernel's PTX signature, and the dynamic
/// shared memory the [`KernelArg::Local`] arguments add up to.
fn marshal_args(
    kernel: &CudaKernel,
    args: &[KernelArg<'_, CudaBuffer>],
) -> Result<(Vec<u64>, u64), CudaError> {
    let values: Vec<&KernelArg<'_, CudaBuffer>> = args
        .iter()
        .filter(|a| !matches!(a, KernelArg::Local(_)))
        .collect();
    if values.len() != kernel.params.len() {
        return Err(CudaError::Launch {
            message: format!(
                "`{}` takes {} arguments, {} given (plus {} dynamic shared memory argument(s))",
                kernel.entry,
                kernel.params.len(),
                values.len(),
                args.len() - values.len()
            ),
        });
    }
    let dynamic_shared: u64 = args
        .iter()
        .map(|a| match a {
            KernelArg::Local(b) => *b as u64,
            _ => 0,
        })
        .sum();
    let mut slots: Vec<u64> = Vec::with_capacity(values.len());
    for (i, (arg, want)) in values.iter().zip(&kernel.params).enumerate() {
        let Some((bytes, size)) = arg_slot(i, arg)? else {
            continue;
        };
        if size != *want {
            return Err(CudaError::Launch {
                message: format!(
                    "argument {i} of `{}` ({}) is {size} bytes, the kernel's parameter is \
                     {want} bytes",
                    kernel.entry,
                    describe_arg(arg, "dynamic shared memory")
                ),
            });
        }
        slots.push(u64::from_ne_bytes(bytes));
    }
    Ok((slots, dynamic_shared))
}

/// Argument `i` as the bytes of its 8-byte slot and its size in bytes; `None` for dynamic
/// shared memory, which is no parameter. A buffer must be device memory, its offset aligned
/// and inside it.
fn arg_slot(
    i: usize,
    arg: &KernelArg<'_, CudaBuffer>,
) -> Result<Option<([u8; 8], usize)>, CudaError> {
    Ok(Some(match arg {
        KernelArg::Buffer { buffer, offset } => {
            let Memory::Device(mem) = &buffer.memory else {
                return Err(CudaError::InvalidArgument(format!(
                    "argument {i}: a host buffer cannot be passed to a device kernel"
                )));
            };
            if *offset % ALIGNMENT != 0 {
                return Err(CudaError::InvalidArgument(format!(
                    "argument {i}: buffer offset {offset} is not a multiple of {ALIGNMENT} \
                     bytes"
                )));
            }
            if *offset >= buffer.len {
                return Err(CudaError::InvalidArgument(format!(
                    "argument {i}: offset {offset} is beyond the buffer's {} bytes",
                    buffer.len
                )));
            }
            ((mem.ptr + *offset as u64).to_ne_bytes(), 8)
        }
        KernelArg::I32(v) => (pad(&v.to_ne_bytes()), 4),
        KernelArg::U32(v) => (pad(&v.to_ne_bytes()), 4),
        KernelArg::F32(v) => (pad(&v.to_ne_bytes()), 4),
        KernelArg::I64(v) => (v.to_ne_bytes(), 8),
        KernelArg::Local(_) => return Ok(None),
    }))
}

pub(super) fn pad(bytes: &[u8; 4]) -> [u8; 8] {
    [bytes[0], bytes[1], bytes[2], bytes[3], 0, 0, 0, 0]
}

/// A block shape for a launch without one: along dimension 0, the largest divisor of the
/// global size up to 256 threads (and the kernel's limit); 1 elsewhere.
pub(super) fn default_block(global: &[usize], limits: &Limits, kernel_max: u64) -> Vec<u64> {
    let cap = 256u64
        .min(limits.max_block[0])
        .min(if kernel_max > 0 { kernel_max } else { 256 })
        .max(1);
    let g0 = global.first().copied().unwrap_or(1) as u64;
    let b0 = (1..=cap).rev().find(|b| g0.is_multiple_of(*b)).unwrap_or(1);
    let mut block = vec![1u64; global.len()];
    if let Some(first) = block.first_mut() {
        *first = b0;
    }
    block
}
