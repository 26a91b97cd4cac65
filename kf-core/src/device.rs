//! Facts about a compute device, as reported by its backend.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// What kind of device a backend drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DeviceKind {
    /// A CPU device (for example Intel's CPU OpenCL runtime or PoCL).
    Cpu,
    /// A GPU.
    Gpu,
    /// Another accelerator.
    Accelerator,
    /// Unknown.
    Other,
}

/// Device facts: what a prompt tells a model, what manifest expressions may refer to
/// (`max_work_group_size`, `compute_units`, …) and what the roofline check uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFacts {
    /// Device name as the driver reports it.
    pub name: String,
    /// Vendor name.
    pub vendor: String,
    /// Driver (or runtime) version; part of every compile-cache key.
    pub driver_version: String,
    /// Platform or runtime name (`Intel(R) OpenCL`, `CUDA`, …).
    pub platform: String,
    /// Kind of device.
    pub kind: DeviceKind,
    /// Compute units (cores, SMs, Xe cores).
    pub compute_units: u32,
    /// Largest work-group (thread block) size.
    pub max_work_group_size: u64,
    /// Largest work-group extent per dimension.
    pub max_work_item_sizes: Vec<u64>,
    /// Local (shared) memory per work-group, bytes.
    pub local_mem_bytes: u64,
    /// Global memory, bytes.
    pub global_mem_bytes: u64,
    /// Clock in MHz, when reported.
    pub max_clock_mhz: u32,
    /// Preferred float vector width.
    pub preferred_vector_width_float: u32,
    /// Sub-group (warp) sizes the device supports; empty when unknown.
    pub sub_group_sizes: Vec<u32>,
    /// Peak fp32 throughput, GFLOP/s, when known or estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_gflops: Option<f64>,
    /// Peak memory bandwidth, GB/s, when known or estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bandwidth_gbs: Option<f64>,
    /// Anything else, by name (compute capability, extensions, …).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub extra: IndexMap<String, String>,
}

impl DeviceFacts {
    /// Facts of an unnamed device with conservative defaults; backends fill in what they know.
    pub fn unknown(name: impl Into<String>) -> Self {
        DeviceFacts {
            name: name.into(),
            vendor: String::new(),
            driver_version: String::new(),
            platform: String::new(),
            kind: DeviceKind::Other,
            compute_units: 1,
            max_work_group_size: 1,
            max_work_item_sizes: vec![1, 1, 1],
            local_mem_bytes: 0,
            global_mem_bytes: 0,
            max_clock_mhz: 0,
            preferred_vector_width_float: 1,
            sub_group_sizes: Vec::new(),
            peak_gflops: None,
            peak_bandwidth_gbs: None,
            extra: IndexMap::new(),
        }
    }

    /// The numeric facts by the names manifest expressions use: `compute_units`,
    /// `max_work_group_size`, `local_mem_bytes` (alias `local_mem_size`), `global_mem_bytes`,
    /// `max_clock_mhz`, `preferred_vector_width` (float), `sub_group_size` (the largest
    /// supported, 1 when unknown), `max_work_item_size_0..2`.
    pub fn symbols(&self) -> Vec<(&'static str, i64)> {
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut out = vec![
            ("compute_units", i64::from(self.compute_units)),
            ("max_work_group_size", clamp(self.max_work_group_size)),
            ("local_mem_bytes", clamp(self.local_mem_bytes)),
            ("local_mem_size", clamp(self.local_mem_bytes)),
            ("global_mem_bytes", clamp(self.global_mem_bytes)),
            ("max_clock_mhz", i64::from(self.max_clock_mhz)),
            (
                "preferred_vector_width",
                i64::from(self.preferred_vector_width_float),
            ),
            (
                "sub_group_size",
                i64::from(self.sub_group_sizes.iter().copied().max().unwrap_or(1)),
            ),
        ];
        const ITEM: [&str; 3] = [
            "max_work_item_size_0",
            "max_work_item_size_1",
            "max_work_item_size_2",
        ];
        for (i, name) in ITEM.iter().enumerate() {
            out.push((
                name,
                clamp(self.max_work_item_sizes.get(i).copied().unwrap_or(1)),
            ));
        }
        out
    }
}
