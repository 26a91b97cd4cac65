//! Driver handles: device memory, the GPU context with its stream, events and flush buffer,
//! and loaded modules, each released on drop.

use super::*;

/// Device memory, freed on drop.
pub(super) struct DeviceMemory {
    pub(super) ptr: sys::CUdeviceptr,
    pub(super) ctx: Arc<CudaContext>,
}

// SAFETY: a device pointer is a plain address in the context's address space; the driver API
// may be called on it from any thread once the context is bound (every use binds it).
unsafe impl Send for DeviceMemory {}
// SAFETY: as above; shared use only reads the address.
unsafe impl Sync for DeviceMemory {}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        let _ = guarded("cuMemFree", || {
            if self.ctx.bind_to_thread().is_ok() {
                // SAFETY: allocated by cuMemAlloc in this context and freed only here.
                let _ = unsafe { result::free_sync(self.ptr) };
            }
        });
    }
}

/// The GPU side of a backend: context, stream, timing events, flush buffer.
pub(super) struct Gpu {
    pub(super) info: CudaDeviceInfo,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: sys::CUstream,
    /// Start and end events; locked for the whole of a timed launch.
    pub(super) events: Mutex<(sys::CUevent, sys::CUevent)>,
    pub(super) scratch: Mutex<Option<DeviceMemory>>,
}

// SAFETY: stream and event handles belong to the context, which every call binds first; the
// events are only used under their mutex.
unsafe impl Send for Gpu {}
// SAFETY: as above.
unsafe impl Sync for Gpu {}

impl Drop for Gpu {
    fn drop(&mut self) {
        let _ = guarded("releasing the CUDA stream", || {
            if self.ctx.bind_to_thread().is_err() {
                return;
            }
            let events = *self.events.lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: created by this backend and destroyed only here, after all its work.
            unsafe {
                let _ = result::stream::synchronize(self.stream);
                let _ = result::event::destroy(events.0);
                let _ = result::event::destroy(events.1);
                let _ = result::stream::destroy(self.stream);
            }
        });
    }
}

pub(super) fn open_gpu(
    selector: &kf_backend_common::DeviceSelector,
    devices: &[CudaDeviceInfo],
) -> Result<Gpu, CudaError> {
    let Some(info) = selector.select(devices) else {
        let none = selector.no_match(devices);
        return Err(CudaError::InvalidArgument(format!(
            "no CUDA device matches {}; available: {}",
            none.wanted,
            none.listed.join("; ")
        )));
    };
    let info = info.clone();
    guarded("opening the CUDA device", || -> Result<Gpu, CudaError> {
        let ctx = CudaContext::new(info.ordinal)
            .map_err(|e| CudaError::driver("cuDevicePrimaryCtxRetain", e, ""))?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| CudaError::driver("cuStreamCreate", e, ""))?;
        let event = || {
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(|e| CudaError::driver("cuEventCreate", e, ""))
        };
        let events = (event()?, event()?);
        Ok(Gpu {
            info,
            ctx,
            stream,
            events: Mutex::new(events),
            scratch: Mutex::new(None),
        })
    })?
}

/// A module loaded into the device's context, with the kernel's function and attributes.
pub(super) struct Loaded {
    pub(super) module: sys::CUmodule,
    pub(super) function: sys::CUfunction,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) max_threads: u64,
    pub(super) registers: u32,
    pub(super) static_shared: u64,
    pub(super) local_bytes: u64,
}

// SAFETY: module and function handles belong to the context, which every use binds first.
unsafe impl Send for Loaded {}
// SAFETY: as above; launches only read the handles.
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _ = guarded("cuModuleUnload", || {
            if self.ctx.bind_to_thread().is_ok() {
                // SAFETY: loaded by cuModuleLoadData and unloaded only here.
                let _ = unsafe { result::module::unload(self.module) };
            }
        });
    }
}
