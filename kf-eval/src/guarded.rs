//! Device buffers with guard regions around the kernel's view ([`Guarded`]), how they are
//! allocated, filled and read back, and what went wrong in one checked launch ([`Failure`]):
//! shared by the protocol and the checks of a kernel sequence.

use std::time::Instant;

use kf_core::{Backend, BackendError, BackendErrorKind, CorrectnessReport, Status};

use crate::error::EvalError;
use crate::profile::charge_transfer;
use crate::verify::GUARD_BYTE;

/// A buffer with guard regions before and after the kernel's view.
pub(crate) struct Guarded<B> {
    pub(crate) buffer: B,
    pub(crate) guard: usize,
    pub(crate) bytes: usize,
}

/// What went wrong in one checked launch.
pub(crate) struct Failure {
    pub(crate) status: Status,
    pub(crate) message: String,
    pub(crate) report: Option<CorrectnessReport>,
}

impl Failure {
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
            report: None,
        }
    }
}

impl From<EvalError> for Failure {
    fn from(e: EvalError) -> Self {
        Failure::new(Status::RuntimeError, e.to_string())
    }
}

pub(crate) fn backend_failure<E: BackendError>(e: &E, what: &str) -> Failure {
    let status = match e.kind() {
        BackendErrorKind::Compile => Status::CompileError,
        _ => Status::RuntimeError,
    };
    let mut message = format!("{what}: {e}");
    if let Some(log) = e.build_log() {
        if !log.trim().is_empty() && !message.contains(log.trim()) {
            message.push_str("\nbuild log:\n");
            message.push_str(log.trim());
        }
    }
    Failure::new(status, message)
}

pub(crate) fn alloc_guarded<B: Backend>(
    backend: &B,
    bytes: usize,
) -> Result<Guarded<B::Buffer>, EvalError> {
    let align = backend.buffer_alignment().max(1);
    let guard = 4096usize.div_ceil(align) * align;
    let buffer = backend
        .alloc(guard + bytes + guard)
        .map_err(|e| EvalError::Backend(format!("allocating {bytes} bytes: {e}")))?;
    Ok(Guarded {
        buffer,
        guard,
        bytes,
    })
}

pub(crate) fn fill<B: Backend>(
    backend: &B,
    g: &mut Guarded<B::Buffer>,
    payload: &[u8],
) -> Result<(), EvalError> {
    let mut bytes = vec![GUARD_BYTE; g.guard + g.bytes + g.guard];
    let n = payload.len().min(g.bytes);
    bytes[g.guard..g.guard + n].copy_from_slice(&payload[..n]);
    let started = Instant::now();
    let written = backend
        .write(&mut g.buffer, &bytes)
        .map_err(|e| EvalError::Backend(format!("writing a buffer: {e}")));
    charge_transfer(started);
    written
}

pub(crate) fn read<B: Backend>(backend: &B, g: &Guarded<B::Buffer>) -> Result<Vec<u8>, EvalError> {
    let mut out = vec![0u8; g.guard + g.bytes + g.guard];
    let started = Instant::now();
    let result = backend.read(&g.buffer, &mut out);
    charge_transfer(started);
    result.map_err(|e| EvalError::Backend(format!("reading a buffer: {e}")))?;
    Ok(out)
}
