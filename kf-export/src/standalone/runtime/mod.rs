//! The run-time support of a crate written by `kf export --rust`: the tables of tuned
//! configurations, the dispatch rule, the constraint and launch-geometry evaluation at the
//! caller's sizes, the argument checks, and the launch through OpenCL (`opencl3`).
//!
//! This folder is written verbatim into every exported crate (`src/kf_runtime/`) and is also a
//! module of `kf-export` (`kf_export::runtime`), where it is type-checked and tested: it uses
//! only `std`, `opencl3`, `evalexpr`, `libc`, `serde` and `serde_json`. Its files (crate-visible
//! modules; everything public is re-exported here), by responsibility: `error.rs` ([`Error`]),
//! `signature.rs` (the task's [`Signature`] and the host data of a call), `dispatch.rs` (the
//! dispatch rule), `symbols.rs` ([`DeviceFacts`], [`Param`] and the evaluation of the
//! manifests' expressions), `table.rs` ([`Configuration`], [`Table`], [`KernelCache`]),
//! `device.rs` (listing, picking and using an OpenCL [`Device`]) and `discovery.rs` (finding
//! the OpenCL runtime, [`prepare_runtime`]).
//!
//! * [`Device::open`] finds the OpenCL runtime the way KernelFoundry's OpenCL backend does
//!   (`OPENCL_DYLIB_PATH` as set; else `KF_OPENCL_ICD`; else an `opencl.json` written by
//!   `kf setup` or `scripts/setup.sh`; else the system loader) and picks a device (a GPU, then
//!   an accelerator, then a CPU, PoCL last; `KF_OPENCL_DEVICE` picks by kind, `P:D` index or
//!   name part). No runtime or device is [`Error::Unavailable`], never a panic.
//! * [`Table::choose`] evaluates every configuration's manifest constraints and launch
//!   geometry at the caller's sizes on the caller's device (the manifests' expression language,
//!   `evalexpr`, with the symbols KernelFoundry's search used: device facts, then sizes, then
//!   parameters) and applies [`choose`]: the caller's device first, by name and driver; then
//!   the nearest tuned sizes by `Σ |ln(caller / tuned)|`; ties to the larger tuned sizes.
//! * [`Table::launch`] checks the arguments against the task's [`Signature`], builds the
//!   kernel with the options resolved at export time (`-D NAME=value` per parameter, then the
//!   manifest's flags), keeps it in a [`KernelCache`], launches it and reads the outputs back.

pub(crate) mod configuration;
pub(crate) mod device;
pub(crate) mod discovery;
pub(crate) mod dispatch;
pub(crate) mod error;
pub(crate) mod signature;
pub(crate) mod symbols;
pub(crate) mod table;

pub use configuration::{Configuration, Geometry};
pub use device::{Device, KF_OPENCL_DEVICE};
pub use discovery::{prepare_runtime, KF_OPENCL_ICD};
pub use dispatch::{choose, device_tier, distance, Caller, Candidate};
pub use error::Error;
pub use signature::{
    from_bytes, sizes_text, to_bytes, Access, ArgSig, BufferSig, Dtype, Element, HostData,
    ScalarArg, ScalarSig, Signature, Text,
};
pub use symbols::{DeviceFacts, Param};
pub use table::{KernelCache, Table};
