//! Launches: work-group checks and defaults, argument marshalling, timed submission.

use super::*;

/// A work-group shape for a range launched without one: in each dimension (the fastest, i.e.
/// the last, first) the largest divisor of the global size that fits what is left of a
/// budget of at most 256 work-items.
pub(super) fn choose_local(
    global: &[usize],
    limit: u64,
    item: impl Fn(usize) -> u64,
) -> Vec<usize> {
    let mut budget = usize::try_from(limit.clamp(1, 256)).unwrap_or(1);
    let mut local = vec![1; global.len()];
    for d in (0..global.len()).rev() {
        let cap = budget
            .min(usize::try_from(item(d)).unwrap_or(usize::MAX))
            .max(1);
        let l = (1..=cap.min(global[d]))
            .rev()
            .find(|l| global[d].is_multiple_of(*l))
            .unwrap_or(1);
        local[d] = l;
        budget = (budget / l).max(1);
    }
    local
}

pub(super) fn launch_error(failure: Failure) -> SyclError {
    if failure.code == KFS_RESOURCES {
        SyclError::Resources {
            operation: "launching the kernel",
            message: failure.message,
        }
    } else {
        SyclError::Launch {
            message: failure.message,
        }
    }
}

impl SyclBackend {
    pub(super) fn launch_kernel(
        &self,
        kernel: &SyclKernel,
        args: &[KernelArg<'_, SyclBuffer>],
        range: &NdRange,
    ) -> Result<LaunchTiming, SyclError> {
        let bad = |message: String| SyclError::Launch {
            message: format!("bad launch geometry {range}: {message}"),
        };
        range.check().map_err(|e| bad(e.to_string()))?;
        let dims = range.global.len();
        let k = &kernel.inner;
        let limit = k
            .max_work_group_size
            .map_or(self.facts.max_work_group_size, |m| {
                m.min(self.facts.max_work_group_size)
            })
            .max(1);
        let local = match &range.local {
            Some(local) => {
                check_work_group(
                    local,
                    limit,
                    &format!("the maximum {limit} for this kernel on this device"),
                    |d| self.limits.item_size(dims, d),
                )
                .map_err(|e| bad(e.to_string()))?;
                local.clone()
            }
            None => choose_local(&range.global, limit, |d| self.limits.item_size(dims, d)),
        };

        let mut raw = Vec::with_capacity(args.len());
        let mut locals = 0usize;
        let mut local_bytes = 0usize;
        for (i, arg) in args.iter().enumerate() {
            raw.push(match arg {
                KernelArg::Buffer { buffer, offset } => {
                    if !Arc::ptr_eq(&buffer.queue, &self.queue) {
                        return Err(SyclError::InvalidArgument(format!(
                            "argument {i}: the buffer belongs to another SYCL backend"
                        )));
                    }
                    check_buffer_offset(i, *offset, self.limits.base_align, buffer.len)
                        .map_err(|e| SyclError::InvalidArgument(e.to_string()))?;
                    RawArg::new(ArgKind::Ptr, (buffer.ptr as usize + offset) as u64)
                }
                KernelArg::I32(v) => RawArg::new(ArgKind::I32, u64::from(*v as u32)),
                KernelArg::U32(v) => RawArg::new(ArgKind::U32, u64::from(*v)),
                KernelArg::I64(v) => RawArg::new(ArgKind::I64, *v as u64),
                KernelArg::F32(v) => RawArg::new(ArgKind::F32, u64::from(v.to_bits())),
                KernelArg::Local(bytes) => {
                    if *bytes == 0 {
                        return Err(SyclError::InvalidArgument(format!(
                            "argument {i}: zero bytes of local memory"
                        )));
                    }
                    locals += 1;
                    local_bytes += bytes;
                    RawArg::new(ArgKind::Local, *bytes as u64)
                }
            });
        }
        if local_bytes as u64 > self.facts.local_mem_bytes && self.facts.local_mem_bytes > 0 {
            return Err(SyclError::Launch {
                message: format!(
                    "{local_bytes} bytes of local memory requested, the device has {}",
                    self.facts.local_mem_bytes
                ),
            });
        }
        if let Some(n) = k.num_args {
            let counted = args.len() - locals + ARGS_PER_LOCAL_ACCESSOR * locals;
            if counted != n as usize {
                return Err(SyclError::Launch {
                    message: format!(
                        "`{}` takes {n} arguments as the SYCL runtime counts them (a \
                         local_accessor counts {ARGS_PER_LOCAL_ACCESSOR}); {} given ({counted} \
                         counted)",
                        k.entry,
                        args.len()
                    ),
                });
            }
        }
        // SAFETY: pointer arguments are live USM allocations of this queue (checked above:
        // same queue, offsets inside the buffer), borrowed for the whole blocking call.
        let ns = unsafe { self.queue.launch(&k.program, &raw, &range.global, &local) }
            .map_err(launch_error)?;
        Ok(LaunchTiming {
            device_seconds: ns as f64 * 1e-9,
        })
    }
}
