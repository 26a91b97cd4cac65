//! The OpenCL [`Device`]: listing the platforms' devices, picking one (`KF_OPENCL_DEVICE`,
//! else GPU > accelerator > CPU, PoCL last), its facts (the expression symbols
//! KernelFoundry's OpenCL backend gives), and building, uploading, launching, reading back.

use std::fmt;
use std::path::Path;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{
    Device as ClDevice, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU,
    CL_DEVICE_TYPE_GPU,
};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_device_id, CL_BLOCKING};

use super::configuration::{Arg, Configuration, Geometry};
use super::discovery::prepare_runtime;
use super::error::{cl_error, Error};
use super::signature::array;
use super::symbols::DeviceFacts;

/// An OpenCL device with its context and queue: what the generated functions run on.
pub struct Device {
    facts: DeviceFacts,
    context: Context,
    queue: CommandQueue,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("facts", &self.facts)
            .finish()
    }
}

/// The variable that picks the device: `cpu`, `gpu`, `accelerator`, `P:D` (platform and
/// device index) or a part of the device's or platform's name.
pub const KF_OPENCL_DEVICE: &str = "KF_OPENCL_DEVICE";

/// The sentence every "no runtime" error ends with.
const HOW_TO_GET_A_RUNTIME: &str = "To get an OpenCL runtime: run `kf setup` (Intel CPU \
OpenCL runtime into the per-user folder, no root needed), or install PoCL (sudo apt-get \
install pocl-opencl-icd ocl-icd-libopencl1), or set KF_OPENCL_ICD to an OpenCL driver \
library, an .icd file, or an opencl.json.";

pub(crate) struct Listed {
    platform_index: usize,
    device_index: usize,
    platform: String,
    device: ClDevice,
    name: String,
    kind: u8,
}

impl Device {
    /// Opens the OpenCL device: finds the runtime (see the module docs), lists the devices and
    /// picks one (`KF_OPENCL_DEVICE`, else a GPU, an accelerator, then a CPU; PoCL last).
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when there is no OpenCL runtime, no device, or none matching
    /// `KF_OPENCL_DEVICE`; [`Error::OpenCl`] when the context or queue cannot be created.
    pub fn open() -> Result<Device, Error> {
        let how = prepare_runtime();
        let listed = list_devices(how)?;
        let wanted = std::env::var(KF_OPENCL_DEVICE).unwrap_or_default();
        let Some(chosen) = select(&listed, &wanted) else {
            let names: Vec<String> = listed
                .iter()
                .map(|d| format!("{}:{} {}", d.platform_index, d.device_index, d.name))
                .collect();
            return Err(Error::Unavailable {
                message: format!(
                    "no device matches {KF_OPENCL_DEVICE}={wanted}; there are {}",
                    names.join(", ")
                ),
            });
        };
        let facts = facts_of(chosen);
        let context = Context::from_device(&chosen.device)
            .map_err(cl_error(format!("creating a context on {}", chosen.name)))?;
        let queue = CommandQueue::create_default_with_properties(&context, 0, 0)
            .map_err(cl_error("creating a command queue"))?;
        Ok(Device {
            facts,
            context,
            queue,
        })
    }

    /// The device's facts (the dispatch's and the manifests' view of it).
    pub fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.facts.name
    }

    pub(super) fn build(&self, c: &Configuration) -> Result<Kernel, Error> {
        let program =
            Program::create_and_build_from_source(&self.context, c.source, c.build_options)
                .map_err(|log| Error::Compile {
                    configuration: c.name.to_owned(),
                    log,
                })?;
        Kernel::create(&program, c.entry).map_err(cl_error(format!(
            "{}: creating the kernel `{}`",
            c.name, c.entry
        )))
    }

    pub(super) fn upload(&self, bytes: &[u8]) -> Result<Buffer<u8>, Error> {
        // SAFETY: no host pointer is given; the buffer is at least one byte.
        let mut buffer = unsafe {
            Buffer::<u8>::create(
                &self.context,
                CL_MEM_READ_WRITE,
                bytes.len().max(1),
                std::ptr::null_mut(),
            )
        }
        .map_err(cl_error("allocating a buffer"))?;
        if !bytes.is_empty() {
            // SAFETY: a blocking write of `bytes.len()` bytes into a buffer at least that long.
            unsafe {
                self.queue
                    .enqueue_write_buffer(&mut buffer, CL_BLOCKING, 0, bytes, &[])
            }
            .map_err(cl_error("writing a buffer"))?;
        }
        Ok(buffer)
    }

    pub(super) fn download(&self, buffer: &Buffer<u8>, out: &mut [u8]) -> Result<(), Error> {
        if out.is_empty() {
            return Ok(());
        }
        // SAFETY: a blocking read of `out.len()` bytes from a buffer allocated that long.
        unsafe {
            self.queue
                .enqueue_read_buffer(buffer, CL_BLOCKING, 0, out, &[])
        }
        .map_err(cl_error("reading a buffer"))?;
        Ok(())
    }

    pub(super) fn run(
        &self,
        kernel: &Kernel,
        args: &[Arg],
        buffers: &[Buffer<u8>],
        geometry: &Geometry,
    ) -> Result<(), Error> {
        let mut exec = ExecuteKernel::new(kernel);
        for a in args {
            // SAFETY: the arguments follow the task's signature, which the kernel was
            // searched and checked with: `int`, `float` and global buffers, in order.
            unsafe {
                match a {
                    Arg::I32(v) => exec.set_arg(v),
                    Arg::F32(v) => exec.set_arg(v),
                    Arg::Buffer(i) => match buffers.get(*i) {
                        Some(b) => exec.set_arg(b),
                        None => {
                            return Err(cl_error("setting a buffer argument")(
                                opencl3::error_codes::ClError(-51),
                            ))
                        }
                    },
                };
            }
        }
        exec.set_global_work_sizes(&geometry.global);
        if let Some(local) = &geometry.local {
            exec.set_local_work_sizes(local);
        }
        // SAFETY: every argument is set; the buffers live until after `finish`.
        unsafe { exec.enqueue_nd_range(&self.queue) }.map_err(cl_error("launching the kernel"))?;
        self.queue
            .finish()
            .map_err(cl_error("waiting for the kernel"))
    }
}

