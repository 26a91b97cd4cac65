//! The self-contained run time of an exported Rust crate: real Rust source files that
//! `kf-export` compiles and tests as its own modules and writes verbatim into every crate it
//! exports (`include_str!`), so that the generated crate depends on no KernelFoundry crate,
//! only on `opencl3`, `evalexpr`, `libc` (and `half` for f16 buffers).
//!
//! * [`runtime`] → `src/kf_runtime.rs`: configuration tables, the dispatch rule, constraint
//!   and launch-geometry evaluation, argument checks, compile-launch-read-back through
//!   `opencl3`, the kernel cache, and [`runtime::Device::open`], which finds the OpenCL runtime
//!   as KernelFoundry's OpenCL backend does.
//! * [`check`] → `src/kf_check.rs`: the reference cases and the comparison of the generated
//!   tests.
//! * [`mod@f16`] → `src/kf_f16.rs`, for crates with f16 buffers.

pub mod check;
pub mod f16;
pub mod runtime;

/// The text of [`runtime`], written as `src/kf_runtime.rs`.
pub(crate) const RUNTIME_RS: &str = include_str!("runtime.rs");
/// The text of [`check`], written as `src/kf_check.rs`.
pub(crate) const CHECK_RS: &str = include_str!("check.rs");
/// The text of [`f16`], written as `src/kf_f16.rs`.
pub(crate) const F16_RS: &str = include_str!("f16.rs");

#[cfg(test)]
mod tests;

impl From<&kf_core::DeviceFacts> for runtime::DeviceFacts {
    /// The run time's view of KernelFoundry's device facts: name, driver, platform and the
    /// expression symbols ([`kf_core::DeviceFacts::symbols`]).
    fn from(d: &kf_core::DeviceFacts) -> Self {
        runtime::DeviceFacts {
            name: d.name.clone(),
            driver_version: d.driver_version.clone(),
            platform: d.platform.clone(),
            symbols: d.symbols(),
        }
    }
}
