//! Upper bounds of a device's throughput and bandwidth, for the roofline check (a timing
//! faster than these is rejected as a cheat, so they must never be below the truth), and the
//! host CPU facts they need where the runtime reports none.

use kf_core::{DeviceFacts, DeviceKind};

/// Upper bounds of fp32 throughput (GFLOP/s) and memory bandwidth (GB/s), with how they were
/// derived, for runtimes that report neither (OpenCL, SYCL). Deliberately generous: the
/// roofline check rejects a speedup beyond them, and an estimate below the truth would reject
/// honest kernels.
///
/// * clock: the reported maximum (for CPUs reporting 0, the highest `cpu MHz` in
///   `/proc/cpuinfo`), times 1.3 for turbo headroom; 3000 MHz when nothing is known.
/// * CPU: every compute unit (logical core) retires 2 FMA of 16 fp32 lanes per cycle
///   (64 flop/cycle, AVX-512 with two FMA pipes, more than any current x86 core sustains per
///   hardware thread), and moves 64 bytes per cycle (an L2-resident working set: data that
///   fit in cache are not DRAM-bound).
/// * GPU / accelerator: 256 flop/cycle per compute unit (128 fp32 lanes with FMA, the widest
///   NVIDIA SM / AMD dual-issue CU; Intel reports EUs or Xe cores, well below), and 128 bytes
///   per cycle per compute unit (the L1/shared-memory bandwidth, above any DRAM/HBM).
///
/// ```
/// use kf_core::{DeviceFacts, DeviceKind};
/// let mut f = DeviceFacts::unknown("cpu");
/// f.kind = DeviceKind::Cpu;
/// f.compute_units = 2;
/// let (gflops, gbs, _how) = kf_backend_common::peaks::estimate_peaks(&f, 8);
/// assert!(gflops > 100.0 && gbs > 100.0);
/// ```
pub fn estimate_peaks(f: &DeviceFacts, native_float: u32) -> (f64, f64, String) {
    let mhz = if f.max_clock_mhz > 0 {
        f64::from(f.max_clock_mhz)
    } else {
        3000.0
    };
    let ghz = mhz * 1.3 / 1000.0;
    let cu = f64::from(f.compute_units.max(1));
    let (flop_per_cycle, bytes_per_cycle) = match f.kind {
        DeviceKind::Cpu => (2.0 * 2.0 * f64::from(native_float.max(16)), 64.0),
        _ => (256.0, 128.0),
    };
    let how = format!(
        "upper-bound estimate: {cu} compute units x {mhz:.0} MHz x 1.3 turbo x \
         {flop_per_cycle} flop/cycle, {bytes_per_cycle} B/cycle"
    );
    (cu * ghz * flop_per_cycle, cu * ghz * bytes_per_cycle, how)
}

/// Sets `f`'s peaks from [`estimate_peaks`] and says so under `peak_source`.
pub fn set_estimated_peaks(f: &mut DeviceFacts, native_float: u32) {
    let (gflops, gbs, how) = estimate_peaks(f, native_float);
    f.peak_gflops = Some(gflops);
    f.peak_bandwidth_gbs = Some(gbs);
    f.extra.insert("peak_source".to_owned(), how);
}

/// Overrides `f`'s peaks with ones the embedder gave (`peaks` from a builder), if any.
pub fn apply_given_peaks(f: &mut DeviceFacts, peaks: Option<(f64, f64)>) {
    if let Some((gflops, gbs)) = peaks {
        f.peak_gflops = Some(gflops);
        f.peak_bandwidth_gbs = Some(gbs);
        f.extra
            .insert("peak_source".into(), "given by the embedder".into());
    }
}

