//! Launch checks every backend makes before handing a launch to its runtime: argument
//! descriptions, work-group geometry, buffer offsets. A check that fails says why in a
//! [`LaunchCheckError`], whose message is the sentence for the backend's error.

use std::fmt;

use kf_core::KernelArg;

/// Why a launch check failed: a work-group too large, a bad buffer offset, a copy that does
/// not fit. Its message is the sentence a backend puts in its "bad launch geometry" or
/// "invalid argument" error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchCheckError {
    /// The work-group has more work-items than `limit` allows.
    WorkGroupTooLarge {
        /// Work-items in the work-group.
        total: usize,
        /// Whose limit it is, with the number (`the device maximum 1024`).
        limit_what: String,
    },
    /// One dimension of the work-group is longer than the device allows.
    WorkGroupExtent {
        /// The dimension.
        dimension: usize,
        /// Its extent.
        extent: usize,
        /// The device's largest extent in that dimension.
        max: u64,
    },
    /// A buffer offset is not a multiple of the device's base address alignment.
    MisalignedOffset {
        /// The argument's index.
        index: usize,
        /// The offset in bytes.
        offset: usize,
        /// The alignment in bytes.
        align: usize,
    },
    /// A buffer offset at or beyond the buffer's end.
    OffsetBeyondBuffer {
        /// The argument's index.
        index: usize,
        /// The offset in bytes.
        offset: usize,
        /// The buffer's length in bytes.
        len: usize,
    },
    /// A host copy larger than the buffer.
    CopyTooLarge {
        /// Which way the copy goes.
        direction: CopyDirection,
        /// Bytes to copy.
        len: usize,
        /// The buffer's length in bytes.
        buffer_len: usize,
    },
}

impl fmt::Display for LaunchCheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchCheckError::WorkGroupTooLarge { total, limit_what } => {
                write!(f, "work-group of {total} work-items exceeds {limit_what}")
            }
            LaunchCheckError::WorkGroupExtent {
                dimension,
                extent,
                max,
            } => write!(
                f,
                "work-group extent {extent} in dimension {dimension} exceeds the device maximum {max}"
            ),
            LaunchCheckError::MisalignedOffset {
                index,
                offset,
                align,
            } => write!(
                f,
                "argument {index}: buffer offset {offset} is not a multiple of the device's base \
                 address alignment ({align} bytes)"
            ),
            LaunchCheckError::OffsetBeyondBuffer { index, offset, len } => write!(
                f,
                "argument {index}: offset {offset} is beyond the buffer's {len} bytes"
            ),
            LaunchCheckError::CopyTooLarge {
                direction: CopyDirection::Write,
                len,
                buffer_len,
            } => write!(f, "writing {len} bytes into a buffer of {buffer_len}"),
            LaunchCheckError::CopyTooLarge {
                direction: CopyDirection::Read,
                len,
                buffer_len,
            } => write!(f, "reading {len} bytes from a buffer of {buffer_len}"),
        }
    }
}

impl std::error::Error for LaunchCheckError {}

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
/// the error's message is the sentence for a "bad launch geometry" message.
///
/// ```
/// use kf_backend_common::launch::check_work_group;
/// assert!(check_work_group(&[16, 16], 256, "the device maximum 256", |_| 256).is_ok());
/// let e = check_work_group(&[32, 16], 256, "the device maximum 256", |_| 256).unwrap_err();
/// assert!(e.to_string().contains("512 work-items"));
/// ```
pub fn check_work_group(
    local: &[usize],
    limit: u64,
    limit_what: &str,
    item_max: impl Fn(usize) -> u64,
) -> Result<(), LaunchCheckError> {
    let total: usize = local.iter().product();
    if total as u64 > limit {
        return Err(LaunchCheckError::WorkGroupTooLarge {
            total,
            limit_what: limit_what.to_owned(),
        });
    }
    for (d, l) in local.iter().enumerate() {
        let max = item_max(d);
        if *l as u64 > max {
            return Err(LaunchCheckError::WorkGroupExtent {
                dimension: d,
                extent: *l,
                max,
            });
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
) -> Result<(), LaunchCheckError> {
    if !offset.is_multiple_of(align.max(1)) {
        return Err(LaunchCheckError::MisalignedOffset {
            index,
            offset,
            align,
        });
    }
    if offset >= len {
        return Err(LaunchCheckError::OffsetBeyondBuffer { index, offset, len });
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
///     check_copy(CopyDirection::Read, 9, 8).unwrap_err().to_string(),
///     "reading 9 bytes from a buffer of 8"
/// );
/// ```
pub fn check_copy(
    direction: CopyDirection,
    len: usize,
    buffer_len: usize,
) -> Result<bool, LaunchCheckError> {
    if len > buffer_len {
        return Err(LaunchCheckError::CopyTooLarge {
            direction,
            len,
            buffer_len,
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
