//! [`Flusher`]: the cache flush of `Backend::flush_caches` — a scratch buffer, allocated on
//! first use, that a small kernel (or the runtime's fill, when that kernel does not build)
//! overwrites with a fresh pattern, evicting earlier data from the device's caches.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use kf_core::{
    Backend, BackendError, CompileOptions, KernelArg, KernelSource, NdRange, ParamValues,
};

struct Scratch<B: Backend> {
    buffer: B::Buffer,
    bytes: usize,
    kernel: Option<B::Kernel>,
}

/// The flush state of one backend `B`: keep it as the backend's first field, so that the
/// scratch buffer and kernel are dropped before the runtime objects they belong to.
///
/// The flush kernel takes `(uint4* p, uint v)` and writes 16 bytes per work-item over
/// `bytes / 16` work-items.
pub struct Flusher<B: Backend> {
    scratch: Mutex<Option<Scratch<B>>>,
    bytes: usize,
    counter: AtomicU32,
}

impl<B: Backend> std::fmt::Debug for Flusher<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flusher")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> Flusher<B> {
    /// A flusher whose scratch buffer will hold `bytes` bytes (rounded down to a multiple of
    /// 16, at least 16).
    pub fn new(bytes: usize) -> Self {
        Flusher {
            scratch: Mutex::new(None),
            bytes: (bytes / 16 * 16).max(16),
            counter: AtomicU32::new(0),
        }
    }

    /// The scratch buffer's size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Overwrites the scratch buffer with the next stamp: with `kernel` (compiled on first
    /// use), else with `fill(buffer, bytes, stamp)`, the runtime's own fill.
    pub fn flush(
        &self,
        backend: &B,
        kernel: &KernelSource,
        fill: impl FnOnce(&mut B::Buffer, usize, u32) -> Result<(), B::Error>,
    ) -> Result<(), B::Error> {
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        if scratch.is_none() {
            let buffer = backend.alloc(self.bytes)?;
            let kernel = backend
                .compile(kernel, &ParamValues::new(), &CompileOptions::default())
                .ok()
                .map(|c| c.kernel);
            *scratch = Some(Scratch {
                buffer,
                bytes: self.bytes,
                kernel,
            });
        }
        let Some(Scratch {
            buffer,
            bytes,
            kernel,
        }) = scratch.as_mut()
        else {
            return Err(B::Error::unsupported("flush_caches"));
        };
        let stamp = self.counter.fetch_add(1, Ordering::Relaxed);
        if let Some(kernel) = kernel {
            let range = NdRange {
                global: vec![*bytes / 16],
                local: None,
            };
            let args = [
                KernelArg::Buffer {
                    buffer: &*buffer,
                    offset: 0,
                },
                KernelArg::U32(stamp),
            ];
            return backend.launch(kernel, &args, &range).map(|_| ());
        }
        fill(buffer, *bytes, stamp)
    }
}
