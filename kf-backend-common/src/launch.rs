//! Launch checks every backend makes before handing a launch to its runtime: argument
//! descriptions, work-group geometry, buffer offsets.

use kf_core::KernelArg;

/// A kernel argument in words, for error messages (`buffer at offset 0`, `f32 1.5`);
/// `local_name` names what [`KernelArg::Local`] is in the backend's terms (`local memory`,
/// `dynamic shared memory`).
///
/// ```
/// use kf_core::KernelArg;
/// let arg: KernelArg<'_, ()> = KernelArg::Local(64);
/// assert_eq!(kf_backend_common::launch::describe_arg(&arg, "local memory"), "64 bytes of local memory");
/// ```
pub fn describe_arg<B>(arg: &KernelArg<'_, B>, local_name: &str) -> String {
    match arg {
        KernelArg::Buffer { offset, .. } => format!("buffer at offset {offset}"),
        KernelArg::I32(v) => format!("i32 {v}"),
        KernelArg::U32(v) => format!("u32 {v}"),
        KernelArg::I64(v) => format!("i64 {v}"),
        KernelArg::F32(v) => format!("f32 {v}"),
        KernelArg::Local(v) => format!("{v} bytes of {local_name}"),
    }
}

/// Checks a work-group against the largest total `limit` (`limit_what` says whose limit it
/// is: `the device maximum 1024`) and the largest extent `item_max(d)` of each dimension;
/// the error is the sentence for a "bad launch geometry" message.
///
/// ```
/// use kf_backend_common::launch::check_work_group;
/// assert!(check_work_group(&[16, 16], 256, "the device maximum 256", |_| 256).is_ok());
/// let e = check_work_group(&[32, 16], 256, "the device maximum 256", |_| 256).unwrap_err();
/// assert!(e.contains("512 work-items"));
/// ```
pub fn check_work_group(
    local: &[usize],
    limit: u64,
    limit_what: &str,
    item_max: impl Fn(usize) -> u64,
) -> Result<(), String> {
    let total: usize = local.iter().product();
    if total as u64 > limit {
        return Err(format!(
            "work-group of {total} work-items exceeds {limit_what}"
        ));
    }
    for (d, l) in local.iter().enumerate() {
        let max = item_max(d);
        if *l as u64 > max {
            return Err(format!(
                "work-group extent {l} in dimension {d} exceeds the device maximum {max}"
            ));
        }
    }
    Ok(())
}

/// Checks that argument `index`'s buffer `offset` is a multiple of the device's base address
/// alignment `align` and inside the buffer's `len` bytes.
///
/// ```
/// use kf_backend_common::launch::check_buffer_offset;
/// assert!(check_buffer_offset(0, 128, 128, 1024).is_ok());
/// assert!(check_buffer_offset(0, 64, 128, 1024).is_err());
/// assert!(check_buffer_offset(0, 1024, 128, 1024).is_err());
/// ```
pub fn check_buffer_offset(
    index: usize,
    offset: usize,
    align: usize,
    len: usize,
) -> Result<(), String> {
    if !offset.is_multiple_of(align.max(1)) {
        return Err(format!(
            "argument {index}: buffer offset {offset} is not a multiple of the device's base \
             address alignment ({align} bytes)"
        ));
    }
    if offset >= len {
        return Err(format!(
            "argument {index}: offset {offset} is beyond the buffer's {len} bytes"
        ));
    }
    Ok(())
}

/// Which way a host copy goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDirection {
    /// Host data into a device buffer (`Backend::write`).
    Write,
    /// A device buffer into host memory (`Backend::read`).
    Read,
}

/// Checks a host copy of `len` bytes into or out of a buffer of `buffer_len` bytes: an error
/// when it does not fit, `Ok(false)` when there is nothing to copy, `Ok(true)` otherwise.
///
/// ```
/// use kf_backend_common::launch::{check_copy, CopyDirection};
/// assert_eq!(check_copy(CopyDirection::Write, 4, 8), Ok(true));
/// assert_eq!(check_copy(CopyDirection::Read, 0, 8), Ok(false));
/// assert_eq!(
///     check_copy(CopyDirection::Read, 9, 8),
///     Err("reading 9 bytes from a buffer of 8".to_owned())
/// );
/// ```
pub fn check_copy(direction: CopyDirection, len: usize, buffer_len: usize) -> Result<bool, String> {
    if len > buffer_len {
        return Err(match direction {
            CopyDirection::Write => format!("writing {len} bytes into a buffer of {buffer_len}"),
            CopyDirection::Read => format!("reading {len} bytes from a buffer of {buffer_len}"),
        });
    }
    Ok(len > 0)
}

/// The smallest scratch buffer [`flush_size`] chooses.
pub const MIN_FLUSH_BYTES: u64 = 64 << 20;

/// Default size of the scratch buffer a backend overwrites to flush caches: twice the largest
/// cache in front of global memory, at least [`MIN_FLUSH_BYTES`], at most the largest
/// allocation `max_alloc` (pass `u64::MAX` where there is no such limit).
///
/// ```
/// assert_eq!(kf_backend_common::launch::flush_size(1 << 20, u64::MAX), 64 << 20);
/// assert_eq!(kf_backend_common::launch::flush_size(1 << 30, 1 << 30), 1 << 30);
/// ```
pub fn flush_size(cache_bytes: u64, max_alloc: u64) -> usize {
    let want = cache_bytes.saturating_mul(2).max(MIN_FLUSH_BYTES);
    usize::try_from(want.min(max_alloc.max(1))).unwrap_or(usize::MAX)
}