fn list_devices(how: &str) -> Result<Vec<Listed>, Error> {
    let platforms = get_platforms().map_err(|e| Error::Unavailable {
        message: format!(
            "clGetPlatformIDs failed with {} using {how}. {HOW_TO_GET_A_RUNTIME}",
            e.0
        ),
    })?;
    let mut out = Vec::new();
    for (pi, platform) in platforms.iter().enumerate() {
        let pname = platform.name().unwrap_or_default().trim().to_owned();
        // A platform without devices answers CL_DEVICE_NOT_FOUND: skip it.
        let Ok(ids) = platform.get_devices(CL_DEVICE_TYPE_ALL) else {
            continue;
        };
        for (di, id) in ids.into_iter().enumerate() {
            let device = ClDevice::new(id as cl_device_id);
            let t = device.dev_type().unwrap_or(0);
            let kind = if t & CL_DEVICE_TYPE_GPU != 0 {
                0
            } else if t & CL_DEVICE_TYPE_ACCELERATOR != 0 {
                1
            } else if t & CL_DEVICE_TYPE_CPU != 0 {
                2
            } else {
                3
            };
            out.push(Listed {
                platform_index: pi,
                device_index: di,
                platform: pname.clone(),
                name: device.name().unwrap_or_default().trim().to_owned(),
                device,
                kind,
            });
        }
    }
    if out.is_empty() {
        return Err(Error::Unavailable {
            message: format!(
                "OpenCL loaded ({how}) but no platform offers a device. {HOW_TO_GET_A_RUNTIME}"
            ),
        });
    }
    Ok(out)
}

// Used by kf-export's tests only (an exported crate's unit tests do not call it).
#[cfg(test)]
#[allow(dead_code)]
impl Listed {
    /// A listed device that is never called into (for the selection's tests).
    pub(crate) fn fake(platform: (usize, &str), device: (usize, &str), kind: u8) -> Self {
        Listed {
            platform_index: platform.0,
            device_index: device.0,
            platform: platform.1.to_owned(),
            device: ClDevice::new(std::ptr::null_mut()),
            name: device.1.to_owned(),
            kind,
        }
    }

    /// `P:D`.
    pub(crate) fn index(&self) -> String {
        format!("{}:{}", self.platform_index, self.device_index)
    }
}

/// KernelFoundry's device selection: `wanted` as `KF_OPENCL_DEVICE` gives it.
pub(crate) fn select<'a>(listed: &'a [Listed], wanted: &str) -> Option<&'a Listed> {
    let best = |it: &mut dyn Iterator<Item = &'a Listed>| {
        // PoCL last; then GPU, accelerator, CPU; listing order breaks ties.
        it.min_by_key(|d| {
            (
                u8::from(d.platform.contains("Portable Computing Language")),
                d.kind,
            )
        })
    };
    let w = wanted.trim().to_lowercase();
    let kind = match w.as_str() {
        "" | "auto" | "default" => return best(&mut listed.iter()),
        "gpu" => Some(0),
        "accelerator" | "acc" => Some(1),
        "cpu" => Some(2),
        _ => None,
    };
    if let Some(k) = kind {
        return best(&mut listed.iter().filter(|d| d.kind == k));
    }
    if let Some((p, d)) = w.split_once(':') {
        if let (Ok(p), Ok(d)) = (p.trim().parse::<usize>(), d.trim().parse::<usize>()) {
            return listed
                .iter()
                .find(|x| x.platform_index == p && x.device_index == d);
        }
    }
    best(&mut listed.iter().filter(|d| d.name.to_lowercase() == w)).or_else(|| {
        best(&mut listed.iter().filter(|d| {
            d.name.to_lowercase().contains(&w) || d.platform.to_lowercase().contains(&w)
        }))
    })
}

