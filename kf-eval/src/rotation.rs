//! How the evaluator rotates copies of a task's buffers across timed launches: shared by the
//! protocol, which times candidates that way, and the device characterisation, which times its
//! copy kernel the same way so that a roofline is what a candidate can reach.

/// Copies of a task's buffers rotated across trials unless configured otherwise (the timing
/// configuration's `rotation`).
pub(crate) const DEFAULT_ROTATION: usize = 3;

/// The most bytes the rotated copies of a task's buffers may take together; a larger task is
/// timed on one copy.
pub(crate) const ROTATION_LIMIT_BYTES: usize = 512 << 20;

/// How many copies of its buffers a task of `bytes_per_copy` is timed over with `rotation`
/// configured: each trial reads the inputs of the next copy, so a trial finds in cache only
/// what fits beside the other copies.
pub(crate) fn rotation_copies(bytes_per_copy: usize, rotation: usize) -> usize {
    if bytes_per_copy.saturating_mul(rotation) <= ROTATION_LIMIT_BYTES {
        rotation.max(1)
    } else {
        1
    }
}
