//! Facts about a compute device, as reported by its backend.

use std::path::Path;

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
    /// Size of the cache in front of global memory as the runtime reports it
    /// (`CL_DEVICE_GLOBAL_MEM_CACHE_SIZE`), bytes; 0 when unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub global_mem_cache_bytes: u64,
    /// Level-1 data cache of one core, bytes (CPU devices: sysfs); 0 when unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub l1_cache_bytes: u64,
    /// Level-2 cache, bytes: one core's on a CPU (sysfs), the device's on a GPU whose runtime
    /// reports it; 0 when unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub l2_cache_bytes: u64,
    /// Level-3 (last-level, usually shared) cache, bytes (CPU devices: sysfs); 0 when unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub l3_cache_bytes: u64,
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
            global_mem_cache_bytes: 0,
            l1_cache_bytes: 0,
            l2_cache_bytes: 0,
            l3_cache_bytes: 0,
            peak_gflops: None,
            peak_bandwidth_gbs: None,
            extra: IndexMap::new(),
        }
    }

    /// The numeric facts by the names manifest expressions use: `compute_units`,
    /// `max_work_group_size`, `local_mem_bytes` (alias `local_mem_size`), `global_mem_bytes`,
    /// `max_clock_mhz`, `preferred_vector_width` (float), `sub_group_size` (the largest
    /// supported, 1 when unknown), `max_work_item_size_0..2`, and the cache sizes in bytes
    /// `global_mem_cache_bytes`, `l1_cache_bytes`, `l2_cache_bytes`, `l3_cache_bytes` (0 when
    /// unknown: a constraint sized for a cache should accept 0, as in
    /// `l2_cache_bytes == 0 || KC * BN * 4 <= l2_cache_bytes`).
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
            ("global_mem_cache_bytes", clamp(self.global_mem_cache_bytes)),
            ("l1_cache_bytes", clamp(self.l1_cache_bytes)),
            ("l2_cache_bytes", clamp(self.l2_cache_bytes)),
            ("l3_cache_bytes", clamp(self.l3_cache_bytes)),
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

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The data and unified caches of one CPU, bytes by level; 0 where a level is absent or
/// unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuCaches {
    /// Level-1 data cache.
    pub l1_bytes: u64,
    /// Level-2 cache.
    pub l2_bytes: u64,
    /// Level-3 cache.
    pub l3_bytes: u64,
}

impl CpuCaches {
    /// Linux's description of CPU 0's caches.
    pub const SYSFS_DIR: &'static str = "/sys/devices/system/cpu/cpu0/cache";

    /// Reads a sysfs cache folder (`index*/{level,type,size}`, as under
    /// [`CpuCaches::SYSFS_DIR`]). Instruction caches are left out; an unreadable folder or
    /// entry leaves its level at 0.
    ///
    /// ```
    /// let caches = kf_core::CpuCaches::from_sysfs(std::path::Path::new("/nonexistent"));
    /// assert_eq!(caches, kf_core::CpuCaches::default());
    /// ```
    pub fn from_sysfs(dir: &Path) -> CpuCaches {
        let mut out = CpuCaches::default();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return out;
        };
        for entry in entries.filter_map(Result::ok) {
            if !entry.file_name().to_string_lossy().starts_with("index") {
                continue;
            }
            let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).ok();
            let kind = read("type").unwrap_or_default();
            if kind.trim() == "Instruction" {
                continue;
            }
            let level = read("level").and_then(|s| s.trim().parse::<u32>().ok());
            let size = read("size").and_then(|s| parse_cache_size(s.trim()));
            let (Some(level), Some(size)) = (level, size) else {
                continue;
            };
            let slot = match level {
                1 => &mut out.l1_bytes,
                2 => &mut out.l2_bytes,
                3 => &mut out.l3_bytes,
                _ => continue,
            };
            *slot = (*slot).max(size);
        }
        out
    }

    /// Copies the sizes into `facts`' `l1_cache_bytes`, `l2_cache_bytes` and
    /// `l3_cache_bytes`, leaving a fact already known where this one is 0.
    pub fn fill(&self, facts: &mut DeviceFacts) {
        let keep = |known: &mut u64, new: u64| {
            if new > 0 {
                *known = new;
            }
        };
        keep(&mut facts.l1_cache_bytes, self.l1_bytes);
        keep(&mut facts.l2_cache_bytes, self.l2_bytes);
        keep(&mut facts.l3_cache_bytes, self.l3_bytes);
    }
}

/// A sysfs cache size (`48K`, `2M`, `32768K`, `1G` or plain bytes) in bytes.
///
/// ```
/// assert_eq!(kf_core::device::parse_cache_size("2M"), Some(2 << 20));
/// assert_eq!(kf_core::device::parse_cache_size("48K"), Some(48 << 10));
/// assert_eq!(kf_core::device::parse_cache_size("x"), None);
/// ```
pub fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, shift) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 10),
        'M' | 'm' => (&s[..s.len() - 1], 20),
        'G' | 'g' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    num.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_index(root: &Path, index: u32, level: u32, kind: &str, size: &str) {
        let dir = root.join(format!("index{index}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("level"), format!("{level}\n")).unwrap();
        std::fs::write(dir.join("type"), format!("{kind}\n")).unwrap();
        std::fs::write(dir.join("size"), format!("{size}\n")).unwrap();
    }

    #[test]
    fn caches_come_from_a_sysfs_tree() {
        let root = std::env::temp_dir().join(format!("kf-core-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        write_index(&root, 0, 1, "Data", "48K");
        write_index(&root, 1, 1, "Instruction", "64K");
        write_index(&root, 2, 2, "Unified", "2048K");
        write_index(&root, 3, 3, "Unified", "32M");
        // Not a cache entry, and an entry whose size does not parse: both ignored.
        std::fs::write(root.join("uevent"), "").unwrap();
        write_index(&root, 4, 4, "Unified", "lots");
        let caches = CpuCaches::from_sysfs(&root);
        assert_eq!(
            caches,
            CpuCaches {
                l1_bytes: 48 << 10,
                l2_bytes: 2 << 20,
                l3_bytes: 32 << 20
            }
        );
        let mut facts = DeviceFacts::unknown("cpu");
        facts.l2_cache_bytes = 7;
        CpuCaches {
            l2_bytes: 0,
            ..caches
        }
        .fill(&mut facts);
        assert_eq!(
            (
                facts.l1_cache_bytes,
                facts.l2_cache_bytes,
                facts.l3_cache_bytes
            ),
            (48 << 10, 7, 32 << 20)
        );
        let symbols = facts.symbols();
        assert!(symbols.contains(&("l3_cache_bytes", 32 << 20)));
        assert!(symbols.contains(&("global_mem_cache_bytes", 0)));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn facts_without_cache_sizes_still_deserialise() {
        let mut facts = DeviceFacts::unknown("old");
        let old = serde_json::to_string(&facts).unwrap();
        assert!(!old.contains("cache_bytes"), "{old}");
        let back: DeviceFacts = serde_json::from_str(&old).unwrap();
        assert_eq!(back, facts);
        facts.l2_cache_bytes = 1 << 20;
        let new = serde_json::to_string(&facts).unwrap();
        let back: DeviceFacts = serde_json::from_str(&new).unwrap();
        assert_eq!(back.l2_cache_bytes, 1 << 20);
    }
}
