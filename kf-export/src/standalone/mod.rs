//! The self-contained run time of an exported Rust crate: real Rust source files that
//! `kf-export` compiles and tests as its own modules and writes verbatim into every crate it
//! exports (`include_str!`), so that the generated crate depends on no KernelFoundry crate,
//! only on `opencl3`, `evalexpr`, `libc`, `serde`/`serde_json` (and `half` for f16 buffers).
//!
//! * [`runtime`] → `src/kf_runtime/` (`mod.rs` and one file per responsibility):
//!   configuration tables, the dispatch rule, constraint and launch-geometry evaluation,
//!   argument checks, compile-launch-read-back through `opencl3`, the kernel cache, and
//!   [`runtime::Device::open`], which finds the OpenCL runtime as KernelFoundry's OpenCL
//!   backend does.
//! * [`check`] → `src/kf_check.rs`: the reference cases and the comparison of the generated
//!   tests.
//! * [`mod@f16`] → `src/kf_f16.rs`, for crates with f16 buffers.

pub mod check;
pub mod f16;
pub mod runtime;

/// The files every exported crate carries: its path in the crate and the text of
/// [`runtime`]'s files and [`check`]. A new file of the run time is one line here.
pub(crate) const RUN_TIME_FILES: &[(&str, &str)] = &[
    ("src/kf_runtime/mod.rs", include_str!("runtime/mod.rs")),
    ("src/kf_runtime/error.rs", include_str!("runtime/error.rs")),
    (
        "src/kf_runtime/configuration.rs",
        include_str!("runtime/configuration.rs"),
    ),
    (
        "src/kf_runtime/signature.rs",
        include_str!("runtime/signature.rs"),
    ),
    (
        "src/kf_runtime/dispatch.rs",
        include_str!("runtime/dispatch.rs"),
    ),
    (
        "src/kf_runtime/symbols.rs",
        include_str!("runtime/symbols.rs"),
    ),
    ("src/kf_runtime/table.rs", include_str!("runtime/table.rs")),
    (
        "src/kf_runtime/device.rs",
        include_str!("runtime/device.rs"),
    ),
    (
        "src/kf_runtime/discovery.rs",
        include_str!("runtime/discovery.rs"),
    ),
    ("src/kf_check.rs", include_str!("check.rs")),
];
/// [`mod@f16`] as `src/kf_f16.rs`, for crates with f16 buffers.
pub(crate) const F16_FILE: (&str, &str) = ("src/kf_f16.rs", include_str!("f16.rs"));

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
