//! [`CudaBackendBuilder`]: device, architecture and cache choices, and `build()`.

use super::*;

/// Configures a [`CudaBackend`]: device, target architecture, what to do without a device,
/// compile cache, cache-flush size, peaks.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct CudaBackendBuilder {
    pub(super) options: BackendOptions,
    pub(super) arch: Option<String>,
    pub(super) require_device: bool,
    pub(super) host_buffers: bool,
}

kf_backend_common::impl_backend_builder!(CudaBackendBuilder => CudaBackend, CudaError);

impl CudaBackendBuilder {
    kf_backend_common::backend_builder_methods!("KF_CUDA_DEVICE");

    /// The architecture to compile for (`sm_90`, `sm_90a`, `compute_80`): default the device's
    /// own, or `KF_CUDA_ARCH`, or [`DEFAULT_ARCH`] without a device. A compilation's
    /// [`CompileOptions::arch`] overrides it.
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = Some(arch.into());
        self
    }

    /// Fails with [`CudaError::NoDevice`] when there is no GPU, instead of building a
    /// compile-only backend.
    pub fn require_device(mut self) -> Self {
        self.require_device = true;
        self
    }

    /// Without a device, keeps buffers in host memory so that a caller's whole protocol (the
    /// evaluator's: allocate, fill, launch) runs up to the launch, which then fails with
    /// [`CudaError::NoDevice`] naming the kernel's registers and shared memory. Off by default:
    /// without a device, [`Backend::alloc`] fails with [`CudaError::NoDevice`]. Has no effect
    /// when a device is present.
    pub fn host_buffers_without_device(mut self, enabled: bool) -> Self {
        self.host_buffers = enabled;
        self
    }

    /// Loads NVRTC (required: [`CudaError::Unavailable`] without it), then opens the device
    /// when the machine has one, or builds a compile-only backend when it has none.
    pub fn build(self) -> Result<CudaBackend, CudaError> {
        let runtime = runtime::prepare();
        let nvrtc = nvrtc_info()?;
        let configured = match self.arch.clone().or_else(|| {
            std::env::var(KF_CUDA_ARCH)
                .ok()
                .filter(|v| !v.trim().is_empty())
        }) {
            Some(text) => Some(
                text.parse::<Arch>()
                    .map_err(|e| CudaError::InvalidArgument(e.to_string()))?,
            ),
            None => None,
        };
        if let Some(arch) = &configured {
            check_arch(nvrtc, arch).map_err(|e| CudaError::InvalidArgument(e.to_string()))?;
        }
        // Any failure to enumerate devices (no driver, no device, a driver that does not
        // initialise) leaves a compile-only backend that says why; a device that is there but
        // cannot be selected or opened is an error.
        let (gpu, absent) = match list_devices() {
            Ok(devices) => (Some(open_gpu(&self.options.selector, &devices)?), None),
            Err(e) if self.require_device => return Err(e),
            Err(CudaError::NoDevice { detail, .. }) => (None, Some(detail)),
            Err(e) => (None, Some(e.to_string())),
        };
        CudaBackend::create(gpu, absent, configured, nvrtc, runtime, self)
    }
}

/// An architecture the loaded NVRTC cannot compile for.
#[derive(Debug, thiserror::Error)]
#[error("NVRTC {nvrtc_version} cannot compile for {arch} (it supports {})", supported.join(", "))]
pub(super) struct UnsupportedArch {
    arch: Arch,
    nvrtc_version: String,
    supported: Vec<String>,
}

/// Whether NVRTC can target `arch`.
pub(super) fn check_arch(nvrtc: &NvrtcInfo, arch: &Arch) -> Result<(), UnsupportedArch> {
    if nvrtc.supports(arch) {
        return Ok(());
    }
    Err(UnsupportedArch {
        arch: arch.clone(),
        nvrtc_version: nvrtc.version(),
        supported: nvrtc.archs.iter().map(|a| format!("sm_{a}")).collect(),
    })
}