/// For a CPU device: the host's largest cache when larger than `device_cache` (the flush size
/// follows it), and the host's clock when the runtime reported none (noted under
/// `max_clock_source`), and the host's cache levels (`l1/l2/l3_cache_bytes`, from sysfs).
/// Returns the cache size to flush. Other kinds are left as they are, except that a GPU's
/// `l2_cache_bytes` defaults to `device_cache` (the runtime's global-memory cache is its L2).
pub fn cpu_host_facts(f: &mut DeviceFacts, device_cache: u64) -> u64 {
    if f.global_mem_cache_bytes == 0 {
        f.global_mem_cache_bytes = device_cache;
    }
    if f.kind != DeviceKind::Cpu {
        if f.kind == DeviceKind::Gpu && f.l2_cache_bytes == 0 {
            f.l2_cache_bytes = device_cache;
        }
        return device_cache;
    }
    kf_core::CpuCaches::from_sysfs(std::path::Path::new(kf_core::CpuCaches::SYSFS_DIR)).fill(f);
    let cache_bytes = device_cache.max(host::largest_cache_bytes().unwrap_or(0));
    if f.max_clock_mhz == 0 {
        if let Some(mhz) = host::max_mhz() {
            f.max_clock_mhz = mhz;
            f.extra
                .insert("max_clock_source".into(), "/proc/cpuinfo".into());
        }
    }
    cache_bytes
}

/// Host CPU facts from Linux `/proc` and `/sys` (absent elsewhere).
pub mod host {
    use std::fs;

    /// The highest `cpu MHz` in `/proc/cpuinfo` (or the cpufreq maximum when present).
    pub fn max_mhz() -> Option<u32> {
        let cpufreq = fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(|khz| (khz / 1000) as u32);
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").ok().and_then(|text| {
            text.lines()
                .filter(|l| l.starts_with("cpu MHz"))
                .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
                .map(|v| v.round() as u32)
        });
        match (cpufreq, cpuinfo) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b).filter(|v| *v > 0),
        }
    }

    /// The largest cache of CPU 0, bytes (`/sys/devices/system/cpu/cpu0/cache/index*/size`).
    pub fn largest_cache_bytes() -> Option<u64> {
        let dir = fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
        dir.filter_map(Result::ok)
            .filter_map(|e| fs::read_to_string(e.path().join("size")).ok())
            .filter_map(|s| parse_size(s.trim()))
            .max()
    }

    /// A `/sys` cache size (`32K`, `2M`) in bytes.
    ///
    /// ```
    /// assert_eq!(kf_backend_common::peaks::host::parse_size("2M"), Some(2 << 20));
    /// ```
    pub fn parse_size(s: &str) -> Option<u64> {
        let (num, mult) = match s.chars().last()? {
            'K' => (&s[..s.len() - 1], 1 << 10),
            'M' => (&s[..s.len() - 1], 1 << 20),
            'G' => (&s[..s.len() - 1], 1 << 30),
            _ => (s, 1),
        };
        num.parse::<u64>().ok().map(|n| n * mult)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_are_generous() {
        let mut f = DeviceFacts::unknown("cpu");
        f.kind = DeviceKind::Cpu;
        f.compute_units = 2;
        f.max_clock_mhz = 2600;
        let (gflops, gbs, how) = estimate_peaks(&f, 8);
        // Above the measured 63 GFLOP/s tiled SGEMM on a 2-core machine, by a wide margin.
        assert!(gflops > 300.0, "{gflops}");
        assert!(gbs > 300.0, "{gbs}");
        assert!(how.contains("2 compute units"), "{how}");
        f.kind = DeviceKind::Gpu;
        let (gpu_gflops, _, _) = estimate_peaks(&f, 8);
        assert!(gpu_gflops > gflops);
    }

    #[test]
    fn given_peaks_override_the_estimate() {
        let mut f = DeviceFacts::unknown("gpu");
        set_estimated_peaks(&mut f, 4);
        assert!(f.extra["peak_source"].starts_with("upper-bound"));
        apply_given_peaks(&mut f, Some((1.0, 2.0)));
        assert_eq!(
            (f.peak_gflops, f.peak_bandwidth_gbs),
            (Some(1.0), Some(2.0))
        );
        assert_eq!(f.extra["peak_source"], "given by the embedder");
        assert_eq!(cpu_host_facts(&mut f, 7), 7);
    }
}