fn facts_of(listed: &Listed) -> DeviceFacts {
    let d = &listed.device;
    let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let global_cache = d.global_mem_cache_size().unwrap_or(0);
    let (mut l1, mut l2, mut l3) = (0, 0, 0);
    if listed.kind == 2 {
        (l1, l2, l3) = cpu_caches(Path::new("/sys/devices/system/cpu/cpu0/cache"));
    } else if listed.kind == 0 {
        l2 = global_cache;
    }
    let items = d.max_work_item_sizes().unwrap_or_default();
    let item = |i: usize| clamp(items.get(i).map_or(1, |v| *v as u64));
    let sub_group = sub_group_size(d);
    let mut mhz = d.max_clock_frequency().unwrap_or(0);
    if mhz == 0 && listed.kind == 2 {
        mhz = host_max_mhz();
    }
    let symbols = vec![
        (
            "compute_units",
            i64::from(d.max_compute_units().unwrap_or(1).max(1)),
        ),
        (
            "max_work_group_size",
            clamp(d.max_work_group_size().unwrap_or(1).max(1) as u64),
        ),
        ("local_mem_bytes", clamp(d.local_mem_size().unwrap_or(0))),
        ("local_mem_size", clamp(d.local_mem_size().unwrap_or(0))),
        ("global_mem_bytes", clamp(d.global_mem_size().unwrap_or(0))),
        ("max_clock_mhz", i64::from(mhz)),
        (
            "preferred_vector_width",
            i64::from(d.max_preferred_vector_width_float().unwrap_or(1).max(1)),
        ),
        ("sub_group_size", sub_group),
        ("global_mem_cache_bytes", clamp(global_cache)),
        ("l1_cache_bytes", clamp(l1)),
        ("l2_cache_bytes", clamp(l2)),
        ("l3_cache_bytes", clamp(l3)),
        ("max_work_item_size_0", item(0)),
        ("max_work_item_size_1", item(1)),
        ("max_work_item_size_2", item(2)),
    ];
    DeviceFacts {
        name: listed.name.clone(),
        driver_version: d.driver_version().unwrap_or_default().trim().to_owned(),
        platform: listed.platform.clone(),
        symbols,
    }
}

/// The largest of `CL_DEVICE_SUB_GROUP_SIZES_INTEL`, else 1.
fn sub_group_size(d: &ClDevice) -> i64 {
    let Ok(bytes) = d.get_data(0x4108) else {
        return 1;
    };
    bytes
        .chunks_exact(std::mem::size_of::<usize>())
        .map(|c| usize::from_ne_bytes(array(c)))
        .filter_map(|s| i64::try_from(s).ok())
        .max()
        .unwrap_or(1)
        .max(1)
}

/// The host CPU's highest clock in MHz: the larger of the cpufreq maximum and the highest
/// `cpu MHz` of `/proc/cpuinfo` (0 where neither is known).
fn host_max_mhz() -> u32 {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpufreq = read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
        .trim()
        .parse::<u64>()
        .map_or(0, |khz| u32::try_from(khz / 1000).unwrap_or(0));
    let cpuinfo = read("/proc/cpuinfo")
        .lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .fold(0.0f64, f64::max)
        .round() as u32;
    cpufreq.max(cpuinfo)
}

/// The host CPU's L1 (data or unified), L2 and L3 sizes in bytes from Linux sysfs (0 where
/// unknown).
fn cpu_caches(dir: &Path) -> (u64, u64, u64) {
    let mut out = (0, 0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        if !entry.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        let read = |n: &str| std::fs::read_to_string(entry.path().join(n)).unwrap_or_default();
        if read("type").trim() == "Instruction" {
            continue;
        }
        let size = read("size");
        let size = size.trim();
        let (digits, unit) = size.split_at(
            size.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(size.len()),
        );
        let Ok(n) = digits.parse::<u64>() else {
            continue;
        };
        let bytes = match unit.trim() {
            "K" | "KB" => n << 10,
            "M" | "MB" => n << 20,
            "G" | "GB" => n << 30,
            _ => n,
        };
        let slot = match read("level").trim() {
            "1" => &mut out.0,
            "2" => &mut out.1,
            "3" => &mut out.2,
            _ => continue,
        };
        *slot = (*slot).max(bytes);
    }
    out
}
